/* config.h — the strict K3 text-model config (docs/MODEL.md §1). Every "Req" key is
 * required and validated; a guessed field makes a different model. */
#ifndef K3_CONFIG_H
#define K3_CONFIG_H
#include <stddef.h>

#define K3_MAX_LAYERS 256

typedef struct {
    int hidden_size, num_hidden_layers, vocab_size, intermediate_size;
    float rms_norm_eps;
    int first_k_dense_replace, moe_layer_freq;
    int num_experts, num_experts_per_token, num_shared_experts;
    int moe_intermediate_size, routed_expert_hidden_size;
    int latent_moe_use_norm, moe_renormalize, use_grouped_topk;
    int num_expert_group, topk_group;
    float routed_scaling_factor;
    float situ_beta, situ_linear_beta;         /* activation_situ_beta / _linear_beta */
    int attn_res_block_size;
    int num_attention_heads, num_key_value_heads;
    int q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int mla_use_nope, mla_use_output_gate;
    /* linear_attn_config */
    int kda_num_heads, kda_head_dim, short_conv_kernel_size, use_full_rank_gate;
    float gate_lower_bound;
    int num_nextn_predict_layers, tie_word_embeddings;
    int max_position_embeddings;               /* optional; context limit only */
    int bos_token_id, eos_token_id, pad_token_id; /* -1 when absent */
    /* derived */
    unsigned char is_kda[K3_MAX_LAYERS];       /* 0-based: (L+1) in kda_layers */
    unsigned char is_moe[K3_MAX_LAYERS];
    char source[4096];                         /* path the config came from */
    unsigned long long hash;                   /* FNV-1a of the file bytes */
} K3Config;

/* Loads path (a config.json, nested under text_config or flat). On failure returns 2
 * and err lists every missing or bad key at once ("config.json: text_config.X: ..."). */
int k3_config_load(const char *path, K3Config *c, char *err, size_t errlen);
#endif
