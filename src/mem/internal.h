/* internal.h — the parts of the memory system (src/mem) and how they meet. mem.c owns
 * them and implements weights.h on top: trunk.c (pinned prefix + layer ring), head.c
 * (lm_head in row blocks), expert_cache.c (slots + I/O pool, policy.c), plan.c (the
 * plan arithmetic), presets.c, report.c. Nothing here exits the process. */
#ifndef K3_MEM_INTERNAL_H
#define K3_MEM_INTERNAL_H
#include "mem.h"

typedef struct K3Trunk K3Trunk;
typedef struct K3ECache K3ECache;
typedef struct K3Head K3Head;

/* One forward's figures (the prefill chunk set is step 0, then one per token). */
typedef struct {
    int step, ntok;
    double seconds, io_wait_s;
    uint64_t trunk_bytes, expert_bytes, expert_reads, expert_req, expert_hits;
    uint64_t head_bytes;                      /* lm_head bytes (also in trunk_bytes) */
} K3MemStep;

struct K3Mem {
    K3Weights base;                           /* the weights.h face of the memory system */
    K3Model *m;
    K3Trunk *trunk;                           /* NULL = trunk resident in the shard mappings */
    K3Head *head;                             /* lm_head streaming, NULL = resident */
    K3ECache *cache;                          /* NULL = no MoE layer */
    K3MemStats st;
    FILE *trace;
    int step;
    K3MemStats prev;                          /* counters at the end of the previous step */
    K3MemStep *steps; int n_steps, cap_steps; /* per-step figures for --out */
    uint64_t buffer_bytes, plan_bytes;        /* the plan's forward buffers and its total */
};

/* ---- plan.c ---- */
typedef struct {
    double trunk_budget, cache_budget;       /* bytes, after raising to the minimum */
    int n_pinned, ring, nslots, streamed, head_stream;
    uint64_t pinned, ring_bytes, cache, lm_head, embed, vectors, state, mla, buffers, process,
             total;
    uint64_t trunk_total, trunk_min, cache_min, all_experts, head_full, slot_bytes;
    int raised_trunk, raised_cache;
    int seqs;                                /* sequences whose state and MLA cache count */
} K3Plan;
#define K3_HEAD_BUF 64e6                     /* lm_head row-block buffer when streamed */
/* lb[0..NL): trunk bytes per layer; have_trunk: --trunk given; process: bytes held. */
void k3_plan_make(const K3Config *c, int head_f32, const K3MemOpts *o, const uint64_t *lb,
                  int have_trunk, double tgb, double cgb, uint64_t process, K3Plan *p);
void k3_plan_print(const K3Plan *p, int NL, int have_trunk, uint64_t avail, const char *adesc,
                   int ctx, FILE *f);
/* The refusal when p does not fit avail: every figure and the flags that would fit. */
void k3_plan_refusal(const K3Plan *p, const K3Model *m, const K3MemOpts *o, const uint64_t *lb,
                     uint64_t avail, const char *adesc, char *err, size_t errlen);
/* Trunk bytes per layer (non-routed text tensors) straight from the shard index. */
void k3_trunk_sizes_from_shards(const K3Model *m, uint64_t *layer_bytes, uint64_t *global);

/* Bytes in the unit that keeps them readable ("20.5 KB", "17.5 MB", "2.34 GB"). */
const char *k3_size_text(uint64_t b, char *out, size_t n);

/* ---- presets.c ---- */
int k3_preset_count(void);
const char *k3_preset_name(int i);
void k3_preset_budgets(int i, double *trunk_gb, double *cache_gb);

/* ---- trunk.c ---- */
/* verify_reads: check every streamed layer against its checksums (pinned ones always). */
K3Trunk *k3_trunk_open(K3Model *m, const char *dir, int verify_reads, char *err,
                       size_t errlen);
uint64_t k3_trunk_layer_bytes(const K3Trunk *t, int L);   /* padded blob size */
int k3_trunk_start(K3Trunk *t, int n_pinned, K3MemStats *st, char *err, size_t errlen);
void k3_trunk_close(K3Trunk *t);
const K3Layer *k3_trunk_acquire(K3Trunk *t, int L, K3MemStats *st, char *err, size_t errlen);
void k3_trunk_release(K3Trunk *t, int L);
void k3_trunk_describe(const K3Trunk *t, char *buf, size_t n);
/* The ring for n streamed layers of sizes len[0..n): 2 slots (1 when n == 1). Layer i
 * goes to slot slot_of[i] (alternating; for odd n one adjacent pair shares a slot,
 * placed where the slots are smallest, ties at the smallest layer: that one layer
 * is read after its neighbour is released instead of during it). slot_of may be NULL.
 * Returns the ring bytes; slot_bytes[0..1] the size of each slot. The plan uses it too. */
uint64_t k3_ring_layout(const uint64_t *len, int n, int *slot_of, uint64_t *slot_bytes);

/* ---- head.c: lm_head in row blocks through a bounded buffer, for chunks up to max_T ---- */
K3Head *k3_head_open(K3Model *m, uint64_t buf_bytes, int max_T, char *err, size_t errlen);
void k3_head_close(K3Head *h);
int k3_head_matmul(K3Head *h, float *Y, const float *X, int T, K3MemStats *st, char *err,
                   size_t errlen);

/* ---- expert_cache.c ---- */
uint64_t k3_ecache_slot_bytes(const K3Config *c);
/* The counters, failure count and trace the cache reports to (owned by mem.c). */
typedef struct { K3MemStats *st; long *failures; FILE **trace; const int *step; } K3ECacheSink;
K3ECache *k3_ecache_new(K3Model *m, int nslots, int qdepth, K3ECacheSink out, char *err,
                        size_t errlen);
void k3_ecache_free(K3ECache *c);
int k3_ecache_get(K3ECache *c, int L, int e, K3Expert *out);
void k3_ecache_prefetch(K3ECache *c, int L, const int *ids, int n);
void k3_ecache_describe(const K3ECache *c, char *buf, size_t n);

/* ---- policy.c: LFU with ageing over a history that outlives residency; ties by least
 * recent use (also used by tests and mirrored by tools/cache_replay.py) ---- */
typedef struct {
    uint32_t *freq; uint64_t *last; size_t nkeys;
    uint64_t clock, next_age, age_every;
} K3Policy;
int k3_policy_init(K3Policy *p, size_t nkeys, int capacity);
void k3_policy_free(K3Policy *p);
void k3_policy_touch(K3Policy *p, size_t key);              /* one request */
/* Index into cand[0..n) of the key to evict. */
int k3_policy_victim(const K3Policy *p, const size_t *cand, int n);
#endif
