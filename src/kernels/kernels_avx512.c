/* kernels_avx512.c — AVX-512 (F, BW, VL, DQ) twins of the scalar kernels, same bits.
 *
 * The 16 canonical lanes are exactly one zmm register; every multiply-add is one
 * vfmadd (fused, like fmaf); the fold is the same tree (8, 4, 2, 1). Tails use masked
 * loads and a masked FMA that leaves the untouched lanes exactly as they were.
 * MXFP4 (lane l = byte l of each 16-byte block, low nibble then high nibble): the
 * 16 bytes widen to 16 dwords (vpmovzxbd), vpermps picks from a 16-entry table
 * e2m1[n] * 2^(s-127) by the low nibble, then by the high one after a shift. The 256
 * tables (one per scale byte, 16 KB) are built at start-up with the very product the
 * reference computes (including -0); x is split into even/odd elements (vpermt2ps) to
 * meet the two FMAs. The coded BF16C kernels are in kernels_avx512_coded.c.
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (Makefile). */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#include "kernels_avx512.h"
#include "kernels_avx2.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static float dot_avx512(const float *a, const float *b, int n) {
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (i < n) {
        __mmask16 k = tailmask(n - i);
        acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i),
                                    _mm512_maskz_loadu_ps(k, b + i), acc, k);
    }
    return fold(acc);
}

static float sum_avx512(const float *a, int n) {
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(a + i));
    if (i < n) {
        __mmask16 k = tailmask(n - i);
        acc = _mm512_mask_add_ps(acc, k, acc, _mm512_maskz_loadu_ps(k, a + i));
    }
    return fold(acc);
}

static void axpy_avx512(float *y, float a, const float *x, int n) {
    __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i,
                         _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 k = tailmask(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(k, x + i),
                                                        _mm512_maskz_loadu_ps(k, y + i)));
    }
}

/* k3_dots: 8 rows at a time, each its own accumulator in dot_avx512's order (8 chains
 * instead of one, and q loaded once for the 8). */
static void dots_avx512(float *out, const float *q, const float *K, size_t ks, int nk, int n) {
    int j = 0;
    for (; n % 16 == 0 && j + 8 <= nk; j += 8) {
        const float *k = K + (size_t)j * ks;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int i = 0; i < n; i += 16) {
            const __m512 x = _mm512_loadu_ps(q + i);
            a0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + i), a0);
            a1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + ks + i), a1);
            a2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + 2 * ks + i), a2);
            a3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + 3 * ks + i), a3);
            a4 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + 4 * ks + i), a4);
            a5 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + 5 * ks + i), a5);
            a6 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + 6 * ks + i), a6);
            a7 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k + 7 * ks + i), a7);
        }
        out[j] = fold(a0); out[j + 1] = fold(a1); out[j + 2] = fold(a2);
        out[j + 3] = fold(a3); out[j + 4] = fold(a4); out[j + 5] = fold(a5);
        out[j + 6] = fold(a6); out[j + 7] = fold(a7);
    }
    for (; j < nk; j++) out[j] = dot_avx512(q, K + (size_t)j * ks, n);
}

/* k3_axpys: 128 elements of y held in 8 registers while every row adds to them in order
 * (one load per multiply-add instead of two and a store). */
static void axpys_avx512(float *y, const float *a, const float *K, size_t ks, int nk, int n) {
    int i = 0;
    for (; i + 128 <= n; i += 128) {
        __m512 y0 = _mm512_loadu_ps(y + i), y1 = _mm512_loadu_ps(y + i + 16),
               y2 = _mm512_loadu_ps(y + i + 32), y3 = _mm512_loadu_ps(y + i + 48),
               y4 = _mm512_loadu_ps(y + i + 64), y5 = _mm512_loadu_ps(y + i + 80),
               y6 = _mm512_loadu_ps(y + i + 96), y7 = _mm512_loadu_ps(y + i + 112);
        for (int j = 0; j < nk; j++) {
            const float *k = K + (size_t)j * ks + i;
            const __m512 b = _mm512_set1_ps(a[j]);
            y0 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k), y0);
            y1 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 16), y1);
            y2 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 32), y2);
            y3 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 48), y3);
            y4 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 64), y4);
            y5 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 80), y5);
            y6 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 96), y6);
            y7 = _mm512_fmadd_ps(b, _mm512_loadu_ps(k + 112), y7);
        }
        _mm512_storeu_ps(y + i, y0); _mm512_storeu_ps(y + i + 16, y1);
        _mm512_storeu_ps(y + i + 32, y2); _mm512_storeu_ps(y + i + 48, y3);
        _mm512_storeu_ps(y + i + 64, y4); _mm512_storeu_ps(y + i + 80, y5);
        _mm512_storeu_ps(y + i + 96, y6); _mm512_storeu_ps(y + i + 112, y7);
    }
    if (i < n)
        for (int j = 0; j < nk; j++) axpy_avx512(y + i, a[j], K + (size_t)j * ks + i, n - i);
}

static void kda_step_avx512(float *S, const float *q, const float *k, const float *v,
                            const float *alpha, float beta, float *o, int D) {
    float u[D], d[D];
    for (int j = 0; j < D; j++) u[j] = 0.0f;
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        __m512 al = _mm512_set1_ps(alpha[i]), ki = _mm512_set1_ps(k[i]);
        for (int j = 0; j < D; j += 16) {
            __mmask16 m = D - j >= 16 ? 0xFFFF : tailmask(D - j);
            __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, Si + j), al);
            _mm512_mask_storeu_ps(Si + j, m, s);
            _mm512_mask_storeu_ps(u + j, m,
                                  _mm512_fmadd_ps(s, ki, _mm512_maskz_loadu_ps(m, u + j)));
        }
    }
    for (int j = 0; j < D; j++) { d[j] = beta * (v[j] - u[j]); o[j] = 0.0f; }
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
        for (int j = 0; j < D; j += 16) {
            __mmask16 m = D - j >= 16 ? 0xFFFF : tailmask(D - j);
            __m512 s = _mm512_fmadd_ps(ki, _mm512_maskz_loadu_ps(m, d + j),
                                       _mm512_maskz_loadu_ps(m, Si + j));
            _mm512_mask_storeu_ps(Si + j, m, s);
            _mm512_mask_storeu_ps(o + j, m,
                                  _mm512_fmadd_ps(s, qi, _mm512_maskz_loadu_ps(m, o + j)));
        }
    }
}

/* ---- matmul. Matvec (T = 1): 8 rows at a time (8 independent 16-lane chains share each
 * x load), software prefetch PF bytes ahead on every row stream. Prefill: register tiles
 * of R rows x TT tokens (one zmm accumulator each), column-blocked, the weights decoded
 * in registers; or, from GEMM_T tokens where the GEMM is on, the blocked GEMM of
 * kernels_avx512_gemm.c. Both give the T = 1 bits. The GEMM's panels and parked lanes
 * (~840 KB) want a 2 MB L2: with it (Sapphire Rapids) the GEMM measured +0-12 points of
 * the FMA peak over the tiles; with 1 MB (Zen 5) the tiles measured 5-15 points faster
 * (docs/KERNELS.md). K3_AVX512_GEMM=0/1 overrides the choice (for A/B runs). */
#ifndef GEMM_T
#define GEMM_T 32
#endif
#define GEMM_L2 (2L << 20)
static int gemm_on;
__attribute__((constructor)) static void gemm_init(void) {   /* before any thread runs */
    const char *e = getenv("K3_AVX512_GEMM");
    gemm_on = e && (*e == '0' || *e == '1') ? *e == '1'
                                            : sysconf(_SC_LEVEL2_CACHE_SIZE) >= GEMM_L2;
}
int k3_avx512_prefill_gemm(int on) {
    int was = gemm_on;
    if (on >= 0) gemm_on = on;
    return was;
}
typedef struct {
    int cols;
    const float *wf; const uint16_t *wb; const uint8_t *wp, *ws;
} M;

INL __m512 ld_w(const M *m, int type, size_t o, __mmask16 k) {
    if (type == K3_W_F32) return _mm512_maskz_loadu_ps(k, m->wf + o);
    __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, m->wb + o));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

INL const char *w_addr(const M *m, int type, size_t o) {
    return type == K3_W_F32 ? (const char *)(m->wf + o) : (const char *)(m->wb + o);
}

/* f32 / bf16 matvec, R rows from r: 32 columns a step (one 64-byte line of bf16 per row) */
INL void mv_fb(const M *m, int type, int R, float *y, const float *x, int r) {
    int cols = m->cols, c = 0;
    __m512 acc[8];
    size_t ro[8];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) { acc[i] = _mm512_setzero_ps(); ro[i] = (size_t)(r + i) * cols; }
    for (; c + 32 <= cols; c += 32) {
        __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            _mm_prefetch(w_addr(m, type, ro[i] + c) + PF, _MM_HINT_T0);
            if (type == K3_W_F32) _mm_prefetch(w_addr(m, type, ro[i] + c) + PF + 64, _MM_HINT_T0);
            acc[i] = _mm512_fmadd_ps(ld_w(m, type, ro[i] + c, 0xFFFF), x0, acc[i]);
            acc[i] = _mm512_fmadd_ps(ld_w(m, type, ro[i] + c + 16, 0xFFFF), x1, acc[i]);
        }
    }
    for (; c < cols; c += 16) {
        __mmask16 k = cols - c >= 16 ? 0xFFFF : tailmask(cols - c);
        __m512 x0 = _mm512_maskz_loadu_ps(k, x + c);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++)
            acc[i] = _mm512_mask3_fmadd_ps(ld_w(m, type, ro[i] + c, k), x0, acc[i], k);
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) y[r + i] = fold(acc[i]);
}

/* MXFP4: 16 bytes = one 32-element block -> 16 dwords (vpmovzxbd); the low nibble of
 * lane l is element 2l, the high nibble element 2l+1 (the canonical MXFP4 lane order);
 * vpermps reads only the low 4 bits of its index, so the shift is the only decode op. */
/* mxtab[s] = e2m1[0..15] * 2^(s-127): the reference's exact products, 16 KB, built once
 * at start-up; one 64-byte load replaces broadcast + multiply in the inner loops. This file
 * is compiled for AVX-512, so the start-up code (vectorised with zmm) runs only on a CPU
 * that has it (the check is in kernels.c, built for any x86-64): else SIGILL before main. */
float k3_avx512_mxtab[256][16] __attribute__((aligned(64)));
__attribute__((constructor)) static void mxtab_init(void) {
    if (!k3_kernels_usable("avx512")) return;
    for (int s = 0; s < 256; s++) {
        union { uint32_t u; float f; } v = { k3_e8m0_bits[s] };
        for (int n = 0; n < 16; n++) k3_avx512_mxtab[s][n] = k3_e2m1[n] * v.f;
    }
}
INL __m512 mx_tab(const M *m, size_t si) { return _mm512_load_ps(k3_avx512_mxtab[m->ws[si]]); }
INL __m512i mx_bytes(const M *m, size_t bo) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(m->wp + bo)));
}

/* one 32-block of one row: bytes at p, scale byte at *s */
INL __m512 mx_block(const uint8_t *p, const uint8_t *s, __m512 xe, __m512 xo, __m512 acc) {
    __m512 tab = _mm512_load_ps(k3_avx512_mxtab[*s]);
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    acc = _mm512_fmadd_ps(_mm512_permutexvar_ps(v, tab), xe, acc);
    return _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab), xo, acc);
}

/* R rows from r; xp: x de-interleaved once per call (each 32-block: 16 even elements, then
 * 16 odd), so the row loop has no permute: in memory 1.04-1.07x the per-tile vpermt2ps
 * (docs/KERNELS.md, "Decode matvec on Zen 5"). 16 rows a pass was 1.15x in L2 but slower
 * from memory (its next-tile prefetch, 29 KB ahead, overruns L1; to L2 slower still). */
#ifndef MXR
#define MXR 8
#endif
INL void mv_mx(const M *m, int R, float *y, const float *xp, int r) {
    int cols = m->cols, c = 0;
    __m512 acc[MXR];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
    const uint8_t *pw = m->wp + (size_t)r * cols / 2, *ps = m->ws + (size_t)r * cols / 32;
    size_t bw = (size_t)cols / 2, bs = (size_t)cols / 32;      /* row strides */
    for (; c + 128 <= cols; c += 128) {                          /* 4 blocks: 64 bytes a row */
        __m512 xe[4], xo[4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            xe[g] = _mm512_load_ps(xp + c + 32 * g); xo[g] = _mm512_load_ps(xp + c + 32 * g + 16);
        }
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) {
            const uint8_t *p = pw + i * bw + c / 2, *s = ps + i * bs + c / 32;
            /* rows are short (1.5-2 KB): fetch the same place R rows on, i.e. the next tile */
            _mm_prefetch((const char *)((uintptr_t)p + R * bw), _MM_HINT_T0);
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) acc[i] = mx_block(p + 16 * g, s + g, xe[g], xo[g], acc[i]);
        }
    }
    for (; c < cols; c += 32) {
        __m512 xe = _mm512_load_ps(xp + c), xo = _mm512_load_ps(xp + c + 16);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++)
            acc[i] = mx_block(pw + i * bw + c / 2, ps + i * bs + c / 32, xe, xo, acc[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) y[r + i] = fold(acc[i]);
}

/* MXFP4 matvec of rows [r0, r1); -1 without scratch for the de-interleaved x */
static int matvec_mx(const M *m, float *Y, const float *X, int r0, int r1) {
    const __m512i EV = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i OD = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    float *xp = k3_scratch(sizeof(float) * m->cols);
    if (!xp) return -1;
    for (int c = 0; c < m->cols; c += 32) {
        __m512 x0 = _mm512_loadu_ps(X + c), x1 = _mm512_loadu_ps(X + c + 16);
        _mm512_store_ps(xp + c, _mm512_permutex2var_ps(x0, EV, x1));
        _mm512_store_ps(xp + c + 16, _mm512_permutex2var_ps(x0, OD, x1));
    }
    for (int r = r0; r < r1;) {
        if (r1 - r >= MXR) { mv_mx(m, MXR, Y, xp, r); r += MXR; }
        else if (r1 - r >= 4) { mv_mx(m, 4, Y, xp, r); r += 4; }
        else { mv_mx(m, 1, Y, xp, r); r += 1; }
    }
    return 0;
}

/* Prefill with few tokens (T < GEMM_T; more: kernels_avx512_gemm.c, which decodes each
 * block of weights to fp32 once, a cost that only pays from ~32 tokens on): blocks of SC_R
 * rows x SC_T tokens x KC columns (128 x 72 x 1024, picked by measurement on a Zen 5 class
 * core; 3x8 and 2x8 tiles were slower than 4x6), the register tiles of
 * kernels_avx512_tile.h (lanes parked in sc[(i*SC_T + j)*16] between column blocks). x is a
 * panel of the token block's tokens copied from X once (stride padded: no 4K aliasing
 * between tokens); for MXFP4 every 32-block de-interleaved (16 even elements, then 16 odd). */
#ifndef SC_R
#define SC_R 128
#endif
#ifndef SC_T
#define SC_T 72
#endif
#ifndef TR            /* register tile: TR rows x up to TM tokens (TR*TM accumulators) */
#define TR 4
#define TM 6
#endif
#ifndef KC
#define KC 1024
#endif
/* the tile's weights (kernels_avx512_tile.h): row r's column c0 at o; the first token tile
 * (pf) fetches the next column block */
typedef struct { const M *m; int type, pf; size_t o; } Src;
INL void src_w(const Src *s, int i, int c, __m512 *w) {
    const M *m = s->m;
    size_t o = s->o + (size_t)i * m->cols + c;
    if (s->type == K3_W_MXFP4) {
        if (s->pf && !(c & 96)) _mm_prefetch((const char *)m->wp + o / 2 + KC / 2, _MM_HINT_T0);
        __m512 tab = mx_tab(m, o / 32);
        __m512i v = mx_bytes(m, o / 2);
        w[0] = _mm512_permutexvar_ps(v, tab);
        w[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
        return;
    }
    if (s->pf)
        _mm_prefetch(w_addr(m, s->type, o) + KC * (s->type == K3_W_F32 ? 4 : 2), _MM_HINT_T0);
    w[0] = ld_w(m, s->type, o, 0xFFFF);
}
INL Src src_at(const Src *s, int i) {
    return (Src){ s->m, s->type, s->pf, s->o + (size_t)i * s->m->cols };
}
#define TILE_TR TR
#define TILE_TM TM
#define TILE_PS SC_T
#define TILE_SRC Src
#define TILE_NS(s) ((s)->type == K3_W_MXFP4 ? 2 : 1)
#define TILE_PF(s, R, c) (void)0
#define TILE_W(s, i, c, w) src_w(s, i, c, w)
#define TILE_WT(s, i, c, k) ld_w((s)->m, (s)->type, (s)->o + (size_t)(i) * (s)->m->cols + (c), k)
#define TILE_AT(s, i) src_at(s, i)
#define TILE_NOPF(s) ((s)->pf = 0)
#include "kernels_avx512_tile.h"

/* x panel stride: every column (16-padded) and 16 more, so the tokens of a tile do not
 * share L1 sets (a multiple of 4 KB otherwise: 7168 columns) */
static size_t panel_stride(int cols) { return (size_t)((cols + 15) & ~15) + 16; }
/* parked lanes of n rows: only a row of more than one column block parks (a small model's
 * plan has little room beside) */
static size_t park_floats(int n, int cols) {
    return cols > KC ? (size_t)(n < SC_R ? n : SC_R) * SC_T * 16 : 0;
}

/* The block's tokens are laid out once per token block over all columns (MXFP4: each
 * 32-block de-interleaved): per 128-row block, the copy of the x panel took ~14% of the
 * time (perf, 2048x12288 BF16 T = 256, Zen 5). */
INL void blocked(const M *m, int type, float *Y, int rows, const float *X, int r0, int r1,
                 int t0, int t1, float *sc_buf, float *panel) {
    const __m512i EV = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i OD = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const size_t xs = panel_stride(m->cols);
    const int per = k3_block_tokens(t1 - t0, SC_T);
    for (int tb = t0; tb < t1; tb += per) {
        int tbe = t1 - tb > per ? tb + per : t1;
        for (int t = tb; t < tbe; t++) {
            const float *x = X + (size_t)t * m->cols;
            float *p = panel + (size_t)(t - tb) * xs;
            if (type != K3_W_MXFP4) { memcpy(p, x, sizeof(float) * m->cols); continue; }
            for (int c = 0; c < m->cols; c += 32) {
                __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
                _mm512_store_ps(p + c, _mm512_permutex2var_ps(x0, EV, x1));
                _mm512_store_ps(p + c + 16, _mm512_permutex2var_ps(x0, OD, x1));
            }
        }
        for (int rb = r0; rb < r1; rb += SC_R) {
            int rbe = r1 - rb > SC_R ? rb + SC_R : r1;
            for (int c0 = 0; c0 < m->cols; c0 += KC) {
                int c1 = m->cols - c0 > KC ? c0 + KC : m->cols;
                Src s = { m, type, c1 < m->cols, (size_t)rb * m->cols + c0 };
                tile_tokens(&s, rbe - rb, tbe - tb, panel + c0, xs, c1 - c0, sc_buf, c0 == 0,
                            c1 == m->cols, Y, rows, rb, tb);
            }
        }
    }
}


#define MATVEC(FN, ...)                                                                   \
    for (r = r0; r < r1;) {                                                               \
        if (r1 - r >= 8) { FN(__VA_ARGS__, 8, Y, X, r); r += 8; }                         \
        else if (r1 - r >= 4) { FN(__VA_ARGS__, 4, Y, X, r); r += 4; }                    \
        else { FN(__VA_ARGS__, 1, Y, X, r); r += 1; }                                     \
    }

static const K3KernelOps OPS;
static void matmul_avx512(float *Y, const K3Mat *W, const float *X, int r0, int r1,
                          int t0, int t1) {
    M m = { W->cols, W->w, W->w, W->w, W->scale };
    int rows = W->rows, r;
    if (W->type == K3_W_BF16C) { k3_avx512_coded_matmul(&OPS, Y, W, X, r0, r1, t0, t1); return; }
    if (t1 - t0 == 1) {
        Y += (size_t)t0 * rows; X += (size_t)t0 * m.cols;
        if (W->type == K3_W_F32) MATVEC(mv_fb, &m, K3_W_F32)
        else if (W->type == K3_W_BF16) MATVEC(mv_fb, &m, K3_W_BF16)
        else if (matvec_mx(&m, Y, X, r0, r1))
            k3_kernels_scalar()->matmul(Y - (size_t)t0 * rows, W, X - (size_t)t0 * m.cols,
                                        r0, r1, t0, t1);   /* no scratch: same bits */
        return;
    }
    if (t1 - t0 >= GEMM_T && k3_avx512_prefill_gemm(-1)) {
        if (k3_avx512_gemm(Y, W, X, r0, r1, t0, t1))        /* kernels_avx512_gemm.c */
            k3_kernels_scalar()->matmul(Y, W, X, r0, r1, t0, t1);   /* no scratch: same bits */
        return;
    }
    const size_t park = park_floats(r1 - r0, m.cols);
    const size_t per = (size_t)k3_block_tokens(t1 - t0, SC_T);
    float *sc = k3_scratch(sizeof(float) * (park + per * panel_stride(m.cols)));
    if (!sc) { k3_kernels_scalar()->matmul(Y, W, X, r0, r1, t0, t1); return; }   /* same bits */
    float *panel = sc + park;
    if (W->type == K3_W_F32) blocked(&m, K3_W_F32, Y, rows, X, r0, r1, t0, t1, sc, panel);
    else if (W->type == K3_W_BF16) blocked(&m, K3_W_BF16, Y, rows, X, r0, r1, t0, t1, sc, panel);
    else blocked(&m, K3_W_MXFP4, Y, rows, X, r0, r1, t0, t1, sc, panel);
}

void k3_avx512_scratch(int T, int rows, int cols, size_t *slot) {
    size_t k = sizeof(float) * (size_t)cols;                  /* matvec_mx's x */
    if (T > 1) {
        const size_t b = sizeof(float) * (park_floats(rows, cols) +
                                          k3_block_tokens(T, SC_T) * panel_stride(cols));
        const size_t g = T >= GEMM_T ? k3_avx512_gemm_scratch(T, rows, cols) : 0;
        k = b > k ? b : k;
        k = g > k ? g : k;
        k3_avx512_coded_scratch(T, rows, cols, slot);
    }
    if (k > slot[K3_SCRATCH_KERNEL]) slot[K3_SCRATCH_KERNEL] = k;
}

static const K3KernelOps OPS = {
    "avx512", matmul_avx512, dot_avx512, sum_avx512, axpy_avx512, kda_step_avx512,
    k3_avx512_situ, k3_avx512_silu, k3_avx512_sigmul, k3_avx512_expf, k3_avx512_sigmoid,
    dots_avx512, axpys_avx512
};
const K3KernelOps *k3_kernels_avx512(void) { return &OPS; }

#else
const K3KernelOps *k3_kernels_avx512(void) { return 0; }
int k3_avx512_prefill_gemm(int on) { (void)on; return 0; }
void k3_avx512_scratch(int T, int rows, int cols, size_t *slot) {
    (void)T; (void)rows; (void)cols; (void)slot;
}
#endif
