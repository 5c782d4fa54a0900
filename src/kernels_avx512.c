/* kernels_avx512.c — AVX-512 (F, BW, VL, DQ) twins of the scalar kernels, same bits.
 *
 * The 16 canonical lanes are exactly one zmm register; every multiply-add is one
 * vfmadd (fused, like fmaf); the fold is the same tree (8, 4, 2, 1). Tails use masked
 * loads and a masked FMA that leaves the untouched lanes exactly as they were.
 * MXFP4: the 8 bytes holding 16 elements are spread to 16 dword lanes (vpermd), each
 * shifted right by 4*(i%8) (vpsrlvd) so lane i holds nibble i in its low 4 bits, which
 * vpermps uses to pick from a 16-entry table e2m1[n] * 2^(s-127) — one vmulps per block,
 * the very product the reference computes (including -0), then FMA.
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq (Makefile). */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))

INL float fold(__m512 a) {
    __m256 s = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)); /* 8 */
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));      /* 4 */
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));                                             /* 2 */
    v = _mm_add_ss(v, _mm_movehdup_ps(v));                                              /* 1 */
    return _mm_cvtss_f32(v);
}

INL __mmask16 tailmask(int n) { return (__mmask16)((1u << n) - 1); }

static float dot_avx512(const float *a, const float *b, int n) {
    __m512 acc = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (i < n) {
        __mmask16 k = tailmask(n - i);
        acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), acc, k);
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
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 k = tailmask(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i)));
    }
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
            _mm512_mask_storeu_ps(u + j, m, _mm512_fmadd_ps(s, ki, _mm512_maskz_loadu_ps(m, u + j)));
        }
    }
    for (int j = 0; j < D; j++) { d[j] = beta * (v[j] - u[j]); o[j] = 0.0f; }
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
        for (int j = 0; j < D; j += 16) {
            __mmask16 m = D - j >= 16 ? 0xFFFF : tailmask(D - j);
            __m512 s = _mm512_fmadd_ps(ki, _mm512_maskz_loadu_ps(m, d + j), _mm512_maskz_loadu_ps(m, Si + j));
            _mm512_mask_storeu_ps(Si + j, m, s);
            _mm512_mask_storeu_ps(o + j, m, _mm512_fmadd_ps(s, qi, _mm512_maskz_loadu_ps(m, o + j)));
        }
    }
}

/* ---- matmul: register tiles of R rows x TT tokens (one zmm accumulator each). */
typedef struct {
    int cols;
    const float *wf; const uint16_t *wb; const uint8_t *wp, *ws;
} M;

INL __m512 ld_w(const M *m, int type, size_t o, __mmask16 k) {
    if (type == K3_W_F32) return _mm512_maskz_loadu_ps(k, m->wf + o);
    __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, m->wb + o));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

/* Columns [c0, c1) of a tile. With sc (column blocking for prefill), the 16 lanes of
 * each accumulator continue from / are parked in sc[(i*SC_T + j)*16] between blocks:
 * the lane sequence of fused multiply-adds is unchanged, so are the bits. */
#define SC_R 32
#define SC_T 60
#define KC 512
INL void tile(const M *m, int type, int R, int TT, float *Y, int rows, const float *X, int r, int t,
              int c0, int c1, float *sc) {
    int cols = m->cols;
    __m512 acc[8][6];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 6
        for (int j = 0; j < TT; j++)
            acc[i][j] = c0 ? _mm512_load_ps(sc + (i * SC_T + j) * 16) : _mm512_setzero_ps();
    if (type == K3_W_MXFP4) {
        const __m512 E2M1 = _mm512_loadu_ps(k3_e2m1);
        const __m512i SPREAD = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        const __m512i SHIFT = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
        for (int c = c0; c < c1; c += 32) {
            __m512 tab[8];
#pragma GCC unroll 8
            for (int i = 0; i < R; i++)
                tab[i] = _mm512_mul_ps(E2M1, _mm512_castsi512_ps(_mm512_set1_epi32(
                    (int)k3_e8m0_bits[m->ws[((size_t)(r + i) * cols + c) / 32]])));
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512 w[8];
#pragma GCC unroll 8
                for (int i = 0; i < R; i++) {
                    const uint8_t *p = m->wp + ((size_t)(r + i) * cols + c) / 2 + 8 * h;
                    __m512i v = _mm512_permutexvar_epi32(SPREAD, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)p)));
                    w[i] = _mm512_permutexvar_ps(_mm512_srlv_epi32(v, SHIFT), tab[i]);
                }
#pragma GCC unroll 6
                for (int j = 0; j < TT; j++) {
                    __m512 x = _mm512_loadu_ps(X + (size_t)(t + j) * cols + c + 16 * h);
#pragma GCC unroll 8
                    for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(w[i], x, acc[i][j]);
                }
            }
        }
    } else {
        int c = c0;
        for (; c + 16 <= c1; c += 16) {
            __m512 w[4];
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) w[i] = ld_w(m, type, (size_t)(r + i) * cols + c, 0xFFFF);
#pragma GCC unroll 6
            for (int j = 0; j < TT; j++) {
                __m512 x = _mm512_loadu_ps(X + (size_t)(t + j) * cols + c);
#pragma GCC unroll 8
                for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(w[i], x, acc[i][j]);
            }
        }
        if (c < c1) {
            __mmask16 k = tailmask(c1 - c);
            __m512 w[4];
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) w[i] = ld_w(m, type, (size_t)(r + i) * cols + c, k);
#pragma GCC unroll 6
            for (int j = 0; j < TT; j++) {
                __m512 x = _mm512_maskz_loadu_ps(k, X + (size_t)(t + j) * cols + c);
#pragma GCC unroll 8
                for (int i = 0; i < R; i++) acc[i][j] = _mm512_mask3_fmadd_ps(w[i], x, acc[i][j], k);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 6
        for (int j = 0; j < TT; j++) {
            if (c1 == cols) Y[(size_t)(t + j) * rows + r + i] = fold(acc[i][j]);
            else _mm512_store_ps(sc + (i * SC_T + j) * 16, acc[i][j]);
        }
}

#define ROWS(TYPE, RA, TA)                                                                \
    for (r = r0; r < r1;) {                                                               \
        if (r1 - r >= RA) { tile(&m, TYPE, RA, TA, Y, rows, X, r, t, 0, m.cols, 0); r += RA; } \
        else { tile(&m, TYPE, 1, TA, Y, rows, X, r, t, 0, m.cols, 0); r += 1; }           \
    }

/* Prefill with long rows: blocks of SC_R rows x SC_T tokens x KC columns, so the X block
 * (SC_T x KC floats) stays in L2 while every row tile of the block runs over it. */
#define BROWS(TYPE, RA, TA)                                                               \
    for (r = rb; r < rbe;) {                                                              \
        float *s_ = sc + ((r - rb) * SC_T + (t - tb)) * 16;                               \
        if (rbe - r >= RA) { tile(&m, TYPE, RA, TA, Y, rows, X, r, t, c0, c1, s_); r += RA; } \
        else { tile(&m, TYPE, 1, TA, Y, rows, X, r, t, c0, c1, s_); r += 1; }             \
    }
#define BLOCKED(TYPE)                                                                     \
    for (int tb = t0; tb < t1; tb += SC_T) {                                              \
        int tbe = t1 - tb > SC_T ? tb + SC_T : t1;                                        \
        for (int rb = r0; rb < r1; rb += SC_R) {                                          \
            int rbe = r1 - rb > SC_R ? rb + SC_R : r1;                                    \
            for (int c0 = 0; c0 < m.cols; c0 += KC) {                                     \
                int c1 = m.cols - c0 > KC ? c0 + KC : m.cols;                             \
                for (t = tb; t < tbe;) {                                                  \
                    int rem = tbe - t;                                                    \
                    if (rem >= 6) { BROWS(TYPE, 4, 6) t += 6; }                           \
                    else if (rem >= 3) { BROWS(TYPE, 4, 3) t += 3; }                      \
                    else { BROWS(TYPE, 4, 1) t += 1; }                                    \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }
static _Thread_local float sc_buf[SC_R * SC_T * 16] __attribute__((aligned(64)));
#define TILES(TYPE)                                                                       \
    for (t = t0; t < t1;) {                                                               \
        int rem = t1 - t;                                                                 \
        if (rem >= 6) { ROWS(TYPE, 4, 6) t += 6; }                                        \
        else if (rem >= 3) { ROWS(TYPE, 4, 3) t += 3; }                                   \
        else if (TYPE == K3_W_MXFP4) { ROWS(TYPE, 8, 1) t += 1; }                         \
        else { ROWS(TYPE, 4, 1) t += 1; }                                                 \
    }

static void matmul_avx512(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    M m = { W->cols, W->w, W->w, W->w, W->scale };
    int rows = W->rows, r, t;
    if (t1 - t0 >= 6 && m.cols > KC) {
        float *sc = sc_buf;
        if (W->type == K3_W_F32) BLOCKED(K3_W_F32)
        else if (W->type == K3_W_BF16) BLOCKED(K3_W_BF16)
        else BLOCKED(K3_W_MXFP4)
        return;
    }
    if (W->type == K3_W_F32) TILES(K3_W_F32)
    else if (W->type == K3_W_BF16) TILES(K3_W_BF16)
    else TILES(K3_W_MXFP4)
}

static const K3KernelOps OPS = { "avx512", matmul_avx512, dot_avx512, sum_avx512, axpy_avx512, kda_step_avx512 };
const K3KernelOps *k3_kernels_avx512(void) { return &OPS; }

#else
const K3KernelOps *k3_kernels_avx512(void) { return 0; }
#endif
