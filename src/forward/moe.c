/* moe.c — the sigmoid router and the latent MoE (docs/MODEL.md §3.4-3.7,
 * pitfalls 17-22).
 *
 * The router scores the full-width input; the correction bias only selects, the
 * weights come from the unbiased sigmoid scores, renormalised. Experts run in the
 * latent width on their packed MXFP4 bytes; their weighted sum is RMS-normalised
 * once, projected up, and added to the shared experts (full width, unweighted).
 * Each selected expert is fetched once per chunk for all tokens that chose it, and
 * experts are accumulated in increasing id so a chunk and a single token agree. Over
 * N ranks each computes the experts it owns (share.c), the outputs are gathered, and
 * every rank sums all of them in that same order: the bits of one process. An
 * interrupt is looked at before each expert (progress.c; at N = 1 only). */
#include "comm.h"
#include "k3.h"
#include <string.h>

void k3_dense_mlp(K3Engine *e, const K3Mat *gate, const K3Mat *up, const K3Mat *down,
                  const float *x, int T, float *out) {
    const K3Config *c = &e->m.cfg;
    size_t n = (size_t)T * gate->rows;
    float *g = e->rs.mlp.g, *u = e->rs.mlp.u;
    const K3MatJob gu[] = { { g, gate, x }, { u, up, x } };
    k3_mm_many(e, gu, 2, T);
    const size_t blk = (size_t)K3_ROW_BLOCK * gate->rows;
    for (size_t i = 0; i < n; i += blk) {     /* elementwise, a block of rows at a time */
        const size_t m = n - i < blk ? n - i : blk;
        k3_situ(g + i, g + i, u + i, (int)m, c->situ_beta, c->situ_linear_beta);
        k3_runstate_drop(&e->rs);
    }
    k3_mm(e, out, down, g, T);
}

/* Top-k of choice[] by insertion into a sorted list: O(E k). Ties keep the lower
 * id first (it was inserted earlier and an equal value never overtakes it). */
void k3_topk(const float *choice, int E, int k, int *ids) {
    int n = 0;
    for (int e = 0; e < E; e++) {
        if (n == k && !(choice[e] > choice[ids[k - 1]])) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && choice[e] > choice[ids[i - 1]]) { ids[i] = ids[i - 1]; i--; }
        ids[i] = e;
    }
}

/* Tokens of the step that chose expert ex. */
static int tokens_of(const unsigned char *sel, int T, int E, int ex) {
    int n = 0;
    for (int t = 0; t < T; t++) n += sel[(size_t)t * E + ex];
    return n;
}

/* r[token] += weight * y[i] for the nt tokens that chose expert ex. */
static void add_expert(float *r, const float *wsel, int E, int ex, const int *tok, int nt,
                       const float *y, int LAT) {
    for (int i = 0; i < nt; i++)
        k3_axpy(r + (size_t)tok[i] * LAT, wsel[(size_t)tok[i] * E + ex], y + (size_t)i * LAT,
                LAT);
}

void k3_moe(K3Engine *e, const K3Layer *ly, int L, const float *x, int T, float *out) {
    const K3Config *c = &e->m.cfg;
    K3Weights *w = e->w;
    const int H = c->hidden_size, E = c->num_experts, K = c->num_experts_per_token;
    const int LAT = c->routed_expert_hidden_size, I = c->moe_intermediate_size;
    float *logit = e->rs.moe.logit, *wsel = e->rs.moe.wsel;     /* [T][E] routing weight */
    unsigned char *sel = e->rs.moe.sel;                          /* [T][E] chosen */
    float *xl = e->rs.moe.xl, *r = e->rs.moe.r, *xe = e->rs.moe.xe, *y = e->rs.moe.y;
    float *g = e->rs.moe.g, *u = e->rs.moe.u, *sh = e->rs.moe.shared;
    int *tok = e->rs.moe.tok, *uni = e->rs.moe.uni, ids[K];
    float choice[E];
    for (int t0 = 0; t0 < T; t0 += K3_ROW_BLOCK) {   /* blocks of rows: buffers in a file */
        const size_t n = (size_t)k3_block_rows(T, t0);
        memset(wsel + (size_t)t0 * E, 0, sizeof(float) * n * E);
        memset(sel + (size_t)t0 * E, 0, n * E);
        memset(r + (size_t)t0 * LAT, 0, sizeof(float) * n * LAT);
        k3_runstate_drop(&e->rs);
    }

    k3_mm(e, logit, &ly->router, x, T);
    for (int t = 0; t < T; t++) {
        if (t % K3_ROW_BLOCK == 0) k3_runstate_drop(&e->rs);
        float *s = logit + (size_t)t * E, sum = 0.0f;
        for (int j = 0; j < E; j++) {
            s[j] = k3_sigmoidf(s[j]);
            choice[j] = s[j] + ly->router_bias[j];
        }
        k3_topk(choice, E, K, ids);
        for (int j = 0; j < K; j++) sum += s[ids[j]];
        float inv = c->moe_renormalize ? 1.0f / (sum + 1e-20f) : 1.0f;
        for (int j = 0; j < K; j++) {
            wsel[(size_t)t * E + ids[j]] = s[ids[j]] * inv * c->routed_scaling_factor;
            sel[(size_t)t * E + ids[j]] = 1;
        }
    }
    int nu = 0;                                  /* the union, in increasing id = compute order */
    for (int j = 0; j < E; j++)
        for (int t = 0; t < T; t++) if (sel[(size_t)t * E + j]) { uni[nu++] = j; break; }
    k3_runstate_drop(&e->rs);
    /* Each rank computes its own experts of the union (all of them at N = 1) */
    const int N = k3_comm_size(), me = k3_comm_rank();
    int mine[nu > 0 ? nu : 1], nm = 0;
    for (int k = 0; k < nu; k++) if (k3_expert_owner(L, uni[k], N) == me) mine[nm++] = uni[k];
    w->ops->prefetch(w, L, mine, nm);            /* all its reads in flight before computing */
    k3_read_ahead(e, L, x, T);                   /* then the next layer's guessed ones */
    k3_mm(e, xl, &ly->lat_down, x, T);
    float *out_y = NULL;                         /* N > 1: [ok][tokens][LAT] per own expert */
    size_t counts[N], at = 0;
    if (N > 1) {
        memset(counts, 0, sizeof counts);
        for (int k = 0; k < nu; k++)
            counts[k3_expert_owner(L, uni[k], N)] += sizeof(float) * (1 + (size_t)LAT *
                                                                     tokens_of(sel, T, E, uni[k]));
        out_y = k3_share_buf(0, counts[me] + 1);
    }
    k3_runstate_hold(&e->rs, 1);                 /* r and wsel stay mapped (runstate.c) */
    for (int k = 0; k < nm; k++) {
        k3_test_expert_hook(e);
        if (k3_halted(e)) break;                 /* the forward stops: the rest is skipped */
        int ex_id = mine[k], nt = 0;
        for (int t = 0; t < T; t++) if (sel[(size_t)t * E + ex_id]) tok[nt++] = t;
        K3Expert ex;
        const int ok = w->ops->expert(w, L, ex_id, &ex) == 0;   /* else counted: run invalid */
        float *yk = N > 1 ? out_y + at + 1 : y;
        if (N > 1) { out_y[at] = (float)ok; at += 1 + (size_t)nt * LAT; }
        if (!ok) continue;
        /* its tokens in blocks when the buffers live in a file (the expert stays in its
         * slot: read once): a block's rows are what stays mapped */
        const int step = e->rs.in_file ? K3_ACT_TOKENS : (nt > 0 ? nt : 1);
        for (int b = 0; b < nt; b += step) {
            const int nb = nt - b < step ? nt - b : step;
            float *yb = N > 1 ? yk + (size_t)b * LAT : yk;
            for (int i = 0; i < nb; i++)
                memcpy(xe + (size_t)i * LAT, xl + (size_t)tok[b + i] * LAT, sizeof(float) * LAT);
            k3_mm_local(e, g, &ex.w1, xe, nb);
            k3_mm_local(e, u, &ex.w3, xe, nb);
            k3_situ(g, g, u, nb * I, c->situ_beta, c->situ_linear_beta);
            k3_mm_local(e, yb, &ex.w2, g, nb);
            if (N == 1) add_expert(r, wsel, E, ex_id, tok + b, nb, yb, LAT);
            k3_runstate_drop(&e->rs);
        }
    }
    k3_runstate_hold(&e->rs, 0);
    if (N > 1) {            /* every expert's output on every rank, summed in increasing id */
        size_t total = 0, off[N];
        for (int k = 0; k < N; k++) { off[k] = total; total += counts[k]; }
        float *all = k3_share_buf(1, total + 1);
        k3_comm_allgatherv(out_y, all, counts);
        for (int k = 0; k < nu; k++) {
            const int ex_id = uni[k], o = k3_expert_owner(L, ex_id, N);
            int nt = 0;
            for (int t = 0; t < T; t++) if (sel[(size_t)t * E + ex_id]) tok[nt++] = t;
            const float *p = all + off[o] / sizeof(float);
            off[o] += sizeof(float) * (1 + (size_t)nt * LAT);
            if (p[0] != 0.0f) add_expert(r, wsel, E, ex_id, tok, nt, p + 1, LAT);
            else if (o != me) w->expert_failures++;   /* its owner could not read it */
        }
    }
    if (c->latent_moe_use_norm)
        for (int t = 0; t < T; t++) {
            if (t % K3_ROW_BLOCK == 0) k3_runstate_drop(&e->rs);
            k3_rmsnorm(r + (size_t)t * LAT, r + (size_t)t * LAT, ly->lat_norm, LAT,
                       c->rms_norm_eps);
        }
    k3_mm(e, out, &ly->lat_up, r, T);
    k3_dense_mlp(e, &ly->gate, &ly->up, &ly->down, x, T, sh);   /* shared experts, full width */
    k3_runstate_add_rows(&e->rs, out, sh, T, H, 0);
}
