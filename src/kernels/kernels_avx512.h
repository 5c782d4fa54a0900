/* kernels_avx512.h — what the two AVX-512 files share (kernels_avx512.c: f32, BF16 and
 * MXFP4; kernels_avx512_coded.c: the coded BF16C decoders): the 16-lane fold in the
 * canonical order, tail masks, the prefetch distance. Internal to src/kernels. */
#ifndef K3_KERNELS_AVX512_H
#define K3_KERNELS_AVX512_H
#include "kernels.h"
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

#define PF 1024   /* prefetch distance in bytes on each weight row stream */

/* K3_W_BF16C rows [r0, r1) x tokens [t0, t1) (kernels_avx512_coded.c); ops: the AVX-512
 * table the coded prefill multiplies its decoded rows with. */
void k3_avx512_coded_matmul(const K3KernelOps *ops, float *Y, const K3Mat *W, const float *X,
                            int r0, int r1, int t0, int t1);
/* Prefill rows [r0, r1) x tokens [t0, t1) of an F32, BF16 or MXFP4 matrix as a blocked
 * GEMM (kernels_avx512_gemm.c); -1 without scratch (nothing written). */
int k3_avx512_gemm(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1);
/* the scratch bytes (slot K3_SCRATCH_KERNEL) of a GEMM call of rows x T tokens */
size_t k3_avx512_gemm_scratch(int T, int rows, int cols);
/* the coded kernels' scratch for up to T tokens on a rows x cols matrix (their slot raised) */
void k3_avx512_coded_scratch(int T, int rows, int cols, size_t *slot);
/* mxtab[s][n] = e2m1[n] * 2^(s-127), the reference's exact products (kernels_avx512.c) */
extern float k3_avx512_mxtab[256][16];
/* The elementwise transcendentals on 16 lanes (kernels_avx512_ew.c), the AVX2 ones' bits */
void k3_avx512_situ(float *out, const float *g, const float *u, int n, float b1, float b2);
void k3_avx512_silu(float *x, int n);
void k3_avx512_sigmul(float *o, const float *g, int n);
void k3_avx512_expf(float *y, const float *x, int n);
void k3_avx512_sigmoid(float *y, const float *x, int n);
#endif
