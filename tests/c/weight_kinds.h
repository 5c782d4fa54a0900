/* weight_kinds.h — one rows x cols matrix in the four weight kinds the kernels take, for the
 * tests that run every kind against the scalar reference (test_scratch.c,
 * test_matmul_into.c): F32 values from val(), BF16 their top halves, MXFP4 random nibbles
 * with scale bytes 120..129, coded BF16 the BF16 encoded (codec.h); and xrows rows of X.
 * weight_kinds_each runs a test's case on every kind at every T with the scalar product. */
#ifndef K3_TEST_WEIGHT_KINDS_H
#define K3_TEST_WEIGHT_KINDS_H
#include "codec.h"
#include "kernels.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *wf, *X;
    uint16_t *wb;
    uint8_t *mx, *coded;
    K3Mat M[4];              /* F32, BF16, MXFP4, coded BF16 */
} WeightKinds;

/* 0, or -1 when the encoder refuses the shape */
static int weight_kinds(WeightKinds *k, int rows, int cols, int xrows, float (*val)(void),
                        uint32_t (*bits)(void)) {
    const size_t n = (size_t)rows * cols;
    k->wf = malloc(n * 4); k->X = malloc(sizeof(float) * (size_t)xrows * cols);
    k->wb = malloc(n * 2);
    k->mx = malloc(n / 2 + n / 32); k->coded = malloc(k3_codec_bound(rows, cols));
    for (size_t i = 0; i < n; i++) {
        k->wf[i] = val();
        uint32_t u;
        memcpy(&u, &k->wf[i], 4);
        k->wb[i] = (uint16_t)(u >> 16);
    }
    for (size_t i = 0; i < n / 2; i++) k->mx[i] = (uint8_t)bits();
    for (size_t i = 0; i < n / 32; i++) k->mx[n / 2 + i] = (uint8_t)(120 + bits() % 10);
    for (size_t i = 0; i < (size_t)xrows * cols; i++) k->X[i] = val();
    const K3Mat M[4] = { { K3_W_F32, rows, cols, k->wf, NULL, NULL },
                         { K3_W_BF16, rows, cols, k->wb, NULL, NULL },
                         { K3_W_MXFP4, rows, cols, k->mx, k->mx + n / 2, NULL },
                         { K3_W_BF16C, rows, cols, NULL, NULL, NULL } };
    memcpy(k->M, M, sizeof M);
    if (!k3_codec_encode(k->coded, k->wb, rows, cols, NULL)) return -1;
    k3_codec_bind(&k->M[3], k->coded);
    return 0;
}

static void weight_kinds_free(WeightKinds *k) {
    free(k->wf); free(k->X); free(k->wb); free(k->mx); free(k->coded);
}

/* A case: W (coded: its stored bytes when BF16C) on the first T rows of X, ref the scalar
 * kernels' product [T][rows]; ti is T's index in the list */
typedef void (*WeightCase)(const K3Mat *W, const uint8_t *coded, const float *X, int T,
                           const float *ref, int ti);

/* each() for every kind of a rows x cols matrix and every T of Ts; -1 when the encoder
 * refuses the shape */
static int weight_kinds_each(int rows, int cols, const int *Ts, int nT, float (*val)(void),
                             uint32_t (*bits)(void), WeightCase each) {
    int maxT = 1;
    for (int t = 0; t < nT; t++) maxT = Ts[t] > maxT ? Ts[t] : maxT;
    WeightKinds wk;
    if (weight_kinds(&wk, rows, cols, maxT, val, bits)) { weight_kinds_free(&wk); return -1; }
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < nT; t++) {
            float *ref = malloc(sizeof(float) * (size_t)Ts[t] * rows);
            k3_kernels_scalar()->matmul(ref, &wk.M[k], wk.X, 0, rows, 0, Ts[t]);
            each(&wk.M[k], wk.coded, wk.X, Ts[t], ref, t);
            free(ref);
        }
    weight_kinds_free(&wk);
    return 0;
}
#endif
