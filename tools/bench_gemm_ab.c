/* bench_gemm_ab.c — in-process A/B of two builds of a prefill GEMM (kernels_avx2_gemm.c or
 * kernels_avx512_gemm.c), one thread, one shape, the weights' copies rotated (read from
 * memory, as in a prefill). Built by tools/bench_gemm_ab.sh: g0 = OLD, g1 = NEW,
 * alternated every rep; the outputs must be bit-equal (else exit 1). Prints the medians as
 * GFLOP/s and the median of the paired time ratios OLD / NEW (> 1: NEW faster). */
#include "kernels.h"
#include "codec.h"
#include "bench_ab.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int (*G)(float *, const K3Mat *, const float *, int, int, int, int);
int k3_g0(float *, const K3Mat *, const float *, int, int, int, int);
int k3_g1(float *, const K3Mat *, const float *, int, int, int, int);
static float frand(void) { return (float)(rand() % 2001 - 1000) / 997.0f; }
int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: ab ROWS COLS T bf16|mxfp4|bf16c REPS\n"); return 2; }
    int rows = atoi(argv[1]), cols = atoi(argv[2]), T = atoi(argv[3]), reps = atoi(argv[5]);
    int mx = !strcmp(argv[4], "mxfp4"), coded = !strcmp(argv[4], "bf16c");
    if (rows < 1 || cols < 32 || cols % 32 || T < 2 || reps < 1 || reps > 99) return 2;
    /* copies of W rotated over the calls, at least 256 MB in all: every call reads its
     * weights from memory, as the prefill does (an expert's bytes just read from disk) */
    size_t n = (size_t)rows * cols, wb = mx ? n / 2 + n / 32 : 2 * n;
    int nc = (int)(((size_t)256 << 20) / wb) + 1;
    nc = nc > 64 ? 64 : nc;
    K3Mat *Wc = calloc(nc, sizeof *Wc);
    for (int k = 0; k < nc; k++) {
        K3Mat W = { mx ? K3_W_MXFP4 : K3_W_BF16, rows, cols, NULL, NULL, NULL };
        if (mx) {
            uint8_t *w = malloc(n / 2), *s = malloc(n / 32);
            for (size_t i = 0; i < n / 2; i++) w[i] = (uint8_t)rand();
            for (size_t i = 0; i < n / 32; i++) s[i] = (uint8_t)(120 + rand() % 10);
            W.w = w; W.scale = s;
        } else {
            uint16_t *w = malloc(2 * n);
            for (size_t i = 0; i < n; i++) {
                float f = coded ? 0.02f * (frand() + frand() + frand()) : frand();
                uint32_t u;
                memcpy(&u, &f, 4);
                w[i] = (uint16_t)(u >> 16);
            }
            W.w = w;
            if (coded) {                         /* the trunk's coded form (docs/CODEC.md) */
                uint8_t *c = malloc(k3_codec_bound(rows, cols));
                k3_codec_encode(c, w, rows, cols, NULL);
                free(w);
                k3_codec_bind(&W, c);
            }
        }
        Wc[k] = W;
    }
    const K3Mat *Wp = &Wc[0];
    float *X = malloc(sizeof(float) * T * cols), *Y[2];
    for (size_t i = 0; i < (size_t)T * cols; i++) X[i] = frand();
    G g[2] = { k3_g0, k3_g1 };
    double t[2][99], r[99];
    for (int v = 0; v < 2; v++) {
        Y[v] = malloc(sizeof(float) * T * rows);
        if (g[v](Y[v], Wp, X, 0, rows, 0, T)) return 1;
    }
    if (memcmp(Y[0], Y[1], sizeof(float) * T * rows)) { puts("OLD and NEW differ"); return 1; }
    for (int k = 0; k < reps; k++) {
        for (int v = 0; v < 2; v++) {
            int u = (v + k) & 1;                     /* alternate which goes first */
            double s = now();
            g[u](Y[u], &Wc[(2 * k + v) % nc], X, 0, rows, 0, T);
            t[u][k] = now() - s;
        }
        r[k] = t[0][k] / t[1][k];
    }
    qsort(t[0], reps, sizeof(double), cmpd);
    qsort(t[1], reps, sizeof(double), cmpd);
    qsort(r, reps, sizeof(double), cmpd);
    double fl = 2e-9 * rows * cols * T;
    printf("%s %dx%d T=%d: OLD %.1f GFLOP/s, NEW %.1f GFLOP/s, OLD/NEW time %.3f (median of %d)\n",
           argv[4], rows, cols, T, fl / t[0][reps / 2], fl / t[1][reps / 2], r[reps / 2], reps);
    return 0;
}
