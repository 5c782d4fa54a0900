/* run_draft.c — one prompt with a DSpark draft (run_draft.h; spec: K3_DSPARK.md §5). */
#include "run_draft.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct RunDraft {
    K3Tap tap;               /* first: the engine calls it; it passes the copy on */
    K3Tap *inner;            /* the draft's own tap */
    K3DSpark *d;
    K3Engine *e;
    int block, vocab;
    int prefill;             /* every forward's rows are committed (the prompt) */
    int failed; char err[512];
    int *oracle; int n_oracle, right;     /* the test hook (K3_TEST_DRAFT_ORACLE) */
    RunDraftStats st;
};

static void tap_fn(K3Tap *t, int L, const float *p, int T, int H) {
    RunDraft *r = (RunDraft *)t;
    r->inner->fn(r->inner, L, p, T, H);
}

/* The prompt's forwards (one per prefill chunk): their positions go into the context. */
static void tap_done(K3Tap *t, int T) {
    RunDraft *r = (RunDraft *)t;
    if (!r->prefill || r->failed) return;
    int rows = 0;
    const float *taps = k3_dspark_tap_rows(r->d, &rows);
    const double t0 = k3_now();
    if (rows != T) {
        snprintf(r->err, sizeof r->err, "the draft's tap holds %d rows of a %d-row forward",
                 rows, T);
        r->failed = 1;
    } else if (k3_dspark_ingest(r->d, taps, T, r->err, sizeof r->err)) r->failed = 1;
    r->st.seconds += k3_now() - t0;
}

/* K3_TEST_DRAFT_ORACLE=IDS (the run's own generated ids) replaces each block's drafts by
 * the target's continuation after the draft forward ran, the first K3_TEST_DRAFT_RIGHT of
 * them right (default all) and the rest wrong: the payoff at a set acceptance (random
 * weights accept nothing). The output is the same whatever the drafts. */
static int oracle_init(RunDraft *r, char *err, size_t errlen) {
    const char *ids = getenv("K3_TEST_DRAFT_ORACLE"), *right = getenv("K3_TEST_DRAFT_RIGHT");
    if (!ids || !*ids) return 0;
    if (k3_parse_ids(ids, &r->oracle, &r->n_oracle, err, errlen)) return -1;
    r->right = right && *right ? atoi(right) : K3_DSPARK_MAX_N;
    return 0;
}

int run_draft_open(RunDraft **out, const char *dir, K3Engine *e, int block, int quiet,
                   char *err, size_t errlen) {
    RunDraft *r = calloc(1, sizeof *r);
    if (!r) { snprintf(err, errlen, "out of memory"); return 1; }
    int rc = k3_dspark_open(&r->d, dir, e, quiet, err, errlen);
    if (rc) { free(r); return rc; }
    if (oracle_init(r, err, errlen)) { run_draft_close(r); return 2; }
    r->e = e;
    r->block = block;
    r->vocab = e->m.cfg.vocab_size;
    r->inner = k3_dspark_tap(r->d);
    r->tap.fn = tap_fn;
    r->tap.done = tap_done;
    r->prefill = 1;
    e->tap = &r->tap;
    *out = r;
    return 0;
}

int run_draft_prefilled(RunDraft *r, char *err, size_t errlen) {
    r->prefill = 0;
    if (r->failed) { snprintf(err, errlen, "draft: %s", r->err); return 1; }
    return 0;
}

int run_draft_block(RunDraft *r, int anchor, long gen_pos, int room, int *draft, char *err,
                    size_t errlen) {
    if (room <= 0) return 0;
    int d[K3_DSPARK_MAX_N];
    const double t0 = k3_now();
    if (k3_dspark_draft(r->d, anchor, r->block, d, NULL, NULL, err, errlen)) return -1;
    r->st.seconds += k3_now() - t0;
    r->st.blocks++;
    const int k = room < r->block ? room : r->block;
    for (int j = 0; j < k; j++) {
        draft[j] = d[j];
        if (r->oracle && gen_pos + j < r->n_oracle) {
            const int id = r->oracle[gen_pos + j];
            draft[j] = j < r->right ? id : (id + 1) % r->vocab;
        }
    }
    return k;
}

int run_draft_keep(RunDraft *r, int k, int n_keep, char *err, size_t errlen) {
    int rows = 0;
    const float *taps = k3_dspark_tap_rows(r->d, &rows);
    if (rows != k + 1 || n_keep < 1 || n_keep > rows) {
        snprintf(err, errlen, "draft: %d tap rows after a forward of %d, %d kept", rows, k + 1,
                 n_keep);
        return 1;
    }
    r->st.proposed += k; r->st.accepted += n_keep - 1; r->st.rows += k + 1;
    const double t0 = k3_now();
    const int rc = k3_dspark_ingest(r->d, taps, n_keep, err, errlen);
    r->st.seconds += k3_now() - t0;
    return rc ? 1 : 0;
}

const RunDraftStats *run_draft_stats(const RunDraft *r) { return &r->st; }

void run_draft_close(RunDraft *r) {
    if (!r) return;
    if (r->e && r->e->tap == &r->tap) r->e->tap = NULL;
    k3_dspark_close(r->d);
    free(r->oracle);
    free(r);
}
