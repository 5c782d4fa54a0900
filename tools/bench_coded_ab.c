/* bench_coded_ab.c — in-process A/B of two builds of the AVX-512 coded matvec
 * (kernels_avx512_coded.c), one thread, the coded matrix from RAM (8 copies rotated).
 * Built by tools/bench_coded_ab.sh: variants v0 = B, v1 = A, v2 = B, v3 = A (v2, v3 are
 * the controls: B against itself shows the noise), the order rotated every rep; the
 * results must be bit-equal. Prints medians and the paired time ratios to v0. */
#include "codec.h"
#include "bench_ab.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define NV 4
typedef void (*CM)(const K3KernelOps *, float *, const K3Mat *, const float *, int, int, int, int);
void k3_cm_v0(const K3KernelOps *, float *, const K3Mat *, const float *, int, int, int, int);
void k3_cm_v1(const K3KernelOps *, float *, const K3Mat *, const float *, int, int, int, int);
void k3_cm_v2(const K3KernelOps *, float *, const K3Mat *, const float *, int, int, int, int);
void k3_cm_v3(const K3KernelOps *, float *, const K3Mat *, const float *, int, int, int, int);
int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: ab ROWS COLS REPS\n"); return 2; }
    int rows = atoi(argv[1]), cols = atoi(argv[2]), reps = atoi(argv[3]);
    CM f[NV] = { k3_cm_v0, k3_cm_v1, k3_cm_v2, k3_cm_v3 };
    enum { NC = 8 };
    size_t n = (size_t)rows * cols;
    uint16_t *w = malloc(2 * n);
    srand(1);
    for (size_t i = 0; i < n; i++) {
        double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = rand() / (RAND_MAX + 1.0);
        float v = (float)(0.02 * sqrt(-2 * log(u1)) * cos(6.283185307 * u2));
        uint32_t b; memcpy(&b, &v, 4); w[i] = (uint16_t)((b + 0x7FFF + (b >> 16 & 1)) >> 16);
    }
    size_t bound = k3_codec_bound(rows, cols);
    K3Mat C[NC];
    for (int c = 0; c < NC; c++) {
        uint8_t *s = aligned_alloc(64, (bound + 63) & ~(size_t)63);
        k3_codec_encode(s, w, rows, cols, NULL);
        C[c] = (K3Mat){0}; C[c].rows = rows; C[c].cols = cols; k3_codec_bind(&C[c], s);
    }
    float *x = malloc(4 * cols), *y[NV];
    for (int v = 0; v < NV; v++) y[v] = malloc(4 * rows);
    for (int i = 0; i < cols; i++) x[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    const K3KernelOps *o = k3_kernels_avx512();
    double t[NV][100], rat[NV][100];
    int it = 0;
    for (int r = 0; r < reps; r++) {
        for (int j = 0; j < NV; j++) {
            int v = (j + r) % NV;
            double t0 = now();
            f[v](o, y[v], &C[it++ % NC], x, 0, rows, 0, 1);
            t[v][r] = now() - t0;
        }
        for (int v = 1; v < NV; v++) {
            if (memcmp(y[0], y[v], 4 * rows)) { printf("BITS DIFFER %d\n", v); return 1; }
            rat[v][r] = t[v][r] / t[0][r];
        }
    }
    printf("%dx%d 1 thr, ms medians:", rows, cols);
    for (int v = 0; v < NV; v++) {
        qsort(t[v], reps, 8, cmpd);
        printf(" v%d %.2f", v, 1e3 * t[v][reps / 2]);
    }
    printf(" | paired ratio to v0:");
    for (int v = 1; v < NV; v++) {
        qsort(rat[v], reps, 8, cmpd);
        printf(" v%d %.3f", v, rat[v][reps / 2]);
    }
    printf("\n");
    return 0;
}
