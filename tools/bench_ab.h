/* bench_ab.h — what the in-process A/B tools share (bench_coded_ab.c, bench_gemm_ab.c,
 * bench_matvec_ab.c, bench_pool_ab.c): a monotonic clock and the comparison that sorts
 * timings for their medians. */
#ifndef K3_TOOLS_BENCH_AB_H
#define K3_TOOLS_BENCH_AB_H
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
#endif
