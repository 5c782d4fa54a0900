/* bench_st_index.c — times st_open over a synthetic checkpoint with the real K3 layout
 * (K3_MODEL.md §2, §5): 96 shards, 497,220 tensors, real names/shapes/dtypes, experts
 * in string order, plus model.safetensors.index.json. Data sections are sparse
 * (ftruncate), so only the headers (~60 MB) and the index (~60 MB) use disk.
 *
 *   tools/bench_st_index.sh            (builds this and runs it)
 *   bench_st_index [DIR] [RUNS]        (DIR is created and removed unless it existed) */
#include "st.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

typedef struct { char *name; const char *dtype; int ndim; long long shape[3]; } Ent;
typedef struct { Ent *e; size_t n, cap; } List;

static void add(List *l, const char *dtype, int ndim, long long a, long long b, long long c,
                const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
#include <stdarg.h>
static void add(List *l, const char *dtype, int ndim, long long a, long long b, long long c,
                const char *fmt, ...) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64; l->e = realloc(l->e, l->cap * sizeof *l->e);
    }
    char buf[256];
    va_list ap; va_start(ap, fmt); vsnprintf(buf, sizeof buf, fmt, ap); va_end(ap);
    Ent *e = &l->e[l->n++];
    e->name = strdup(buf); e->dtype = dtype; e->ndim = ndim;
    e->shape[0] = a; e->shape[1] = b; e->shape[2] = c;
}

static int ent_cmp(const void *a, const void *b) {
    return strcmp(((const Ent *)a)->name, ((const Ent *)b)->name);
}
static size_t dsize(const char *d) { return !strcmp(d, "F32") ? 4 : !strcmp(d, "U8") ? 1 : 2; }

#define P "language_model.model.layers.%d."
static void layer(List *l, int L) {
    int kda = !((L % 4 == 3) || L == 92);
    add(l, "BF16", 1, 7168, 0, 0, P "input_layernorm.weight", L);
    add(l, "BF16", 1, 7168, 0, 0, P "post_attention_layernorm.weight", L);
    add(l, "BF16", 1, 7168, 0, 0, P "self_attention_res_norm.weight", L);
    add(l, "BF16", 2, 1, 7168, 0, P "self_attention_res_proj.weight", L);
    add(l, "BF16", 1, 7168, 0, 0, P "mlp_res_norm.weight", L);
    add(l, "BF16", 2, 1, 7168, 0, P "mlp_res_proj.weight", L);
    add(l, "BF16", 2, 12288, 7168, 0, P "self_attn.g_proj.weight", L);
    add(l, "BF16", 2, 7168, 12288, 0, P "self_attn.o_proj.weight", L);
    if (kda) {
        const char *qkv[] = { "q", "k", "v" };
        for (int i = 0; i < 3; i++) {
            add(l, "BF16", 2, 12288, 7168, 0, P "self_attn.%s_proj.weight", L, qkv[i]);
            add(l, "F32", 3, 12288, 1, 4, P "self_attn.%s_conv1d.weight", L, qkv[i]);
        }
        add(l, "BF16", 2, 128, 7168, 0, P "self_attn.f_a_proj.weight", L);
        add(l, "BF16", 2, 12288, 128, 0, P "self_attn.f_b_proj.weight", L);
        add(l, "F32", 1, 12288, 0, 0, P "self_attn.dt_bias", L);
        add(l, "F32", 1, 128, 0, 0, P "self_attn.A_log", L);
        add(l, "BF16", 2, 96, 7168, 0, P "self_attn.b_proj.weight", L);
        add(l, "F32", 1, 128, 0, 0, P "self_attn.o_norm.weight", L);
    } else {
        add(l, "BF16", 2, 1536, 7168, 0, P "self_attn.q_a_proj.weight", L);
        add(l, "BF16", 1, 1536, 0, 0, P "self_attn.q_a_layernorm.weight", L);
        add(l, "BF16", 2, 18432, 1536, 0, P "self_attn.q_b_proj.weight", L);
        add(l, "BF16", 2, 576, 7168, 0, P "self_attn.kv_a_proj_with_mqa.weight", L);
        add(l, "BF16", 1, 512, 0, 0, P "self_attn.kv_a_layernorm.weight", L);
        add(l, "BF16", 2, 24576, 512, 0, P "self_attn.kv_b_proj.weight", L);
    }
    if (L == 0) {
        add(l, "BF16", 2, 33792, 7168, 0, P "mlp.gate_proj.weight", L);
        add(l, "BF16", 2, 33792, 7168, 0, P "mlp.up_proj.weight", L);
        add(l, "BF16", 2, 7168, 33792, 0, P "mlp.down_proj.weight", L);
        return;
    }
#define M P "block_sparse_moe."
    add(l, "BF16", 2, 896, 7168, 0, M "gate.weight", L);
    add(l, "F32", 1, 896, 0, 0, M "gate.e_score_correction_bias", L);
    add(l, "BF16", 2, 3584, 7168, 0, M "routed_expert_down_proj.weight", L);
    add(l, "BF16", 1, 3584, 0, 0, M "routed_expert_norm.weight", L);
    add(l, "BF16", 2, 7168, 3584, 0, M "routed_expert_up_proj.weight", L);
    add(l, "BF16", 2, 6144, 7168, 0, M "shared_experts.gate_proj.weight", L);
    add(l, "BF16", 2, 6144, 7168, 0, M "shared_experts.up_proj.weight", L);
    add(l, "BF16", 2, 7168, 6144, 0, M "shared_experts.down_proj.weight", L);
    for (int E = 0; E < 896; E++) {
        add(l, "U8", 2, 3072, 1792, 0, M "experts.%d.w1.weight_packed", L, E);
        add(l, "U8", 2, 3072, 112, 0, M "experts.%d.w1.weight_scale", L, E);
        add(l, "U8", 2, 3584, 1536, 0, M "experts.%d.w2.weight_packed", L, E);
        add(l, "U8", 2, 3584, 96, 0, M "experts.%d.w2.weight_scale", L, E);
        add(l, "U8", 2, 3072, 1792, 0, M "experts.%d.w3.weight_packed", L, E);
        add(l, "U8", 2, 3072, 112, 0, M "experts.%d.w3.weight_scale", L, E);
    }
}

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
static int dcmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y;
}

static char *idx_buf; static size_t idx_len, idx_cap;
static void idx_put(const char *s) {
    size_t n = strlen(s);
    if (idx_len + n + 1 > idx_cap) {
        idx_cap = (idx_len + n + 1) * 2; idx_buf = realloc(idx_buf, idx_cap);
    }
    memcpy(idx_buf + idx_len, s, n + 1); idx_len += n;
}

static int is_vision(const char *name) {
    return strstr(name, "vision_tower.") || strstr(name, "mm_projector.");
}

int main(int argc, char **argv) {
    char dir[512];
    int created = 0, runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1) runs = 5;
    if (argc > 1) snprintf(dir, sizeof dir, "%s", argv[1]);
    else snprintf(dir, sizeof dir, "/tmp/k3_st_bench_%d", (int)getpid());
    struct stat st;
    if (stat(dir, &st)) { if (mkdir(dir, 0755)) { perror(dir); return 1; } created = 1; }

    double tg = now();
    List all = {0};
    size_t n_total = 0, hdr_bytes = 0;
    unsigned long long total_size = 0;
    for (int s = 1; s <= 96; s++) {
        List l = {0};
        if (s <= 93) layer(&l, s - 1);
        else if (s == 94) {
            add(&l, "BF16", 2, 163840, 7168, 0, "language_model.model.embed_tokens.weight");
            add(&l, "BF16", 2, 163840, 7168, 0, "language_model.lm_head.weight");
            add(&l, "BF16", 1, 7168, 0, 0, "language_model.model.norm.weight");
            add(&l, "BF16", 1, 7168, 0, 0, "language_model.model.output_attn_res_norm.weight");
            add(&l, "BF16", 2, 1, 7168, 0, "language_model.model.output_attn_res_proj.weight");
        } else if (s == 95) {
            for (int i = 0; i < 3; i++)
                add(&l, "BF16", 2, 4608, 1152 + i, 0, "mm_projector.proj.%d.weight", i);
        } else {
            for (int i = 0; i < 165; i++)
                add(&l, i % 2 ? "BF16" : "F32", 2, 1152, 1 + i % 7, 0,
                    "vision_tower.encoder.blocks.%d.p%d", i / 6, i % 6);
        }
        qsort(l.e, l.n, sizeof *l.e, ent_cmp);
        size_t cap = l.n * 200 + 64, o = 0;
        char *h = malloc(cap);
        unsigned long long off = 0;
        o += (size_t)sprintf(h + o, "{\"__metadata__\":{\"format\":\"pt\"}");
        for (size_t i = 0; i < l.n; i++) {
            Ent *e = &l.e[i];
            unsigned long long nb = dsize(e->dtype);
            o += (size_t)sprintf(h + o, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", e->name, e->dtype);
            for (int d = 0; d < e->ndim; d++) {
                nb *= (unsigned long long)e->shape[d];
                o += (size_t)sprintf(h + o, "%s%lld", d ? "," : "", e->shape[d]);
            }
            o += (size_t)sprintf(h + o, "],\"data_offsets\":[%llu,%llu]}", off, off + nb);
            off += nb;
        }
        o += (size_t)sprintf(h + o, "}");
        while ((8 + o) % 8) h[o++] = ' ';           /* pad like the reference writer */
        char fn[64], p[600];
        snprintf(fn, sizeof fn, "model-%05d-of-000096.safetensors", s);
        snprintf(p, sizeof p, "%s/%s", dir, fn);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        unsigned char lb[8];
        for (int i = 0; i < 8; i++) lb[i] = (unsigned char)((unsigned long long)o >> (8 * i));
        if (fd < 0 || write(fd, lb, 8) != 8 || write(fd, h, o) != (ssize_t)o ||
            ftruncate(fd, (off_t)(8 + o + off))) { perror(p); return 1; }
        close(fd);
        free(h);
        hdr_bytes += o; total_size += off;
        for (size_t i = 0; i < l.n; i++) {
            if (all.n == all.cap) {
                all.cap = all.cap ? all.cap * 2 : 1 << 19;
                all.e = realloc(all.e, all.cap * sizeof *all.e);
            }
            all.e[all.n] = l.e[i];
            all.e[all.n].dtype = strdup(fn);        /* reuse the field for the shard file */
            all.n++;
        }
        n_total += l.n;
        free(l.e);
    }
    qsort(all.e, all.n, sizeof *all.e, ent_cmp);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n"
             "  \"weight_map\": {\n", total_size);
    idx_put(tmp);
    for (size_t i = 0; i < all.n; i++) {
        snprintf(tmp, sizeof tmp, "    \"%s\": \"%s\"%s\n", all.e[i].name, all.e[i].dtype,
                 i + 1 < all.n ? "," : "");
        idx_put(tmp);
    }
    idx_put("  }\n}\n");
    char ip[600];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(ip, "wb");
    if (!f || fwrite(idx_buf, 1, idx_len, f) != idx_len) { perror(ip); return 1; }
    fclose(f);
    printf("synthetic checkpoint: %s: 96 shards, %zu tensors, headers %.1f MB, index %.1f MB, "
           "total_size %llu (sparse), generated in %.1f s\n",
           dir, n_total, hdr_bytes / 1e6, idx_len / 1e6, total_size, now() - tg);

    double *t = malloc(sizeof(double) * (size_t)runs), *tl = malloc(sizeof(double) * (size_t)runs);
    int rc = 0;
    for (int r = 0; r < runs; r++) {
        char err[1024];
        double t0 = now();
        StIndex *ix = st_open(dir, err, sizeof err);
        t[r] = now() - t0;
        if (!ix) { fprintf(stderr, "st_open failed: %s\n", err); rc = 1; break; }
        /* the two vision-only shards are skipped by st_open (a text-only engine) */
        size_t n_text = 0;
        for (size_t i = 0; i < all.n; i++) n_text += !is_vision(all.e[i].name);
        if (ix->n_tensors != n_text || ix->n_shards != 94) {
            fprintf(stderr, "wrong counts %zu %d\n", ix->n_tensors, ix->n_shards); rc = 1;
        }
        t0 = now();
        size_t found = 0;
        for (size_t i = 0; i < all.n; i++)
            found += is_vision(all.e[i].name) || st_find(ix, all.e[i].name) != NULL;
        tl[r] = now() - t0;
        if (found != all.n) { fprintf(stderr, "lookups failed\n"); rc = 1; }
        printf("run %d: st_open %.3f s, %zu lookups %.3f s\n", r + 1, t[r], found, tl[r]);
        st_close(ix);
    }
    if (!rc) {
        qsort(t, (size_t)runs, sizeof *t, dcmp); qsort(tl, (size_t)runs, sizeof *tl, dcmp);
        printf("RESULT: st_open median %.3f s (min %.3f, max %.3f) over %d runs; "
               "all %zu st_find lookups median %.3f s\n",
               t[runs / 2], t[0], t[runs - 1], runs, all.n, tl[runs / 2]);
    }
    if (created) {
        for (int s = 1; s <= 96; s++) {
            char p[600]; snprintf(p, sizeof p, "%s/model-%05d-of-000096.safetensors", dir, s);
            unlink(p);
        }
        unlink(ip); rmdir(dir);
    }
    return rc;
}
