/* vision_load.c — opens the vision tower of a K3 checkpoint (K3_VISION.md §1, §3):
 * config.json's vision_config checked key by key, the 168 tensors vision_tower.* and
 * mm_projector.* by name, dtype (BF16) and shape from the shards; anything else under those
 * prefixes (a bias, K2.5's pre_norm) is refused by name. Matrices stay BF16 (k3_matmul
 * widens them exactly); vectors and the position grid are widened to fp32 once. */
#include "vision_priv.h"
#include "json.h"
#include "k3.h"
#include "st.h"
#include "util.h"
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { const char *file; char *err; size_t errlen, used; int n; } Cfg;

/* A name from a file, fit to echo: control bytes as '?', at most 80 bytes. */
static const char *shown(const char *s, char *buf, size_t n) {
    size_t i = 0;
    for (; s[i] && i + 4 < n && i < 80; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    snprintf(buf + i, n - i, "%s", s[i] ? "..." : "");
    return buf;
}

static void problem(Cfg *c, const char *key, const char *fmt, ...) {
    c->n++;
    if (c->used + 1 >= c->errlen) return;
    char msg[400];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
    int k = snprintf(c->err + c->used, c->errlen - c->used, "%s%s: vision_config.%s: %s",
                     c->used ? "\n" : "", c->file, key, msg);
    if (k > 0) c->used += (size_t)k;
    if (c->used >= c->errlen) c->used = c->errlen - 1;
}

static int get_int(Cfg *c, const Json *o, const char *key, int req, int lo, int hi, int *out) {
    const Json *v = json_get(o, key);
    if (!v) {
        if (req) problem(c, key, "missing (required by the vision tower)");
        return -1;
    }
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < lo || v->integer > hi) {
        problem(c, key, "expected an integer in [%d, %d]", lo, hi);
        return -1;
    }
    *out = (int)v->integer;
    return 0;
}

/* A key naming a variant k3 does not implement: absent, or exactly the released value. */
static void want_str(Cfg *c, const Json *o, const char *key, const char *want) {
    const Json *v = json_get(o, key);
    if (v && (v->type != JSON_STRING || strcmp(v->str, want)))
        problem(c, key, "must be \"%s\" (the K3 tower; another value is another model)", want);
}
static void want_false(Cfg *c, const Json *o, const char *key) {
    const Json *v = json_get(o, key);
    if (v && (v->type != JSON_BOOL || v->boolean))
        problem(c, key, "must be false (the K3 tower has no biases)");
}

static void read_config(Cfg *c, const Json *top, K3VisionConfig *k) {
    const Json *j = json_get(top, "vision_config");
    if (!j || j->type != JSON_OBJECT) {
        problem(c, "(object)", "missing: this checkpoint has no vision tower (a text-only "
                "model; images need the multimodal K3 checkpoint)");
        return;
    }
    const int D = 1 << 16;
    get_int(c, j, "vt_hidden_size", 1, 1, D, &k->hidden);
    get_int(c, j, "qkv_hidden_size", 1, 1, D, &k->qkv);
    get_int(c, j, "vt_num_attention_heads", 1, 1, 1024, &k->heads);
    get_int(c, j, "vt_intermediate_size", 1, 1, D, &k->inter);
    get_int(c, j, "vt_num_hidden_layers", 1, 1, 256, &k->layers);
    get_int(c, j, "patch_size", 1, 1, 64, &k->patch);
    get_int(c, j, "init_pos_emb_height", 1, 1, 1024, &k->pos_h);
    get_int(c, j, "init_pos_emb_width", 1, 1, 1024, &k->pos_w);
    int mh = 0;
    if (get_int(c, j, "mm_hidden_size", 0, 1, D, &mh) == 0 && k->hidden && mh != k->hidden)
        problem(c, "mm_hidden_size", "is %d, vt_hidden_size %d (the merger takes the tower's "
                "rows as they are)", mh, k->hidden);
    if (k->heads && k->qkv && (k->qkv % k->heads || (k->qkv / k->heads) % 4))
        problem(c, "qkv_hidden_size", "%d over %d heads must give a head_dim divisible by 4 "
                "(2-D RoPE on pairs)", k->qkv, k->heads);
    else if (k->heads) k->head_dim = k->qkv / k->heads;
    /* the row width: text_hidden_size, else the text model's hidden_size */
    const Json *tc = json_get(top, "text_config");
    const Json *th = tc ? json_get(tc, "hidden_size") : NULL;
    int text = 0;
    if (th && th->type == JSON_NUMBER && th->is_integer) text = (int)th->integer;
    if (json_get(j, "text_hidden_size")) get_int(c, j, "text_hidden_size", 1, 1, D, &k->out);
    else if (text > 0 && text <= D) k->out = text;
    else problem(c, "text_hidden_size", "missing, and text_config.hidden_size too");
    if (k->out && text && k->out != text)
        problem(c, "text_hidden_size", "is %d, text_config.hidden_size is %d (the rows are "
                "spliced into that model)", k->out, text);
    k->eps = FLT_EPSILON;                     /* nn.RMSNorm without eps: float's (§7.2) */
    k->proj_eps = 1e-5f;
    const Json *pe = json_get(j, "projector_ln_eps");
    if (pe && (pe->type != JSON_NUMBER || !(pe->number > 0 && pe->number < 1)))
        problem(c, "projector_ln_eps", "must be a number in (0, 1)");
    else if (pe) k->proj_eps = (float)pe->number;
    const Json *mk = json_get(j, "merge_kernel_size");
    int two = mk && mk->type == JSON_ARRAY && mk->len == 2;
    for (size_t i = 0; two && i < 2; i++) {
        const Json *e = json_at(mk, i);
        two = e->type == JSON_NUMBER && e->is_integer && e->integer == 2;
    }
    if (mk && !two)
        problem(c, "merge_kernel_size", "must be [2, 2] (the only merge k3 implements)");
    want_str(c, j, "norm_type", "rmsnorm");
    want_str(c, j, "activation_func", "gelu_pytorch_tanh");
    want_str(c, j, "projector_hidden_act", "gelu");
    want_str(c, j, "pos_emb_type", "divided_fixed");
    want_str(c, j, "pos_emb_interpolation_mode", "bilinear");
    want_str(c, j, "merge_type", "sd2_tpool");
    want_str(c, j, "mm_projector_type", "patchmergerv2");
    want_false(c, j, "attn_bias");
    want_false(c, j, "linear_bias");
    want_false(c, j, "patch_embed_proj_bias");
}

/* ---- tensors ---- */

typedef struct {
    K3Vision *v; StIndex *st; const char *dir; char *err; size_t errlen; int failed;
    int seen;                                 /* tensors bound (168 for the release) */
} Bind;

static const StTensor *check(Bind *b, const char *name, int nd, const int64_t *shape) {
    if (b->failed) return NULL;
    const StTensor *t = st_find(b->st, name);
    char want[96], got[96];
    size_t o = 0, g = 0;
    for (int i = 0; i < nd; i++)
        o += snprintf(want + o, sizeof want - o, "%s%lld", i ? ", " : "[", (long long)shape[i]);
    snprintf(want + o, sizeof want - o, "]");
    if (!t) {
        snprintf(b->err, b->errlen, "%s: tensor '%s' is missing (the vision tower needs all "
                 "%d tensors of vision_tower.* and mm_projector.*: use the multimodal K3 "
                 "checkpoint whole)", b->dir, name, 2 + 6 * b->v->c.layers + 1 + 3);
    } else if (t->dtype != ST_BF16) {
        snprintf(b->err, b->errlen, "%s: tensor '%s' is %s, expected BF16 (the release's "
                 "vision tensors are BF16)", b->dir, name, st_dtype_name(t->dtype));
    } else {
        int ok = t->ndim == nd;
        for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == shape[i];
        if (ok) { b->seen++; return t; }
        for (int i = 0; i < t->ndim && g < sizeof got; i++)
            g += snprintf(got + g, sizeof got - g, "%s%lld", i ? ", " : "[",
                          (long long)t->shape[i]);
        if (g < sizeof got) snprintf(got + g, sizeof got - g, "]");
        snprintf(b->err, b->errlen, "%s: tensor '%s' has shape %s, expected %s from "
                 "config.json's vision_config", b->dir, name, t->ndim ? got : "[]", want);
    }
    b->failed = K3_ERR_USAGE;
    return NULL;
}

static void *read_t(Bind *b, const StTensor *t) {
    void *p = malloc(t->nbytes ? t->nbytes : 1);
    if (!p) snprintf(b->err, b->errlen, "out of memory");
    else if (st_read(b->st, t, p, b->err, b->errlen)) { free(p); p = NULL; }
    if (!p) b->failed = K3_ERR_RUNTIME;
    return p;
}

static void bind_mat(Bind *b, K3Mat *M, const char *name, int nd, const int64_t *shape) {
    const StTensor *t = check(b, name, nd, shape);
    void *p = t ? read_t(b, t) : NULL;
    if (!p) return;
    b->v->bufs[b->v->n_bufs++] = p;
    int64_t cols = 1;
    for (int i = 1; i < nd; i++) cols *= shape[i];
    *M = (K3Mat){ K3_W_BF16, (int)shape[0], (int)cols, p, NULL, NULL };
    b->v->weight_bytes += t->nbytes;
}

static float *bind_f32(Bind *b, const char *name, int nd, const int64_t *shape) {
    const StTensor *t = check(b, name, nd, shape);
    uint16_t *h = t ? read_t(b, t) : NULL;
    if (!h) return NULL;
    size_t n = t->nbytes / 2;
    float *f = malloc(sizeof(float) * n);
    if (f)
        for (size_t i = 0; i < n; i++) f[i] = k3_bf16_to_f32(h[i]);
    else { snprintf(b->err, b->errlen, "out of memory"); b->failed = K3_ERR_RUNTIME; }
    free(h);
    b->v->weight_bytes += sizeof(float) * n;
    return f;
}

/* One of the names bind_all asks for (the release's 168 for 27 layers). */
static int expected(const char *s, int layers) {
    static const char *const FIXED[] = {
        "vision_tower.patch_embed.proj.weight", "vision_tower.patch_embed.pos_emb.weight",
        "vision_tower.encoder.final_layernorm.weight", "mm_projector.proj.0.weight",
        "mm_projector.proj.2.weight", "mm_projector.post_norm.weight",
    };
    static const char *const BLOCK[] = {
        "norm0.weight", "norm1.weight", "wqkv.weight", "wo.weight", "mlp.fc0.weight",
        "mlp.fc1.weight",
    };
    for (size_t i = 0; i < sizeof FIXED / sizeof *FIXED; i++)
        if (!strcmp(s, FIXED[i])) return 1;
    const char *pre = "vision_tower.encoder.blocks.";
    if (strncmp(s, pre, strlen(pre))) return 0;
    s += strlen(pre);
    int l = 0, digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 4; s++, digits++) l = l * 10 + (*s - '0');
    if (!digits || l >= layers || *s++ != '.') return 0;
    for (size_t i = 0; i < sizeof BLOCK / sizeof *BLOCK; i++)
        if (!strcmp(s, BLOCK[i])) return 1;
    return 0;
}

static void bind_all(Bind *b) {
    K3Vision *v = b->v;
    const K3VisionConfig *k = &v->c;
    const int64_t D = k->hidden, A = k->qkv, F = k->inter, p = k->patch;
    char n[160];
    bind_mat(b, &v->pe, "vision_tower.patch_embed.proj.weight", 4,
             (int64_t[]){ D, 3, p, p });
    v->pos = bind_f32(b, "vision_tower.patch_embed.pos_emb.weight", 3,
                      (int64_t[]){ k->pos_h, k->pos_w, D });
    for (int l = 0; l < k->layers && !b->failed; l++) {
        K3VisionBlock *bl = &v->blocks[l];
#define NM(s) (snprintf(n, sizeof n, "vision_tower.encoder.blocks.%d.%s", l, s), n)
        bl->norm0 = bind_f32(b, NM("norm0.weight"), 1, (int64_t[]){ D });
        bl->norm1 = bind_f32(b, NM("norm1.weight"), 1, (int64_t[]){ D });
        bind_mat(b, &bl->wqkv, NM("wqkv.weight"), 2, (int64_t[]){ 3 * A, D });
        bind_mat(b, &bl->wo, NM("wo.weight"), 2, (int64_t[]){ D, A });
        bind_mat(b, &bl->fc0, NM("mlp.fc0.weight"), 2, (int64_t[]){ F, D });
        bind_mat(b, &bl->fc1, NM("mlp.fc1.weight"), 2, (int64_t[]){ D, F });
#undef NM
    }
    v->final_norm = bind_f32(b, "vision_tower.encoder.final_layernorm.weight", 1,
                             (int64_t[]){ D });
    bind_mat(b, &v->p0, "mm_projector.proj.0.weight", 2, (int64_t[]){ 4 * D, 4 * D });
    bind_mat(b, &v->p2, "mm_projector.proj.2.weight", 2, (int64_t[]){ k->out, 4 * D });
    v->post_norm = bind_f32(b, "mm_projector.post_norm.weight", 1, (int64_t[]){ k->out });
    if (b->failed) return;
    /* a tensor under the prefixes that the graph does not read: another model's layout */
    int under = 0;
    const char *stray = NULL;
    for (size_t i = 0; i < b->st->n_tensors; i++) {
        const char *s = b->st->tensors[i].name;
        if (strncmp(s, "vision_tower.", 13) && strncmp(s, "mm_projector.", 13)) continue;
        under++;
        if (!stray && !expected(s, k->layers)) stray = s;
    }
    char sb[96];
    if (stray) {
        snprintf(b->err, b->errlen, "%s: tensor '%s' is not part of the K3 vision tower "
                 "(%d tensors under vision_tower./mm_projector., %d expected): a K2.5 or "
                 "other tower, or a stub; use the K3 checkpoint's vision shards", b->dir,
                 shown(stray, sb, sizeof sb),
                 under, b->seen);
        b->failed = K3_ERR_USAGE;
    }
}

/* The shards that hold vision_tower.* / mm_projector.* (st_open skips vision-only shards:
 * the text engine never reads them), or the single model.safetensors. */
static StIndex *open_shards(const char *dir, char *err, size_t errlen) {
    char ip[4200];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    if (access(ip, F_OK)) return st_open(dir, err, errlen);
    Json *j = json_file(ip, (size_t)64 << 20, NULL, err, errlen);
    if (!j) return NULL;
    const Json *wm = json_get(j, "weight_map");
    if (!wm || wm->type != JSON_OBJECT) {
        snprintf(err, errlen, "%s: no \"weight_map\" object", ip);
        json_free(j);
        return NULL;
    }
    StIndex *st = st_new();
    const char **files = calloc(wm->len + 1, sizeof *files);
    size_t nf = 0;
    int bad = !st || !files;
    if (bad) snprintf(err, errlen, "out of memory");
    for (size_t i = 0; i < wm->len && !bad; i++) {
        const char *k = wm->keys[i];
        const Json *f = wm->items[i];
        if (strncmp(k, "vision_tower.", 13) && strncmp(k, "mm_projector.", 13)) continue;
        char kb[96], fb[96];
        if (f->type != JSON_STRING || !f->str[0] || strchr(f->str, '/') || f->str[0] == '.' ||
            strlen(f->str) != f->len) {
            snprintf(err, errlen, "%s: weight_map['%s'] is not a shard file name", ip,
                     shown(k, kb, sizeof kb));
            bad = 1;
            break;
        }
        size_t w = 0;
        while (w < nf && strcmp(files[w], f->str)) w++;
        if (w < nf) continue;
        files[nf++] = f->str;
        char sp[4400];
        snprintf(sp, sizeof sp, "%s/%s", dir, f->str);
        if (access(sp, R_OK)) {
            snprintf(err, errlen, "%s: shard '%s' (for tensor '%s') is missing: the vision "
                     "tower is in it; download it beside the others", dir,
                     shown(f->str, fb, sizeof fb),
                     shown(k, kb, sizeof kb));
            bad = 1;
        } else if (st_add_file(st, sp, err, errlen)) bad = 1;
    }
    free(files);
    json_free(j);
    if (bad) { st_close(st); return NULL; }
    return st;
}

int k3_vision_read_config(const char *dir, K3VisionConfig *k, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    Json *j = json_file(path, 1 << 22, NULL, err, errlen);
    if (!j) return K3_ERR_USAGE;
    memset(k, 0, sizeof *k);
    Cfg c = { path, err, errlen, 0, 0 };
    if (j->type != JSON_OBJECT) problem(&c, "(top level)", "expected an object");
    else read_config(&c, j, k);
    json_free(j);
    return c.n ? K3_ERR_USAGE : 0;
}

/* What bind_all holds: the matrices in BF16, the norms and the position grid widened. */
size_t k3_vision_config_weight_bytes(const K3VisionConfig *k) {
    const size_t D = (size_t)k->hidden, A = (size_t)k->qkv, F = (size_t)k->inter;
    const size_t bf16 = D * 3 * k->patch * k->patch +
                        (size_t)k->layers * (3 * A * D + D * A + 2 * F * D) +
                        16 * D * D + (size_t)k->out * 4 * D;
    const size_t f32 = (size_t)k->pos_h * k->pos_w * D + (size_t)k->layers * 2 * D + D +
                       (size_t)k->out;
    return 2 * bf16 + 4 * f32;
}

int k3_vision_open(K3Vision **out, const char *dir, int quiet, char *err, size_t errlen) {
    *out = NULL;
    K3Vision *v = calloc(1, sizeof *v);
    if (!v) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    int rc = k3_vision_read_config(dir, &v->c, err, errlen);
    if (rc) { free(v); return rc; }
    StIndex *st = open_shards(dir, err, errlen);
    if (!st) { free(v); return K3_ERR_USAGE; }
    v->blocks = calloc((size_t)v->c.layers, sizeof *v->blocks);
    v->bufs = calloc((size_t)4 * v->c.layers + 4, sizeof *v->bufs);
    Bind b = { v, st, dir, err, errlen, 0, 0 };
    if (!v->blocks || !v->bufs) { snprintf(err, errlen, "out of memory"); b.failed = 1; }
    else bind_all(&b);
    st_close(st);
    if (b.failed) { k3_vision_close(v); return b.failed; }
    if (!quiet)
        fprintf(stderr, "k3: vision tower: %d blocks, width %d, %d heads of %d, MLP %d, "
                "rows of %d; %.1f MB\n", v->c.layers, v->c.hidden, v->c.heads, v->c.head_dim,
                v->c.inter, v->c.out, (double)v->weight_bytes / 1e6);
    *out = v;
    return 0;
}

void k3_vision_close(K3Vision *v) {
    if (!v) return;
    for (int l = 0; v->blocks && l < v->c.layers; l++) {
        free(v->blocks[l].norm0); free(v->blocks[l].norm1);
    }
    for (int i = 0; i < v->n_bufs; i++) free(v->bufs[i]);
    free(v->bufs); free(v->blocks); free(v->pos); free(v->final_norm); free(v->post_norm);
    free(v);
}

const K3VisionConfig *k3_vision_config(const K3Vision *v) { return &v->c; }
size_t k3_vision_weight_bytes(const K3Vision *v) { return v->weight_bytes; }
