/* tensors.c — the table of layer matrices and the trunk-tensor rules (tensors.h). */
#include "tensors.h"
#include <stdlib.h>
#include <string.h>

#define F(x) offsetof(K3Layer, x)
const K3MatName k3_layer_mats[] = {
    /* KDA (§2.3) */
    { F(q), "self_attn.q_proj.weight", K3_IN_KDA, K3_D_KDA_C, K3_D_HIDDEN },
    { F(k), "self_attn.k_proj.weight", K3_IN_KDA, K3_D_KDA_C, K3_D_HIDDEN },
    { F(v), "self_attn.v_proj.weight", K3_IN_KDA, K3_D_KDA_C, K3_D_HIDDEN },
    { F(f_a), "self_attn.f_a_proj.weight", K3_IN_KDA, K3_D_KDA_D, K3_D_HIDDEN },
    { F(f_b), "self_attn.f_b_proj.weight", K3_IN_KDA, K3_D_KDA_C, K3_D_KDA_D },
    { F(b), "self_attn.b_proj.weight", K3_IN_KDA, K3_D_KDA_HEADS, K3_D_HIDDEN },
    { F(g), "self_attn.g_proj.weight", K3_IN_KDA, K3_D_KDA_C, K3_D_HIDDEN },
    { F(o), "self_attn.o_proj.weight", K3_IN_KDA, K3_D_HIDDEN, K3_D_KDA_C },
    /* MLA (§2.4) */
    { F(q_a), "self_attn.q_a_proj.weight", K3_IN_MLA, K3_D_Q_LORA, K3_D_HIDDEN },
    { F(q_b), "self_attn.q_b_proj.weight", K3_IN_MLA, K3_D_Q_B, K3_D_Q_LORA },
    { F(kv_a), "self_attn.kv_a_proj_with_mqa.weight", K3_IN_MLA, K3_D_KV_A, K3_D_HIDDEN },
    { F(kv_b), "self_attn.kv_b_proj.weight", K3_IN_MLA, K3_D_KV_B, K3_D_KV_LORA },
    { F(g), "self_attn.g_proj.weight", K3_IN_MLA_GATED, K3_D_MLA_V, K3_D_HIDDEN },
    { F(o), "self_attn.o_proj.weight", K3_IN_MLA, K3_D_HIDDEN, K3_D_MLA_V },
    /* dense MLP (§2.5) */
    { F(gate), "mlp.gate_proj.weight", K3_IN_DENSE, K3_D_INTER, K3_D_HIDDEN },
    { F(up), "mlp.up_proj.weight", K3_IN_DENSE, K3_D_INTER, K3_D_HIDDEN },
    { F(down), "mlp.down_proj.weight", K3_IN_DENSE, K3_D_HIDDEN, K3_D_INTER },
    /* MoE (§2.6): router, latent projections, shared experts */
    { F(router), "block_sparse_moe.gate.weight", K3_IN_MOE, K3_D_EXPERTS, K3_D_HIDDEN },
    { F(lat_down), "block_sparse_moe.routed_expert_down_proj.weight", K3_IN_MOE, K3_D_LATENT,
      K3_D_HIDDEN },
    { F(lat_up), "block_sparse_moe.routed_expert_up_proj.weight", K3_IN_MOE, K3_D_HIDDEN,
      K3_D_LATENT },
    { F(gate), "block_sparse_moe.shared_experts.gate_proj.weight", K3_IN_MOE, K3_D_SHARED,
      K3_D_HIDDEN },
    { F(up), "block_sparse_moe.shared_experts.up_proj.weight", K3_IN_MOE, K3_D_SHARED,
      K3_D_HIDDEN },
    { F(down), "block_sparse_moe.shared_experts.down_proj.weight", K3_IN_MOE, K3_D_HIDDEN,
      K3_D_SHARED },
};
#undef F
const int k3_n_layer_mats = (int)(sizeof k3_layer_mats / sizeof k3_layer_mats[0]);

int k3_dim(const K3Config *c, int d) {
    switch (d) {
    case K3_D_HIDDEN: return c->hidden_size;
    case K3_D_KDA_C: return c->kda_num_heads * c->kda_head_dim;
    case K3_D_KDA_D: return c->kda_head_dim;
    case K3_D_KDA_HEADS: return c->kda_num_heads;
    case K3_D_Q_LORA: return c->q_lora_rank;
    case K3_D_Q_B: return c->num_attention_heads * (c->qk_nope_head_dim + c->qk_rope_head_dim);
    case K3_D_KV_A: return c->kv_lora_rank + c->qk_rope_head_dim;
    case K3_D_KV_B: return c->num_attention_heads * (c->qk_nope_head_dim + c->v_head_dim);
    case K3_D_KV_LORA: return c->kv_lora_rank;
    case K3_D_MLA_V: return c->num_attention_heads * c->v_head_dim;
    case K3_D_INTER: return c->intermediate_size;
    case K3_D_SHARED: return c->moe_intermediate_size * c->num_shared_experts;
    case K3_D_EXPERTS: return c->num_experts;
    case K3_D_LATENT: return c->routed_expert_hidden_size;
    }
    return 0;
}

int k3_mat_in_layer(const K3MatName *t, const K3Config *c, int L) {
    switch (t->in) {
    case K3_IN_ALL: return 1;
    case K3_IN_KDA: return c->is_kda[L];
    case K3_IN_MLA: return !c->is_kda[L];
    case K3_IN_MLA_GATED: return !c->is_kda[L] && c->mla_use_output_gate;
    case K3_IN_DENSE: return !c->is_moe[L];
    case K3_IN_MOE: return c->is_moe[L];
    }
    return 0;
}

K3Mat *k3_mat_field(K3Layer *ly, const K3MatName *t) {
    return (K3Mat *)((char *)ly + t->field);
}

int k3_tensor_layer(const char *name) {
    const char *p = strstr(name, "model.layers.");
    if (!p || p[13] < '0' || p[13] > '9') return -1;
    return atoi(p + 13);
}

int k3_is_trunk_tensor(const char *name) {
    if (strstr(name, "vision_tower.") || strstr(name, "mm_projector.")) return 0;
    return strstr(name, ".experts.") == NULL;     /* routed experts stay in the shards */
}

int k3_mat_lookup(const K3Config *c, int L, const char *name) {
    const char *p = strstr(name, "model.layers.");
    if (!p || !(p = strchr(p + 13, '.'))) return -1;
    for (int i = 0; i < k3_n_layer_mats; i++)
        if (!strcmp(k3_layer_mats[i].suffix, p + 1) && k3_mat_in_layer(&k3_layer_mats[i], c, L))
            return i;
    return -1;
}

/* Exponent bits all ones: Inf or NaN, in the stored format (no widening needed). Blocks
 * are OR-reduced without a branch (this scans whole checkpoints); a hit is then located. */
static int64_t first_nonfinite32(const unsigned char *p, uint64_t n) {
    for (uint64_t b = 0; b < n; b += 1024) {
        const uint64_t e = n - b < 1024 ? n - b : 1024;
        uint32_t bad = 0;
        for (uint64_t i = 0; i < e; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * (b + i), 4);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
        for (uint64_t i = 0; bad && i < e; i++) {
            uint32_t u;
            memcpy(&u, p + 4 * (b + i), 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return (int64_t)(b + i);
        }
    }
    return -1;
}

static int64_t first_nonfinite16(const unsigned char *p, uint64_t n, uint16_t ex) {
    for (uint64_t b = 0; b < n; b += 2048) {
        const uint64_t e = n - b < 2048 ? n - b : 2048;
        uint16_t bad = 0;
        for (uint64_t i = 0; i < e; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * (b + i), 2);
            bad |= (h & ex) == ex;
        }
        for (uint64_t i = 0; bad && i < e; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * (b + i), 2);
            if ((h & ex) == ex) return (int64_t)(b + i);
        }
    }
    return -1;
}

int64_t k3_first_nonfinite(int dtype, const void *data, uint64_t nbytes) {
    if (dtype == ST_F32) return first_nonfinite32(data, nbytes / 4);
    if (dtype == ST_BF16) return first_nonfinite16(data, nbytes / 2, 0x7f80);
    if (dtype == ST_F16) return first_nonfinite16(data, nbytes / 2, 0x7c00);
    return -1;
}

int64_t k3_first_bad_scale(const void *data, uint64_t nbytes) {
    const unsigned char *p = memchr(data, 0xFF, nbytes);
    return p ? (int64_t)(p - (const unsigned char *)data) : -1;
}

int k3_is_scale_tensor(const char *name) {
    size_t n = strlen(name);
    return n >= 13 && !strcmp(name + n - 13, ".weight_scale");
}
