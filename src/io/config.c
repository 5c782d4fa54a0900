/* config.c — strict reader of the K3 config.json (docs/MODEL.md §1).
 *
 * Accepts the released multimodal wrapper (text model under "text_config", with
 * linear_attn_config and quantization_config inside it) or a flat text config (the
 * same keys at top level). Every key marked "Req" in §1.2 must be present with the
 * right type and a supported value; all problems are reported at once, one per line:
 *   config.json: text_config.hidden_act: expected "situ", got "silu"
 * Tensor shapes are checked against these values later, by the model binder. */
#include "config.h"
#include "util.h"
#include "json.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *file;
    char *err; size_t errlen, used;
    int nerr;
} Ctx;

static void problem(Ctx *c, const char *pfx, const char *key, const char *fmt, ...) {
    c->nerr++;
    if (!c->err || c->errlen == 0 || c->used + 1 >= c->errlen) return;
    char msg[512];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
    int n = snprintf(c->err + c->used, c->errlen - c->used, "%s%s: %s%s%s%s", c->used ? "\n" : "",
                     c->file, pfx, key, *key ? ": " : "", msg);
    if (n < 0) return;
    c->used += (size_t)n;
    if (c->used >= c->errlen) c->used = c->errlen - 1;
}

/* A short rendering of a JSON value for "got ..." messages. */
static void show(const Json *v, char *buf, size_t n) {
    if (!v) { snprintf(buf, n, "nothing"); return; }
    switch (v->type) {
    case JSON_NULL: snprintf(buf, n, "null"); break;
    case JSON_BOOL: snprintf(buf, n, "%s", v->boolean ? "true" : "false"); break;
    case JSON_NUMBER:
        if (v->is_integer) snprintf(buf, n, "%lld", (long long)v->integer);
        else snprintf(buf, n, "%.17g", v->number);
        break;
    case JSON_STRING: {
        char *q = json_quote(v->str, v->len > 80 ? 80 : v->len);
        snprintf(buf, n, "%s%s", q ? q : "a string", v->len > 80 ? "..." : "");
        free(q);
        break;
    }
    case JSON_ARRAY: snprintf(buf, n, "an array"); break;
    case JSON_OBJECT: snprintf(buf, n, "an object"); break;
    }
}

#define MISSING "missing (required for K3; the class default would make a different model)"

static int get_int(Ctx *c, const Json *o, const char *pfx, const char *key, long long lo,
                   long long hi, int *out) {
    const Json *v = json_get(o, key);
    char g[128];
    if (!v) { problem(c, pfx, key, MISSING); return -1; }
    if (v->type != JSON_NUMBER || !v->is_integer) {
        show(v, g, sizeof g);
        problem(c, pfx, key, "expected an integer, got %s", g);
        return -1;
    }
    if (v->integer < lo || v->integer > hi) {
        if (hi == INT32_MAX)
            problem(c, pfx, key, "must be >= %lld, got %lld", lo, (long long)v->integer);
        else
            problem(c, pfx, key, "must be in [%lld, %lld], got %lld", lo, hi,
                    (long long)v->integer);
        return -1;
    }
    *out = (int)v->integer;
    return 0;
}

static int get_pos(Ctx *c, const Json *o, const char *pfx, const char *key, int *out) {
    return get_int(c, o, pfx, key, 1, INT32_MAX, out);
}

static int get_eq_int(Ctx *c, const Json *o, const char *pfx, const char *key, int want,
                      const char *why, int *out) {
    int v;
    if (get_int(c, o, pfx, key, INT32_MIN, INT32_MAX, &v)) return -1;
    if (v != want) { problem(c, pfx, key, "expected %d, got %d (%s)", want, v, why); return -1; }
    if (out) *out = v;
    return 0;
}

/* A finite number in the range lo..hi (each end excluded when its _open flag is set),
 * checked on the float the forward pass uses, so 1e-50 does not pass as a positive eps.
 * The ranges keep every logit finite; why names K3's value. */
static int get_num(Ctx *c, const Json *o, const char *pfx, const char *key, double lo,
                   int lo_open, double hi, int hi_open, const char *why, float *out) {
    const Json *v = json_get(o, key);
    char g[128];
    if (!v) { problem(c, pfx, key, MISSING); return -1; }
    if (v->type != JSON_NUMBER || !isfinite(v->number) || !isfinite((float)v->number)) {
        show(v, g, sizeof g);
        problem(c, pfx, key, "expected a finite number, got %s", g);
        return -1;
    }
    float f = (float)v->number;
    int below = lo_open ? !(f > lo) : !(f >= lo), above = hi_open ? !(f < hi) : !(f <= hi);
    if (below || above) {
        show(v, g, sizeof g);
        problem(c, pfx, key, "must be in %c%g, %g%c, got %s (%s)", lo_open ? '(' : '[', lo, hi,
                hi_open ? ')' : ']', g, why);
        return -1;
    }
    *out = f;
    return 0;
}

static int get_bool(Ctx *c, const Json *o, const char *pfx, const char *key, int *out) {
    const Json *v = json_get(o, key);
    char g[128];
    if (!v) { problem(c, pfx, key, MISSING); return -1; }
    if (v->type != JSON_BOOL) {
        show(v, g, sizeof g); problem(c, pfx, key, "expected true or false, got %s", g);
        return -1;
    }
    *out = v->boolean;
    return 0;
}

static int get_eq_bool(Ctx *c, const Json *o, const char *pfx, const char *key, int want,
                       const char *why, int *out) {
    int b;
    if (get_bool(c, o, pfx, key, &b)) return -1;
    if (b != want) {
        problem(c, pfx, key, "expected %s, got %s (%s)", want ? "true" : "false",
                b ? "true" : "false", why);
        return -1;
    }
    if (out) *out = b;
    return 0;
}

static int get_eq_str(Ctx *c, const Json *o, const char *pfx, const char *key, const char *want,
                      const char *why) {
    const Json *v = json_get(o, key);
    char g[128];
    if (!v) { problem(c, pfx, key, MISSING); return -1; }
    if (v->type != JSON_STRING || strlen(v->str) != v->len || strcmp(v->str, want)) {
        show(v, g, sizeof g);
        problem(c, pfx, key, "expected \"%s\", got %s%s%s", want, g, why ? " " : "",
                why ? why : "");
        return -1;
    }
    return 0;
}

/* 1-based layer list -> mark[0..L). Returns 0 if well-formed. */
static int layer_list(Ctx *c, const Json *o, const char *pfx, const char *key, int L,
                      unsigned char *mark) {
    const Json *v = json_get(o, key);
    char g[128];
    if (!v) { problem(c, pfx, key, MISSING); return -1; }
    if (v->type != JSON_ARRAY) {
        show(v, g, sizeof g);
        problem(c, pfx, key, "expected an array of 1-based layer numbers, got %s", g);
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < v->len; i++) {
        const Json *e = v->items[i];
        if (e->type != JSON_NUMBER || !e->is_integer) {
            show(e, g, sizeof g);
            problem(c, pfx, key, "entry %zu: expected an integer layer number, got %s", i, g);
            bad = 1; continue;
        }
        if (L <= 0) continue;          /* num_hidden_layers itself is bad: already reported */
        if (e->integer < 1 || e->integer > L) {
            problem(c, pfx, key,
                    "entry %zu: %lld is outside 1..%d (the lists are 1-based: layer index + 1)",
                    i, (long long)e->integer, L);
            bad = 1; continue;
        }
        if (mark[e->integer - 1]) {
            problem(c, pfx, key, "layer %lld is listed twice", (long long)e->integer);
            bad = 1; continue;
        }
        mark[e->integer - 1] = 1;
    }
    return bad ? -1 : 0;
}

static void check_quant(Ctx *c, const Json *q, const char *pfx) {
    char g[128], p2[256], p3[320];
    if (q->type != JSON_OBJECT) {
        show(q, g, sizeof g); problem(c, pfx, "", "expected an object, got %s", g); return;
    }
    get_eq_str(c, q, pfx, "quant_method", "compressed-tensors",
               "(only compressed-tensors MXFP4 is implemented)");
    get_eq_str(c, q, pfx, "format", "mxfp4-pack-quantized",
               "(only mxfp4-pack-quantized is implemented)");
    const Json *cg = json_get(q, "config_groups");
    if (!cg) { problem(c, pfx, "config_groups", MISSING); return; }
    if (cg->type != JSON_OBJECT || cg->len == 0) {
        show(cg, g, sizeof g);
        problem(c, pfx, "config_groups", "expected a non-empty object, got %s", g);
        return;
    }
    for (size_t i = 0; i < cg->len; i++) {
        const Json *gr = cg->items[i];
        /* a key with control bytes is shown quoted (escaped), never raw */
        const char *key = cg->keys[i];
        char *kq = NULL;
        for (const char *p = key; *p && !kq; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7F) kq = json_quote(key, strlen(key));
        if (kq) key = kq;
        snprintf(p2, sizeof p2, "%sconfig_groups.%s", pfx, key);
        free(kq);
        if (gr->type != JSON_OBJECT) {
            show(gr, g, sizeof g); problem(c, p2, "", "expected an object, got %s", g); continue;
        }
        const Json *f = json_get(gr, "format");
        size_t pl = strlen(p2);
        if (pl + 1 < sizeof p2) { p2[pl] = '.'; p2[pl + 1] = 0; }
        if (f) get_eq_str(c, gr, p2, "format", "mxfp4-pack-quantized",
                          "(only mxfp4-pack-quantized is implemented)");
        const Json *ia = json_get(gr, "input_activations");
        if (ia && ia->type != JSON_NULL)
            problem(c, p2, "input_activations",
                    "expected null (activation quantization is not implemented)");
        const Json *w = json_get(gr, "weights");
        if (!w) { problem(c, p2, "weights", MISSING); continue; }
        snprintf(p3, sizeof p3, "%sweights.", p2);
        if (w->type != JSON_OBJECT) {
            show(w, g, sizeof g); problem(c, p2, "weights", "expected an object, got %s", g);
            continue;
        }
        get_eq_int(c, w, p3, "num_bits", 4, "MXFP4 is 4-bit", NULL);
        get_eq_str(c, w, p3, "type", "float", "(MXFP4 elements are E2M1 floats)");
        get_eq_int(c, w, p3, "group_size", 32, "MXFP4 scales cover 32 inputs", NULL);
    }
}

/* bos/eos/pad: text_config first, then top level; -1 when absent. An id outside the
 * vocabulary (vocab > 0: vocab_size was read) is refused: an eos that can never be drawn
 * would never stop a run. */
static int token_id(Ctx *c, const Json *tc, const Json *top, const char *tpfx, const char *key,
                    int vocab) {
    const Json *v = json_get(tc, key);
    const char *pfx = tpfx;
    if (!v || v->type == JSON_NULL) { v = json_get(top, key); pfx = ""; }
    if (!v || v->type == JSON_NULL) return -1;
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > INT32_MAX) {
        char g[128]; show(v, g, sizeof g);
        problem(c, pfx, key, "expected a non-negative integer token id, got %s", g);
        return -1;
    }
    if (vocab > 0 && v->integer >= vocab) {
        problem(c, pfx, key, "%lld is outside the vocabulary (%svocab_size %d): give the "
                "tokenizer's id (below %d), or remove the field", (long long)v->integer,
                tpfx, vocab, vocab);
        return -1;
    }
    return (int)v->integer;
}

int k3_config_load(const char *path, K3Config *cfg, char *err, size_t errlen) {
    char dummy[1];
    if (!err || !errlen) { err = dummy; errlen = sizeof dummy; }
    err[0] = 0;
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->source, sizeof cfg->source, "%s", path);
    uint64_t h = 0;
    Json *root = json_file(path, (size_t)64 << 20, &h, err, errlen);   /* a config is small */
    if (!root) return 2;
    cfg->hash = h;
    Ctx c = { path, err, errlen, 0, 0 };
    if (root->type != JSON_OBJECT) {
        problem(&c, "", "", "expected a JSON object at top level");
        json_free(root);
        return 2;
    }
    const Json *top = root, *tc = json_get(root, "text_config");
    const char *pfx = "text_config.";
    if (!tc) { tc = root; pfx = ""; }            /* flat text config */
    else if (tc->type != JSON_OBJECT) {
        problem(&c, "", "text_config", "expected an object");
        json_free(root);
        return 2;
    }
    K3Config *k = cfg;
    int L = 0;
    if (get_int(&c, tc, pfx, "num_hidden_layers", 1, K3_MAX_LAYERS, &k->num_hidden_layers) == 0)
        L = k->num_hidden_layers;
    get_pos(&c, tc, pfx, "hidden_size", &k->hidden_size);
    get_pos(&c, tc, pfx, "vocab_size", &k->vocab_size);
    get_num(&c, tc, pfx, "rms_norm_eps", 0, 1, 0.01, 0,
            "a small guard inside the norms' square root; K3 uses 1e-5", &k->rms_norm_eps);
    get_pos(&c, tc, pfx, "intermediate_size", &k->intermediate_size);
    int fk_ok = get_int(&c, tc, pfx, "first_k_dense_replace", 0, L > 0 ? L : INT32_MAX,
                        &k->first_k_dense_replace) == 0;
    int fr_ok = get_pos(&c, tc, pfx, "moe_layer_freq", &k->moe_layer_freq) == 0;
    int ne_ok = get_pos(&c, tc, pfx, "num_experts", &k->num_experts) == 0;
    if (get_pos(&c, tc, pfx, "num_experts_per_token", &k->num_experts_per_token) == 0 && ne_ok &&
        k->num_experts_per_token > k->num_experts)
        problem(&c, pfx, "num_experts_per_token", "%d is more than num_experts (%d)",
                k->num_experts_per_token, k->num_experts);
    get_int(&c, tc, pfx, "num_shared_experts", 0, INT32_MAX, &k->num_shared_experts);
    get_pos(&c, tc, pfx, "moe_intermediate_size", &k->moe_intermediate_size);
    get_pos(&c, tc, pfx, "routed_expert_hidden_size", &k->routed_expert_hidden_size);
    get_bool(&c, tc, pfx, "latent_moe_use_norm", &k->latent_moe_use_norm);
    get_eq_str(&c, tc, pfx, "moe_router_activation_func", "sigmoid",
               "(only the sigmoid router is implemented)");
    get_bool(&c, tc, pfx, "moe_renormalize", &k->moe_renormalize);
    get_num(&c, tc, pfx, "routed_scaling_factor", 0, 1, 100, 0,
            "a positive scale of the router weights; K3 uses 1.0", &k->routed_scaling_factor);
    get_bool(&c, tc, pfx, "use_grouped_topk", &k->use_grouped_topk);
    get_eq_int(&c, tc, pfx, "num_expert_group", 1,
               "grouped top-k with more than one group is not implemented", &k->num_expert_group);
    get_eq_int(&c, tc, pfx, "topk_group", 1,
               "grouped top-k with more than one group is not implemented", &k->topk_group);
    get_eq_str(&c, tc, pfx, "hidden_act", "situ", "(K3 uses SiTU-GLU)");
    get_num(&c, tc, pfx, "activation_situ_beta", 0, 1, 1000, 0,
            "the positive cap of SiTU's gate; K3 uses 4", &k->situ_beta);
    get_num(&c, tc, pfx, "activation_situ_linear_beta", 0, 1, 1000, 0,
            "the positive cap of SiTU's up value; K3 uses 25", &k->situ_linear_beta);
    get_pos(&c, tc, pfx, "attn_res_block_size", &k->attn_res_block_size);
    int nh_ok = get_pos(&c, tc, pfx, "num_attention_heads", &k->num_attention_heads) == 0;
    if (get_pos(&c, tc, pfx, "num_key_value_heads", &k->num_key_value_heads) == 0 && nh_ok &&
        k->num_key_value_heads != k->num_attention_heads)
        problem(&c, pfx, "num_key_value_heads", "must equal num_attention_heads (%d), got %d",
                k->num_attention_heads, k->num_key_value_heads);
    get_pos(&c, tc, pfx, "q_lora_rank", &k->q_lora_rank);
    get_pos(&c, tc, pfx, "kv_lora_rank", &k->kv_lora_rank);
    get_pos(&c, tc, pfx, "qk_nope_head_dim", &k->qk_nope_head_dim);
    get_pos(&c, tc, pfx, "qk_rope_head_dim", &k->qk_rope_head_dim);
    get_pos(&c, tc, pfx, "v_head_dim", &k->v_head_dim);
    get_eq_bool(&c, tc, pfx, "mla_use_nope", 1, "K3's MLA has no RoPE", &k->mla_use_nope);
    get_bool(&c, tc, pfx, "mla_use_output_gate", &k->mla_use_output_gate);

    /* linear_attn_config */
    char lpfx[64];
    snprintf(lpfx, sizeof lpfx, "%slinear_attn_config.", pfx);
    const Json *la = json_get(tc, "linear_attn_config");
    if (!la) problem(&c, pfx, "linear_attn_config", MISSING);
    else if (la->type != JSON_OBJECT) problem(&c, pfx, "linear_attn_config", "expected an object");
    else {
        get_pos(&c, la, lpfx, "num_heads", &k->kda_num_heads);
        get_pos(&c, la, lpfx, "head_dim", &k->kda_head_dim);
        get_pos(&c, la, lpfx, "short_conv_kernel_size", &k->short_conv_kernel_size);
        get_eq_bool(&c, la, lpfx, "use_full_rank_gate", 1, "K3 has a full-rank g_proj gate",
                    &k->use_full_rank_gate);
        get_num(&c, la, lpfx, "gate_lower_bound", -80, 0, 0, 1,
                "the negative bound of the KDA decay gate, which keeps the decay exp(g) a "
                "normal float in (0, 1); K3 uses -5", &k->gate_lower_bound);
        unsigned char kda[K3_MAX_LAYERS] = {0}, full[K3_MAX_LAYERS] = {0};
        int ok = layer_list(&c, la, lpfx, "kda_layers", L, kda) == 0;
        ok &= layer_list(&c, la, lpfx, "full_attn_layers", L, full) == 0;
        if (ok && L > 0) {
            char lst[256]; size_t o = 0; int cnt = 0;
            for (int i = 0; i < L; i++) if (kda[i] && full[i]) {
                if (cnt++ < 16)
                    o += (size_t)snprintf(lst + o, sizeof lst - o, "%s%d", cnt > 1 ? ", " : "",
                                          i + 1);
            }
            if (cnt) problem(&c, lpfx, "kda_layers",
                             "layer%s %s%s also in full_attn_layers (the lists must be disjoint)",
                             cnt > 1 ? "s" : "", lst, cnt > 16 ? ", ..." : "");
            o = 0; cnt = 0; lst[0] = 0;
            for (int i = 0; i < L; i++) if (!kda[i] && !full[i]) {
                if (cnt++ < 16)
                    o += (size_t)snprintf(lst + o, sizeof lst - o, "%s%d", cnt > 1 ? ", " : "",
                                          i + 1);
            }
            if (cnt) problem(&c, lpfx, "kda_layers", "layer%s %s%s in neither kda_layers nor "
                             "full_attn_layers (together they must cover 1..%d)",
                             cnt > 1 ? "s" : "", lst, cnt > 16 ? ", ..." : "", L);
            for (int i = 0; i < L; i++) k->is_kda[i] = kda[i];
        }
    }

    /* must be absent/zero and false: no MTP head, untied lm_head */
    get_eq_int(&c, tc, pfx, "num_nextn_predict_layers", 0,
               "multi-token prediction heads are not part of the K3 text model",
               &k->num_nextn_predict_layers);
    {
        const Json *o = tc; const char *p = pfx;
        if (!json_get(tc, "tie_word_embeddings") && tc != top &&
            json_get(top, "tie_word_embeddings")) { o = top; p = ""; }
        get_eq_bool(&c, o, p, "tie_word_embeddings", 0, "K3 stores lm_head separately",
                    &k->tie_word_embeddings);
    }
    const Json *mp = json_get(tc, "max_position_embeddings");
    if (mp) get_pos(&c, tc, pfx, "max_position_embeddings", &k->max_position_embeddings);

    /* quantization_config: inside text_config in the raw release; hoisted copies at top */
    const Json *q = json_get(tc, "quantization_config");
    const char *qp = pfx;
    if (!q && tc != top) { q = json_get(top, "quantization_config"); if (q) qp = ""; }
    if (!q) problem(&c, pfx, "quantization_config",
                    "missing (required: K3's routed experts are mxfp4-pack-quantized)");
    else {
        char qpfx[64];
        snprintf(qpfx, sizeof qpfx, "%squantization_config.", qp);
        check_quant(&c, q, qpfx);
    }

    k->bos_token_id = token_id(&c, tc, top, pfx, "bos_token_id", k->vocab_size);
    k->eos_token_id = token_id(&c, tc, top, pfx, "eos_token_id", k->vocab_size);
    k->pad_token_id = token_id(&c, tc, top, pfx, "pad_token_id", k->vocab_size);

    if (L > 0 && fk_ok && fr_ok)
        for (int i = 0; i < L; i++)
            k->is_moe[i] = i >= k->first_k_dense_replace && i % k->moe_layer_freq == 0;

    json_free(root);
    return c.nerr ? 2 : 0;
}
