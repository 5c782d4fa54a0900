/* bench_matvec_ab.c — in-process A/B of two builds of the decode matvec (T = 1) kernels:
 * kernels_avx512*.c or kernels_avx2.c compiled twice (tools/bench_matvec_ab.sh renames
 * every global symbol of each build: v0 = OLD, v1 = NEW). For each shape of k3
 * bench-kernels, 1 and 2 threads: the two builds alternate (which goes first alternates
 * too) on rotated copies of the weights (>= 384 MB, so read from memory), each call
 * followed by a stream read of as many bytes; outputs must be bit-equal (else exit 1).
 * Threads split rows as k3_matmul does. Prints medians: GB/s of each, the share of the
 * paired stream read, and the median of the paired time ratios OLD / NEW (> 1: NEW
 * faster). */
#include "kernels.h"
#include "codec.h"
#include "pool.h"
#include "bench_ab.h"
#include "bench_shapes.h"
#include "roofline.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const K3KernelOps *k3_mv_v0(void);
const K3KernelOps *k3_mv_v1(void);
static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static float fr(void) { return (float)((rnd() >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f; }

typedef struct { const K3KernelOps *o; float *Y; const K3Mat *W; const float *X; int rc; } Job;
static void task(void *ctx, int i) {
    Job *j = ctx;
    int r0 = i * j->rc, r1 = r0 + j->rc > j->W->rows ? j->W->rows : r0 + j->rc;
    j->o->matmul(j->Y, j->W, j->X, r0, r1, 0, 1);
}
static void mv(const K3KernelOps *o, float *Y, const K3Mat *W, const float *X, int nt) {
    if (nt == 1) { o->matmul(Y, W, X, 0, W->rows, 0, 1); return; }
    int want = 4 * nt, rc = ((W->rows + want - 1) / want + 15) & ~15;   /* as k3_matmul */
    Job j = { o, Y, W, X, rc };
    k3_pool_run(task, &j, (W->rows + rc - 1) / rc);
}
static double med(double *v, int n) { qsort(v, n, sizeof *v, cmpd); return v[n / 2]; }

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    const char *only = argc > 2 ? argv[2] : "";
    if (reps < 1 || reps > 99) return 2;
    const K3KernelOps *o[2] = { k3_mv_v0(), k3_mv_v1() };
    if (!o[0] || !o[1]) { puts("kernels not usable here"); return 2; }
    size_t big = (size_t)256 << 20;
    uint64_t *buf = malloc(big);
    for (size_t i = 0; i < big / 8; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    printf("%s: OLD/NEW = median of paired time ratios (> 1: NEW faster); GB/s effective;"
           " %%bw = share of the stream read paired right after\n", o[1]->name);
    for (int s = 0; s < KB_NSHAPES; s++) {
        const KbShape *sh = &kb_shapes[s];
        if (!strstr(sh->name, only)) continue;
        size_t n = (size_t)sh->rows * sh->cols;
        size_t wb = sh->type == K3_W_MXFP4 ? n / 2 + n / 32 : 2 * n, sb = wb;
        int nc = (int)(((size_t)384 << 20) / wb) + 1;
        K3Mat *W = calloc(nc, sizeof *W);
        for (int k = 0; k < nc; k++) {
            K3Mat m = { sh->type, sh->rows, sh->cols, NULL, NULL, NULL };
            if (sh->type == K3_W_MXFP4) {
                uint8_t *w = malloc(wb);
                for (size_t i = 0; i < n / 2; i++) w[i] = (uint8_t)rnd();
                for (size_t i = 0; i < n / 32; i++) w[n / 2 + i] = (uint8_t)(118 + rnd() % 10);
                m.w = w; m.scale = w + n / 2;
            } else {
                uint16_t *w = malloc(wb);
                for (size_t i = 0; i < n; i++) {
                    float f = sh->type == K3_W_BF16C
                                  ? 0.02f * (fr() + fr() + fr() + fr()) * 0.866f : fr();
                    uint32_t u; memcpy(&u, &f, 4);
                    w[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
                }
                if (sh->type == K3_W_BF16C) {
                    uint8_t *c = malloc(k3_codec_bound(m.rows, m.cols));
                    k3_codec_encode(c, w, m.rows, m.cols, NULL);
                    free(w);
                    k3_codec_bind(&m, c);
                    sb = k3_codec_table_bytes(m.rows) + k3_codec_rowoff(&m)[m.rows];
                } else m.w = w;
            }
            W[k] = m;
        }
        float *X = malloc(sizeof(float) * sh->cols), *Y[2];
        for (int i = 0; i < sh->cols; i++) X[i] = fr();
        Y[0] = malloc(sizeof(float) * sh->rows); Y[1] = malloc(sizeof(float) * sh->rows);
        size_t nw = sb / 8 & ~(size_t)63, roff = 0;
        if (nw < ((size_t)8 << 20)) nw = (size_t)8 << 20;
        for (int nt = 1; nt <= 2; nt++) {
            k3_threads_set(nt);
            for (int v = 0; v < 2; v++) mv(o[v], Y[v], &W[0], X, nt);
            if (memcmp(Y[0], Y[1], sizeof(float) * sh->rows)) {
                printf("%s: OLD and NEW differ\n", sh->name); return 1;
            }
            double t[2][99], q[2][99], r[99];
            for (int k = 0; k < reps; k++) {
                for (int v = 0; v < 2; v++) {
                    int u = (v + k) & 1;
                    double t0 = now();
                    mv(o[u], Y[u], &W[(2 * k + v) % nc], X, nt);
                    t[u][k] = now() - t0;
                    if (roff + nw > big / 8) roff = 0;
                    q[u][k] = sb / t[u][k] / 1e9 / k3_mem_read_once(buf + roff, nw);
                    roff += nw;
                }
                r[k] = t[0][k] / t[1][k];
            }
            double a = wb / med(t[0], reps) / 1e9, b = wb / med(t[1], reps) / 1e9;
            printf("%-17s %d thr: OLD %6.2f GB/s %4.0f%%  NEW %6.2f GB/s %4.0f%%  OLD/NEW %.3f\n",
                   sh->name, nt, a, 100 * med(q[0], reps), b, 100 * med(q[1], reps),
                   med(r, reps));
            fflush(stdout);
        }
        for (int k = 0; k < nc; k++)
            free(W[k].type == K3_W_BF16C ? (void *)W[k].scale : (void *)W[k].w);
        free(W); free(X); free(Y[0]); free(Y[1]);
    }
    return 0;
}
