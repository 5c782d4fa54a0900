/* kda.c — Kimi Delta Attention (K3_MODEL.md §3.2, pitfalls 2-8).
 *
 * Per token: q,k,v projections through a 4-tap causal depthwise conv + SiLU whose
 * window is carried across calls; the bounded decay gate lb·σ(e^A_log[h]·(z+dt_bias));
 * β = σ(W_b x); per-head L2 norm of q and k, q scaled by D^-1/2; the delta rule
 * (decay, read the decayed state, write, read the updated state); a gated per-head
 * RMSNorm with a sigmoid gate; then o_proj. */
#include "k3.h"
#include "util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Causal depthwise conv over T tokens for C channels with K taps; win holds the
 * previous K-1 raw inputs per channel (oldest first) and is advanced. u is
 * overwritten with silu(conv(u)). */
static void short_conv(float *u, float *win, const float *w, int T, int C, int K) {
    float hist[K];
    for (int t = 0; t < T; t++) {
        float *ut = u + (size_t)t * C;
        for (int ch = 0; ch < C; ch++) {
            float *wc = win + (size_t)ch * (K - 1);
            for (int j = 0; j < K - 1; j++) hist[j] = wc[j];
            hist[K - 1] = ut[ch];
            float acc = 0.0f;                       /* taps oldest to newest */
            for (int j = 0; j < K; j++) acc = fmaf(w[(size_t)ch * K + j], hist[j], acc);
            for (int j = 0; j < K - 1; j++) wc[j] = hist[j + 1];
            ut[ch] = k3_siluf(acc);
        }
    }
}

static void l2norm(float *x, int n, float scale) {
    float r = 1.0f / sqrtf(k3_dot(x, x, n) + 1e-6f);
    for (int i = 0; i < n; i++) x[i] = x[i] * r * scale;
}

void k3_kda(const K3Model *m, const K3Layer *ly, K3State *s, int L, const float *x, int T, float *out) {
    const K3Config *c = &m->cfg;
    const int NH = c->kda_num_heads, D = c->kda_head_dim, C = NH * D, K = c->short_conv_kernel_size;
    float *q = k3_xmalloc(sizeof(float) * (size_t)T * C), *k = k3_xmalloc(sizeof(float) * (size_t)T * C);
    float *v = k3_xmalloc(sizeof(float) * (size_t)T * C), *z = k3_xmalloc(sizeof(float) * (size_t)T * C);
    float *G = k3_xmalloc(sizeof(float) * (size_t)T * C), *fa = k3_xmalloc(sizeof(float) * (size_t)T * D);
    float *bl = k3_xmalloc(sizeof(float) * (size_t)T * NH), *o = k3_xmalloc(sizeof(float) * (size_t)T * C);
    float alpha[D];

    k3_matmul(q, &ly->q, x, T);
    k3_matmul(k, &ly->k, x, T);
    k3_matmul(v, &ly->v, x, T);
    float *win = s->kda_conv[L];
    short_conv(q, win, ly->q_conv, T, C, K);
    short_conv(k, win + (size_t)C * (K - 1), ly->k_conv, T, C, K);
    short_conv(v, win + (size_t)2 * C * (K - 1), ly->v_conv, T, C, K);
    k3_matmul(fa, &ly->f_a, x, T);              /* decay input z = W_fb (W_fa x) */
    k3_matmul(z, &ly->f_b, fa, T);
    k3_matmul(bl, &ly->b, x, T);
    k3_matmul(G, &ly->g, x, T);

    const float qscale = 1.0f / sqrtf((float)D);
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < NH; h++) {
            size_t ho = (size_t)t * C + (size_t)h * D;
            float ea = k3_expf(ly->A_log[h]);
            for (int d = 0; d < D; d++) {
                float gz = c->gate_lower_bound * k3_sigmoidf(ea * (z[ho + d] + ly->dt_bias[h * D + d]));
                alpha[d] = k3_expf(gz);
            }
            float beta = k3_sigmoidf(bl[(size_t)t * NH + h]);
            l2norm(q + ho, D, qscale);
            l2norm(k + ho, D, 1.0f);
            k3_kda_step(s->kda_S[L] + (size_t)h * D * D, q + ho, k + ho, v + ho, alpha, beta, o + ho, D);
            /* gated per-head RMSNorm, sigmoid gate */
            k3_rmsnorm(o + ho, o + ho, ly->o_norm, D, c->rms_norm_eps);
            for (int d = 0; d < D; d++) o[ho + d] *= k3_sigmoidf(G[ho + d]);
        }
    }
    k3_matmul(out, &ly->o, o, T);
    free(q); free(k); free(v); free(z); free(G); free(fa); free(bl); free(o);
}
