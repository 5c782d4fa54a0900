/* scheduler.c — the one step scheduler (scheduler.h). Each step: every decoding sequence's
 * token (and drafts) whole, in join order, then the prompts still going in take the room
 * left in the plan's chunk, in join order, a prompt split across steps where it does not
 * fit; one k3_forward_seqs over them all; the rows handed back. Where the plan puts the states
 * in a state file, the slots' states are paged with their layers (statefile.h). */
#include "sched_priv.h"
#include "comm.h"
#include "mem.h"
#include "statefile.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int in_file_flags(int mode) {
    return mode == K3_STATES_ALL ? K3_STATE_KDA_FILE | K3_STATE_MLA_FILE :
           mode ? K3_STATE_KDA_FILE : 0;
}

/* The slot's state, made when first needed (k3_sched_take hands a resident one over). */
static int slot_state(K3Sched *s, int i) {
    if (s->seq[i].st) return 0;
    s->seq[i].st = k3_state_new_in(&s->e->m, in_file_flags(s->mode));
    if (!s->seq[i].st) return -1;
    if (s->sf) k3_statefile_attach(s->sf, s->seq[i].st, i);
    return 0;
}

int k3_sched_open(K3Sched **out, K3Engine *e, const K3SchedOpts *o, char *err, size_t errlen) {
    *out = NULL;
    K3Sched *s = calloc(1, sizeof *s);
    const int n = o->seqs > 0 ? o->seqs : 1;
    if (s) {
        s->e = e; s->n_slots = n; s->report = o->report;
        s->max_T = e->rs.max_T; s->rows_max = e->rs.logits_rows;
        s->seq = calloc((size_t)n, sizeof *s->seq);
        s->busy = calloc((size_t)n, sizeof *s->busy);
        s->fed = calloc((size_t)n, sizeof *s->fed);
        s->fs = calloc((size_t)n, sizeof *s->fs);
    }
    if (!s || !s->seq || !s->busy || !s->fed || !s->fs) {
        k3_sched_close(s);
        snprintf(err, errlen, "out of memory");
        return K3_ERR_RUNTIME;
    }
    s->mode = o->state_mode >= 0 ? o->state_mode : k3_mem_state_mode(e->mem);
    if (s->mode) {
        s->sf = k3_statefile_open(&e->m.cfg, s->mode, n, o->ctx, o->state_dir, err, errlen);
        if (!s->sf) { k3_sched_close(s); return K3_ERR_RUNTIME; }
        e->pager = k3_statefile_pager(s->sf);
    }
    for (int i = 0; i < n; i++) {
        s->seq[i].slot = i;
        if (slot_state(s, i)) {
            k3_sched_close(s);
            snprintf(err, errlen, "out of memory for %d sequence states", n);
            return K3_ERR_RUNTIME;
        }
    }
    *out = s;
    return 0;
}

void k3_sched_close(K3Sched *s) {
    if (!s) return;
    k3_sched_end(s, 0);                            /* the followers never wait on a lead gone */
    for (int i = 0; s->seq && i < s->n_slots; i++)
        if (s->seq[i].st) k3_state_free(&s->e->m, s->seq[i].st);
    if (s->sf) { s->e->pager = NULL; k3_statefile_close(s->sf); }
    free(s->seq); free(s->busy); free(s->fed); free(s->fs);
    free(s);
}

K3SchedSeq *k3_sched_join_slot(K3Sched *s, int i, void *user) {
    if (slot_state(s, i)) return NULL;
    K3SchedSeq *q = &s->seq[i];
    K3State *st = q->st;
    k3_state_reset(&s->e->m, st);
    if (st) st->embed = NULL;                      /* rows given are the joiner's to set */
    *q = (K3SchedSeq){ .user = user, .st = st, .slot = i, .order = s->joined++ };
    s->busy[i] = 1;
    k3_follow_send(s, OP_JOIN, i, 0, NULL, NULL, 0);
    return q;
}

K3SchedSeq *k3_sched_join(K3Sched *s, void *user) {
    for (int i = 0; i < s->n_slots; i++)
        if (!s->busy[i]) return k3_sched_join_slot(s, i, user);
    return NULL;
}

void k3_sched_leave(K3Sched *s, K3SchedSeq *q) {
    k3_follow_send(s, OP_LEAVE, q->slot, 0, NULL, NULL, 0);
    s->busy[q->slot] = 0;
    q->user = NULL; q->n = 0; q->T = 0;
}

int k3_sched_active(const K3Sched *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) n += s->busy[i];
    return n;
}
int k3_sched_slots(const K3Sched *s) { return s->n_slots; }
int k3_sched_max_T(const K3Sched *s) { return s->max_T; }
const K3SchedStats *k3_sched_stats(const K3Sched *s) { return &s->st; }
struct K3StateFile *k3_sched_statefile(const K3Sched *s) { return s->sf; }

static int min_i(int a, int b) { return a < b ? a : b; }

/* The busy sequences with something to feed, decode or not, in join order. */
static int pending(K3Sched *s, int decode, K3SchedSeq **v) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        K3SchedSeq *q = &s->seq[i];
        if (!s->busy[i] || q->n <= 0 || !q->decode != !decode) continue;
        int j = n++;
        while (j > 0 && v[j - 1]->order > q->order) { v[j] = v[j - 1]; j--; }
        v[j] = q;
    }
    return n;
}

int k3_sched_step(K3Sched *s, K3SchedSeq ***fed, int *n_fed, char *err, size_t errlen) {
    K3Engine *e = s->e;
    const int max_T = s->max_T, rows_max = s->rows_max;
    int m = 0, T = 0, Tp = 0, rows = 0;
    K3SchedSeq **v = s->fed;
    *fed = s->fed; *n_fed = 0;
    for (int i = 0; i < s->n_slots; i++) s->seq[i].T = 0;
    for (int pass = 1; pass >= 0; pass--) {            /* decode steps first, then prompts */
        K3SchedSeq *cand[s->n_slots > 0 ? s->n_slots : 1];
        const int nc = pending(s, pass, cand);
        for (int c = 0; c < nc && T < max_T && rows < rows_max; c++) {
            K3SchedSeq *q = cand[c];
            int k = q->n;
            if (pass) {                                 /* whole, else at the next step */
                if (k > max_T - T || rows + (q->all_logits ? k : 1) > rows_max) continue;
                const int room = q->draft ? min_i(max_T - T - k, rows_max - rows - k) : 0;
                const int d = room > 0 ? q->draft(q, room) : 0;
                if (d < 0) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
                q->n += d; k += d;
            } else {                                    /* what fits of the prompt */
                k = min_i(k, max_T - T);
                if (q->all_logits) k = min_i(k, rows_max - rows);
            }
            s->fs[m] = (K3Seq){ q->st, q->ids, k, q->all_logits };
            v[m++] = q; T += k; rows += q->all_logits ? k : 1;
            if (!pass) Tp += k;
        }
    }
    if (!m) return 0;
    k3_follow_send_step(s, m);                         /* what it feeds, to the followers */
    int left = 0;                                      /* prompt tokens still to go in */
    for (int i = 0; Tp && i < s->n_slots; i++)
        if (s->busy[i] && !s->seq[i].decode && s->seq[i].n > 0) left += s->seq[i].n;
    if (Tp) {                                          /* the prefill's progress line */
        k3_progress_begin(e, s->pf_done, s->pf_done + left);
        e->prog.step_T = Tp;
    }
    const double t0 = k3_now();
    int rc = k3_forward_seqs(e, s->fs, m, e->rs.logits, err, errlen);
    e->prog.step_T = 0;
    s->pf_done += Tp;
    if (Tp && (rc || left == Tp)) { k3_progress_end(e); s->pf_done = 0; }
    if (rc) return rc;
    const double dt = k3_now() - t0;
    float *lg = e->rs.logits;
    const size_t V = (size_t)e->m.cfg.vocab_size;
    for (int i = 0; i < m; i++) {
        K3SchedSeq *q = v[i];
        q->T = s->fs[i].T; q->logits = lg;
        q->ids += q->T; q->n -= q->T;
        lg += (q->all_logits ? (size_t)q->T : 1) * V;
    }
    if (s->report) k3_mem_step(e->mem, (int)s->st.steps, T, dt, s->report > 1);
    s->st.steps++; s->st.rows += m;
    s->st.mixed += Tp && Tp < T;
    s->st.prompt_tokens += Tp; s->st.decode_tokens += T - Tp;
    s->st.t_prefill += dt * Tp / T; s->st.t_decode += dt * (T - Tp) / T;
    *n_fed = m;
    return 0;
}

int k3_sched_feed(K3Sched *s, K3SchedSeq *q, const int *ids, int n, int all_logits,
                  char *err, size_t errlen) {
    q->ids = ids; q->n = n; q->all_logits = all_logits; q->decode = 0; q->draft = NULL;
    while (q->n > 0) {
        if (s->e->interrupt && *s->e->interrupt) {
            snprintf(err, errlen, "interrupted");
            return K3_INTERRUPTED;
        }
        K3SchedSeq **fed;
        int nf = 0;
        int rc = k3_sched_step(s, &fed, &nf, err, errlen);
        if (rc) return rc;
        if (!nf) { snprintf(err, errlen, "the step fed nothing"); return K3_ERR_RUNTIME; }
    }
    return 0;
}

int k3_sched_load(K3Sched *s, K3SchedSeq *q, const K3State *src, char *err, size_t errlen) {
    const K3Model *m = &s->e->m;
    if (!(q->st->in_file & K3_STATE_MLA_FILE) && k3_state_reserve(m, q->st, src->pos + 1)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    k3_state_copy(m, q->st, src);
    if (s->sf && k3_statefile_put(s->sf, q->st, src, err, errlen)) return -1;
    q->st->pos = src->pos;
    k3_follow_send(s, OP_LOAD, q->slot, 0, src, NULL, 0);
    return 0;
}

K3State *k3_sched_copy(K3Sched *s, const K3SchedSeq *q, char *err, size_t errlen) {
    const K3Model *m = &s->e->m;
    K3State *d = k3_state_new(m);
    if (!d || k3_state_reserve(m, d, q->st->pos + 1)) {
        if (d) k3_state_free(m, d);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    k3_state_copy(m, d, q->st);
    if (s->sf && k3_statefile_get(s->sf, q->st, d, err, errlen)) {
        k3_state_free(m, d);
        return NULL;
    }
    d->pos = q->st->pos;
    k3_follow_send(s, OP_COPY, q->slot, 0, d, NULL, 0);
    return d;
}

K3State *k3_sched_take(K3Sched *s, K3SchedSeq *q, char *err, size_t errlen) {
    if (s->sf) return k3_sched_copy(s, q, err, errlen);   /* (a follower copies too) */
    K3State *st = q->st;
    st->embed = NULL;                                /* its user's rows stay with the user */
    q->st = s->seq[q->slot].st = NULL;               /* the slot makes a new one at its join */
    k3_follow_send(s, OP_TAKE, q->slot, 0, st, NULL, 0);
    return st;
}
