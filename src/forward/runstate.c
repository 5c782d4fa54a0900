/* runstate.c — the scratch of a forward pass, planned once (K3RunState in k3.h).
 *
 * One function lays every buffer out; called without a base it only counts, so the
 * size the memory plan prints and the bytes allocated cannot drift apart. Buffers
 * are 64-byte aligned. KDA, MLA, the MoE and the dense MLP never run at the same time,
 * so they share one region as large as the largest of them. The MLA score rows
 * ([heads][ctx]) are a second allocation, so that a context past the plan can grow
 * them without moving the buffers callers hold (rs->logits). */
#include "k3.h"
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned char *base; size_t used; } Carve;

static void *take(Carve *c, size_t bytes) {
    size_t off = (c->used + 63) & ~(size_t)63;
    c->used = off + bytes;
    return c->base ? c->base + off : NULL;
}
#define TAKE_F(c, n) ((float *)take(c, sizeof(float) * (size_t)(n)))

/* The block snapshots a pass can hold: one per attention-residual block. */
static int n_blocks(const K3Config *c) {
    return c->num_hidden_layers / c->attn_res_block_size + 2;
}

/* The largest dense-MLP intermediate among the layers (dense MLP or shared experts). */
static size_t mlp_width(const K3Config *c) {
    size_t w = 0;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        size_t x = c->is_moe[L] ? (size_t)c->moe_intermediate_size * c->num_shared_experts
                                : (size_t)c->intermediate_size;
        if (x > w) w = x;
    }
    return w;
}

/* Lays rs out over base (NULL: counts only) and returns the bytes it needs. */
static size_t layout(K3RunState *rs, const K3Config *c, unsigned char *base) {
    const size_t T = (size_t)rs->max_T, H = c->hidden_size;
    Carve cv = { base, 0 };
    rs->logits = TAKE_F(&cv, (size_t)rs->logits_rows * c->vocab_size);
    rs->h = TAKE_F(&cv, T * H);
    rs->x = TAKE_F(&cv, T * H);
    rs->a = TAKE_F(&cv, T * H);
    rs->n_blocks = n_blocks(c);
    rs->blocks = take(&cv, sizeof(float *) * (size_t)rs->n_blocks);
    for (int i = 0; i < rs->n_blocks; i++) {
        float *b = TAKE_F(&cv, T * H);
        if (base) rs->blocks[i] = b;
    }
    const size_t shared = cv.used;            /* the layer kinds overlap from here */
    size_t end = shared;

    const size_t NH = c->kda_num_heads, D = c->kda_head_dim, C = NH * D;
    rs->kda.q = TAKE_F(&cv, T * C); rs->kda.k = TAKE_F(&cv, T * C);
    rs->kda.v = TAKE_F(&cv, T * C); rs->kda.z = TAKE_F(&cv, T * C);
    rs->kda.G = TAKE_F(&cv, T * C); rs->kda.o = TAKE_F(&cv, T * C);
    rs->kda.fa = TAKE_F(&cv, T * D); rs->kda.bl = TAKE_F(&cv, T * NH);
    if (cv.used > end) end = cv.used;

    cv.used = shared;
    const size_t MH = c->num_attention_heads, QH = c->qk_nope_head_dim + c->qk_rope_head_dim;
    const size_t R = c->kv_lora_rank, ROPE = c->qk_rope_head_dim, VD = c->v_head_dim;
    rs->mla.cq = TAKE_F(&cv, T * c->q_lora_rank);
    rs->mla.q = TAKE_F(&cv, T * MH * QH);
    rs->mla.kva = TAKE_F(&cv, T * (R + ROPE));
    rs->mla.G = TAKE_F(&cv, T * MH * VD);
    rs->mla.o = TAKE_F(&cv, T * MH * VD);
    if (cv.used > end) end = cv.used;

    cv.used = shared;                         /* the MoE, with the shared experts' MLP */
    const size_t E = c->num_experts, LAT = c->routed_expert_hidden_size;
    const size_t I = c->moe_intermediate_size;
    rs->moe.logit = TAKE_F(&cv, T * E); rs->moe.wsel = TAKE_F(&cv, T * E);
    rs->moe.sel = take(&cv, T * E);
    rs->moe.xl = TAKE_F(&cv, T * LAT); rs->moe.r = TAKE_F(&cv, T * LAT);
    rs->moe.xe = TAKE_F(&cv, T * LAT); rs->moe.y = TAKE_F(&cv, T * LAT);
    rs->moe.g = TAKE_F(&cv, T * I); rs->moe.u = TAKE_F(&cv, T * I);
    rs->moe.shared = TAKE_F(&cv, T * H);
    rs->moe.tok = take(&cv, sizeof(int) * T);
    rs->moe.uni = take(&cv, sizeof(int) * E);
    rs->mlp.g = TAKE_F(&cv, T * mlp_width(c));
    rs->mlp.u = TAKE_F(&cv, T * mlp_width(c));
    if (cv.used > end) end = cv.used;
    return (end + 63) & ~(size_t)63;
}

static size_t score_bytes(const K3Config *c, int ctx) {
    return sizeof(float) * (size_t)c->num_attention_heads * (size_t)ctx;
}

size_t k3_runstate_bytes(const K3Config *c, int max_T, int ctx, int logits_rows) {
    K3RunState rs = { 0 };
    rs.max_T = max_T > 0 ? max_T : 1; rs.ctx = ctx > 0 ? ctx : 1;
    rs.logits_rows = logits_rows > 0 ? logits_rows : 1;
    return layout(&rs, c, NULL) + score_bytes(c, rs.ctx);
}

int k3_runstate_init(K3RunState *rs, const K3Config *c, int max_T, int ctx, int logits_rows) {
    memset(rs, 0, sizeof *rs);
    rs->max_T = max_T > 0 ? max_T : 1; rs->ctx = ctx > 0 ? ctx : 1;
    rs->logits_rows = logits_rows > 0 ? logits_rows : 1;
    size_t n = layout(rs, c, NULL);
    if (posix_memalign(&rs->arena, 64, n)) { rs->arena = NULL; return -1; }
    rs->mla.scores = malloc(score_bytes(c, rs->ctx));
    if (!rs->mla.scores) { k3_runstate_free(rs); return -1; }
    layout(rs, c, rs->arena);
    rs->bytes = n + score_bytes(c, rs->ctx);
    return 0;
}

int k3_runstate_ctx(K3RunState *rs, const K3Config *c, int ctx) {
    if (ctx <= rs->ctx) return 0;
    int grown = rs->ctx;
    while (grown < ctx) grown = grown > (1 << 29) ? ctx : 2 * grown;
    float *sc = realloc(rs->mla.scores, score_bytes(c, grown));
    if (!sc) return -1;
    rs->bytes += score_bytes(c, grown) - score_bytes(c, rs->ctx);
    rs->mla.scores = sc; rs->ctx = grown;
    return 0;
}

void k3_runstate_free(K3RunState *rs) {
    free(rs->arena);
    free(rs->mla.scores);
    memset(rs, 0, sizeof *rs);
}
