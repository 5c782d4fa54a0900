/* internal.h — the parts of the memory system (src/mem) and how they meet. mem.c owns
 * them and implements weights.h on top: trunk.c (the packed trunk's index), stream.c
 * (pinned prefix + pieces through a read-ahead window, lm_head too), expert_cache.c
 * (slots + I/O pool, policy.c), plan.c (the plan arithmetic), presets.c, report.c.
 * Nothing here exits the process. */
#ifndef K3_MEM_INTERNAL_H
#define K3_MEM_INTERNAL_H
#include "mem.h"
#include <pthread.h>

typedef struct K3Trunk K3Trunk;
typedef struct K3Stream K3Stream;
typedef struct K3ECache K3ECache;

/* The disk meter shared by the trunk readers and the expert cache: busy wall time (any
 * read in flight) and the deepest queue, into st. */
typedef struct { pthread_mutex_t mu; int n; double t0; K3MemStats *st; } K3IoMeter;
void k3_io_begin(K3IoMeter *m);
void k3_io_end(K3IoMeter *m);

/* One forward's figures (the prefill chunk set is step 0, then one per token). */
typedef struct {
    int step, ntok;
    double seconds, io_wait_s;
    uint64_t trunk_bytes, expert_bytes, expert_reads, expert_req, expert_hits;
    uint64_t head_bytes;                      /* lm_head bytes (also in trunk_bytes) */
    double disk_busy_s;                       /* wall time with a read in flight */
} K3MemStep;

struct K3Mem {
    K3Weights base;                           /* the weights.h face of the memory system */
    K3Model *m;
    K3Trunk *trunk;                           /* NULL = trunk resident in the shard mappings */
    K3Stream *stream;                         /* the trunk in pieces (with --trunk) */
    K3IoMeter io; int io_init;
    K3ECache *cache;                          /* NULL = no MoE layer */
    K3MemStats st;
    FILE *trace;
    int step;
    K3MemStats prev;                          /* counters at the end of the previous step */
    K3MemStep *steps; int n_steps, cap_steps; /* per-step figures for --out */
    uint64_t buffer_bytes, plan_bytes;        /* the plan's forward buffers and its total */
    uint64_t trunk_budget, cache_budget;      /* the flags after raising to the minimum */
    int chunk;                                /* the prefill chunk the plan chose */
    const char *act_dir;                      /* its buffers' file's directory, or NULL */
    int seqs, state_mode;                     /* sequences admitted, where their states live */
    int brief;                                /* the plan was the one line: all resident */
    int draft_streamed;                       /* the draft's weights read per block */
    int draft_planned;                        /* K3MemOpts.draft was given */
    uint64_t draft_bytes;                     /* its share of plan_bytes (k3_plan_draft_bytes) */
    long vision_patches;                      /* k3_mem_vision_patches */
    uint64_t vision_bytes;                    /* the tower's share of plan_bytes */
};

/* ---- plan.c ---- */
typedef struct {
    double trunk_budget, cache_budget;       /* bytes, after raising to the minimum */
    int n_pinned, ring, nslots, streamed, head_stream;
    uint64_t pinned, ring_bytes, cache, lm_head, embed, vectors, state, mla, buffers, process,
             total;
    uint64_t undo;                           /* a verify's undo log (k3_state_mark) */
    uint64_t scratch;                        /* every thread's kernel scratch */
    uint64_t side;                           /* embed .. process: inside --trunk-gb */
    uint64_t cache_index;                    /* the cache's index: inside --cache-gb */
    uint64_t trunk_total, trunk_min, cache_min, all_experts, head_full, slot_bytes;
    uint64_t piece;                          /* streamed piece size (ring_bytes: the window) */
    int raised_trunk, raised_cache;
    int shards;                              /* no --trunk, budget short: streams from shards */
    int chunk;                               /* tokens per forward the buffers are sized for */
    int act_file;                            /* buffers in a file: resident part counted */
    uint64_t act_bytes;                      /* that file's size */
    const char *chunk_why;                   /* which bound chose it (NULL: not printed) */
    int seqs;                                /* sequences whose state and MLA cache count */
    int state_mode;                          /* K3_STATES_*: resident, or in a state file */
    uint64_t state_file, state_bufs, state_step;   /* its bytes on disk, buffers, per step */
    const char *state_dir;
    /* --draft (K3MemOpts.draft): its weights pinned or its window (both inside --trunk-gb),
     * its buffers, tap rows and context cache (in side), what a block reads of it */
    uint64_t draft_pin, draft_win, draft_side, draft_read, draft_ingest;
    /* images (K3MemOpts.vision): the tower's weights, one image's buffers + every image's
     * patches and rows (in side); vis_fit: the most patches one image could have beside the
     * rest in what is available (-1: not known), set by mem.c for the print */
    uint64_t vis_weights, vis_act;
    long vis_patches, vis_fit, vis_all;     /* vis_all: every image's patches held at once */
} K3Plan;
/* lb[0..NL): trunk bytes per layer; have_trunk: --trunk given; process: bytes held.
 * Without --trunk the trunk stays in the shard mappings when --trunk-gb holds all of it,
 * else it streams from the shards as a pack's would (p->shards). */
void k3_plan_make(const K3Config *c, int head_f32, const K3MemOpts *o, const uint64_t *lb,
                  int have_trunk, double tgb, double cgb, uint64_t process, K3Plan *p);
void k3_plan_print(const K3Plan *p, int NL, int have_trunk, uint64_t avail, const char *adesc,
                   int ctx, FILE *f);
/* Every byte resident and nothing raised or tight: what the one-line form may summarise. */
int k3_plan_all_resident(const K3Plan *p, int have_trunk, uint64_t avail);
void k3_plan_line(const K3Plan *p, int NL, uint64_t avail, const char *adesc, FILE *f);
/* --draft: its share of the plan (weights or window, context and buffers) */
uint64_t k3_plan_draft_bytes(const K3Plan *p);
/* Over N ranks: every rank's trunk rows, pinned, streamed, experts owned and slots, from
 * one gather (every rank calls it at the same point); rank 0 prints when print is set. */
void k3_plan_ranks(const K3Plan *p, int have_trunk, int print, FILE *f);
/* Where the states live and how many sequences: o->state_file 0 becomes the least paging
 * whose plan fits 90% of avail (unknown avail: resident); with o->seqs_auto, o->seqs the
 * most (at most o->seqs) that fit. */
void k3_plan_states(const K3Config *c, int head_f32, K3MemOpts *o, const uint64_t *lb,
                    int have_trunk, double tgb, double cgb, uint64_t process, uint64_t avail);
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

/* ---- trunk.c: the packed trunk's index, or the trunk where the shards hold it ---- */
K3Trunk *k3_trunk_open(K3Model *m, const char *dir, char *err, size_t errlen);
K3Trunk *k3_trunk_shards(K3Model *m, char *err, size_t errlen);
void k3_trunk_close(K3Trunk *t);
uint64_t k3_trunk_layer_bytes(const K3Trunk *t, int L);   /* padded blob size */
const char *k3_trunk_path(const K3Trunk *t);  /* trunk.k3, or the model folder (shards) */
int k3_trunk_from_shards(const K3Trunk *t);   /* 1: no pack, no checksums */
/* The files the matrices lie in (f < k3_trunk_nfiles: every shard, and trunk.k3 first
 * for a pack), the file of matrix i of layer L, and that of shard `shard`. */
int k3_trunk_nfiles(const K3Trunk *t);
const char *k3_trunk_fpath(const K3Trunk *t, int f);
int k3_trunk_file(const K3Trunk *t, int L, int i);
int k3_trunk_shard_file(const K3Trunk *t, int shard);
/* Layer L's bound matrices: how many; matrix i's K3Layer field, checksum and name. */
int k3_trunk_nmats(const K3Trunk *t, int L);
void k3_trunk_mat(const K3Trunk *t, int L, int i, size_t *field, uint64_t *sum,
                  const char **name);
/* File bytes [*off, *off + *n) of rows [r0, r1) of matrix i of layer L: the only place
 * that knows how rows lie in the file. */
void k3_trunk_rows(const K3Trunk *t, int L, int i, int r0, int r1, uint64_t *off,
                   uint64_t *n);
/* Matrix i of layer L's row offset table when it is stored coded (K3_W_BF16C, codec.h:
 * [rows + 1] entries, relative to its first row's bytes; the table itself is the first
 * 4 (rows + 1) bytes of the stored tensor and of its checksum), else NULL. */
const uint32_t *k3_trunk_rowoff(const K3Trunk *t, int L, int i);
/* The refusal of matrix i of layer L whose bytes summed to got. */
void k3_trunk_bad_sum(const K3Trunk *t, int L, int i, uint64_t got, char *err, size_t errlen);

/* ---- stream.c: the trunk (and lm_head) in pieces through a read-ahead window ----
 * The matrices in the order the forward pass multiplies them (layer by layer, then
 * lm_head) are cut at row boundaries: the first pin_bytes are read once and pinned (the
 * prefix may end inside a matrix), the rest is cut into pieces of at most piece_bytes
 * and read, every forward, by io_depth threads in aligned chunks into a window of
 * window_bytes, ahead of the matmuls that consume them in order. */
typedef struct {
    uint64_t pin_bytes, piece_bytes, window_bytes;
    int piece_rows;                           /* > 0: rows per piece (tests) */
    int io_depth, max_T, verify_reads;
    int head;                                 /* lm_head goes through the stream too */
    int quiet;                                /* no progress lines while pinning */
} K3StreamOpts;
K3Stream *k3_stream_open(K3Model *m, K3Trunk *t, const K3StreamOpts *o, K3MemStats *st,
                         K3IoMeter *io, char *err, size_t errlen);
/* Expert reads queued or in flight (the cache's counter): while there are any, and the
 * matmuls do not wait on the window, trunk reads hold back. k3_stream_kick wakes the
 * readers when the count falls to 0. */
void k3_stream_set_experts(K3Stream *s, const int *busy);
void k3_stream_kick(void *stream);
void k3_stream_close(K3Stream *s);
const K3Layer *k3_stream_acquire(K3Stream *s, int L, char *err, size_t errlen);
void k3_stream_release(K3Stream *s, int L);
int k3_stream_head(K3Stream *s, float *Y, const float *X, int T, char *err, size_t errlen);
void k3_stream_describe(const K3Stream *s, char *buf, size_t n);
/* The window for pieces of piece bytes when the largest whole matrix is whole_max. */
uint64_t k3_stream_window(uint64_t piece, uint64_t whole_max);
/* The piece size the plan picks for a stream of total bytes. */
uint64_t k3_stream_piece(uint64_t total);
/* Over N ranks (comm.h): lb[L] (layer L's trunk bytes) less the rows of its split
 * matrices other ranks stream, so the plan is this rank's; unchanged at N = 1. */
void k3_stream_rank_bytes(const K3Model *m, const K3Trunk *t, uint64_t *lb);

/* ---- expert_cache.c ---- */
uint64_t k3_ecache_slot_bytes(const K3Config *c);
uint64_t k3_ecache_index_bytes(const K3Config *c);   /* counted in --cache-gb */
/* The counters, failure count and trace the cache reports to (owned by mem.c). */
typedef struct {
    K3MemStats *st; long *failures; FILE **trace; const int *step;
    K3IoMeter *io;                           /* may be NULL */
    void (*idle)(void *ctx); void *idle_ctx; /* called when no expert read is left */
} K3ECacheSink;
const int *k3_ecache_busy(const K3ECache *c);
K3ECache *k3_ecache_new(K3Model *m, int nslots, int qdepth, K3ECacheSink out, char *err,
                        size_t errlen);
void k3_ecache_free(K3ECache *c);
int k3_ecache_get(K3ECache *c, int L, int e, K3Expert *out);
void k3_ecache_prefetch(K3ECache *c, int L, const int *ids, int n);
void k3_ecache_guess(K3ECache *c, int L, const int *ids, int n);
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
