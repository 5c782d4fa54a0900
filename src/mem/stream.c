/* stream.c — the trunk and lm_head in pieces through a read-ahead window (internal.h).
 *
 * Every matrix of the trunk, in the order the forward pass multiplies them, then
 * lm_head, forms one stream. Its first pin_bytes are read once and pinned; the prefix
 * may end inside a matrix (rows [0, pin_rows) pinned, the rest streamed). The rest is cut
 * at row boundaries into pieces of at most piece_bytes and read, every forward, by
 * io_depth threads in aligned chunks (file order inside a piece), into a byte window
 * that frees pieces in order as the matmuls finish with them. A streamed matrix's K3Mat
 * carries a K3RowSource: k3_matmul hands the product here and it is computed piece by
 * piece; rows are independent, so the bits are those of the whole matrix.
 *
 * Over N ranks (comm.h) each rank's stream holds only its share of every matrix's rows
 * (k3_share_rows, the rows split.c has it compute), pinned and streamed within its own
 * budget; a matrix used whole (kv_b) is whole on every rank. A split matrix's product is
 * its share's rows (Y [T][share]), and k3_matmul_split gathers the shares. Its checksum
 * covers the whole tensor, which no rank reads: only whole matrices are checked there
 * (k3 doctor --trunk checks the file).
 *
 * The stream is consumed in exactly its order; a matrix used out of it (a change in the
 * forward pass's order) fails the forward with a message, never a hang or other bits.
 * A read failure fails the forward that needed the piece.
 *
 * A coded matrix (K3_W_BF16C, codec.h) streams the same way: its row offset table stays
 * with the trunk index, a piece is the coded bytes of its rows, multiplied through a
 * small table of offsets relative to the piece, and its structure is checked when the
 * piece is used (so the decoders stay inside it). Its checksum covers table and rows. */
#include "stream_priv.h"
#include "codec.h"
#include "comm.h"
#include "dio.h"
#include "fault.h"
#include "pool.h"
#include "sysmem.h"
#include "util.h"
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define F(x) offsetof(K3Layer, x)
/* The order the forward pass multiplies a layer's matrices (kda.c: q k v f_a f_b b g o;
 * mla.c: q_a q_b kv_a g o; moe.c: router lat_down lat_up, then the shared gate up down;
 * the dense MLP gate up down). kv_b is read row by row in mla.c, not through k3_matmul:
 * it is whole, first in its layer and held while the layer runs. */
static const size_t ORDER[] = { F(kv_b), F(q), F(k), F(v), F(f_a), F(f_b), F(b), F(q_a),
                                F(q_b), F(kv_a), F(g), F(o), F(router), F(lat_down),
                                F(lat_up), F(gate), F(up), F(down) };
#define NORDER (int)(sizeof ORDER / sizeof ORDER[0])
#define CHUNK (1u << 20)                      /* bytes per read */

uint64_t k3_stream_window(uint64_t piece, uint64_t whole_max) {
    return k3_up4k(whole_max) + 4 * (k3_up4k(piece) + 4096);
}

uint64_t k3_stream_piece(uint64_t total) {
    uint64_t p = k3_up4k(total / 32);
    return p < 4096 ? 4096 : p > (64u << 20) ? (64u << 20) : p;
}

/* ---- the disk meter: busy time (any read in flight) and the deepest queue ---- */

void k3_io_begin(K3IoMeter *m) {
    pthread_mutex_lock(&m->mu);
    if (m->n++ == 0) m->t0 = k3_now();
    if (m->n > m->st->io_depth_max) m->st->io_depth_max = m->n;
    pthread_mutex_unlock(&m->mu);
}

void k3_io_end(K3IoMeter *m) {
    pthread_mutex_lock(&m->mu);
    if (--m->n == 0) m->st->disk_busy_s += k3_now() - m->t0;
    pthread_mutex_unlock(&m->mu);
}

/* ---- readers ---- */

static void fail(K3Stream *s, const char *fmt, const char *a) {   /* lock held; first wins */
    if (!s->failed) { s->failed = 1; snprintf(s->err, sizeof s->err, fmt, a); }
}

/* Room for piece iss in the window (lock held): 1 and the record set, or 0. */
static int place(K3Stream *s) {
    if (s->iss - s->tail >= s->RC) return 0;
    const SPiece *p = &s->pc[s->iss % s->npc];
    const uint64_t a0 = p->off & ~(uint64_t)(K3_DIO_ALIGN - 1), span = k3_up4k(p->off + p->n) - a0;
    const int chunks = (int)((span + CHUNK - 1) / CHUNK);
    if (s->mat[p->mat].whole) {               /* held while its layer runs: its own buffer */
        if (s->whole_busy) return 0;
        s->whole_busy = 1;
        s->rec[s->iss % s->RC] = (Rec){ s->iss, 0, span, a0, chunks, R_READING, 0, 1 };
        s->alloc = s->iss + 1;
        return 1;
    }
    uint64_t v = s->head_v;
    if (v % s->W + span > s->W) v += s->W - v % s->W;       /* pieces never wrap */
    uint64_t tv = v;                          /* the oldest ring bytes still in use */
    for (long k = s->tail; k < s->alloc; k++)
        if (!s->rec[k % s->RC].whole) { tv = s->rec[k % s->RC].vpos; break; }
    if (v + span - tv > s->W) return 0;
    Rec *r = &s->rec[s->iss % s->RC];
    *r = (Rec){ s->iss, v, span, a0, chunks, R_READING, 0, 0 };
    s->head_v = v + span; s->alloc = s->iss + 1;
    return 1;
}

static void *reader(void *arg) {
    K3Stream *s = arg;
    char why[600];
    pthread_mutex_lock(&s->mu);
    while (!s->quit) {
        /* the current layer's experts go first, unless the matmuls wait on the window */
        if (s->experts_busy && __atomic_load_n(s->experts_busy, __ATOMIC_SEQ_CST) > 0 &&
            !s->waiting && s->alloc > s->cons) {
            pthread_cond_wait(&s->cv, &s->mu);   /* k3_stream_kick or the consumer wakes us */
            continue;
        }
        if (s->iss_off == 0) {
            if (!place(s)) { pthread_cond_wait(&s->cv, &s->mu); continue; }
            if (s->iss < s->skip_to) {        /* drained unused: ready without a read */
                Rec *r = &s->rec[s->iss % s->RC];
                r->chunks = 0; r->state = R_READY;
                s->iss++;
                pthread_cond_broadcast(&s->cv);
                continue;
            }
            long nr = ++s->nreads;
            if (nr == k3_faults()->trunk_read) {
                char inj[200];
                snprintf(inj, sizeof inj, "injected failure of trunk read %ld "
                         "(K3_FAULT_TRUNK_READ)", nr);
                s->rec[s->iss % s->RC].state = R_FAILED;
                fail(s, "trunk read failed: %s", inj);
                s->rec[s->iss % s->RC].chunks = 0;
                s->iss++;
                pthread_cond_broadcast(&s->cv);
                continue;
            }
        }
        const long seq = s->iss;
        Rec *r = &s->rec[seq % s->RC];
        const SPiece *p = &s->pc[seq % s->npc];
        const uint64_t c0 = s->iss_off, len = r->span - c0 < CHUNK ? r->span - c0 : CHUNK;
        const uint64_t at = r->a0 + c0, end = p->off + p->n;
        const uint64_t need = end - at < len ? end - at : len;   /* never past the data */
        unsigned char *dst = (r->whole ? s->wbuf : s->win + r->vpos % s->W) + c0;
        s->iss_off += len;
        if (s->iss_off >= r->span) { s->iss++; s->iss_off = 0; }
        pthread_mutex_unlock(&s->mu);
        k3_io_begin(s->io);
        uint64_t moved = 0;
        double t0 = k3_now();
        const unsigned char *d = k3_dio_read(&s->file[p->file], dst, at, need, &moved, why,
                                             sizeof why);
        double t1 = k3_now();
        k3_io_end(s->io);
        pthread_mutex_lock(&s->mu);
        s->st->trunk_read_s += t1 - t0;
        s->st->trunk_bytes += moved;
        if (s->mat[p->mat].L < 0) s->st->head_bytes += moved;
        if (!d) {                             /* name the tensor beside the file */
            char msg[900];
            const SMat *sm = &s->mat[p->mat];
            if (sm->L < 0) snprintf(msg, sizeof msg, "'%s' (lm_head rows from %d): %s",
                                    sm->name, p->r0, why);
            else snprintf(msg, sizeof msg, "'%s' (layer %d): %s", sm->name, sm->L, why);
            r->state = R_FAILED;
            fail(s, "trunk read failed: %s", msg);
        }
        if (--r->chunks == 0 && r->state == R_READING) { r->state = R_READY; s->st->trunk_reads++; }
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- consumer (the forward pass's thread) ---- */

/* Piece i, which must be the next in the stream: its rows, or NULL (s->failed set). */
static const unsigned char *get_piece(K3Stream *s, int i) {
    pthread_mutex_lock(&s->mu);
    const unsigned char *d = NULL;
    if (s->failed) goto out;
    if (s->cons % s->npc != i) {
        const SMat *want = &s->mat[s->pc[s->cons % s->npc].mat];
        char msg[300];
        snprintf(msg, sizeof msg, "'%s' was multiplied before '%s', out of the stream order",
                 s->mat[s->pc[i].mat].name, want->name);
        fail(s, "internal error: trunk matrix %s (src/mem/stream.c ORDER)", msg);
        goto out;
    }
    Rec *r = &s->rec[s->cons % s->RC];
    if (!(r->seq == s->cons && r->state != R_READING)) {
        double t0 = k3_now();
        s->waiting = 1;
        pthread_cond_broadcast(&s->cv);
        while (!(r->seq == s->cons && r->state != R_READING) && !s->failed)
            pthread_cond_wait(&s->cv, &s->mu);
        s->waiting = 0;
        s->st->io_wait_s += k3_now() - t0;
    }
    if (r->seq != s->cons || r->state != R_READY) {   /* failed: the reader said why */
        fail(s, "trunk read failed: %s", "?");
        goto out;
    }
    const uint64_t ahead = r->whole ? 0 : s->head_v - r->vpos;
    if (ahead > s->st->ahead_max) s->st->ahead_max = ahead;
    d = (r->whole ? s->wbuf : s->win + r->vpos % s->W) + (s->pc[i].off - r->a0);
    s->cons++;
out:
    pthread_mutex_unlock(&s->mu);
    return d;
}

static void put_piece(K3Stream *s, long seq) {
    pthread_mutex_lock(&s->mu);
    Rec *r = &s->rec[seq % s->RC];
    r->released = 1;
    if (r->whole) s->whole_busy = 0;
    /* the ring frees in order; a whole piece holds no ring bytes */
    while (s->tail < s->alloc && s->rec[s->tail % s->RC].seq == s->tail &&
           (s->rec[s->tail % s->RC].released || s->rec[s->tail % s->RC].whole))
        s->tail++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Y[t][r0 + r] = P x_t for the rows of P, straight into Y's columns (k3_matmul_into), in
 * blocks of TOK_BLOCK tokens with a look at the interrupt between them (a piece times a
 * long prompt is seconds of work; each output is the same dot product: the same bits).
 * With the forward's buffers in a file (k3_act_drop set) the tokens go K3_ACT_TOKENS at a
 * time, their pages dropped after each block. */
#define TOK_BLOCK 256
static void mul_rows(float *Y, int ldy, const K3Mat *P, int r0, const float *X, int T) {
    const K3ActDrop d = k3_act_drop;
    const int step = d.drop && T > 1 ? K3_ACT_TOKENS : TOK_BLOCK;
    for (int t0 = 0; t0 < T; t0 += step) {
        if (T > 1 && k3_halt_poll()) return;
        const int nt = T - t0 < step ? T - t0 : step;
        k3_matmul_into(Y + (size_t)t0 * ldy, ldy, r0, P, X + (size_t)t0 * P->cols, nt);
        if (d.drop && T > 1) d.drop(d.arg);
    }
}

static void check_sum(K3Stream *s, const SMat *sm, K3Sum *sum) {
    const uint64_t got = k3_sum_end(sum);
    if (got == sm->sum || sm->L < 0 || k3_trunk_from_shards(s->t)) return;   /* no sums */
    char msg[700];
    k3_trunk_bad_sum(s->t, sm->L, sm->mi, got, msg, sizeof msg);
    pthread_mutex_lock(&s->mu);
    fail(s, "%s", msg);
    pthread_mutex_unlock(&s->mu);
}

/* Y [T][hi - lo]: this rank's rows of the product (every row at N = 1). W is the matrix
 * or, over N ranks, split.c's view of this rank's rows: its row count must be the share's
 * (a product asked of other rows is an internal error, never other bits). */
static void smat_matmul(const K3RowSource *src, float *Y, const K3Mat *W, const float *X,
                        int T) {
    const SMat *sm = (const SMat *)src;
    K3Stream *s = sm->s;
    const int ldy = sm->hi - sm->lo;
    if (W->rows != ldy) {
        char msg[300];
        snprintf(msg, sizeof msg, "'%s' multiplied for %d rows, this rank streams %d (rows "
                 "%d..%d of %d)", sm->name, W->rows, ldy, sm->lo, sm->hi, sm->rows);
        pthread_mutex_lock(&s->mu);
        fail(s, "internal error: trunk matrix %s (src/comm/split.c)", msg);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (sm->pin_rows) {
        const uint32_t *ro = sm->pin_rel ? sm->pin_rel : sm->ro;
        K3Mat P = { sm->type, sm->pin_rows, sm->cols, sm->pin, (const uint8_t *)ro, NULL };
        mul_rows(Y, ldy, &P, 0, X, T);
    }
    K3Sum sum = sm->pin_sum;
    for (int i = sm->first; i < sm->first + sm->npieces; i++) {
        if (k3_halt_poll()) return;           /* the release drains the rest, unread */
        const SPiece *p = &s->pc[i];
        const long seq = s->cons;
        const unsigned char *d = get_piece(s, i);
        if (!d) {                             /* the next acquire reports the failure */
            for (int t = 0; t < T; t++)
                memset(Y + (size_t)t * ldy + p->r0 - sm->lo, 0, sizeof(float) * (p->r1 - p->r0));
            continue;
        }
        K3Mat P = { sm->type, p->r1 - p->r0, sm->cols, d, (const uint8_t *)p->rel, NULL };
        char why[300];
        if (sm->ro && k3_codec_check_rows(sm->ro, p->r0, p->r1, d, sm->cols, s->verify, why,
                                          sizeof why)) {
            char msg[700];
            snprintf(msg, sizeof msg, "%s: coded tensor '%s' (layer %d) is corrupt: %s; re-run "
                     "k3 pack MODEL_DIR TRUNK_DIR", k3_trunk_path(s->t), sm->name, sm->L, why);
            pthread_mutex_lock(&s->mu);
            fail(s, "%s", msg);
            pthread_mutex_unlock(&s->mu);
            for (int t = 0; t < T; t++)
                memset(Y + (size_t)t * ldy + p->r0 - sm->lo, 0, sizeof(float) * (p->r1 - p->r0));
            put_piece(s, seq);
            continue;
        }
        mul_rows(Y, ldy, &P, p->r0 - sm->lo, X, T);
        if (s->verify) k3_sum_add(&sum, d, p->n);
        put_piece(s, seq);
    }
    if (s->verify && sm->npieces && !sm->split) check_sum(s, sm, &sum);
}

static int failed(K3Stream *s, char *err, size_t errlen) {
    pthread_mutex_lock(&s->mu);
    int f = s->failed;
    if (f) snprintf(err, errlen, "%s", s->err);
    pthread_mutex_unlock(&s->mu);
    return f;
}

/* The next n pieces will be drained unused: those not yet being read are not read, so a
 * stopped forward's rest costs no I/O (only the reads already in flight finish). */
static void skip_next(K3Stream *s, long n) {
    pthread_mutex_lock(&s->mu);
    if (s->cons + n > s->skip_to) s->skip_to = s->cons + n;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Consumes (unused) pieces until the next is piece `to`: a forward that stopped early. */
static void drain_to(K3Stream *s, int to) {
    const long n = ((long)to - s->cons % s->npc + s->npc) % s->npc;
    if (n) skip_next(s, n);
    while (!s->failed && s->cons % s->npc != to) {
        const long seq = s->cons;
        if (!get_piece(s, (int)(seq % s->npc))) break;
        put_piece(s, seq);
    }
}

const K3Layer *k3_stream_acquire(K3Stream *s, int L, char *err, size_t errlen) {
    const int to = s->first_of[L];
    if (to >= 0) drain_to(s, to);
    if (failed(s, err, errlen)) return NULL;
    for (int j = 0; to >= 0 && j < s->nmat; j++) {
        SMat *sm = &s->mat[j];
        if (sm->L != L || !sm->whole || sm->pin_rows == sm->rows) continue;
        const long seq = s->cons;
        const unsigned char *d = get_piece(s, sm->first);
        if (!d) { failed(s, err, errlen); return NULL; }
        s->held = seq;
        K3Mat *M = (K3Mat *)((char *)&s->ly[L] + ORDER[0]);
        M->w = d;
        if (s->verify) {
            K3Sum sum = sm->pin_sum;
            k3_sum_add(&sum, d, s->pc[sm->first].n);
            check_sum(s, sm, &sum);
            if (failed(s, err, errlen)) return NULL;
        }
    }
    return &s->ly[L];
}

void k3_stream_release(K3Stream *s, int L) {
    const int i0 = s->npc ? (int)(s->cons % s->npc) : 0;   /* no pieces: all pinned */
    if (s->first_of[L] >= 0 && s->mat[s->pc[i0].mat].L == L && i0 >= s->first_of[L])
        skip_next(s, s->npc - i0);   /* the forward stopped: the rest of its pass is drained */
    while (s->first_of[L] >= 0 && !s->failed) {
        const int i = (int)(s->cons % s->npc);
        if (s->mat[s->pc[i].mat].L != L || i < s->first_of[L]) break;
        const long seq = s->cons;
        if (!get_piece(s, i)) break;
        put_piece(s, seq);
    }
    if (s->held >= 0) { put_piece(s, s->held); s->held = -1; }
}

int k3_stream_head(K3Stream *s, float *Y, const float *X, int T, char *err, size_t errlen) {
    const int NL = s->m->cfg.num_hidden_layers;
    if (s->first_of[NL] >= 0) drain_to(s, s->first_of[NL]);
    if (failed(s, err, errlen)) return -1;
    if (T > s->max_T) {
        snprintf(err, errlen, "lm_head: %d rows of logits asked, the plan has %d", T, s->max_T);
        return -1;
    }
    const SMat *h = &s->mat[s->nmat - 1];
    const K3Mat H = { h->type, h->rows, h->cols, NULL, NULL, &h->src };
    k3_matmul_split(Y, &H, X, T);             /* over N ranks: its rows here, then gathered */
    return failed(s, err, errlen) ? -1 : 0;
}

/* ---- setup ---- */

static int add_mat(K3Stream *s, int L, int mi, const K3Mat *M, uint64_t sum, const char *name,
                   int whole, char *err, size_t errlen) {
    SMat *v = realloc(s->mat, sizeof *v * (size_t)(s->nmat + 1));
    if (!v) { snprintf(err, errlen, "out of memory"); return -1; }
    s->mat = v;
    SMat *sm = &v[s->nmat++];
    memset(sm, 0, sizeof *sm);
    sm->src.matmul = smat_matmul; sm->s = s;
    sm->L = L; sm->mi = mi; sm->type = M->type; sm->rows = M->rows; sm->cols = M->cols;
    sm->whole = whole; sm->sum = sum; sm->name = name;
    sm->lo = 0; sm->hi = M->rows;
    if (k3_comm_size() > 1 && !whole) {       /* this rank's rows, as split.c computes them */
        sm->split = 1;
        k3_share_rows(M->rows, k3_comm_rank(), k3_comm_size(), &sm->lo, &sm->hi);
    }
    sm->row_bytes = (uint64_t)M->cols * (M->type == K3_W_F32 ? 4 : 2);
    if (L >= 0) sm->file = k3_trunk_file(s->t, L, mi);
    if (L >= 0 && (sm->ro = k3_trunk_rowoff(s->t, L, mi))) {
        /* coded: rows differ in size; row_bytes is their mean, for sizing pieces only */
        sm->type = K3_W_BF16C;
        sm->row_bytes = sm->ro[sm->rows] / (uint64_t)sm->rows + 1;
    }
    return 0;
}

void k3_stream_rank_bytes(const K3Model *m, const K3Trunk *t, uint64_t *lb) {
    const int N = k3_comm_size(), me = k3_comm_rank();
    for (int L = 0; N > 1 && L < m->cfg.num_hidden_layers; L++)
        for (int i = 0; i < k3_trunk_nmats(t, L); i++) {
            size_t field; uint64_t sum, o, all, mine; const char *name;
            k3_trunk_mat(t, L, i, &field, &sum, &name);
            if (field == ORDER[0]) continue;          /* kv_b: whole on every rank */
            const K3Mat *M = (const K3Mat *)((const char *)&m->layers[L] + field);
            int lo, hi;
            k3_share_rows(M->rows, me, N, &lo, &hi);
            k3_trunk_rows(t, L, i, 0, M->rows, &o, &all);
            k3_trunk_rows(t, L, i, lo, hi, &o, &mine);
            lb[L] -= all - mine;
        }
}

/* File bytes of rows [r0, r1) of matrix sm. */
void k3_stream_rows_at(const K3Stream *s, const SMat *sm, int r0, int r1, uint64_t *off,
                       uint64_t *n) {
    if (sm->L >= 0) { k3_trunk_rows(s->t, sm->L, sm->mi, r0, r1, off, n); return; }
    const StTensor *t = st_find(s->m->st, "language_model.lm_head.weight");
    if (!t) t = st_find(s->m->st, "lm_head.weight");
    *off = t->offset + (uint64_t)r0 * sm->row_bytes;
    *n = (uint64_t)(r1 - r0) * sm->row_bytes;
}

/* The matrices in stream order, the pinned rows of each and the streamed pieces. */
static int build(K3Stream *s, const K3StreamOpts *o, char *err, size_t errlen) {
    K3Model *m = s->m;
    const int NL = m->cfg.num_hidden_layers;
    for (int L = 0; L < NL; L++) {
        const int n = k3_trunk_nmats(s->t, L);
        int found = 0;
        for (int k = 0; k < NORDER; k++)
            for (int i = 0; i < n; i++) {
                size_t field; uint64_t sum; const char *name;
                k3_trunk_mat(s->t, L, i, &field, &sum, &name);
                if (field != ORDER[k]) continue;
                const K3Mat *M = (const K3Mat *)((const char *)&m->layers[L] + field);
                if (add_mat(s, L, i, M, sum, name, k == 0, err, errlen)) return -1;
                found++;
            }
        if (found != n) {
            snprintf(err, errlen, "internal error: layer %d has a matrix with no place in the "
                     "stream order (src/mem/stream.c)", L);
            return -1;
        }
    }
    const StTensor *ht = st_find(m->st, "language_model.lm_head.weight");
    if (!ht) ht = st_find(m->st, "lm_head.weight");
    if (!ht) { snprintf(err, errlen, "%s: no lm_head.weight tensor", m->dir); return -1; }
    if (add_mat(s, -1, 0, &m->lm_head, 0, ht->name, 0, err, errlen)) return -1;
    s->head = &s->mat[s->nmat - 1];
    s->head->file = k3_trunk_shard_file(s->t, ht->shard);
    uint64_t budget = o->pin_bytes;
    int prefix = 1;
    for (int j = 0; j < s->nmat; j++) {
        SMat *sm = &s->mat[j];
        uint64_t at, bytes;
        const int share = sm->hi - sm->lo;
        k3_stream_rows_at(s, sm, sm->lo, sm->hi, &at, &bytes);
        if (prefix && budget >= bytes) { sm->pin_rows = share; budget -= bytes; continue; }
        if (prefix && !sm->whole && sm->ro)       /* coded: the most rows inside the budget */
            while (sm->pin_rows < share &&
                   sm->ro[sm->lo + sm->pin_rows + 1] - sm->ro[sm->lo] <= budget)
                sm->pin_rows++;
        else if (prefix && !sm->whole) sm->pin_rows = (int)(budget / sm->row_bytes);
        prefix = 0;
        budget = 0;
        int per = o->piece_rows > 0 ? o->piece_rows : (int)(o->piece_bytes / sm->row_bytes);
        if (sm->L < 0 && k3_faults()->lmhead_rows > 0) per = (int)k3_faults()->lmhead_rows;
        if (per < 1) per = 1;
        if (sm->whole) per = sm->rows;
        sm->first = s->npc;
        for (int r = sm->lo + sm->pin_rows; r < sm->hi; r += per) {
            SPiece *v = realloc(s->pc, sizeof *v * (size_t)(s->npc + 1));
            if (!v) { snprintf(err, errlen, "out of memory"); return -1; }
            s->pc = v;
            SPiece *p = &v[s->npc++];
            p->mat = j; p->r0 = r; p->r1 = r + per < sm->hi ? r + per : sm->hi;
            p->file = sm->file;
            k3_stream_rows_at(s, sm, p->r0, p->r1, &p->off, &p->n);
            p->rel = NULL;
            if (sm->ro) {
                if (!(p->rel = malloc(sizeof(uint32_t) * (size_t)(p->r1 - p->r0 + 1)))) {
                    snprintf(err, errlen, "out of memory");
                    return -1;
                }
                for (int r = p->r0; r <= p->r1; r++)
                    p->rel[r - p->r0] = sm->ro[r] - sm->ro[p->r0];
            }
            sm->npieces++;
        }
    }
    for (int i = s->npc - 1; i >= 0; i--) {
        const int L = s->mat[s->pc[i].mat].L;
        s->first_of[L < 0 ? NL : L] = i;
    }
    return 0;
}

/* Opens the files the matrices lie in, once each, for the whole run: a shard replaced
 * later is still read from the file opened here. A shard whose size is not the one its
 * header was indexed with (truncated or replaced since the model opened) is refused. */
static int open_files(K3Stream *s, char *err, size_t errlen) {
    for (int j = 0; j < s->nmat; j++) {
        const int f = s->mat[j].file;
        if (s->file[f].path[0]) continue;
        const char *what = s->mat[j].L < 0 ? "lm_head reads" : "trunk reads";
        if (k3_dio_open(&s->file[f], k3_trunk_fpath(s->t, f), what, err, errlen)) return -1;
        const int sh = f - (k3_trunk_nfiles(s->t) - s->m->st->n_shards);
        struct stat sb;
        if (sh >= 0 && (fstat(s->file[f].fd, &sb) ||
                        (uint64_t)sb.st_size != s->m->st->shards[sh].file_size)) {
            snprintf(err, errlen, "%s is %llu bytes, %llu when the model was opened: the shard "
                     "changed under the run (restore it; k3 doctor MODEL_DIR checks every "
                     "shard)", s->file[f].path, (unsigned long long)sb.st_size,
                     (unsigned long long)s->m->st->shards[sh].file_size);
            return -1;
        }
    }
    return 0;
}

static void bind_layers(K3Stream *s) {
    for (int L = 0; L < s->m->cfg.num_hidden_layers; L++) s->ly[L] = s->m->layers[L];
    for (int j = 0; j < s->nmat; j++) {
        SMat *sm = &s->mat[j];
        if (sm->L < 0) continue;
        size_t field; uint64_t sum; const char *name;
        k3_trunk_mat(s->t, sm->L, sm->mi, &field, &sum, &name);
        K3Mat *M = (K3Mat *)((char *)&s->ly[sm->L] + field);
        /* over N ranks a split matrix always goes through its source: its rows are a share */
        const int mem = !sm->split && (sm->pin_rows == sm->rows || sm->whole);
        M->w = !sm->split && sm->pin_rows == sm->rows ? sm->pin : NULL;
        if (sm->ro) { M->type = K3_W_BF16C; M->scale = (const uint8_t *)sm->ro; }
        M->src = mem ? NULL : &sm->src;
    }
}

K3Stream *k3_stream_open(K3Model *m, K3Trunk *t, const K3StreamOpts *o, K3MemStats *st,
                         K3IoMeter *io, char *err, size_t errlen) {
    const int NL = m->cfg.num_hidden_layers;
    K3Stream *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errlen, "out of memory"); return NULL; }
    s->m = m; s->t = t; s->st = st; s->io = io; s->held = -1; s->verify = o->verify_reads;
    s->max_T = o->max_T > 0 ? o->max_T : 1;
    s->first_of = malloc(sizeof(int) * (NL + 1));
    s->ly = calloc(NL, sizeof(K3Layer));
    if (!s->first_of || !s->ly) { snprintf(err, errlen, "out of memory"); goto fail; }
    for (int L = 0; L <= NL; L++) s->first_of[L] = -1;
    pthread_mutex_init(&s->mu, NULL); pthread_cond_init(&s->cv, NULL);
    s->nfile = k3_trunk_nfiles(t);
    if (!(s->file = calloc((size_t)s->nfile, sizeof(K3DioFile)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (build(s, o, err, errlen) || open_files(s, err, errlen)) goto fail;
    uint64_t need = 0, wneed = 0;             /* the ring holds the largest piece, twice */
    for (int i = 0; i < s->npc; i++) {
        uint64_t *n = s->mat[s->pc[i].mat].whole ? &wneed : &need;
        if (k3_dio_room(s->pc[i].n) > *n) *n = k3_dio_room(s->pc[i].n);
    }
    wneed = k3_up4k(wneed);
    s->W = s->npc && o->window_bytes > wneed ? o->window_bytes - wneed : 0;
    if (need && s->W < 2 * need + 8192) s->W = 2 * need + 8192;
    s->W = k3_up4k(s->W);
    if (wneed && posix_memalign((void **)&s->wbuf, 4096, wneed)) {
        s->wbuf = NULL;
        snprintf(err, errlen, "out of memory for the trunk window");
        goto fail;
    }
    s->RC = 4096;
    s->rec = calloc((size_t)s->RC, sizeof(Rec));
    if (!s->rec) { snprintf(err, errlen, "out of memory"); goto fail; }
    for (long i = 0; i < s->RC; i++) s->rec[i].seq = -1;
    if (s->W && !(s->win = k3_alloc_huge(s->W))) {
        snprintf(err, errlen, "out of memory for the trunk window (%.3f GB)", s->W / K3_GB);
        goto fail;
    }
    if (k3_stream_pin(s, o->quiet, err, errlen)) goto fail;
    bind_layers(s);
    if (!s->npc) return s;
    s->nth = o->io_depth > 0 ? o->io_depth : 16;
    s->th = calloc((size_t)s->nth, sizeof(pthread_t));
    if (!s->th) { snprintf(err, errlen, "out of memory"); goto fail; }
    s->started = 1;
    for (int i = 0; i < s->nth; i++)
        if (pthread_create(&s->th[i], NULL, reader, s)) {
            s->nth = i;
            snprintf(err, errlen, "cannot start the trunk reader threads");
            goto fail;
        }
    return s;
fail:
    k3_stream_close(s);
    return NULL;
}

void k3_stream_set_experts(K3Stream *s, const int *busy) { s->experts_busy = busy; }

void k3_stream_kick(void *stream) {
    K3Stream *s = stream;
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void k3_stream_describe(const K3Stream *s, char *buf, size_t n) {
    int full = 0, part = 0;
    for (int j = 0; j < s->nmat; j++) {
        const int share = s->mat[j].hi - s->mat[j].lo;
        full += share && s->mat[j].pin_rows == share;  /* N > 1: a share may be empty */
        part += s->mat[j].pin_rows && s->mat[j].pin_rows < share;
    }
    char a[32], b[32];
    snprintf(buf, n, "%s%s: %d of %d matrices pinned (%d in part, %s), %d pieces streamed "
             "through a %s window by %d reader%s (%s)", k3_trunk_from_shards(s->t) ?
             "the shards of " : "", k3_trunk_path(s->t), full, s->nmat,
             part, k3_size_text(s->pin_len, a, sizeof a), s->npc,
             k3_size_text(s->W, b, sizeof b), s->nth, s->nth == 1 ? "" : "s",
             s->file[s->mat[0].file].direct ? "O_DIRECT" : "buffered");
    if (k3_comm_size() > 1)
        snprintf(buf + strlen(buf), n - strlen(buf), "; rank %d's rows of each (kv_b whole)",
                 k3_comm_rank());
}

void k3_stream_close(K3Stream *s) {
    if (!s) return;
    if (s->started) {
        k3_threads_quit(&s->mu, &s->cv, &s->quit, s->th, s->nth);
    }
    pthread_mutex_destroy(&s->mu); pthread_cond_destroy(&s->cv);
    for (int f = 0; s->file && f < s->nfile; f++) k3_dio_close(&s->file[f]);
    free(s->file);
    free(s->th); free(s->rec); free(s->win); free(s->wbuf); free(s->pin);
    for (int i = 0; i < s->npc; i++) free(s->pc[i].rel);
    for (int j = 0; j < s->nmat; j++) free(s->mat[j].pin_rel);
    free(s->mat); free(s->pc); free(s->first_of); free(s->ly);
    free(s);
}
