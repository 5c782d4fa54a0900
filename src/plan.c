/* plan.c — the memory plan, budgets and presets, and the glue between the forward
 * pass and where the bytes live (trunk.c, expert_cache.c).
 *
 * Before anything big is allocated, the plan sums the pinned trunk, the trunk ring,
 * the expert cache, lm_head (used in place, resident once touched), embedding rows
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

double k3_mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

void k3_experts_prefetch(K3Model *m, int L, const int *ids, int n) {
    K3Mem *x = k3_mem(m);
    if (x && x->cache) k3_ecache_prefetch(m, x->cache, L, ids, n);
}

/* ---- presets ---- */

static const struct { const char *name, *machine; double trunk, cache; } PRESETS[] = {
    { "laptop", "16 GB laptop", 6, 4 },
    { "desktop", "32 GB desktop", 14, 10 },
    { "workstation", "128 GB workstation", 48, 60 },
    { "server", "512 GB server", 110, 250 },
    { "max", "everything resident (1.6 TB)", 1e6, 1e6 },
};
#define NPRESETS (int)(sizeof PRESETS / sizeof PRESETS[0])

/* Real K3 (K3_MODEL.md §2, §3.8, §5), for the --list-presets table. */
#define REAL_TRUNK 108.8e9
#define REAL_MAXLAYER 2.341e9
#define REAL_EXPERTS 1446.456e9
#define REAL_FIXED (2.349e9 + 0.434e9 + 0.226e9 + 0.6e9)   /* lm_head, KDA state, MLA ctx 4096, buffers+index */

int k3_preset_apply(const char *name, double *trunk_gb, double *cache_gb) {
    if (!strcmp(name, "auto")) { *trunk_gb = *cache_gb = K3_BUDGET_AUTO; return 0; }
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(name, PRESETS[i].name)) { *trunk_gb = PRESETS[i].trunk; *cache_gb = PRESETS[i].cache; return 0; }
    return -1;
}

void k3_presets_print(FILE *f) {
    fprintf(f, "preset        --trunk-gb  --cache-gb  needs on the real K3 (ctx 4096)  for\n");
    for (int i = 0; i < NPRESETS; i++) {
        double t = PRESETS[i].trunk * K3_GB, c = PRESETS[i].cache * K3_GB;
        if (t > REAL_TRUNK) t = REAL_TRUNK;
        if (t < 2 * REAL_MAXLAYER) t = 2 * REAL_MAXLAYER;
        if (c > REAL_EXPERTS) c = REAL_EXPERTS;
        char tb[32], cb[32];
        snprintf(tb, sizeof tb, PRESETS[i].trunk >= 1e6 ? "all" : "%.0f", PRESETS[i].trunk);
        snprintf(cb, sizeof cb, PRESETS[i].cache >= 1e6 ? "all" : "%.0f", PRESETS[i].cache);
        fprintf(f, "%-13s %10s  %10s  %8.1f GB                      %s\n", PRESETS[i].name, tb, cb, (t + c + REAL_FIXED) / K3_GB, PRESETS[i].machine);
    }
    fprintf(f, "auto          the largest preset whose plan fits MemAvailable (the default)\n"
               "Budgets are GB (1e9 bytes). The trunk budget covers pinned layers plus a 2-slot ring\n"
               "(streaming needs --trunk DIR from `k3 pack`); budgets below the working minimum\n"
               "(ring of 2 layers, 5 expert slots) are raised to it. A later flag wins.\n");
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

typedef struct {
    double trunk_budget, cache_budget;       /* bytes, after raising to the minimum */
    int n_pinned, ring, nslots, streamed;
    uint64_t pinned, ring_bytes, cache, lm_head, embed, vectors, state, mla, buffers, process, total;
    uint64_t trunk_total, trunk_min, cache_min, all_experts;
    int raised_trunk, raised_cache;
} Plan;

static void make_plan(const K3Model *m, const K3MemOpts *o, const uint64_t *lb, int have_trunk,
                      double tgb, double cgb, Plan *p) {
    const K3Config *c = &m->cfg;
    const int NL = c->num_hidden_layers, H = c->hidden_size, V = c->vocab_size;
    memset(p, 0, sizeof *p);
    for (int L = 0; L < NL; L++) p->trunk_total += lb[L];
    uint64_t mx = 0;
    for (int L = 0; L < NL; L++) if (lb[L] > mx) mx = lb[L];
    p->trunk_min = p->trunk_total;
    if (have_trunk) {
        const int R = NL >= 2 ? 2 : 1;
        p->trunk_min = 0;
        for (int r = 0; r < R; r++) {
            uint64_t m2 = 0;
            for (int k = r; k < NL * R; k += R) if (lb[k % NL] > m2) m2 = lb[k % NL];
            p->trunk_min += m2;
        }
    }
    (void)mx;
    p->trunk_budget = tgb * K3_GB;
    if (have_trunk && p->trunk_budget < p->trunk_min) { p->trunk_budget = (double)p->trunk_min; p->raised_trunk = 1; }
    if (!have_trunk || p->trunk_budget >= (double)p->trunk_total) { p->n_pinned = NL; p->pinned = p->trunk_total; }
    else {
        for (int N = 0; N < NL; N++) {
            uint64_t pin = 0, ring = 0;
            const int S = NL - N, R = S >= 2 ? 2 : 1;
            for (int L = 0; L < N; L++) pin += lb[L];
            for (int r = 0; r < R; r++) {             /* slot r holds layers N + (k mod S), k = r mod R (trunk.c) */
                uint64_t mx = 0;
                for (int k = r; k < S * R; k += R) if (lb[N + k % S] > mx) mx = lb[N + k % S];
                ring += mx;
            }
            if ((double)(pin + ring) <= p->trunk_budget) { p->n_pinned = N; p->pinned = pin; p->ring = R; p->ring_bytes = ring; }
            else break;
        }
        p->streamed = NL - p->n_pinned;
    }
    int nmoe = 0;
    for (int L = 0; L < NL; L++) nmoe += c->is_moe[L];
    uint64_t slot = k3_ecache_slot_bytes(m);
    int all = nmoe * c->num_experts, mins = all < 5 ? all : 5;
    p->all_experts = (uint64_t)all * slot; p->cache_min = (uint64_t)mins * slot;
    p->cache_budget = cgb * K3_GB;
    if (p->cache_budget < (double)p->cache_min) { p->cache_budget = (double)p->cache_min; p->raised_cache = 1; }
    double ns = p->cache_budget / (double)slot;
    p->nslots = ns >= all ? all : (int)ns;
    if (p->nslots < mins) p->nslots = mins;
    p->cache = (uint64_t)p->nslots * slot;
    p->lm_head = (uint64_t)V * H * 2;
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
    const uint64_t T = o->chunk > 0 ? o->chunk : 1, E = c->num_experts, LAT = c->routed_expert_hidden_size;
    const uint64_t I = c->moe_intermediate_size, NH = c->num_attention_heads;
    uint64_t fwd = (4 + NL / c->attn_res_block_size + 2) * T * H;
    uint64_t kda = T * (6 * C + c->kda_head_dim + c->kda_num_heads);
    uint64_t mla = T * (c->q_lora_rank + NH * (c->qk_nope_head_dim + c->qk_rope_head_dim) + c->kv_lora_rank + c->qk_rope_head_dim + 2 * NH * c->v_head_dim) + cap;
    uint64_t moe = T * (2 * E + 4 * LAT + 3 * I + H) + T * 2 * I * c->num_shared_experts;
    uint64_t mlp = T * 2 * c->intermediate_size;
    uint64_t sub = kda > mla ? kda : mla;
    if (moe > sub) sub = moe;
    if (mlp > sub) sub = mlp;
    p->buffers = (fwd + sub + (uint64_t)(o->logits_rows > 0 ? o->logits_rows : 1) * V) * 4;
    p->process = rss_now();
    p->total = p->pinned + p->ring_bytes + p->cache + p->lm_head + p->embed + p->vectors + p->state + p->mla + p->buffers + p->process;
}

static void print_plan(const K3Model *m, const Plan *p, int have_trunk, uint64_t avail, const char *adesc, int ctx) {
    const int NL = m->cfg.num_hidden_layers;
    fprintf(stderr, "k3: memory plan (GB = 1e9 bytes)\n");
    if (have_trunk)
        fprintf(stderr, "  trunk pinned       %8.3f  layers 0..%d of %d (budget %.3f GB)\n", p->pinned / K3_GB, p->n_pinned - 1, NL, p->trunk_budget / K3_GB);
    else
        fprintf(stderr, "  trunk resident     %8.3f  all %d layers, used in place from the shards (stream it: k3 pack + --trunk)\n", p->pinned / K3_GB, NL);
    if (p->streamed) fprintf(stderr, "  trunk ring         %8.3f  %d slots, %d layers streamed\n", p->ring_bytes / K3_GB, p->ring, p->streamed);
    fprintf(stderr, "  expert cache       %8.3f  %d slots of %.1f MB (%.1f%% of all routed experts)\n", p->cache / K3_GB, p->nslots,
            k3_ecache_slot_bytes(m) / 1e6, p->all_experts ? 100.0 * p->cache / p->all_experts : 0.0);
    fprintf(stderr, "  lm_head            %8.3f  resident\n", p->lm_head / K3_GB);
    fprintf(stderr, "  embedding rows     %8.3f  row lookup, touched rows only\n", p->embed / K3_GB);
    fprintf(stderr, "  small vectors f32  %8.3f\n", p->vectors / K3_GB);
    fprintf(stderr, "  recurrent state    %8.3f  KDA S + conv windows\n", p->state / K3_GB);
    fprintf(stderr, "  MLA cache          %8.3f  --ctx %d\n", p->mla / K3_GB, ctx);
    fprintf(stderr, "  buffers            %8.3f\n", p->buffers / K3_GB);
    fprintf(stderr, "  process so far     %8.3f  binary, index, tokenizer\n", p->process / K3_GB);
    fprintf(stderr, "  total              %8.3f  available %.3f (%s)\n", p->total / K3_GB, avail / K3_GB, adesc);
    if (p->raised_trunk) fprintf(stderr, "k3: note: --trunk-gb raised to the working minimum %.3f GB (a ring of 2 layers)\n", p->trunk_min / K3_GB);
    if (p->raised_cache) fprintf(stderr, "k3: note: --cache-gb raised to the working minimum %.3f GB (5 expert slots)\n", p->cache_min / K3_GB);
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
            make_plan(m, o, lb, o->trunk_dir != NULL, t, c, &p);
            if (!avail || p.total <= 0.9 * avail) { pick = i; break; }
        }
        if (tgb < 0) tgb = PRESETS[pick].trunk;
        if (cgb < 0) cgb = PRESETS[pick].cache;
        if (!o->quiet) fprintf(stderr, "k3: auto budgets: preset %s (--trunk-gb %g --cache-gb %g)\n", PRESETS[pick].name, tgb, cgb);
    }
    make_plan(m, o, lb, o->trunk_dir != NULL, tgb, cgb, &p);
    free(lb);
    if (!o->quiet) print_plan(m, &p, o->trunk_dir != NULL, avail, adesc, o->ctx);
    if (avail && p.total > avail) {
        uint64_t excess = p.total - avail, cred = p.cache - p.cache_min, tred = 0, fixed = p.total - p.cache - p.pinned - p.ring_bytes;
        if (o->trunk_dir) tred = p.pinned + p.ring_bytes - p.trunk_min;
        char fix[600];
        if (cred + tred >= excess) {
            uint64_t dc = excess < cred ? excess : cred, dt = excess - dc;
            uint64_t nc = p.cache - dc, nt = p.pinned + p.ring_bytes - dt;
            if (dc && nc > p.cache_min + (20u << 20)) nc -= 20u << 20;      /* round down with a margin */
            snprintf(fix, sizeof fix, "--cache-gb %.3f", (double)(nc / 1000000) / 1000);
            if (dt) snprintf(fix + strlen(fix), sizeof fix - strlen(fix), " --trunk-gb %.3f", (double)(nt / 1000000) / 1000);
        } else if (!o->trunk_dir)
            snprintf(fix, sizeof fix, "stream the trunk: k3 pack %.300s TRUNK_DIR, then add --trunk TRUNK_DIR --preset laptop", m->dir);
        else snprintf(fix, sizeof fix, "a smaller --ctx; even the working minimum needs %.3f GB", (fixed + p.cache_min + p.trunk_min) / K3_GB);
        snprintf(err, errlen, "the memory plan needs %.3f GB but %.3f GB is available (%s): trunk %.3f + ring %.3f + expert cache %.3f + lm_head %.3f "
                 "+ embedding rows %.3f + vectors %.3f + state %.3f + MLA cache %.3f + buffers %.3f + process %.3f. Fix: %s",
                 p.total / K3_GB, avail / K3_GB, adesc, p.pinned / K3_GB, p.ring_bytes / K3_GB, p.cache / K3_GB, p.lm_head / K3_GB,
                 p.embed / K3_GB, p.vectors / K3_GB, p.state / K3_GB, p.mla / K3_GB, p.buffers / K3_GB, p.process / K3_GB, fix);
        return K3_ERR_RUNTIME;
    }
    int rc;
    if (x->trunk && (rc = k3_trunk_start(m, x->trunk, p.n_pinned, p.ring, &x->st, err, errlen))) return rc;
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
    k3_ecache_free(x->cache);
    if (x->trace) fclose(x->trace);
    free(x);
    m->experts_priv = NULL;
}

/* ---- reports ---- */

void k3_mem_step(K3Model *m, int step, int ntok, double seconds, int verbose) {
    K3Mem *x = k3_mem(m);
    if (!x) return;
    const K3MemStats *s = &x->st, *p = &x->prev;
    if (verbose) {
        uint64_t tb = s->trunk_bytes - p->trunk_bytes, eb = s->expert_bytes - p->expert_bytes;
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
}
