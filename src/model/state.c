/* state.c — the per-sequence state (docs/MODEL.md §3.8): KDA recurrent state and conv
 * windows per KDA layer, and the MLA latent cache, grown by doubling. */
#include "k3.h"
#include <stdlib.h>
#include <string.h>

K3State *k3_state_new(const K3Model *m) { return k3_state_new_in(m, 0); }

K3State *k3_state_new_in(const K3Model *m, int in_file) {
    const K3Config *c = &m->cfg;
    int NL = c->num_hidden_layers;
    K3State *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->kda_S = calloc(NL, sizeof(float *)); s->kda_conv = calloc(NL, sizeof(float *));
    s->mla_c = calloc(NL, sizeof(float *)); s->mla_pe = calloc(NL, sizeof(float *));
    if (!s->kda_S || !s->kda_conv || !s->mla_c || !s->mla_pe) { k3_state_free(m, s); return NULL; }
    s->in_file = in_file;
    s->fresh = 1;
    size_t C = (size_t)c->kda_num_heads * c->kda_head_dim;
    for (int L = 0; L < NL; L++)                 /* in-file layers: the pager points them */
        if (c->is_kda[L] && !(in_file & K3_STATE_KDA_FILE)) {
            s->kda_S[L] = calloc((size_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim,
                                 sizeof(float));
            s->kda_conv[L] = calloc(3 * C * (c->short_conv_kernel_size - 1) + 1, sizeof(float));
            if (!s->kda_S[L] || !s->kda_conv[L]) { k3_state_free(m, s); return NULL; }
        }
    return s;
}

/* Makes room in the MLA cache for n positions. */
int k3_state_reserve(const K3Model *m, K3State *s, int n) {
    const K3Config *c = &m->cfg;
    if (n <= s->cap) return 0;
    int cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        if (c->is_kda[L] || (s->in_file & K3_STATE_MLA_FILE)) continue;   /* sized by the file */
        float *a = realloc(s->mla_c[L], sizeof(float) * (size_t)cap * c->kv_lora_rank);
        if (!a) return -1;
        s->mla_c[L] = a;
        float *b = realloc(s->mla_pe[L], sizeof(float) * (size_t)cap * c->qk_rope_head_dim);
        if (!b) return -1;
        s->mla_pe[L] = b;
    }
    s->cap = cap;
    return 0;
}

static void undo_free(const K3Model *m, struct K3Undo *u);

void k3_state_reset(const K3Model *m, K3State *s) {
    const K3Config *c = &m->cfg;
    size_t C = (size_t)c->kda_num_heads * c->kda_head_dim;
    for (int L = 0; L < c->num_hidden_layers; L++)
        if (c->is_kda[L] && !(s->in_file & K3_STATE_KDA_FILE)) {
            memset(s->kda_S[L], 0, sizeof(float) * C * c->kda_head_dim);
            memset(s->kda_conv[L], 0, sizeof(float) * 3 * C * (c->short_conv_kernel_size - 1));
        }
    s->pos = 0;
    s->fresh = 1;                                /* in-file records read as zeros */
    if (s->undo) s->undo->armed = 0;
}

void k3_state_free(const K3Model *m, K3State *s) {
    if (!s) return;
    for (int L = 0; L < m->cfg.num_hidden_layers; L++) {
        if (s->kda_S) free(s->kda_S[L]);
        if (s->kda_conv) free(s->kda_conv[L]);
        if (s->mla_c) free(s->mla_c[L]);
        if (s->mla_pe) free(s->mla_pe[L]);
    }
    free(s->kda_S); free(s->kda_conv); free(s->mla_c); free(s->mla_pe);
    undo_free(m, s->undo);
    free(s);
}

/* ---- speculation: one forward logged so that a prefix of it can be kept ---- */
static void undo_free(const K3Model *m, struct K3Undo *u) {
    if (!u) return;
    float **all[8] = { u->S0, u->conv0, u->raw, u->q, u->k, u->v, u->alpha, u->beta };
    for (int a = 0; a < 8; a++) {
        for (int L = 0; all[a] && L < m->cfg.num_hidden_layers; L++) free(all[a][L]);
        free(all[a]);
    }
    free(u);
}

int k3_state_mark(const K3Model *m, K3State *s, int max_T) {
    const K3Config *c = &m->cfg;
    const int NL = c->num_hidden_layers, K = c->short_conv_kernel_size;
    const size_t NH = c->kda_num_heads, D = c->kda_head_dim, C = NH * D;
    struct K3Undo *u = s->undo;
    if (s->in_file) return -1;                   /* the copy would be the whole state */
    if (u && u->max_T < max_T) { undo_free(m, u); u = s->undo = NULL; }
    if (!u) {
        u = s->undo = calloc(1, sizeof *u);
        if (!u) return -1;
        u->max_T = max_T;
        float ***all[8] = { &u->S0, &u->conv0, &u->raw, &u->q, &u->k, &u->v, &u->alpha,
                            &u->beta };
        const size_t T = (size_t)max_T;
        const size_t n[8] = { NH * D * D, 3 * C * (K - 1) + 1, T * 3 * C, T * C, T * C,
                              T * C, T * C, T * NH };
        for (int a = 0; a < 8; a++)
            if (!(*all[a] = calloc((size_t)NL, sizeof(float *)))) goto oom;
        for (int L = 0; L < NL; L++)
            for (int a = 0; c->is_kda[L] && a < 8; a++)
                if (!((*all[a])[L] = malloc(sizeof(float) * n[a]))) goto oom;
    }
    for (int L = 0; L < NL; L++)
        if (c->is_kda[L]) {
            memcpy(u->S0[L], s->kda_S[L], sizeof(float) * NH * D * D);
            memcpy(u->conv0[L], s->kda_conv[L], sizeof(float) * 3 * C * (K - 1));
        }
    u->armed = 1; u->T = 0; u->pos0 = s->pos;
    return 0;
oom:
    undo_free(m, u);
    s->undo = NULL;
    return -1;
}

int k3_state_rollback(const K3Model *m, K3State *s, int keep) {
    const K3Config *c = &m->cfg;
    const int NL = c->num_hidden_layers, K = c->short_conv_kernel_size;
    const int NH = c->kda_num_heads, D = c->kda_head_dim, C = NH * D;
    struct K3Undo *u = s->undo;
    if (!u || !u->T || keep < 0 || keep > u->T) return -1;
    u->armed = 0;
    if (keep == u->T) return 0;                  /* every position kept: nothing to undo */
    float o[D];
    for (int L = 0; L < NL; L++) {
        if (!c->is_kda[L]) continue;
        float *S = s->kda_S[L];
        memcpy(S, u->S0[L], sizeof(float) * (size_t)NH * D * D);
        for (int t = 0; t < keep; t++)           /* the delta rule over the kept positions */
            for (int h = 0; h < NH; h++) {
                const size_t ho = (size_t)t * C + (size_t)h * D;
                k3_kda_step(S + (size_t)h * D * D, u->q[L] + ho, u->k[L] + ho, u->v[L] + ho,
                            u->alpha[L] + ho, u->beta[L][(size_t)t * NH + h], o, D);
            }
        /* each window: the last K-1 raw inputs of (window before ++ kept inputs) */
        for (int w = 0; w < 3; w++)
            for (int ch = 0; ch < C; ch++) {
                float hist[K - 1 + keep];
                const float *w0 = u->conv0[L] + ((size_t)w * C + ch) * (K - 1);
                for (int j = 0; j < K - 1; j++) hist[j] = w0[j];
                for (int t = 0; t < keep; t++)
                    hist[K - 1 + t] = u->raw[L][(size_t)t * 3 * C + (size_t)w * C + ch];
                float *wc = s->kda_conv[L] + ((size_t)w * C + ch) * (K - 1);
                for (int j = 0; j < K - 1; j++) wc[j] = hist[keep + j];
            }
    }
    s->pos = u->pos0 + keep;                     /* the MLA cache past it is overwritten later */
    return 0;
}

void k3_state_copy(const K3Model *m, K3State *d, const K3State *src) {
    const K3Config *c = &m->cfg;
    const size_t kda = (size_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim;
    const size_t conv = 3 * (size_t)c->kda_num_heads * c->kda_head_dim *
                        (size_t)(c->short_conv_kernel_size - 1);
    for (int L = 0; L < c->num_hidden_layers; L++) {
        if (c->is_kda[L]) {
            if (!src->kda_S[L] || !d->kda_S[L]) continue;          /* in a state file */
            memcpy(d->kda_S[L], src->kda_S[L], 4 * kda);
            memcpy(d->kda_conv[L], src->kda_conv[L], 4 * conv);
        } else if (src->pos && !(src->in_file & K3_STATE_MLA_FILE) &&
                   !(d->in_file & K3_STATE_MLA_FILE)) {
            memcpy(d->mla_c[L], src->mla_c[L], 4 * (size_t)src->pos * c->kv_lora_rank);
            memcpy(d->mla_pe[L], src->mla_pe[L], 4 * (size_t)src->pos * c->qk_rope_head_dim);
        }
    }
}
