/* kernels_avx2.h — internal to the AVX2 kernels (kernels_avx2*.c). */
#ifndef K3_KERNELS_AVX2_H
#define K3_KERNELS_AVX2_H
#include "kernels.h"

/* The prefill GEMM (kernels_avx2_gemm.c): Y[t][r] for r in [r0, r1), t in [t0, t1), the
 * bits of the T = 1 kernel. -1 when its per-thread scratch cannot be had. */
int k3_avx2_gemm(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1);
size_t k3_avx2_gemm_scratch(int cols, int pt);   /* bytes */
#endif
