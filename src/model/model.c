/* model.c — binds the released tensor names (docs/MODEL.md §2) to the layers,
 * checking every shape and dtype. Matrices come from the one tensor table (tensors.h)
 * and stay in read-only mappings of the shards (BF16/F32 used in place); small vectors
 * are widened to f32. */
#include "k3.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* failed: 0, or the exit code — 2 when the checkpoint disagrees with config.json
 * (missing or mis-shaped tensor: k3 declines to guess), 1 for I/O or memory. */
typedef struct { K3Model *m; const char *prefix; char *err; size_t errlen; int failed; } Binder;

static void bind_fail_code(Binder *b, int code, const char *fmt, va_list ap) {
    if (b->failed) return;                 /* keep the first problem: it names the tensor */
    vsnprintf(b->err, b->errlen, fmt, ap);
    b->failed = code;
}
static void bind_fail(Binder *b, const char *fmt, ...) {          /* checkpoint vs config */
    va_list ap; va_start(ap, fmt); bind_fail_code(b, K3_ERR_USAGE, fmt, ap); va_end(ap);
}
static void io_fail(Binder *b, const char *fmt, ...) {            /* I/O or memory */
    va_list ap; va_start(ap, fmt); bind_fail_code(b, K3_ERR_RUNTIME, fmt, ap); va_end(ap);
}

static const StTensor *find(Binder *b, const char *name) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", b->prefix, name);
    const StTensor *t = st_find(b->m->st, full);
    if (!t)
        bind_fail(b, "%s: tensor '%s' is missing from the checkpoint "
                  "(is this a Kimi K3 checkpoint? does config.json match it?)", b->m->dir, full);
    return t;
}

static const void *data_of(Binder *b, const StTensor *t) {
    if (!b->m->maps[t->shard]) {
        StShard *sh = &b->m->st->shards[t->shard];
        int fd = open(sh->path, O_RDONLY);
        void *p = fd < 0 ? MAP_FAILED : mmap(NULL, sh->file_size, PROT_READ, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
        if (p == MAP_FAILED) {
            io_fail(b, "%s: cannot map: %s", sh->path, strerror(errno));
            return NULL;
        }
        b->m->maps[t->shard] = p; b->m->map_len[t->shard] = sh->file_size;
    }
    return (const char *)b->m->maps[t->shard] + t->offset;
}

const void *k3_tensor_data(K3Model *m, const StTensor *t, char *err, size_t errlen) {
    Binder b = { m, "", err, errlen, 0 };
    return data_of(&b, t);
}

uint64_t k3_checkpoint_identity(uint64_t config_hash, const StIndex *st) {
    uint64_t h = config_hash;
    for (int i = 0; i < st->n_shards; i++) {
        const char *b = strrchr(st->shards[i].path, '/');
        b = b ? b + 1 : st->shards[i].path;
        h = k3_hash(h, b, strlen(b) + 1);
        h = k3_hash(h, &st->shards[i].file_size, sizeof(uint64_t));
    }
    return h ? h : 1;
}

uint64_t k3_expert_bytes(const K3Config *c) {
    const uint64_t I = c->moe_intermediate_size, LAT = c->routed_expert_hidden_size;
    return 2 * (I * LAT / 2 + I * LAT / 32) + LAT * I / 2 + LAT * I / 32;
}

void k3_expert_bind(const K3Config *c, const void *const part[6], K3Expert *out) {
    const int I = c->moe_intermediate_size, LAT = c->routed_expert_hidden_size;
    K3Mat *w[3] = { &out->w1, &out->w2, &out->w3 };
    const int rows[3] = { I, LAT, I }, cols[3] = { LAT, I, LAT };
    for (int j = 0; j < 3; j++) {
        w[j]->type = K3_W_MXFP4; w[j]->rows = rows[j]; w[j]->cols = cols[j];
        w[j]->w = part[2 * j]; w[j]->scale = part[2 * j + 1]; w[j]->src = NULL;
    }
}

/* A matrix [rows][cols] in BF16 or F32, used in place. */
static void bind_mat(Binder *b, K3Mat *M, const char *name, int rows, int cols) {
    char s[96];
    const StTensor *t = find(b, name);
    if (!t) return;
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        bind_fail(b, "%s: tensor '%s%s' has shape %s, expected [%d, %d] from config.json",
                  b->m->dir, b->prefix, name, st_shape_str(t, s, sizeof s), rows, cols);
        return;
    }
    if (t->dtype != ST_BF16 && t->dtype != ST_F32) {
        bind_fail(b, "%s: tensor '%s%s' is %s, expected BF16 or F32", b->m->dir, b->prefix, name,
                  st_dtype_name(t->dtype));
        return;
    }
    const void *p = data_of(b, t);
    if (!p) return;
    if ((uintptr_t)p % st_dtype_size(t->dtype)) {     /* misaligned in the file: copy */
        void *q = malloc(t->nbytes);
        if (!q) { io_fail(b, "out of memory"); return; }
        memcpy(q, p, t->nbytes); p = q;
    }
    M->type = t->dtype == ST_F32 ? K3_W_F32 : K3_W_BF16;
    M->rows = rows; M->cols = cols; M->w = p; M->scale = NULL;
}

/* A vector of n values (stored as [n], [1, n] or [n, 1, k] flattened), widened to f32.
 * want = number of values the model uses (<= stored count); the rest must be zero. */
static float *bind_vec(Binder *b, const char *name, int64_t stored, int want) {
    const StTensor *t = find(b, name);
    if (!t) return NULL;
    char s[96];
    if (st_numel(t) != stored || (t->dtype != ST_BF16 && t->dtype != ST_F32)) {
        bind_fail(b, "%s: tensor '%s%s' is %s %s, expected %lld values of BF16 or F32", b->m->dir,
                  b->prefix, name, st_dtype_name(t->dtype), st_shape_str(t, s, sizeof s),
                  (long long)stored);
        return NULL;
    }
    const unsigned char *p = data_of(b, t);
    float *v = malloc(sizeof(float) * (size_t)stored);
    if (!p || !v) { free(v); io_fail(b, "out of memory"); return NULL; }
    for (int64_t i = 0; i < stored; i++) {
        if (t->dtype == ST_F32) memcpy(&v[i], p + 4 * i, 4);
        else { uint16_t h; memcpy(&h, p + 2 * i, 2); v[i] = k3_bf16_to_f32(h); }
    }
    int64_t bad = k3_first_nonfinite(t->dtype, p, t->nbytes);
    if (bad >= 0) {                    /* NaN or Inf: every logit would come out NaN */
        io_fail(b, "%s: tensor '%s%s' holds a non-finite value (%s) at index %lld; %s is "
                "corrupt — re-download it (k3 doctor %s --scan lists every bad tensor)",
                b->m->dir, b->prefix, name, isnan(v[bad]) ? "NaN" : "Inf", (long long)bad,
                b->m->st->shards[t->shard].path, b->m->dir);
        free(v);
        return NULL;
    }
    for (int64_t i = want; i < stored; i++)
        if (v[i] != 0.0f) {
            fprintf(stderr, "k3: warning: %s%s: padding entry %lld is %g, expected 0; "
                    "using the first %d values\n", b->prefix, name, (long long)i, v[i], want);
            break;
        }
    return v;
}

/* Depthwise conv taps, stored [C, 1, K] (or [C, K]); a transposed layout of the same
 * size would silently scramble the taps, so the shape is checked, not just the count. */
static float *bind_conv(Binder *b, const char *name, int C, int K) {
    const StTensor *t = find(b, name);
    if (!t) return NULL;
    int ok = (t->ndim == 3 && t->shape[0] == C && t->shape[1] == 1 && t->shape[2] == K) ||
             (t->ndim == 2 && t->shape[0] == C && t->shape[1] == K);
    if (!ok) {
        char s[96];
        bind_fail(b, "%s: tensor '%s%s' has shape %s, expected [%d, 1, %d] "
                  "(channels, 1, short_conv_kernel_size)",
                  b->m->dir, b->prefix, name, st_shape_str(t, s, sizeof s), C, K);
        return NULL;
    }
    return bind_vec(b, name, (int64_t)C * K, C * K);
}

/* w = norm ⊙ proj: only the product enters the Mix score (§3.1). */
static float *bind_res(Binder *b, const char *norm, const char *proj, int H) {
    float *w = bind_vec(b, norm, H, H), *p = bind_vec(b, proj, H, H);
    if (w && p) for (int i = 0; i < H; i++) w[i] *= p[i];
    free(p);
    return w;
}

static const char *lname(char *buf, size_t n, int L, const char *suffix) {
    snprintf(buf, n, "model.layers.%d.%s", L, suffix);
    return buf;
}

static void bind_layer(Binder *b, int L) {
    const K3Config *c = &b->m->cfg;
    K3Layer *ly = &b->m->layers[L];
    const int H = c->hidden_size;
    char n[256];
#define NM(s) lname(n, sizeof n, L, s)
    ly->is_kda = c->is_kda[L];
    ly->is_moe = c->is_moe[L];
    ly->input_norm = bind_vec(b, NM("input_layernorm.weight"), H, H);
    ly->post_norm = bind_vec(b, NM("post_attention_layernorm.weight"), H, H);
    char n2[256];
    ly->attn_res_w = bind_res(b, NM("self_attention_res_norm.weight"),
                              lname(n2, sizeof n2, L, "self_attention_res_proj.weight"), H);
    ly->mlp_res_w = bind_res(b, NM("mlp_res_norm.weight"),
                             lname(n2, sizeof n2, L, "mlp_res_proj.weight"), H);
    for (int i = 0; i < k3_n_layer_mats && !b->failed; i++) {   /* every matrix, one table */
        const K3MatName *t = &k3_layer_mats[i];
        if (k3_mat_in_layer(t, c, L))
            bind_mat(b, k3_mat_field(ly, t), NM(t->suffix), k3_dim(c, t->rows),
                     k3_dim(c, t->cols));
    }
    if (ly->is_kda) {
        const int NH = c->kda_num_heads, D = c->kda_head_dim, C = NH * D;
        const int K = c->short_conv_kernel_size;
        ly->q_conv = bind_conv(b, NM("self_attn.q_conv1d.weight"), C, K);
        ly->k_conv = bind_conv(b, NM("self_attn.k_conv1d.weight"), C, K);
        ly->v_conv = bind_conv(b, NM("self_attn.v_conv1d.weight"), C, K);
        ly->dt_bias = bind_vec(b, NM("self_attn.dt_bias"), C, C);
        const StTensor *al = b->failed ? NULL : find(b, NM("self_attn.A_log"));
        /* A_log: one value per head, stored padded to head_dim (pitfall 2) */
        if (al)
            ly->A_log = bind_vec(b, NM("self_attn.A_log"),
                                 st_numel(al) >= NH ? st_numel(al) : NH, NH);
        ly->o_norm = bind_vec(b, NM("self_attn.o_norm.weight"), D, D);
    } else {
        ly->q_a_norm = bind_vec(b, NM("self_attn.q_a_layernorm.weight"), c->q_lora_rank,
                                c->q_lora_rank);
        ly->kv_a_norm = bind_vec(b, NM("self_attn.kv_a_layernorm.weight"), c->kv_lora_rank,
                                 c->kv_lora_rank);
    }
    if (ly->is_moe) {
        const int E = c->num_experts, LAT = c->routed_expert_hidden_size;
        const int I = c->moe_intermediate_size;
        ly->router_bias = bind_vec(b, NM("block_sparse_moe.gate.e_score_correction_bias"), E, E);
        ly->lat_norm = bind_vec(b, NM("block_sparse_moe.routed_expert_norm.weight"), LAT, LAT);
        /* routed experts: six U8 tensors each, shapes checked here, bytes read on use */
        static const char *part[6] = { "w1.weight_packed", "w1.weight_scale", "w2.weight_packed",
                                        "w2.weight_scale", "w3.weight_packed", "w3.weight_scale" };
        const int64_t shp[6][2] = { { I, LAT / 2 }, { I, LAT / 32 }, { LAT, I / 2 },
                                    { LAT, I / 32 }, { I, LAT / 2 }, { I, LAT / 32 } };
        ly->experts = calloc((size_t)E * 6, sizeof(StTensor *));
        if (!ly->experts) { io_fail(b, "out of memory"); return; }
        for (int e = 0; e < E && !b->failed; e++)
            for (int j = 0; j < 6 && !b->failed; j++) {
                char en[256], s[96];
                snprintf(en, sizeof en, "model.layers.%d.block_sparse_moe.experts.%d.%s", L, e,
                         part[j]);
                const StTensor *t = find(b, en);
                if (!t) break;
                if (t->dtype != ST_U8 || t->ndim != 2 || t->shape[0] != shp[j][0] ||
                    t->shape[1] != shp[j][1])
                    bind_fail(b, "%s: tensor '%s%s' is %s %s, expected U8 [%lld, %lld] "
                              "(MXFP4, docs/MODEL.md §4)", b->m->dir, b->prefix, en,
                              st_dtype_name(t->dtype), st_shape_str(t, s, sizeof s),
                              (long long)shp[j][0], (long long)shp[j][1]);
                ly->experts[(size_t)e * 6 + j] = t;
            }
    }
#undef NM
}

static int check_dims(const K3Config *c, char *err, size_t errlen) {
    if (c->routed_expert_hidden_size % 32 || c->moe_intermediate_size % 32) {
        snprintf(err, errlen, "%s: routed_expert_hidden_size (%d) and moe_intermediate_size (%d) "
                 "must be multiples of 32 (MXFP4 groups)",
                 c->source, c->routed_expert_hidden_size, c->moe_intermediate_size);
        return K3_ERR_USAGE;
    }
    return 0;
}

/* Open models, for k3_mapped_shard: written by open/close, only read by the lookup. */
#define K3_MAX_OPEN 16
static K3Model *open_models[K3_MAX_OPEN];

static void watch(K3Model *m, K3Model *was) {
    for (int i = 0; i < K3_MAX_OPEN; i++) {
        K3Model *expect = was;
        if (__atomic_compare_exchange_n(&open_models[i], &expect, m, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return;
    }
}

const char *k3_mapped_shard(const void *addr) {
    const char *a = addr;
    for (int i = 0; i < K3_MAX_OPEN; i++) {
        const K3Model *m = __atomic_load_n(&open_models[i], __ATOMIC_SEQ_CST);
        if (!m || !m->maps || !m->map_len || !m->st) continue;
        for (int k = 0; k < m->st->n_shards; k++) {
            const char *base = m->maps[k];
            if (base && a >= base && a < base + m->map_len[k]) return m->st->shards[k].path;
        }
    }
    return NULL;
}

int k3_model_open(K3Model *m, const char *dir, const char *config_path, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    char path[4200];
    if (!config_path) { snprintf(path, sizeof path, "%s/config.json", dir); config_path = path; }
    int rc = k3_config_load(config_path, &m->cfg, err, errlen);
    if (rc) return rc;
    if ((rc = check_dims(&m->cfg, err, errlen))) return rc;
    m->st = st_open(dir, err, errlen);
    if (!m->st) return K3_ERR_RUNTIME;
    m->identity = k3_checkpoint_identity(m->cfg.hash, m->st);
    m->maps = calloc(m->st->n_shards, sizeof(void *));
    m->map_len = calloc(m->st->n_shards, sizeof(uint64_t));
    m->layers = calloc(m->cfg.num_hidden_layers, sizeof(K3Layer));
    if (!m->maps || !m->map_len || !m->layers) {
        snprintf(err, errlen, "out of memory");
        return K3_ERR_RUNTIME;
    }
    watch(m, NULL);
    Binder b = { m, "language_model.", err, errlen, 0 };
    if (!st_find(m->st, "language_model.model.embed_tokens.weight") &&
        st_find(m->st, "model.embed_tokens.weight"))
        b.prefix = "";                         /* a text-only export without the wrapper prefix */
    const int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    bind_mat(&b, &m->embed, "model.embed_tokens.weight", V, H);
    bind_mat(&b, &m->lm_head, "lm_head.weight", V, H);
    m->final_norm = bind_vec(&b, "model.norm.weight", H, H);
    m->out_res_w = bind_res(&b, "model.output_attn_res_norm.weight",
                            "model.output_attn_res_proj.weight", H);
    for (int L = 0; L < m->cfg.num_hidden_layers && !b.failed; L++) bind_layer(&b, L);
    return b.failed;
}

void k3_model_close(K3Model *m) {
    watch(NULL, m);
    if (m->layers)
        for (int L = 0; L < m->cfg.num_hidden_layers; L++) {
            K3Layer *ly = &m->layers[L];
            float *v[] = { ly->input_norm, ly->post_norm, ly->attn_res_w, ly->mlp_res_w,
                           ly->q_conv, ly->k_conv, ly->v_conv, ly->dt_bias, ly->A_log, ly->o_norm,
                           ly->q_a_norm, ly->kv_a_norm, ly->router_bias, ly->lat_norm };
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) free(v[i]);
            free(ly->experts);
        }
    free(m->layers); free(m->final_norm); free(m->out_res_w);
    if (m->maps)
        for (int i = 0; i < m->st->n_shards; i++)
            if (m->maps[i]) munmap(m->maps[i], m->map_len[i]);
    free(m->maps); free(m->map_len);
    if (m->st) st_close(m->st);
    memset(m, 0, sizeof *m);
}

void k3_model_embed_advise(const K3Model *m, int advice) {
    const K3Mat *E = &m->embed;
    const uintptr_t a = (uintptr_t)E->w, pg = 4096;
    const uintptr_t n = (uintptr_t)E->rows * E->cols * (E->type == K3_W_F32 ? 4 : 2);
    const uintptr_t lo = (a + pg - 1) & ~(pg - 1), hi = (a + n) & ~(pg - 1);
    if (E->w && hi > lo) (void)madvise((void *)lo, hi - lo, advice);
}
