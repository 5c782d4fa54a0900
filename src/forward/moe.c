/* moe.c — the sigmoid router and the latent MoE (docs/MODEL.md §3.4-3.7,
 * pitfalls 17-22).
 *
 * The router scores the full-width input; the correction bias only selects, the
 * weights come from the unbiased sigmoid scores, renormalised. Experts run in the
 * latent width on their packed MXFP4 bytes; their weighted sum is RMS-normalised
 * once, projected up, and added to the shared experts (full width, unweighted).
 * Each selected expert is fetched once per chunk for all tokens that chose it, and
 * experts are accumulated in increasing id so a chunk and a single token agree. An
 * interrupt is looked at before each expert (progress.c). */
#include "k3.h"
#include <string.h>

void k3_dense_mlp(K3Engine *e, const K3Mat *gate, const K3Mat *up, const K3Mat *down,
                  const float *x, int T, float *out) {
    const K3Config *c = &e->m.cfg;
    size_t n = (size_t)T * gate->rows;
    float *g = e->rs.mlp.g, *u = e->rs.mlp.u;
    k3_mm(e, g, gate, x, T);
    k3_mm(e, u, up, x, T);
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
static void topk(const float *choice, int E, int k, int *ids) {
    int n = 0;
    for (int e = 0; e < E; e++) {
        if (n == k && !(choice[e] > choice[ids[k - 1]])) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && choice[e] > choice[ids[i - 1]]) { ids[i] = ids[i - 1]; i--; }
        ids[i] = e;
    }
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
    memset(wsel, 0, sizeof(float) * (size_t)T * E);
    memset(sel, 0, (size_t)T * E);
    memset(r, 0, sizeof(float) * (size_t)T * LAT);
    k3_runstate_drop(&e->rs);

    k3_mm(e, logit, &ly->router, x, T);
    for (int t = 0; t < T; t++) {
        if (t % K3_ROW_BLOCK == 0) k3_runstate_drop(&e->rs);
        float *s = logit + (size_t)t * E, sum = 0.0f;
        for (int j = 0; j < E; j++) {
            s[j] = k3_sigmoidf(s[j]);
            choice[j] = s[j] + ly->router_bias[j];
        }
        topk(choice, E, K, ids);
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
    w->ops->prefetch(w, L, uni, nu);             /* all its reads in flight before computing */
    k3_mm(e, xl, &ly->lat_down, x, T);
    for (int k = 0; k < nu; k++) {
        k3_test_expert_hook(e);
        if (k3_halted(e)) break;                 /* the forward stops: the rest is skipped */
        int ex_id = uni[k], nt = 0;
        for (int t = 0; t < T; t++) if (sel[(size_t)t * E + ex_id]) tok[nt++] = t;
        K3Expert ex;
        if (w->ops->expert(w, L, ex_id, &ex) != 0) continue;    /* counted; run reported invalid */
        for (int i = 0; i < nt; i++)
            memcpy(xe + (size_t)i * LAT, xl + (size_t)tok[i] * LAT, sizeof(float) * LAT);
        k3_mm(e, g, &ex.w1, xe, nt);
        k3_mm(e, u, &ex.w3, xe, nt);
        k3_situ(g, g, u, nt * I, c->situ_beta, c->situ_linear_beta);
        k3_mm(e, y, &ex.w2, g, nt);
        for (int i = 0; i < nt; i++)
            k3_axpy(r + (size_t)tok[i] * LAT, wsel[(size_t)tok[i] * E + ex_id],
                    y + (size_t)i * LAT, LAT);
    }
    if (c->latent_moe_use_norm)
        for (int t = 0; t < T; t++)
            k3_rmsnorm(r + (size_t)t * LAT, r + (size_t)t * LAT, ly->lat_norm, LAT,
                       c->rms_norm_eps);
    k3_mm(e, out, &ly->lat_up, r, T);
    k3_dense_mlp(e, &ly->gate, &ly->up, &ly->down, x, T, sh);   /* shared experts, full width */
    for (size_t i = 0; i < (size_t)T * H; i++) out[i] += sh[i];
    k3_runstate_drop(&e->rs);
}
