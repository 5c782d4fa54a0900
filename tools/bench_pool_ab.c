/* bench_pool_ab.c — the pool's spin time A/B on decode's pattern of calls (tools/README.md):
 *   bench_pool_ab LAYERS TOKENS SPIN_A SPIN_B [THREADS]
 * A "token" is, per layer, two BF16 4096x7168 matvecs (the trunk's) and 48 MXFP4 ones (16
 * experts' gate and up, 3072x3584, and down, 3584x3072), each on its own weights, so they
 * come from RAM as decode's do. Tokens alternate between spin A and spin B (k3_pool_spin,
 * microseconds); prints the median ms a token of each and B/A (< 1: B faster). */
#include "bench_ab.h"
#include "kernels.h"
#include "pool.h"
#include <stdio.h>
#include <stdlib.h>

static K3Mat mat(int type, int rows, int cols) {
    size_t n = (size_t)rows * cols, bytes = type == K3_W_MXFP4 ? n / 2 + n / 32 : 2 * n;
    uint8_t *w = malloc(bytes);
    if (!w) { fprintf(stderr, "bench_pool_ab: out of memory\n"); exit(1); }
    for (size_t k = 0; k < bytes; k++) w[k] = (uint8_t)(k * 2654435761u >> 13);
    if (type == K3_W_MXFP4)
        for (size_t k = 0; k < n / 32; k++) w[n / 2 + k] = (uint8_t)(118 + k % 10);
    else
        for (size_t k = 1; k < bytes; k += 2) w[k] = 0x3c;       /* BF16 around 0.01 */
    return (K3Mat){ type, rows, cols, w, type == K3_W_MXFP4 ? w + n / 2 : NULL, NULL };
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: bench_pool_ab LAYERS TOKENS SPIN_A SPIN_B [THREADS]\n");
        return 2;
    }
    int layers = atoi(argv[1]), tokens = atoi(argv[2]), spin[2] = { atoi(argv[3]), atoi(argv[4]) };
    if (layers < 1 || tokens < 2 || tokens > 400) return 2;
    k3_threads_set(argc > 5 ? atoi(argv[5]) : 0);
    K3Mat *m = calloc((size_t)layers * 50, sizeof *m);
    for (int i = 0; i < layers * 50; i++) {
        int k = i % 50;
        m[i] = k < 2 ? mat(K3_W_BF16, 4096, 7168)
                     : k % 3 == 1 ? mat(K3_W_MXFP4, 3584, 3072) : mat(K3_W_MXFP4, 3072, 3584);
    }
    float *x = malloc(sizeof(float) * 7168), *y = malloc(sizeof(float) * 7168);
    for (int i = 0; i < 7168; i++) x[i] = 1e-3f * (float)(i % 13);
    double t[2][200];
    int n[2] = { 0, 0 };
    for (int k = 0; k < tokens; k++) {
        int v = k & 1;
        k3_pool_spin(spin[v]);
        double t0 = now();
        for (int i = 0; i < layers * 50; i++) k3_matmul(y, &m[i], x, 1);
        t[v][n[v]++] = now() - t0;
    }
    qsort(t[0], n[0], sizeof(double), cmpd);
    qsort(t[1], n[1], sizeof(double), cmpd);
    double a = t[0][n[0] / 2], b = t[1][n[1] / 2];
    printf("%d threads, %d layers: spin %d us %.2f ms a token, spin %d us %.2f ms (medians of "
           "%d), B/A %.3f\n", k3_threads(), layers, spin[0], 1e3 * a, spin[1], 1e3 * b, n[0],
           b / a);
    return 0;
}
