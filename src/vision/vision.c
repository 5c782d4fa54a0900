/* vision.c — the tower's forward (K3_VISION.md §4), one image at a time (images never meet:
 * §4.8). Linears on k3_matmul (BF16 weights, split over outputs); the elementwise steps and
 * norms split over token rows; attention over (head, query tile) pairs, each an online
 * softmax over key tiles of K3_VIS_BK in increasing order on the attention tiles of
 * kernels.h (scores, exp, weighted sums: one order, the same bits on every path). So no
 * result depends on the thread count or the SIMD path. */
#include "vision_priv.h"
#include "k3.h"
#include "pool.h"
#include "util.h"
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const K3Vision *v;
    const K3VisionConfig *c;
    const K3AttnOps *a;                       /* the selected path's attention tiles */
    int gh, gw, L, nkt, nqt;                  /* key tiles, query tiles */
    float *X, *Hn, *Big, *Q, *K, *Vt, *O, *rope;
    const float *w;                           /* the norm applied by norm_rows */
    float eps;
    int width;                                /* norm_rows/add_rows/gelu_rows row width */
    float *dst; const float *src;             /* add_rows: dst += src; norm_rows: src → dst */
    int *y0, *y1, *x0, *x1;                   /* bilinear source rows/columns */
    float *ly, *lx;
    atomic_int oom;
} Img;

/* ---- the row-split helper: fn(m, r0, r1) over [0, n) in chunks of 16 rows ---- */
typedef void (*RowFn)(Img *m, int r0, int r1);
typedef struct { Img *m; RowFn fn; int n; } RowJob;
enum { ROW_CHUNK = 16 };
static void row_task(void *ctx, int i) {
    RowJob *j = ctx;
    int r0 = i * ROW_CHUNK, r1 = r0 + ROW_CHUNK > j->n ? j->n : r0 + ROW_CHUNK;
    j->fn(j->m, r0, r1);
}
static void par_rows(Img *m, RowFn fn, int n) {
    RowJob j = { m, fn, n };
    if (n <= ROW_CHUNK) { fn(m, 0, n); return; }
    k3_pool_run(row_task, &j, (n + ROW_CHUNK - 1) / ROW_CHUNK);
}

static void norm_rows(Img *m, int r0, int r1) {
    for (int t = r0; t < r1; t++)
        k3_rmsnorm(m->dst + (size_t)t * m->width, m->src + (size_t)t * m->width, m->w,
                   m->width, m->eps);
}
static void add_rows(Img *m, int r0, int r1) {
    float *d = m->dst + (size_t)r0 * m->width;
    const float *s = m->src + (size_t)r0 * m->width;
    for (size_t i = 0, n = (size_t)(r1 - r0) * m->width; i < n; i++) d[i] += s[i];
}
/* gelu_pytorch_tanh: 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3);
 * the sigmoid form runs on the vectorised k3_sigmoidf_n (the same bits on every path). */
static void gelu_tanh_rows(Img *m, int r0, int r1) {
    float *g = malloc(sizeof(float) * (size_t)m->width);
    if (!g) { atomic_store(&m->oom, 1); return; }
    for (int t = r0; t < r1; t++) {
        float *x = m->dst + (size_t)t * m->width;
        for (int i = 0; i < m->width; i++) {
            float a = x[i];
            g[i] = 1.5957691216057308f * (a + 0.044715f * a * a * a);
        }
        k3_sigmoidf_n(g, g, m->width);
        for (int i = 0; i < m->width; i++) x[i] = x[i] * g[i];
    }
    free(g);
}
/* the projector's exact GELU: 0.5 x (1 + erf(x / sqrt 2)), in double, rounded once */
static void gelu_erf_rows(Img *m, int r0, int r1) {
    float *x = m->dst + (size_t)r0 * m->width;
    for (size_t i = 0, n = (size_t)(r1 - r0) * m->width; i < n; i++) {
        double a = x[i];
        x[i] = (float)(0.5 * a * (1.0 + erf(a * 0.70710678118654752440)));
    }
}

/* §4.2: X[t] += the position grid bilinearly resized to gh x gw (half-pixel centres). */
static void axis(int in, int out, int *i0, int *i1, float *lam) {
    float scale = (float)in / (float)out;
    for (int o = 0; o < out; o++) {
        float s = scale * ((float)o + 0.5f) - 0.5f;
        if (s < 0) s = 0;
        int a = (int)s;
        if (a > in - 1) a = in - 1;
        i0[o] = a; i1[o] = a + (a < in - 1 ? 1 : 0); lam[o] = s - (float)a;
    }
}
static void pos_rows(Img *m, int r0, int r1) {
    const int D = m->c->hidden, PW = m->c->pos_w;
    const float *G = m->v->pos;
    for (int t = r0; t < r1; t++) {
        int r = t / m->gw, c = t % m->gw;
        float *x = m->X + (size_t)t * D;
        if (m->gh == m->c->pos_h && m->gw == PW) {
            const float *g = G + ((size_t)r * PW + c) * D;
            for (int k = 0; k < D; k++) x[k] += g[k];
            continue;
        }
        const float *g00 = G + ((size_t)m->y0[r] * PW + m->x0[c]) * D;
        const float *g01 = G + ((size_t)m->y0[r] * PW + m->x1[c]) * D;
        const float *g10 = G + ((size_t)m->y1[r] * PW + m->x0[c]) * D;
        const float *g11 = G + ((size_t)m->y1[r] * PW + m->x1[c]) * D;
        float ly = m->ly[r], lx = m->lx[c], hy = 1.0f - ly, hx = 1.0f - lx;
        for (int k = 0; k < D; k++)
            x[k] += hy * (hx * g00[k] + lx * g01[k]) + ly * (hx * g10[k] + lx * g11[k]);
    }
}

/* §4.3: cos/sin per token and pair j: even pairs turn by the column, odd by the row;
 * frequency 10000^(-4i/head_dim), i = j >> 1. rope[t][j][2] = cos, sin. */
static void rope_rows(Img *m, int r0, int r1) {
    const int hd = m->c->head_dim, P = hd / 2;
    for (int t = r0; t < r1; t++) {
        int r = t / m->gw, c = t % m->gw;
        for (int j = 0; j < P; j++) {
            float e = (float)(4 * (j >> 1)) / (float)hd;
            float freq = 1.0f / (float)pow(10000.0, (double)e);
            float th = (float)(j % 2 == 0 ? c : r) * freq;
            m->rope[((size_t)t * P + j) * 2] = (float)cos((double)th);
            m->rope[((size_t)t * P + j) * 2 + 1] = (float)sin((double)th);
        }
    }
}

/* QKV [L][3A] → roped Q (times 1/sqrt(hd)) transposed by query tile [head][tile][hd][BQ],
 * K [head][L][hd] and V transposed by key tile [head][tile][hd][BK] (the last key tile's
 * padding zeroed per image: vt_pad; the last query tile's is never read into a result:
 * every query is its own lane). */
static void pack_rows(Img *m, int r0, int r1) {
    const int A = m->c->qkv, hd = m->c->head_dim, H = m->c->heads, L = m->L, P = hd / 2;
    const float scale = 1.0f / sqrtf((float)hd);          /* the scores' 1/sqrt(head_dim) */
    for (int t = r0; t < r1; t++) {
        const float *row = m->Big + (size_t)t * 3 * A, *cs = m->rope + (size_t)t * P * 2;
        for (int h = 0; h < H; h++) {
            const float *q = row + h * hd, *k = row + A + h * hd, *v = row + 2 * A + h * hd;
            float *Q = m->Q + (((size_t)h * m->nqt + t / K3_VIS_BQ) * hd) * K3_VIS_BQ +
                       t % K3_VIS_BQ;
            float *K = m->K + ((size_t)h * L + t) * hd;
            for (int j = 0; j < P; j++) {
                float co = cs[2 * j], si = cs[2 * j + 1];
                float a = q[2 * j], b = q[2 * j + 1];
                Q[(size_t)2 * j * K3_VIS_BQ] = (a * co - b * si) * scale;
                Q[(size_t)(2 * j + 1) * K3_VIS_BQ] = (a * si + b * co) * scale;
                a = k[2 * j]; b = k[2 * j + 1];
                K[2 * j] = a * co - b * si; K[2 * j + 1] = a * si + b * co;
            }
            float *Vt = m->Vt + (((size_t)h * m->nkt + t / K3_VIS_BK) * hd) * K3_VIS_BK +
                        t % K3_VIS_BK;
            for (int d = 0; d < hd; d++) Vt[(size_t)d * K3_VIS_BK] = v[d];
        }
    }
}

/* The last key tile's columns past L in V's tiles: zero (an earlier, larger image of the same
 * call left its values there), so the padded products are exact zeros. */
static void vt_pad(Img *m) {
    const int hd = m->c->head_dim, used = m->L - (m->nkt - 1) * K3_VIS_BK;
    for (int h = 0; h < m->c->heads && used < K3_VIS_BK; h++)
        for (int d = 0; d < hd; d++)
            memset(m->Vt + (((size_t)h * m->nkt + m->nkt - 1) * hd + d) * K3_VIS_BK + used, 0,
                   sizeof(float) * (K3_VIS_BK - used));
}

/* §4.4 attention for one head and query tile: an online softmax over the key tiles, queries
 * in the vector lanes (kernels.h, "Attention tiles"); tile kt rescales what came before by
 * corr = exp(max before - max after), 0 for the first (its max before is -inf). */
static void attn_task(void *ctx, int task) {
    Img *m = ctx;
    const K3AttnOps *a = m->a;
    const int hd = m->c->head_dim, A = m->c->qkv, L = m->L;
    /* a head's query tiles one after another: its K and V (2 L head_dim floats, 3.2 MB at
     * 1024 x 1024) stay in the caches across them instead of cycling through every head's */
    const int h = task / m->nqt, qt = task % m->nqt, q0 = qt * K3_VIS_BQ;
    const int nq = L - q0 < K3_VIS_BQ ? L - q0 : K3_VIS_BQ;
    enum { BQ = K3_VIS_BQ, BK = K3_VIS_BK };
    /* the thread's kernel scratch (reused: no 170 KB malloc, page faults and zeroing per
     * task); nothing below calls a kernel that takes it */
    float *buf = k3_scratch(sizeof(float) * ((size_t)BQ * BK + (size_t)BQ * hd + 5 * BQ));
    if (!buf) { atomic_store(&m->oom, 1); return; }
    float *S = buf, *Oa = S + BQ * BK, *mx = Oa + (size_t)BQ * hd, *mn = mx + BQ, *l = mn + BQ;
    float *corr = l + BQ, *junk = corr + BQ;
    const float *Qt = m->Q + ((size_t)h * m->nqt + qt) * hd * BQ;
    for (int i = 0; i < BQ; i++) { mx[i] = -INFINITY; l[i] = 0; }
    memset(Oa, 0, sizeof(float) * (size_t)BQ * hd);
    for (int kt = 0; kt < m->nkt; kt++) {
        const int k0 = kt * BK, nk = L - k0 < BK ? L - k0 : BK;
        memcpy(mn, mx, sizeof mx[0] * BQ);
        a->scores(S, Qt, m->K + ((size_t)h * L + k0) * hd, nk, hd, BQ, mn);   /* S = K Q^T */
        memcpy(corr, mx, sizeof mx[0] * BQ);
        a->exp(corr, mn, junk, 1, BQ);                    /* corr = exp(mx - mn) */
        for (int i = 0; i < BQ; i++) { l[i] *= corr[i]; mx[i] = mn[i]; }
        a->exp(S, mx, l, nk, BQ);                          /* P = exp(S - mx), l += sum P */
        a->pv(Oa, m->Vt + ((size_t)h * m->nkt + kt) * hd * BK, BK, S, corr, nk, hd, BQ);
    }
    for (int i = 0; i < nq; i++) {
        float *o = m->O + (size_t)(q0 + i) * A + h * hd;
        for (int d = 0; d < hd; d++) o[d] = Oa[(size_t)d * BQ + i] / l[i];
    }
}

static void norm(Img *m, float *dst, const float *src, const float *w, int n, int width,
                 float eps) {
    m->dst = dst; m->src = src; m->w = w; m->width = width; m->eps = eps;
    par_rows(m, norm_rows, n);
}
static void add(Img *m, float *dst, const float *src, int n, int width) {
    m->dst = dst; m->src = src; m->width = width;
    par_rows(m, add_rows, n);
}

static void block(Img *m, const K3VisionBlock *b) {
    const int L = m->L, D = m->c->hidden;
    norm(m, m->Hn, m->X, b->norm0, L, D, m->c->eps);
    k3_matmul(m->Big, &b->wqkv, m->Hn, L);
    par_rows(m, pack_rows, L);
    k3_pool_run(attn_task, m, m->c->heads * m->nqt);
    k3_matmul(m->Hn, &b->wo, m->O, L);
    add(m, m->X, m->Hn, L, D);
    norm(m, m->Hn, m->X, b->norm1, L, D, m->c->eps);
    k3_matmul(m->Big, &b->fc0, m->Hn, L);
    m->dst = m->Big; m->width = m->c->inter;
    par_rows(m, gelu_tanh_rows, L);
    k3_matmul(m->Hn, &b->fc1, m->Big, L);
    add(m, m->X, m->Hn, L, D);
}

/* The buffers for images of up to L patches (floats): X, Hn [L][D] (Hn also the merged
 * [N][4D], X the projector's hidden [N][4D]), Big [L][max(3A, F)], Q [L rounded up to BQ][A],
 * K, O [L][A], Vt [L rounded up to BK][A], rope [L][hd]. */
static size_t act_floats(const K3VisionConfig *c, long L, size_t part[8]) {
    size_t Lp = (size_t)(L + K3_VIS_BK - 1) / K3_VIS_BK * K3_VIS_BK;
    size_t Lq = (size_t)(L + K3_VIS_BQ - 1) / K3_VIS_BQ * K3_VIS_BQ;
    size_t big = 3 * (size_t)c->qkv > (size_t)c->inter ? 3 * (size_t)c->qkv : (size_t)c->inter;
    size_t p[8] = { (size_t)L * c->hidden, (size_t)L * c->hidden, (size_t)L * big,
                    Lq * c->qkv, (size_t)L * c->qkv, Lp * c->qkv, (size_t)L * c->qkv,
                    (size_t)L * c->head_dim };
    size_t s = 0;
    for (int i = 0; i < 8; i++) { s += p[i]; if (part) part[i] = p[i]; }
    return s;
}

size_t k3_vision_act_bytes(const K3VisionConfig *c, long patches) {
    size_t tiles = (size_t)k3_threads() * (K3_VIS_BQ * K3_VIS_BK + 5 * K3_VIS_BQ +
                                           (size_t)K3_VIS_BQ * c->head_dim + c->inter);
    return sizeof(float) * (act_floats(c, patches, NULL) + tiles);
}

void k3_vision_image_bytes(const K3VisionConfig *c, uint64_t *fixed, uint64_t *act_pp,
                           uint64_t *io_pp) {
    size_t part[8];
    act_floats(c, 1, part);                   /* per patch, but Q's and Vt's tile rounding */
    uint64_t pp = 0;
    for (int i = 0; i < 8; i++) pp += part[i];
    pp -= part[5] - (size_t)c->qkv + part[3] - (size_t)c->qkv;
    *act_pp = 4 * pp;
    *fixed = k3_vision_act_bytes(c, 0) +
             4 * ((uint64_t)(K3_VIS_BK - 1 + K3_VIS_BQ - 1) * c->qkv + 6 * 512);
    *io_pp = 4 * ((uint64_t)3 * c->patch * c->patch + ((uint64_t)c->out + 3) / 4);
}

static int img_alloc(Img *m, const K3VisionConfig *c, long L) {
    size_t part[8];
    act_floats(c, L, part);
    float **dst[8] = { &m->X, &m->Hn, &m->Big, &m->Q, &m->K, &m->Vt, &m->O, &m->rope };
    for (int i = 0; i < 8; i++)
        if (!(*dst[i] = calloc(part[i] ? part[i] : 1, sizeof(float)))) return -1;
    int s = 2 * 512;
    m->y0 = malloc(sizeof(int) * 4 * s);
    m->ly = malloc(sizeof(float) * 2 * s);
    if (!m->y0 || !m->ly) return -1;
    m->y1 = m->y0 + s; m->x0 = m->y1 + s; m->x1 = m->x0 + s; m->lx = m->ly + s;
    return 0;
}
static void img_free(Img *m) {
    free(m->X); free(m->Hn); free(m->Big); free(m->Q); free(m->K); free(m->Vt); free(m->O);
    free(m->rope); free(m->y0); free(m->ly);
}

int k3_vision_grid_ok(K3VisionGrid g, char *err, size_t errlen) {
    if (g.gh < 2 || g.gw < 2 || g.gh > 512 || g.gw > 512 || g.gh % 2 || g.gw % 2) {
        snprintf(err, errlen, "patch grid %d x %d: each side must be even and in [2, 512] "
                 "(K3_VISION.md 2.2 pads to multiples of 28 pixels)", g.gh, g.gw);
        return -1;
    }
    return 0;
}
long k3_vision_count_patches(const K3VisionGrid *g, int n) {
    long s = 0;
    char e[160];
    for (int i = 0; i < n; i++) {
        if (k3_vision_grid_ok(g[i], e, sizeof e)) return 0;
        s += (long)g[i].gh * g[i].gw;
    }
    return s;
}
long k3_vision_count_rows(const K3VisionGrid *g, int n) {
    return k3_vision_count_patches(g, n) / 4;
}

double k3_vision_flops(const K3VisionConfig *c, const K3VisionGrid *g, int n) {
    const double D = c->hidden, A = c->qkv, F = c->inter, p = c->patch;
    double f = 0;
    for (int i = 0; i < n; i++) {
        double L = (double)g[i].gh * g[i].gw, N = L / 4;
        f += 2 * 3 * p * p * D * L;
        f += c->layers * (2 * (D * 3 * A + A * D + 2 * D * F) * L + 4 * A * L * L);
        f += 2 * (16 * D * D + 4 * D * c->out) * N;
    }
    return f;
}

/* After block b of an image: its share of the work (w, about its blocks' FLOPs over 4A) done;
 * a line every K3_PROGRESS_SECONDS. */
static void progress(K3Vision *v, double w, int b, int layers) {
    v->done += w / layers;
    double now = k3_now();
    if (now < v->next) return;
    v->next = now + k3_progress_every();
    double f = v->total > 0 ? v->done / v->total : 0, el = now - v->t0;
    char left[32] = "?", so_far[32];
    if (f > 0.001 && f <= 1) k3_secs_text(left, sizeof left, el * (1 - f) / f);
    k3_secs_text(so_far, sizeof so_far, el);
    fprintf(stderr, "k3: vision tower: block %d of %d; %.0f%%, ~%s left (%s so far)\n", b + 1,
            layers, 100 * f, left, so_far);
}

/* One image: patches [L][3 p p] → rows [N][out]; the stages into t when given. */
static int run_image(K3Vision *v, Img *m, const float *patches, K3VisionGrid g, float *rows,
                     const K3VisionTrace *t, char *err, size_t errlen) {
    const K3VisionConfig *c = &v->c;
    const int D = c->hidden, L = g.gh * g.gw, N = L / 4, gw = g.gw;
    m->gh = g.gh; m->gw = g.gw; m->L = L; m->nkt = (L + K3_VIS_BK - 1) / K3_VIS_BK;
    m->nqt = (L + K3_VIS_BQ - 1) / K3_VIS_BQ;
    m->a = k3_attn_ops();
    atomic_store(&m->oom, 0);
    axis(c->pos_h, g.gh, m->y0, m->y1, m->ly);
    axis(c->pos_w, g.gw, m->x0, m->x1, m->lx);
    k3_matmul(m->X, &v->pe, patches, L);                  /* §4.1 */
    par_rows(m, pos_rows, L);                             /* §4.2 */
    par_rows(m, rope_rows, L);
    vt_pad(m);
    if (t && t->embed) memcpy(t->embed, m->X, sizeof(float) * (size_t)L * D);
    for (int b = 0; b < c->layers; b++) {
        block(m, &v->blocks[b]);
        if (v->progress) progress(v, (double)L * (L + 4 * c->hidden), b, c->layers);
        if (atomic_load(&m->oom)) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
        if (t && t->blocks) memcpy(t->blocks + (size_t)b * L * D, m->X, sizeof(float) * L * D);
    }
    norm(m, m->X, m->X, v->final_norm, L, D, c->eps);    /* §4.5 */
    if (t && t->final) memcpy(t->final, m->X, sizeof(float) * (size_t)L * D);
    for (int a = 0; a < g.gh / 2; a++)                    /* §4.6: TL, TR, BL, BR */
        for (int b = 0; b < gw / 2; b++)
            for (int q = 0; q < 4; q++)
                memcpy(m->Hn + ((size_t)(a * (gw / 2) + b) * 4 + q) * D,
                       m->X + ((size_t)(2 * a + q / 2) * gw + 2 * b + q % 2) * D,
                       sizeof(float) * D);
    if (t && t->merged) memcpy(t->merged, m->Hn, sizeof(float) * (size_t)N * 4 * D);
    k3_matmul(m->X, &v->p0, m->Hn, N);                    /* §4.7 */
    m->dst = m->X; m->width = 4 * D;
    par_rows(m, gelu_erf_rows, N);
    k3_matmul(rows, &v->p2, m->X, N);
    norm(m, rows, rows, v->post_norm, N, c->out, c->proj_eps);
    if (t && t->rows) memcpy(t->rows, rows, sizeof(float) * (size_t)N * c->out);
    return 0;
}

int k3_vision_rows(K3Vision *v, const float *patches, const K3VisionGrid *g, int n,
                   float *rows, char *err, size_t errlen) {
    long maxL = 0;
    for (int i = 0; i < n; i++) {
        if (k3_vision_grid_ok(g[i], err, errlen)) return K3_ERR_USAGE;
        if ((long)g[i].gh * g[i].gw > maxL) maxL = (long)g[i].gh * g[i].gw;
    }
    Img m = { .v = v, .c = &v->c };
    int rc = 0;
    if (img_alloc(&m, &v->c, maxL)) { snprintf(err, errlen, "out of memory"); rc = K3_ERR_RUNTIME; }
    const size_t pin = (size_t)3 * v->c.patch * v->c.patch;
    for (int i = 0; i < n && !rc; i++) {
        rc = run_image(v, &m, patches, g[i], rows, NULL, err, errlen);
        patches += pin * g[i].gh * g[i].gw;
        rows += (size_t)v->c.out * (g[i].gh / 2) * (g[i].gw / 2);
    }
    img_free(&m);
    return rc;
}

int k3_vision_trace(K3Vision *v, const float *patches, K3VisionGrid g, const K3VisionTrace *t,
                    char *err, size_t errlen) {
    if (k3_vision_grid_ok(g, err, errlen)) return K3_ERR_USAGE;
    const long L = (long)g.gh * g.gw;
    Img m = { .v = v, .c = &v->c };
    float *rows = malloc(sizeof(float) * (size_t)(L / 4) * v->c.out);
    int rc = 0;
    if (!rows || img_alloc(&m, &v->c, L)) { snprintf(err, errlen, "out of memory"); rc = 1; }
    else rc = run_image(v, &m, patches, g, rows, t, err, errlen);
    img_free(&m);
    free(rows);
    return rc;
}
