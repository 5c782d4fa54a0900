/* mem.h — where the bytes live: the memory plan, budgets and presets, and the storage
 * behind weights.h when a budget is given (src/mem): a pinned trunk prefix and the rest
 * (from `k3 pack`), lm_head included, streamed in pieces through a read-ahead window, and
 * the routed-expert cache fed by a pthread I/O pool. The two budgets are the ceiling of
 * the process (plan.c). Budgets only decide where bytes live; every path hands
 * the kernels the same bytes, so ids and logits are bit-identical at every budget. */
#ifndef K3_MEM_H
#define K3_MEM_H
#include <stdint.h>
#include <stdio.h>
#include "k3.h"

#define K3_GB 1e9
#define K3_BUDGET_UNSET (-1.0)
#define K3_BUDGET_AUTO  (-2.0)

/* A draft model (--draft DIR, dspark.h's k3_dspark_plan_file) in the plan; weights 0: none.
 * Pinned when --trunk-gb has room for it beside the working minimum (before the trunk's
 * prefix: a block reads all of it and a step's ingestion part of it again), else streamed:
 * its mapping's pages dropped as each piece of rows is multiplied (src/draft). */
typedef struct {
    uint64_t weights;             /* what a block reads: its tensors bar embed_tokens, and
                                   * the f32 copies of its norms */
    uint64_t window;              /* streamed: the most of them mapped at once, and the
                                   * pieces' scatter rows */
    uint64_t ingest;              /* context_proj and every kv_a: read again by a step's
                                   * context ingestion */
    uint64_t fixed;               /* a block's buffers, ingestion rows, --dump-draft's row */
    uint64_t tap_row;             /* the taps of one forward row (num_target_layers x hidden) */
    uint64_t pos_bytes;           /* context cache a position (every layer's latent, k_pe) */
    uint64_t att_row;             /* attention scratch a thread: 2 floats a position */
    uint64_t att_fixed;           /* and 3 kv_lora + 2 x 7 floats (the block) */
    int max_pos;                  /* the context never passes max_position_embeddings */
} K3DraftPlan;

/* The vision tower (images: --image, chat's /image) in the plan; weights 0: none. Resident
 * while images run (read once an image); an image of L patches takes fixed + L x act_pp of
 * the tower's buffers and L x io_pp of its own (patches, then rows: vision.h's
 * k3_vision_image_bytes). patches: the largest image planned for (K3_VISION_MAX_PATCHES when
 * any may come); all_patches: every image the run holds at once (>= patches). The plan
 * lowers them to what fits (k3_mem_vision_patches). */
typedef struct K3VisionPlan {
    uint64_t weights, fixed, act_pp, io_pp;
    uint64_t held;                /* of those, bytes the process holds already (decoded
                                   * patches: in its RSS, "process so far") */
    long patches, all_patches;
    int fill;                     /* images may come later (chat): the text model's budgets
                                   * and chunk first, the tower gets what is left (up to
                                   * patches); else the images are known: planned first */
    int per_seq;                  /* each sequence's images live at once (serve, a streamed
                                   * batch): all_patches = the plan's seqs x patches, and
                                   * patches bounds a sequence's images together */
} K3VisionPlan;

/* The memory flags (--trunk --trunk-gb --cache-gb --preset --ctx --verbose
 * --dump-cache-trace --verify-reads) and what the caller plans for. */
typedef struct {
    const char *trunk_dir;        /* --trunk DIR (packed by `k3 pack`), NULL = resident */
    double trunk_gb, cache_gb;    /* GB (1e9 bytes); K3_BUDGET_UNSET / K3_BUDGET_AUTO */
    int ctx;                      /* positions the MLA cache must hold */
    int chunk;                    /* largest number of tokens in one forward (prefill) */
    int chunk_auto;               /* chunk is the most wanted: the plan lowers it to the
                                   * largest that fits beside the budgets */
    int logits_rows;              /* rows of logits the caller keeps */
    int undo_T;                   /* a speculative verify's undo log, up to undo_T rows a
                                   * sequence (spec.h: the KDA state copied, each row's
                                   * inputs); 0: no speculation */
    int seqs;                     /* sequences in flight (KDA state + MLA cache each); <= 1: one */
    int seqs_auto;                /* seqs is the most wanted: the plan lowers it to what fits */
    int state_file;               /* 0 resident; 1 KDA states in a state file, 2 the MLA
                                   * caches too (statefile.h); -1 the plan picks (batch) */
    const char *state_dir;        /* --state-file-dir DIR (NULL: $TMPDIR, /tmp) */
    const char *trace_dir;        /* --dump-cache-trace DIR */
    const char *expert_use;       /* --expert-use FILE: a cache trace the split follows */
    int read_ahead;               /* --read-ahead on: decode reads the next layer's guessed
                                   * experts while this layer computes (forward/readahead.c) */
    int verbose, quiet;
    int brief;                    /* a plan with every byte resident in one line (the one-shot
                                   * run; --verbose: the table) */
    int verify_reads;             /* --verify-reads: streamed trunk layers checked on every read */
    int io_depth;                 /* --io-depth N: reads in flight (trunk chunks, experts) */
    double piece_mb;              /* --piece-mb X: trunk piece size (0: the plan's) */
    int piece_rows;               /* --piece-rows N (tests): rows per trunk piece */
    int act_file;                 /* set by the plan: the forward buffers in a file (a
                                   * prompt longer than memory holds, read once) */
    K3DraftPlan draft;            /* --draft DIR: its share (zero: no draft) */
    K3VisionPlan vision;          /* images: the tower's share (zero: none) */
} K3MemOpts;
void k3_mem_opts_init(K3MemOpts *o);

typedef struct {
    uint64_t trunk_bytes, trunk_reads;        /* streamed layer reads (pinned loads not counted) */
    uint64_t trunk_load_bytes;                /* pinned layers read at start */
    uint64_t expert_bytes, expert_reads;      /* bytes and reads issued for experts */
    uint64_t expert_req, expert_hits;         /* requests; hits = resident before the step asked */
    uint64_t expert_retries, expert_failed;
    double io_wait_s;                         /* compute thread blocked on trunk or expert reads */
    double trunk_read_s, expert_read_s;       /* summed time inside reads (I/O threads) */
    uint64_t head_bytes;                      /* lm_head bytes streamed (also in trunk_bytes) */
    double disk_busy_s;                       /* wall time with any read in flight */
    int io_depth_max;                         /* most reads in flight at once */
    uint64_t ahead_max;                       /* most window bytes read ahead of the matmuls */
    /* --read-ahead: experts read on a guess of the next layer's routing (decode), those
     * a later request used, those evicted unused; their bytes are in expert_bytes */
    uint64_t guess_reads, guess_bytes, guess_used, guess_wasted;
} K3MemStats;

/* Plans memory for model m (printed unless quiet), refuses with exit 1 when the plan does
 * not fit, then sets up the trunk, lm_head and the expert cache. 0 with *out set, or an
 * exit code with the message in err. */
int k3_mem_open(K3Model *m, const K3MemOpts *o, K3Mem **out, char *err, size_t errlen);
void k3_mem_close(K3Mem *x);
K3Weights *k3_mem_weights(K3Mem *x);          /* the storage the forward pass uses */
const K3MemStats *k3_mem_stats(const K3Mem *x);
/* The bytes the plan counted for the forward buffers (k3_runstate_bytes). */
uint64_t k3_mem_buffer_bytes(const K3Mem *x);
/* The prefill chunk the plan chose (the forward buffers' max_T). */
int k3_mem_chunk(const K3Mem *x);
/* The directory of the file the forward buffers map (the plan put them there), or NULL. */
const char *k3_mem_act_dir(const K3Mem *x);
/* The sequences the plan admits and where their states live (K3_STATES_*, statefile.h). */
int k3_mem_seqs(const K3Mem *x);
int k3_mem_state_mode(const K3Mem *x);
/* 1 when the plan streams the draft model's weights (K3MemOpts.draft; NULL x: 0). */
int k3_mem_draft_streamed(const K3Mem *x);
/* 1 when the plan counted a draft (K3MemOpts.draft given; NULL x: 0). */
int k3_mem_draft_planned(const K3Mem *x);
/* The most patches an image may have under the plan (K3MemOpts.vision: the largest asked
 * for, lowered to what fits beside the rest; 0: the tower does not fit; -1: not planned, or
 * NULL x). An image over it is refused (vision.h's k3_vision_fit_size: the size that fits). */
long k3_mem_vision_patches(const K3Mem *x);

/* Reports (x may be NULL: nothing): one line per forward on stderr (verbose), the
 * summary, and JSON fields (each line "  \"key\": value,\n") for --out. */
void k3_mem_step(K3Mem *x, int step, int ntok, double seconds, int verbose);
/* 1 when the plan was printed as its one line (every byte resident, nothing tight): a
 * one-shot run's report then leaves out the I/O summary (unless --verbose). */
int k3_mem_brief(const K3Mem *x);
void k3_mem_summary(const K3Mem *x, FILE *f, double wall, double t_prefill, int n_gen,
                    double t_decode);
void k3_mem_json(const K3Mem *x, FILE *f, double wall);

/* Bytes in the unit that keeps them readable ("20.5 KB", "17.5 MB", "2.34 GB"). */
const char *k3_size_text(uint64_t b, char *out, size_t n);

/* Presets: --preset NAME sets both budgets (auto: the largest that fits MemAvailable). */
int k3_preset_apply(const char *name, double *trunk_gb, double *cache_gb);
void k3_presets_print(FILE *f);

/* ---- checks for `k3 doctor` ---- */
typedef void (*K3Report)(void *ctx, const char *problem);
/* Opens the packed trunk in dir against m (format, fingerprint, size, layout) and reads
 * every tensor against its checksum; each problem goes to report. Returns the number of
 * problems; *bytes and *tensors say what was checked. */
int k3_trunk_check(K3Model *m, const char *dir, K3Report report, void *ctx, uint64_t *bytes,
                   int *tensors);
/* Preset i (0.. while the name is not NULL) on model m with a packed trunk, for ctx
 * positions: the plan's bytes, and per decoded token the bytes streamed from disk and
 * read from memory (uniform routing assumed for the cache's hit rate: an estimate). */
typedef struct {
    uint64_t total, streamed, resident;
    int n_pinned, nslots, head_stream;
    double hit_rate;
    /* with a draft (k3_preset_cost_draft): pinned or streamed, the verify pass's undo log,
     * and what a block reads from disk (its trunk, its draft, the experts of rows tokens the
     * cache misses), of which the draft */
    int draft_pinned;
    uint64_t undo, block_read, draft_read;
} K3PresetCost;
const char *k3_preset_cost(const K3Model *m, int i, int ctx, K3PresetCost *out);
/* The same with the draft draft in the plan and verify passes of rows positions. */
const char *k3_preset_cost_draft(const K3Model *m, int i, int ctx, const K3DraftPlan *draft,
                                 int rows, K3PresetCost *out);
#endif
