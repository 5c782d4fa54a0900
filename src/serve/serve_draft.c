/* serve_draft.c — k3 serve --draft DIR (docs/DRAFT.md, "In the server"): each request
 * drafts from its own DSpark context (its scheduler slot's loop), fed from its rows of
 * every step's taps; the anchor and its block go into the step whole, and the verify
 * keeps what the request's own sampler draws there (spec.h), so every reply is the one
 * without a draft. Under a constraint (JSON mode, a grammar, a strict tool's arguments)
 * each verified row is masked as a plain step masks it, along the drafts (a draft the
 * constraint refuses is never drawn, so the block is cut there). With strict tools only
 * the arguments draft: elsewhere the server may write markup between two tokens. A request
 * that resumes a kept state (a prefix, --state-dir's files) drafts at once from the draft
 * context kept with it (serve_gen.c, serve_disk.c); one kept without it (no --draft,
 * another draft) takes plain steps, as do the 2nd.. choices of n (copies of the first's
 * prompt state) and the reply test hook's ids. */
#include "serve_gen.h"
#include "comm.h"
#include "draft_loop.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Over N ranks (k3 serve under mpirun) rank 0 runs the requests and the others replay its
 * scheduler (follow.c); the draft's calls each request's slot makes are sent too, as the
 * scheduler's client records, and every other rank makes them on its own loops and taps (a
 * step's rows in the same order), so the draft forward's lm_head collectives and rank 0's
 * choices (the verify length, the pause) line up: [op, slot, a, b, c, d] then, for a
 * restore, the kept context's rows. */
enum { SD_RESET = 1, SD_RESTORE, SD_BLOCK, SD_INGEST, SD_KEEP };
static void send_rec(const Gen *g, int op, int a, int b, int c, const KeptDraft *d) {
    if (k3_comm_size() == 1) return;
    const int32_t v[6] = { op, g->q->slot, a, b, c, 0 };
    if (!d) { k3_sched_user(g->s->sch, g->q, v, sizeof v); return; }
    float *p = malloc(sizeof v + sizeof(float) * d->n);
    if (!p) k3_comm_abort(1, "out of memory for a draft context's record");
    memcpy(p, v, sizeof v);
    memcpy(p + 6, d->rows, sizeof(float) * d->n);
    k3_sched_user(g->s->sch, g->q, p, sizeof v + sizeof(float) * d->n);
    free(p);
}

/* The row of the step's taps where g's rows begin. */
static int tap_row(const Gen *g, const float *taps) {
    int W = 1;
    const float *t0 = k3_draft_taps(g->s->dl[0], NULL, &W);
    return (int)((taps - t0) / W);
}

static int restore_rows(K3DraftLoop *dl, const float *q, size_t n, int P);

/* A follower: rank 0's draft call (a failure here is rank 0's too: that slot drafts no more
 * there, so it gets no more calls). */
static void replay(void *ctx, K3State *st, const void *p, size_t n) {
    Server *s = ctx;
    int32_t v[6];
    (void)st;
    if (n < sizeof v) k3_comm_abort(1, "the mirror: a draft record of %zu bytes", n);
    memcpy(v, p, sizeof v);
    if (v[1] < 0 || v[1] >= k3_sched_slots(s->sch))
        k3_comm_abort(1, "the mirror: a draft record for slot %d", (int)v[1]);
    K3DraftLoop *dl = s->dl[v[1]];
    int W = 1, d[K3_DSPARK_MAX_N], rc = 0;
    const float *tp = k3_draft_taps(s->dl[0], NULL, &W);
    char err[512] = "";
    switch (v[0]) {
    case SD_RESET: k3_draft_reset(dl); break;
    case SD_RESTORE:
        k3_draft_reset(dl);
        rc = restore_rows(dl, (const float *)p + 6, (n - sizeof v) / sizeof(float), v[2]);
        break;
    case SD_BLOCK: rc = k3_draft_block(dl, v[2], v[3], v[4], d, err, sizeof err) < 0; break;
    case SD_INGEST: rc = k3_draft_ingest(dl, tp + (size_t)v[2] * W, v[3], err, sizeof err); break;
    case SD_KEEP:
        rc = k3_draft_keep_rows(dl, tp + (size_t)v[2] * W, v[3], v[4], err, sizeof err);
        break;
    default: k3_comm_abort(1, "the mirror: draft record %d", (int)v[0]);
    }
    if (rc) fprintf(stderr, "k3: serve: rank %d: slot %d: draft: %s\n", k3_comm_rank(),
                    (int)v[1], err[0] ? err : "its context was not restored");
}

int serve_draft_open(Server *s, char *err, size_t errlen) {
    const int n = k3_sched_slots(s->sch);
    K3Spec cost;                               /* one more verified position's cost */
    k3_spec_init(&cost, &s->eng.m, NULL, 0, 0);
    s->dl = calloc((size_t)n, sizeof *s->dl);
    if (!s->dl) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    const int rc = k3_draft_open_seqs(s->dl, n, s->draft_dir, &s->eng, s->draft_block,
                                      s->draft_fixed, cost.step_cost, k3_comm_rank() > 0,
                                      err, errlen);
    if (rc) { free(s->dl); s->dl = NULL; }
    else if (k3_sched_follower(s->sch)) k3_sched_on_user(s->sch, replay, s);
    return rc;
}

/* A kept state's draft context (q[0..n): chat_state.c's layout) into dl for P positions: 0,
 * or -1 (another shape, or not restored: the request takes plain steps). */
static int restore_rows(K3DraftLoop *dl, const float *q, size_t n, int P) {
    int nl, kl, dr;
    k3_draft_ctx_shape(dl, &nl, &kl, &dr);
    char err[256];
    if (!q || P <= 0 || n != (size_t)nl * P * (size_t)(kl + dr) ||
        k3_draft_restore(dl, P, err, sizeof err))
        return -1;
    for (int l = 0; l < nl; l++) {
        memcpy(k3_draft_ctx_rows(dl, l, 0), q, sizeof(float) * (size_t)P * kl);
        q += (size_t)P * kl;
        memcpy(k3_draft_ctx_rows(dl, l, 1), q, sizeof(float) * (size_t)P * dr);
        q += (size_t)P * dr;
    }
    return 0;
}

static int restore(K3DraftLoop *dl, const Kept *k, int P) {
    if (!k || k->nfed != (size_t)P || k->draft.id != k3_draft_identity(dl)) return -1;
    return restore_rows(dl, k->draft.rows, k->draft.n, P);
}

void serve_draft_begin(Gen *g) {
    Server *s = g->s;
    k3_spec_init(&g->sp, &s->eng.m, NULL, 0, K3_DSPARK_MAX_N);
    g->dl = NULL;
    const Kept *from = g->from;
    g->from = NULL;
    if (!s->dl || g->waiting) return;
    /* the rows a verify drew from: the anchor's and up to K3_DSPARK_MAX_N drafts' */
    g->prow = malloc(sizeof(float) * (K3_DSPARK_MAX_N + 1) * (size_t)s->eng.m.cfg.vocab_size);
    if (!g->prow) return;                      /* (out of memory: plain steps) */
    K3DraftLoop *dl = s->dl[g->q->slot];
    k3_draft_reset(dl);
    const int P = g->q->st->pos;               /* resumed: from the kept state's context */
    if (P && restore(dl, from, P)) { k3_draft_reset(dl); return; }
    g->dl = dl;
    if (P) send_rec(g, SD_RESTORE, P, 0, 0, &from->draft);   /* over N ranks: theirs too */
    else send_rec(g, SD_RESET, 0, 0, 0, NULL);
}

KeptDraft serve_draft_copy(const Gen *g, size_t P) {
    KeptDraft d = { NULL, 0, 0 };
    if (!g->dl || !P || (size_t)k3_draft_pos(g->dl) < P) return d;
    int nl, kl, dr;
    k3_draft_ctx_shape(g->dl, &nl, &kl, &dr);
    d.n = (size_t)nl * P * (size_t)(kl + dr);
    if (!(d.rows = malloc(sizeof(float) * d.n))) { d.n = 0; return d; }
    d.id = k3_draft_identity(g->dl);
    float *q = d.rows;
    for (int l = 0; l < nl; l++) {
        memcpy(q, k3_draft_ctx_rows(g->dl, l, 0), sizeof(float) * P * kl);
        q += P * kl;
        memcpy(q, k3_draft_ctx_rows(g->dl, l, 1), sizeof(float) * P * dr);
        q += P * dr;
    }
    return d;
}

int serve_draft_shape(const Server *s, int *layers, int *kv_lora, int *rope, uint64_t *id) {
    if (!s->dl) return 0;
    k3_draft_ctx_shape(s->dl[0], layers, kv_lora, rope);
    *id = k3_draft_identity(s->dl[0]);
    return 1;
}

static int min_i(int a, int b) { return a < b ? a : b; }

/* The id that ends what the constraint governs (serve_gen.c's sample). */
static int end_id(const Gen *g) {
    const Server *s = g->s;
    return g->in_args ? s->ids.close
         : g->j->req.kind == REQ_CHAT ? s->ids.eom : s->eng.m.cfg.eos_token_id;
}

/* The scheduler's callback: up to room drafts after the anchor g->dv[0]. */
static int draft(K3SchedSeq *q, int room) {
    Gen *g = q->user;
    Server *s = g->s;
    const int pos = q->st->pos;                /* the anchor's position */
    if (k3_draft_stale(g->dl)) return 0;       /* past the draft's positions */
    if (g->j->req.n_strict && (!g->in_args || g->i_force < g->n_force || g->arm))
        return 0;                              /* strict tools: the arguments only */
    if (s->test_reply && !g->in_args) return 0;   /* the reply test hook's ids: no drafts */
    if (k3_draft_pos(g->dl) != pos) {          /* never: its context follows the state */
        fprintf(stderr, "k3: serve: request %llu: the draft's context holds %d positions, "
                "the state %d: no more drafts\n", (unsigned long long)g->j->id,
                k3_draft_pos(g->dl), pos);
        g->dl = NULL;
        return 0;
    }
    /* the reply's room after the anchor, and the context's */
    const int lim = min_i(room, min_i(g->cap - g->ngen - 1, s->ctx - pos - 1));
    k3_draft_history(g->dl, g->fed + g->nprompt, (long)(g->n - g->nprompt));   /* test hook */
    char err[512];
    send_rec(g, SD_BLOCK, g->dv[0], g->ngen, lim, NULL);
    int k = k3_draft_block(g->dl, g->dv[0], g->ngen, lim, g->dv + 1, err, sizeof err);
    if (k < 0) {
        fprintf(stderr, "k3: serve: request %llu: draft: %s (no more drafts)\n",
                (unsigned long long)g->j->id, err);
        g->dl = NULL;
        return 0;
    }
    /* strict tools: drafts only inside the arguments, never past their close (the server
     * writes markup after it, not the model) */
    for (int j = 0; g->j->req.n_strict && j < k; j++)
        if (g->dv[1 + j] == s->ids.close) k = j;
    if (!k) return 0;
    if (k3_state_mark(&s->eng.m, q->st, k + 1)) return -1;
    q->all_logits = 1;
    g->k = k;
    return k;
}

void serve_draft_feed(Gen *g, int id) {
    g->dv[0] = id; g->k = 0;
    g->q->ids = g->dv; g->q->n = 1; g->q->decode = 1; g->q->all_logits = 0;
    g->q->draft = g->dl ? draft : NULL;
}

int serve_draft_fed(Gen *g, int T, const float *row, const float *taps, int prefill) {
    if (!g->dl) return 0;
    char err[512];
    if (prefill || !g->k) {                    /* a prompt's rows, or a plain step's token */
        send_rec(g, prefill ? SD_INGEST : SD_KEEP, tap_row(g, taps), prefill ? T : 0, 1, NULL);
        const int rc = prefill ? k3_draft_ingest(g->dl, taps, T, err, sizeof err)
                               : k3_draft_keep_rows(g->dl, taps, 0, 1, err, sizeof err);
        if (rc) {
            fprintf(stderr, "k3: serve: request %llu: draft: %s (no more drafts)\n",
                    (unsigned long long)g->j->id, err);
            g->dl = NULL;
        }
        return 0;
    }
    /* a verify pass: the anchor's next tokens drawn as the plain steps would draw them
     * (the sampler by position), the state rolled back to what is kept */
    Server *s = g->s;
    const size_t V = (size_t)s->eng.m.cfg.vocab_size;
    const int k = g->k;
    g->k = 0;
    memcpy(g->prow, row, sizeof(float) * V * (size_t)(k + 1));   /* unmasked: logprobs */
    int dead = k + 1;                          /* a constraint: each row masked as a plain
                                                * step masks it, along the drafts */
    if (k3_cons_on(&g->cs))
        dead = k3_cons_mask_drafts(&g->cs, s->tok, (int)V, end_id(g), (float *)row, g->dv + 1,
                                   k);
    /* the sampler's draws by position: ids the server wrote (strict tools' markup, the
     * test hook's) drew nothing, so its position, not the reply's length */
    const long at = (long)g->smp.pos;
    const int cnt = k3_spec_accept(&g->sp, &s->eng.m, g->q->st, &g->smp, at, g->dv + 1, k,
                                   row, g->pend);
    if (cnt < 0) { snprintf(g->err, sizeof g->err, "out of memory"); return -1; }
    k3_sched_rolled_back(s->sch, g->q, cnt);   /* over N ranks: their state keeps as many */
    send_rec(g, SD_KEEP, tap_row(g, taps), k, cnt, NULL);
    if (k3_draft_keep_rows(g->dl, taps, k, cnt, err, sizeof err)) {
        fprintf(stderr, "k3: serve: request %llu: draft: %s (no more drafts)\n",
                (unsigned long long)g->j->id, err);
        g->dl = NULL;
    }
    if (cnt > dead) {                          /* a plain step would fail there too */
        snprintf(g->err, sizeof g->err, "%s: no token can continue the reply",
                 k3_cons_name(&g->cs));
        return -1;
    }
    g->n_pend = cnt; g->i_pend = 0;
    g->smp.pos = at;                           /* sampler_sample's next: drawn here */
    (void)T;
    return 1;
}

int serve_draft_next(Gen *g) {
    if (g->i_pend >= g->n_pend) return -1;
    const size_t V = (size_t)g->s->eng.m.cfg.vocab_size;
    memcpy(g->logits, g->prow + V * (size_t)g->i_pend, sizeof(float) * V);
    g->smp.pos++;
    const int id = g->pend[g->i_pend++];
    size_t n = 0;                              /* the constraint follows the reply */
    const char *b = k3_cons_on(&g->cs) && id != end_id(g)
                        ? tok_token_bytes(g->s->tok, id, &n) : NULL;
    if (b && k3_cons_put(&g->cs, (const unsigned char *)b, n)) {
        snprintf(g->err, sizeof g->err, "%s: token %d was drawn outside the mask",
                 k3_cons_name(&g->cs), id);
        return -1;
    }
    return id;
}
