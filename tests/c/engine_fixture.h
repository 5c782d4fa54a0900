/* engine_fixture.h — the setup the engine tests share (test_batch.c, test_spec.c): the
 * CHECK macro and its failure count, a deterministic xorshift (define FIXTURE_SEED before
 * including for another schedule), the committed models, and opening one resident. */
#ifndef K3_ENGINE_FIXTURE_H
#define K3_ENGINE_FIXTURE_H
#include "engine.h"
#include <stdint.h>
#include <stdio.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); fails++; } } while (0)

#ifndef FIXTURE_SEED
#define FIXTURE_SEED 0x1234567u
#endif
static uint64_t rnd = FIXTURE_SEED;
static int rand_int(int n) {          /* deterministic: the same schedule every run */
    rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17;
    return (int)(rnd % (uint64_t)n);
}

static const char *const fixture_models[] = {
    "tests/models/tiny5", "tests/models/tiny4", "tests/models/tiny5f",
};

/* The model in dir, resident, planned for max_T tokens a forward and ctx positions;
 * 0, or the error code with a failed CHECK naming it. */
static int fixture_open(K3Engine *e, const char *dir, int max_T, int ctx) {
    char err[4096];
    const int rc = k3_engine_open_resident(e, dir, max_T, ctx, err, sizeof err);
    CHECK(rc == 0, "%s: open: %s", dir, err);
    return rc;
}

/* main's end: every committed model through test_dir, then the verdict. */
static inline int fixture_run(const char *name, void (*test_dir)(const char *)) {
    k3_threads_set(2);
    for (size_t i = 0; i < sizeof fixture_models / sizeof *fixture_models; i++)
        test_dir(fixture_models[i]);
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("%s: ok\n", name);
    return 0;
}
#endif
