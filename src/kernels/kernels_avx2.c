/* kernels_avx2.c — AVX2+FMA twins of the scalar kernels (kernels.c), same bits.
 *
 * The 16 canonical lanes are two ymm registers (lanes 0-7, 8-15); every multiply-add is
 * one vfmadd (fused, like fmaf); the fold is the same tree (8, 4, 2, 1). Tails (n % 16)
 * spill the lanes to memory and finish with scalar fmaf, exactly as the reference does.
 * The prefill (T > 1) is the blocked GEMM of kernels_avx2_gemm.c, which decodes MXFP4
 * from nibbles: pshufb of a signed-int8 table of doubled E2M1 values (low nibbles =
 * lanes' first FMA, high nibbles = second; see kernels.h), sign-extend, convert (exact),
 * multiply by 2^(s-128) (exact: the same real number as e2m1 * 2^(s-127), so the same
 * float). A zero weight comes out as +0 where the reference has -0 for nibble 8; with
 * finite x the accumulators cannot tell. The matvec (T = 1) here decodes instead from
 * per-scale tables of the products' two bf16 bytes (pshufb, then unpacks; mv_mxb below):
 * no convert or multiply, the reference's very product bits.
 * Compiled with -mavx2 -mfma (Makefile); elsewhere this file is empty of code. */
#include "kernels.h"
#include "kernels_avx2.h"
#include "codec.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <string.h>

#define INL static inline __attribute__((always_inline))

static float fold_arr(float acc[16]) {
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static float dot_avx2(const float *a, const float *b, int n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), a1);
    }
    if (i == n) return k3_avx2_fold2(a0, a1);
    float acc[16];
    _mm256_storeu_ps(acc, a0); _mm256_storeu_ps(acc + 8, a1);
    for (int j = 0; i < n; i++, j++) acc[j] = __builtin_fmaf(a[i], b[i], acc[j]);
    return fold_arr(acc);
}

static float sum_avx2(const float *a, int n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(a + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(a + i + 8));
    }
    float acc[16];
    _mm256_storeu_ps(acc, a0); _mm256_storeu_ps(acc + 8, a1);
    for (int j = 0; i < n; i++, j++) acc[j] += a[i];
    return fold_arr(acc);
}

static void axpy_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = __builtin_fmaf(a, x[i], y[i]);
}

/* k3_dots: 4 rows at a time, each its two accumulators in dot_avx2's order. */
static void dots_avx2(float *out, const float *q, const float *K, size_t ks, int nk, int n) {
    int j = 0;
    for (; n % 16 == 0 && j + 4 <= nk; j += 4) {
        const float *k = K + (size_t)j * ks;
        __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0,
               b3 = a0;
        for (int i = 0; i < n; i += 16) {
            const __m256 x = _mm256_loadu_ps(q + i), z = _mm256_loadu_ps(q + i + 8);
            a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + i), a0);
            b0 = _mm256_fmadd_ps(z, _mm256_loadu_ps(k + i + 8), b0);
            a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + ks + i), a1);
            b1 = _mm256_fmadd_ps(z, _mm256_loadu_ps(k + ks + i + 8), b1);
            a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + 2 * ks + i), a2);
            b2 = _mm256_fmadd_ps(z, _mm256_loadu_ps(k + 2 * ks + i + 8), b2);
            a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + 3 * ks + i), a3);
            b3 = _mm256_fmadd_ps(z, _mm256_loadu_ps(k + 3 * ks + i + 8), b3);
        }
        out[j] = k3_avx2_fold2(a0, b0); out[j + 1] = k3_avx2_fold2(a1, b1);
        out[j + 2] = k3_avx2_fold2(a2, b2); out[j + 3] = k3_avx2_fold2(a3, b3);
    }
    for (; j < nk; j++) out[j] = dot_avx2(q, K + (size_t)j * ks, n);
}

/* k3_axpys: 64 elements of y held in 8 registers while every row adds to them in order. */
static void axpys_avx2(float *y, const float *a, const float *K, size_t ks, int nk, int n) {
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256 y0 = _mm256_loadu_ps(y + i), y1 = _mm256_loadu_ps(y + i + 8),
               y2 = _mm256_loadu_ps(y + i + 16), y3 = _mm256_loadu_ps(y + i + 24),
               y4 = _mm256_loadu_ps(y + i + 32), y5 = _mm256_loadu_ps(y + i + 40),
               y6 = _mm256_loadu_ps(y + i + 48), y7 = _mm256_loadu_ps(y + i + 56);
        for (int j = 0; j < nk; j++) {
            const float *k = K + (size_t)j * ks + i;
            const __m256 b = _mm256_set1_ps(a[j]);
            y0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k), y0);
            y1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 8), y1);
            y2 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 16), y2);
            y3 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 24), y3);
            y4 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 32), y4);
            y5 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 40), y5);
            y6 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 48), y6);
            y7 = _mm256_fmadd_ps(b, _mm256_loadu_ps(k + 56), y7);
        }
        _mm256_storeu_ps(y + i, y0); _mm256_storeu_ps(y + i + 8, y1);
        _mm256_storeu_ps(y + i + 16, y2); _mm256_storeu_ps(y + i + 24, y3);
        _mm256_storeu_ps(y + i + 32, y4); _mm256_storeu_ps(y + i + 40, y5);
        _mm256_storeu_ps(y + i + 48, y6); _mm256_storeu_ps(y + i + 56, y7);
    }
    if (i < n)
        for (int j = 0; j < nk; j++) axpy_avx2(y + i, a[j], K + (size_t)j * ks + i, n - i);
}

static void kda_step_avx2(float *S, const float *q, const float *k, const float *v,
                          const float *alpha, float beta, float *o, int D) {
    float u[D], d[D];
    int D8 = D & ~7;
    for (int j = 0; j < D; j++) u[j] = 0.0f;
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        __m256 al = _mm256_set1_ps(alpha[i]), ki = _mm256_set1_ps(k[i]);
        int j = 0;
        for (; j < D8; j += 8) {
            __m256 s = _mm256_mul_ps(_mm256_loadu_ps(Si + j), al);
            _mm256_storeu_ps(Si + j, s);
            _mm256_storeu_ps(u + j, _mm256_fmadd_ps(s, ki, _mm256_loadu_ps(u + j)));
        }
        for (; j < D; j++) { Si[j] *= alpha[i]; u[j] = __builtin_fmaf(Si[j], k[i], u[j]); }
    }
    for (int j = 0; j < D; j++) { d[j] = beta * (v[j] - u[j]); o[j] = 0.0f; }
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        int j = 0;
        for (; j < D8; j += 8) {
            __m256 s = _mm256_fmadd_ps(ki, _mm256_loadu_ps(d + j), _mm256_loadu_ps(Si + j));
            _mm256_storeu_ps(Si + j, s);
            _mm256_storeu_ps(o + j, _mm256_fmadd_ps(s, qi, _mm256_loadu_ps(o + j)));
        }
        for (; j < D; j++) {
            Si[j] = __builtin_fmaf(k[i], d[j], Si[j]); o[j] = __builtin_fmaf(Si[j], q[i], o[j]);
        }
    }
}

/* ---- matvec (T = 1): R rows a pass; the prefill is kernels_avx2_gemm.c */
#define PF 1024   /* matvec prefetch distance in bytes on each weight row stream */
typedef struct {
    int type, cols;
    const float *wf; const uint16_t *wb; const uint8_t *wp, *ws;
} M;

INL __m256 ld_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* x[c + 16h + 2l] (even) and x[c + 16h + 2l + 1] (odd) for l = 0..7 */
INL void x_eo(const float *x, __m256 *e, __m256 *o) {
    __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 8);
    *e = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    *o = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

INL float tail_finish(const M *m, int r, const float *x, int c0, __m256 a0, __m256 a1) {
    float acc[16];
    _mm256_storeu_ps(acc, a0); _mm256_storeu_ps(acc + 8, a1);
    size_t ro = (size_t)r * m->cols;
    for (int c = c0, j = 0; c < m->cols; c++, j++) {
        float w = m->type == K3_W_F32 ? m->wf[ro + c] : k3_bf16_to_f32(m->wb[ro + c]);
        acc[j] = __builtin_fmaf(w, x[c], acc[j]);
    }
    return fold_arr(acc);
}

/* The F32 / BF16 matvec of R rows (R <= 4: they share each x load), 16 columns a step as
 * two halves (lanes 0-7, 8-15), each lane's FMAs the reference's; a tail of cols % 16
 * finishes as the reference does. type is a constant at each call (one copy a type). */
INL void mv_rows(const M *m, int type, int R, float *y, const float *x, int r) {
    const int cols = m->cols, n16 = cols & ~15;
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    /* BF16: the next R rows as one linear stream into L2, R * 32 bytes a step (past the
     * last rows: a prefetch never faults). 1.07-1.10x at 1 thread from memory on Zen 5,
     * 1.00-1.04x at 2 (docs/KERNELS_LOG.md); the AVX-512 kernel's 8 rows measured
     * 0.86-0.90x */
    const char *nx = (const char *)(m->wb + (size_t)(r + R) * cols);
    for (int c = 0; c < n16; c += 16) {
        if (type == K3_W_BF16)
#pragma GCC unroll 4
            for (int l = 0; l < R / 2; l++)
                _mm_prefetch(nx + (size_t)c * R * 2 + 64 * l, _MM_HINT_T1);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256 w[4];
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                size_t o = (size_t)(r + i) * cols + c + 8 * h;
                if (h == 0 || type == K3_W_F32)                 /* the row streams, to L1 */
                    _mm_prefetch((const char *)(type == K3_W_F32 ? (const void *)(m->wf + o)
                                                                 : (const void *)(m->wb + o)) + PF,
                                 _MM_HINT_T0);
                w[i] = type == K3_W_F32 ? _mm256_loadu_ps(m->wf + o) : ld_bf16(m->wb + o);
            }
            __m256 xv = _mm256_loadu_ps(x + c + 8 * h);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) acc[i][h] = _mm256_fmadd_ps(w[i], xv, acc[i][h]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
        y[r + i] = n16 == cols ? k3_avx2_fold2(acc[i][0], acc[i][1])
                               : tail_finish(m, r + i, x, n16, acc[i][0], acc[i][1]);
}

/* rows [r0, r1): 4 at a time, the rest one by one */
INL void mv_span(const M *m, int type, float *y, const float *x, int r0, int r1) {
    for (int r = r0; r < r1;) {
        if (r1 - r >= 4) { mv_rows(m, type, 4, y, x, r); r += 4; }
        else { mv_rows(m, type, 1, y, x, r); r += 1; }
    }
}

/* MXFP4 matvec by bf16 bytes: every product e2m1[n] * 2^(s-127) has its low 16 bits zero
 * (checked at start-up), so it is a bf16 word; mxb[s] holds its low bytes (lanes 0-15) and
 * high bytes (16-31) for n = 0..15, each twice (both 128-bit lanes). Per 32-block: one
 * register of nibble indices (mx_nib), two pshufb (the low and the high bytes of all 32
 * products), a byte unpack into bf16 words and a word unpack under zero into fp32: no
 * convert and no multiply (the scale is in the table). The unpacks are per 128-bit lane, so
 * accumulator 0 holds canonical lanes 0-3 and 8-11, accumulator 1 lanes 4-7 and 12-15 (xp
 * is laid out to match); each lane's FMA sequence is the reference's, and the fold puts
 * them back. */
static uint8_t mxb[256][64] __attribute__((aligned(64)));
static int mxb_ok;
__attribute__((constructor)) static void mxb_init(void) {
    if (!k3_kernels_usable("avx2")) return;
    int ok = 1;
    for (int sc = 0; sc < 256; sc++)
        for (int n = 0; n < 16; n++) {
            union { float f; uint32_t u; } w, v = { .u = k3_e8m0_bits[sc] };
            w.f = k3_e2m1[n] * v.f;                           /* the reference's product */
            ok &= (w.u & 0xFFFF) == 0;
            mxb[sc][n] = mxb[sc][n + 16] = (uint8_t)(w.u >> 16);
            mxb[sc][32 + n] = mxb[sc][48 + n] = (uint8_t)(w.u >> 24);
        }
    mxb_ok = ok;
}

/* The nibble indices of a 32-block's bytes b0-15 (q0 = b0-7, q1 = b8-15) in one register:
 * 128-bit lane 0 = low nibbles of b0-7, then their high nibbles; lane 1 the same for b8-15
 * (two broadcast loads, a blend, a per-qword shift by 0 or 4, a mask). Half the pshufb of
 * a lo and a hi register each holding 16 of 32 useful indices: 1.15x in L2 (KERNELS_LOG.md). */
INL __m256i mx_nib(const uint8_t *p) {
    long long q0, q1;
    memcpy(&q0, p, 8); memcpy(&q1, p + 8, 8);
    __m256i v = _mm256_blend_epi32(_mm256_set1_epi64x(q0), _mm256_set1_epi64x(q1), 0xF0);
    return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 4, 0, 4)),
                            _mm256_set1_epi8(0x0F));
}

#ifndef MXR2
#define MXR2 4
#endif
/* The next step's index registers are built one step ahead: their loads and three ops
 * head each block's chain to the FMAs, and the accumulators' FMA chains wait on them
 * (1.03-1.04x in L2 on Zen 5). The last step reloads its own block (no read past a row).
 * The next R rows (and their scales) are fetched into L2 as one linear stream, R * 16
 * bytes a step, as the BF16 rows are: a row is short (1.5-1.8 KB on the expert shapes), so
 * the hardware's per-row streams restart cold at every group; from memory on Zen 3 1.09-1.42x
 * (the 1-thread rate then up to ~7 GB/s, the decode's own in cache). Within a row none:
 * 1 KB ahead every 4 blocks cost 1.03-1.06x from memory and 1.10-1.19x in cache on Zen 3
 * (docs/KERNELS_LOG_ZEN3.md). The rows are walked by pointers (one add a step each, the
 * rows' strides loop-invariant): with (r + i) * cols + c worked out per block, a step of
 * four blocks was ~150 instructions, now ~120 (Zen 3: 1.05-1.08x in L2,
 * tools/bench_matvec_l2.c; 1.01-1.11x from memory, tools/bench_matvec_ab.sh). */
INL void mv_mxb(const M *m, int R, float *y, const float *xp, int r) {
    const size_t pst = (size_t)m->cols / 2, sst = (size_t)m->cols / 32;  /* a row's bytes */
    const uint8_t *p = m->wp + (size_t)r * pst, *s = m->ws + (size_t)r * sst;
    /* the next R rows' bytes and scales (past the end at the last rows: a prefetch, no fault) */
    const char *np = (const char *)(p + R * pst), *ns = (const char *)(s + R * sst);
    const __m256i z = _mm256_setzero_si256();
    __m256 acc[MXR2][2];
    __m256i nx[MXR2];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        acc[i][0] = acc[i][1] = _mm256_setzero_ps();
        nx[i] = mx_nib(p + i * pst);
    }
    for (size_t j = 0; j < sst; j++, p += 16, s++, xp += 32) {
        const size_t nn = j + 1 < sst ? 16 : 0;     /* the last step reloads its own block */
        if (!(16 * R * j & 63)) _mm_prefetch(np + 16 * R * j, _MM_HINT_T1);
        if (!(R * j & 63)) _mm_prefetch(ns + R * j, _MM_HINT_T1);
        __m256 xe0 = _mm256_load_ps(xp), xo0 = _mm256_load_ps(xp + 8);
        __m256 xe1 = _mm256_load_ps(xp + 16), xo1 = _mm256_load_ps(xp + 24);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            const uint8_t *t = mxb[s[i * sst]];
            __m256i n = nx[i];
            nx[i] = mx_nib(p + i * pst + nn);
            __m256i L = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)t), n);
            __m256i H = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(t + 32)), n);
            __m256i wl = _mm256_unpacklo_epi8(L, H), wh = _mm256_unpackhi_epi8(L, H);
            acc[i][0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, wl)), xe0,
                                        acc[i][0]);
            acc[i][0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, wh)), xo0,
                                        acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, wl)), xe1,
                                        acc[i][1]);
            acc[i][1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, wh)), xo1,
                                        acc[i][1]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
        y[r + i] = k3_avx2_fold2(_mm256_permute2f128_ps(acc[i][0], acc[i][1], 0x20),
                                 _mm256_permute2f128_ps(acc[i][0], acc[i][1], 0x31));
}

/* MXFP4 matvec of rows [r0, r1); -1 without scratch for the laid-out x, or were a product
 * not a bf16 word. That never happens with IEEE fp32: every product is +-0, +-inf, the NaN
 * 0x7FC00000 (x86 returns the NaN operand) or m * 2^e with m in {1, 1.5} (mantissa bit 22
 * at most; subnormal: s = 0 or 1, bits 21-22), so the old convert-and-multiply fallback
 * was dead code and went; the caller's scalar path would give the same bits anyway.
 * xp per 32-block: x[c + 2l] then x[c + 2l + 1] for l = 0-3, 8-11, then the same for
 * l = 4-7, 12-15. */
static int matvec_mx(const M *m, float *Y, const float *X, int r0, int r1) {
    float *xp = mxb_ok ? k3_scratch(sizeof(float) * m->cols) : NULL;
    if (!xp) return -1;
    for (int c = 0; c < m->cols; c += 32) {   /* x_eo: e, o of l 0-7, then of l 8-15 */
        __m256 e0, o0, e1, o1;
        x_eo(X + c, &e0, &o0);
        x_eo(X + c + 16, &e1, &o1);
        _mm256_store_ps(xp + c, _mm256_permute2f128_ps(e0, e1, 0x20));
        _mm256_store_ps(xp + c + 8, _mm256_permute2f128_ps(o0, o1, 0x20));
        _mm256_store_ps(xp + c + 16, _mm256_permute2f128_ps(e0, e1, 0x31));
        _mm256_store_ps(xp + c + 24, _mm256_permute2f128_ps(o0, o1, 0x31));
    }
    for (int r = r0; r < r1;) {
        if (r1 - r >= MXR2) { mv_mxb(m, MXR2, Y, xp, r); r += MXR2; }
        else { mv_mxb(m, 1, Y, xp, r); r += 1; }
    }
    return 0;
}

static const K3KernelOps OPS;
static void matmul_avx2(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    M m = { W->type, W->cols, W->w, W->w, W->w, W->scale };
    int rows = W->rows;
    if (W->type == K3_W_BF16C) {
        /* prefill: up to one token block of the GEMM (72), decoded into its fp32 panels
         * (k3_avx2_coded_panel); more: rows decoded once to BF16 (k3_codec_prefill), as the
         * panels are decoded again for every token block (T = 256: 73-78% of the peak
         * against 81-83%, Zen 5) */
        if (t1 - t0 > 1 && t1 - t0 <= 72 && !k3_avx2_gemm(Y, W, X, r0, r1, t0, t1)) return;
        if (t1 - t0 > 1) {
            k3_codec_prefill(&OPS, k3_avx2_coded_row, Y, W, X, r0, r1, t0, t1);
            return;
        }
        k3_avx2_coded_matvec(Y + (size_t)t0 * rows, W, X + (size_t)t0 * m.cols, r0, r1);
        return;
    }
    if (t1 - t0 == 1) {                    /* matvec: 4 rows share each x load */
        float *y = Y + (size_t)t0 * rows;
        const float *x = X + (size_t)t0 * m.cols;
        if (W->type == K3_W_F32) mv_span(&m, K3_W_F32, y, x, r0, r1);
        else if (W->type == K3_W_BF16) mv_span(&m, K3_W_BF16, y, x, r0, r1);
        else if (matvec_mx(&m, y, x, r0, r1))
            k3_kernels_scalar()->matmul(Y, W, X, r0, r1, t0, t1);   /* no scratch: same bits */
    } else if (k3_avx2_gemm(Y, W, X, r0, r1, t0, t1)) {   /* prefill: the blocked GEMM */
        k3_kernels_scalar()->matmul(Y, W, X, r0, r1, t0, t1);   /* no scratch: same bits */
    }
}

static const K3KernelOps OPS = {
    "avx2", matmul_avx2, dot_avx2, sum_avx2, axpy_avx2, kda_step_avx2,
    k3_avx2_situ, k3_avx2_silu, k3_avx2_sigmul, k3_avx2_expf, k3_avx2_sigmoid,
    dots_avx2, axpys_avx2
};
const K3KernelOps *k3_kernels_avx2(void) { return &OPS; }

#else
const K3KernelOps *k3_kernels_avx2(void) { return 0; }
#endif
