/* dspark_load.c — opens a DSpark draft folder as released (spec §2, §3): config.json
 * checked key by key against the target model, model.safetensors' 68 tensors by name,
 * dtype (BF16) and shape, the matrices used in place from a read-only mapping. The
 * checkpoint's embed_tokens copy is never read (§3.3: the target's table is used). */
#include "dspark_priv.h"
#include "json.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Problems are collected, one line each, naming the file and the key. */
typedef struct { const char *file; char *err; size_t errlen, used; int n; } Cfg;

static void problem(Cfg *c, const char *key, const char *fmt, ...) {
    c->n++;
    if (c->used + 1 >= c->errlen) return;
    char msg[512];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
    int k = snprintf(c->err + c->used, c->errlen - c->used, "%s%s: %s: %s", c->used ? "\n" : "",
                     c->file, key, msg);
    if (k > 0) c->used += (size_t)k;
    if (c->used >= c->errlen) c->used = c->errlen - 1;
}

/* s as a JSON string literal, at most 60 bytes of it: what a message echoes is escaped. */
static const char *quoted(const char *s, size_t n, char *buf, size_t bn) {
    char *q = json_quote(s, n > 60 ? 60 : n);
    snprintf(buf, bn, "%s%s", q ? q : "a string", n > 60 ? "..." : "");
    free(q);
    return buf;
}

static int get_int(Cfg *c, const Json *o, const char *key, int req, long long lo, long long hi,
                   int *out) {
    const Json *v = json_get(o, key);
    if (!v) {
        if (req) problem(c, key, "missing (required by the DSpark draft)");
        return -1;
    }
    if (v->type != JSON_NUMBER || !v->is_integer) {
        problem(c, key, "expected an integer");
        return -1;
    }
    if (v->integer < lo || v->integer > hi) {
        problem(c, key, "must be in [%lld, %lld], got %lld", lo, hi, (long long)v->integer);
        return -1;
    }
    *out = (int)v->integer;
    return 0;
}

static int get_num(Cfg *c, const Json *o, const char *key, int req, double *out) {
    const Json *v = json_get(o, key);
    if (!v) {
        if (req) problem(c, key, "missing (required by the DSpark draft)");
        return -1;
    }
    if (v->type != JSON_NUMBER || !isfinite(v->number)) {
        problem(c, key, "expected a number");
        return -1;
    }
    *out = v->number;
    return 0;
}

/* A key that names a lineage variant k3 does not implement: absent, or the value given. */
static void want_bool(Cfg *c, const Json *o, const char *key, int want, const char *why) {
    const Json *v = json_get(o, key);
    if (!v) return;
    if (v->type != JSON_BOOL) problem(c, key, "expected true or false");
    else if (v->boolean != want)
        problem(c, key, "is %s; k3 implements only %s (%s)", v->boolean ? "true" : "false",
                want ? "true" : "false", why);
}

static void want_str(Cfg *c, const Json *o, const char *key, const char *want, int req,
                     const char *why) {
    const Json *v = json_get(o, key);
    if (!v) {
        if (req) problem(c, key, "missing (expected \"%s\")", want);
        return;
    }
    if (v->type != JSON_STRING || strcmp(v->str, want))
        problem(c, key, "must be \"%s\" (%s)", want, why);
}

static const char *const KNOWN[] = {
    "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mla_use_nope", "mla_use_output_gate",
    "vocab_size", "rms_norm_eps", "max_position_embeddings", "rope_theta", "num_target_layers",
    "target_hidden_size", "target_num_hidden_layers", "target_layer_ids", "mask_token_id",
    "bos_token_id", "eos_token_id", "pad_token_id", "markov_rank", "markov_head_type",
    "enable_confidence_head", "confidence_head_with_markov", "tie_word_embeddings",
    "draft_vocab_size", "_torchspec_version", "torch_dtype", "rope_parameters", "rope_scaling",
    "hidden_act", "aux_hidden_stream", "fc_norm", "block_size", "sample_from_anchor",
    "dspark_bonus_anchor", "logit_scale", "dtype", "transformers_version", "initializer_range",
    "use_cache", "attention_bias", "attention_dropout",
};

/* rope_parameters (§4.4): "default" is plain frequencies; "yarn" DeepSeek YaRN unless
 * apply_yarn_scaling is false. rope_parameters.rope_theta wins over the top-level key. */
static void read_rope(Cfg *c, const Json *cfg, K3DSparkConfig *k) {
    const Json *rp = json_get(cfg, "rope_parameters");
    const char *rpk = "rope_parameters";
    if (!rp && (rp = json_get(cfg, "rope_scaling"))) rpk = "rope_scaling";
    double th = 0;
    int have_th = get_num(c, cfg, "rope_theta", 0, &th) == 0;
    k->yarn = 0;
    k->factor = 1; k->beta_fast = 32; k->beta_slow = 1; k->mscale = 1; k->mscale_all_dim = 0;
    if (rp && rp->type != JSON_OBJECT) { problem(c, rpk, "expected an object"); return; }
    if (rp) {
        const Json *t = json_get(rp, "rope_type");
        if (!t) t = json_get(rp, "type");
        if (!t || t->type != JSON_STRING)
            problem(c, rpk, "rope_type missing (expected \"yarn\" or \"default\")");
        else if (!strcmp(t->str, "yarn") || !strcmp(t->str, "deepseek_yarn")) k->yarn = 1;
        else if (strcmp(t->str, "default")) {
            char q[96];
            problem(c, rpk, "rope_type %s is not supported (\"yarn\" or \"default\")",
                    quoted(t->str, t->len, q, sizeof q));
        }
        double v;
        if (get_num(c, rp, "rope_theta", 0, &v) == 0) { th = v; have_th = 1; }
        const Json *ay = json_get(rp, "apply_yarn_scaling");
        if (ay && ay->type != JSON_BOOL) problem(c, rpk, "apply_yarn_scaling: expected a bool");
        else if (ay && !ay->boolean) k->yarn = 0;
        if (k->yarn) {
            struct { const char *n; double *v; int req; } f[] = {
                { "factor", &k->factor, 1 }, { "beta_fast", &k->beta_fast, 0 },
                { "beta_slow", &k->beta_slow, 0 }, { "mscale", &k->mscale, 0 },
                { "mscale_all_dim", &k->mscale_all_dim, 0 },
            };
            for (size_t i = 0; i < sizeof f / sizeof *f; i++)
                if (get_num(c, rp, f[i].n, f[i].req, f[i].v) == 0 &&
                    (*f[i].v < 0 || (i < 3 && *f[i].v == 0) || *f[i].v > 1e6))
                    problem(c, f[i].n, "in %s must be %s and at most 1e6", rpk,
                            i < 3 ? "> 0" : ">= 0");
            get_int(c, rp, "original_max_position_embeddings", 1, 1, INT32_MAX,
                    &k->orig_max_pos);
            if (k->factor < 1) problem(c, rpk, "factor must be >= 1");
        }
    }
    if (!have_th) problem(c, "rope_theta", "missing (top level or in rope_parameters)");
    else if (!(th > 1 && th < 1e30)) problem(c, "rope_theta", "must be in (1, 1e30)");
    k->theta = th;
}

#define OTHER "; a draft for another model: use the DSpark made for this checkpoint"

static void read_config(Cfg *c, const Json *j, const K3Config *t, K3DSparkConfig *k, int quiet) {
    const int I32 = INT32_MAX;
    if (j->type != JSON_OBJECT) { problem(c, "(top level)", "expected an object"); return; }
    want_str(c, j, "model_type", "k3_dspark", 1, "a K3 DSpark draft");
    const Json *ar = json_get(j, "architectures");
    int arch = 0;
    for (size_t i = 0; ar && ar->type == JSON_ARRAY && i < ar->len; i++)
        arch |= ar->items[i]->type == JSON_STRING && !strcmp(ar->items[i]->str, "K3DSparkModel");
    if (!arch) problem(c, "architectures", "must list \"K3DSparkModel\"");
    const int D = 1 << 20;                    /* any dimension: bounded, products in range */
    get_int(c, j, "hidden_size", 1, 1, D, &k->hidden);
    get_int(c, j, "intermediate_size", 1, 1, D, &k->inter);
    get_int(c, j, "num_hidden_layers", 1, 1, 64, &k->layers);
    get_int(c, j, "num_attention_heads", 1, 1, 4096, &k->heads);
    get_int(c, j, "q_lora_rank", 1, 1, D, &k->q_lora);
    get_int(c, j, "kv_lora_rank", 1, 1, D, &k->kv_lora);
    get_int(c, j, "qk_nope_head_dim", 1, 1, D, &k->nope);
    if (get_int(c, j, "qk_rope_head_dim", 1, 2, 1024, &k->rope) == 0 && k->rope % 2)
        problem(c, "qk_rope_head_dim", "must be even (pairs are rotated)");
    get_int(c, j, "v_head_dim", 1, 1, D, &k->v_dim);
    get_int(c, j, "vocab_size", 1, 1, I32, &k->vocab);
    get_int(c, j, "max_position_embeddings", 1, 1, I32, &k->max_pos);
    get_int(c, j, "markov_rank", 1, 1, D, &k->markov_rank);
    if ((int64_t)k->heads * (k->nope + k->rope + k->v_dim) > I32 / 2)
        problem(c, "num_attention_heads", "%d heads of qk_nope_head_dim + qk_rope_head_dim + "
                "v_head_dim: too large", k->heads);
    int nkv = 0;
    get_int(c, j, "num_key_value_heads", 0, 1, 4096, &nkv);   /* MLA: not used */
    double eps = 0;
    if (get_num(c, j, "rms_norm_eps", 1, &eps) == 0 && !(eps > 0 && eps < 1))
        problem(c, "rms_norm_eps", "must be in (0, 1)");
    k->eps = (float)eps;
    /* the target it drafts for */
    if (k->hidden && k->hidden != t->hidden_size)
        problem(c, "hidden_size", "is %d, the target's hidden_size is %d" OTHER, k->hidden,
                t->hidden_size);
    int th = 0, tl = 0;
    if (get_int(c, j, "target_hidden_size", 1, 1, I32, &th) == 0 && th != t->hidden_size)
        problem(c, "target_hidden_size", "is %d, the target's hidden_size is %d (%s)" OTHER, th,
                t->hidden_size, t->source);
    if (get_int(c, j, "target_num_hidden_layers", 1, 1, I32, &tl) == 0 &&
        tl != t->num_hidden_layers)
        problem(c, "target_num_hidden_layers", "is %d, the target has %d layers (%s)" OTHER, tl,
                t->num_hidden_layers, t->source);
    if (k->vocab && k->vocab != t->vocab_size)
        problem(c, "vocab_size", "is %d, the target's vocab_size is %d" OTHER, k->vocab,
                t->vocab_size);
    int dv = 0;
    if (get_int(c, j, "draft_vocab_size", 0, 1, I32, &dv) == 0 && dv != k->vocab)
        problem(c, "draft_vocab_size", "is %d, not vocab_size %d (a draft-to-target id map is "
                "not implemented)", dv, k->vocab);
    if (get_int(c, j, "mask_token_id", 1, 0, I32, &k->mask_id) == 0 && k->mask_id >= k->vocab)
        problem(c, "mask_token_id", "%d is outside the vocabulary (%d)", k->mask_id, k->vocab);
    const Json *ids = json_get(j, "target_layer_ids");
    if (!ids || ids->type != JSON_ARRAY || ids->len < 1 || ids->len > 16)
        problem(c, "target_layer_ids", "expected an array of 1 to 16 layer ids");
    else {
        k->n_taps = (int)ids->len;
        for (int i = 0; i < k->n_taps; i++) {
            const Json *v = ids->items[i];
            if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 ||
                v->integer >= t->num_hidden_layers) {
                problem(c, "target_layer_ids", "entry %d is not a layer of the target "
                        "(0..%d)", i, t->num_hidden_layers - 1);
                break;
            }
            k->taps[i] = (int)v->integer;
            if (i > 0 && k->taps[i] <= k->taps[i - 1]) {
                problem(c, "target_layer_ids", "must be ascending and distinct (entry %d: "
                        "%d after %d); the concatenation order is positional", i, k->taps[i],
                        k->taps[i - 1]);
                break;
            }
        }
    }
    int nt = 0;
    if (get_int(c, j, "num_target_layers", 1, 1, 16, &nt) == 0 && nt != k->n_taps)
        problem(c, "num_target_layers", "is %d, target_layer_ids lists %d", nt, k->n_taps);
    /* lineage variants (§2.2): another checkpoint family, refused by name */
    want_bool(c, j, "mla_use_nope", 0, "this draft applies RoPE");
    want_bool(c, j, "mla_use_output_gate", 0, "no output gate");
    want_bool(c, j, "fc_norm", 0, "no per-tap RMSNorm: another checkpoint lineage");
    want_bool(c, j, "enable_confidence_head", 1, "the head is in the file");
    want_bool(c, j, "confidence_head_with_markov", 1, "input = hidden and Markov embedding");
    want_bool(c, j, "sample_from_anchor", 1, "the anchor row is the first prediction");
    want_bool(c, j, "dspark_bonus_anchor", 0, "the anchor row is the first prediction");
    want_str(c, j, "markov_head_type", "vanilla", 0, "the only Markov head implemented");
    want_str(c, j, "aux_hidden_stream", "prefix", 0,
             "taps are the raw AttnRes prefix; another stream is another lineage");
    want_str(c, j, "hidden_act", "silu", 0, "the draft's MLP is SiLU");
    double ls = 1;
    if (get_num(c, j, "logit_scale", 0, &ls) == 0 && ls != 1)
        problem(c, "logit_scale", "must be 1");
    k->block_size = K3_DSPARK_MAX_N;
    get_int(c, j, "block_size", 0, 1, K3_DSPARK_MAX_N, &k->block_size);
    read_rope(c, j, k);
    for (size_t i = 0; i < j->len && !quiet; i++) {
        size_t w = 0;
        while (w < sizeof KNOWN / sizeof *KNOWN && strcmp(KNOWN[w], j->keys[i])) w++;
        char q[96];
        if (w == sizeof KNOWN / sizeof *KNOWN)
            fprintf(stderr, "k3: warning: %s: unknown key %s ignored\n", c->file,
                    quoted(j->keys[i], strlen(j->keys[i]), q, sizeof q));
    }
}

/* ---- tensors (§3.1) ---- */

typedef struct {
    K3DSpark *d; const char *path; char *err; size_t errlen; int failed;
    size_t used; int n;                       /* problems so far, one line each */
} Bind;

static void bind_problem(Bind *b, const char *fmt, ...) {
    b->failed = b->failed ? b->failed : K3_ERR_USAGE;
    if (b->n++ >= 8 || b->used + 1 >= b->errlen) return;      /* the first 8 named */
    char msg[700];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
    int k = snprintf(b->err + b->used, b->errlen - b->used, "%s%s", b->used ? "\n" : "", msg);
    if (k > 0) b->used += (size_t)k;
    if (b->used >= b->errlen) b->used = b->errlen - 1;
}

/* The tensor name, BF16, of shape [rows, cols] (cols 0: a vector [rows]); NULL when
 * refused (every problem named, one line each, with the fix). */
static const StTensor *check(Bind *b, const char *name, int64_t rows, int64_t cols) {
    const StTensor *t = st_find(b->d->st, name);
    char s[96];
    static const char FIX[] = "config.json and model.safetensors are not of one release: "
                              "download both again from the same revision";
    if (!t) {
        bind_problem(b, "%s: tensor '%s' is missing (is this an Inferact K3 DSpark checkpoint? "
                     "every one of its 68 tensors is needed: download model.safetensors "
                     "again)", b->path, name);
    } else if (t->dtype != ST_BF16) {
        bind_problem(b, "%s: tensor '%s' is %s, expected BF16 (the release is BF16: %s)",
                     b->path, name, st_dtype_name(t->dtype), FIX);
    } else if (cols ? t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols
                    : t->ndim != 1 || t->shape[0] != rows) {
        if (cols)
            bind_problem(b, "%s: tensor '%s' has shape %s, expected [%lld, %lld] from "
                         "config.json (%s)", b->path, name, st_shape_str(t, s, sizeof s),
                         (long long)rows, (long long)cols, FIX);
        else
            bind_problem(b, "%s: tensor '%s' has shape %s, expected [%lld] from config.json "
                         "(%s)", b->path, name, st_shape_str(t, s, sizeof s), (long long)rows, FIX);
    } else
        return t;
    return NULL;
}

static void bind_mat(Bind *b, K3Mat *M, const char *name, int rows, int cols) {
    const StTensor *t = check(b, name, rows, cols);
    if (!t) return;
    const char *p = (const char *)b->d->map + t->offset;
    if ((uintptr_t)p % 2) {                   /* misaligned in the file: a copy */
        void *q = malloc(t->nbytes);
        if (!q) { bind_problem(b, "out of memory"); b->failed = 1; return; }
        memcpy(q, p, t->nbytes);
        p = q;
        b->d->copies[b->d->n_copies++] = q;   /* freed at close */
    }
    *M = (K3Mat){ K3_W_BF16, rows, cols, p, NULL, NULL };
    b->d->weight_bytes += t->nbytes;
}

static float *bind_vec(Bind *b, const char *name, int n) {
    const StTensor *t = check(b, name, n, 0);
    if (!t) return NULL;
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!v) { bind_problem(b, "out of memory"); b->failed = 1; return NULL; }
    const unsigned char *p = (const unsigned char *)b->d->map + t->offset;
    for (int i = 0; i < n; i++) {
        uint16_t h; memcpy(&h, p + 2 * (size_t)i, 2);
        v[i] = k3_bf16_to_f32(h);
    }
    b->d->weight_bytes += t->nbytes + sizeof(float) * (size_t)n;
    return v;
}

static void bind_all(Bind *b) {
    K3DSpark *d = b->d;
    const K3DSparkConfig *k = &d->c;
    const int H = k->hidden, NH = k->heads, QH = k->nope + k->rope;
    char n[256];
    check(b, "embed_tokens.weight", k->vocab, H);   /* checked, never read (§3.3) */
    bind_mat(b, &d->ctx_proj, "context_proj.weight", H, k->n_taps * H);
    d->ctx_norm = bind_vec(b, "context_norm.weight", H);
    d->final_norm = bind_vec(b, "final_norm.weight", H);
    bind_mat(b, &d->w1, "markov_head.markov_w1.weight", k->vocab, k->markov_rank);
    bind_mat(b, &d->w2, "markov_head.markov_w2.weight", k->vocab, k->markov_rank);
    bind_mat(b, &d->conf_w, "confidence_head.proj.weight", 1, H + k->markov_rank);
    float *cb = bind_vec(b, "confidence_head.proj.bias", 1);
    if (cb) d->conf_b = cb[0];
    free(cb);
    for (int l = 0; l < k->layers; l++) {
        K3DSparkLayer *ly = &d->layers[l];
#define NM(s) (snprintf(n, sizeof n, "layers.%d.%s", l, s), n)
        ly->in_norm = bind_vec(b, NM("input_layernorm.weight"), H);
        ly->post_norm = bind_vec(b, NM("post_attention_layernorm.weight"), H);
        bind_mat(b, &ly->q_a, NM("self_attn.q_a_proj.weight"), k->q_lora, H);
        ly->q_a_norm = bind_vec(b, NM("self_attn.q_a_layernorm.weight"), k->q_lora);
        bind_mat(b, &ly->q_b, NM("self_attn.q_b_proj.weight"), NH * QH, k->q_lora);
        bind_mat(b, &ly->kv_a, NM("self_attn.kv_a_proj_with_mqa.weight"), k->kv_lora + k->rope,
                 H);
        ly->kv_a_norm = bind_vec(b, NM("self_attn.kv_a_layernorm.weight"), k->kv_lora);
        bind_mat(b, &ly->kv_b, NM("self_attn.kv_b_proj.weight"), NH * (k->nope + k->v_dim),
                 k->kv_lora);
        bind_mat(b, &ly->o, NM("self_attn.o_proj.weight"), H, NH * k->v_dim);
        bind_mat(b, &ly->gate, NM("mlp.gate_proj.weight"), k->inter, H);
        bind_mat(b, &ly->up, NM("mlp.up_proj.weight"), k->inter, H);
        bind_mat(b, &ly->down, NM("mlp.down_proj.weight"), H, k->inter);
#undef NM
    }
}

static void tap_fn(K3Tap *t, int L, const float *p, int T, int H);

/* One mapping of a file however many drafts open it (batch and serve open one a sequence
 * slot): the same pages mapped twice count twice in the resident set, and the memory plan
 * counts the pinned weights once. */
static struct { dev_t dev; ino_t ino; size_t len; void *map; int refs; } g_maps[4];
static pthread_mutex_t g_maps_mu = PTHREAD_MUTEX_INITIALIZER;

static void *map_shared(int fd, size_t len) {
    struct stat sb;
    if (fstat(fd, &sb)) return mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    void *m = NULL;
    pthread_mutex_lock(&g_maps_mu);
    for (int i = 0; i < 4 && !m; i++)
        if (g_maps[i].refs && g_maps[i].dev == sb.st_dev && g_maps[i].ino == sb.st_ino &&
            g_maps[i].len == len) { g_maps[i].refs++; m = g_maps[i].map; }
    if (!m && (m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0)) != MAP_FAILED)
        for (int i = 0; i < 4; i++)
            if (!g_maps[i].refs) {
                g_maps[i].dev = sb.st_dev; g_maps[i].ino = sb.st_ino; g_maps[i].len = len;
                g_maps[i].map = m; g_maps[i].refs = 1;
                break;
            }
    pthread_mutex_unlock(&g_maps_mu);
    return m;
}

static void unmap_shared(void *m, size_t len) {
    pthread_mutex_lock(&g_maps_mu);
    for (int i = 0; i < 4; i++)
        if (g_maps[i].refs && g_maps[i].map == m) {
            if (--g_maps[i].refs) m = NULL;       /* another draft still reads it */
            break;
        }
    pthread_mutex_unlock(&g_maps_mu);
    if (m) munmap(m, len);
}

/* k3_dspark_identity: config.json's bytes, the file's size, 16 blocks of 4 KB spread over
 * it (a revision with new weights of the same size differs there). */
static uint64_t identity(const char *cfg, size_t cfg_len, const char *path, uint64_t size) {
    uint64_t h = k3_hash(K3_HASH_INIT, cfg, cfg_len);
    h = k3_hash(h, &size, sizeof size);
    int fd = open(path, O_RDONLY);
    unsigned char b[4096];
    for (int i = 0; i < 16 && fd >= 0; i++) {
        const uint64_t off = size > sizeof b ? (size - sizeof b) / 15 * (uint64_t)i : 0;
        const ssize_t n = pread(fd, b, sizeof b, (off_t)off);
        if (n > 0) h = k3_hash(h, b, (size_t)n);
    }
    if (fd >= 0) close(fd);
    return h;
}

/* The plan streams the weights: every matrix k3_matmul multiplies goes through the piece
 * source, its rows read from the file into buf a piece at a time; kv_b (read per head in
 * the attention) a layer at a time into kvb, w1 a row at a time. The mapping's pages the
 * loader touched (the norms, copied to f32) are dropped; it is never read again. */
static int stream_setup(K3DSpark *d, char *err, size_t errlen) {
    const char *tp = getenv("K3_TEST_DRAFT_PIECE");   /* tests: many pieces a matrix */
    d->piece = tp && atol(tp) > 0 ? (size_t)atol(tp) : K3_DSPARK_PIECE;
    K3Mat *m[3 + 7 * 64];
    int n = 0;
    m[n++] = &d->ctx_proj; m[n++] = &d->w2; m[n++] = &d->conf_w;
    size_t kvb = 0;
    for (int l = 0; l < d->c.layers; l++) {
        K3DSparkLayer *y = &d->layers[l];
        K3Mat *lm[] = { &y->q_a, &y->q_b, &y->kv_a, &y->o, &y->gate, &y->up, &y->down };
        for (size_t i = 0; i < sizeof lm / sizeof *lm; i++) m[n++] = lm[i];
        const size_t b = (size_t)y->kv_b.rows * y->kv_b.cols * 2;
        if (b > kvb) kvb = b;
    }
    d->buf_len = (size_t)d->w1.cols * 2;      /* at least a w1 row */
    for (int i = 0; i < n; i++) {
        m[i]->src = &d->rsrc;
        const size_t rb = (size_t)m[i]->cols * 2;
        size_t rows = d->piece / rb;
        if (rows < 1) rows = 1;
        if (rows > (size_t)m[i]->rows) rows = (size_t)m[i]->rows;
        if (rows * rb > d->buf_len) d->buf_len = rows * rb;
    }
    d->tmp = malloc(sizeof(float) * K3_DSPARK_TMP);
    d->tmp_rows = K3_DSPARK_TMP;
    d->buf = malloc(d->buf_len);
    d->kvb = malloc(kvb ? kvb : 1);
    if (!d->tmp || !d->buf || !d->kvb) { snprintf(err, errlen, "out of memory"); return 1; }
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", d->dir);
    d->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (d->fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return K3_ERR_RUNTIME;
    }
    d->streamed = 1;
    d->rsrc.matmul = k3_dspark_piece_matmul;
    madvise(d->map, d->map_len, MADV_DONTNEED);
    return 0;
}

void k3_dspark_plan_of(const K3DSparkConfig *k, K3DraftPlan *o) {
    memset(o, 0, sizeof *o);
    const uint64_t H = k->hidden, I = k->inter, NH = k->heads, QH = k->nope + k->rope;
    const uint64_t KL = k->kv_lora, DR = k->rope, V = k->vocab, MR = k->markov_rank;
    const uint64_t NT = k->n_taps, M = K3_DSPARK_MAX_N;
    /* [rows, cols] of every matrix k3_matmul streams, kv_b apart */
    const uint64_t mats[][2] = { { H, NT * H }, { V, MR }, { 1, H + MR }, { k->q_lora, H },
                                 { NH * QH, k->q_lora }, { KL + DR, H }, { H, NH * k->v_dim },
                                 { I, H }, { I, H }, { H, I } };
    uint64_t piece = 0, mat = 2 * (NT * H * H + 2 * V * MR + H + MR);
    for (size_t i = 0; i < sizeof mats / sizeof *mats; i++) {
        const uint64_t rb = 2 * mats[i][1];
        uint64_t rows = K3_DSPARK_PIECE / rb;
        if (rows < 1) rows = 1;
        if (rows > mats[i][0]) rows = mats[i][0];
        if (rows * rb > piece) piece = rows * rb;
    }
    const uint64_t kvb = 2 * NH * (k->nope + k->v_dim) * KL;
    const uint64_t layer = 2 * (k->q_lora * H + NH * QH * k->q_lora + (KL + DR) * H + H *
                                NH * k->v_dim + 3 * I * H) + kvb;
    mat += (uint64_t)k->layers * layer;
    const uint64_t vec = 2 * H + 1 + (uint64_t)k->layers * (2 * H + k->q_lora + KL);
    o->weights = mat + 2 * vec;
    /* a piece's buffer, a layer's kv_b, the scatter rows */
    const uint64_t win = (piece > 2 * MR ? piece : 2 * MR) + kvb + 4 * K3_DSPARK_TMP;
    o->window = win < o->weights ? win : o->weights;
    o->ingest = 2 * (NT * H * H + (uint64_t)k->layers * (KL + DR) * H);
    const uint64_t block = M * (4 * H + 2 * I + k->q_lora + NH * QH + KL + DR + KL + DR +
                                NH * k->v_dim + 2 * V) + V + H + MR + 1;
    o->fixed = 4 * (block + (uint64_t)K3_ROW_BLOCK * (H + KL + DR) + M * V + vec + DR);
    o->tap_row = 4 * NT * H;
    o->pos_bytes = 4 * (uint64_t)k->layers * (KL + DR);
    o->att_row = 8;
    o->att_fixed = 4 * (2 * M + 3 * KL);
    o->max_pos = k->max_pos;
}

/* The dimensions from config.json alone (bounded as read_config bounds them). */
int k3_dspark_plan_file(const char *dir, K3DraftPlan *out, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    Json *j = json_file(path, 1 << 20, NULL, err, errlen);
    if (!j) return K3_ERR_USAGE;
    K3DSparkConfig k;
    memset(&k, 0, sizeof k);
    Cfg c = { path, err, errlen, 0, 0 };
    const int D = 1 << 20;
    if (j->type != JSON_OBJECT) problem(&c, "(top level)", "expected an object");
    else {
        get_int(&c, j, "hidden_size", 1, 1, D, &k.hidden);
        get_int(&c, j, "intermediate_size", 1, 1, D, &k.inter);
        get_int(&c, j, "num_hidden_layers", 1, 1, 64, &k.layers);
        get_int(&c, j, "num_attention_heads", 1, 1, 4096, &k.heads);
        get_int(&c, j, "q_lora_rank", 1, 1, D, &k.q_lora);
        get_int(&c, j, "kv_lora_rank", 1, 1, D, &k.kv_lora);
        get_int(&c, j, "qk_nope_head_dim", 1, 1, D, &k.nope);
        get_int(&c, j, "qk_rope_head_dim", 1, 2, 1024, &k.rope);
        get_int(&c, j, "v_head_dim", 1, 1, D, &k.v_dim);
        get_int(&c, j, "vocab_size", 1, 1, INT32_MAX, &k.vocab);
        get_int(&c, j, "max_position_embeddings", 1, 1, INT32_MAX, &k.max_pos);
        get_int(&c, j, "markov_rank", 1, 1, D, &k.markov_rank);
        const Json *ids = json_get(j, "target_layer_ids");
        if (!ids || ids->type != JSON_ARRAY || ids->len < 1 || ids->len > 16)
            problem(&c, "target_layer_ids", "expected an array of 1 to 16 layer ids");
        else k.n_taps = (int)ids->len;
    }
    json_free(j);
    if (c.n) return K3_ERR_USAGE;
    k3_dspark_plan_of(&k, out);
    return 0;
}

int k3_dspark_open(K3DSpark **out, const char *dir, K3Engine *e, int quiet, char *err,
                   size_t errlen) {
    *out = NULL;
    K3DSpark *d = calloc(1, sizeof *d);
    if (!d) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    d->e = e;
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    uint64_t cfg_hash = 0;
    Json *j = json_file(path, 1 << 20, &cfg_hash, err, errlen);
    if (!j) { free(d); return K3_ERR_USAGE; }
    Cfg c = { path, err, errlen, 0, 0 };
    read_config(&c, j, &e->m.cfg, &d->c, quiet);
    json_free(j);
    if (c.n) { free(d); return K3_ERR_USAGE; }
    int rc = K3_ERR_RUNTIME;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    d->st = st_new();
    if (!d->st || st_add_file(d->st, path, err, errlen)) goto fail;
    int fd = open(path, O_RDONLY);
    d->map_len = d->st->shards[0].file_size;
    d->identity = identity((const char *)&cfg_hash, sizeof cfg_hash, path, d->map_len);
    d->map = fd < 0 ? MAP_FAILED : map_shared(fd, d->map_len);
    if (fd >= 0) close(fd);
    if (d->map == MAP_FAILED) {
        d->map = NULL;
        snprintf(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        goto fail;
    }
    d->layers = calloc(d->c.layers, sizeof *d->layers);
    if (!d->layers) { snprintf(err, errlen, "out of memory"); goto fail; }
    Bind b = { d, path, err, errlen, 0, 0, 0 };
    bind_all(&b);
    if (b.n > 8 && b.used + 1 < errlen)
        snprintf(err + b.used, errlen - b.used, "\n%s: and %d more tensor problems", path,
                 b.n - 8);
    if (b.failed) { rc = b.failed; goto fail; }
    /* the tap: which target layers, rows for the engine's largest step */
    for (int L = 0; L < K3_MAX_LAYERS; L++) d->tap_slot[L] = -1;
    for (int i = 0; i < d->c.n_taps; i++) d->tap_slot[d->c.taps[i]] = i;
    d->tap.fn = tap_fn;
    d->tap_cap = e->rs.max_T > 0 ? e->rs.max_T : 1;
    d->taps = malloc(sizeof(float) * (size_t)d->tap_cap * d->c.n_taps * d->c.hidden);
    if (!d->taps) { snprintf(err, errlen, "out of memory"); goto fail; }
    d->lat = calloc(d->c.layers, sizeof(float *));
    d->kpe = calloc(d->c.layers, sizeof(float *));
    if (!d->lat || !d->kpe) { snprintf(err, errlen, "out of memory"); goto fail; }
    k3_dspark_rope_init(d);
    if (!d->inv_freq) { snprintf(err, errlen, "out of memory"); goto fail; }
    const int ctx = e->rs.ctx < d->c.max_pos ? e->rs.ctx : d->c.max_pos;
    if (ctx > 0 && (rc = k3_dspark_reserve(d, ctx, err, errlen))) goto fail;
    if (k3_mem_draft_streamed(e->mem) && (rc = stream_setup(d, err, errlen))) goto fail;
    if (!quiet) {
        fprintf(stderr, "k3: dspark: %d layers, taps after target layers", d->c.layers);
        for (int i = 0; i < d->c.n_taps; i++) fprintf(stderr, "%s%d", i ? "," : " ", d->c.taps[i]);
        if (d->c.yarn)
            fprintf(stderr, "; RoPE: yarn (theta %g, factor %g, original %d; magnitude %.7g, "
                    "softmax scale %.7g)\n", d->c.theta, d->c.factor, d->c.orig_max_pos, d->mag,
                    d->scale);
        else
            fprintf(stderr, "; RoPE: default (theta %g, no YaRN scaling; softmax scale %.7g)\n",
                    d->c.theta, d->scale);
    }
    *out = d;
    return 0;
fail:
    k3_dspark_close(d);
    return rc;
}

void k3_dspark_close(K3DSpark *d) {
    if (!d) return;
    if (d->e && d->e->tap == &d->tap) d->e->tap = NULL;
    for (int l = 0; d->layers && l < d->c.layers; l++) {
        K3DSparkLayer *ly = &d->layers[l];
        free(ly->in_norm); free(ly->post_norm); free(ly->q_a_norm); free(ly->kv_a_norm);
    }
    for (int l = 0; d->lat && l < d->c.layers; l++) free(d->lat[l]);
    for (int l = 0; d->kpe && l < d->c.layers; l++) free(d->kpe[l]);
    free(d->lat); free(d->kpe); free(d->layers);
    free(d->ctx_norm); free(d->final_norm); free(d->inv_freq);
    free(d->taps); free(d->ingest); free(d->blk); free(d->tmp); free(d->buf); free(d->kvb);
    if (d->streamed && d->fd >= 0) close(d->fd);
    for (int i = 0; i < d->n_copies; i++) free(d->copies[i]);
    if (d->map) unmap_shared(d->map, d->map_len);
    if (d->st) st_close(d->st);
    free(d);
}

/* The copy after layer L: a pure read of p (spec §6.1 condition 5). */
static void tap_fn(K3Tap *t, int L, const float *p, int T, int H) {
    K3DSpark *d = (K3DSpark *)((char *)t - offsetof(K3DSpark, tap));
    if (L < 0 || L >= K3_MAX_LAYERS || d->tap_slot[L] < 0) return;
    const int W = d->c.n_taps * H, j = d->tap_slot[L];
    if (T > d->tap_cap) {                     /* a step past the planned chunk: grow */
        float *n = realloc(d->taps, sizeof(float) * (size_t)T * W);
        if (!n) { d->tap_rows = 0; return; }
        d->taps = n; d->tap_cap = T;
    }
    for (int r = 0; r < T; r++)
        memcpy(d->taps + (size_t)r * W + (size_t)j * H, p + (size_t)r * H, sizeof(float) * H);
    d->tap_rows = T;
}

K3Tap *k3_dspark_tap(K3DSpark *d) { return &d->tap; }
const float *k3_dspark_tap_rows(const K3DSpark *d, int *rows) {
    if (rows) *rows = d->tap_rows;
    return d->taps;
}
int k3_dspark_tap_width(const K3DSpark *d) { return d->c.n_taps * d->c.hidden; }
const K3DSparkConfig *k3_dspark_config(const K3DSpark *d) { return &d->c; }

size_t k3_dspark_weight_bytes(const K3DSpark *d) { return d->weight_bytes; }

size_t k3_dspark_bytes(const K3DSpark *d, int ctx) {
    const K3DSparkConfig *k = &d->c;
    const size_t N = K3_DSPARK_MAX_N, H = k->hidden;
    size_t cache = (size_t)ctx * k->layers * (k->kv_lora + k->rope) * sizeof(float);
    size_t taps = (size_t)d->tap_cap * k->n_taps * H * sizeof(float);
    size_t ctxrows = (size_t)K3_ROW_BLOCK * (H + k->kv_lora + k->rope) * sizeof(float);
    size_t block = d->blk_len ? d->blk_len * sizeof(float)
                              : N * (4 * H + 2 * (size_t)k->inter + k->q_lora +
                                     (size_t)k->heads * (k->nope + k->rope + k->v_dim) +
                                     k->kv_lora + k->rope + 2 * (size_t)k->vocab) * sizeof(float);
    return d->weight_bytes + cache + taps + ctxrows + block;
}
