/* follow.c — the scheduler's mirror over N ranks (scheduler.h "the mirror";
 * docs/DISTRIBUTED.md): chat and serve read input only rank 0 has (the terminal, HTTP
 * requests at any time), so rank 0 runs the client and sends each scheduler call that
 * changes a state as a record; every other rank replays the records on its own engine.
 * Then every rank takes the same steps and calls the same collectives in the same order
 * (k3_share_step still checks each step). A record is a fixed header, then its payload,
 * both broadcast by rank 0. Nothing is sent at N = 1, nor by a scheduler without mirror
 * (batch: every rank runs it whole). */
#include "sched_priv.h"
#include "comm.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t op, slot, a, pad;
    uint64_t key;                 /* a state outside the slots: its address on rank 0 */
    uint64_t bytes;               /* the payload that follows */
} Rec;

/* A follower's states outside its slots, by the lead's key. */
typedef struct FollowMap { uint64_t *key; K3State **st; int n, cap; } FollowMap;

static uint64_t key_of(const void *p) { return (uint64_t)(uintptr_t)p; }

int k3_sched_follower(const K3Sched *s) { return s->follow; }

/* Each rank planned its own share, so the plans' chunks and sequences may differ: every
 * rank takes the least, so a step of rank 0 fits every rank. */
void k3_sched_mirror(K3Sched *s) {
    if (k3_comm_size() == 1) return;
    int32_t mine[3] = { s->n_slots, s->max_T, s->rows_max };
    k3_comm_least(mine, 3);
    for (int i = mine[0]; i < s->n_slots; i++) {      /* the slots past them go unused */
        k3_state_free(&s->e->m, s->seq[i].st);
        s->seq[i].st = NULL;
    }
    s->n_slots = mine[0]; s->max_T = mine[1]; s->rows_max = mine[2];
    s->lead = k3_comm_rank() == 0;
    s->follow = !s->lead;
}

void k3_follow_send(K3Sched *s, int op, int slot, int a, const void *key, const void *p,
                    size_t n) {
    if (!s->lead || s->ended) return;
    Rec r = { op, slot, a, 0, key_of(key), n };
    k3_comm_bcast_idle(&r, sizeof r);              /* the followers may wait long for it */
    if (n) k3_comm_bcast((void *)p, n);
}

/* Per fed sequence: slot, T, all_logits, marked (the verify pass its draft callback or
 * client armed); then every sequence's ids, in row order. */
void k3_follow_send_step(K3Sched *s, int m) {
    if (!s->lead || s->ended) return;
    size_t nid = 0;
    for (int i = 0; i < m; i++) nid += (size_t)s->fs[i].T;
    int32_t *b = malloc(sizeof *b * (4 * (size_t)m + nid));
    if (!b) k3_comm_abort(1, "out of memory for a step's record");
    int32_t *id = b + 4 * m;
    for (int i = 0; i < m; i++) {
        const K3Seq *f = &s->fs[i];
        b[4 * i] = s->fed[i]->slot; b[4 * i + 1] = f->T; b[4 * i + 2] = f->all_logits;
        b[4 * i + 3] = f->s->undo && f->s->undo->armed;
        for (int t = 0; t < f->T; t++) *id++ = f->ids[t];
    }
    k3_follow_send(s, OP_STEP, -1, m, NULL, b, sizeof *b * (4 * (size_t)m + nid));
    free(b);
}

static void map_put(K3Sched *s, uint64_t key, K3State *st) {
    FollowMap *f = s->map;
    for (int i = 0; i < f->n; i++)
        if (f->key[i] == key) k3_comm_abort(1, "the mirror: state %llx given twice (a state "
                                            "freed on rank 0 was not freed here)",
                                            (unsigned long long)key);
    if (f->n == f->cap) {
        int nc = f->cap ? 2 * f->cap : 16;
        uint64_t *k = realloc(f->key, sizeof *k * (size_t)nc);
        if (k) f->key = k;
        K3State **v = k ? realloc(f->st, sizeof *v * (size_t)nc) : NULL;
        if (!v) k3_comm_abort(1, "out of memory");
        f->st = v; f->cap = nc;
    }
    f->key[f->n] = key; f->st[f->n++] = st;
}

/* The state of key (removed from the map when drop). */
static K3State *map_get(K3Sched *s, uint64_t key, int drop) {
    FollowMap *f = s->map;
    for (int i = 0; i < f->n; i++)
        if (f->key[i] == key) {
            K3State *st = f->st[i];
            if (drop) { f->key[i] = f->key[--f->n]; f->st[i] = f->st[f->n]; }
            return st;
        }
    k3_comm_abort(1, "the mirror: rank 0 names state %llx, which this rank does not hold",
                  (unsigned long long)key);
    return NULL;
}

/* A resident state's bytes (pos, then per KDA layer S and the conv windows, per MLA layer
 * its pos cache rows); pack with b NULL gives the size. */
static size_t kda_n(const K3Config *c) {
    return (size_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim;
}
static size_t conv_n(const K3Config *c) {
    return 3 * (size_t)c->kda_num_heads * c->kda_head_dim *
           (size_t)(c->short_conv_kernel_size - 1);
}
static size_t pack(const K3Config *c, K3State *st, char *b, int out) {
    size_t at = 0;
#define PART(p, n) do { if (b) { if (out) memcpy(b + at, p, n); else memcpy(p, b + at, n); } \
                        at += (n); } while (0)
    PART(&st->pos, sizeof st->pos);
    const size_t pos = (size_t)st->pos;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        if (c->is_kda[L]) {
            PART(st->kda_S[L], 4 * kda_n(c));
            PART(st->kda_conv[L], 4 * conv_n(c));
        } else if (pos) {
            PART(st->mla_c[L], 4 * pos * (size_t)c->kv_lora_rank);
            PART(st->mla_pe[L], 4 * pos * (size_t)c->qk_rope_head_dim);
        }
    }
#undef PART
    return at;
}

static void send_state(K3Sched *s, int op, int slot, const K3State *st) {
    const K3Config *c = &s->e->m.cfg;
    K3State *w = (K3State *)st;                    /* pack only reads it (out = 1) */
    const size_t n = pack(c, w, NULL, 1);
    char *b = malloc(n);
    if (!b) k3_comm_abort(1, "out of memory for a state's record");
    pack(c, w, b, 1);
    k3_follow_send(s, op, slot, 0, st, b, n);
    free(b);
}

/* A follower's copy of the bytes into st (reset, sized for their positions). */
static void recv_state(K3Sched *s, K3State *st, char *b) {
    const K3Model *m = &s->e->m;
    int pos;
    memcpy(&pos, b, sizeof pos);
    k3_state_reset(m, st);
    if (k3_state_reserve(m, st, pos + 1)) k3_comm_abort(1, "out of memory for a state");
    st->pos = pos;                                 /* pack reads the positions from it */
    pack(&m->cfg, st, b, 0);
}

int k3_sched_sync(K3Sched *s, K3SchedSeq *q) {
    if (!s->lead) return 0;
    if (q->st->in_file) return -1;
    send_state(s, OP_SYNC, q->slot, q->st);
    return 0;
}

void k3_sched_share(K3Sched *s, const K3State *st) { if (s->lead) send_state(s, OP_SHARE, -1, st); }

void k3_sched_free(K3Sched *s, K3State *st) {
    if (!st) return;
    k3_follow_send(s, OP_FREE, -1, 0, st, NULL, 0);
    k3_state_free(&s->e->m, st);
}

void k3_sched_reset(K3Sched *s, K3SchedSeq *q) {
    k3_follow_send(s, OP_RESET, q->slot, 0, NULL, NULL, 0);
    k3_state_reset(&s->e->m, q->st);
}

int k3_sched_rollback(K3Sched *s, K3SchedSeq *q, int keep) {
    k3_follow_send(s, OP_ROLLBACK, q->slot, keep, NULL, NULL, 0);
    return k3_state_rollback(&s->e->m, q->st, keep);
}

void k3_sched_rolled_back(K3Sched *s, K3SchedSeq *q, int keep) {
    k3_follow_send(s, OP_ROLLBACK, q->slot, keep, NULL, NULL, 0);
}

void k3_sched_user(K3Sched *s, const K3SchedSeq *q, const void *p, size_t n) {
    k3_follow_send(s, OP_USER, q->slot, 0, NULL, p, n);
}

void k3_sched_on_user(K3Sched *s, K3SchedUserFn fn, void *ctx) {
    s->on_user = fn; s->user_ctx = ctx;
}

void k3_sched_end(K3Sched *s, int rc) {
    k3_follow_send(s, OP_END, -1, rc, NULL, NULL, 0);
    s->ended = 1;
}

/* OP_EMBED's payload: per span pos0 and len (int32), then every span's rows [len][hidden]
 * in order; a = the spans. */
void k3_sched_embed(K3Sched *s, K3SchedSeq *q, const K3Embed *e) {
    q->st->embed = e && e->n ? e : NULL;
    if (!s->lead || s->ended) return;
    const size_t H = (size_t)s->e->m.cfg.hidden_size;
    int n = 0;
    size_t rows = 0;
    for (int i = 0; q->st->embed && i < e->n; i++)
        if (e->span[i].pos0 + e->span[i].len > q->st->pos) { n++; rows += (size_t)e->span[i].len; }
    const size_t bytes = 8 * (size_t)n + 4 * rows * H;
    char *b = malloc(bytes ? bytes : 1);
    if (!b) k3_comm_abort(1, "out of memory for an image's rows (%zu bytes)", bytes);
    size_t at = 8 * (size_t)n;
    for (int i = 0, k = 0; n && i < e->n; i++) {
        const K3EmbedSpan *sp = &e->span[i];
        if (sp->pos0 + sp->len <= q->st->pos) continue;
        memcpy(b + 8 * k, &sp->pos0, 4); memcpy(b + 8 * k + 4, &sp->len, 4);
        memcpy(b + at, sp->rows, 4 * (size_t)sp->len * H);
        at += 4 * (size_t)sp->len * H;
        k++;
    }
    k3_follow_send(s, OP_EMBED, q->slot, n, NULL, b, bytes);
    free(b);
}

/* A follower's copy of a slot's rows (its state's embed points at it until the next). */
typedef struct { K3Embed e; K3EmbedSpan *span; char *p; } FollowEmbed;

static void recv_embed(K3Sched *s, FollowEmbed *f, K3State *st, int n, char *p, size_t bytes) {
    const size_t H = (size_t)s->e->m.cfg.hidden_size;
    st->embed = NULL;
    free(f->span); free(f->p);
    memset(f, 0, sizeof *f);
    if (n < 0 || (size_t)n * 8 > bytes) k3_comm_abort(1, "the mirror: %d image spans", n);
    if (n <= 0) { free(p); return; }
    if (!(f->span = malloc(sizeof *f->span * (size_t)(unsigned)n)))
        k3_comm_abort(1, "out of memory");
    size_t at = 8 * (size_t)n;
    for (int i = 0; i < n; i++) {
        K3EmbedSpan *sp = &f->span[i];
        memcpy(&sp->pos0, p + 8 * i, 4); memcpy(&sp->len, p + 8 * i + 4, 4);
        if (sp->pos0 < 0 || sp->len < 1 || (bytes - at) / (4 * H) < (size_t)sp->len)
            k3_comm_abort(1, "the mirror: an image span %d+%d past its record", sp->pos0,
                          sp->len);
        sp->rows = (const float *)(void *)(p + at);
        at += 4 * (size_t)sp->len * H;
    }
    f->p = p;                                      /* the rows stay in the record's bytes */
    f->e = (K3Embed){ f->span, n };
    st->embed = &f->e;
}

/* A step's record: the lead's shares on this rank's slots, one k3_forward_seqs. */
static void replay_step(K3Sched *s, int m, const int32_t *b) {
    K3Engine *e = s->e;
    const int32_t *id = b + 4 * m;
    char err[512];
    if (m > s->n_slots) k3_comm_abort(1, "the mirror: a step of %d sequences", m);
    for (int i = 0; i < m; i++) {
        K3State *st = s->seq[b[4 * i]].st;
        const int T = b[4 * i + 1];
        if (b[4 * i + 3] && !(st->undo && st->undo->armed) && k3_state_mark(&e->m, st, T))
            k3_comm_abort(1, "out of memory");
        s->fs[i] = (K3Seq){ st, id, T, b[4 * i + 2] };
        id += T;
    }
    if (k3_forward_seqs(e, s->fs, m, e->rs.logits, err, sizeof err))
        k3_comm_abort(1, "a step rank 0 took failed here: %s", err);
}

static K3SchedSeq *slot_seq(K3Sched *s, const Rec *r) {
    if (r->slot < 0 || r->slot >= s->n_slots)
        k3_comm_abort(1, "the mirror: slot %d of %d", r->slot, s->n_slots);
    return &s->seq[r->slot];
}

int k3_sched_follow(K3Sched *s) {
    FollowMap map = { 0 };
    s->map = &map;
    FollowEmbed *emb = calloc((size_t)s->n_slots, sizeof *emb);
    if (!emb) k3_comm_abort(1, "out of memory");
    char err[512];
    int rc = 0, done = 0;
    while (!done) {
        Rec r;
        k3_comm_bcast_idle(&r, sizeof r);          /* sleeping while rank 0 is idle */
        char *p = r.bytes ? malloc(r.bytes) : NULL;
        if (r.bytes && !p) k3_comm_abort(1, "out of memory for a record of %llu bytes",
                                         (unsigned long long)r.bytes);
        if (r.bytes) k3_comm_bcast(p, r.bytes);
        K3State *st;
        switch (r.op) {
        case OP_JOIN:
            if (!k3_sched_join_slot(s, slot_seq(s, &r)->slot, NULL))
                k3_comm_abort(1, "out of memory for a state");
            break;
        case OP_LEAVE: k3_sched_leave(s, slot_seq(s, &r)); break;
        case OP_STEP: replay_step(s, r.a, (const int32_t *)p); break;
        case OP_LOAD:
            if (k3_sched_load(s, slot_seq(s, &r), map_get(s, r.key, 0), err, sizeof err))
                k3_comm_abort(1, "%s", err);
            break;
        case OP_TAKE: case OP_COPY:
            st = r.op == OP_TAKE ? k3_sched_take(s, slot_seq(s, &r), err, sizeof err)
                                 : k3_sched_copy(s, slot_seq(s, &r), err, sizeof err);
            if (!st) k3_comm_abort(1, "%s", err);
            map_put(s, r.key, st);
            break;
        case OP_FREE: k3_state_free(&s->e->m, map_get(s, r.key, 1)); break;
        case OP_RESET: k3_state_reset(&s->e->m, slot_seq(s, &r)->st); break;
        case OP_ROLLBACK:
            if (k3_state_rollback(&s->e->m, slot_seq(s, &r)->st, r.a))
                k3_comm_abort(1, "the mirror: a rollback rank 0 made failed here");
            break;
        case OP_SYNC: recv_state(s, slot_seq(s, &r)->st, p); break;
        case OP_SHARE:
            if (!(st = k3_state_new(&s->e->m))) k3_comm_abort(1, "out of memory for a state");
            recv_state(s, st, p);
            map_put(s, r.key, st);
            break;
        case OP_EMBED:
            recv_embed(s, &emb[slot_seq(s, &r)->slot], slot_seq(s, &r)->st, r.a, p, r.bytes);
            p = NULL;                                  /* kept (or freed) there */
            break;
        case OP_END: rc = r.a; done = 1; break;
        case OP_USER:
            if (s->on_user) s->on_user(s->user_ctx, slot_seq(s, &r)->st, p, r.bytes);
            break;
        default: k3_comm_abort(1, "the mirror: unknown record %d", r.op);
        }
        free(p);
    }
    for (int i = 0; i < s->n_slots; i++) {
        if (s->seq[i].st && s->seq[i].st->embed == &emb[i].e) s->seq[i].st->embed = NULL;
        free(emb[i].span); free(emb[i].p);
    }
    free(emb);
    for (int i = 0; i < map.n; i++) k3_state_free(&s->e->m, map.st[i]);
    free(map.key); free(map.st);
    s->map = NULL;
    s->ended = 1;
    return rc;
}
