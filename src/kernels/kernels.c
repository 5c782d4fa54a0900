/* kernels.c — the scalar reference of every kernel in kernels.h (these functions
 * define the bits; kernels_avx2.c, kernels_avx512.c, kernels_neon.c reproduce them),
 * the run-time dispatch, the threaded matmul driver and our own transcendentals. */
#include "kernels.h"
#include "codec.h"
#include "pool.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

const float k3_e2m1[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                            -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

#define E8(s)  ((s) == 0 ? 0x00400000u : (s) == 255 ? 0x7FC00000u : (uint32_t)(s) << 23)
#define E8H(s) ((s) == 0 ? 0x00200000u : (s) == 1 ? 0x00400000u : (s) == 255 ? 0x7FC00000u \
                : (uint32_t)((s) - 1) << 23)
#define R4(M, s)   M(s), M(s + 1), M(s + 2), M(s + 3)
#define R16(M, s)  R4(M, s), R4(M, s + 4), R4(M, s + 8), R4(M, s + 12)
#define R64(M, s)  R16(M, s), R16(M, s + 16), R16(M, s + 32), R16(M, s + 48)
const uint32_t k3_e8m0_bits[256] = { R64(E8, 0), R64(E8, 64), R64(E8, 128), R64(E8, 192) };
const uint32_t k3_e8m0_half_bits[256] = { R64(E8H, 0), R64(E8H, 64), R64(E8H, 128), R64(E8H, 192) };

static float f32_bits(uint32_t u) { union { uint32_t u; float f; } v; v.u = u; return v.f; }

/* ------------------------------------------------------------------ scalar reference */
static float fold(float acc[K3_LANES]) {
    for (int w = K3_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static float dot_s(const float *a, const float *b, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % K3_LANES] = fmaf(a[i], b[i], acc[i % K3_LANES]);
    return fold(acc);
}

static float sum_s(const float *a, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % K3_LANES] += a[i];
    return fold(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++)
        acc[i % K3_LANES] = fmaf(k3_bf16_to_f32(w[i]), x[i], acc[i % K3_LANES]);
    return fold(acc);
}

/* MXFP4 lane order (kernels.h): in each 32-element block, lane l takes byte l of the
 * block's 16 bytes: first its low nibble (element 2l), then its high nibble (2l+1). */
static float dot_mxfp4(const uint8_t *p, const uint8_t *sc, const float *x, int n) {
    float acc[K3_LANES] = {0};
    for (int b = 0; b < n; b += 32) {              /* n is a multiple of 32 */
        float s = f32_bits(k3_e8m0_bits[sc[b >> 5]]);
        const uint8_t *q = p + (b >> 1);
        for (int l = 0; l < K3_LANES; l++) {
            float w0 = k3_e2m1[q[l] & 15] * s, w1 = k3_e2m1[q[l] >> 4] * s;   /* exact */
            acc[l] = fmaf(w0, x[b + 2 * l], acc[l]);
            acc[l] = fmaf(w1, x[b + 2 * l + 1], acc[l]);
        }
    }
    return fold(acc);
}

/* K3_W_BF16C (codec.h): each block decoded to BF16, then exactly dot_bf16's lanes and
 * order (a block is 256 columns, a multiple of the 16 lanes). */
static float dot_bf16c(const K3Mat *W, int r, const float *x) {
    float acc[K3_LANES] = {0};
    uint16_t w[K3_CODEC_BLOCK];
    const uint8_t *p = k3_codec_row(W, r);
    for (int c = 0; c < W->cols; c += K3_CODEC_BLOCK) {
        int n = W->cols - c < K3_CODEC_BLOCK ? W->cols - c : K3_CODEC_BLOCK;
        p = k3_codec_decode_block(w, p, n);
        for (int i = 0; i < n; i++)
            acc[i % K3_LANES] = fmaf(k3_bf16_to_f32(w[i]), x[c + i], acc[i % K3_LANES]);
    }
    return fold(acc);
}

static void matmul_s(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    int cols = W->cols;
    for (int t = t0; t < t1; t++) {
        const float *x = X + (size_t)t * cols;
        float *y = Y + (size_t)t * W->rows;
        for (int r = r0; r < r1; r++) {
            size_t ro = (size_t)r * cols;
            switch (W->type) {
            case K3_W_F32:  y[r] = dot_s((const float *)W->w + ro, x, cols); break;
            case K3_W_BF16: y[r] = dot_bf16((const uint16_t *)W->w + ro, x, cols); break;
            case K3_W_BF16C: y[r] = dot_bf16c(W, r, x); break;
            default:
                y[r] = dot_mxfp4((const uint8_t *)W->w + ro / 2, W->scale + ro / 32, x, cols);
                break;
            }
        }
    }
}

static void axpy_s(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

static void kda_step_s(float *S, const float *q, const float *k, const float *v,
                       const float *alpha, float beta, float *o, int D) {
    float u[D], d[D];
    for (int j = 0; j < D; j++) u[j] = 0.0f;
    for (int i = 0; i < D; i++) {                 /* decay, then read the decayed state */
        float *Si = S + (size_t)i * D;
        for (int j = 0; j < D; j++) { Si[j] *= alpha[i]; u[j] = fmaf(Si[j], k[i], u[j]); }
    }
    for (int j = 0; j < D; j++) { d[j] = beta * (v[j] - u[j]); o[j] = 0.0f; }
    for (int i = 0; i < D; i++) {                 /* write, then read the updated state */
        float *Si = S + (size_t)i * D;
        for (int j = 0; j < D; j++) {
            Si[j] = fmaf(k[i], d[j], Si[j]); o[j] = fmaf(Si[j], q[i], o[j]);
        }
    }
}

/* the elementwise references (the SIMD twins do these operations lane by lane) */
static void situ_s(float *out, const float *g, const float *u, int n, float b1, float b2) {
    for (int i = 0; i < n; i++) out[i] = k3_situf(g[i], u[i], b1, b2);
}
static void silu_s(float *x, int n) { for (int i = 0; i < n; i++) x[i] = k3_siluf(x[i]); }
static void sigmul_s(float *o, const float *g, int n) {
    for (int i = 0; i < n; i++) o[i] *= k3_sigmoidf(g[i]);
}
static void expv_s(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = k3_expf(x[i]);
}
static void sigmoidv_s(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = k3_sigmoidf(x[i]);
}
static const K3KernelOps OPS_SCALAR = { "scalar", matmul_s, dot_s, sum_s, axpy_s, kda_step_s,
                                        situ_s, silu_s, sigmul_s, expv_s, sigmoidv_s,
                                        NULL, NULL };   /* k3_dots, k3_axpys: their loops */
const K3KernelOps *k3_kernels_scalar(void) { return &OPS_SCALAR; }

/* ------------------------------------------------------------------ dispatch */
static const K3KernelOps *cur;
static pthread_once_t auto_once = PTHREAD_ONCE_INIT;

static int cpu_has(const char *which) {
    if (!strcmp(which, "scalar")) return 1;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!strcmp(which, "avx2"))
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!strcmp(which, "avx512"))      /* K3_CPU_NO_AVX512=1: an AVX2-only machine (tests) */
        return !getenv("K3_CPU_NO_AVX512") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq");
    return 0;
#elif defined(__aarch64__)
    return !strcmp(which, "neon");
#else
    (void)which; return 0;
#endif
}

static const K3KernelOps *lookup(const char *which) {
    if (!strcmp(which, "scalar")) return k3_kernels_scalar();
    if (!strcmp(which, "avx2")) return k3_kernels_avx2();
    if (!strcmp(which, "avx512")) return k3_kernels_avx512();
    if (!strcmp(which, "neon")) return k3_kernels_neon();
    return NULL;
}

int k3_kernels_usable(const char *which) {
    return !strcmp(which, "scalar") || (lookup(which) && cpu_has(which));
}

static const K3KernelOps *best(void) {
    static const char *order[] = { "avx512", "avx2", "neon" };
    for (int i = 0; i < 3; i++) if (k3_kernels_usable(order[i])) return lookup(order[i]);
    return k3_kernels_scalar();
}
static void auto_init(void) { if (!cur) cur = best(); }
static const K3KernelOps *ops(void) {
    if (!cur) pthread_once(&auto_once, auto_init);
    return cur;
}

int k3_kernels_select(const char *which, char *err, size_t errlen) {
    if (!which || !strcmp(which, "auto")) { cur = best(); return 0; }
    const char *known[] = { "scalar", "avx2", "avx512", "neon" };
    int ok = 0;
    for (int i = 0; i < 4; i++) ok |= !strcmp(which, known[i]);
    if (!ok) {
        if (err) snprintf(err, errlen,
                          "--kernels %s: unknown (use auto, scalar, avx2, avx512 or neon)", which);
        return -1;
    }
    if (!lookup(which)) {
        if (err) snprintf(err, errlen, "--kernels %s: not compiled into this build for this "
                          "architecture (use auto or scalar)", which);
        return -1;
    }
    if (!cpu_has(which)) {
        if (err) snprintf(err, errlen, "--kernels %s: this CPU lacks the instructions "
                          "(use auto, which picks %s here)", which, best()->name);
        return -1;
    }
    cur = lookup(which);
    return 0;
}
const char *k3_kernels_name(void) { return ops()->name; }
int k3_kernels_coded_fast(void) {
    return !strcmp(ops()->name, "avx512") && k3_avx512_codec_vbmi(-1);
}

/* ------------------------------------------------------------------ per-thread scratch */
/* For the prefill kernels (parked lanes, X panels) and the coded prefill's decoded rows
 * (one slot each: the coded prefill calls a kernel that uses its own): grown on demand,
 * 64-byte aligned, freed when the thread exits (a key destructor). NULL when out of
 * memory. */
static pthread_key_t scratch_key[K3_SCRATCH_SLOTS];
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local struct { void *p; size_t n; } scratch[K3_SCRATCH_SLOTS];
static void scratch_init(void) {
    for (int i = 0; i < K3_SCRATCH_SLOTS; i++) pthread_key_create(&scratch_key[i], free);
}
void *k3_scratch_slot(int slot, size_t bytes) {
    if (scratch[slot].n >= bytes) return scratch[slot].p;
    pthread_once(&scratch_once, scratch_init);
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes)) return NULL;
    free(scratch[slot].p);
    scratch[slot].p = p; scratch[slot].n = bytes;
    pthread_setspecific(scratch_key[slot], p);
    return p;
}
void *k3_scratch(size_t bytes) { return k3_scratch_slot(K3_SCRATCH_KERNEL, bytes); }
size_t k3_scratch_held(int slot) { return scratch[slot].n; }

/* Each file bounds what its own kernels ask for, beside the constants that size it. */
void k3_scratch_bound(int T, int rows, int cols, size_t slot[K3_SCRATCH_SLOTS]) {
    if (T > 1) k3_codec_prefill_scratch(T, rows, cols, slot);
#if defined(__x86_64__) || defined(__i386__)
    k3_avx2_scratch(T, rows, cols, slot);
    k3_avx512_scratch(T, rows, cols, slot);
#endif
}

/* ------------------------------------------------------------------ threaded matmul */
/* Below this many multiply-adds a matmul runs inline (waking workers costs ~10 us). */
#define K3_INLINE_MACS (1 << 17)

typedef struct {
    const K3KernelOps *o;
    float *Y; const K3Mat *W; const float *X;
    int r0, r1, rchunk, nrc, tchunk, T;
} MatJob;

static void mat_task(void *ctx, int i) {
    MatJob *j = ctx;
    int rc = i % j->nrc, tc = i / j->nrc;
    int r0 = j->r0 + rc * j->rchunk, r1 = r0 + j->rchunk;
    int t0 = tc * j->tchunk, t1 = t0 + j->tchunk;
    if (r1 > j->r1) r1 = j->r1;
    if (t1 > j->T) t1 = j->T;
    if (r0 < r1 && t0 < t1) j->o->matmul(j->Y, j->W, j->X, r0, r1, t0, t1);
}

_Thread_local K3ActDrop k3_act_drop;

/* Rows [r0, r1) of Y [T][W->rows] = W X, split over the pool */
static void matmul_rows(float *Y, const K3Mat *W, const float *X, int T, int r0, int r1) {
    const K3KernelOps *o = ops();
    int rows = r1 - r0, nt = k3_threads();
    if (T <= 0 || rows <= 0) return;
    if (nt <= 1 || (double)rows * W->cols * T < K3_INLINE_MACS) {
        o->matmul(Y, W, X, r0, r1, 0, T); return;
    }
    MatJob j = { o, Y, W, X, r0, r1, 0, 0, T, T };
    /* Row chunks (multiples of 16 rows), about 4 per thread for balance on a noisy
     * machine; when rows are too few, split tokens as well. */
    int want = 4 * nt;
    int rchunk = (rows + want - 1) / want;
    rchunk = (rchunk + 15) & ~15;
    j.rchunk = rchunk;
    j.nrc = (rows + rchunk - 1) / rchunk;
    if (j.nrc < 2 * nt && T > 1) {
        int ntc = (2 * nt + j.nrc - 1) / j.nrc;
        if (ntc > T) ntc = T;
        j.tchunk = (T + ntc - 1) / ntc;
    }
    int ntc = (T + j.tchunk - 1) / j.tchunk;
    k3_pool_run(mat_task, &j, j.nrc * ntc);
}

void k3_matmul(float *Y, const K3Mat *W, const float *X, int T) {
    if (T <= 0 || W->rows <= 0) return;
    if (W->src) { W->src->matmul(W->src, Y, W, X, T); return; }   /* rows in pieces */
    matmul_rows(Y, W, X, T, 0, W->rows);
}

/* The kernels read rows [r0, r1) of W only and take W->rows as Y's row stride, so a view
 * whose rows start r0 rows before P's (the addresses are never dereferenced below P) puts
 * P's products straight into their columns of Y: no scatter. */
void k3_matmul_into(float *Y, int ldy, int r0, const K3Mat *P, const float *X, int T) {
    if (T <= 0 || P->rows <= 0) return;
    K3Mat V = *P;
    const uintptr_t n = (uintptr_t)r0 * (uintptr_t)P->cols;
    V.rows = ldy;
    if (P->type == K3_W_BF16C) V.scale = (const uint8_t *)((uintptr_t)P->scale - 4 * (uintptr_t)r0);
    else if (P->type == K3_W_MXFP4) {
        V.w = (const void *)((uintptr_t)P->w - n / 2);
        V.scale = (const uint8_t *)((uintptr_t)P->scale - n / 32);
    } else V.w = (const void *)((uintptr_t)P->w - n * (P->type == K3_W_F32 ? 4 : 2));
    matmul_rows(Y, &V, X, T, r0, r0 + P->rows);
}

/* ------------------------------------------------------------------ public reductions */
float k3_dot(const float *a, const float *b, int n) { return ops()->dot(a, b, n); }
float k3_sum(const float *a, int n) { return ops()->sum(a, n); }
void k3_axpy(float *y, float a, const float *x, int n) { ops()->axpy(y, a, x, n); }
void k3_dots(float *out, const float *q, const float *K, size_t ks, int nk, int n) {
    const K3KernelOps *o = ops();
    if (o->dots) { o->dots(out, q, K, ks, nk, n); return; }
    for (int j = 0; j < nk; j++) out[j] = o->dot(q, K + (size_t)j * ks, n);
}
void k3_axpys(float *y, const float *a, const float *K, size_t ks, int nk, int n) {
    const K3KernelOps *o = ops();
    if (o->axpys) { o->axpys(y, a, K, ks, nk, n); return; }
    for (int j = 0; j < nk; j++) o->axpy(y, a[j], K + (size_t)j * ks, n);
}
void k3_kda_step(float *S, const float *q, const float *k, const float *v,
                 const float *alpha, float beta, float *o, int D) {
    ops()->kda_step(S, q, k, v, alpha, beta, o, D);
}

void k3_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = k3_dot(x, x, n);
    float r = 1.0f / sqrtf(ss / (float)n + eps);   /* sqrtf is correctly rounded (IEEE) */
    for (int i = 0; i < n; i++) out[i] = w ? w[i] * (x[i] * r) : x[i] * r;
}

void k3_softmax(float *x, int n) {
    if (n <= 0) return;
    float m = x[0];
    for (int i = 1; i < n; i++) if (x[i] > m) m = x[i];
    for (int i = 0; i < n; i++) x[i] = k3_expf(x[i] - m);
    float inv = 1.0f / k3_sum(x, n);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* The elementwise ops: the path's twin (the scalar loop where it has none), split over
 * the pool in blocks of EW_BLOCK elements when long (each element alone: the same bits). */
#define EW_BLOCK 4096
static const K3KernelOps *ew(void) { return ops()->situ ? ops() : &OPS_SCALAR; }
typedef struct { int kind; float *o; const float *g, *u; size_t n; float b1, b2; } EwJob;
static void ew_task(void *ctx, int i) {
    const EwJob *j = ctx;
    size_t a = (size_t)i * EW_BLOCK, m = j->n - a < EW_BLOCK ? j->n - a : EW_BLOCK;
    if (j->kind == 0) ew()->situ(j->o + a, j->g + a, j->u + a, (int)m, j->b1, j->b2);
    else if (j->kind == 1) ew()->silu(j->o + a, (int)m);
    else ew()->sigmul(j->o + a, j->g + a, (int)m);
}
static void ew_run(EwJob *j) {
    size_t nb = (j->n + EW_BLOCK - 1) / EW_BLOCK;
    if (nb > 1 && k3_threads() > 1) { k3_pool_run(ew_task, j, (int)nb); return; }
    for (size_t i = 0; i < nb; i++) ew_task(j, (int)i);
}
void k3_situ(float *out, const float *g, const float *u, int n, float b1, float b2) {
    EwJob j = { 0, out, g, u, n > 0 ? (size_t)n : 0, b1, b2 };
    ew_run(&j);
}
void k3_silu_n(float *x, size_t n) { EwJob j = { 1, x, NULL, NULL, n, 0, 0 }; ew_run(&j); }
void k3_sigmoid_mul(float *o, const float *g, size_t n) {
    EwJob j = { 2, o, g, NULL, n, 0, 0 };
    ew_run(&j);
}
void k3_expf_n(float *y, const float *x, int n) { ew()->expv(y, x, n); }
void k3_sigmoidf_n(float *y, const float *x, int n) { ew()->sigmoidv(y, x, n); }

/* ------------------------------------------------------------------ transcendentals */
/* The one deterministic exp of k3 (kernels and sampler): x = k ln2 + r, |r| <= ln2/2
 * (Cody-Waite split of ln2, k*LN2_HI exact), exp(r) by its Taylor series to degree 13
 * (truncation < 5e-18), then scaled by 2^k with ldexp (exact). Plain double operations
 * only, no contraction: the same bits on every machine. */
double k3_exp_d(double x) {
    const double INV_LN2 = 1.4426950408889634074;
    const double LN2_HI = 6.93147180369123816490e-01;   /* 0x3fe62e42fee00000 */
    const double LN2_LO = 1.90821492927058770002e-10;   /* 0x3dea39ef35793c76 */
    if (x != x) return x;
    if (x > 709.0) return HUGE_VAL;
    if (x < -745.2) return 0.0;
    double t = x * INV_LN2;
    long k = t >= 0 ? (long)(t + 0.5) : -(long)(0.5 - t);
    double kd = (double)k;
    double r = (x - kd * LN2_HI) - kd * LN2_LO;
    double p = 1.0 / 6227020800.0;                      /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return ldexp(p, (int)k);
}

/* Greedy choice: the largest value, lowest index on ties; a NaN never wins over a
 * number (index 0 only when every value is NaN). */
int k3_argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b] || (x[b] != x[b] && x[i] == x[i])) b = i;
    return b;
}

float k3_expf(float x) {
    if (x != x) return x + x;
    if (x > 89.0f) return HUGE_VALF;
    if (x < -104.0f) return 0.0f;
    return (float)k3_exp_d((double)x);
}

float k3_tanhf(float x) {
    if (x != x || x == 0) return x + x;
    double d = (double)x, a = d < 0 ? -d : d, r;
    if (a < 0.125) {             /* odd Taylor series; next term < 1e-12 relative */
        double z = d * d;
        double p = -929569.0 / 638512875.0;
        p = p * z + 21844.0 / 6081075.0;
        p = p * z - 1382.0 / 155925.0;
        p = p * z + 62.0 / 2835.0;
        p = p * z - 17.0 / 315.0;
        p = p * z + 2.0 / 15.0;
        p = p * z - 1.0 / 3.0;
        return (float)(d + d * (z * p));
    }
    if (a >= 10.0) r = 1.0;
    else r = 1.0 - 2.0 / (k3_exp_d(2.0 * a) + 1.0);
    return (float)(d < 0 ? -r : r);
}

float k3_sigmoidf(float x) { return 1.0f / (1.0f + k3_expf(-x)); }
float k3_siluf(float x) { return x * k3_sigmoidf(x); }
float k3_situf(float g, float u, float b1, float b2) {
    float a = b1 * k3_tanhf(g / b1) * k3_sigmoidf(g);
    return a * (b2 * k3_tanhf(u / b2));
}
