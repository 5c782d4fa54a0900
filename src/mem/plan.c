/* plan.c — the memory plan, budgets and presets, and the glue between the forward
 * pass and where the bytes live (trunk.c, expert_cache.c).
 *
 * Before anything big is allocated, the plan sums the pinned trunk, the trunk ring,
 * the expert cache, lm_head (resident, or a 64 MB row-block buffer when streamed), embedding rows
 * (a row lookup: only touched rows become resident), the f32 small vectors, the KDA
 * recurrent state, the MLA cache for --ctx positions, the forward buffers for the
 * largest chunk and what the process already holds, and compares the total with
 * MemAvailable (and a cgroup memory limit). It refuses to start, with every number
 * and the flag that would fix it, when the total does not fit. */
#include "mem.h"
#include "util.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

K3Mem *k3_mem(const K3Model *m) { return (K3Mem *)m->experts_priv; }
int k3_mem_active(const K3Model *m) { return m->experts_priv != NULL; }
const K3MemStats *k3_mem_stats(const K3Model *m) { K3Mem *x = k3_mem(m); return x ? &x->st : NULL; }

uint64_t k3_fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h;
}

uint64_t k3_model_fingerprint(const char *dir, const StIndex *st) {
    uint64_t h = 1469598103934665603ull;
    char path[4200];
    size_t len = 0;
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *cfg = k3_read_file(path, &len);
    if (cfg) h = k3_fnv1a(h, cfg, len);
    free(cfg);
    for (int i = 0; i < st->n_shards; i++) {
        const char *b = strrchr(st->shards[i].path, '/');
        b = b ? b + 1 : st->shards[i].path;
        h = k3_fnv1a(h, b, strlen(b) + 1);
        h = k3_fnv1a(h, &st->shards[i].file_size, sizeof(uint64_t));
    }
    return h ? h : 1;
}

/* ---- hooks used by forward.c, moe.c, experts.c ---- */

const K3Layer *k3_layer_acquire(K3Model *m, int L) {
    K3Mem *x = k3_mem(m);
    if (!x || !x->trunk) return &m->layers[L];
    return k3_trunk_acquire(m, x->trunk, L, &x->st);
}

void k3_layer_release(K3Model *m, int L) {
    K3Mem *x = k3_mem(m);
    if (x && x->trunk) k3_trunk_release(x->trunk, L);
}

void k3_lm_head(K3Model *m, float *Y, const float *X, int T) {
    K3Mem *x = k3_mem(m);
    if (x && x->head) k3_head_matmul(m, x->head, Y, X, T, &x->st);
    else k3_matmul(Y, &m->lm_head, X, T);
}

void k3_experts_prefetch(K3Model *m, int L, const int *ids, int n) {
    K3Mem *x = k3_mem(m);
    if (x && x->cache) k3_ecache_prefetch(m, x->cache, L, ids, n);
}

/* ---- available memory ---- */

static uint64_t rss_now(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long sz = 0, res = 0;
    if (f) { if (fscanf(f, "%llu %llu", &sz, &res) != 2) res = 0; fclose(f); }
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t read_u64_file(const char *path) {
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    char buf[64];
    if (!f) return 0;
    if (fgets(buf, sizeof buf, f)) v = strncmp(buf, "max", 3) ? strtoull(buf, NULL, 10) : 0;
    fclose(f);
    return v;
}

/* cgroup memory limit minus what the group's other processes hold (0 = no limit). */
static uint64_t cgroup_avail(uint64_t self_rss, char *desc, size_t dn) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024], path[1400];
    uint64_t lim = 0, used = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *p = strstr(line, ":memory:");
        if (p) {
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", p + 8);
            lim = read_u64_file(path);
            snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.stat", p + 8);
            FILE *s = fopen(path, "r");
            char k[64]; unsigned long long v;
            while (s && fscanf(s, "%63s %llu", k, &v) == 2) if (!strcmp(k, "total_rss")) used = v;
            if (s) fclose(s);
            snprintf(desc, dn, "cgroup v1 %.200s", p + 8);
        } else if (!strncmp(line, "0::", 3) && !lim) {
            snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
            lim = read_u64_file(path);
            snprintf(desc, dn, "cgroup v2 %.200s", line + 3);
        }
    }
    fclose(f);
    if (!lim || lim > (1ull << 60)) return 0;
    uint64_t others = used > self_rss ? used - self_rss : 0;
    return lim > others ? lim - others : 1;
}

/* ---- the plan ---- */

#define HEAD_BUF 64e6                        /* lm_head row-block buffer when it is streamed */

typedef struct {
    double trunk_budget, cache_budget;       /* bytes, after raising to the minimum */
    int n_pinned, ring, nslots, streamed, head_stream;
    uint64_t pinned, ring_bytes, cache, lm_head, embed, vectors, state, mla, buffers, process, total;
    uint64_t trunk_total, trunk_min, cache_min, all_experts, head_full;
    int raised_trunk, raised_cache;
} Plan;

/* Trunk bytes the budget governs: pinned layers, the ring, and lm_head when resident. */
static uint64_t trunk_used(const Plan *p, int have_trunk) {
    return p->pinned + p->ring_bytes + (have_trunk && !p->head_stream ? p->lm_head : 0);
}

/* lb[0..NL): trunk bytes per layer; process: bytes the process already holds. */
static void make_plan(const K3Config *c, int head_f32, const K3MemOpts *o, const uint64_t *lb, int have_trunk,
                      double tgb, double cgb, uint64_t process, Plan *p) {
    const int NL = c->num_hidden_layers, H = c->hidden_size, V = c->vocab_size;
    memset(p, 0, sizeof *p);
    for (int L = 0; L < NL; L++) p->trunk_total += lb[L];
    p->head_full = (uint64_t)V * H * (head_f32 ? 4 : 2);
    p->lm_head = p->head_full;
    p->trunk_min = have_trunk ? k3_ring_layout(lb, NL, NULL, NULL) : p->trunk_total;
    p->trunk_budget = tgb * K3_GB;
    if (have_trunk && p->trunk_budget < p->trunk_min) { p->trunk_budget = (double)p->trunk_min; p->raised_trunk = 1; }
    if (!have_trunk) { p->n_pinned = NL; p->pinned = p->trunk_total; }
    else {
        /* lm_head is read every token like a layer: resident when the budget has room
         * for it beyond the working ring, else streamed in row blocks (same bits) */
        p->head_stream = p->trunk_budget < (double)(p->trunk_min + p->head_full);
        const double room = p->trunk_budget - (p->head_stream ? 0 : (double)p->head_full);
        uint64_t pin = 0;
        for (int N = 0; N <= NL; N++) {               /* the deepest pinned prefix that fits with its ring */
            if (N) pin += lb[N - 1];
            uint64_t ring = k3_ring_layout(lb + N, NL - N, NULL, NULL);
            if ((double)(pin + ring) <= room) { p->n_pinned = N; p->pinned = pin; p->ring_bytes = ring; }
        }
        p->streamed = NL - p->n_pinned;
        p->ring = p->streamed ? (p->streamed >= 2 ? 2 : 1) : 0;
    }
    int nmoe = 0;
    for (int L = 0; L < NL; L++) nmoe += c->is_moe[L];
    const uint64_t I = c->moe_intermediate_size, LAT = c->routed_expert_hidden_size;
    uint64_t slot = ((2 * (I * LAT / 2 + I * LAT / 32) + LAT * I / 2 + LAT * I / 32 + 4095) & ~(uint64_t)4095) + 4096;
    int all = nmoe * c->num_experts, mins = all < 5 ? all : 5;
    p->all_experts = (uint64_t)all * slot; p->cache_min = (uint64_t)mins * slot;
    p->cache_budget = cgb * K3_GB;
    if (p->cache_budget < (double)p->cache_min) { p->cache_budget = (double)p->cache_min; p->raised_cache = 1; }
    double ns = p->cache_budget / (double)slot;
    p->nslots = ns >= all ? all : (int)ns;            /* never more slots than routed experts: plan == use */
    if (p->nslots < mins) p->nslots = mins;
    p->cache = (uint64_t)p->nslots * slot;
    const uint64_t T = o->chunk > 0 ? o->chunk : 1;
    if (p->head_stream) {                             /* block buffer (+ [T][rows] output block for all-row logits) */
        uint64_t rb = (uint64_t)H * (head_f32 ? 4 : 2), rows = (uint64_t)(HEAD_BUF / rb);
        if (rows < 1) rows = 1;
        if (rows > (uint64_t)V) rows = V;
        p->lm_head = ((rows * rb + 4095) & ~(uint64_t)4095) + 8192 + (o->logits_rows > 1 ? rows * T * 4 : 0);
    }
    uint64_t rows = (uint64_t)(o->ctx > 0 ? o->ctx : 1) * (((uint64_t)H * 2 + 4095) / 4096 + 1) * 4096;
    p->embed = rows < (uint64_t)V * H * 2 ? rows : (uint64_t)V * H * 2;
    const uint64_t C = (uint64_t)c->kda_num_heads * c->kda_head_dim;
    uint64_t cap = 64;
    while (cap < (uint64_t)(o->ctx > 0 ? o->ctx : 1)) cap *= 2;
    for (int L = 0; L < NL; L++) {
        p->vectors += (uint64_t)H * 4 * 4;
        if (c->is_kda[L]) {
            p->vectors += (3 * C * c->short_conv_kernel_size + C + c->kda_head_dim * 2) * 4;
            p->state += ((uint64_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim + 3 * C * (c->short_conv_kernel_size - 1)) * 4;
        } else {
            p->vectors += (uint64_t)(c->q_lora_rank + c->kv_lora_rank) * 4;
            p->mla += cap * (c->kv_lora_rank + c->qk_rope_head_dim) * 4;
        }
        if (c->is_moe[L]) p->vectors += (uint64_t)(c->num_experts + c->routed_expert_hidden_size) * 4;
    }
    const uint64_t E = c->num_experts, NH = c->num_attention_heads;
    uint64_t fwd = (4 + NL / c->attn_res_block_size + 2) * T * H;
    uint64_t kda = T * (6 * C + c->kda_head_dim + c->kda_num_heads);
    uint64_t mla = T * (c->q_lora_rank + NH * (c->qk_nope_head_dim + c->qk_rope_head_dim) + c->kv_lora_rank + c->qk_rope_head_dim + 2 * NH * c->v_head_dim) + cap;
    uint64_t moe = T * (2 * E + 4 * LAT + 3 * I + H) + T * 2 * I * c->num_shared_experts;
    uint64_t mlp = T * 2 * c->intermediate_size;
    uint64_t sub = kda > mla ? kda : mla;
    if (moe > sub) sub = moe;
    if (mlp > sub) sub = mlp;
    p->buffers = (fwd + sub + (uint64_t)(o->logits_rows > 0 ? o->logits_rows : 1) * V) * 4;
    p->process = process;
    p->total = p->pinned + p->ring_bytes + p->cache + p->lm_head + p->embed + p->vectors + p->state + p->mla + p->buffers + p->process;
}

static void print_plan(const Plan *p, int NL, double slot_mb, int have_trunk, uint64_t avail, const char *adesc, int ctx, FILE *f) {
    fprintf(f, "k3: memory plan (GB = 1e9 bytes)\n");
    if (have_trunk)
        fprintf(f, "  trunk pinned       %8.3f  %d of %d layers (trunk budget %.3f GB covers pinned + ring%s)\n", p->pinned / K3_GB,
                p->n_pinned, NL, p->trunk_budget / K3_GB, p->head_stream ? "" : " + lm_head");
    else
        fprintf(f, "  trunk resident     %8.3f  all %d layers, used in place from the shards (stream it: k3 pack + --trunk)\n", p->pinned / K3_GB, NL);
    if (p->streamed) fprintf(f, "  trunk ring         %8.3f  %d slots, %d layers streamed\n", p->ring_bytes / K3_GB, p->ring, p->streamed);
    fprintf(f, "  expert cache       %8.3f  %d slots of %.1f MB (%.1f%% of all routed experts)\n", p->cache / K3_GB, p->nslots,
            slot_mb, p->all_experts ? 100.0 * p->cache / p->all_experts : 0.0);
    if (p->head_stream) fprintf(f, "  lm_head buffer     %8.3f  lm_head (%.3f GB) streamed in row blocks every forward\n", p->lm_head / K3_GB, p->head_full / K3_GB);
    else fprintf(f, "  lm_head            %8.3f  resident\n", p->lm_head / K3_GB);
    fprintf(f, "  embedding rows     %8.3f  row lookup, touched rows only\n", p->embed / K3_GB);
    fprintf(f, "  small vectors f32  %8.3f\n", p->vectors / K3_GB);
    fprintf(f, "  recurrent state    %8.3f  KDA S + conv windows\n", p->state / K3_GB);
    fprintf(f, "  MLA cache          %8.3f  --ctx %d\n", p->mla / K3_GB, ctx);
    fprintf(f, "  buffers            %8.3f\n", p->buffers / K3_GB);
    fprintf(f, "  process so far     %8.3f  binary, index, tokenizer\n", p->process / K3_GB);
    if (adesc) fprintf(f, "  total              %8.3f  available %.3f (%s)\n", p->total / K3_GB, avail / K3_GB, adesc);
    else fprintf(f, "  total              %8.3f\n", p->total / K3_GB);
    if (p->raised_trunk) fprintf(f, "k3: note: --trunk-gb raised to the working minimum %.3f GB (a ring of 2 layers)\n", p->trunk_min / K3_GB);
    if (p->raised_cache) fprintf(f, "k3: note: --cache-gb raised to the working minimum %.3f GB (5 expert slots)\n", p->cache_min / K3_GB);
}

/* ---- presets ---- */

static const struct { const char *name, *machine; double trunk, cache; } PRESETS[] = {
    { "laptop", "8 GB machine", 3.7, 0.6 },
    { "desktop", "32 GB machine", 16, 8 },
    { "workstation", "128 GB machine", 58, 45 },
    { "server", "512 GB machine", 120, 320 },
    { "max", "everything resident (1.6 TB)", 1e6, 1e6 },
};
#define NPRESETS (int)(sizeof PRESETS / sizeof PRESETS[0])

int k3_preset_apply(const char *name, double *trunk_gb, double *cache_gb) {
    if (!strcmp(name, "auto")) { *trunk_gb = *cache_gb = K3_BUDGET_AUTO; return 0; }
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(name, PRESETS[i].name)) { *trunk_gb = PRESETS[i].trunk; *cache_gb = PRESETS[i].cache; return 0; }
    return -1;
}

/* The real K3 (K3_MODEL.md §1.2, §1.3, §2, §5): config values and per-layer trunk bytes
 * (layer 0 KDA + dense MLP 2,341,213,184; KDA MoE 1,267,744,256; MLA MoE 844,335,616). */
#define REAL_PROCESS 0.5e9                   /* estimate: tensor index of 497k entries, tokenizer, binary */
static void real_k3(K3Config *c, uint64_t *lb) {
    memset(c, 0, sizeof *c);
    c->hidden_size = 7168; c->num_hidden_layers = 93; c->vocab_size = 163840; c->intermediate_size = 33792;
    c->num_experts = 896; c->num_experts_per_token = 16; c->num_shared_experts = 2;
    c->moe_intermediate_size = 3072; c->routed_expert_hidden_size = 3584; c->attn_res_block_size = 12;
    c->num_attention_heads = 96; c->q_lora_rank = 1536; c->kv_lora_rank = 512; c->qk_nope_head_dim = 128;
    c->qk_rope_head_dim = 64; c->v_head_dim = 128; c->kda_num_heads = 96; c->kda_head_dim = 128; c->short_conv_kernel_size = 4;
    for (int L = 0; L < 93; L++) {
        c->is_kda[L] = (L + 1) % 4 != 0 && L < 91;
        c->is_moe[L] = L >= 1;
        lb[L] = L == 0 ? 2341213184ull : c->is_kda[L] ? 1267744256ull : 844335616ull;
    }
}

void k3_presets_print(FILE *f) {
    K3Config c;
    uint64_t lb[93];
    real_k3(&c, lb);
    K3MemOpts o = { 0 };
    o.ctx = 4096; o.chunk = 64; o.logits_rows = 1;
    Plan p;
    fprintf(f, "preset        --trunk-gb  --cache-gb  plan on the real K3 (--trunk, ctx 4096)  for\n");
    make_plan(&c, 0, &o, lb, 1, 0, 0, (uint64_t)REAL_PROCESS, &p);
    fprintf(f, "%-13s %10s  %10s  %8.2f GB (ring %.2f, %d expert slots, lm_head streamed)  the working minimum\n",
            "minimum", "0", "0", p.total / K3_GB, p.ring_bytes / K3_GB, p.nslots);
    for (int i = 0; i < NPRESETS; i++) {
        make_plan(&c, 0, &o, lb, 1, PRESETS[i].trunk, PRESETS[i].cache, (uint64_t)REAL_PROCESS, &p);
        char tb[32], cb[32];
        snprintf(tb, sizeof tb, PRESETS[i].trunk >= 1e6 ? "all" : "%g", PRESETS[i].trunk);
        snprintf(cb, sizeof cb, PRESETS[i].cache >= 1e6 ? "all" : "%g", PRESETS[i].cache);
        fprintf(f, "%-13s %10s  %10s  %8.2f GB (%d layers pinned, %d expert slots, lm_head %s)  %s\n", PRESETS[i].name, tb, cb,
                p.total / K3_GB, p.n_pinned, p.nslots, p.head_stream ? "streamed" : "resident", PRESETS[i].machine);
    }
    fprintf(f, "auto          the largest preset whose plan fits 90%% of MemAvailable (the default)\n"
               "Budgets are GB (1e9 bytes). The trunk budget covers pinned layers, a 2-slot ring and\n"
               "lm_head when it fits (else lm_head is streamed in row blocks); streaming needs --trunk DIR\n"
               "from `k3 pack`. Budgets below the working minimum (the ring, 5 expert slots) are raised\n"
               "to it. A later flag wins. Real-model figures are computed from K3_MODEL.md sizes (the\n"
               "process/index share is an estimate of %.1f GB), not measured.\n", REAL_PROCESS / K3_GB);
}

/* ---- memory flags (main.c and chat.c) ---- */

void k3_mem_flags_init(K3MemFlags *f) {
    memset(f, 0, sizeof *f);
    f->trunk_gb = f->cache_gb = K3_BUDGET_UNSET;
}

int k3_mem_parse_flag(int argc, char **argv, int *i, K3MemFlags *f, int with_ctx, char *err, size_t errlen) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int is = !strcmp(a, "--trunk") || !strcmp(a, "--trunk-gb") || !strcmp(a, "--cache-gb") || !strcmp(a, "--preset") ||
             !strcmp(a, "--dump-cache-trace") || (with_ctx && !strcmp(a, "--ctx"));
    if (!strcmp(a, "--verbose")) { f->verbose = 1; return 1; }
    if (!is) return 0;
    if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; }
    (*i)++;
    if (!strcmp(a, "--trunk")) f->trunk_dir = v;
    else if (!strcmp(a, "--dump-cache-trace")) f->trace_dir = v;
    else if (!strcmp(a, "--preset")) {
        if (k3_preset_apply(v, &f->trunk_gb, &f->cache_gb)) {
            snprintf(err, errlen, "--preset: unknown preset '%.100s' (laptop, desktop, workstation, server, max, auto; see --list-presets)", v);
            return -1;
        }
    } else if (!strcmp(a, "--ctx")) {
        char *end; long x = strtol(v, &end, 10);
        if (!*v || *end || x < 1 || x > 1 << 30) { snprintf(err, errlen, "--ctx: '%.100s' is not an integer >= 1", v); return -1; }
        f->ctx = (int)x;
    } else {
        char *end; double g = strtod(v, &end);
        if (!*v || *end || !(g >= 0) || g > 1e9) { snprintf(err, errlen, "%s: '%.100s' is not a number of GB >= 0", a, v); return -1; }
        if (a[2] == 't') f->trunk_gb = g; else f->cache_gb = g;
    }
    return 1;
}

void k3_trunk_sizes_from_shards(const K3Model *m, uint64_t *lb, uint64_t *global) {
    const int NL = m->cfg.num_hidden_layers;
    memset(lb, 0, sizeof(uint64_t) * NL);
    *global = 0;
    for (size_t i = 0; i < m->st->n_tensors; i++) {
        const char *n = m->st->tensors[i].name;
        if (strstr(n, ".experts.") || strstr(n, "vision_tower.") || strstr(n, "mm_projector.")) continue;
        const char *p = strstr(n, "model.layers.");
        int L = p ? atoi(p + 13) : -1;
        if (L >= 0 && L < NL) lb[L] += m->st->tensors[i].nbytes;
        else *global += m->st->tensors[i].nbytes;
    }
}

int k3_mem_setup(K3Model *m, const K3MemOpts *o, char *err, size_t errlen) {
    const int NL = m->cfg.num_hidden_layers;
    K3Mem *x = calloc(1, sizeof *x);
    uint64_t *lb = calloc(NL, sizeof(uint64_t)), global = 0;
    if (!x || !lb) { free(x); free(lb); snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    m->experts_priv = x;
    if (o->trunk_dir) {
        x->trunk = k3_trunk_open(m, o->trunk_dir, err, errlen);
        if (!x->trunk) { free(lb); return K3_ERR_RUNTIME; }
        for (int L = 0; L < NL; L++) lb[L] = k3_trunk_layer_bytes(x->trunk, L);
    } else k3_trunk_sizes_from_shards(m, lb, &global);
    uint64_t self = rss_now();
    const int head_f32 = m->lm_head.type == K3_W_F32;
    char adesc[400] = "MemAvailable", cdesc[300] = "";
    uint64_t avail = k3_mem_available(), cg = cgroup_avail(self, cdesc, sizeof cdesc);
    if (cg) {
        snprintf(adesc, sizeof adesc, "MemAvailable %.3f; %s limit less its other processes %.3f", avail / K3_GB, cdesc, cg / K3_GB);
        if (!avail || cg < avail) avail = cg;
    }
    const char *fake = getenv("K3_MEM_AVAILABLE");
    if (fake && *fake) { avail = strtoull(fake, NULL, 10); snprintf(adesc, sizeof adesc, "K3_MEM_AVAILABLE"); }
    double tgb = o->trunk_gb, cgb = o->cache_gb;
    Plan p;
    if (tgb == K3_BUDGET_AUTO || cgb == K3_BUDGET_AUTO || tgb == K3_BUDGET_UNSET || cgb == K3_BUDGET_UNSET) {
        int pick = 0;                          /* largest preset that fits 90% of what is available */
        for (int i = NPRESETS - 1; i >= 0; i--) {
            double t = tgb >= 0 ? tgb : PRESETS[i].trunk, c = cgb >= 0 ? cgb : PRESETS[i].cache;
            make_plan(&m->cfg, head_f32, o, lb, o->trunk_dir != NULL, t, c, self, &p);
            if (!avail || p.total <= 0.9 * avail) { pick = i; break; }
        }
        if (tgb < 0) tgb = PRESETS[pick].trunk;
        if (cgb < 0) cgb = PRESETS[pick].cache;
        if (!o->quiet) fprintf(stderr, "k3: auto budgets: preset %s (--trunk-gb %g --cache-gb %g)\n", PRESETS[pick].name, tgb, cgb);
    }
    make_plan(&m->cfg, head_f32, o, lb, o->trunk_dir != NULL, tgb, cgb, self, &p);
    if (!o->quiet) print_plan(&p, NL, k3_ecache_slot_bytes(m) / 1e6, o->trunk_dir != NULL, avail, adesc, o->ctx, stderr);
    if (avail && p.total > avail) {
        const uint64_t used = trunk_used(&p, o->trunk_dir != NULL);
        uint64_t excess = p.total - avail, cred = p.cache - p.cache_min, tred = 0;
        if (o->trunk_dir) tred = used - p.trunk_min;
        char fix[600];
        if (cred + tred >= excess) {
            uint64_t dc = excess < cred ? excess : cred, dt = excess - dc;
            uint64_t nc = p.cache - dc, nt = used - dt;
            if (dc && nc > p.cache_min + (20u << 20)) nc -= 20u << 20;      /* round down with a margin */
            snprintf(fix, sizeof fix, "--cache-gb %.3f", (double)(nc / 1000000) / 1000);
            if (dt) snprintf(fix + strlen(fix), sizeof fix - strlen(fix), " --trunk-gb %.3f", (double)(nt / 1000000) / 1000);
        } else if (!o->trunk_dir)
            snprintf(fix, sizeof fix, "stream the trunk: k3 pack %.300s TRUNK_DIR, then add --trunk TRUNK_DIR --preset laptop", m->dir);
        else {
            Plan mn;
            make_plan(&m->cfg, head_f32, o, lb, 1, 0, 0, self, &mn);
            snprintf(fix, sizeof fix, "a smaller --ctx; even the working minimum needs %.3f GB", mn.total / K3_GB);
        }
        snprintf(err, errlen, "the memory plan needs %.3f GB but %.3f GB is available (%s): trunk %.3f + ring %.3f + expert cache %.3f + lm_head %.3f "
                 "+ embedding rows %.3f + vectors %.3f + state %.3f + MLA cache %.3f + buffers %.3f + process %.3f. Fix: %s",
                 p.total / K3_GB, avail / K3_GB, adesc, p.pinned / K3_GB, p.ring_bytes / K3_GB, p.cache / K3_GB, p.lm_head / K3_GB,
                 p.embed / K3_GB, p.vectors / K3_GB, p.state / K3_GB, p.mla / K3_GB, p.buffers / K3_GB, p.process / K3_GB, fix);
        free(lb);
        return K3_ERR_RUNTIME;
    }
    free(lb);
    int rc;
    if (x->trunk && (rc = k3_trunk_start(m, x->trunk, p.n_pinned, &x->st, err, errlen))) return rc;
    if (p.head_stream && !(x->head = k3_head_open(m, (uint64_t)HEAD_BUF, err, errlen))) return K3_ERR_RUNTIME;
    int any_moe = 0;
    for (int L = 0; L < NL; L++) any_moe |= m->cfg.is_moe[L];
    if (any_moe) {
        x->cache = k3_ecache_new(m, p.nslots, 4, x, err, errlen);
        if (!x->cache) return K3_ERR_RUNTIME;
    }
    if (o->trace_dir) {
        char path[4200];
        snprintf(path, sizeof path, "%s/cache_trace.txt", o->trace_dir);
        x->trace = fopen(path, "w");
        if (!x->trace) { snprintf(err, errlen, "--dump-cache-trace %s: cannot create %s", o->trace_dir, path); return K3_ERR_USAGE; }
        fprintf(x->trace, "# k3 cache trace: layers %d experts %d top_k %d slots %d slot_bytes %llu policy lfu-aged\n# step layer expert hit\n",
                NL, m->cfg.num_experts, m->cfg.num_experts_per_token, p.nslots, (unsigned long long)k3_ecache_slot_bytes(m));
    }
    if (!o->quiet) {
        char d[700];
        if (x->trunk) { k3_trunk_describe(x->trunk, d, sizeof d); fprintf(stderr, "k3: trunk %s\n", d); }
        if (x->cache) { k3_ecache_describe(x->cache, d, sizeof d); fprintf(stderr, "k3: expert cache %s\n", d); }
    }
    return 0;
}

void k3_mem_close(K3Model *m) {
    K3Mem *x = k3_mem(m);
    if (!x) return;
    k3_trunk_close(x->trunk);
    k3_head_close(x->head);
    k3_ecache_free(x->cache);
    if (x->trace) fclose(x->trace);
    free(x->steps);
    free(x);
    m->experts_priv = NULL;
}

/* ---- reports ---- */

void k3_mem_step(K3Model *m, int step, int ntok, double seconds, int verbose) {
    K3Mem *x = k3_mem(m);
    if (!x) return;
    const K3MemStats *s = &x->st, *p = &x->prev;
    uint64_t tb = s->trunk_bytes - p->trunk_bytes, eb = s->expert_bytes - p->expert_bytes;
    if (x->n_steps == x->cap_steps) {          /* kept for --out; a lost record only shortens the list */
        int cap = x->cap_steps ? 2 * x->cap_steps : 64;
        K3MemStep *v = realloc(x->steps, sizeof *v * (size_t)cap);
        if (v) { x->steps = v; x->cap_steps = cap; }
    }
    if (x->n_steps < x->cap_steps)
        x->steps[x->n_steps++] = (K3MemStep){ step, ntok, seconds, s->io_wait_s - p->io_wait_s, tb, eb,
                                              s->expert_reads - p->expert_reads, s->expert_req - p->expert_req,
                                              s->expert_hits - p->expert_hits };
    if (verbose) {
        fprintf(stderr, "k3: step %d (%d token%s): %.3f s, trunk %.1f MB, experts %.1f MB (%llu reads), %llu of %llu experts already resident, %.1f MB/s, I/O wait %.3f s\n",
                step, ntok, ntok == 1 ? "" : "s", seconds, tb / 1e6, eb / 1e6, (unsigned long long)(s->expert_reads - p->expert_reads),
                (unsigned long long)(s->expert_hits - p->expert_hits), (unsigned long long)(s->expert_req - p->expert_req),
                seconds > 0 ? (tb + eb) / 1e6 / seconds : 0.0, s->io_wait_s - p->io_wait_s);
    }
    x->prev = *s;
    x->step = step + 1;
}

void k3_mem_summary(const K3Model *m, FILE *f, double wall, double t_prefill, int n_gen, double t_decode) {
    const K3MemStats *s = k3_mem_stats(m);
    if (!s) return;
    double spt = n_gen > 1 ? t_decode / (n_gen - 1) : 0;
    fprintf(f, "k3: memory summary: %d tokens generated, prefill %.3f s, %.3f s/token; I/O wait %.1f%% of %.3f s wall\n",
            n_gen, t_prefill, spt, wall > 0 ? 100 * s->io_wait_s / wall : 0.0, wall);
    fprintf(f, "k3:   trunk read %.3f GB (%llu layer reads, %.0f MB/s while reading), pinned %.3f GB loaded once\n",
            s->trunk_bytes / K3_GB, (unsigned long long)s->trunk_reads, s->trunk_read_s > 0 ? s->trunk_bytes / 1e6 / s->trunk_read_s : 0.0,
            s->trunk_load_bytes / K3_GB);
    fprintf(f, "k3:   experts read %.3f GB (%llu reads, %.0f MB/s per read stream), requests %llu, retained (hit rate) %.1f%%, retries %llu, failed %llu\n",
            s->expert_bytes / K3_GB, (unsigned long long)s->expert_reads, s->expert_read_s > 0 ? s->expert_bytes / 1e6 / s->expert_read_s : 0.0,
            (unsigned long long)s->expert_req, s->expert_req ? 100.0 * s->expert_hits / s->expert_req : 0.0,
            (unsigned long long)s->expert_retries, (unsigned long long)s->expert_failed);
}

void k3_mem_json(const K3Model *m, FILE *f, double wall) {
    const K3MemStats *s = k3_mem_stats(m);
    if (!s) return;
    fprintf(f, "  \"io_wait_seconds\": %.6f,\n  \"io_share\": %.6f,\n", s->io_wait_s, wall > 0 ? s->io_wait_s / wall : 0.0);
    fprintf(f, "  \"trunk_bytes_read\": %llu,\n  \"trunk_reads\": %llu,\n  \"trunk_pinned_bytes\": %llu,\n  \"trunk_read_mb_per_s\": %.3f,\n",
            (unsigned long long)s->trunk_bytes, (unsigned long long)s->trunk_reads, (unsigned long long)s->trunk_load_bytes,
            s->trunk_read_s > 0 ? s->trunk_bytes / 1e6 / s->trunk_read_s : 0.0);
    fprintf(f, "  \"expert_bytes_read\": %llu,\n  \"expert_reads\": %llu,\n  \"expert_requests\": %llu,\n  \"expert_hits\": %llu,\n",
            (unsigned long long)s->expert_bytes, (unsigned long long)s->expert_reads, (unsigned long long)s->expert_req, (unsigned long long)s->expert_hits);
    fprintf(f, "  \"expert_hit_rate\": %.6f,\n  \"expert_read_mb_per_s\": %.3f,\n  \"expert_retries\": %llu,\n",
            s->expert_req ? (double)s->expert_hits / s->expert_req : 0.0, s->expert_read_s > 0 ? s->expert_bytes / 1e6 / s->expert_read_s : 0.0,
            (unsigned long long)s->expert_retries);
    const K3Mem *x = k3_mem(m);
    fprintf(f, "  \"steps\": [");
    for (int i = 0; i < x->n_steps; i++) {
        const K3MemStep *q = &x->steps[i];
        fprintf(f, "%s\n    {\"step\": %d, \"tokens\": %d, \"seconds\": %.6f, \"trunk_bytes\": %llu, \"expert_bytes\": %llu, "
                   "\"expert_reads\": %llu, \"experts_requested\": %llu, \"experts_already_resident\": %llu, "
                   "\"bytes_per_second\": %.1f, \"io_wait_seconds\": %.6f}",
                i ? "," : "", q->step, q->ntok, q->seconds, (unsigned long long)q->trunk_bytes, (unsigned long long)q->expert_bytes,
                (unsigned long long)q->expert_reads, (unsigned long long)q->expert_req, (unsigned long long)q->expert_hits,
                q->seconds > 0 ? (q->trunk_bytes + q->expert_bytes) / q->seconds : 0.0, q->io_wait_s);
    }
    fprintf(f, "\n  ],\n");
}
