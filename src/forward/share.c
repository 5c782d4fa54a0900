/* share.c — a step's work split over the ranks of a run (comm.h; docs/DISTRIBUTED.md).
 *
 * Trunk matmuls are split by output rows (src/comm/split.c); routed experts by owner
 * (k3_expert_owner, src/engine/owners.c); moe.c gathers their outputs and sums them in id
 * order on every rank. With the buffers in a file (a prompt longer than memory holds:
 * runstate.c) a matmul goes K3_ACT_TOKENS tokens at a time and each block's pages are
 * dropped after it, so what stays mapped is one block of its rows. */
#include "comm.h"
#include "k3.h"
#include <string.h>

/* A matrix in memory goes in blocks of tokens of about MM_MACS multiply-adds (64 to 256
 * tokens; layer 0's 33792 x 7168 MLP of the full-width model: 64, ~0.1 s) with an
 * interrupt check between: a long prompt's matmul is seconds of work; each output is the
 * same dot product, so the same bits. Not fewer than 64: the GEMM ran 0.87x at T = 16 and
 * 0.93x at T = 32 on those shapes (Zen 5, GFLOP per CPU second). A streamed one is
 * multiplied whole, its pieces in order
 * (stream.c checks between them). Over N ranks a matmul is split by rows and never
 * stopped half way (k3_halted is 0 there: every rank must reach each gather). */
#define MM_MACS 4e9
static int mm_tokens(const K3Mat *W) {
    const double t = MM_MACS / ((double)W->rows * W->cols);
    return t >= 256 ? 256 : t < 64 ? 64 : (int)t / 16 * 16;
}

/* W times T tokens in those blocks, with a look at the interrupt between them (e's, or
 * the running engine's when e is NULL); 1 when it stopped part way. Buffers in a file:
 * at most K3_ACT_TOKENS a block, each block's pages dropped after it. */
static int mm_blocks(K3Engine *e, float *Y, const K3Mat *W, const float *X, int T) {
    const int file = e && e->rs.in_file;
    const int step = file && mm_tokens(W) > K3_ACT_TOKENS ? K3_ACT_TOKENS : mm_tokens(W);
    for (int t = 0; t < T; t += step) {
        if (t > 0 && (e ? k3_halted(e) : k3_halt_poll())) return 1;
        k3_matmul(Y + (size_t)t * W->rows, W, X + (size_t)t * W->cols,
                  T - t < step ? T - t : step);
        if (file) k3_runstate_drop(&e->rs);
    }
    return 0;
}

static void drop_rs(void *rs) { k3_runstate_drop(rs); }

/* A streamed matrix at N = 1: whole, its pieces in order; with the buffers in a file the
 * row source goes in blocks of tokens and drops their pages (kernels.h, k3_act_drop). */
static void mm_streamed(K3Engine *e, float *Y, const K3Mat *W, const float *X, int T) {
    if (e->rs.in_file) k3_act_drop = (K3ActDrop){ drop_rs, &e->rs };
    k3_matmul_split(Y, W, X, T);
    k3_act_drop = (K3ActDrop){ NULL, NULL };
}

/* The output head: split over the ranks, or at N = 1 in those blocks with k3_halt_poll
 * between (the pinned lm_head over a dump's every row is a long product too). */
void k3_matmul_polled(float *Y, const K3Mat *W, const float *X, int T) {
    if (k3_comm_size() > 1) k3_matmul_split(Y, W, X, T);
    else mm_blocks(NULL, Y, W, X, T);
}

void k3_mm(K3Engine *e, float *Y, const K3Mat *W, const float *X, int T) {
    if (k3_halted(e)) return;
    k3_test_mm_hook(e);
    if (k3_comm_size() > 1) k3_matmul_split(Y, W, X, T);
    else if (W->src) mm_streamed(e, Y, W, X, T);
    else if (mm_blocks(e, Y, W, X, T)) return;
    k3_runstate_drop(&e->rs);
}

/* The projections of one sublayer in one gather: fewer collectives a layer, the same bits.
 * They run in the order given, the stream order (src/mem/stream.c) when one is streamed. */
void k3_mm_many(K3Engine *e, const K3MatJob *o, int n, int T) {
    if (k3_halted(e)) return;
    k3_test_mm_hook(e);
    if (k3_comm_size() > 1 || !e->rs.in_file) k3_matmul_split_many(o, n, T);
    else                                          /* N = 1, in a file: one by one, in order */
        for (int j = 0; j < n && !k3_halted(e); j++) {
            if (o[j].W->src) mm_streamed(e, o[j].Y, o[j].W, o[j].X, T);
            else if (mm_blocks(e, o[j].Y, o[j].W, o[j].X, T)) return;
        }
    k3_runstate_drop(&e->rs);
}

/* A matmul computed whole on this rank (a routed expert: its owner computes it). */
void k3_mm_local(K3Engine *e, float *Y, const K3Mat *W, const float *X, int T) {
    if (k3_halted(e)) return;
    k3_test_mm_hook(e);
    if (mm_blocks(e, Y, W, X, T)) return;
    k3_runstate_drop(&e->rs);
}

/* Every rank runs rank 0's command, so every rank takes the same steps; this checks it
 * (one 8-byte gather a step): the sequences' lengths, positions and ids of this step are
 * hashed and a rank whose step differs from rank 0's ends the run, naming the rank. */
void k3_share_step(const K3Seq *seq, int n) {
    if (k3_comm_size() == 1) return;
    uint64_t h = 0xcbf29ce484222325ULL;
#define MIX(v) (h = (h ^ (uint64_t)(uint32_t)(v)) * 0x100000001b3ULL)
    MIX(n);
    for (int q = 0; q < n; q++) {
        MIX(seq[q].T); MIX(seq[q].s->pos); MIX(seq[q].all_logits);
        for (int t = 0; t < seq[q].T; t++) MIX(seq[q].ids[t]);
    }
#undef MIX
    const int k = k3_comm_differs(h);
    if (k)
        k3_comm_abort(1, "rank %d's forward step differs from rank 0's (every rank must run "
                      "the same command on the same inputs)", k);
}
