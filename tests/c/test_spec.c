/* test_spec.c — exact speculative decoding (spec.h, k3_state_mark/rollback) against the
 * plain run on every committed model, greedy and sampled: drafts that are the true
 * continuation, wrong everywhere, right up to a random point, and the n-gram drafter's
 * own; every pass gives the plain run's ids, and every logits row a token is drawn from
 * (the first row after a rejected draft included) has the plain run's bytes. */
#include "engine.h"
#include "spec.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); fails++; } } while (0)

enum { GEN = 40, KMAX = 6 };
static uint64_t rnd = 0x2545F4914F6CDD1Dull;
static int rand_int(int n) {
    rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17;
    return (int)(rnd % (uint64_t)n);
}

/* The plain run: ids and, per generated position, the logits its token is drawn from. */
static int plain(K3Engine *e, const int *p, int np, const SamplerParams *sp, int *ids,
                 float *lg) {
    char err[512];
    const int V = e->m.cfg.vocab_size;
    int seq[64 + GEN], n = np, g = 0;
    memcpy(seq, p, sizeof(int) * np);
    K3State *s = k3_state_new(&e->m);
    Sampler smp; sampler_init(&smp, sp, 77);
    k3_prefill(e, s, seq, n, 0, lg, 0, err, sizeof err);
    for (;;) {
        ids[g] = seq[n++] = sampler_sample(&smp, lg + (size_t)g * V, V);
        if (++g == GEN || ids[g - 1] == e->m.cfg.eos_token_id) break;
        k3_forward(e, s, seq + n - 1, 1, lg + (size_t)g * V, 0, err, sizeof err);
    }
    sampler_free(&smp); k3_state_free(&e->m, s);
    return g;
}

/* mode 0: the true continuation; 1: wrong everywhere; 2: right up to a random point;
 * 3: the drafter (n-grams of the sequence). Returns the passes with a rejected draft. */
static int spec_run(K3Engine *e, const int *p, int np, const SamplerParams *sp, int mode,
                    const int *want, int nwant, const float *want_lg, const char *what) {
    char err[512];
    const int V = e->m.cfg.vocab_size;
    int seq[64 + GEN + KMAX], n = np, g = 0, pend[KMAX + 1], np_ = 0, ip = 0, draft[KMAX];
    int rejected = 0, bad_ids = 0, bad_lg = 0;
    float *lg = malloc(sizeof(float) * (KMAX + 1) * V);
    memcpy(seq, p, sizeof(int) * np);
    K3State *s = k3_state_new(&e->m);
    Sampler smp; sampler_init(&smp, sp, 77);
    K3Spec spec; k3_spec_init(&spec, &e->m, NULL, 0, KMAX);
    k3_prefill(e, s, seq, n, 0, lg, 0, err, sizeof err);
    int fresh = 1;                            /* lg row 0 holds the logits of position g */
    for (;;) {
        int next;
        if (ip < np_) next = pend[ip++];
        else {
            if (fresh && memcmp(lg, want_lg + (size_t)g * V, sizeof(float) * V)) bad_lg++;
            next = sampler_sample_at(&smp, lg, V, g);
        }
        bad_ids += g >= nwant || next != want[g];
        seq[n++] = next;
        if (++g >= nwant || next == e->m.cfg.eos_token_id) break;
        if (ip < np_) continue;
        int room = nwant - g - 1, k = 0;
        if (room > 0) {
            if (mode == 3) k = k3_spec_draft(&spec, seq, n, np, room, draft);
            else {
                k = 1 + rand_int(KMAX);
                if (k > room) k = room;
                const int cut = mode == 0 ? k : mode == 1 ? 0 : rand_int(k + 1);
                for (int j = 0; j < k; j++)
                    draft[j] = j < cut ? want[g + j] : (want[g + j] + 1 + rand_int(50)) % V;
            }
        }
        if (k == 0) {
            k3_forward(e, s, seq + n - 1, 1, lg, 0, err, sizeof err);
            fresh = 1; np_ = ip = 0;
            continue;
        }
        /* first a logged forward kept at 0 positions: it must leave the state as it was
         * (the verify pass below then gives the plain bits only if it did) */
        CHECK(k3_state_mark(&e->m, s, k + 1) == 0, "mark");
        int rc = k3_forward(e, s, seq + n - 1, 1, lg, 0, err, sizeof err);
        CHECK(rc == 0 && k3_state_rollback(&e->m, s, 0) == 0, "rollback to 0");
        CHECK(k3_state_mark(&e->m, s, k + 1) == 0, "mark");
        memcpy(seq + n, draft, sizeof(int) * k);
        rc = k3_forward(e, s, seq + n - 1, k + 1, lg, 1, err, sizeof err);
        CHECK(rc == 0, "%s: verify pass: %s", what, err);
        np_ = k3_spec_accept(&spec, &e->m, s, &smp, g, draft, k, lg, pend);
        ip = 0; fresh = 0;
        for (int j = 0; j < np_; j++)        /* every row a token was drawn from */
            if (g + j < nwant && memcmp(lg + (size_t)j * V, want_lg + (size_t)(g + j) * V,
                                        sizeof(float) * V)) bad_lg++;
        rejected += np_ - 1 < k;
        CHECK(s->pos == n + np_ - 1, "%s: state holds %d positions, want %d", what, s->pos,
              n + np_ - 1);
    }
    CHECK(g == nwant && !bad_ids, "%s: %d ids of %d differ from the plain run", what, bad_ids,
          nwant);
    CHECK(!bad_lg, "%s: %d logits rows differ from the plain run", what, bad_lg);
    if (mode == 0) CHECK(spec.accepted == spec.drafted, "%s: a true draft rejected", what);
    if (mode == 1) CHECK(spec.accepted == 0 && spec.passes > 0, "%s: a wrong draft kept", what);
    sampler_free(&smp); k3_state_free(&e->m, s); free(lg);
    return rejected;
}

static void test_dir(const char *dir) {
    char err[4096];
    K3Engine e;
    int rc = k3_engine_open_resident(&e, dir, 64, 256, err, sizeof err);
    CHECK(rc == 0, "%s: open: %s", dir, err);
    if (rc) return;
    const int V = e.m.cfg.vocab_size;
    const int prompt[] = { 768, 12, 345, 67, 89, 101, 500, 23, 400, 7, 650, 3, 12, 345, 67 };
    const int np = (int)(sizeof prompt / sizeof *prompt);
    float *lg = malloc(sizeof(float) * (GEN + 1) * V);
    int ids[GEN];
    const char *mn[4] = { "true draft", "wrong draft", "partly right", "n-gram drafter" };
    for (int samp = 0; samp < 2; samp++) {
        SamplerParams sp; sampler_defaults(&sp);
        if (samp) sp.temperature = 0.8; else sp.greedy = 1;
        int ng = plain(&e, prompt, np, &sp, ids, lg), rej = 0;
        for (int mode = 0; mode < 4; mode++) {
            char what[128];
            snprintf(what, sizeof what, "%s %s %s", dir, samp ? "sampled" : "greedy", mn[mode]);
            int r = spec_run(&e, prompt, np, &sp, mode, ids, ng, lg, what);
            if (mode) rej += r;
        }
        CHECK(rej > 3, "%s: only %d rejected drafts: the rollback is barely tested", dir, rej);
        printf("ok %s %s: %d ids; true, wrong, partly right and n-gram drafts give the plain "
               "ids and logits bytes (%d rejected drafts rolled back)\n", dir,
               samp ? "sampled" : "greedy", ng, rej);
    }
    free(lg);
    k3_engine_close(&e);
}

int main(void) {
    k3_threads_set(2);
    test_dir("tests/models/tiny5");
    test_dir("tests/models/tiny4");
    test_dir("tests/models/tiny5f");
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("test_spec: ok\n");
    return 0;
}
