/* mem.h — where the bytes live: the memory plan, budgets and presets, the packed trunk
 * (pinned layers + a streaming ring), and the routed-expert cache fed by a pthread I/O
 * pool. Budgets only decide where bytes live; every path hands the kernels the same
 * bytes, so ids and logits are bit-identical at every budget.
 *
 * Without k3_mem_setup() everything below falls back to the resident path of model.c
 * (weights used in place from the shard mappings), so tests and tools that only call
 * k3_model_open() keep working. */
#ifndef K3_MEM_H
#define K3_MEM_H
#include <stdint.h>
#include <stdio.h>
#include "k3.h"

#define K3_GB 1e9
#define K3_BUDGET_UNSET (-1.0)
#define K3_BUDGET_AUTO  (-2.0)

typedef struct {
    const char *trunk_dir;        /* --trunk DIR (packed by `k3 pack`), NULL = resident from the shards */
    double trunk_gb, cache_gb;    /* budgets in GB (1e9 bytes); K3_BUDGET_UNSET / K3_BUDGET_AUTO */
    int ctx;                      /* positions the MLA cache must hold */
    int chunk;                    /* largest number of tokens in one forward (prefill) */
    int logits_rows;              /* rows of logits main.c keeps */
    const char *trace_dir;        /* --dump-cache-trace DIR */
    int verbose, quiet;
} K3MemOpts;

typedef struct {
    uint64_t trunk_bytes, trunk_reads;        /* streamed layer reads (pinned loads not counted) */
    uint64_t trunk_load_bytes;                /* pinned layers read at start */
    uint64_t expert_bytes, expert_reads;      /* bytes and reads issued for experts */
    uint64_t expert_req, expert_hits;         /* requests; hits = resident before the step asked */
    uint64_t expert_retries, expert_failed;
    double io_wait_s;                         /* compute thread blocked on trunk or expert reads */
    double trunk_read_s, expert_read_s;       /* summed time inside reads (I/O threads) */
    uint64_t head_bytes;                      /* lm_head bytes streamed (also in trunk_bytes) */
} K3MemStats;

/* Plans memory (printed unless quiet), refuses with exit 1 when it does not fit, then
 * sets up the trunk and the expert cache. Returns 0 or an exit code, message in err. */
int k3_mem_setup(K3Model *m, const K3MemOpts *o, char *err, size_t errlen);
void k3_mem_close(K3Model *m);
int k3_mem_active(const K3Model *m);
/* Cumulative counters (NULL when k3_mem_setup was not called). */
const K3MemStats *k3_mem_stats(const K3Model *m);

/* Layer weights for the forward pass: pinned, or a ring slot filled by the reader
 * thread. Every acquire is followed by a release of the same layer, in layer order. */
const K3Layer *k3_layer_acquire(K3Model *m, int L);
void k3_layer_release(K3Model *m, int L);
/* Gets the reads of a chunk's expert union (compute order) in flight before computing. */
void k3_experts_prefetch(K3Model *m, int L, const int *ids, int n);

/* Reports: one line per forward on stderr (verbose), the summary, and JSON fields
 * (each line "  \"key\": value,\n") for main.c's --out. */
void k3_mem_step(K3Model *m, int step, int ntok, double seconds, int verbose);
void k3_mem_summary(const K3Model *m, FILE *f, double wall, double t_prefill, int n_gen, double t_decode);
void k3_mem_json(const K3Model *m, FILE *f, double wall);

/* Memory flags shared by batch mode (main.c) and chat (chat.c): --trunk, --trunk-gb,
 * --cache-gb, --preset, --verbose, --dump-cache-trace (and --ctx where the caller lets
 * it: chat's --ctx is its context limit). */
typedef struct {
    const char *trunk_dir, *trace_dir;
    double trunk_gb, cache_gb;
    int ctx, verbose;
} K3MemFlags;
void k3_mem_flags_init(K3MemFlags *f);
/* argv[*i] is a memory flag: consumes it (and its value), returns 1; not one: 0;
 * a bad value: -1 with a message in err. with_ctx: also parse --ctx N. */
int k3_mem_parse_flag(int argc, char **argv, int *i, K3MemFlags *f, int with_ctx, char *err, size_t errlen);

/* lm_head: streamed in row blocks through a bounded buffer when the plan says so
 * (small budgets), else k3_matmul on the resident matrix. Same bits either way
 * (k3_matmul splits over output rows only). Y is [T][vocab]. */
void k3_lm_head(K3Model *m, float *Y, const float *X, int T);

/* Presets: --preset NAME sets both budgets (auto: the largest that fits MemAvailable). */
int k3_preset_apply(const char *name, double *trunk_gb, double *cache_gb);
void k3_presets_print(FILE *f);
/* `k3 pack MODEL_DIR TRUNK_DIR [--verify]` */
int k3_pack_main(int argc, char **argv);

/* ---- internals shared by plan.c, trunk.c, expert_cache.c ---- */
typedef struct K3Trunk K3Trunk;
typedef struct K3ECache K3ECache;
typedef struct K3Head K3Head;
/* One forward's figures (the prefill chunk set is step 0, then one per token). */
typedef struct {
    int step, ntok;
    double seconds, io_wait_s;
    uint64_t trunk_bytes, expert_bytes, expert_reads, expert_req, expert_hits;
} K3MemStep;

typedef struct {
    K3Trunk *trunk;
    K3Head *head;                             /* lm_head streaming, NULL = resident */
    K3ECache *cache;
    K3MemStats st;
    FILE *trace;
    int step;
    K3MemStats prev;                          /* counters at the end of the previous step */
    K3MemStep *steps; int n_steps, cap_steps; /* per-step figures for --out */
} K3Mem;

K3Mem *k3_mem(const K3Model *m);
uint64_t k3_fnv1a(uint64_t h, const void *p, size_t n);
/* Fingerprint of a checkpoint: config.json bytes, shard names and sizes. */
uint64_t k3_model_fingerprint(const char *dir, const StIndex *st);
/* Per-layer trunk bytes (non-routed text tensors) straight from the shard index. */
void k3_trunk_sizes_from_shards(const K3Model *m, uint64_t *layer_bytes, uint64_t *global_bytes);

/* trunk.c */
K3Trunk *k3_trunk_open(K3Model *m, const char *dir, char *err, size_t errlen);
uint64_t k3_trunk_layer_bytes(const K3Trunk *t, int L);   /* padded blob size */
int k3_trunk_start(K3Model *m, K3Trunk *t, int n_pinned, K3MemStats *st, char *err, size_t errlen);
/* The ring for S streamed layers of sizes len[0..S): 2 slots (1 when S == 1). Layer i
 * goes to slot slot_of[i] (alternating; for odd S one adjacent pair shares a slot,
 * placed where the slots are smallest, ties at the smallest layer: that one layer
 * is read after its neighbour is released instead of during it). slot_of may be NULL.
 * Returns the ring bytes; slot_bytes[0..1] the size of each slot. */
uint64_t k3_ring_layout(const uint64_t *len, int S, int *slot_of, uint64_t *slot_bytes);
/* lm_head row-block streaming (trunk.c); buf_bytes bounds the block buffer
 * (K3_LMHEAD_ROWS=N forces N rows a block: tests). */
K3Head *k3_head_open(K3Model *m, uint64_t buf_bytes, char *err, size_t errlen);
void k3_head_close(K3Head *h);
int k3_head_matmul(K3Model *m, K3Head *h, float *Y, const float *X, int T, K3MemStats *st);
void k3_trunk_close(K3Trunk *t);
const K3Layer *k3_trunk_acquire(K3Model *m, K3Trunk *t, int L, K3MemStats *st);
void k3_trunk_release(K3Trunk *t, int L);
void k3_trunk_describe(const K3Trunk *t, char *buf, size_t n);

/* expert_cache.c */
uint64_t k3_ecache_slot_bytes(const K3Model *m);
K3ECache *k3_ecache_new(K3Model *m, int nslots, int qdepth, K3Mem *mem, char *err, size_t errlen);
void k3_ecache_free(K3ECache *c);
int k3_ecache_get(K3Model *m, K3ECache *c, int L, int e, K3Expert *out);
void k3_ecache_prefetch(K3Model *m, K3ECache *c, int L, const int *ids, int n);
void k3_ecache_describe(const K3ECache *c, char *buf, size_t n);

/* The cache policy (also used by tests and mirrored by tools/cache_replay.py):
 * LFU with ageing over a history that outlives residency; ties by least recent use. */
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
