/* test_batch.c — the multi-sequence forward (k3_forward_seqs) against solo runs: several
 * sequences of different lengths fed in one step each time, on a random schedule that
 * mixes prefill chunks of one sequence with single tokens of others, give every sequence
 * the logits bytes of its solo run (one prefill of the whole sequence, all rows). The same
 * with the states in a state file (statefile.h: KDA states, and the MLA caches too), where
 * a step moves only its sequences' records; and a state reset there starts from zeros. */
#include "engine_fixture.h"
#include "statefile.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NSEQ = 5, MAXLEN = 24, MAXT = 16 };

static void test_dir(const char *dir, int mode, uint64_t seed) {
    char err[4096];
    rnd = seed;                       /* each model's schedule, the same for every mode */
    K3Engine e;
    int rc = fixture_open(&e, dir, MAXT, 64);
    if (rc) return;
    const K3Model *m = &e.m;
    const int V = m->cfg.vocab_size;
    const int len[NSEQ] = { 1, 7, 24, 3, 12 };
    int ids[NSEQ][MAXLEN];
    float *solo[NSEQ], *got = malloc(sizeof(float) * MAXT * V);
    for (int q = 0; q < NSEQ; q++) {
        for (int i = 0; i < len[q]; i++) ids[q][i] = (q * 37 + i * 11 + 5) % V;
        solo[q] = malloc(sizeof(float) * (size_t)len[q] * V);
        K3State *s = k3_state_new(m);
        rc = k3_prefill(&e, s, ids[q], len[q], 0, solo[q], 1, err, sizeof err);
        CHECK(rc == 0, "%s: solo prefill %d: %s", dir, q, err);
        k3_state_free(m, s);
    }
    K3State *st[NSEQ];
    int done[NSEQ] = { 0 }, steps = 0, multi = 0, bad = 0;
    K3StateFile *sf = NULL;
    if (mode) {
        sf = k3_statefile_open(&m->cfg, mode, NSEQ, 64, NULL, err, sizeof err);
        CHECK(sf, "%s: state file: %s", dir, err);
        if (!sf) return;
        e.pager = k3_statefile_pager(sf);
    }
    const int in_file = mode == K3_STATES_ALL ? K3_STATE_KDA_FILE | K3_STATE_MLA_FILE :
                        mode ? K3_STATE_KDA_FILE : 0;
    for (int q = 0; q < NSEQ; q++) {
        st[q] = k3_state_new_in(m, in_file);
        if (sf) k3_statefile_attach(sf, st[q], q);
    }
    for (;;) {
        K3Seq seq[NSEQ];
        int who[NSEQ], n = 0, T = 0;
        for (int q = 0; q < NSEQ; q++) {
            if (done[q] == len[q] || rand_int(4) == 0) continue;   /* some sit a step out */
            int k = 1 + (rand_int(3) == 0 ? rand_int(5) : 0);       /* mostly one token */
            if (k > len[q] - done[q]) k = len[q] - done[q];
            if (T + k > MAXT) continue;
            seq[n] = (K3Seq){ st[q], ids[q] + done[q], k, rand_int(2) };
            who[n++] = q; T += k;
        }
        int left = 0;
        for (int q = 0; q < NSEQ; q++) left += len[q] - done[q];
        if (!left) break;
        if (!n) continue;
        rc = k3_forward_seqs(&e, seq, n, got, err, sizeof err);
        CHECK(rc == 0, "%s: step %d: %s", dir, steps, err);
        if (rc) break;
        steps++; multi += n > 1;
        const float *row = got;
        for (int i = 0; i < n; i++) {
            const int q = who[i], k = seq[i].T, first = seq[i].all_logits ? 0 : k - 1;
            for (int t = first; t < k; t++, row += V)
                if (memcmp(row, solo[q] + (size_t)(done[q] + t) * V, sizeof(float) * V)) {
                    if (!bad++) CHECK(0, "%s: sequence %d position %d: logits differ from its "
                                      "solo run (step %d, %d sequences)", dir, q, done[q] + t,
                                      steps, n);
                }
            CHECK(st[q]->pos == done[q] + k, "%s: pos not advanced", dir);
            done[q] += k;
        }
    }
    CHECK(multi > 5, "%s: only %d multi-sequence steps", dir, multi);
    /* refusals: more tokens than the plan, an empty share */
    K3Seq big[2] = { { st[0], ids[2], MAXT, 0 }, { st[1], ids[2], 1, 0 } };
    CHECK(k3_forward_seqs(&e, big, 2, got, err, sizeof err) == K3_ERR_RUNTIME,
          "%s: %d tokens over a plan of %d accepted", dir, MAXT + 1, MAXT);
    big[1].T = 0;
    CHECK(k3_forward_seqs(&e, big + 1, 1, got, err, sizeof err) == K3_ERR_RUNTIME,
          "%s: a share of 0 tokens accepted", dir);
    /* a reset state (its records in the file are stale) starts again from zeros */
    for (int q = 1; q < NSEQ; q += 2) {
        k3_state_reset(m, st[q]);
        float *again = malloc(sizeof(float) * (size_t)len[q] * V);
        rc = k3_prefill(&e, st[q], ids[q], len[q], 3, again, 1, err, sizeof err);
        CHECK(rc == 0, "%s: prefill after a reset: %s", dir, err);
        CHECK(!rc && !memcmp(again, solo[q], sizeof(float) * (size_t)len[q] * V),
              "%s: sequence %d after a reset: logits differ from its solo run", dir, q);
        free(again);
    }
    static const char *const where[3] = { "states resident", "KDA states in a state file",
                                          "KDA states and MLA caches in a state file" };
    if (!bad) printf("ok %s: %d sequences (lengths 1..24) in %d steps (%d with several "
                     "sequences), %s: every row's logits bytes equal its solo run\n", dir, NSEQ,
                     steps, multi, where[mode]);
    for (int q = 0; q < NSEQ; q++) { k3_state_free(m, st[q]); free(solo[q]); }
    k3_statefile_close(sf);
    free(got);
    k3_engine_close(&e);
}

int main(void) {
    k3_threads_set(2);
    const int nd = (int)(sizeof fixture_models / sizeof *fixture_models);
    for (int d = 0; d < nd; d++)
        for (int mode = K3_STATES_RESIDENT; mode <= K3_STATES_ALL; mode++)
            test_dir(fixture_models[d], mode, 0x1234567 + 0x9e37 * (uint64_t)d);
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("test_batch: ok\n");
    return 0;
}
