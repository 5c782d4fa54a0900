/* bench_matvec_l2.c — TSC ticks per 32-block of the AVX2 MXFP4 matvec with the weights in L2
 * (or, with many rows, from memory), one thread, best of 7 bursts: the kernel's own rate,
 * free of the bandwidth. A/B two versions of kernels_avx2.c by building this twice:
 *   F="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Iinclude -Isrc/kernels"
 *   gcc $F -mavx2 -mfma -mf16c -c DIR/kernels_avx2.c -o /tmp/k.o
 *   gcc $F -pthread -static -o /tmp/l2 tools/bench_matvec_l2.c /tmp/k.o \
 *       $(ls build/*\/*.o | grep -v -e cli/main.o -e kernels/kernels_avx2.o) -lm
 *   /tmp/l2 ROWS COLS CALLS       (32 3584 3000: 57 KB, in L2; 32768 3584 6: 59 MB)
 * The clock: a chain of dependent adds gives cycles per tick (Zen 3 here: ~1.3). */
#include "kernels.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

int main(int argc, char **argv) {
    int rows = argc > 1 ? atoi(argv[1]) : 32, cols = argc > 2 ? atoi(argv[2]) : 3584;
    int calls = argc > 3 ? atoi(argv[3]) : 3000;
    if (rows < 1 || cols < 32 || cols % 32 || calls < 1) return 2;
    const K3KernelOps *o = k3_kernels_avx2();
    if (!o) { puts("avx2 kernels not usable here"); return 2; }
    size_t nb = (size_t)rows * cols / 2;
    uint8_t *w = aligned_alloc(64, (nb + 63) & ~(size_t)63);
    uint8_t *s = malloc((size_t)rows * cols / 32);
    float *x = aligned_alloc(64, sizeof(float) * cols), *y = malloc(sizeof(float) * rows);
    srand(1);
    for (size_t i = 0; i < nb; i++) w[i] = (uint8_t)rand();
    for (size_t i = 0; i < (size_t)rows * cols / 32; i++) s[i] = (uint8_t)(120 + rand() % 16);
    for (int i = 0; i < cols; i++) x[i] = (float)(rand() % 2000 - 1000) / 999.0f;
    K3Mat m = { K3_W_MXFP4, rows, cols, w, s, NULL };
    double best = 1e30;
    for (int rep = 0; rep < 7; rep++) {
        unsigned long long t0 = __rdtsc();
        for (int i = 0; i < calls; i++) o->matmul(y, &m, x, 0, rows, 0, 1);
        double t = (double)(__rdtsc() - t0) / calls / ((double)rows * cols / 32);
        if (t < best) best = t;
    }
    printf("%.3f ticks a block (y[0] = %g)\n", best, y[0]);
    return 0;
}
