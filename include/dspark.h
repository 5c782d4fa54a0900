/* dspark.h — the DSpark draft model (Inferact/Kimi-K3-DSpark; docs: the DSpark spec,
 * K3_DSPARK.md), a room of its own (src/draft) on k3's kernels: 5 dense MLA layers over
 * the target's taps, the target's embedding and lm_head borrowed, a rank-256 Markov head
 * and a confidence head.
 *
 * The loop (spec §5): install k3_dspark_tap(d) as the engine's tap; after every target
 * forward, the taps of the step's rows are in k3_dspark_tap_rows(); ingest those of the
 * positions now committed (the prompt; the anchor and the accepted drafts of a verify),
 * so that the draft's context covers exactly positions [0, P); then draft from the
 * anchor at position P. A rewind of the target to p' is k3_dspark_truncate(d, p').
 * All fp32 from the BF16 weights; every result has the same bits at any thread count
 * and kernel path (k3_matmul splits over outputs; attention over (row, head) pairs).
 * Functions returning int: 0, or an exit code (1 runtime, 2 usage/config) with the reason
 * in err. */
#ifndef K3_DSPARK_H
#define K3_DSPARK_H
#include <stddef.h>
#include "k3.h"
#include "mem.h"

#define K3_DSPARK_MAX_N 7                     /* block rows: the anchor and 6 mask rows */

typedef struct K3DSpark K3DSpark;

/* Opens the released folder dir (config.json + model.safetensors, BF16) for the target
 * engine e (which must outlive it): config checked key by key against the target, the
 * 68 tensors by name, dtype and shape (embed_tokens.weight is never read: the target's
 * embedding is used). Prints one line on stderr saying which RoPE it uses (quiet: not). */
int k3_dspark_open(K3DSpark **out, const char *dir, K3Engine *e, int quiet, char *err,
                   size_t errlen);
void k3_dspark_close(K3DSpark *d);

/* The tap to set as e->tap: copies, read-only, the AttnRes prefix p after each tapped
 * layer's MLP for every row of a step (all its sequences, in step order). The rows of
 * the last forward: [*rows][k3_dspark_tap_width()], taps in target_layer_ids order. */
K3Tap *k3_dspark_tap(K3DSpark *d);
const float *k3_dspark_tap_rows(const K3DSpark *d, int *rows);
int k3_dspark_tap_width(const K3DSpark *d);   /* num_target_layers x hidden */

/* Appends n positions P..P+n-1 to the context from their taps [n][tap_width]: c_p, then
 * per layer the latent and the roped k_pe (cached). */
int k3_dspark_ingest(K3DSpark *d, const float *taps, int n, char *err, size_t errlen);
/* Keeps positions [0, P) (P <= the current count; a rollback). */
void k3_dspark_truncate(K3DSpark *d, int P);
int k3_dspark_pos(const K3DSpark *d);         /* positions in the context: P */

/* One block of N rows (1..7): anchor (the token at position P) then N-1 mask rows.
 * drafts[N] (greedy over base + Markov bias, lowest index on ties), conf[N] (c_r, the
 * confidence of row r given rows < r accepted; NULL: not computed), logits [N][vocab]
 * (NULL: not kept). */
int k3_dspark_draft(K3DSpark *d, int anchor, int N, int *drafts, float *conf, float *logits,
                    char *err, size_t errlen);

/* A block stops before the lm_head when row 0's confidence c_0 is below gate (0, the
 * default: never): then drafts[0] = -1 and only conf[0] is written (the loop's test that no
 * verify length could pay: its lm_head rows are not read). */
void k3_dspark_set_gate(K3DSpark *d, float gate);

/* Inside a block, for tests (each NULL: not kept): the rows' embedding [N][hidden], the
 * residual after each draft layer [layers][N][hidden], after final_norm [N][hidden],
 * and the lm_head's base logits [N][vocab]. */
typedef struct { float *h_in, *h_layer, *hf, *base; } K3DSparkTrace;
int k3_dspark_draft_trace(K3DSpark *d, int anchor, int N, int *drafts, float *conf,
                          float *logits, const K3DSparkTrace *tr, char *err, size_t errlen);
/* For tests: k3_dspark_ingest that also writes c_p of the n positions to ctx [n][hidden];
 * the context cache of layer l, [P][kv_lora] and [P][rope]. */
int k3_dspark_ingest_ctx(K3DSpark *d, const float *taps, int n, float *ctx, char *err,
                         size_t errlen);
const float *k3_dspark_lat(const K3DSpark *d, int l);
const float *k3_dspark_kpe(const K3DSpark *d, int l);

/* Memory: the weights it reads (the mapped tensors bar embed_tokens, and the f32 copies
 * of its norms), and its buffers at ctx positions of context (cache, tap rows for the
 * engine's max_T, one block's scratch). */
size_t k3_dspark_bytes(const K3DSpark *d, int ctx);
size_t k3_dspark_weight_bytes(const K3DSpark *d);   /* the weights alone */
/* The config as read (for the loop and the plan). */
typedef struct {
    int hidden, inter, layers, heads, q_lora, kv_lora, nope, rope, v_dim, vocab;
    int markov_rank, mask_id, max_pos, n_taps, taps[16], block_size;
    float eps;
    int yarn;                                 /* 1: DeepSeek YaRN; 0: plain frequencies */
    double theta, factor, beta_fast, beta_slow, mscale, mscale_all_dim;
    int orig_max_pos;
} K3DSparkConfig;
const K3DSparkConfig *k3_dspark_config(const K3DSpark *d);

/* The draft in the memory plan (mem.h's K3DraftPlan) from its dimensions; from the folder's
 * config.json alone (no target: the shapes are checked at open): 0, or 2 with err. */
void k3_dspark_plan_of(const K3DSparkConfig *k, K3DraftPlan *out);
int k3_dspark_plan_file(const char *dir, K3DraftPlan *out, char *err, size_t errlen);
/* 1 when its weights are streamed (the engine's plan said so at open): each piece of rows is
 * multiplied from the mapping and its pages dropped, so at most the plan's window is mapped. */
int k3_dspark_streamed(const K3DSpark *d);
#define K3_DSPARK_PIECE (8u << 20)           /* streamed: bytes of rows multiplied at once */

/* Kept states (chat_state.c): which draft this is (config.json's bytes, the safetensors
 * file's size and 16 sampled 4 KB blocks of it: another revision differs), and the context
 * set to P positions (reserved; the caller then writes every layer's rows through
 * k3_dspark_lat / k3_dspark_kpe). */
uint64_t k3_dspark_identity(const K3DSpark *d);
int k3_dspark_set_pos(K3DSpark *d, int P, char *err, size_t errlen);
#endif
