/* dspark.c — the DSpark draft's forward (spec §4), fp32 on k3's kernels.
 *
 * Context rows (one per committed target position) go through context_proj and
 * context_norm once; each draft layer caches the normalised latent and the roped k_pe of
 * the shared c_p (no queries, no input norm for them). A block is N rows at positions
 * P..P+N-1: the anchor's embedding, then the mask token's. Each layer is pre-norm MLA with
 * RoPE (interleaved pairs, YaRN) in the absorbed form, non-causal over context and block,
 * then a SiLU MLP. final_norm, the target's lm_head, then the Markov chain left to right
 * (bias w2 . w1[prev], prev the anchor then each greedy draft) and the confidence head.
 * Matmuls split over outputs and attention over (row, head) pairs: the same bits at any
 * thread count. */
#include "dspark_priv.h"
#include "pool.h"
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- streamed weights (the plan had no room to pin them) ---- */

const void *k3_dspark_read(K3DSpark *d, void *dst, const void *p, size_t n) {
    if (!d->streamed) return p;
    const char *m = d->map;
    const uintptr_t q = (uintptr_t)p, m0 = (uintptr_t)m;
    if (q < m0 || q >= m0 + d->map_len) return p;   /* a misaligned matrix's own copy */
    off_t off = (off_t)(q - m0);
    for (size_t got = 0; got < n;) {
        const ssize_t k = pread(d->fd, (char *)dst + got, n - got, off + (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (!d->rd_err) d->rd_err = k < 0 ? errno : EIO;
            memset(dst, 0, n);
            break;
        }
        got += (size_t)k;
    }
    return dst;
}

/* k3_matmul of a streamed matrix: rows K3_DSPARK_PIECE bytes at a time read into buf (rows
 * are independent: the bits of the whole call). */
void k3_dspark_piece_matmul(const K3RowSource *s, float *Y, const K3Mat *W, const float *X,
                            int T) {
    K3DSpark *d = (K3DSpark *)((char *)s - offsetof(K3DSpark, rsrc));
    const size_t rb = (size_t)W->cols * 2;    /* BF16 rows */
    const int tb = T < K3_ROW_BLOCK ? T : K3_ROW_BLOCK;
    size_t step = d->piece / rb;
    if (T > 1 && step > d->tmp_rows / (size_t)tb) step = d->tmp_rows / (size_t)tb;
    if (step > d->buf_len / rb) step = d->buf_len / rb;
    if (step < 1) step = 1;
    K3Mat B = *W;
    B.src = NULL;
    for (int a = 0; a < W->rows; a += (int)step) {
        const int nb = W->rows - a < (int)step ? W->rows - a : (int)step;
        B.rows = nb;
        B.w = k3_dspark_read(d, d->buf, (const char *)W->w + (size_t)a * rb, (size_t)nb * rb);
        if (T == 1) k3_matmul(Y + a, &B, X, 1);
        else
            for (int t0 = 0; t0 < T; t0 += tb) {
                const int nt = T - t0 < tb ? T - t0 : tb;
                k3_matmul(d->tmp, &B, X + (size_t)t0 * W->cols, nt);
                for (int t = 0; t < nt; t++)
                    memcpy(Y + (size_t)(t0 + t) * W->rows + a, d->tmp + (size_t)t * nb,
                           sizeof(float) * nb);
            }
    }
}

int k3_dspark_streamed(const K3DSpark *d) { return d->streamed; }

/* YaRN (DeepSeek form, §4.4): frequencies between the correction dims are a ramp from
 * extrapolated to interpolated; the softmax scale takes mscale(all_dim) squared. */
static double yarn_m(double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * log(s) + 1.0; }

void k3_dspark_rope_init(K3DSpark *d) {
    const K3DSparkConfig *k = &d->c;
    const int D = k->rope, half = D / 2;
    d->inv_freq = malloc(sizeof(float) * (size_t)half);
    if (!d->inv_freq) return;
    double low = 0, high = 0;
    if (k->yarn) {
        const double L0 = k->orig_max_pos, lt = 2.0 * log(k->theta);
        const double cf = D * log(L0 / (2.0 * M_PI * k->beta_fast)) / lt;
        const double cs = D * log(L0 / (2.0 * M_PI * k->beta_slow)) / lt;
        low = floor(cf) < 0 ? 0 : floor(cf);
        high = ceil(cs) > D - 1 ? D - 1 : ceil(cs);
        if (low == high) high += 0.001;
    }
    for (int i = 0; i < half; i++) {
        const double pf = pow(k->theta, 2.0 * i / D), ext = 1.0 / pf;
        double f = ext;
        if (k->yarn) {
            double ramp = (i - low) / (high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            f = ext / k->factor * ramp + ext * (1.0 - ramp);
        }
        d->inv_freq[i] = (float)f;
    }
    const double ms = k->yarn ? yarn_m(k->factor, k->mscale_all_dim) : 1.0;
    d->mag = k->yarn ? (float)(yarn_m(k->factor, k->mscale) / ms) : 1.0f;
    d->scale = (float)(ms * ms / sqrt((double)(k->nope + k->rope)));
}

/* Pairs (2i, 2i+1) rotated by pos * inv_freq[i] (an fp32 product, as an fp32 table). */
void k3_dspark_rope(const K3DSpark *d, float *x, int pos) {
    for (int i = 0; i < d->c.rope / 2; i++) {
        const float a = (float)pos * d->inv_freq[i];
        const float c = (float)cos((double)a) * d->mag, s = (float)sin((double)a) * d->mag;
        const float x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x1 * c + x0 * s;
    }
}

static int reserve(K3DSpark *d, int n, char *err, size_t errlen) {
    const K3DSparkConfig *k = &d->c;
    if (n <= d->cap) return 0;
    int cap = d->cap ? d->cap : 64;
    while (cap < n) cap *= 2;
    for (int l = 0; l < k->layers; l++) {
        float *a = realloc(d->lat[l], sizeof(float) * (size_t)cap * k->kv_lora);
        if (a) d->lat[l] = a;
        float *b = realloc(d->kpe[l], sizeof(float) * (size_t)cap * k->rope);
        if (b) d->kpe[l] = b;
        if (!a || !b) {
            snprintf(err, errlen, "out of memory growing the draft's context to %d positions",
                     n);
            return K3_ERR_RUNTIME;
        }
    }
    d->cap = cap;
    return 0;
}

int k3_dspark_reserve(K3DSpark *d, int n, char *err, size_t errlen) {
    return reserve(d, n, err, errlen);
}

uint64_t k3_dspark_identity(const K3DSpark *d) { return d->identity; }

int k3_dspark_set_pos(K3DSpark *d, int P, char *err, size_t errlen) {
    if (P < 0 || P > d->c.max_pos) {
        snprintf(err, errlen, "a draft context of %d positions (max_position_embeddings %d)", P,
                 d->c.max_pos);
        return K3_ERR_RUNTIME;
    }
    if (P && reserve(d, P, err, errlen)) return K3_ERR_RUNTIME;
    d->P = P;
    return 0;
}

/* Positions P..P+n-1 from their taps, K3_ROW_BLOCK at a time (bounded scratch; each
 * position's bits do not depend on the split: k3_matmul per token is the T = 1 result). */
int k3_dspark_ingest_ctx(K3DSpark *d, const float *taps, int n, float *ctx, char *err,
                         size_t errlen) {
    const K3DSparkConfig *k = &d->c;
    const int H = k->hidden, KL = k->kv_lora, DR = k->rope, Z = KL + DR, W = k->n_taps * H;
    if (n <= 0) return 0;
    if (d->P + n > k->max_pos) {
        snprintf(err, errlen, "the draft's context would reach %d positions, past its "
                 "max_position_embeddings (%d)", d->P + n, k->max_pos);
        return K3_ERR_RUNTIME;
    }
    if (reserve(d, d->P + n, err, errlen)) return K3_ERR_RUNTIME;
    if (!d->ingest) {
        d->ingest = malloc(sizeof(float) * K3_ROW_BLOCK * (size_t)(H + Z));
        if (!d->ingest) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    }
    for (int t0 = 0; t0 < n; t0 += K3_ROW_BLOCK) {
        const int m = k3_block_rows(n, t0);
        float *c = d->ingest, *z = c + (size_t)K3_ROW_BLOCK * H;
        k3_matmul(c, &d->ctx_proj, taps + (size_t)t0 * W, m);   /* c_p: shared by the layers */
        for (int t = 0; t < m; t++)
            k3_rmsnorm(c + (size_t)t * H, c + (size_t)t * H, d->ctx_norm, H, k->eps);
        if (ctx) memcpy(ctx + (size_t)t0 * H, c, sizeof(float) * m * H);
        for (int l = 0; l < k->layers; l++) {
            const K3DSparkLayer *ly = &d->layers[l];
            k3_matmul(z, &ly->kv_a, c, m);
            for (int t = 0; t < m; t++) {
                const int p = d->P + t0 + t;
                const float *zt = z + (size_t)t * Z;
                k3_rmsnorm(d->lat[l] + (size_t)p * KL, zt, ly->kv_a_norm, KL, k->eps);
                float *pe = d->kpe[l] + (size_t)p * DR;
                memcpy(pe, zt + KL, sizeof(float) * DR);    /* k_pe: not normalised */
                k3_dspark_rope(d, pe, p);
            }
        }
    }
    d->P += n;
    if (d->rd_err) {
        snprintf(err, errlen, "%s/model.safetensors: reading the draft's weights: %s", d->dir,
                 strerror(d->rd_err));
        d->rd_err = 0;
        return K3_ERR_RUNTIME;
    }
    return 0;
}

int k3_dspark_ingest(K3DSpark *d, const float *taps, int n, char *err, size_t errlen) {
    return k3_dspark_ingest_ctx(d, taps, n, NULL, err, errlen);
}

void k3_dspark_truncate(K3DSpark *d, int P) {
    if (P >= 0 && P < d->P) d->P = P;
}
int k3_dspark_pos(const K3DSpark *d) { return d->P; }
const float *k3_dspark_lat(const K3DSpark *d, int l) { return d->lat[l]; }
const float *k3_dspark_kpe(const K3DSpark *d, int l) { return d->kpe[l]; }

/* ---- one block ---- */

typedef struct {
    const K3DSpark *d;
    const K3DSparkLayer *ly;
    int l, N;
    const float *q, *blat, *bkpe;            /* [N][heads][nope+rope], [N][kv_lora], [N][rope] */
    float *o;                                 /* [N][heads][v_dim] */
    int failed;
} Att;

/* Row r, head h: q~ = W_UK,h^T q_nope (absorbed), scores over the P context latents then
 * the N block latents (no mask: non-causal), softmax, the latent average, then W_UV,h. */
static void att_task(void *arg, int task) {
    Att *a = arg;
    const K3DSpark *d = a->d;
    const K3DSparkConfig *k = &d->c;
    const int NH = k->heads, DN = k->nope, DR = k->rope, DV = k->v_dim, KL = k->kv_lora;
    const int QH = DN + DR, r = task / NH, h = task % NH, P = d->P, S = P + a->N;
    float *buf = k3_scratch_slot(K3_SCRATCH_MLA, sizeof(float) * (2 * (size_t)S + 3 * KL));
    if (!buf) { __atomic_store_n(&a->failed, 1, __ATOMIC_RELAXED); return; }
    float *sc = buf, *rs = sc + S, *ql = rs + S, *ol = ql + KL, *tmp = ol + KL;
    const float *qn = a->q + ((size_t)r * NH + h) * QH, *qp = qn + DN;
    const K3Mat *kvb = &a->ly->kv_b;
    const uint16_t *wk = (const uint16_t *)kvb->w + (size_t)h * (DN + DV) * KL;
    memset(ql, 0, sizeof(float) * 2 * KL);
    for (int i = 0; i < DN; i++) {            /* the key rows folded into the query */
        for (int j = 0; j < KL; j++) tmp[j] = k3_bf16_to_f32(wk[(size_t)i * KL + j]);
        k3_axpy(ql, qn[i], tmp, KL);
    }
    k3_dots(sc, ql, d->lat[a->l], KL, P, KL);
    k3_dots(rs, qp, d->kpe[a->l], DR, P, DR);
    k3_dots(sc + P, ql, a->blat, KL, a->N, KL);
    k3_dots(rs + P, qp, a->bkpe, DR, a->N, DR);
    for (int s = 0; s < S; s++) sc[s] = (sc[s] + rs[s]) * d->scale;
    k3_softmax(sc, S);
    k3_axpys(ol, sc, d->lat[a->l], KL, P, KL);
    k3_axpys(ol, sc + P, a->blat, KL, a->N, KL);
    K3Mat wv = *kvb;                          /* the head's value rows */
    wv.rows = DV;
    wv.w = wk + (size_t)DN * KL;
    k3_matmul(a->o + ((size_t)r * NH + h) * DV, &wv, ol, 1);
}

static void rms_rows(float *out, const float *x, const float *w, int N, int n, float eps) {
    for (int r = 0; r < N; r++) k3_rmsnorm(out + (size_t)r * n, x + (size_t)r * n, w, n, eps);
}

static void add_rows(float *R, const float *a, size_t n) {
    for (size_t i = 0; i < n; i++) R[i] += a[i];
}

/* The target's embedding row of token id (BF16 or F32, used in place). */
static void embed_row(const K3Mat *E, int id, float *out) {
    const size_t o = (size_t)id * E->cols;
    if (E->type == K3_W_F32) memcpy(out, (const float *)E->w + o, sizeof(float) * E->cols);
    else
        for (int j = 0; j < E->cols; j++) out[j] = k3_bf16_to_f32(((const uint16_t *)E->w)[o + j]);
}

/* w1's row of token id into e (one row read when streamed). */
static void markov_row(K3DSpark *d, int id, float *e) {
    const K3Mat *w1 = &d->w1;
    K3Mat one = d->w1;
    int row = id;
    if (d->streamed) {
        one.rows = 1; row = 0;
        one.w = k3_dspark_read(d, d->buf, (const char *)d->w1.w + (size_t)id * d->w1.cols * 2,
                               (size_t)d->w1.cols * 2);
        w1 = &one;
    }
    embed_row(w1, row, e);
}

/* c_r (spec 4.8) from row r's final hidden state and w1[prev], already at cin + hidden. */
static float confidence(const K3DSpark *d, float *cin, const float *hf_r, float *cl) {
    memcpy(cin, hf_r, sizeof(float) * d->c.hidden);
    k3_matmul(cl, &d->conf_w, cin, 1);
    return k3_sigmoidf(cl[0] + d->conf_b);
}

static int read_error(K3DSpark *d, char *err, size_t errlen) {
    if (!d->rd_err) return 0;
    snprintf(err, errlen, "%s/model.safetensors: reading the draft's weights: %s", d->dir,
             strerror(d->rd_err));
    d->rd_err = 0;
    return K3_ERR_RUNTIME;
}

void k3_dspark_set_gate(K3DSpark *d, float gate) { d->gate = gate; }

int k3_dspark_draft_trace(K3DSpark *d, int anchor, int N, int *drafts, float *conf,
                          float *logits, const K3DSparkTrace *tr, char *err, size_t errlen) {
    const K3DSparkConfig *k = &d->c;
    const int H = k->hidden, NH = k->heads, QH = k->nope + k->rope, KL = k->kv_lora;
    const int DR = k->rope, Z = KL + DR, I = k->inter, V = k->vocab, MR = k->markov_rank;
    const int P = d->P;
    if (N < 1 || N > K3_DSPARK_MAX_N) {
        snprintf(err, errlen, "a draft block of %d rows (1..%d)", N, K3_DSPARK_MAX_N);
        return K3_ERR_USAGE;
    }
    if (anchor < 0 || anchor >= V) {
        snprintf(err, errlen, "anchor token %d is outside the vocabulary (%d)", anchor, V);
        return K3_ERR_USAGE;
    }
    if (P + N > k->max_pos) {
        snprintf(err, errlen, "a draft block at positions %d..%d is past the draft's "
                 "max_position_embeddings (%d)", P, P + N - 1, k->max_pos);
        return K3_ERR_RUNTIME;
    }
    /* one block's buffers, for 7 rows */
    const size_t M = K3_DSPARK_MAX_N;
    const size_t need = M * (4 * (size_t)H + 2 * (size_t)I + k->q_lora + (size_t)NH * QH +
                             Z + KL + DR + (size_t)NH * k->v_dim + 2 * (size_t)V) +
                        (size_t)V + H + MR + 1;
    if (d->blk_len < need) {
        free(d->blk);
        d->blk = malloc(sizeof(float) * need);
        d->blk_len = d->blk ? need : 0;
        if (!d->blk) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    }
    float *R = d->blk, *u = R + M * H, *a = u + M * H, *hf = a + M * H, *g = hf + M * H;
    float *up = g + M * I, *qa = up + M * I, *q = qa + M * k->q_lora, *z = q + M * NH * QH;
    float *blat = z + M * Z, *bkpe = blat + M * KL, *o = bkpe + M * DR;
    float *base = o + M * NH * k->v_dim, *lg = base + M * V, *bias = lg + M * V;
    float *cin = bias + V, *cl = cin + H + MR;
    for (int r = 0; r < N; r++) embed_row(&d->e->m.embed, r ? k->mask_id : anchor, R + r * H);
    if (tr && tr->h_in) memcpy(tr->h_in, R, sizeof(float) * N * H);
    for (int l = 0; l < k->layers; l++) {
        const K3DSparkLayer *ly = &d->layers[l];
        rms_rows(u, R, ly->in_norm, N, H, k->eps);
        k3_matmul(qa, &ly->q_a, u, N);
        rms_rows(qa, qa, ly->q_a_norm, N, k->q_lora, k->eps);
        k3_matmul(q, &ly->q_b, qa, N);
        k3_matmul(z, &ly->kv_a, u, N);
        for (int r = 0; r < N; r++) {
            for (int h = 0; h < NH; h++) k3_dspark_rope(d, q + ((size_t)r * NH + h) * QH + k->nope,
                                                       P + r);
            k3_rmsnorm(blat + (size_t)r * KL, z + (size_t)r * Z, ly->kv_a_norm, KL, k->eps);
            memcpy(bkpe + (size_t)r * DR, z + (size_t)r * Z + KL, sizeof(float) * DR);
            k3_dspark_rope(d, bkpe + (size_t)r * DR, P + r);
        }
        K3DSparkLayer lr = *ly;                  /* streamed: this layer's kv_b read */
        lr.kv_b.w = k3_dspark_read(d, d->kvb, ly->kv_b.w,
                                   (size_t)ly->kv_b.rows * ly->kv_b.cols * 2);
        Att at = { d, &lr, l, N, q, blat, bkpe, o, 0 };
        k3_pool_run(att_task, &at, N * NH);
        if (at.failed) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
        k3_matmul(a, &ly->o, o, N);
        add_rows(R, a, (size_t)N * H);
        rms_rows(u, R, ly->post_norm, N, H, k->eps);
        k3_matmul(g, &ly->gate, u, N);
        k3_matmul(up, &ly->up, u, N);
        k3_silu_n(g, (size_t)N * I);
        for (size_t i = 0; i < (size_t)N * I; i++) g[i] *= up[i];
        k3_matmul(a, &ly->down, g, N);
        add_rows(R, a, (size_t)N * H);
        if (tr && tr->h_layer) memcpy(tr->h_layer + (size_t)l * N * H, R, sizeof(float) * N * H);
    }
    rms_rows(hf, R, d->final_norm, N, H, k->eps);
    if (tr && tr->hf) memcpy(tr->hf, hf, sizeof(float) * N * H);
    if (conf && d->gate > 0) {     /* c_0 first: below the gate no length can pay */
        markov_row(d, anchor, cin + H);
        conf[0] = confidence(d, cin, hf, cl);
        if (conf[0] < d->gate) {
            drafts[0] = -1;
            return read_error(d, err, errlen);
        }
    }
    K3Weights *w = d->e->w;                   /* the target's head, not its final norm */
    if (w->ops->lm_head(w, base, hf, N, err, errlen)) return K3_ERR_RUNTIME;
    if (tr && tr->base) memcpy(tr->base, base, sizeof(float) * N * V);
    /* the Markov chain: row r's bias is keyed by the token at P + r */
    int prev = anchor;
    for (int r = 0; r < N; r++) {
        float *e = cin + H;
        markov_row(d, prev, e);
        k3_matmul(bias, &d->w2, e, 1);
        float *lr = (logits ? logits : lg) + (size_t)r * V;
        const float *br = base + (size_t)r * V;
        for (int v = 0; v < V; v++) lr[v] = br[v] + bias[v];
        drafts[r] = k3_argmax(lr, V);
        if (conf) conf[r] = confidence(d, cin, hf + (size_t)r * H, cl);
        prev = drafts[r];
    }
    return read_error(d, err, errlen);
}

int k3_dspark_draft(K3DSpark *d, int anchor, int N, int *drafts, float *conf, float *logits,
                    char *err, size_t errlen) {
    return k3_dspark_draft_trace(d, anchor, N, drafts, conf, logits, NULL, err, errlen);
}
