/* state.c — the per-sequence state (docs/MODEL.md §3.8): KDA recurrent state and conv
 * windows per KDA layer, and the MLA latent cache, grown by doubling. */
#include "k3.h"
#include <stdlib.h>
#include <string.h>

K3State *k3_state_new(const K3Model *m) {
    const K3Config *c = &m->cfg;
    int NL = c->num_hidden_layers;
    K3State *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->kda_S = calloc(NL, sizeof(float *)); s->kda_conv = calloc(NL, sizeof(float *));
    s->mla_c = calloc(NL, sizeof(float *)); s->mla_pe = calloc(NL, sizeof(float *));
    if (!s->kda_S || !s->kda_conv || !s->mla_c || !s->mla_pe) { k3_state_free(m, s); return NULL; }
    size_t C = (size_t)c->kda_num_heads * c->kda_head_dim;
    for (int L = 0; L < NL; L++)
        if (c->is_kda[L]) {
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
        if (c->is_kda[L]) continue;
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

void k3_state_reset(const K3Model *m, K3State *s) {
    const K3Config *c = &m->cfg;
    size_t C = (size_t)c->kda_num_heads * c->kda_head_dim;
    for (int L = 0; L < c->num_hidden_layers; L++)
        if (c->is_kda[L]) {
            memset(s->kda_S[L], 0, sizeof(float) * C * c->kda_head_dim);
            memset(s->kda_conv[L], 0, sizeof(float) * 3 * C * (c->short_conv_kernel_size - 1));
        }
    s->pos = 0;
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
    free(s);
}
