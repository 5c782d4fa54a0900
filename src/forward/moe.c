/* moe.c — the sigmoid router and the latent MoE (K3_MODEL.md §3.4-3.7,
 * pitfalls 17-22).
 *
 * The router scores the full-width input; the correction bias only selects, the
 * weights come from the unbiased sigmoid scores, renormalised. Experts run in the
 * latent width on their packed MXFP4 bytes; their weighted sum is RMS-normalised
 * once, projected up, and added to the shared experts (full width, unweighted).
 * Each selected expert is fetched once per chunk for all tokens that chose it, and
 * experts are accumulated in increasing id so a chunk and a single token agree. */
#include "k3.h"
#include "mem.h"
#include "util.h"
#include <stdlib.h>
#include <string.h>

void k3_dense_mlp(const K3Model *m, const K3Mat *gate, const K3Mat *up, const K3Mat *down,
                  const float *x, int T, float *out) {
    size_t n = (size_t)T * gate->rows;
    float *g = k3_xmalloc(sizeof(float) * n), *u = k3_xmalloc(sizeof(float) * n);
    k3_matmul(g, gate, x, T);
    k3_matmul(u, up, x, T);
    k3_situ(g, g, u, (int)n, m->cfg.situ_beta, m->cfg.situ_linear_beta);
    k3_matmul(out, down, g, T);
    free(g); free(u);
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

void k3_moe(K3Model *m, const K3Layer *ly, int L, const float *x, int T, float *out) {
    const K3Config *c = &m->cfg;
    const int H = c->hidden_size, E = c->num_experts, K = c->num_experts_per_token;
    const int LAT = c->routed_expert_hidden_size, I = c->moe_intermediate_size;
    float *logit = k3_xmalloc(sizeof(float) * (size_t)T * E);
    float *wsel = k3_xcalloc((size_t)T * E, sizeof(float));      /* [T][E] routing weight */
    unsigned char *sel = k3_xcalloc((size_t)T * E, 1);            /* [T][E] chosen */
    float *xl = k3_xmalloc(sizeof(float) * (size_t)T * LAT), *r = k3_xcalloc((size_t)T * LAT, sizeof(float));
    float *xe = k3_xmalloc(sizeof(float) * (size_t)T * LAT), *g = k3_xmalloc(sizeof(float) * (size_t)T * I);
    float *u = k3_xmalloc(sizeof(float) * (size_t)T * I), *y = k3_xmalloc(sizeof(float) * (size_t)T * LAT);
    int *tok = k3_xmalloc(sizeof(int) * T), ids[K];
    float choice[E];

    k3_matmul(logit, &ly->router, x, T);
    for (int t = 0; t < T; t++) {
        float *s = logit + (size_t)t * E, sum = 0.0f;
        for (int e = 0; e < E; e++) { s[e] = k3_sigmoidf(s[e]); choice[e] = s[e] + ly->router_bias[e]; }
        topk(choice, E, K, ids);
        for (int j = 0; j < K; j++) sum += s[ids[j]];
        float inv = c->moe_renormalize ? 1.0f / (sum + 1e-20f) : 1.0f;
        for (int j = 0; j < K; j++) {
            wsel[(size_t)t * E + ids[j]] = s[ids[j]] * inv * c->routed_scaling_factor;
            sel[(size_t)t * E + ids[j]] = 1;
        }
    }
    int nu = 0;                                  /* the union, in increasing id = compute order */
    int *uni = k3_xmalloc(sizeof(int) * E);
    for (int e = 0; e < E; e++)
        for (int t = 0; t < T; t++) if (sel[(size_t)t * E + e]) { uni[nu++] = e; break; }
    k3_experts_prefetch(m, L, uni, nu);          /* all its reads in flight before computing */
    k3_matmul(xl, &ly->lat_down, x, T);
    for (int k = 0; k < nu; k++) {
        int e = uni[k], nt = 0;
        for (int t = 0; t < T; t++) if (sel[(size_t)t * E + e]) tok[nt++] = t;
        K3Expert ex;
        if (k3_expert_get(m, L, e, &ex) != 0) continue;       /* counted; run reported invalid */
        for (int i = 0; i < nt; i++) memcpy(xe + (size_t)i * LAT, xl + (size_t)tok[i] * LAT, sizeof(float) * LAT);
        k3_matmul(g, &ex.w1, xe, nt);
        k3_matmul(u, &ex.w3, xe, nt);
        k3_situ(g, g, u, nt * I, c->situ_beta, c->situ_linear_beta);
        k3_matmul(y, &ex.w2, g, nt);
        for (int i = 0; i < nt; i++)
            k3_axpy(r + (size_t)tok[i] * LAT, wsel[(size_t)tok[i] * E + e], y + (size_t)i * LAT, LAT);
    }
    for (int t = 0; t < T; t++)
        if (c->latent_moe_use_norm) k3_rmsnorm(r + (size_t)t * LAT, r + (size_t)t * LAT, ly->lat_norm, LAT, c->rms_norm_eps);
    k3_matmul(out, &ly->lat_up, r, T);
    float *sh = k3_xmalloc(sizeof(float) * (size_t)T * H);
    k3_dense_mlp(m, &ly->gate, &ly->up, &ly->down, x, T, sh);   /* shared experts, full width */
    for (size_t i = 0; i < (size_t)T * H; i++) out[i] += sh[i];
    free(sh); free(logit); free(wsel); free(sel); free(uni); free(xl); free(r); free(xe); free(g); free(u); free(y); free(tok);
}
