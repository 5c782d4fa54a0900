/* mla.c — gated Multi-head Latent Attention with NoPE (docs/MODEL.md §3.3,
 * pitfalls 9-13), in the absorbed form over a latent cache.
 *
 * Only the normalised latent c' (kv_lora) and the shared k_pe (rope dims, never
 * rotated, never normalised) are cached per position. kv_b's rows are head-major:
 * per head nope key rows then v value rows. The key rows are folded into the query
 * (q_lat = W_k^T q_nope) and the value rows are applied after the weighted sum of
 * latents. Scores use all nope+rope dims and the scale (nope+rope)^-1/2. */
#include "k3.h"
#include "fault.h"
#include "pool.h"
#include <math.h>
#include <string.h>

/* Row r of a BF16/F32 matrix as f32 (tmp holds the widened copy when needed). */
static const float *row_f32(const K3Mat *W, int r, float *tmp) {
    size_t o = (size_t)r * W->cols;
    if (W->type == K3_W_F32) return (const float *)W->w + o;
    for (int j = 0; j < W->cols; j++) tmp[j] = k3_bf16_to_f32(((const uint16_t *)W->w)[o + j]);
    return tmp;
}

/* One head over the chunk's T tokens; heads are independent, so they run in
 * parallel on the pool and the bits do not depend on the thread count. */
typedef struct {
    const K3Layer *ly;
    const K3State *s;
    int L, t0, T, NH, NOPE, ROPE, VD, R, QH;  /* tokens t0.. of the sequence's T */
    float scale;
    const float *q;
    float *o, *scores;                         /* scores: [heads][ctx] (run state) */
    int ctx;
} MlaHeads;

#define QG 16                                  /* a head's tokens at a time, at most */
/* keys per block: 16 x (R + ROPE) floats, 36 KB at K3's widths, stay in the L1 while the G
 * tokens use them (64 keys, 144 KB, came from the L2: the scores and sums ran 1.65x slower
 * in a loop of this shape on Zen 5; 8, 12, 24 and 32 keys were slower than 16) */
#define KB 16
#define QG_BYTES (1u << 20)                    /* the tokens' scores and latents, at most */

/* mla_head's G tokens' rows: G tokens of row floats, at most QG_BYTES; a row is a token's
 * scores over n0 + T - 1 <= ctx keys, its q_lat and o_lat */
size_t k3_mla_scratch_bytes(const K3Config *c, int T, int ctx) {
    const size_t row = (size_t)(ctx > T ? ctx : T) + 2 * (size_t)c->kv_lora_rank;
    size_t b = sizeof(float) * row * (size_t)(T < QG ? T : QG);
    return T < 2 ? 0 : b < QG_BYTES ? b : QG_BYTES;
}

/* One head over the block's tokens, G at a time: each block of KB cached keys is used by
 * the G tokens while it is in the L2 (one token at a time read the whole cache from memory
 * for every token). A token's scores are still complete before its softmax, and its sums
 * run over the keys in order: the bits of one token at a time. The G tokens' rows are
 * per-thread scratch of at most 1 MB; without it, one token in the planned row. */
/* k3_softmax with the exponentials through the path's twin (k3_expf_n: the same bits as
 * k3_expf, a ymm of doubles at a time): the scalar k3_expf of every score was ~1.5% of the
 * 1,024-token prefill's samples (perf, Zen 5). */
static void softmax(float *x, int n) {
    if (n <= 0) return;
    float m = x[0];
    for (int i = 1; i < n; i++) if (x[i] > m) m = x[i];
    for (int i = 0; i < n; i++) x[i] = x[i] - m;
    k3_expf_n(x, x, n);
    const float inv = 1.0f / k3_sum(x, n);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static void mla_head(void *arg, int h) {
    const MlaHeads *a = arg;
    const int R = a->R, NOPE = a->NOPE, ROPE = a->ROPE, VD = a->VD, NH = a->NH, QH = a->QH;
    const int L = a->L, n0 = a->s->pos + a->t0 + 1;   /* token t attends to n0 + t keys */
    const float *cache = a->s->mla_c[L], *pe = a->s->mla_pe[L];
    float tmp[R], rope[KB];
    K3Mat wv = a->ly->kv_b;                      /* the head's value rows of kv_b */
    size_t off = (size_t)(h * (NOPE + VD) + NOPE) * R;
    wv.rows = VD;
    wv.w = wv.type == K3_W_F32 ? (const void *)((const float *)wv.w + off)
                               : (const void *)((const uint16_t *)wv.w + off);
    const size_t row = (size_t)(n0 + a->T - 1) + 2 * (size_t)R;   /* scores, q_lat, o_lat */
    int G = (int)(QG_BYTES / (sizeof(float) * row));
    G = G < 1 ? 1 : G > QG ? QG : G > a->T ? a->T : G;
    if (k3_faults()->mla_tokens > 0 && G > k3_faults()->mla_tokens)   /* tests */
        G = (int)k3_faults()->mla_tokens;
    float *buf = G > 1 ? k3_scratch_slot(K3_SCRATCH_MLA, sizeof(float) * row * G) : NULL;
    float one[2 * R];
    if (!buf) G = 1;
    for (int t0 = 0; t0 < a->T; t0 += G) {
        const int g = a->T - t0 < G ? a->T - t0 : G;
        float *sc[QG], *qlat[QG], *olat[QG];
        for (int i = 0; i < g; i++) {
            sc[i] = buf ? buf + row * i : a->scores + (size_t)h * a->ctx;   /* pos + T <= ctx */
            qlat[i] = buf ? sc[i] + row - 2 * (size_t)R : one;
            olat[i] = qlat[i] + R;
            memset(qlat[i], 0, sizeof(float) * 2 * R);
        }
        /* q_lat = sum_d q_nope[d] * kv_b[h*(NOPE+VD) + d][:] (key rows folded into q) */
        for (int d = 0; d < NOPE; d++) {
            const float *kr = row_f32(&a->ly->kv_b, h * (NOPE + VD) + d, tmp);
            for (int i = 0; i < g; i++)
                k3_axpy(qlat[i], a->q[((size_t)(t0 + i) * NH + h) * QH + d], kr, R);
        }
        /* sc[j] = (q_lat . c_j + q_pe . pe_j) * scale */
        const int nl = n0 + t0 + g - 1;          /* the last token's keys */
        for (int j0 = 0; j0 < nl; j0 += KB)
            for (int i = 0; i < g; i++) {
                const int n = n0 + t0 + i, nj = n - j0 < KB ? n - j0 : KB;
                const float *qpe = a->q + ((size_t)(t0 + i) * NH + h) * QH + NOPE;
                if (nj <= 0) continue;
                k3_dots(sc[i] + j0, qlat[i], cache + (size_t)j0 * R, R, nj, R);
                k3_dots(rope, qpe, pe + (size_t)j0 * ROPE, ROPE, nj, ROPE);
                for (int j = 0; j < nj; j++) sc[i][j0 + j] = (sc[i][j0 + j] + rope[j]) * a->scale;
            }
        for (int i = 0; i < g; i++) softmax(sc[i], n0 + t0 + i);
        for (int j0 = 0; j0 < nl; j0 += KB)      /* o_lat += sc[j] c_j, j = 0, 1, ... */
            for (int i = 0; i < g; i++) {
                const int n = n0 + t0 + i, nj = n - j0 < KB ? n - j0 : KB;
                if (nj > 0) k3_axpys(olat[i], sc[i] + j0, cache + (size_t)j0 * R, R, nj, R);
            }
        for (int i = 0; i < g; i++)               /* v rows after the sum */
            k3_matmul(a->o + ((size_t)(t0 + i) * NH + h) * VD, &wv, olat[i], 1);
    }
}

void k3_mla(K3Engine *e, const K3Layer *ly, const K3Seq *seq, int n, int L, const float *x,
            float *out) {
    const K3Config *c = &e->m.cfg;
    const int NH = c->num_attention_heads, NOPE = c->qk_nope_head_dim, ROPE = c->qk_rope_head_dim;
    const int VD = c->v_head_dim, R = c->kv_lora_rank, QH = NOPE + ROPE, QL = c->q_lora_rank;
    const float mla_eps = 1e-6f;               /* q_a / kv_a norms: KimiRMSNorm default */
    float *cq = e->rs.mla.cq, *q = e->rs.mla.q, *kva = e->rs.mla.kva;
    float *G = e->rs.mla.G, *o = e->rs.mla.o;
    int T = 0;
    for (int i = 0; i < n; i++) T += seq[i].T;

    /* projections over every row of the step */
    k3_mm(e, cq, &ly->q_a, x, T);
    for (int t = 0; t < T; t++) {
        if (t % K3_ROW_BLOCK == 0) k3_runstate_drop(&e->rs);   /* buffers in a file */
        k3_rmsnorm(cq + (size_t)t * QL, cq + (size_t)t * QL, ly->q_a_norm, QL, mla_eps);
    }
    const K3MatJob proj[] = { { q, &ly->q_b, cq }, { kva, &ly->kv_a, x }, { G, &ly->g, x } };
    k3_mm_many(e, proj, c->mla_use_output_gate ? 3 : 2, T);
    /* the cache and attention per sequence, on its rows */
    for (int i = 0, r = 0; i < n; r += seq[i].T, i++) {
        K3State *s = seq[i].s;
        const int Ti = seq[i].T;
        /* append these latents to the cache first: token t attends to 0..pos+t */
        for (int t = 0; t < Ti; t++) {
            if (t % K3_ROW_BLOCK == 0) k3_runstate_drop(&e->rs);
            const float *a = kva + (size_t)(r + t) * (R + ROPE);
            k3_rmsnorm(s->mla_c[L] + (size_t)(s->pos + t) * R, a, ly->kv_a_norm, R, mla_eps);
            memcpy(s->mla_pe[L] + (size_t)(s->pos + t) * ROPE, a + R, sizeof(float) * ROPE);
        }
        k3_runstate_drop(&e->rs);
        for (int b0 = 0; b0 < Ti; b0 += K3_ROW_BLOCK) {   /* K3_ROW_BLOCK tokens at a time */
            if (k3_halted(e)) return;            /* the state is reset by the caller */
            const int nb = k3_block_rows(Ti, b0);
            MlaHeads heads = { ly, s, L, b0, nb, NH, NOPE, ROPE, VD, R, QH,
                               1.0f / sqrtf((float)QH), q + (size_t)(r + b0) * NH * QH,
                               o + (size_t)(r + b0) * NH * VD, e->rs.mla.scores, e->rs.ctx };
            k3_pool_run(mla_head, &heads, NH);
            k3_runstate_drop(&e->rs);
        }
    }
    /* output gate σ(W_g x) on the concatenated heads, before o_proj */
    if (c->mla_use_output_gate)
        for (int t0 = 0; t0 < T; t0 += K3_ROW_BLOCK) {
            const size_t o0 = (size_t)t0 * NH * VD;
            k3_sigmoid_mul(o + o0, G + o0, (size_t)k3_block_rows(T, t0) * NH * VD);
            k3_runstate_drop(&e->rs);
        }
    k3_mm(e, out, &ly->o, o, T);
}
