/* draft_loop.h — generation with a DSpark draft model (--draft DIR, include/dspark.h), for
 * the one-shot command (src/run) and chat (src/chat): the draft's context follows the
 * target's committed positions, every step drafts a block from the anchor (the token just
 * emitted), and spec.h's exact verify keeps what the target agrees with, so the ids and
 * logits are those of the run without a draft. */
#ifndef K3_DRAFT_LOOP_H
#define K3_DRAFT_LOOP_H
#include "dspark.h"
#include "outfile.h"

typedef struct K3DraftLoop K3DraftLoop;
typedef struct {
    long blocks;              /* draft forwards */
    long proposed, accepted;  /* drafts verified, and kept */
    long rows;                /* rows the verify passes fed (the anchor and the drafts) */
    double seconds;           /* in the draft: blocks and context ingestion */
} K3DraftStats;

/* Opens the draft and installs its tap in e (which must outlive it); block: rows per draft
 * (1..7); fixed: every block verifies them all (--draft-block), else each block verifies
 * the drafts the confidence head and the cost make worth it (kappa: one more verified
 * position's cost over a step, spec.h's step_cost); either way blocks run while an account
 * of their accepted drafts against their bytes, credited a little every generated position,
 * is not below zero (docs/DRAFT.md). Until
 * k3_draft_prefilled, every forward's rows are committed positions (the prompt) and go
 * into the draft's context as each forward ends. */
int k3_draft_open(K3DraftLoop **out, const char *dir, K3Engine *e, int block, int fixed,
                  double kappa, int quiet, char *err, size_t errlen);
/* After the prompt's prefill: its positions are all in the draft's context. */
int k3_draft_prefilled(K3DraftLoop *r, char *err, size_t errlen);
/* The drafts to verify after anchor (the token at the draft's next position), at most room:
 * writes draft[0..k) and returns k (0: a plain step), or -1 with err. gen_pos: the index
 * of the next generated token (the test hook's offset). */
int k3_draft_block(K3DraftLoop *r, int anchor, long gen_pos, int room, int *draft, char *err,
                   size_t errlen);
/* After a forward of the anchor and k drafts of which the target kept n_keep positions (the
 * anchor and the accepted drafts): those rows' taps go into the context. */
int k3_draft_keep(K3DraftLoop *r, int k, int n_keep, char *err, size_t errlen);

/* Several sequences (batch, serve): n loops, one per sequence slot, over one engine: out[0]
 * holds the engine's tap (k3_draft_taps: the rows of the last forward, every sequence's in
 * step order), and the caller feeds each loop's context from its sequence's rows: a
 * prompt's with k3_draft_ingest, a decode step's with k3_draft_keep_rows (the rows of its
 * forward: the anchor and the k drafts). Past the draft's max_position_embeddings a
 * sequence drafts no more (plain steps). k3_draft_reset: the slot's next sequence. */
int k3_draft_open_seqs(K3DraftLoop **out, int n, const char *dir, K3Engine *e, int block,
                       int fixed, double kappa, int quiet, char *err, size_t errlen);
const float *k3_draft_taps(const K3DraftLoop *r, int *rows, int *width);
int k3_draft_ingest(K3DraftLoop *r, const float *taps, int n, char *err, size_t errlen);
int k3_draft_keep_rows(K3DraftLoop *r, const float *taps, int k, int n_keep, char *err,
                       size_t errlen);
void k3_draft_reset(K3DraftLoop *r);
int k3_draft_stale(const K3DraftLoop *r);   /* 1: past max_position_embeddings (no drafts) */
/* The test hook with several sequences: K3_TEST_DRAFT_ORACLE holds ';'-separated lists
 * (each a sequence's generated ids), and the loop uses the first whose start equals
 * gen[0..n), the sequence's generated ids so far (none: the model's own drafts). */
void k3_draft_history(K3DraftLoop *r, const int *gen, long n);

/* A conversation (chat) instead of one prompt: the context follows st, which holds
 * positions [0, st->pos). Every forward but a verify's (between k3_draft_block returning
 * k > 0 and k3_draft_keep) commits all its rows: they go into the context as it ends when
 * they continue it, after it is cut back to where the forward began (a rewind of st seen).
 * A block is drafted only while the context covers exactly [0, st->pos), else 0 (a plain
 * step; so too past the draft's max_position_embeddings). A state whose positions are not
 * those the context saw (loaded from a file) calls k3_draft_truncate first. st may change
 * (NULL: the one-prompt mode). */
void k3_draft_follow(K3DraftLoop *r, const K3State *st);
void k3_draft_truncate(K3DraftLoop *r, int P);   /* keep [0, P); a verify is abandoned */
int k3_draft_pos(const K3DraftLoop *r);           /* positions in the draft's context */
/* A failure inside a forward's tap (ingestion): 1 with err once, then 0. */
int k3_draft_failed(K3DraftLoop *r, char *err, size_t errlen);

/* --dump-draft FILE: each block as a record of little-endian int32 P (its anchor's
 * position), N (rows), V (vocabulary), int32 drafts[N], float32 confidences[N] (c_r), float32
 * logits[N][V] (base + Markov bias along the greedy chain); written through outfile.h and
 * put in place by k3_draft_finish (a run that fails keeps the old file). */
int k3_draft_dump(K3DraftLoop *r, const char *path, char *err, size_t errlen);
int k3_draft_finish(K3DraftLoop *r, char *err, size_t errlen);
const K3DraftStats *k3_draft_stats(const K3DraftLoop *r);
void k3_draft_close(K3DraftLoop *r);

/* Kept states (chat --save-state / --load-state, chat_state.c): the draft's context goes
 * with the target's, so a resumed conversation drafts at once. Its identity (dspark.h) and
 * shape; a layer's context rows ([P][kv_lora] latents, kpe: [P][rope] k_pe); restore sets
 * the context to P positions (the state's) whose rows the caller then writes (a failed read:
 * k3_draft_truncate(r, 0)). */
uint64_t k3_draft_identity(const K3DraftLoop *r);
void k3_draft_ctx_shape(const K3DraftLoop *r, int *layers, int *kv_lora, int *rope);
float *k3_draft_ctx_rows(K3DraftLoop *r, int l, int kpe);
int k3_draft_restore(K3DraftLoop *r, int P, char *err, size_t errlen);
#endif
