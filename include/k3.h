/* k3.h — the Kimi K3 model: weights bound from a checkpoint, per-sequence state, the
 * scratch a forward pass runs in, and the forward pass itself (src/model, src/forward).
 * Where the weights' bytes live is behind weights.h; nothing here exits the process. */
#ifndef K3_K3_H
#define K3_K3_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "comm.h"
#include "config.h"
#include "kernels.h"
#include "st.h"
#include "weights.h"

enum { K3_OK = 0, K3_ERR_RUNTIME = 1, K3_ERR_USAGE = 2, K3_ERR_EXPERT = 4 };
/* Not an exit code (negative, so it cannot pass for one): k3_forward / k3_prefill
 * stopped because *K3Engine.interrupt was set. The caller decides what it means. */
enum { K3_INTERRUPTED = -1 };

struct K3Layer {
    int is_kda, is_moe;
    /* norms and attention-residual score vectors (res_norm ⊙ res_proj), widened to f32 */
    float *input_norm, *post_norm, *attn_res_w, *mlp_res_w;
    /* KDA (docs/MODEL.md §2.3) */
    K3Mat q, k, v, f_a, f_b, b, g, o;
    float *q_conv, *k_conv, *v_conv;          /* [C][K] */
    float *dt_bias, *A_log, *o_norm;          /* [C], [heads] (padding dropped), [D] */
    /* MLA (§2.4); g and o are shared with the KDA names */
    K3Mat q_a, q_b, kv_a, kv_b;
    float *q_a_norm, *kv_a_norm;
    /* FFN: dense MLP at layer 0, shared experts in MoE layers (§2.5, §2.6) */
    K3Mat gate, up, down;
    K3Mat router, lat_down, lat_up;
    float *router_bias, *lat_norm;
    const StTensor **experts;                 /* [num_experts][6]: w1p w1s w2p w2s w3p w3s */
};

typedef struct {
    K3Config cfg;
    StIndex *st;
    char dir[4096];
    uint64_t identity;                        /* k3_checkpoint_identity: config + shards */
    K3Layer *layers;
    K3Mat embed, lm_head;
    float *final_norm, *out_res_w;
    void **maps; uint64_t *map_len;           /* one read-only mapping per shard */
} K3Model;

/* One forward logged for k3_state_rollback (k3_state_mark; src/model/state.c), per KDA
 * layer L: the state and conv windows before it, and per position t < T the raw conv
 * inputs raw[L][t][3][C] and the recurrence inputs q, k (normalised), v, alpha [t][C],
 * beta [t][heads]. */
struct K3Undo {
    int max_T, T, armed, pos0;
    float **S0, **conv0;
    float **raw, **q, **k, **v, **alpha, **beta;
};

/* Rows that enter a sequence in place of its ids' embeddings (an image's projector rows,
 * K3_VISION.md §5.3): span i covers positions pos0..pos0+len-1 of the sequence with rows
 * [len][hidden]. The forward copies them over the embedding lookup of any step that
 * reaches those positions (a chunked prefill, a batch); nothing else changes. */
typedef struct { int pos0, len; const float *rows; } K3EmbedSpan;
typedef struct { const K3EmbedSpan *span; int n; } K3Embed;

/* Per-sequence decode state (§3.8): KDA recurrent state + conv windows, and the
 * MLA latent cache (normalised c' and k_pe per position). */
typedef struct {
    int pos;                                  /* positions already fed */
    int cap;                                  /* MLA cache capacity (positions) */
    float **kda_S;                            /* [L] -> [heads][D][D] or NULL */
    float **kda_conv;                         /* [L] -> [3][C][K-1] or NULL */
    float **mla_c;                            /* [L] -> [cap][kv_lora] */
    float **mla_pe;                           /* [L] -> [cap][rope] */
    struct K3Undo *undo;                      /* k3_state_mark: the next forward is logged */
    int in_file;                              /* K3_STATE_*_FILE: layers kept in a state file */
    int file_slot;                            /* its records there (1-based; 0: none) */
    int fresh;                                /* reset since its records were last written */
    const K3Embed *embed;                     /* NULL: every position embeds its id */
} K3State;
enum { K3_STATE_KDA_FILE = 1, K3_STATE_MLA_FILE = 2 };

/* One sequence's share of a forward step (k3_forward_seqs): its T tokens ids[0..T) go in
 * at positions s->pos.. and their rows follow the earlier sequences' rows in the step.
 * all_logits: logits for all T rows, else for the last only. */
typedef struct {
    K3State *s;
    const int *ids;
    int T, all_logits;
} K3Seq;

/* Every buffer a forward pass and its layers use, allocated once for chunks of up to
 * max_T tokens and contexts of ctx positions (forward/runstate.c). The layer kinds run
 * one at a time, so their buffers share one region. k3_runstate_bytes() is the figure
 * the memory plan counts; it is exactly what k3_runstate_init() allocates. */
typedef struct {
    int max_T, ctx, logits_rows;
    float *logits;                            /* [logits_rows][vocab] for the caller */
    float *h, *x, *a;                         /* [T][hidden]: mix, normalised input, sublayer */
    float **blocks; int n_blocks;             /* block snapshots, then the live partial sum */
    struct { float *q, *k, *v, *z, *G, *fa, *bl, *o; } kda;
    struct { float *cq, *q, *kva, *G, *o, *scores; } mla;   /* scores: [heads][ctx] */
    struct { float *logit, *wsel, *xl, *r, *xe, *g, *u, *y, *shared; unsigned char *sel;
             int *tok, *uni; } moe;
    struct { float *g, *u; } mlp;             /* dense MLP and the shared experts */
    void *arena; size_t bytes;                /* bytes: resident (what the plan counts) */
    size_t map_bytes; int in_file, fd;   /* in_file: the arena maps a file (k3_runstate_open) */
    void *scratch;                            /* in_file: the experts' scratch, in memory */
    int hold, moe_hold, n_experts, lat;       /* hold: drops keep moe.wsel, moe.r mapped */
} K3RunState;

/* What a forward pass runs on: the bound model, where its weights come from, and its
 * scratch. engine.h opens one for the command line; tests open one over the resident
 * weights with k3_engine_open_resident(). mem is the memory system behind w (NULL when
 * resident): the forward pass never touches it. interrupt (NULL = none), when it points
 * at a non-zero flag, stops k3_prefill between chunks and k3_forward inside a layer (at
 * each matmul, block of 256 tokens of one and expert: k3_halted). */
typedef struct K3Mem K3Mem;
/* Per-sequence state kept outside memory (src/mem/statefile.c; NULL: resident): begin
 * takes a step's sequences, acquire(L) points their in-file layer L at its bytes before
 * the layer runs, release(L) hands them back to be written, end waits for the writes. */
typedef struct K3Pager K3Pager;
typedef struct {
    int (*begin)(K3Pager *p, const K3Seq *seq, int n, char *err, size_t errlen);
    int (*acquire)(K3Pager *p, int L, char *err, size_t errlen);
    void (*release)(K3Pager *p, int L);
    int (*end)(K3Pager *p, char *err, size_t errlen);
} K3PagerOps;
struct K3Pager { const K3PagerOps *ops; };
/* Where a long forward is (src/forward/progress.c): the prompt tokens of the prefill under
 * way (set by k3_prefill and the scheduler), the layer, and when the next progress line is
 * due; gap_max is the longest stretch the forward ran without looking at the interrupt. */
typedef struct {
    int total, done;                          /* prompt tokens: all, before this forward */
    int step_T, L;                            /* prompt rows in this forward; its layer */
    double t0, next, last, gap_max;           /* gap_max: seconds, gap_L its layer */
    int gap_L, quiet;                         /* quiet: no progress lines */
    const char *who;                          /* the line's prefix: "k3" unless set */
} K3Progress;
/* A read-only look into the forward for a draft model (dspark.h): when set, fn is called
 * right after layer L's MLP output is added, with the AttnRes prefix p of the step's T
 * rows (every sequence's, in step order), to copy what it wants; it never writes p. done
 * (NULL: none) is called once a forward has finished whole, with its T rows. */
typedef struct K3Tap K3Tap;
struct K3Tap {
    void (*fn)(K3Tap *t, int L, const float *p, int T, int H);
    void (*done)(K3Tap *t, int T);
};
typedef struct {
    K3Model m;
    K3Weights *w;
    K3RunState rs;
    K3Mem *mem;
    K3Pager *pager;
    volatile sig_atomic_t *interrupt;
    int halt;                                 /* the forward saw the interrupt: it stops */
    K3Progress prog;
    void (*tick)(void *ctx); void *tick_ctx;  /* called from inside the forward every 0.1 s
                                               * (the server looks for gone clients) */
    double tick_next;
    int read_ahead;                           /* --read-ahead on (forward/readahead.c) */
    K3Tap *tap;                               /* NULL: no draft model looks */
} K3Engine;

/* ---- model (src/model) ---- */
/* Opens MODEL_DIR (config_path NULL = MODEL_DIR/config.json). Returns 0, or an exit
 * code (1 runtime / 2 config) with the message in err. */
int k3_model_open(K3Model *m, const char *dir, const char *config_path, char *err, size_t errlen);
void k3_model_close(K3Model *m);
/* madvise(advice) over the embedding's whole pages in the shard mapping (a row lookup:
 * mem.c advises it at open and drops a forward's rows; forward.c drops them by blocks of
 * rows when the forward's buffers live in a file) */
void k3_model_embed_advise(const K3Model *m, int advice);
/* The checkpoint's identity: the config.json bytes' hash, then each shard's name and
 * size. A packed trunk and a saved chat state carry it and are refused when it differs. */
uint64_t k3_checkpoint_identity(uint64_t config_hash, const StIndex *st);
/* Bytes of a tensor in its shard's read-only mapping (maps the shard on first use);
 * NULL with the reason in err. */
const void *k3_tensor_data(K3Model *m, const StTensor *t, char *err, size_t errlen);
/* The path of the shard whose mapping (in any open model) holds addr, or NULL. Reads
 * only: safe in a signal handler (a shard truncated under the run faults on its mapping
 * with SIGBUS; the CLI's handler names the shard). */
const char *k3_mapped_shard(const void *addr);
/* Bytes of one routed expert's six tensors; and an expert bound from pointers to them
 * (w1 packed, w1 scales, w2 packed, w2 scales, w3 packed, w3 scales). */
uint64_t k3_expert_bytes(const K3Config *c);
void k3_expert_bind(const K3Config *c, const void *const part[6], K3Expert *out);
/* Weights used in place from the shard mappings (model/resident.c). */
K3Weights *k3_weights_resident(K3Model *m);

K3State *k3_state_new(const K3Model *m);
/* A state whose KDA layers (K3_STATE_KDA_FILE) and MLA caches (K3_STATE_MLA_FILE) live in
 * a state file: only its resident layers are allocated; it cannot be marked. */
K3State *k3_state_new_in(const K3Model *m, int in_file);
int k3_state_reserve(const K3Model *m, K3State *s, int n_positions);   /* grow the MLA cache */
void k3_state_reset(const K3Model *m, K3State *s);
/* The layers both states hold in memory (not those in a state file), src's into d, which
 * is sized for src->pos positions (k3_state_reserve); pos is the caller's to set. */
void k3_state_copy(const K3Model *m, K3State *d, const K3State *src);
void k3_state_free(const K3Model *m, K3State *s);
/* Speculative verification: k3_state_mark arms a log for the next forward on s (of at most
 * max_T tokens): each KDA layer keeps its state and conv windows from before it (one copy)
 * and the recurrence inputs of each position (post-conv q, k, v, decay, beta; the raw conv
 * inputs). After that forward, k3_state_rollback keeps its first `keep` positions: the KDA
 * state is replayed from the copy over them (no weight is read), the conv windows rebuilt,
 * the MLA cache cut at pos - T + keep; the bits are those of a forward of only those
 * positions. Before the next forward it may be called again with a smaller keep (chat cuts
 * a reply that ends inside accepted drafts; test_spec checks it). 0, or -1 (out of memory;
 * mark) / (no marked forward; rollback). */
int k3_state_mark(const K3Model *m, K3State *s, int max_T);
int k3_state_rollback(const K3Model *m, K3State *s, int keep);

/* ---- scratch (src/forward/runstate.c) ---- */
size_t k3_runstate_bytes(const K3Config *c, int max_T, int ctx, int logits_rows);
/* One thread's scratch beside it (kernels.h k3_scratch_slot) over forwards of up to max_T
 * rows: the kernels' slots over every matrix of the model, MLA's; the plan counts it for
 * every thread (k3_threads) */
size_t k3_runstate_scratch_bytes(const K3Config *c, int max_T, int ctx);
int k3_runstate_init(K3RunState *rs, const K3Config *c, int max_T, int ctx, int logits_rows);
/* As k3_runstate_init, or with dir: the buffers in an unlinked file there, mapped (a prompt
 * whose activations do not fit the budget; forward.c drops the pages as it goes, so what is
 * resident is k3_runstate_resident_bytes). 0, or -1 with the reason in err. */
int k3_runstate_open(K3RunState *rs, const K3Config *c, int max_T, int ctx, int logits_rows,
                     const char *dir, char *err, size_t errlen);
#define K3_ROW_BLOCK 64                       /* rows per block of the row-wise steps */
/* The rows of the block that starts at row r0 of T: K3_ROW_BLOCK, fewer for the last */
static inline int k3_block_rows(int T, int r0) {
    return T - r0 < K3_ROW_BLOCK ? T - r0 : K3_ROW_BLOCK;
}
size_t k3_runstate_resident_bytes(const K3Config *c, int max_T, int ctx, int logits_rows);
/* Tokens of a T-token matmul mapped at once with the buffers in a file: K3_ACT_TOKENS
 * blocks at N = 1, all T over N ranks (a split matmul runs whole) */
int k3_runstate_act_tokens(int T);
void k3_runstate_drop(K3RunState *rs);
/* The experts' loop keeps the rows it sums into (moe.r) and their weights (moe.wsel)
 * mapped from its first expert to its last, where the plan's room lets it (rs->moe_hold):
 * on before that loop, off after it (moe.c; off drops them) */
void k3_runstate_hold(K3RunState *rs, int on);
/* p += a (copy: p = a) over T rows of H floats, K3_ROW_BLOCK rows at a time with their
 * pages dropped between (buffers in a file: only a block stays mapped) */
void k3_runstate_add_rows(K3RunState *rs, float *p, const float *a, int T, int H, int copy);
/* Grows the MLA score rows for a context past the planned one; 0 or -1 (out of memory). */
int k3_runstate_ctx(K3RunState *rs, const K3Config *c, int ctx);
void k3_runstate_free(K3RunState *rs);

/* ---- inside the forward (src/forward/progress.c) ---- */
/* The forward's check point, between matmuls, token blocks and experts: 1 when the
 * interrupt was seen in this forward (latched in e->halt; what runs next is skipped);
 * prints the prefill progress line when one is due, calls e->tick, runs the test hooks. */
int k3_halted(K3Engine *e);
/* A prefill of `total` prompt tokens begins (or goes on, when done > 0). */
void k3_progress_begin(K3Engine *e, int done, int total);
void k3_progress_end(K3Engine *e);   /* the prefill is over: its progress line, if any, ends */
/* k3_halted of the engine whose forward runs (k3_halt_running, set by the forward; 0 when
 * none): for code below the weights interface, e.g. a streamed matmul between its pieces. */
void k3_halt_running(K3Engine *e);
void k3_halt_forget(const K3Engine *e);   /* e is closing: no longer the running engine */
int k3_halt_poll(void);
/* The output head's k3_matmul (forward/share.c): split by rows over N ranks; at N = 1 in
 * blocks of tokens with k3_halt_poll between (the same bits). */
void k3_matmul_polled(float *Y, const K3Mat *W, const float *X, int T);
/* Test hooks in a forward of >= 50 prompt rows: K3_TEST_SLOW_MM_MS (each matmul sleeps,
 * until the first forward that stops),
 * K3_TEST_SIGINT_AT_EXPERT=N (SIGINT before the N-th expert). */
void k3_test_mm_hook(const K3Engine *e);
void k3_test_expert_hook(const K3Engine *e);

/* ---- forward pass (src/forward) ---- */
/* k3_matmul for the layers (forward/share.c): a trunk matrix split by output rows over
 * the ranks of the run (k3_matmul_split, comm.h; at N = 1 all of it); k3_mm_many: several,
 * in the order given, with one gather; k3_mm_local: computed whole here (a routed expert,
 * by its owner). With the run state in a file, its pages are dropped after. */
void k3_mm(K3Engine *e, float *Y, const K3Mat *W, const float *X, int T);
void k3_mm_many(K3Engine *e, const K3MatJob *o, int n, int T);
void k3_mm_local(K3Engine *e, float *Y, const K3Mat *W, const float *X, int T);
/* The rank that owns routed expert ex of layer L among n (src/engine/owners.c): (ex + L)
 * mod n, or the table k3_expert_owners_use built from a cache trace's measured use
 * (--expert-use: 0, or an exit code with file, line and field in err; every rank calls it;
 * a rank whose table differs is refused). k3_expert_use_share: this table's share of the
 * use for a rank (-1: no table). _clear: back to the default (the engine closes). */
int k3_expert_owner(int L, int ex, int n);
int k3_expert_owners_use(const K3Config *c, const char *path, char *err, size_t errlen);
/* The table for n ranks without the ranks' check (k3_expert_owners_use; tests). */
int k3_expert_owners_build(const K3Config *c, const char *path, int n, char *err,
                           size_t errlen);
double k3_expert_use_share(int rank);
void k3_expert_owners_clear(void);
/* Ends the run, naming the rank, when a rank's step differs from rank 0's (N > 1). */
void k3_share_step(const K3Seq *seq, int n);
/* One step over n sequences (each with its own state), sum of T <= rs.max_T tokens: each
 * layer and each selected expert is read once for all of them, and every sequence gets
 * the bits of its solo k3_forward. logits: the rows of each sequence in order (T rows
 * when its all_logits, else 1), [rows][vocab]. Advances each s->pos. Returns 0; an exit
 * code (1) with the reason in err: an I/O failure, or a NaN/Inf out of a sublayer (named
 * with its layer, sequence and position: the run must stop); or K3_INTERRUPTED
 * ("interrupted" in err): each s->pos is unchanged but the layers before the stop have
 * taken the tokens in, so reset the states (k3_state_reset) before the next forward on
 * them. The remaining layers are still acquired and released, in order, so the storage
 * stays in step. */
int k3_forward_seqs(K3Engine *e, const K3Seq *seq, int n, float *logits, char *err,
                    size_t errlen);
/* The one-sequence step: T tokens at s->pos.., logits [T][vocab] when all_logits, else
 * [vocab] for the last token; as k3_forward_seqs otherwise. */
int k3_forward(K3Engine *e, K3State *s, const int *ids, int T, float *logits, int all_logits,
               char *err, size_t errlen);
/* k3_forward over n tokens in chunks of at most `chunk` (<= 0 or above rs.max_T:
 * rs.max_T); identical bits for any chunk size. K3_INTERRUPTED as k3_forward (also
 * checked before each chunk): reset the state. */
#define K3_PREFILL_CHUNK 64
int k3_prefill(K3Engine *e, K3State *s, const int *ids, int n, int chunk, float *logits,
               int all_logits, char *err, size_t errlen);

/* Layer kinds (one file each). x is the normalised input [T][hidden] of the step's T
 * tokens (the rows of seq[0..n) in order); out [T][hidden]. The attention kinds run their
 * projections over all T rows, their recurrence / cache per sequence. */
void k3_kda(K3Engine *e, const K3Layer *ly, const K3Seq *seq, int n, int L, const float *x,
            float *out);
void k3_mla(K3Engine *e, const K3Layer *ly, const K3Seq *seq, int n, int L, const float *x,
            float *out);
/* The most one thread's MLA scratch (slot K3_SCRATCH_MLA) holds over forwards of up to T
 * rows at up to ctx positions (the memory plan's kernel scratch) */
size_t k3_mla_scratch_bytes(const K3Config *c, int T, int ctx);
void k3_moe(K3Engine *e, const K3Layer *ly, int L, const float *x, int T, float *out);
/* The k largest of choice[0..E) in falling order (ties: the lower index), into ids. */
void k3_topk(const float *choice, int E, int k, int *ids);
/* Decode (no prompt rows): storage starts reading the experts the next MoE layer's router
 * picks for x, L's input (--read-ahead on; a guess: never a bit of the result). */
void k3_read_ahead(K3Engine *e, int L, const float *x, int T);
void k3_dense_mlp(K3Engine *e, const K3Mat *gate, const K3Mat *up, const K3Mat *down,
                  const float *x, int T, float *out);
/* Attention-residual Mix (§3.1) over snapshots B[0..nb) and p, for T tokens. */
void k3_attnres_mix(float *out, const float *const *B, int nb, const float *p,
                    const float *w, int T, int H, float eps);
#endif
