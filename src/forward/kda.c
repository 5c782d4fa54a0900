/* kda.c — Kimi Delta Attention (docs/MODEL.md §3.2, pitfalls 2-8).
 *
 * Per token: q,k,v projections through a 4-tap causal depthwise conv + SiLU whose
 * window is carried across calls; the bounded decay gate lb·σ(e^A_log[h]·(z+dt_bias));
 * β = σ(W_b x); per-head L2 norm of q and k, q scaled by D^-1/2; the delta rule
 * (decay, read the decayed state, write, read the updated state); a gated per-head
 * RMSNorm with a sigmoid gate; then o_proj. */
#include "k3.h"
#include "pool.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Causal depthwise conv over T tokens for C channels with K taps; win holds the
 * previous K-1 raw inputs per channel (oldest first) and is advanced. u is
 * overwritten with silu(conv(u)). */
/* The causal conv over channels [c0, c1) of one of q, k, v: each channel runs on through
 * the tokens in order, channels are independent (so split over the pool: the same bits) */
static void short_conv(float *u, float *win, const float *w, int T, int C, int K, int c0,
                       int c1) {
    float hist[K];
    for (int t = 0; t < T; t++) {
        float *ut = u + (size_t)t * C;
        for (int ch = c0; ch < c1; ch++) {
            float *wc = win + (size_t)ch * (K - 1);
            for (int j = 0; j < K - 1; j++) hist[j] = wc[j];
            hist[K - 1] = ut[ch];
            float acc = 0.0f;                       /* taps oldest to newest */
            for (int j = 0; j < K; j++) acc = fmaf(w[(size_t)ch * K + j], hist[j], acc);
            for (int j = 0; j < K - 1; j++) wc[j] = hist[j + 1];
            ut[ch] = acc;
        }
    }
}

enum { CONV_CH = 1024 };                            /* channels a task */
typedef struct { float *u[3], *win; const float *w[3]; int T, C, K, nb; } ConvJob;
static void conv_task(void *ctx, int i) {
    const ConvJob *j = ctx;
    const int m = i / j->nb, c0 = i % j->nb * CONV_CH;
    short_conv(j->u[m], j->win + (size_t)m * j->C * (j->K - 1), j->w[m], j->T, j->C, j->K, c0,
               j->C - c0 < CONV_CH ? j->C : c0 + CONV_CH);
}

static void l2norm(float *x, int n, float scale) {
    float r = 1.0f / sqrtf(k3_dot(x, x, n) + 1e-6f);
    for (int i = 0; i < n; i++) x[i] = x[i] * r * scale;
}

/* One head over the chunk's T tokens, in token order (the recurrence is sequential
 * in t); heads are independent, so they run in parallel on the pool. */
typedef struct {
    const K3Config *c;
    const K3Layer *ly;
    float *S;                                  /* [heads][D][D] */
    int T;
    float *q, *k, *v, *z, *G, *bl, *o;         /* [T][heads*D] (bl: [T][heads]) */
    float *alpha_log, *beta_log;               /* NULL, or [T][heads*D], [T][heads] */
} KdaHeads;

static void kda_head(void *arg, int h) {
    const KdaHeads *a = arg;
    const K3Config *c = a->c;
    const int NH = c->kda_num_heads, D = c->kda_head_dim, C = NH * D;
    const float qscale = 1.0f / sqrtf((float)D), ea = k3_expf(a->ly->A_log[h]);
    float alpha[D];
    for (int t = 0; t < a->T; t++) {
        size_t ho = (size_t)t * C + (size_t)h * D;
        /* bounded decay gate e^(lb·σ(e^A_log (z + dt_bias))), the head's D at once */
        for (int d = 0; d < D; d++) alpha[d] = ea * (a->z[ho + d] + a->ly->dt_bias[h * D + d]);
        k3_sigmoidf_n(alpha, alpha, D);
        for (int d = 0; d < D; d++) alpha[d] = c->gate_lower_bound * alpha[d];
        k3_expf_n(alpha, alpha, D);
        float beta = k3_sigmoidf(a->bl[(size_t)t * NH + h]);
        if (a->alpha_log) {                    /* a speculative pass: keep the inputs */
            memcpy(a->alpha_log + ho, alpha, sizeof alpha);
            a->beta_log[(size_t)t * NH + h] = beta;
        }
        l2norm(a->q + ho, D, qscale);
        l2norm(a->k + ho, D, 1.0f);
        k3_kda_step(a->S + (size_t)h * D * D, a->q + ho, a->k + ho, a->v + ho, alpha, beta,
                    a->o + ho, D);
        /* gated per-head RMSNorm, sigmoid gate */
        k3_rmsnorm(a->o + ho, a->o + ho, a->ly->o_norm, D, c->rms_norm_eps);
        k3_sigmoid_mul(a->o + ho, a->G + ho, (size_t)D);
    }
}

void k3_kda(K3Engine *e, const K3Layer *ly, const K3Seq *seq, int n, int L, const float *x,
            float *out) {
    const K3Config *c = &e->m.cfg;
    const int NH = c->kda_num_heads, C = NH * c->kda_head_dim, K = c->short_conv_kernel_size;
    float *q = e->rs.kda.q, *k = e->rs.kda.k, *v = e->rs.kda.v, *z = e->rs.kda.z;
    float *G = e->rs.kda.G, *fa = e->rs.kda.fa, *bl = e->rs.kda.bl, *o = e->rs.kda.o;
    int T = 0;
    for (int i = 0; i < n; i++) T += seq[i].T;

    /* projections over every row of the step */
    const K3MatJob qkv[] = { { q, &ly->q, x }, { k, &ly->k, x }, { v, &ly->v, x },
                            { fa, &ly->f_a, x } };
    k3_mm_many(e, qkv, 4, T);
    const K3MatJob zbg[] = { { z, &ly->f_b, fa },    /* decay input z = W_fb (W_fa x) */
                            { bl, &ly->b, x }, { G, &ly->g, x } };
    k3_mm_many(e, zbg, 3, T);
    /* conv windows and the recurrence per sequence, on its rows, K3_ROW_BLOCK tokens at a
     * time (each head's recurrence runs on in token order: the same bits) */
    for (int i = 0, r = 0; i < n; r += seq[i].T, i++) {
        K3State *s = seq[i].s;
        float *win = s->kda_conv[L];
        struct K3Undo *u = s->undo && s->undo->armed ? s->undo : NULL;
        for (int b0 = 0; b0 < seq[i].T; b0 += K3_ROW_BLOCK) {
            if (k3_halted(e)) return;            /* the state is reset by the caller */
            const int Ti = k3_block_rows(seq[i].T, b0);
            const size_t ro = (size_t)(r + b0) * C, uo = (size_t)b0 * C;
            for (int t = 0; u && t < Ti; t++) {  /* the raw conv inputs, for a rollback */
                float *raw = u->raw[L] + (size_t)(b0 + t) * 3 * C;
                memcpy(raw, q + ro + (size_t)t * C, sizeof(float) * C);
                memcpy(raw + C, k + ro + (size_t)t * C, sizeof(float) * C);
                memcpy(raw + 2 * C, v + ro + (size_t)t * C, sizeof(float) * C);
            }
            ConvJob cj = { { q + ro, k + ro, v + ro }, win, { ly->q_conv, ly->k_conv, ly->v_conv },
                           Ti, C, K, (C + CONV_CH - 1) / CONV_CH };
            k3_pool_run(conv_task, &cj, 3 * cj.nb);
            for (int m = 0; m < 3; m++)          /* after the taps: they read the raw inputs */
                k3_silu_n(cj.u[m], (size_t)Ti * C);
            KdaHeads heads = { c, ly, s->kda_S[L], Ti, q + ro, k + ro, v + ro, z + ro, G + ro,
                               bl + (size_t)(r + b0) * NH, o + ro,
                               u ? u->alpha[L] + uo : NULL,
                               u ? u->beta[L] + (size_t)b0 * NH : NULL };
            k3_pool_run(kda_head, &heads, NH);
            if (u) {                             /* q, k normalised in place by the heads */
                memcpy(u->q[L] + uo, q + ro, sizeof(float) * (size_t)Ti * C);
                memcpy(u->k[L] + uo, k + ro, sizeof(float) * (size_t)Ti * C);
                memcpy(u->v[L] + uo, v + ro, sizeof(float) * (size_t)Ti * C);
            }
            k3_runstate_drop(&e->rs);
        }
    }
    k3_mm(e, out, &ly->o, o, T);
}
