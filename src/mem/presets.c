/* presets.c — the named budgets (--preset) and their plans on the real Kimi K3, computed
 * by the engine's own plan from the model's published sizes (docs/MODEL.md §1-§5). */
#include "internal.h"
#include "dspark.h"
#include "statefile.h"
#include <string.h>

/* ram: the machine's memory in GB; its plan (and the prefill chunk it allows) must fit
 * 80% of it. The laptop spends what the small window leaves of 6.5 GB on pinned trunk
 * and expert slots. */
static const struct { const char *name, *machine; double trunk, cache, ram; } PRESETS[] = {
    { "laptop", "8 GB machine", 2.4, 2.4, 8 },
    { "desktop", "32 GB machine", 16, 8, 32 },
    { "workstation", "128 GB machine", 58, 40, 128 },
    { "server", "512 GB machine", 120, 280, 512 },
    { "max", "everything resident (1.6 TB)", 1e6, 1e6, 0 },
};
#define NPRESETS (int)(sizeof PRESETS / sizeof PRESETS[0])

int k3_preset_count(void) { return NPRESETS; }
const char *k3_preset_name(int i) { return PRESETS[i].name; }
void k3_preset_budgets(int i, double *trunk_gb, double *cache_gb) {
    *trunk_gb = PRESETS[i].trunk; *cache_gb = PRESETS[i].cache;
}

int k3_preset_apply(const char *name, double *trunk_gb, double *cache_gb) {
    if (!strcmp(name, "auto")) { *trunk_gb = *cache_gb = K3_BUDGET_AUTO; return 0; }
    /* both budgets 0: the plan raises them to the working minimum (the window, 5 slots) */
    if (!strcmp(name, "minimum")) { *trunk_gb = *cache_gb = 0; return 0; }
    for (int i = 0; i < NPRESETS; i++)
        if (!strcmp(name, PRESETS[i].name)) {
            *trunk_gb = PRESETS[i].trunk; *cache_gb = PRESETS[i].cache;
            return 0;
        }
    return -1;
}

/* The real K3 (docs/MODEL.md §1.2, §1.3, §2, §5): config values and per-layer trunk bytes
 * (layer 0 KDA + dense MLP 2,341,213,184; KDA MoE 1,267,744,256; MLA MoE 844,335,616). */
#define REAL_PROCESS 0.5e9   /* estimate: tensor index of 497k entries, tokenizer, binary */
static void real_k3(K3Config *c, uint64_t *lb) {
    memset(c, 0, sizeof *c);
    c->rms_norm_eps = 1e-5f;
    c->hidden_size = 7168; c->num_hidden_layers = 93; c->vocab_size = 163840;
    c->intermediate_size = 33792;
    c->num_experts = 896; c->num_experts_per_token = 16; c->num_shared_experts = 2;
    c->moe_intermediate_size = 3072; c->routed_expert_hidden_size = 3584;
    c->attn_res_block_size = 12;
    c->num_attention_heads = 96; c->q_lora_rank = 1536; c->kv_lora_rank = 512;
    c->qk_nope_head_dim = 128; c->qk_rope_head_dim = 64; c->v_head_dim = 128;
    c->kda_num_heads = 96; c->kda_head_dim = 128; c->short_conv_kernel_size = 4;
    for (int L = 0; L < 93; L++) {
        c->is_kda[L] = (L + 1) % 4 != 0 && L < 91;
        c->is_moe[L] = L >= 1;
        lb[L] = L == 0 ? 2341213184ull : c->is_kda[L] ? 1267744256ull : 844335616ull;
    }
}

/* The released Inferact/Kimi-K3-DSpark (K3_DSPARK.md §2.1) in the plan. */
static void real_dspark(K3DraftPlan *o) {
    K3DSparkConfig k;
    memset(&k, 0, sizeof k);
    k.hidden = 7168; k.inter = 14336; k.layers = 5; k.heads = 64; k.q_lora = 1536;
    k.kv_lora = 512; k.nope = 128; k.rope = 64; k.v_dim = 128; k.vocab = 163840;
    k.markov_rank = 256; k.n_taps = 5; k.max_pos = 1048576;
    k3_dspark_plan_of(&k, o);
}

/* --draft on each preset: the plan with the draft and a verify pass of a block of 7 (its
 * undo log), whether the draft is pinned, and what a block reads from disk. */
static void presets_draft(FILE *f, const K3Config *c, const K3MemOpts *o0, const uint64_t *lb) {
    K3MemOpts o = *o0;
    real_dspark(&o.draft);
    o.undo_T = K3_DSPARK_MAX_N + 1;
    o.chunk = K3_PREFILL_CHUNK;
    fprintf(f, "--draft (the real DSpark: %.2f GB of weights, %.1f KB of context a position) "
            "with a verify pass of 8 rows, per preset: plan GB, the draft, a block's disk "
            "reads of trunk + draft:", o.draft.weights / K3_GB, o.draft.pos_bytes / 1e3);
    for (int i = 0; i < NPRESETS; i++) {
        K3Plan p;
        k3_plan_make(c, 0, &o, lb, 1, PRESETS[i].trunk, PRESETS[i].cache, (uint64_t)REAL_PROCESS,
                     &p);
        const uint64_t all = p.trunk_total + p.head_full;
        const uint64_t tr = all - (p.pinned < all ? p.pinned : all);
        fprintf(f, "%s %s %.2f, %s, %.1f + %.1f GB", i ? ";" : "", PRESETS[i].name,
                p.total / K3_GB, p.draft_pin ? "pinned" : "streamed", tr / K3_GB,
                p.draft_read / K3_GB);
    }
    fprintf(f, "\n");
}

/* The largest prefill chunk (up to ctx) whose plan fits room bytes and whose buffers fit
 * inside the trunk budget beside the window (room 0: ctx). */
static int preset_chunk(const K3Config *c, K3MemOpts *o, const uint64_t *lb, double t, double g,
                        double room, K3Plan *p) {
    int lo = 1, hi = o->ctx;
    if (room > 0)
        while (lo < hi) {
            o->chunk = lo + (hi - lo + 1) / 2;
            k3_plan_make(c, 0, o, lb, 1, t, g, (uint64_t)REAL_PROCESS, p);
            if ((double)p->total <= room && !p->raised_trunk) lo = o->chunk;   /* inside */
            else hi = o->chunk - 1;
        }
    else lo = hi;
    o->chunk = lo;
    k3_plan_make(c, 0, o, lb, 1, t, g, (uint64_t)REAL_PROCESS, p);
    return lo;
}

/* The most sequences preset i admits on its machine (90% of gb) with the KDA states and
 * MLA caches in a state file; a step holds a row per sequence (the chunk grows to it). */
static int preset_seqs_in_file(const K3Config *c, const K3MemOpts *o0, const uint64_t *lb,
                               int i, double gb) {
    K3MemOpts o = *o0;
    K3Plan p;
    int lo = 0, hi = 1 << 16;
    o.state_file = K3_STATES_ALL;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        o.seqs = mid;
        o.chunk = mid > K3_PREFILL_CHUNK ? mid : K3_PREFILL_CHUNK;
        k3_plan_make(c, 0, &o, lb, 1, PRESETS[i].trunk, PRESETS[i].cache,
                     (uint64_t)REAL_PROCESS, &p);
        if ((double)p.total <= 0.9 * gb * K3_GB) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static void preset_line(FILE *f, const char *name, const char *tb, const char *cb,
                        const K3Plan *p, int chunk, const char *what) {
    char pin[32], up[48] = "";                    /* chunk 0: no machine to fit */
    if (chunk > 0) snprintf(up, sizeof up, "; chunks up to %d fit", chunk);
    fprintf(f, "%-13s %10s  %10s  %8.2f GB (pinned %s, window %.2f GB, %d expert slots, "
            "lm_head %s%s)  %s\n", name, tb, cb, p->total / K3_GB,
            k3_size_text(p->pinned, pin, sizeof pin), p->ring_bytes / K3_GB, p->nslots,
            p->head_stream ? "streamed" : "pinned", up, what);
}

void k3_presets_print(FILE *f) {
    K3Config c;
    uint64_t lb[93];
    real_k3(&c, lb);
    K3MemOpts o;
    k3_mem_opts_init(&o);
    o.ctx = 4096; o.chunk = K3_PREFILL_CHUNK; o.logits_rows = 1;
    K3Plan p;
    fprintf(f, "preset        --trunk-gb  --cache-gb  plan on the real K3 (no pack, ctx 4096, "
            "prefill chunk %d)  for\n", K3_PREFILL_CHUNK);
    k3_plan_make(&c, 0, &o, lb, 1, 0, 0, (uint64_t)REAL_PROCESS, &p);
    preset_line(f, "minimum", "0", "0", &p, 0, "the working minimum");
    for (int i = 0; i < NPRESETS; i++) {
        const int chunk = preset_chunk(&c, &o, lb, PRESETS[i].trunk, PRESETS[i].cache,
                                       0.8 * PRESETS[i].ram * K3_GB, &p);
        char tb[32], cb[32];
        snprintf(tb, sizeof tb, PRESETS[i].trunk >= 1e6 ? "all" : "%g", PRESETS[i].trunk);
        snprintf(cb, sizeof cb, PRESETS[i].cache >= 1e6 ? "all" : "%g", PRESETS[i].cache);
        o.chunk = K3_PREFILL_CHUNK;          /* the machine figure: at the default chunk */
        K3Plan q;
        k3_plan_make(&c, 0, &o, lb, 1, PRESETS[i].trunk, PRESETS[i].cache,
                     (uint64_t)REAL_PROCESS, &q);
        preset_line(f, PRESETS[i].name, tb, cb, &q, chunk, PRESETS[i].machine);
    }
    /* batches (k3 --batch): each sequence adds a KDA state and an MLA cache */
    k3_plan_make(&c, 0, &o, lb, 1, 0, 0, (uint64_t)REAL_PROCESS, &p);
    const double per_seq = (double)(p.state + p.mla);
    fprintf(f, "batch: a sequence adds %.3f GB (KDA state %.3f + MLA cache %.3f at ctx 4096); "
            "the largest batch each preset admits on its machine (90%% of it), states resident "
            "/ in the state file (%d layer buffers of them in memory, the rest on disk):",
            per_seq / K3_GB, p.state / K3_GB, p.mla / K3_GB, K3_STATEFILE_NBUF);
    for (int i = 0; i < NPRESETS; i++) {
        double gb = 0;
        if (sscanf(PRESETS[i].machine, "%lf GB", &gb) != 1) continue;
        k3_plan_make(&c, 0, &o, lb, 1, PRESETS[i].trunk, PRESETS[i].cache,
                     (uint64_t)REAL_PROCESS, &p);
        const double room = 0.9 * gb * K3_GB - (double)p.total;
        fprintf(f, "%s %s %d / %d", i ? "," : "", PRESETS[i].name,
                room >= 0 ? 1 + (int)(room / per_seq) : 0, preset_seqs_in_file(&c, &o, lb, i, gb));
    }
    fprintf(f, "\n");
    presets_draft(f, &c, &o, lb);
    fprintf(f, "auto          the largest preset whose plan fits 90%% of MemAvailable "
               "(the default)\n"
               "Budgets are GB (1e9 bytes); totals are at a prefill chunk of %d, and \"chunks "
               "up to N\nfit\" is the largest prefill chunk whose plan fits 80%% of the "
               "machine. The two flags\nare the ceiling of the process: --cache-gb holds the "
               "expert slots, --trunk-gb\neverything else (the read-ahead window the trunk and "
               "lm_head stream through in\npieces, the forward buffers, states, MLA cache, the "
               "process) and pins the trunk with\nwhat is left (the prefix may end inside a "
               "layer), from the shards or, the same, a\n`k3 pack` (--trunk). Budgets below "
               "the working minimum (the window and\nthe rest, 5 expert slots) are raised to "
               "it. A later flag wins. Real-model figures\nare computed from docs/MODEL.md "
               "sizes (the process/index share is an estimate of\n%.1f GB), not measured.\n",
               K3_PREFILL_CHUNK, REAL_PROCESS / K3_GB);
}
