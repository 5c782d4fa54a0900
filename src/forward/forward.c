/* forward.c — the whole Kimi K3 forward pass, top to bottom (K3_MODEL.md §3.1).
 *
 * There is no conventional residual stream: p is a per-block partial sum of sublayer
 * outputs, B holds block snapshots, and every sublayer reads a softmax Mix over
 * depth (attention residuals). All activations are fp32; T tokens go through each
 * layer together so every weight is read once per chunk. */
#include "k3.h"
#include "mem.h"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

static void embed_rows(const K3Mat *E, const int *ids, int T, float *out) {
    int H = E->cols;
    for (int t = 0; t < T; t++) {
        size_t o = (size_t)ids[t] * H;
        if (E->type == K3_W_F32) memcpy(out + (size_t)t * H, (const float *)E->w + o, H * sizeof(float));
        else for (int d = 0; d < H; d++) out[(size_t)t * H + d] = k3_bf16_to_f32(((const uint16_t *)E->w)[o + d]);
    }
}

static void rmsnorm_rows(float *out, const float *x, const float *w, int T, int H, float eps) {
    for (int t = 0; t < T; t++) k3_rmsnorm(out + (size_t)t * H, x + (size_t)t * H, w, H, eps);
}

static void add_rows(float *p, const float *a, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] += a[i];
}

int k3_forward(K3Model *m, K3State *s, const int *ids, int T, float *logits, int all_logits,
               char *err, size_t errlen) {
    const K3Config *c = &m->cfg;
    const int H = c->hidden_size;
    const float eps = c->rms_norm_eps;
    const size_t n = (size_t)T * H;
    int nb = 0, max_blocks = c->num_hidden_layers / c->attn_res_block_size + 1;   /* >= ceil(L / block) */
    float *p = malloc(n * sizeof(float)), *h = malloc(n * sizeof(float));
    float *x = malloc(n * sizeof(float)), *a = malloc(n * sizeof(float));
    float **B = calloc(max_blocks, sizeof(float *));
    int ok = p && h && x && a && B && k3_state_reserve(m, s, s->pos + T) == 0;

    if (ok) embed_rows(&m->embed, ids, T, p);             /* p = e, B = [] */
    for (int L = 0; ok && L < c->num_hidden_layers; L++) {
        const K3Layer *ly = k3_layer_acquire(m, L);   /* pinned or a ring slot (mem.h) */
        int p_empty = 0;
        /* 1. attention-site mix (skipped only while no snapshot exists) */
        if (nb > 0) k3_attnres_mix(h, (const float *const *)B, nb, p, ly->attn_res_w, T, H, eps);
        else memcpy(h, p, n * sizeof(float));
        /* 2. block boundary: snapshot the entering p (not h), then restart p */
        if (L % c->attn_res_block_size == 0) {
            B[nb] = p; nb++;
            p = malloc(n * sizeof(float));
            if (!p) { ok = 0; k3_layer_release(m, L); break; }
            p_empty = 1;
        }
        /* 3-4. attention sublayer on RMSNorm(h) */
        rmsnorm_rows(x, h, ly->input_norm, T, H, eps);
        if (ly->is_kda) k3_kda(m, ly, s, L, x, T, a);
        else            k3_mla(m, ly, s, L, x, T, a);
        if (p_empty) memcpy(p, a, n * sizeof(float));
        else         add_rows(p, a, n);
        /* 5. MLP-site mix (always: B is never empty here) */
        k3_attnres_mix(h, (const float *const *)B, nb, p, ly->mlp_res_w, T, H, eps);
        /* 6-7. feed-forward on RMSNorm(h2), added to p */
        rmsnorm_rows(x, h, ly->post_norm, T, H, eps);
        if (ly->is_moe) k3_moe(m, ly, L, x, T, a);
        else            k3_dense_mlp(m, &ly->gate, &ly->up, &ly->down, x, T, a);
        add_rows(p, a, n);
        k3_layer_release(m, L);
    }
    if (ok) {
        /* final Mix over the snapshots and p, then the final norm, then lm_head */
        k3_attnres_mix(h, (const float *const *)B, nb, p, m->out_res_w, T, H, eps);
        rmsnorm_rows(x, h, m->final_norm, T, H, eps);
        k3_lm_head(m, logits, all_logits ? x : x + (size_t)(T - 1) * H, all_logits ? T : 1);   /* resident or row blocks (mem.h) */
        s->pos += T;
    }
    for (int i = 0; i < nb; i++) free(B[i]);
    free(B); free(p); free(h); free(x); free(a);
    if (!ok) { snprintf(err, errlen, "out of memory in the forward pass (%d tokens)", T); return -1; }
    return 0;
}

/* Feeds n tokens in chunks of at most `chunk` (bounding activation memory; each chunk
 * reads every weight and selected expert once). The bits do not depend on chunk. */
int k3_prefill(K3Model *m, K3State *s, const int *ids, int n, int chunk, float *logits, int all_logits,
               char *err, size_t errlen) {
    const size_t V = (size_t)m->cfg.vocab_size;
    if (chunk <= 0) chunk = K3_PREFILL_CHUNK;
    for (int t = 0; t < n; t += chunk) {
        int T = n - t < chunk ? n - t : chunk;
        float *out = all_logits ? logits + (size_t)t * V : logits;
        if (k3_forward(m, s, ids + t, T, out, all_logits, err, errlen)) return -1;
    }
    return 0;
}
