/* runstate.c — the scratch of a forward pass, planned once (K3RunState in k3.h).
 *
 * One function lays every buffer out; called without a base it only counts, so the
 * size the memory plan prints and the bytes allocated cannot drift apart. Buffers
 * are 64-byte aligned. KDA, MLA, the MoE and the dense MLP never run at the same time,
 * so they share one region as large as the largest of them. The MLA score rows
 * ([heads][ctx]) are a second allocation, so that a context past the plan can grow
 * them without moving the buffers callers hold (rs->logits). */
#include "k3.h"
#include "kernels.h"
#include "tensors.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* A routed expert's scratch: its tokens' inputs xe, products g and u, outputs y. With the
 * buffers in a file an expert goes K3_ACT_TOKENS tokens at a time (moe.c), so this is
 * carved apart, in memory, and never dropped: faulting it back in after each block's drop
 * was half of a streamed prompt's page faults (docs/PERFORMANCE.md). */
static void expert_bufs(K3RunState *rs, const K3Config *c, Carve *cv, size_t T) {
    const size_t LAT = c->routed_expert_hidden_size, I = c->moe_intermediate_size;
    rs->moe.xe = TAKE_F(cv, T * LAT); rs->moe.y = TAKE_F(cv, T * LAT);
    rs->moe.g = TAKE_F(cv, T * I); rs->moe.u = TAKE_F(cv, T * I);
}
static size_t expert_scratch(K3RunState *rs, const K3Config *c, unsigned char *base) {
    Carve cv = { base, 0 };
    expert_bufs(rs, c, &cv, (size_t)(rs->max_T < K3_ACT_TOKENS ? rs->max_T : K3_ACT_TOKENS));
    return (cv.used + 63) & ~(size_t)63;
}

/* Lays rs out over base (NULL: counts only) and returns the bytes it needs; with the
 * buffers in a file, all but the experts' scratch (expert_scratch). */
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
    rs->moe.logit = TAKE_F(&cv, T * E); rs->moe.wsel = TAKE_F(&cv, T * E);
    rs->moe.sel = take(&cv, T * E);
    rs->moe.xl = TAKE_F(&cv, T * LAT); rs->moe.r = TAKE_F(&cv, T * LAT);
    if (!rs->in_file) expert_bufs(rs, c, &cv, T);
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

/* Kernels' scratch: the largest each slot gets over the layers' matrices (tensors.c),
 * lm_head and a routed expert's two shapes, MLA's beside */
size_t k3_runstate_scratch_bytes(const K3Config *c, int max_T, int ctx) {
    size_t slot[K3_SCRATCH_SLOTS] = { 0 };
    const int T = max_T > 0 ? max_T : 1, I = c->moe_intermediate_size;
    const int LAT = c->routed_expert_hidden_size;
    for (int i = 0; i < k3_n_layer_mats; i++)
        for (int L = 0; L < c->num_hidden_layers; L++)
            if (k3_mat_in_layer(&k3_layer_mats[i], c, L)) {
                k3_scratch_bound(T, k3_dim(c, k3_layer_mats[i].rows),
                                 k3_dim(c, k3_layer_mats[i].cols), slot);
                break;
            }
    k3_scratch_bound(T, c->vocab_size, c->hidden_size, slot);
    if (c->num_experts > 0) {
        k3_scratch_bound(T, I, LAT, slot);
        k3_scratch_bound(T, LAT, I, slot);
    }
    slot[K3_SCRATCH_MLA] = k3_mla_scratch_bytes(c, T, ctx);
    size_t b = 0;
    for (int i = 0; i < K3_SCRATCH_SLOTS; i++) b += slot[i];
    return b;
}

size_t k3_runstate_bytes(const K3Config *c, int max_T, int ctx, int logits_rows) {
    K3RunState rs = { 0 };
    rs.max_T = max_T > 0 ? max_T : 1; rs.ctx = ctx > 0 ? ctx : 1;
    rs.logits_rows = logits_rows > 0 ? logits_rows : 1;
    return layout(&rs, c, NULL) + score_bytes(c, rs.ctx);
}

int k3_runstate_act_tokens(int T) {
    return k3_comm_size() > 1 || T < K3_ACT_TOKENS ? T : K3_ACT_TOKENS;
}

/* The experts' loop's sums r and routing weights wsel (all T tokens' rows) stay mapped
 * from its first expert to its last, where they fit the matmul block's room with one
 * block of an expert's input and output rows beside (moe_holds; the plan is unchanged).
 * With every page dropped after each expert's block, r came back in again and again: each
 * token is one of 16 of 64 experts' a layer, so its row of r was faulted back in about 16
 * times a layer, read and then written (a write fault a page: 0.37M of the full-width
 * slice's 0.95M faults on a 1,024-token prompt), on one thread while the other waited. */
static size_t moe_held_bytes(const K3Config *c, size_t T) {
    const size_t LAT = c->routed_expert_hidden_size;
    return sizeof(float) * (T * (LAT + c->num_experts) +
                            (size_t)k3_runstate_act_tokens((int)T) * 2 * LAT) + 4 * 4096;
}
static int moe_holds(const K3Config *c, size_t T, size_t mm_bytes) {
    return c->num_experts > 0 && moe_held_bytes(c, T) <= mm_bytes;
}

/* One block of the widest matmul's input and output rows: K3_ACT_TOKENS tokens of them. */
static size_t mm_block_bytes(const K3Config *c, int max_T) {
    const size_t H = c->hidden_size, C = (size_t)c->kda_num_heads * c->kda_head_dim;
    const size_t D = c->kda_head_dim, MH = c->num_attention_heads;
    const size_t QH = c->qk_nope_head_dim + c->qk_rope_head_dim, VD = c->v_head_dim;
    const size_t R = c->kv_lora_rank + c->qk_rope_head_dim, QL = c->q_lora_rank;
    const size_t E = c->num_experts, LAT = c->routed_expert_hidden_size, M = mlp_width(c);
    const size_t io[] = { H + C, C + D, H + D, H + QL, QL + MH * QH, H + R, H + MH * VD,
                          MH * VD + H, H + E, 9 * E / 4 + LAT, H + LAT, 2 * LAT,
                          2 * LAT + H, H + M, 3 * H };
    size_t w = 0;
    for (size_t i = 0; i < sizeof io / sizeof io[0]; i++) if (io[i] > w) w = io[i];
    return sizeof(float) * (size_t)k3_runstate_act_tokens(max_T) * w;
}

/* What a forward of max_T rows keeps resident when its buffers live in a file: every
 * page is dropped after each block of K3_ACT_TOKENS tokens of a matmul (share.c, stream.c)
 * and of an expert's tokens (moe.c), and after each block of K3_ROW_BLOCK rows of the
 * row-wise steps (forward.c), so at most one block of one matmul's input and output rows
 * (or of the routing, an expert's gather or sum) is mapped at once, beside the rows of
 * one block in every buffer, the routing's choice bytes and token list (scanned whole
 * per expert) and the experts' scratch (in memory). Over N ranks a matmul is split by
 * rows and runs whole: all its rows. The experts' loop keeps its sums mapped only
 * inside the matmul block's room (moe_holds). */
size_t k3_runstate_resident_bytes(const K3Config *c, int max_T, int ctx, int logits_rows) {
    const size_t E = c->num_experts;
    K3RunState rs = { 0 };
    rs.max_T = max_T; rs.in_file = 1;
    const size_t scratch = expert_scratch(&rs, c, NULL);
    rs.max_T = max_T < K3_ROW_BLOCK ? max_T : K3_ROW_BLOCK;
    rs.ctx = 1; rs.logits_rows = logits_rows > 0 ? logits_rows : 1;
    const size_t block = layout(&rs, c, NULL);        /* one block of rows in every buffer */
    const size_t pages = 2 * 4096 * (size_t)(rs.n_blocks + 32);   /* partial pages */
    const size_t route = (size_t)max_T * (E + sizeof(int));   /* sel [T][E] bytes, tok */
    return mm_block_bytes(c, max_T) + block + route + pages + scratch +
           score_bytes(c, ctx > 0 ? ctx : 1);
}

/* The arena: anonymous memory, or (dir) a mapping of an unlinked file in dir. */
static void *arena_new(K3RunState *rs, size_t n, const char *dir, char *err, size_t errlen) {
    if (!dir) {
        void *a = NULL;
        if (posix_memalign(&a, 64, n)) a = NULL;
        if (!a) snprintf(err, errlen, "out of memory for the forward buffers (%.3f GB)",
                         n / 1e9);
        return a;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/k3-activations-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create the prompt's activation file in %s: %s (pick a "
                 "writable directory on a disk with --state-file-dir)", dir, strerror(errno));
        return NULL;
    }
    unlink(path);
    void *a = MAP_FAILED;
    if (!ftruncate(fd, (off_t)n)) a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (a == MAP_FAILED) {
        snprintf(err, errlen, "cannot map the prompt's activation file (%.3f GB) in %s: %s",
                 n / 1e9, dir, strerror(errno));
        close(fd);
        return NULL;
    }
    rs->fd = fd;
    rs->in_file = 1;
    return a;
}

int k3_runstate_open(K3RunState *rs, const K3Config *c, int max_T, int ctx, int logits_rows,
                     const char *dir, char *err, size_t errlen) {
    memset(rs, 0, sizeof *rs);
    rs->fd = -1;
    rs->max_T = max_T > 0 ? max_T : 1; rs->ctx = ctx > 0 ? ctx : 1;
    rs->logits_rows = logits_rows > 0 ? logits_rows : 1;
    rs->in_file = dir != NULL;
    size_t n = layout(rs, c, NULL);
    rs->map_bytes = n;
    if (!(rs->arena = arena_new(rs, n, dir, err, errlen))) { rs->in_file = 0; return -1; }
    rs->mla.scores = malloc(score_bytes(c, rs->ctx));
    const size_t sn = rs->in_file ? expert_scratch(rs, c, NULL) : 0;
    if (sn && posix_memalign(&rs->scratch, 64, sn)) rs->scratch = NULL;
    if (!rs->mla.scores || (sn && !rs->scratch)) {
        snprintf(err, errlen, "out of memory for the %s",
                 rs->mla.scores ? "experts' scratch" : "attention scores");
        k3_runstate_free(rs);
        return -1;
    }
    layout(rs, c, rs->arena);
    if (sn) expert_scratch(rs, c, rs->scratch);
    rs->bytes = rs->in_file ? k3_runstate_resident_bytes(c, rs->max_T, rs->ctx, logits_rows)
                            : n + score_bytes(c, rs->ctx);
    rs->moe_hold = rs->in_file && moe_holds(c, (size_t)rs->max_T, mm_block_bytes(c, rs->max_T));
    rs->n_experts = c->num_experts; rs->lat = c->routed_expert_hidden_size;
    return 0;
}

int k3_runstate_init(K3RunState *rs, const K3Config *c, int max_T, int ctx, int logits_rows) {
    char err[64];
    return k3_runstate_open(rs, c, max_T, ctx, logits_rows, NULL, err, sizeof err);
}

static void drop_span(uintptr_t a, uintptr_t b) {    /* the whole pages inside [a, b) */
    a = (a + 4095) & ~(uintptr_t)4095;
    b &= ~(uintptr_t)4095;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Unmaps every page of a file-backed arena (held: all but r's and wsel's): the bytes stay
 * in the file (and the page cache), a later touch maps them again; nothing is lost, only
 * residency bounded. */
void k3_runstate_drop(K3RunState *rs) {
    if (!rs->in_file) return;
    if (!rs->hold) { madvise(rs->arena, rs->map_bytes, MADV_DONTNEED); return; }
    /* held: all but the pages of wsel and r (wsel lies below r in the layout) */
    const uintptr_t base = (uintptr_t)rs->arena, end = base + ((rs->map_bytes + 4095) & ~4095);
    const uintptr_t w0 = (uintptr_t)rs->moe.wsel, r0 = (uintptr_t)rs->moe.r;
    const size_t T = (size_t)rs->max_T;
    drop_span(base, w0);
    drop_span(w0 + sizeof(float) * T * rs->n_experts, r0);
    drop_span(r0 + sizeof(float) * T * rs->lat, end);
}

void k3_runstate_hold(K3RunState *rs, int on) {
    rs->hold = on && rs->moe_hold;
    if (!on) k3_runstate_drop(rs);
}

void k3_runstate_add_rows(K3RunState *rs, float *p, const float *a, int T, int H, int copy) {
    for (int r0 = 0; r0 < T; r0 += K3_ROW_BLOCK) {
        const size_t o = (size_t)r0 * H, n = (size_t)k3_block_rows(T, r0) * H;
        if (copy) memcpy(p + o, a + o, n * sizeof(float));
        else for (size_t i = 0; i < n; i++) p[o + i] += a[o + i];
        k3_runstate_drop(rs);
    }
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
    if (rs->in_file) munmap(rs->arena, rs->map_bytes);
    else free(rs->arena);
    if (rs->fd >= 0 && rs->in_file) close(rs->fd);
    free(rs->mla.scores);
    free(rs->scratch);
    memset(rs, 0, sizeof *rs);
}
