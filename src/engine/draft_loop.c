/* draft_loop.c — generation with a DSpark draft (draft_loop.h; spec: K3_DSPARK.md §5). */
#include "draft_loop.h"
#include "comm.h"
#include "outfile.h"
#include "util.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What blocks that do not pay may cost, in steps a generated position (k3_draft_block):
 * where no draft is right a run is at most this much slower, plus one block. */
#define K3_DRAFT_LOSS 0.03

struct K3DraftLoop {
    K3Tap tap;               /* first: the engine calls it; it passes the copy on */
    K3Tap *inner;            /* the draft's own tap */
    K3DSpark *d;
    K3Engine *e;
    int block, vocab, max_pos;   /* max_pos: the draft's max_position_embeddings */
    int fixed;               /* --draft-block N: every block verifies N (else chosen) */
    double kappa;            /* one more verified position's cost over a step (spec.h) */
    double acc, pred;        /* running accepted and predicted drafts a verify: cal */
    int last_k;              /* the drafts handed over by the last block */
    int probe;               /* the next block starts a sequence or follows a pause */
    double delta_b, delta_h; /* a block's draft forward over a step, in bytes read; the
                              * share of it that is K3's lm_head */
    double bal, bal_max;     /* the account, in steps (see k3_draft_block) */
    long g_last;             /* the generated position the account was last credited at */
    float *defer; int n_defer, cap_defer;  /* taps of positions kept while paused */
    int prefill;             /* every forward's rows are committed (the prompt) */
    const K3State *follow;   /* k3_draft_follow: the context follows it (chat) */
    int verifying;           /* a block was handed over: its forward is a verify's */
    int failed; char err[512];
    int *oracle; int n_oracle, right;     /* the test hook (K3_TEST_DRAFT_ORACLE) */
    int *lists, *list_n, n_lists;         /* its ';'-separated lists (batch, serve) */
    int seqs;                /* k3_draft_open_seqs: the caller feeds the context, and past
                              * max_position_embeddings the sequence drafts no more */
    int stale;               /* that happened */
    int log;                 /* K3_TEST_DRAFT_LOG=1: each block's drafts on stderr */
    K3Out dump; int dumping; /* --dump-draft FILE */
    float *dump_logits;      /* [block][vocab] for it */
    K3DraftStats st;
};

static void tap_fn(K3Tap *t, int L, const float *p, int T, int H) {
    K3DraftLoop *r = (K3DraftLoop *)t;
    r->inner->fn(r->inner, L, p, T, H);
}

/* The prompt's forwards (one per prefill chunk): their positions go into the context. */
static void tap_done(K3Tap *t, int T) {
    K3DraftLoop *r = (K3DraftLoop *)t;
    if (r->failed) return;
    if (r->follow) {         /* chat: every forward but a verify commits its rows */
        if (r->verifying) return;
        const int pos0 = r->follow->pos - T;
        if (k3_dspark_pos(r->d) > pos0) k3_dspark_truncate(r->d, pos0 > 0 ? pos0 : 0);
        if (k3_dspark_pos(r->d) != pos0) return;       /* a gap: the context stays behind */
        if (pos0 + T > r->max_pos) return;     /* past the draft's positions: no drafts */
    } else if (!r->prefill) return;
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
static int oracle_init(K3DraftLoop *r, char *err, size_t errlen) {
    const char *ids = getenv("K3_TEST_DRAFT_ORACLE"), *right = getenv("K3_TEST_DRAFT_RIGHT");
    if (!ids || !*ids) return 0;
    r->right = right && *right ? atoi(right) : K3_DSPARK_MAX_N;
    /* several sequences (batch, serve): lists separated by ';', one picked per sequence
     * by what it generated so far (k3_draft_history); the first list is the default */
    int n_l = 1;
    for (const char *c = ids; *c; c++) n_l += *c == ';';
    r->list_n = calloc((size_t)n_l + 1, sizeof(int));
    if (!r->list_n) { snprintf(err, errlen, "out of memory"); return -1; }
    char *buf = strdup(ids), *save = NULL;
    if (!buf) { snprintf(err, errlen, "out of memory"); return -1; }
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        int *v = NULL, n = 0;
        if (k3_parse_ids(t, &v, &n, err, errlen)) { free(buf); return -1; }
        int *all = realloc(r->lists, sizeof(int) * (size_t)(r->n_oracle + n + 1));
        if (!all) { free(v); free(buf); snprintf(err, errlen, "out of memory"); return -1; }
        memcpy(all + r->n_oracle, v, sizeof(int) * (size_t)n);
        free(v);
        r->lists = all;
        r->list_n[r->n_lists++] = n;
        r->n_oracle += n;
    }
    free(buf);
    r->oracle = r->lists;
    r->n_oracle = r->n_lists ? r->list_n[0] : 0;
    return 0;
}

void k3_draft_history(K3DraftLoop *r, const int *gen, long n) {
    if (!r->lists) return;
    const int *l = r->lists;
    r->oracle = NULL; r->n_oracle = 0;
    for (int i = 0; i < r->n_lists; l += r->list_n[i++])
        if (r->list_n[i] >= n && !memcmp(l, gen, sizeof(int) * (size_t)n)) {
            r->oracle = (int *)l; r->n_oracle = r->list_n[i];
            return;
        }
}

/* The draft forward's reads over a plain step's (spec.c's bytes: the trunk, lm_head
 * included, and one token's experts): its weights (context_proj and kv_a too: the kept
 * rows' ingestion) and K3's lm_head for the block's rows; *head_part: the lm_head's part.
 * Weights only: the same in every mode (a batch's buffers are larger). */
static double block_bytes(const K3DSpark *d, const K3Engine *e, double *head_part) {
    const K3Model *m = &e->m;
    const K3Config *c = &m->cfg;
    double all = 0, n_moe = 0;
    for (size_t i = 0; i < m->st->n_tensors; i++) all += (double)m->st->tensors[i].nbytes;
    for (int L = 0; L < c->num_hidden_layers; L++) n_moe += c->is_moe[L];
    const double ex = (double)k3_expert_bytes(c), per_tok = ex * c->num_experts_per_token * n_moe;
    const double emb = (double)m->embed.rows * m->embed.cols * (m->embed.type ? 2 : 4);
    const double head = (double)m->lm_head.rows * m->lm_head.cols * (m->lm_head.type ? 2 : 4);
    double step = all - ex * c->num_experts * n_moe - emb;
    if (step < per_tok) step = per_tok;
    *head_part = head / (step + per_tok);
    return ((double)k3_dspark_weight_bytes(d) + head) / (step + per_tok);
}

static int open_one(K3DraftLoop **out, const char *dir, K3Engine *e, int block, int fixed,
                    double kappa, int quiet, int tap, char *err, size_t errlen) {
    K3DraftLoop *r = calloc(1, sizeof *r);
    if (!r) { snprintf(err, errlen, "out of memory"); return 1; }
    int rc = k3_dspark_open(&r->d, dir, e, quiet, err, errlen);
    if (rc) { free(r); return rc; }
    if (oracle_init(r, err, errlen)) { k3_draft_close(r); return 2; }
    const char *lg = getenv("K3_TEST_DRAFT_LOG");
    r->log = lg && !strcmp(lg, "1");
    r->e = e;
    r->block = block;
    r->fixed = fixed;
    r->kappa = kappa;
    r->acc = r->pred = 1.0;
    r->probe = 1;
    r->delta_b = block_bytes(r->d, e, &r->delta_h);
    r->bal_max = r->delta_b + kappa * block;
    r->vocab = e->m.cfg.vocab_size;
    r->max_pos = k3_dspark_config(r->d)->max_pos;
    r->inner = k3_dspark_tap(r->d);
    r->tap.fn = tap_fn;
    r->tap.done = tap_done;
    r->prefill = tap;
    if (tap) e->tap = &r->tap;
    if (!quiet) {               /* its share: in the memory plan where the caller planned it */
        const size_t b0 = k3_dspark_bytes(r->d, 0), b1 = k3_dspark_bytes(r->d, 1);
        fprintf(stderr, "k3: dspark: %.3f GB of weights and buffers, %s (%s), %.1f KB of "
                "context cache a position\n", b0 / 1e9,
                k3_dspark_streamed(r->d) ? "streamed a block at a time" : "mapped",
                k3_mem_draft_planned(e->mem) ? "the memory plan counts them"
                                             : "beside the memory plan", (b1 - b0) / 1e3);
    }
    *out = r;
    return 0;
}

int k3_draft_open(K3DraftLoop **out, const char *dir, K3Engine *e, int block, int fixed,
                  double kappa, int quiet, char *err, size_t errlen) {
    return open_one(out, dir, e, block, fixed, kappa, quiet, 1, err, errlen);
}

int k3_draft_open_seqs(K3DraftLoop **out, int n, const char *dir, K3Engine *e, int block,
                       int fixed, double kappa, int quiet, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        const int rc = open_one(&out[i], dir, e, block, fixed, kappa, quiet || i > 0, i == 0,
                                err, errlen);
        if (rc) {
            for (int j = 0; j < i; j++) { k3_draft_close(out[j]); out[j] = NULL; }
            return rc;
        }
        out[i]->prefill = 0;             /* the caller feeds every context */
        out[i]->seqs = 1;
    }
    return 0;
}

const float *k3_draft_taps(const K3DraftLoop *r, int *rows, int *width) {
    if (width) *width = k3_dspark_tap_width(r->d);
    return k3_dspark_tap_rows(r->d, rows);
}

int k3_draft_ingest(K3DraftLoop *r, const float *taps, int n, char *err, size_t errlen) {
    if (r->stale || n <= 0) return 0;
    if (r->seqs && k3_dspark_pos(r->d) + n > r->max_pos) { r->stale = 1; return 0; }
    const double t0 = k3_now();
    const int rc = k3_dspark_ingest(r->d, taps, n, err, errlen);
    r->st.seconds += k3_now() - t0;
    return rc ? 1 : 0;
}

void k3_draft_reset(K3DraftLoop *r) {
    k3_dspark_truncate(r->d, 0);
    r->stale = 0; r->verifying = 0; r->last_k = 0;
    r->probe = 1; r->bal = 0; r->g_last = 0; r->n_defer = 0;
    r->acc = r->pred = 1.0;
    if (r->lists) { r->oracle = r->lists; r->n_oracle = r->list_n[0]; }
}

int k3_draft_prefilled(K3DraftLoop *r, char *err, size_t errlen) {
    r->prefill = 0;
    if (r->failed) { snprintf(err, errlen, "draft: %s", r->err); return 1; }
    return 0;
}

/* The verify length from the confidence head and the bytes (spec §5.6): n drafts give
 * 1 + cal * (S_0 + .. + S_n-1) tokens, S_r = c_0 .. c_r the head's predicted survival and
 * cal the accepted over the predicted so far (running), for 1 + kappa * n + delta_b steps:
 * the n of the best rate while drafting. This block's forward is already paid for: it is
 * verified if those n drafts beat a plain step without it (1 + kappa * n), else none. */
static int choose(const K3DraftLoop *r, const float *conf, int limit) {
    const double cal = r->acc / (r->pred > 1e-9 ? r->pred : 1e-9);
    double s = 1.0, e = 1.0, best_rate = 0.0, best_e = 1.0;
    int best = 0;
    for (int n = 1; n <= limit; n++) {
        s *= conf[n - 1];
        e += cal * s;
        const double rate = e / (1.0 + r->kappa * n + r->delta_b);
        if (rate > best_rate) { best_rate = rate; best = n; best_e = e; }
    }
    return best && best_e > 1.0 + r->kappa * best ? best : 0;
}

/* The gate on c_0 (k3_dspark_set_gate): with S_r <= c_0 no n beats a plain step unless
 * cal * c_0 > kappa, so below kappa / cal the lm_head's rows are not worth reading. */
static float gate(const K3DraftLoop *r) {
    const double cal = r->acc / (r->pred > 1e-9 ? r->pred : 1e-9);
    return r->fixed || r->probe || cal <= 0 ? 0.0f : (float)(r->kappa / cal);
}

/* A block's outcome into the account: the steps it saved (its accepted drafts) less its
 * bytes (cost, in steps); below zero the next block is a probe. */
static void settle(K3DraftLoop *r, double saved, double cost) {
    r->bal += saved - cost;
    if (r->bal > r->bal_max) r->bal = r->bal_max;
    if (r->bal < 0) r->probe = 1;
}

/* While blocks pause (one prompt), the kept positions' taps wait and go into the context
 * together before the next block: context_proj (0.51 GB on the real draft) is read once
 * for them instead of once a step; ingestion is per position, the same bits. */
static int defer_rows(K3DraftLoop *r, const float *taps, int n, char *err, size_t errlen) {
    const size_t W = (size_t)k3_dspark_tap_width(r->d);
    if (r->n_defer + n > r->cap_defer) {
        const int cap = 2 * (r->n_defer + n);
        float *p = realloc(r->defer, sizeof(float) * W * (size_t)cap);
        if (!p) { snprintf(err, errlen, "out of memory"); return 1; }
        r->defer = p; r->cap_defer = cap;
    }
    memcpy(r->defer + W * (size_t)r->n_defer, taps, sizeof(float) * W * (size_t)n);
    r->n_defer += n;
    return 0;
}

static int flush_rows(K3DraftLoop *r, char *err, size_t errlen) {
    if (!r->n_defer) return 0;
    const double t0 = k3_now();
    const int rc = k3_dspark_ingest(r->d, r->defer, r->n_defer, err, errlen);
    r->st.seconds += k3_now() - t0;
    r->n_defer = 0;
    return rc ? 1 : 0;
}

int k3_draft_block(K3DraftLoop *r, int anchor, long gen_pos, int room, int *draft, char *err,
                   size_t errlen) {
    r->last_k = 0;
    r->verifying = 0;
    if (k3_draft_failed(r, err, errlen)) return -1;
    if (r->follow) {         /* chat: only from exactly the state's positions */
        if (k3_dspark_pos(r->d) > r->follow->pos) k3_dspark_truncate(r->d, r->follow->pos);
        if (k3_dspark_pos(r->d) != r->follow->pos) return 0;
        if (r->follow->pos + r->block > r->max_pos) return 0;
    }
    /* the account: every generated position adds K3_DRAFT_LOSS of a step (by position, so
     * a batch's steps that had no room for this sequence count alike), each block adds
     * what it saved less what it cost; blocks are drafted while it is not below zero */
    if (gen_pos > r->g_last) {
        r->bal += K3_DRAFT_LOSS * (double)(gen_pos - r->g_last);
        if (r->bal > r->bal_max) r->bal = r->bal_max;
    }
    r->g_last = gen_pos;
    if (k3_comm_size() > 1) k3_comm_bcast(&r->bal, sizeof r->bal);   /* rank 0's bytes */
    if (r->bal < 0 || room <= 0 || r->stale) return 0;
    if (r->seqs && k3_dspark_pos(r->d) + r->block > r->max_pos) return 0;   /* its positions */
    if (flush_rows(r, err, errlen)) return -1;     /* the paused steps' positions */
    int d[K3_DSPARK_MAX_N];
    float conf[K3_DSPARK_MAX_N];
    const double t0 = k3_now();
    k3_dspark_set_gate(r->d, gate(r));
    if (k3_dspark_draft(r->d, anchor, r->block, d, conf, r->dump_logits, err, errlen))
        return -1;
    r->st.seconds += k3_now() - t0;
    r->st.blocks++;
    /* no length can pay: its lm_head rows were not read (over ranks the same on every
     * rank: c_0 is not the lm_head's, cal counts drafts; a rank alone would leave the
     * others in the split lm_head) */
    if (d[0] < 0) {
        settle(r, 0, r->delta_b - r->delta_h);
        return 0;
    }
    if (r->dumping) {        /* a record: P, rows, vocab; the drafts; confidences; logits */
        const int32_t hd[3] = { k3_dspark_pos(r->d), r->block, r->vocab };
        int32_t ids[K3_DSPARK_MAX_N];
        for (int j = 0; j < r->block; j++) ids[j] = d[j];
        if (k3_out_write(&r->dump, hd, sizeof hd) ||
            k3_out_write(&r->dump, ids, sizeof(int32_t) * (size_t)r->block) ||
            k3_out_write(&r->dump, conf, sizeof(float) * (size_t)r->block) ||
            k3_out_write(&r->dump, r->dump_logits,
                         sizeof(float) * (size_t)r->block * (size_t)r->vocab)) {
            snprintf(err, errlen, "--dump-draft %s: %s", r->dump.name, strerror(errno));
            return -1;
        }
    }
    if (r->log) {            /* drafts are a function of the context: tests compare them */
        fprintf(stderr, "k3: test: block at %d from %d:", k3_dspark_pos(r->d), anchor);
        for (int j = 0; j < r->block; j++) fprintf(stderr, " %d", d[j]);
        fputc('\n', stderr);
    }
    const int limit = room < r->block ? room : r->block;
    int k = limit;
    if (!r->fixed) {
        k = choose(r, conf, limit);
        if (k3_comm_size() > 1) {  /* over ranks: rank 0's choice (its timings) for all */
            int32_t kk = k;
            k3_comm_bcast(&kk, sizeof kk);
            k = kk;
        }
        if (!k && r->probe) k = 1;                   /* a probe learns from a row */
        double p = 0, s = 1;                         /* what the head predicts for k */
        for (int j = 0; j < k; j++) { s *= conf[j]; p += s; }
        if (k) r->pred = 0.7 * r->pred + 0.3 * p;
    }
    if (!k) settle(r, 0, r->delta_b);                /* not worth a row */
    r->last_k = k;
    r->verifying = k > 0;
    for (int j = 0; j < k; j++) {
        draft[j] = d[j];
        if (r->oracle && gen_pos + j < r->n_oracle) {
            const int id = r->oracle[gen_pos + j];
            draft[j] = j < r->right ? id : (id + 1) % r->vocab;
        }
    }
    return k;
}

int k3_draft_keep(K3DraftLoop *r, int k, int n_keep, char *err, size_t errlen) {
    int rows = 0;
    const float *taps = k3_dspark_tap_rows(r->d, &rows);
    if (rows != k + 1) {
        snprintf(err, errlen, "draft: %d tap rows after a forward of %d, %d kept", rows, k + 1,
                 n_keep);
        return 1;
    }
    return k3_draft_keep_rows(r, taps, k, n_keep, err, errlen);
}

int k3_draft_keep_rows(K3DraftLoop *r, const float *taps, int k, int n_keep, char *err,
                       size_t errlen) {
    if (n_keep < 1 || n_keep > k + 1) {
        snprintf(err, errlen, "draft: %d rows kept of a forward of %d", n_keep, k + 1);
        return 1;
    }
    r->st.proposed += k; r->st.accepted += n_keep - 1; r->st.rows += k + 1;
    if (k > 0 && r->last_k == k) {   /* the block's outcome (the account is rank 0's) */
        if (!r->fixed) r->acc = 0.7 * r->acc + 0.3 * (n_keep - 1);
        r->probe = 0;
        settle(r, n_keep - 1, r->kappa * k + r->delta_b);
    }
    r->last_k = 0;
    r->verifying = 0;
    if (r->follow && k3_dspark_pos(r->d) != r->follow->pos - n_keep) {     /* stale */
        if (k3_dspark_pos(r->d) > r->follow->pos - n_keep)
            k3_dspark_truncate(r->d, r->follow->pos > n_keep ? r->follow->pos - n_keep : 0);
        return 0;
    }
    /* paused, one prompt: later, all together (a batch's or the server's sequences keep
     * their context level with their position) */
    if (!r->follow && !r->seqs && (r->bal < 0 || r->n_defer))
        return defer_rows(r, taps, n_keep, err, errlen) ||
               (r->bal >= 0 && flush_rows(r, err, errlen));
    return k3_draft_ingest(r, taps, n_keep, err, errlen);
}

void k3_draft_follow(K3DraftLoop *r, const K3State *st) {
    r->follow = st;
    r->prefill = 0;
}

void k3_draft_truncate(K3DraftLoop *r, int P) {
    if (P < 0) P = 0;
    if (P < k3_dspark_pos(r->d)) k3_dspark_truncate(r->d, P);
    r->verifying = 0;
}

int k3_draft_pos(const K3DraftLoop *r) { return k3_dspark_pos(r->d); }
int k3_draft_stale(const K3DraftLoop *r) { return r->stale; }

int k3_draft_failed(K3DraftLoop *r, char *err, size_t errlen) {
    if (!r->failed) return 0;
    snprintf(err, errlen, "draft: %s", r->err);
    r->failed = 0;
    return 1;
}

int k3_draft_dump(K3DraftLoop *r, const char *path, char *err, size_t errlen) {
    r->dump_logits = malloc(sizeof(float) * K3_DSPARK_MAX_N * (size_t)r->vocab);
    if (!r->dump_logits) { snprintf(err, errlen, "out of memory"); return 1; }
    char oe[4400];
    if (k3_out_open(&r->dump, path, 0, 0666, oe, sizeof oe)) {
        snprintf(err, errlen, "--dump-draft %s", oe);
        return 1;
    }
    if (!k3_out_stdio(&r->dump)) {
        k3_out_abort(&r->dump);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    r->dumping = 1;
    return 0;
}

int k3_draft_finish(K3DraftLoop *r, char *err, size_t errlen) {
    if (!r || !r->dumping) return 0;
    r->dumping = 0;
    char oe[4400];
    if (k3_out_commit(&r->dump, oe, sizeof oe)) {
        snprintf(err, errlen, "--dump-draft %s", oe);
        return 1;
    }
    return 0;
}

const K3DraftStats *k3_draft_stats(const K3DraftLoop *r) { return &r->st; }

void k3_draft_close(K3DraftLoop *r) {
    if (!r) return;
    if (r->dumping) k3_out_abort(&r->dump);    /* a failed run keeps the old file */
    free(r->dump_logits);
    free(r->defer);
    if (r->e && r->e->tap == &r->tap) r->e->tap = NULL;
    k3_dspark_close(r->d);
    free(r->lists); free(r->list_n);
    free(r);
}

/* ---- kept states (chat_state.c) ---- */

uint64_t k3_draft_identity(const K3DraftLoop *r) { return k3_dspark_identity(r->d); }

void k3_draft_ctx_shape(const K3DraftLoop *r, int *layers, int *kv_lora, int *rope) {
    const K3DSparkConfig *k = k3_dspark_config(r->d);
    *layers = k->layers; *kv_lora = k->kv_lora; *rope = k->rope;
}

float *k3_draft_ctx_rows(K3DraftLoop *r, int l, int kpe) {
    return (float *)(kpe ? k3_dspark_kpe(r->d, l) : k3_dspark_lat(r->d, l));
}

int k3_draft_restore(K3DraftLoop *r, int P, char *err, size_t errlen) {
    r->verifying = 0;
    return k3_dspark_set_pos(r->d, P, err, errlen);
}
