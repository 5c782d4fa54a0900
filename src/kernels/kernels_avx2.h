/* kernels_avx2.h — internal to the AVX2 kernels (kernels_avx2*.c). */
#ifndef K3_KERNELS_AVX2_H
#define K3_KERNELS_AVX2_H
#include "kernels.h"

/* The prefill GEMM (kernels_avx2_gemm.c): Y[t][r] for r in [r0, r1), t in [t0, t1), the
 * bits of the T = 1 kernel. -1 when its per-thread scratch cannot be had. */
int k3_avx2_gemm(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1);
size_t k3_avx2_gemm_scratch(int cols, int pt);   /* bytes */
/* The coded (K3_W_BF16C) kernels (kernels_avx2_coded.c): the matvec y[r] for r in
 * [r0, r1); row r decoded to BF16 (k3_codec_prefill's decoder); a coded row's blocks into
 * the GEMM's half panels (decode_w) */
void k3_avx2_coded_matvec(float *y, const K3Mat *W, const float *x, int r0, int r1);
void k3_avx2_coded_row(uint16_t *out, const K3Mat *W, int r);
void k3_avx2_coded_panel(const uint8_t **pp, int c0, int c1, int cols, float *d0, float *d1,
                         uint16_t *tail, const uint8_t *nx);
/* The elementwise transcendentals on 8 lanes (kernels_avx2_ew.c; also the AVX-512 path's) */
void k3_avx2_situ(float *out, const float *g, const float *u, int n, float b1, float b2);
void k3_avx2_silu(float *x, int n);
void k3_avx2_sigmul(float *o, const float *g, int n);
void k3_avx2_expf(float *y, const float *x, int n);
void k3_avx2_sigmoid(float *y, const float *x, int n);
/* k3_exp_d on 4 lanes (AVX-512: 8) for |x| <= 700 (the result a normal double); for the
 * tests (kernels_ew_body.h) */
void k3_avx2_exp_d(double *y, const double *x, int n);
void k3_avx512_exp_d(double *y, const double *x, int n);

#if defined(__AVX2__)
#include <immintrin.h>
/* The fold of an output's 16 lanes (a: lanes 0-7, b: 8-15): lane l += lane l + w for
 * w = 8, 4, 2, 1, the order every kernel ends with (kernels.h) */
static inline __attribute__((always_inline)) float k3_avx2_fold2(__m256 a, __m256 b) {
    __m256 s = _mm256_add_ps(a, b);                                           /* w = 8 */
    __m128 v = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1)); /* 4 */
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));                                  /* w = 2 */
    v = _mm_add_ss(v, _mm_movehdup_ps(v));                                   /* w = 1 */
    return _mm_cvtss_f32(v);
}
#endif
#endif
