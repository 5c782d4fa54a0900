/* forward.c — the whole Kimi K3 forward pass, top to bottom (docs/MODEL.md §3.1).
 *
 * There is no conventional residual stream: p is a per-block partial sum of sublayer
 * outputs, B holds block snapshots, and every sublayer reads a softmax Mix over
 * depth (attention residuals). All activations are fp32; the T tokens of a step, from
 * one sequence or several, go through each layer together so every weight is read once
 * per step; only the attention's recurrence and cache are per sequence. Weights come through the
 * storage interface (weights.h), buffers from the run state planned once (k3.h). */
#include "k3.h"
#include "tensors.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* Buffers in a file: the rows' pages and the embedding's (a row lookup) are dropped every
 * K3_ROW_BLOCK rows, so a long prompt maps one block of each (runstate.c, plan.c). Rows the
 * sequence's state gives for some positions (K3Embed: an image's) replace the lookup's. */
static void embed_given(const K3State *s, int T, int H, float *out) {
    for (int i = 0; s->embed && i < s->embed->n; i++) {
        const K3EmbedSpan *sp = &s->embed->span[i];
        int a = sp->pos0 > s->pos ? sp->pos0 : s->pos;
        int b = sp->pos0 + sp->len < s->pos + T ? sp->pos0 + sp->len : s->pos + T;
        if (a < b)
            memcpy(out + (size_t)(a - s->pos) * H, sp->rows + (size_t)(a - sp->pos0) * H,
                   sizeof(float) * (size_t)(b - a) * H);
    }
}

static void embed_rows(const K3Model *m, K3RunState *rs, const int *ids, int T, float *out) {
    const K3Mat *E = &m->embed;
    int H = E->cols;
    for (int t = 0; t < T; t++) {
        if (t % K3_ROW_BLOCK == 0 && rs->in_file) {
            k3_runstate_drop(rs);
            k3_model_embed_advise(m, MADV_DONTNEED);
        }
        size_t o = (size_t)ids[t] * H;
        float *row = out + (size_t)t * H;
        if (E->type == K3_W_F32) memcpy(row, (const float *)E->w + o, H * sizeof(float));
        else for (int d = 0; d < H; d++) row[d] = k3_bf16_to_f32(((const uint16_t *)E->w)[o + d]);
    }
}

static void rmsnorm_rows(float *out, const float *x, const float *w, int T, int H, float eps) {
    for (int t = 0; t < T; t++) k3_rmsnorm(out + (size_t)t * H, x + (size_t)t * H, w, H, eps);
}

/* h = Mix(B, p) with the score vector w (p alone while B is empty), then x = RMSNorm(h),
 * K3_ROW_BLOCK rows at a time (both are row by row: the same bits as one call). */
static void mix_norm(K3Engine *e, float *h, float *const *B, int nb, const float *p,
                     const float *w, const float *norm, float *x, int T) {
    const int H = e->m.cfg.hidden_size;
    const float eps = e->m.cfg.rms_norm_eps;
    for (int r0 = 0; r0 < T; r0 += K3_ROW_BLOCK) {
        const int n = k3_block_rows(T, r0);
        const size_t o = (size_t)r0 * H;
        const float *Bo[nb > 0 ? nb : 1];
        for (int i = 0; i < nb; i++) Bo[i] = B[i] + o;
        if (nb > 0) k3_attnres_mix(h + o, Bo, nb, p + o, w, n, H, eps);
        else memcpy(h + o, p + o, sizeof(float) * (size_t)n * H);
        rmsnorm_rows(x + o, h + o, norm, n, H, eps);
        k3_runstate_drop(&e->rs);
    }
}

/* A NaN or Inf out of a sublayer (a corrupt weight or E8M0 scale) stops the forward where
 * it first appears instead of running on to NaN logits: a branch-free scan of T x hidden
 * floats, nothing next to the sublayer's matmuls. On a hit the layer is released and the
 * reason names the layer (L < 0: the output head), the sublayer, the sequence (when the
 * step has several) and the position. rows_of(i) is how many rows sequence i has in a. */
static int nonfinite(K3Engine *e, int L, const char *what, const float *a, int T, int H,
                     const K3Seq *seq, int n, int head, char *err, size_t errlen) {
    int64_t first = -1;                          /* in blocks of rows (buffers in a file) */
    for (int r0 = 0; r0 < T && first < 0; r0 += K3_ROW_BLOCK) {
        const int nr = k3_block_rows(T, r0);
        const int64_t f = k3_first_nonfinite(ST_F32, a + (size_t)r0 * H,
                                             sizeof(float) * (size_t)nr * H);
        if (f >= 0) first = (int64_t)r0 * H + f;
        k3_runstate_drop(&e->rs);
    }
    if (first < 0) return 0;
    const size_t i = (size_t)first;
    int row = (int)(i / H), q = 0, rows = 0;   /* the sequence and position of that row */
    for (; q < n; q++) {
        rows = head && !seq[q].all_logits ? 1 : seq[q].T;
        if (row < rows) break;
        row -= rows;
    }
    const int pos0 = seq[q].s->pos, pos = pos0 + (rows < seq[q].T ? seq[q].T - 1 : row);
    char which[48] = "";
    if (n > 1) snprintf(which, sizeof which, " of sequence %d", q);
    const char *kind = isnan(a[i]) ? "NaN" : "Inf";
    if (L >= 0) {
        e->w->ops->release(e->w, L);
        snprintf(err, errlen, "non-finite activations (%s) first in layer %d's %s output, at "
                 "position %d%s (this forward: positions %d..%d): a weight or E8M0 scale of "
                 "layer %d is corrupt (check it: k3 doctor %s --scan)", kind, L, what, pos,
                 which, pos0, pos0 + seq[q].T - 1, L, e->m.dir);
    } else
        snprintf(err, errlen, "non-finite logits (%s) at position %d%s, though every layer's "
                 "output was finite: lm_head or model.norm is corrupt (check it: k3 doctor "
                 "%s --scan)", kind, pos, which, e->m.dir);
    return 1;
}

int k3_forward_seqs(K3Engine *e, const K3Seq *seq, int n_seq, float *logits, char *err,
                    size_t errlen) {
    const K3Config *c = &e->m.cfg;
    K3RunState *rs = &e->rs;
    K3Weights *w = e->w;
    const int H = c->hidden_size;
    int T = 0, ctx = 0, empty = 0;                /* the step's rows; the longest context */
    for (int q = 0; q < n_seq; q++) {
        K3State *s = seq[q].s;
        empty |= seq[q].T < 1;
        T += seq[q].T;
        if (s->pos + seq[q].T > ctx) ctx = s->pos + seq[q].T;
        if (k3_state_reserve(&e->m, s, s->pos + seq[q].T)) {
            snprintf(err, errlen, "out of memory growing the context to %d positions",
                     s->pos + seq[q].T);
            return K3_ERR_RUNTIME;
        }
    }
    for (int q = 0; q < n_seq; q++)              /* a logged (speculative) forward fits its log */
        if (seq[q].s->undo && seq[q].s->undo->armed && seq[q].T > seq[q].s->undo->max_T) {
            snprintf(err, errlen, "a logged forward of %d tokens is past its log (%d)",
                     seq[q].T, seq[q].s->undo->max_T);
            return K3_ERR_RUNTIME;
        }
    if (n_seq < 1 || empty || T > rs->max_T) {
        snprintf(err, errlen, "a forward of %d tokens is outside the planned chunk (1..%d)",
                 T, rs->max_T);
        return K3_ERR_RUNTIME;
    }
    k3_share_step(seq, n_seq);                    /* over N ranks: all take this step */
    if (k3_runstate_ctx(rs, c, ctx)) {
        snprintf(err, errlen, "out of memory growing the context to %d positions", ctx);
        return K3_ERR_RUNTIME;
    }
    float **B = rs->blocks, *h = rs->h, *x = rs->x, *a = rs->a;
    int nb = 0;                                   /* snapshots in B; p is B[nb] */
    float *p = B[0];
    int stop = -1;                                /* the layer where an interrupt was seen */
    e->halt = 0;
    e->prog.last = 0;
    k3_halt_running(e);

    K3Pager *pg = e->pager;                       /* states in a file: read ahead from here */
    if (pg && pg->ops->begin(pg, seq, n_seq, err, errlen)) return K3_ERR_RUNTIME;
    for (int q = 0, r = 0; q < n_seq; r += seq[q].T, q++) {   /* p = e, B = [] */
        embed_rows(&e->m, rs, seq[q].ids, seq[q].T, p + (size_t)r * H);
        embed_given(seq[q].s, seq[q].T, H, p + (size_t)r * H);
    }
    k3_runstate_drop(rs);
    for (int L = 0; L < c->num_hidden_layers; L++) {
        const K3Layer *ly = w->ops->acquire(w, L, err, errlen);   /* pinned or streamed */
        if (!ly) return K3_ERR_RUNTIME;
        e->prog.L = L;
        if (stop < 0 && k3_halted(e)) stop = L;
        if (stop >= 0) { w->ops->release(w, L); continue; }   /* a streamed ring stays in order */
        int p_empty = 0;
        /* 1. attention-site mix (skipped only while no snapshot exists), normalised: x */
        mix_norm(e, h, B, nb, p, ly->attn_res_w, ly->input_norm, x, T);
        /* 2. block boundary: snapshot the entering p (not h), then restart p */
        if (L % c->attn_res_block_size == 0) {
            nb++;
            p = B[nb];
            p_empty = 1;
        }
        /* 3-4. attention sublayer on x: projections over all rows, the KDA recurrence or
         * the MLA cache per sequence */
        if (pg && pg->ops->acquire(pg, L, err, errlen)) {   /* the layer's states, read */
            w->ops->release(w, L);
            return K3_ERR_RUNTIME;
        }
        if (ly->is_kda) k3_kda(e, ly, seq, n_seq, L, x, a);
        else            k3_mla(e, ly, seq, n_seq, L, x, a);
        if (pg) pg->ops->release(pg, L);          /* written back while the FFN runs */
        if (k3_halted(e)) { stop = L; w->ops->release(w, L); continue; }   /* a half layer */
        if (nonfinite(e, L, "attention", a, T, H, seq, n_seq, 0, err, errlen))
            return K3_ERR_RUNTIME;
        k3_runstate_add_rows(rs, p, a, T, H, p_empty);
        /* 5. MLP-site mix (always: B is never empty here), normalised: x */
        mix_norm(e, h, B, nb, p, ly->mlp_res_w, ly->post_norm, x, T);
        /* 6-7. feed-forward on x, added to p: every row together, each expert of the
         * union read once */
        if (ly->is_moe) k3_moe(e, ly, L, x, T, a);
        else            k3_dense_mlp(e, &ly->gate, &ly->up, &ly->down, x, T, a);
        if (k3_halted(e)) { stop = L; w->ops->release(w, L); continue; }
        if (nonfinite(e, L, ly->is_moe ? "MoE" : "MLP", a, T, H, seq, n_seq, 0, err, errlen))
            return K3_ERR_RUNTIME;
        k3_runstate_add_rows(rs, p, a, T, H, 0);
        if (e->tap) e->tap->fn(e->tap, L, p, T, H);   /* a draft's copy (dspark.h) */
        w->ops->release(w, L);
    }
    if (stop >= 0) {
        e->prog.L = stop;
        snprintf(err, errlen, "interrupted at layer %d of %d", stop, c->num_hidden_layers);
        return K3_INTERRUPTED;
    }
    /* final Mix over the snapshots and p, then the final norm, then lm_head on the rows
     * that want logits (gathered into h, free by now) */
    mix_norm(e, h, B, nb, p, e->m.out_res_w, e->m.final_norm, x, T);
    int rows = 0;
    for (int q = 0, r = 0; q < n_seq; r += seq[q].T, q++) {
        const int k = seq[q].all_logits ? seq[q].T : 1;
        k3_runstate_add_rows(rs, h + (size_t)rows * H, x + (size_t)(r + seq[q].T - k) * H, k,
                             H, 1);
        rows += k;
    }
    if (w->ops->lm_head(w, logits, h, rows, err, errlen)) return K3_ERR_RUNTIME;
    if (e->halt) {                                /* a streamed lm_head stopped in its pieces */
        snprintf(err, errlen, "interrupted at the output head");
        return K3_INTERRUPTED;
    }
    if (nonfinite(e, -1, "", logits, rows, c->vocab_size, seq, n_seq, 1, err, errlen))
        return K3_ERR_RUNTIME;
    if (pg && pg->ops->end(pg, err, errlen)) return K3_ERR_RUNTIME;   /* states written */
    for (int q = 0; q < n_seq; q++) {
        seq[q].s->pos += seq[q].T;
        if (seq[q].s->undo && seq[q].s->undo->armed) seq[q].s->undo->T = seq[q].T;
    }
    if (e->tap && e->tap->done) e->tap->done(e->tap, T);   /* the taps are whole */
    return 0;
}

int k3_forward(K3Engine *e, K3State *s, const int *ids, int T, float *logits, int all_logits,
               char *err, size_t errlen) {
    const K3Seq one = { s, ids, T, all_logits };
    return k3_forward_seqs(e, &one, 1, logits, err, errlen);
}

/* Feeds n tokens in chunks of at most `chunk` (bounding activation memory; each chunk
 * reads every weight and selected expert once). The bits do not depend on chunk. */
int k3_prefill(K3Engine *e, K3State *s, const int *ids, int n, int chunk, float *logits,
               int all_logits, char *err, size_t errlen) {
    const size_t V = (size_t)e->m.cfg.vocab_size;
    if (chunk <= 0 || chunk > e->rs.max_T) chunk = e->rs.max_T;
    int rc = 0;
    for (int t = 0; t < n && !rc; t += chunk) {
        if (e->interrupt && *e->interrupt) {
            snprintf(err, errlen, "interrupted after %d of %d tokens", t, n);
            rc = K3_INTERRUPTED;
            break;
        }
        int T = n - t < chunk ? n - t : chunk;
        float *out = all_logits ? logits + (size_t)t * V : logits;
        k3_progress_begin(e, t, n);
        e->prog.step_T = T;
        rc = k3_forward(e, s, ids + t, T, out, all_logits, err, errlen);
        if (rc == K3_INTERRUPTED)
            snprintf(err, errlen, "interrupted after %d of %d tokens (in layer %d of %d)", t,
                     n, e->prog.L + 1, e->m.cfg.num_hidden_layers);
    }
    k3_progress_end(e);
    return rc;
}
