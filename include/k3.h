/* k3.h — the Kimi K3 model: weights bound from a checkpoint, per-sequence state,
 * and the forward pass. */
#ifndef K3_K3_H
#define K3_K3_H
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "kernels.h"
#include "st.h"

enum { K3_OK = 0, K3_ERR_RUNTIME = 1, K3_ERR_USAGE = 2, K3_ERR_EXPERT = 4 };

/* One routed expert, ready to multiply: gate w1, down w2, up w3 (MXFP4). */
typedef struct { K3Mat w1, w2, w3; } K3Expert;

typedef struct {
    int is_kda, is_moe;
    /* norms and attention-residual score vectors (res_norm ⊙ res_proj), widened to f32 */
    float *input_norm, *post_norm, *attn_res_w, *mlp_res_w;
    /* KDA (K3_MODEL.md §2.3) */
    K3Mat q, k, v, f_a, f_b, b, g, o;
    float *q_conv, *k_conv, *v_conv;          /* [C][K] */
    float *dt_bias, *A_log, *o_norm;          /* [C], [heads] (padding dropped), [D] */
    /* MLA (§2.4); g and o are shared with the KDA names */
    K3Mat q_a, q_b, kv_a, kv_b;
    float *q_a_norm, *kv_a_norm;
    /* FFN: dense MLP at layer 0, shared experts in MoE layers (§2.5, §2.6) */
    K3Mat gate, up, down;
    K3Mat router, lat_down, lat_up;
    float *router_bias, *lat_norm;
    const StTensor **experts;                 /* [num_experts][6]: w1p w1s w2p w2s w3p w3s */
} K3Layer;

typedef struct K3Model K3Model;
struct K3Model {
    K3Config cfg;
    StIndex *st;
    char dir[4096];
    K3Layer *layers;
    K3Mat embed, lm_head;
    float *final_norm, *out_res_w;
    void **maps; uint64_t *map_len;           /* one read-only mapping per shard */
    /* expert reads (experts.c) */
    void *experts_priv;
    long expert_failures;
};

/* Per-sequence decode state (§3.8): KDA recurrent state + conv windows, and the
 * MLA latent cache (normalised c' and k_pe per position). */
typedef struct {
    int pos;                                  /* positions already fed */
    int cap;                                  /* MLA cache capacity (positions) */
    float **kda_S;                            /* [L] -> [heads][D][D] or NULL */
    float **kda_conv;                         /* [L] -> [3][C][K-1] or NULL */
    float **mla_c;                            /* [L] -> [cap][kv_lora] */
    float **mla_pe;                           /* [L] -> [cap][rope] */
} K3State;

/* Opens MODEL_DIR (config_path NULL = MODEL_DIR/config.json). Returns 0, or an exit
 * code (1 runtime / 2 config) with the message in err. */
int k3_model_open(K3Model *m, const char *dir, const char *config_path, char *err, size_t errlen);
void k3_model_close(K3Model *m);

K3State *k3_state_new(const K3Model *m);
int k3_state_reserve(const K3Model *m, K3State *s, int n_positions);   /* grow the MLA cache */
void k3_state_reset(const K3Model *m, K3State *s);
void k3_state_free(const K3Model *m, K3State *s);

/* Feeds T tokens at positions s->pos .. s->pos+T-1 and advances s->pos.
 * logits: [T][vocab] when all_logits, else [vocab] for the last token only.
 * Returns 0, or -1 with err set (allocation failure). */
int k3_forward(K3Model *m, K3State *s, const int *ids, int T, float *logits, int all_logits,
               char *err, size_t errlen);

/* k3_forward over n tokens in chunks of at most `chunk` (<= 0: K3_PREFILL_CHUNK);
 * identical bits for any chunk size. */
#define K3_PREFILL_CHUNK 64
int k3_prefill(K3Model *m, K3State *s, const int *ids, int n, int chunk, float *logits, int all_logits,
               char *err, size_t errlen);

/* Layer kinds (one file each). x is the normalised input [T][hidden]; out [T][hidden]. */
void k3_kda(const K3Model *m, const K3Layer *ly, K3State *s, int L, const float *x, int T, float *out);
void k3_mla(const K3Model *m, const K3Layer *ly, K3State *s, int L, const float *x, int T, float *out);
void k3_moe(K3Model *m, const K3Layer *ly, int L, const float *x, int T, float *out);
void k3_dense_mlp(const K3Model *m, const K3Mat *gate, const K3Mat *up, const K3Mat *down,
                  const float *x, int T, float *out);
/* Attention-residual Mix (§3.1) over snapshots B[0..nb) and p, for T tokens. */
void k3_attnres_mix(float *out, const float *const *B, int nb, const float *p,
                    const float *w, int T, int H, float eps);

/* Routed experts (experts.c): makes expert e of layer L ready; 0 or -1 on I/O failure. */
int k3_expert_get(K3Model *m, int L, int e, K3Expert *out);

/* Bytes of a tensor in its shard's read-only mapping (maps the shard on first use). */
const void *k3_tensor_data(K3Model *m, const StTensor *t);

#endif
