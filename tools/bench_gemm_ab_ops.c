/* bench_gemm_ab_ops.c — bench_gemm_ab.sh's shim for ISA=avx512t / avx2t: the whole matmul
 * entry of a path (its prefill tiles, coded prefill included), built once per side with
 * K3OPS and K3G renamed, called as bench_gemm_ab.c's k3_g0 / k3_g1. */
#include "kernels.h"
const K3KernelOps *K3OPS(void);
int K3G(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1);
int K3G(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    K3OPS()->matmul(Y, W, X, r0, r1, t0, t1);
    return 0;
}
