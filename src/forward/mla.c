/* mla.c — gated Multi-head Latent Attention with NoPE (docs/MODEL.md §3.3,
 * pitfalls 9-13), in the absorbed form over a latent cache.
 *
 * Only the normalised latent c' (kv_lora) and the shared k_pe (rope dims, never
 * rotated, never normalised) are cached per position. kv_b's rows are head-major:
 * per head nope key rows then v value rows. The key rows are folded into the query
 * (q_lat = W_k^T q_nope) and the value rows are applied after the weighted sum of
 * latents. Scores use all nope+rope dims and the scale (nope+rope)^-1/2. */
#include "k3.h"
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

static void mla_head(void *arg, int h) {
    const MlaHeads *a = arg;
    const int R = a->R, NOPE = a->NOPE, ROPE = a->ROPE, VD = a->VD, NH = a->NH, QH = a->QH;
    const int L = a->L;
    const float *cache = a->s->mla_c[L], *pe = a->s->mla_pe[L];
    float qlat[R], olat[R], tmp[R];
    float *sc = a->scores + (size_t)h * a->ctx;      /* pos + T <= ctx (k3_forward) */
    K3Mat wv = a->ly->kv_b;                      /* the head's value rows of kv_b */
    size_t off = (size_t)(h * (NOPE + VD) + NOPE) * R;
    wv.rows = VD;
    wv.w = wv.type == K3_W_F32 ? (const void *)((const float *)wv.w + off)
                               : (const void *)((const uint16_t *)wv.w + off);
    for (int t = 0; t < a->T; t++) {
        int n = a->s->pos + a->t0 + t + 1;
        const float *qn = a->q + ((size_t)t * NH + h) * QH, *qpe = qn + NOPE;
        /* q_lat = sum_d q_nope[d] * kv_b[h*(NOPE+VD) + d][:] (key rows folded into q) */
        memset(qlat, 0, sizeof qlat);
        for (int d = 0; d < NOPE; d++)
            k3_axpy(qlat, qn[d], row_f32(&a->ly->kv_b, h * (NOPE + VD) + d, tmp), R);
        for (int j = 0; j < n; j++)
            sc[j] = (k3_dot(qlat, cache + (size_t)j * R, R) +
                     k3_dot(qpe, pe + (size_t)j * ROPE, ROPE)) * a->scale;
        k3_softmax(sc, n);
        memset(olat, 0, sizeof olat);
        for (int j = 0; j < n; j++) k3_axpy(olat, sc[j], cache + (size_t)j * R, R);
        k3_matmul(a->o + ((size_t)t * NH + h) * VD, &wv, olat, 1);   /* v rows after the sum */
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
