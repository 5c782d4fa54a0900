/* test_spec.c — exact speculative decoding (spec.h, k3_state_mark/rollback) against the
 * plain run on every committed model, greedy and sampled: drafts that are the true
 * continuation, wrong everywhere, right up to a random point, and the n-gram drafter's
 * own; every pass gives the plain run's ids, and every logits row a token is drawn from
 * (the first row after a rejected draft included) has the plain run's bytes. */
#define FIXTURE_SEED 0x2545F4914F6CDD1Dull
#include "engine_fixture.h"
#include "spec.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GEN = 40, KMAX = 6 };

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
 * 3: the drafter (n-grams of the sequence); 4: the drafter with a reference that is wrong
 * everywhere (it must back off: a handful of passes over GEN steps). Returns the passes
 * with a rejected draft. */
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
    int wrong[GEN];
    for (int j = 0; j < GEN && j < nwant; j++) wrong[j] = (want[j] + 7) % V;
    K3Spec spec;
    k3_spec_init(&spec, &e->m, mode == 4 ? wrong : NULL, mode == 4 ? nwant : 0, KMAX);
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
            if (mode >= 3) k = k3_spec_draft(&spec, seq, n, np, room, draft);
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
    if (mode == 4) CHECK(spec.passes >= 1 && spec.passes - spec.accepted <= 4,
                         "%s: %ld passes (%ld accepted) over %d steps: no back-off", what,
                         spec.passes, spec.accepted, nwant);
    sampler_free(&smp); k3_state_free(&e->m, s); free(lg);
    return rejected;
}

/* A pass rolled back once (as k3_spec_accept does), then again to fewer positions before
 * any forward (chat, when a reply ends inside the accepted drafts): the next logits are
 * those of a run that fed only the positions kept the second time. */
static void rollback_twice(K3Engine *e, const int *p, int np, const char *dir) {
    char err[512];
    const int V = e->m.cfg.vocab_size, x[5] = { 5, 77, 301, 9, 640 };
    int seq[80];
    float *want = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * 5 * V);
    memcpy(seq, p, sizeof(int) * np); memcpy(seq + np, x, sizeof x);
    K3State *a = k3_state_new(&e->m), *b = k3_state_new(&e->m);
    int rc = k3_prefill(e, a, seq, np + 3, 0, want, 0, err, sizeof err);  /* p, x0..x2 */
    rc |= k3_prefill(e, b, seq, np, 0, got, 0, err, sizeof err);
    rc |= k3_state_mark(&e->m, b, 5);
    rc |= k3_forward(e, b, x, 5, got, 1, err, sizeof err);
    rc |= k3_state_rollback(&e->m, b, 4) | k3_state_rollback(&e->m, b, 2);
    CHECK(rc == 0 && b->pos == np + 2, "%s: rollback twice: rc %d, pos %d", dir, rc, b->pos);
    rc = k3_forward(e, b, x + 2, 1, got, 0, err, sizeof err);
    CHECK(rc == 0 && !memcmp(got, want, sizeof(float) * V),
          "%s: after rolling back twice the logits differ from the plain run's", dir);
    k3_state_free(&e->m, a); k3_state_free(&e->m, b); free(want); free(got);
}

static void test_dir(const char *dir) {
    K3Engine e;
    if (fixture_open(&e, dir, 64, 256)) return;
    const int V = e.m.cfg.vocab_size;
    const int prompt[] = { 768, 12, 345, 67, 89, 101, 500, 23, 400, 7, 650, 3, 12, 345, 67 };
    const int np = (int)(sizeof prompt / sizeof *prompt);
    float *lg = malloc(sizeof(float) * (GEN + 1) * V);
    int ids[GEN];
    const char *mn[5] = { "true draft", "wrong draft", "partly right", "n-gram drafter",
                          "a wrong reference" };
    for (int samp = 0; samp < 2; samp++) {
        SamplerParams sp; sampler_defaults(&sp);
        if (samp) sp.temperature = 0.8; else sp.greedy = 1;
        int ng = plain(&e, prompt, np, &sp, ids, lg), rej = 0;
        for (int mode = 0; mode < 5; mode++) {
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
    rollback_twice(&e, prompt, np, dir);
    free(lg);
    k3_engine_close(&e);
}

int main(void) { return fixture_run("test_spec", test_dir); }
