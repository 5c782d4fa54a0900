/* test_scratch.c — the memory plan's kernel scratch (k3_scratch_bound) holds what every
 * kernel set takes: a coded prefill's scratch once went past a 5 MB plan (shard_stream.sh
 * in CI), and AVX2's GEMM panels were never counted. Each case runs one set's matmul of
 * rows x cols on T tokens on a fresh thread (its slots start empty) and checks each slot
 * it grew against the bound, and the product's bits against the scalar reference. The
 * shapes cross each bound's edges: rows past a row block (128), columns past a column
 * block (1024: lanes park between blocks), T at the coded paths' switch (8, 9), the
 * GEMM's (32), a token block's (72, 73) and past it. F32, BF16, MXFP4 and coded BF16. */
#include "kernels.h"
#include "codec.h"
#include "weight_kinds.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, cases;
#define CHECK(c, ...) do { if (!(c)) { if (fails++ < 20) { printf("FAIL: "); \
        printf(__VA_ARGS__); printf("\n"); } } } while (0)
static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }
static float small(void) { return ((int)(rnd() % 2001) - 1000) / 1024.0f; }

typedef struct {
    const K3KernelOps *ops;
    const K3Mat *W;
    const float *X;
    float *Y;
    int T;
    size_t held[K3_SCRATCH_SLOTS];
} Case;

static void *run(void *arg) {
    Case *c = arg;
    c->ops->matmul(c->Y, c->W, c->X, 0, c->W->rows, 0, c->T);
    for (int s = 0; s < K3_SCRATCH_SLOTS; s++) c->held[s] = k3_scratch_held(s);
    return NULL;
}

static void one(const char *set, const K3Mat *W, const float *X, int T, const float *ref) {
    const K3KernelOps *ops = !strcmp(set, "avx2") ? k3_kernels_avx2()
                             : !strcmp(set, "avx512") ? k3_kernels_avx512() : k3_kernels_neon();
    Case c = { ops, W, X, malloc(sizeof(float) * (size_t)T * W->rows), T,
               { 0 } };
    pthread_t th;
    if (!c.ops || pthread_create(&th, NULL, run, &c)) { CHECK(0, "%s: no thread", set); return; }
    pthread_join(th, NULL);
    size_t bound[K3_SCRATCH_SLOTS] = { 0 };
    k3_scratch_bound(T, W->rows, W->cols, bound);
    for (int s = 0; s < K3_SCRATCH_SLOTS; s++)
        CHECK(c.held[s] <= bound[s], "%s type %d %dx%d T=%d: slot %d holds %zu > bound %zu",
              set, W->type, W->rows, W->cols, T, s, c.held[s], bound[s]);
    CHECK(!memcmp(c.Y, ref, sizeof(float) * (size_t)T * W->rows),
          "%s type %d %dx%d T=%d: not the scalar bits", set, W->type, W->rows, W->cols, T);
    free(c.Y);
    cases++;
}

/* every set the CPU runs */
static void sets(const K3Mat *W, const uint8_t *coded, const float *X, int T, const float *ref,
                 int ti) {
    static const char *names[] = { "avx2", "avx512", "neon" };
    (void)coded; (void)ti;
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++)
        if (k3_kernels_usable(names[j])) one(names[j], W, X, T, ref);
}

int main(void) {
    static const int shapes[][2] = { { 16, 64 }, { 130, 192 }, { 40, 1056 }, { 200, 2080 } };
    static const int Ts[] = { 1, 2, 8, 9, 31, 32, 72, 73, 160 };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        if (weight_kinds_each(shapes[s][0], shapes[s][1], Ts, (int)(sizeof Ts / sizeof Ts[0]),
                              small, rnd, sets)) { CHECK(0, "encode"); return 1; }
    CHECK(cases > 0, "no kernel set ran");
    printf("%d cases: every slot within k3_scratch_bound, the scalar bits%s\n", cases,
           fails ? "" : " (ok)");
    return fails ? 1 : 0;
}
