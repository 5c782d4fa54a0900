/* test_config.c — strict config.json reader: the released nested K3 config, the flat
 * form, and refusals (each returns 2 and names the key; several problems at once). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static char path[256];
static char KDA[1024], FULL[256];

static const char *QUANT =
    "\"quantization_config\": {\"config_groups\": {\"group_0\": "
    "{\"format\": \"mxfp4-pack-quantized\", \"input_activations\": null, "
    "\"output_activations\": null, \"targets\": [\"Linear\"], \"weights\": {\"actorder\": null, "
    "\"block_structure\": null, \"dynamic\": false, \"group_size\": 32, \"num_bits\": 4, "
    "\"observer\": \"minmax\", \"observer_kwargs\": {}, \"scale_dtype\": \"torch.uint8\", "
    "\"strategy\": \"group\", \"symmetric\": true, \"type\": \"float\", \"zp_dtype\": null}}}, "
    "\"format\": \"mxfp4-pack-quantized\", \"ignore\": [\"re:.*self_attn.*\", "
    "\"re:.*shared_experts.*\", \"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\", "
    "\"re:.*lm_head.*\", \"re:.*vision_tower.*\", \"re:.*mm_projector.*\"], "
    "\"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", "
    "\"quantization_status\": \"compressed\"}";

/* The text-model keys (K3 values, docs/MODEL.md §1.2-1.4), without braces. */
static char *text_keys(void) {
    char *s = malloc(16384);
    snprintf(s, 16384,
        "\"architectures\": [\"KimiLinearForCausalLM\"], \"model_type\": \"kimi_linear\", "
        "\"hidden_size\": 7168, \"num_hidden_layers\": 93, \"vocab_size\": 163840, "
        "\"rms_norm_eps\": 1e-05, \"intermediate_size\": 33792, \"first_k_dense_replace\": 1, "
        "\"moe_layer_freq\": 1, \"num_experts\": 896, \"num_experts_per_token\": 16, "
        "\"num_shared_experts\": 2, \"moe_intermediate_size\": 3072, "
        "\"routed_expert_hidden_size\": 3584, \"latent_moe_use_norm\": true, "
        "\"moe_router_activation_func\": \"sigmoid\", \"moe_renormalize\": true, "
        "\"routed_scaling_factor\": 1.0, \"use_grouped_topk\": true, \"num_expert_group\": 1, "
        "\"topk_group\": 1, \"topk_method\": \"noaux_tc\", \"hidden_act\": \"situ\", "
        "\"activation_situ_beta\": 4.0, \"activation_situ_linear_beta\": 25.0, "
        "\"attn_res_block_size\": 12, \"num_attention_heads\": 96, \"num_key_value_heads\": 96, "
        "\"q_lora_rank\": 1536, \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, "
        "\"qk_rope_head_dim\": 64, \"v_head_dim\": 128, \"mla_use_nope\": true, "
        "\"mla_use_output_gate\": true, "
        "\"linear_attn_config\": {\"num_heads\": 96, \"head_dim\": 128, "
        "\"short_conv_kernel_size\": 4, \"use_full_rank_gate\": true, \"gate_lower_bound\": -5.0, "
        "\"kda_layers\": [%s], \"full_attn_layers\": [%s]}, "
        "\"num_nextn_predict_layers\": 0, \"tie_word_embeddings\": false, "
        "\"max_position_embeddings\": 1048576, \"bos_token_id\": 163584, \"eos_token_id\": 163586, "
        "\"pad_token_id\": 163839, %s",
        KDA, FULL, QUANT);
    return s;
}

static char *nested(void) {
    char *t = text_keys();
    char *s = malloc(32768);
    snprintf(s, 32768,
        "{\n  \"architectures\": [\"KimiK3ForConditionalGeneration\"], "
        "\"model_type\": \"kimi_k3\",\n"
        "  \"bos_token_id\": 163584, \"eos_token_id\": 163586, \"pad_token_id\": 163839,\n"
        "  \"media_placeholder_token_id\": 163605, \"tie_word_embeddings\": false, "
        "\"dtype\": \"bfloat16\",\n"
        "  \"ignore_index\": -100,\n  \"text_config\": {%s},\n"
        "  \"vision_config\": {\"hidden_size\": 1152}\n}\n", t);
    free(t);
    return s;
}

static char *flat(void) {
    char *t = text_keys();
    char *s = malloc(strlen(t) + 8);
    sprintf(s, "{%s}", t);
    free(t);
    return s;
}

/* Replaces the single occurrence of from (must exist exactly once). */
static char *repl(char *s, const char *from, const char *to) {
    char *p = strstr(s, from);
    if (!p || strstr(p + 1, from)) {
        printf("  test bug: '%s' found %s\n", from, p ? "twice" : "nowhere"); exit(1);
    }
    size_t a = (size_t)(p - s), fl = strlen(from), tl = strlen(to), n = strlen(s);
    char *r = malloc(n - fl + tl + 1);
    memcpy(r, s, a); memcpy(r + a, to, tl); memcpy(r + a + tl, p + fl, n - a - fl + 1);
    free(s);
    return r;
}

static int load_str(const char *text, K3Config *c, char *err, size_t n) {
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    return k3_config_load(path, c, err, n);
}

static K3Config cfg;

static void expect_bad(const char *what, char *text, const char *n1, const char *n2) {
    char err[8192];
    int rc = load_str(text, &cfg, err, sizeof err);
    CHECK(rc == 2, "%s: rc %d", what, rc);
    CHECK(!n1 || strstr(err, n1), "%s: message lacks '%s':\n%s", what, n1, err);
    CHECK(!n2 || strstr(err, n2), "%s: message lacks '%s':\n%s", what, n2, err);
    if (getenv("CFG_VERBOSE")) printf("  [%s]\n%s\n", what, err);
    free(text);
}

static void check_k3(const K3Config *c, const char *what) {
    CHECK(c->hidden_size == 7168 && c->num_hidden_layers == 93 && c->vocab_size == 163840,
          "%s: dims", what);
    CHECK(c->rms_norm_eps == 1e-5f && c->intermediate_size == 33792, "%s: eps/inter", what);
    CHECK(c->num_experts == 896 && c->num_experts_per_token == 16 && c->num_shared_experts == 2,
          "%s: experts", what);
    CHECK(c->moe_intermediate_size == 3072 && c->routed_expert_hidden_size == 3584 &&
          c->latent_moe_use_norm == 1, "%s: moe", what);
    CHECK(c->moe_renormalize && c->use_grouped_topk && c->num_expert_group == 1 &&
          c->topk_group == 1, "%s: router", what);
    CHECK(c->routed_scaling_factor == 1.0f && c->situ_beta == 4.0f && c->situ_linear_beta == 25.0f,
          "%s: betas", what);
    CHECK(c->attn_res_block_size == 12 && c->num_attention_heads == 96 &&
          c->num_key_value_heads == 96, "%s: heads", what);
    CHECK(c->q_lora_rank == 1536 && c->kv_lora_rank == 512 && c->qk_nope_head_dim == 128 &&
          c->qk_rope_head_dim == 64 && c->v_head_dim == 128, "%s: mla", what);
    CHECK(c->mla_use_nope == 1 && c->mla_use_output_gate == 1, "%s: mla flags", what);
    CHECK(c->kda_num_heads == 96 && c->kda_head_dim == 128 && c->short_conv_kernel_size == 4 &&
          c->use_full_rank_gate == 1 && c->gate_lower_bound == -5.0f, "%s: kda", what);
    CHECK(c->num_nextn_predict_layers == 0 && c->tie_word_embeddings == 0 &&
          c->max_position_embeddings == 1048576, "%s: misc", what);
    CHECK(c->bos_token_id == 163584 && c->eos_token_id == 163586 && c->pad_token_id == 163839,
          "%s: token ids", what);
    CHECK(c->first_k_dense_replace == 1 && c->moe_layer_freq == 1, "%s: moe map", what);
    int nk = 0, ok = 1;
    for (int L = 0; L < 93; L++) {
        nk += c->is_kda[L];
        int mla = (L % 4 == 3) || L == 92;
        ok &= c->is_kda[L] == !mla;
        ok &= c->is_moe[L] == (L >= 1);
    }
    CHECK(nk == 69 && ok && c->is_kda[0] && !c->is_kda[91] && !c->is_kda[92] && !c->is_kda[3],
          "%s: layer map", what);
    CHECK(!strcmp(c->source, path) && c->hash != 0, "%s: source/hash", what);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/k3_test_config_%d.json", (int)getpid());
    size_t o = 0;
    for (int n = 1; n <= 91; n++)
        if (n % 4) o += (size_t)sprintf(KDA + o, "%s%d", o ? ", " : "", n);
    o = 0;
    for (int n = 4; n <= 92; n += 4) o += (size_t)sprintf(FULL + o, "%s%d", o ? ", " : "", n);
    sprintf(FULL + o, ", 93");

    char err[8192];
    char *s = nested();
    int rc = load_str(s, &cfg, err, sizeof err);
    CHECK(rc == 0, "nested K3 config loads: %s", err);
    if (rc == 0) check_k3(&cfg, "nested");
    unsigned long long h1 = cfg.hash;
    free(s);
    printf("nested release config: ok\n");

    s = flat();
    rc = load_str(s, &cfg, err, sizeof err);
    CHECK(rc == 0, "flat config loads: %s", err);
    if (rc == 0) check_k3(&cfg, "flat");
    CHECK(cfg.hash != h1, "hash depends on the bytes");
    free(s);
    /* hoisted quantization_config (re-serialised copies) */
    s = nested();
    char *q = strstr(s, ", \"quantization_config\"");
    size_t ql = strlen(QUANT) + 2;
    memmove(q, q + ql, strlen(q + ql) + 1);
    s = repl(s, "\"ignore_index\": -100,",
             "\"ignore_index\": -100, \"quantization_config\": "
             "{\"quant_method\": \"compressed-tensors\", \"format\": \"mxfp4-pack-quantized\", "
             "\"config_groups\": {\"g\": {\"weights\": {\"num_bits\": 4, \"type\": \"float\", "
             "\"group_size\": 32}}}},");
    rc = load_str(s, &cfg, err, sizeof err);
    CHECK(rc == 0, "hoisted quantization_config loads: %s", err);
    free(s);
    /* token ids from top level only; absent -> -1 */
    s = nested();
    s = repl(s, "\"bos_token_id\": 163584, \"eos_token_id\": 163586, \"pad_token_id\": 163839, "
             "\"quant", "\"quant");
    s = repl(s, "\"pad_token_id\": 163839,\n", "\n");
    rc = load_str(s, &cfg, err, sizeof err);
    CHECK(rc == 0 && cfg.bos_token_id == 163584 && cfg.eos_token_id == 163586 &&
          cfg.pad_token_id == -1, "token ids fallback: rc %d %d %d %d", rc, cfg.bos_token_id,
          cfg.eos_token_id, cfg.pad_token_id);
    free(s);
    /* every token id outside the vocabulary is refused, naming the file, field and fix */
    expect_bad("eos outside the vocabulary",
               repl(nested(), "\"eos_token_id\": 163586, \"pad_token_id\": 163839, \"quant",
                    "\"eos_token_id\": 163840, \"pad_token_id\": 163839, \"quant"),
               ".json: text_config.eos_token_id: 163840 is outside the vocabulary "
               "(text_config.vocab_size 163840)", "give the tokenizer's id (below 163840)");
    expect_bad("bos outside the vocabulary",
               repl(nested(), "1048576, \"bos_token_id\": 163584",
                    "1048576, \"bos_token_id\": 999999"),
               "text_config.bos_token_id: 999999 is outside", NULL);
    expect_bad("pad outside the vocabulary",
               repl(nested(), "\"pad_token_id\": 163839, \"quant",
                    "\"pad_token_id\": 200000, \"quant"),
               "text_config.pad_token_id: 200000 is outside", "or remove the field");
    s = repl(nested(), "\"bos_token_id\": 163584, \"eos_token_id\": 163586, "
             "\"pad_token_id\": 163839, \"quant", "\"quant");      /* the top level's ids */
    expect_bad("top-level eos outside the vocabulary",
               repl(s, "\"eos_token_id\": 163586", "\"eos_token_id\": 170000"),
               ".json: eos_token_id: 170000 is outside the vocabulary "
               "(text_config.vocab_size 163840)", NULL);
    expect_bad("eos outside the vocabulary (flat)",
               repl(flat(), "\"eos_token_id\": 163586", "\"eos_token_id\": 170000"),
               "eos_token_id: 170000 is outside the vocabulary (vocab_size 163840)", NULL);
    expect_bad("an id equal to vocab_size",
               repl(flat(), "\"bos_token_id\": 163584", "\"bos_token_id\": 163840"),
               "bos_token_id: 163840 is outside", NULL);
    /* a different layer split (tiny-model style) */
    s = nested();
    s = repl(s, "\"num_hidden_layers\": 93", "\"num_hidden_layers\": 4");
    s = repl(s, KDA, "1, 2, 3"); s = repl(s, FULL, "4");
    s = repl(s, "\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 2");
    s = repl(s, "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 3");
    rc = load_str(s, &cfg, err, sizeof err);
    CHECK(rc == 0 && cfg.is_kda[0] && cfg.is_kda[2] && !cfg.is_kda[3] && !cfg.is_moe[0] &&
          !cfg.is_moe[1] && !cfg.is_moe[2] && cfg.is_moe[3], "small layer map: %s", err);
    free(s);
    printf("flat form, hoisted quantization, token ids, layer maps: ok\n");

    expect_bad("missing key", repl(nested(), "\"attn_res_block_size\": 12, ", ""),
               "text_config.attn_res_block_size: missing", NULL);
    expect_bad("missing key (flat)", repl(flat(), "\"rms_norm_eps\": 1e-05, ", ""),
               ": rms_norm_eps: missing", NULL);
    expect_bad("missing nested key", repl(nested(), "\"gate_lower_bound\": -5.0, ", ""),
               "text_config.linear_attn_config.gate_lower_bound: missing", NULL);
    expect_bad("wrong activation",
               repl(nested(), "\"hidden_act\": \"situ\"", "\"hidden_act\": \"silu\""),
               "text_config.hidden_act: expected \"situ\", got \"silu\"", NULL);
    {
        char z[1100]; sprintf(z, "0, %s", KDA);
        char *t = repl(nested(), KDA, z);
        expect_bad("0-based layer list", t, "kda_layers: entry 0: 0 is outside 1..93", NULL);
    }
    {
        char z[1100]; sprintf(z, "%s, 4", KDA);
        expect_bad("overlapping lists", repl(nested(), KDA, z), "layer 4 also in full_attn_layers",
                   NULL);
    }
    {
        char z[1100]; strcpy(z, KDA); z[strlen(z) - 4] = 0;   /* drop ", 91" */
        expect_bad("lists do not cover", repl(nested(), KDA, z), "layer 91 in neither", NULL);
    }
    expect_bad("duplicate layer", repl(nested(), "[4, 8,", "[4, 4, 8,"),
               "full_attn_layers: layer 4 is listed twice", NULL);
    {
        char *t = nested();
        char *qq = strstr(t, ", \"quantization_config\"");
        memmove(qq, qq + ql, strlen(qq + ql) + 1);
        expect_bad("missing quantization_config", t, "text_config.quantization_config: missing",
                   NULL);
    }
    expect_bad("other quant format",
               repl(nested(), "\"format\": \"mxfp4-pack-quantized\", \"ignore\"",
                    "\"format\": \"nvfp4-pack-quantized\", \"ignore\""),
               "quantization_config.format: expected \"mxfp4-pack-quantized\", "
               "got \"nvfp4-pack-quantized\"", NULL);
    expect_bad("group size", repl(nested(), "\"group_size\": 32", "\"group_size\": 16"),
               "weights.group_size: expected 32, got 16", NULL);
    expect_bad("grouped topk", repl(nested(), "\"num_expert_group\": 1", "\"num_expert_group\": 8"),
               "num_expert_group: expected 1, got 8", "not implemented");
    expect_bad("kv heads",
               repl(nested(), "\"num_key_value_heads\": 96", "\"num_key_value_heads\": 8"),
               "num_key_value_heads: must equal", NULL);
    expect_bad("router", repl(nested(), "\"sigmoid\"", "\"softmax\""),
               "moe_router_activation_func: expected \"sigmoid\"", NULL);
    expect_bad("nope", repl(nested(), "\"mla_use_nope\": true", "\"mla_use_nope\": false"),
               "mla_use_nope: expected true", NULL);
    expect_bad("mtp",
               repl(nested(), "\"num_nextn_predict_layers\": 0", "\"num_nextn_predict_layers\": 1"),
               "num_nextn_predict_layers: expected 0", NULL);
    expect_bad("tied",
               repl(nested(), "\"tie_word_embeddings\": false, \"max",
                    "\"tie_word_embeddings\": true, \"max"),
               "text_config.tie_word_embeddings: expected false", NULL);
    expect_bad("low-rank gate",
               repl(nested(), "\"use_full_rank_gate\": true", "\"use_full_rank_gate\": false"),
               "use_full_rank_gate: expected true", NULL);
    expect_bad("top-k > experts",
               repl(nested(), "\"num_experts_per_token\": 16", "\"num_experts_per_token\": 1000"),
               "more than num_experts", NULL);
    expect_bad("moe_layer_freq 0", repl(nested(), "\"moe_layer_freq\": 1", "\"moe_layer_freq\": 0"),
               "moe_layer_freq: must be >= 1", NULL);
    expect_bad("first_k_dense_replace",
               repl(nested(), "\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 94"),
               "first_k_dense_replace: must be in [0, 93]", NULL);
    expect_bad("negative dim", repl(nested(), "\"hidden_size\": 7168", "\"hidden_size\": -7168"),
               "hidden_size: must be >= 1", NULL);
    expect_bad("string for int",
               repl(nested(), "\"q_lora_rank\": 1536", "\"q_lora_rank\": \"1536\""),
               "q_lora_rank: expected an integer, got \"1536\"", NULL);
    expect_bad("float for int", repl(nested(), "\"v_head_dim\": 128", "\"v_head_dim\": 128.5"),
               "v_head_dim: expected an integer", NULL);
    expect_bad("int for bool",
               repl(nested(), "\"moe_renormalize\": true", "\"moe_renormalize\": 1"),
               "moe_renormalize: expected true or false, got 1", NULL);
    expect_bad("too many layers",
               repl(nested(), "\"num_hidden_layers\": 93", "\"num_hidden_layers\": 300"),
               "num_hidden_layers: must be in [1, 256]", NULL);
    expect_bad("eps zero", repl(nested(), "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0"),
               "rms_norm_eps: must be in (0, 0.01], got 0", NULL);
    /* absurd values that make every logit NaN (or the model meaningless) are refused,
     * naming the key and the allowed range */
    static const struct { const char *from, *to, *want; } R[] = {
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": 1e9",
          "linear_attn_config.gate_lower_bound: must be in [-80, 0), got 1000000000" },
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": 0",
          "gate_lower_bound: must be in [-80, 0), got 0" },
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": 5",
          "gate_lower_bound: must be in [-80, 0)" },
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": -1e9",
          "gate_lower_bound: must be in [-80, 0)" },
        { "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-50",
          "rms_norm_eps: must be in (0, 0.01], got 1e-50" },
        { "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e9",
          "rms_norm_eps: must be in (0, 0.01]" },
        { "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1e-05", "rms_norm_eps: must be in" },
        { "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e39",
          "rms_norm_eps: expected a finite number" },
        { "\"routed_scaling_factor\": 1.0", "\"routed_scaling_factor\": 1e30",
          "routed_scaling_factor: must be in (0, 100]" },
        { "\"routed_scaling_factor\": 1.0", "\"routed_scaling_factor\": 0",
          "routed_scaling_factor: must be in (0, 100]" },
        { "\"activation_situ_beta\": 4.0", "\"activation_situ_beta\": 1e20",
          "activation_situ_beta: must be in (0, 1000]" },
        { "\"activation_situ_linear_beta\": 25.0", "\"activation_situ_linear_beta\": -25",
          "activation_situ_linear_beta: must be in (0, 1000]" },
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": \"-5\"",
          "gate_lower_bound: expected a finite number, got \"-5\"" },
    };
    for (size_t i = 0; i < sizeof R / sizeof *R; i++)
        expect_bad(R[i].to, repl(nested(), R[i].from, R[i].to), R[i].want,
                   strstr(R[i].want, "must be in") ? "K3 uses" : NULL);
    {   /* a key with control bytes is echoed escaped */
        char *t = repl(nested(), "{\"group_0\": ", "{\"g\\u001b[2J\": ");
        t = repl(t, "\"num_bits\": 4", "\"num_bits\": 8");
        char e2[8192];
        CHECK(load_str(t, &cfg, e2, sizeof e2) == 2 && !strchr(e2, 0x1b) &&
              strstr(e2, "config_groups.\"g\\u001b[2J\".weights.num_bits"),
              "escaped key: %s", e2);
        free(t);
    }
    /* the ends of the ranges and the values of other Kimi models still load */
    static const struct { const char *from, *to; } OK[] = {
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": -80" },
        { "\"gate_lower_bound\": -5.0", "\"gate_lower_bound\": -0.001" },
        { "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-6" },
        { "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 0.01" },
        { "\"routed_scaling_factor\": 1.0", "\"routed_scaling_factor\": 2.446" },
    };
    for (size_t i = 0; i < sizeof OK / sizeof *OK; i++) {
        char *t = repl(nested(), OK[i].from, OK[i].to);
        CHECK(load_str(t, &cfg, err, sizeof err) == 0, "%s must load: %s", OK[i].to, err);
        free(t);
    }
    expect_bad("activation quant",
               repl(nested(), "\"input_activations\": null",
                    "\"input_activations\": {\"num_bits\": 8}"),
               "input_activations: expected null", NULL);
    expect_bad("bad JSON", repl(nested(), "\"dtype\": \"bfloat16\",", "\"dtype\": \"bfloat16\",,"),
               "not valid JSON", "line 4");
    expect_bad("not an object", strdup("[1]"), "top level", NULL);
    {
        char err2[512];
        CHECK(k3_config_load("/nonexistent/config.json", &cfg, err2, sizeof err2) == 2 &&
              strstr(err2, "cannot open"), "missing file: %s", err2);
    }
    printf("single refusals: ok\n");

    /* several problems: every one is reported, one per line */
    s = nested();
    s = repl(s, "\"hidden_act\": \"situ\"", "\"hidden_act\": \"silu\"");
    s = repl(s, "\"attn_res_block_size\": 12, ", "");
    s = repl(s, "\"mla_use_nope\": true", "\"mla_use_nope\": false");
    s = repl(s, "\"head_dim\": 128, ", "");
    s = repl(s, "\"num_bits\": 4", "\"num_bits\": 8");
    {
        char z[1100]; sprintf(z, "0, %s", KDA);
        s = repl(s, KDA, z);
    }
    rc = load_str(s, &cfg, err, sizeof err);
    CHECK(rc == 2, "multi: rc %d", rc);
    const char *want[] = { "text_config.hidden_act: expected \"situ\", got \"silu\"",
        "text_config.attn_res_block_size: missing", "text_config.mla_use_nope: expected true",
        "text_config.linear_attn_config.head_dim: missing",
        "text_config.quantization_config.config_groups.group_0.weights.num_bits: "
        "expected 4, got 8",
        "text_config.linear_attn_config.kda_layers: entry 0" };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK(strstr(err, want[i]), "multi: lacks '%s'", want[i]);
    int lines = 1;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    CHECK(lines == 6, "multi: %d lines:\n%s", lines, err);
    CHECK(strncmp(err, path, strlen(path)) == 0, "lines start with the file name");
    free(s);
    /* a tiny error buffer truncates but does not overflow */
    char small[40];
    s = nested(); s = repl(s, "\"hidden_act\": \"situ\"", "\"hidden_act\": \"silu\"");
    CHECK(load_str(s, &cfg, small, sizeof small) == 2 && strlen(small) < sizeof small,
          "small buffer");
    free(s);
    printf("all problems reported at once: ok\n");

    unlink(path);
    if (fails) { printf("test_config: %d failures\n", fails); return 1; }
    printf("test_config: all passed\n");
    return 0;
}
