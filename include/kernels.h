/* kernels.h — every hot operation of k3 behind one small interface.
 *
 * The contract: scalar, AVX2, AVX-512 and NEON give the same bits, at any thread
 * count. The scalar code in kernels.c *defines* the result; SIMD twins reproduce it.
 *
 * Canonical reduction order (K3_LANES = 16): a length-n reduction sum_i a[i]*b[i]
 * keeps 16 lane accumulators, starting at +0.0f; element i goes to lane i % 16 with
 * one fused multiply-add, acc[i%16] = fmaf(a[i], b[i], acc[i%16]), in increasing i.
 * The lanes are then folded by a fixed tree: for w = 8,4,2,1: acc[l] += acc[l+w]
 * (l < w). The result is acc[0]. Plain sums use the same lanes with additions.
 *
 * MXFP4 (docs/MODEL.md §4): row r, element c has nibble (packed[r][c/2] >> 4*(c&1)) & 15
 * and scale 2^(scale[r][c/32] - 127). The weight is the exact product
 * e2m1[nibble] * 2^(s-127) (exact in fp32). MXFP4 has its own lane assignment (so that
 * one byte feeds one lane and decoding is cheap): within each 32-element block (16
 * bytes), lane l (0..15) takes byte l: first acc[l] = fmaf(w[2l], x[2l], acc[l]) (low
 * nibble), then acc[l] = fmaf(w[2l+1], x[2l+1], acc[l]) (high nibble); blocks in
 * increasing order; then the same fold tree. (x is de-interleaved into even/odd halves
 * by the SIMD paths.)
 *
 * The E8M0 byte 255 is NaN (OCP MX); every path then yields NaN weights.
 *
 * Matrix products split work over output rows (and tokens), never over a reduction,
 * so results do not depend on the thread count. k3_matmul on T tokens gives, for each
 * token, exactly the bits of the T = 1 call.
 *
 * Elementwise ops (axpy, kda_step, rmsnorm scaling, softmax, situ) are single IEEE
 * operations per element (fmaf where written), so vectorising them cannot change bits.
 * Transcendentals (k3_expf, k3_tanhf) are our own, in plain double arithmetic (no libm,
 * no contraction): identical on x86-64 and AArch64, within 1 ulp of the true value.
 */
#ifndef K3_KERNELS_H
#define K3_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#define K3_LANES 16

enum { K3_W_F32 = 0, K3_W_BF16 = 1, K3_W_MXFP4 = 2, K3_W_BF16C = 3 };

/* A weight matrix [rows][cols], y = W x. For MXFP4, w is packed [rows][cols/2] and
 * scale is [rows][cols/32]; cols must be a multiple of 32. K3_W_BF16C (codec.h): BF16
 * weights stored coded: scale points to the u32 row offset table, row r starts at
 * (uint8_t *)w + rowoff[r]; the bits are exactly those of the BF16 matmul on the
 * decoded weights (same lanes, same order). src: a matrix whose rows
 * arrive in pieces (the streamed trunk, src/mem) has w NULL; k3_matmul hands the product
 * to src, which multiplies it piece by piece (rows are independent: the same bits). */
typedef struct K3RowSource K3RowSource;
typedef struct {
    int type;
    int rows, cols;
    const void *w;
    const uint8_t *scale;
    const K3RowSource *src;
} K3Mat;
struct K3RowSource {
    void (*matmul)(const K3RowSource *s, float *Y, const K3Mat *W, const float *X, int T);
};
/* While the forward's buffers live in a file (forward/runstate.c) it sets this for its
 * matmuls: a row source then multiplies K3_ACT_TOKENS tokens at a time through all its
 * rows and calls drop(arg) after each block, so what stays mapped is one block's rows,
 * never the prompt's (a streamed piece is kept for every block: read once). */
#define K3_ACT_TOKENS 128
typedef struct { void (*drop)(void *); void *arg; } K3ActDrop;
extern _Thread_local K3ActDrop k3_act_drop;

/* Select the implementation: "auto", "scalar", "avx2", "avx512", "neon".
 * Returns 0, or -1 with a message when the CPU (or this build) lacks it. */
int k3_kernels_select(const char *which, char *err, size_t errlen);
const char *k3_kernels_name(void);
/* 1 when the selected path decodes a coded trunk (K3_W_BF16C) at SIMD speed: AVX-512
 * with VBMI. The other paths give the same bits several times slower than plain BF16
 * (docs/CODEC.md), so the plan says so. */
int k3_kernels_coded_fast(void);

/* Threads used by k3_matmul (pool.h), caller included; n <= 0: online cores. */
void k3_threads_set(int n);
int k3_threads(void);

/* Y[t][r] = sum_c W[r][c] X[t][c] for t < T. Y is [T][rows], X is [T][cols]. */
void k3_matmul(float *Y, const K3Mat *W, const float *X, int T);
/* P's rows as rows [r0, r0 + P->rows) of a wider product: Y[t][r0 + r] = (P X_t)[r], Y is
 * [T][ldy]; the other columns of Y are left as they are. The bits of k3_matmul(P). A row
 * source's pieces land in place through it (no scatter copy). */
void k3_matmul_into(float *Y, int ldy, int r0, const K3Mat *P, const float *X, int T);

/* Canonical reductions (the order above). */
float k3_dot(const float *a, const float *b, int n);
float k3_sum(const float *a, int n);

/* y[i] = fmaf(a, x[i], y[i]) — elementwise, so every path agrees trivially. */
void k3_axpy(float *y, float a, const float *x, int n);
/* Several rows at once, with the bits of one call per row (the MLA's scores over the
 * latent cache and its weighted sum of them): out[j] = k3_dot(q, K + j * ks, n) for j < nk;
 * and k3_axpy(y, a[j], K + j * ks, n) for j = 0, 1, ..., nk - 1 in that order. */
void k3_dots(float *out, const float *q, const float *K, size_t ks, int nk, int n);
void k3_axpys(float *y, const float *a, const float *K, size_t ks, int nk, int n);

/* One KDA delta-rule step for one head (docs/MODEL.md §3.2 step 7), S is [D][D]
 * indexed [key i][value j]. Reductions over i are sequential fmaf in increasing i
 * (vectorised over j):
 *   S[i][j] *= alpha[i];  u[j] = sum_i S[i][j] k[i];  d[j] = beta (v[j] - u[j]);
 *   S[i][j] = fmaf(k[i], d[j], S[i][j]);  o[j] = sum_i S[i][j] q[i]. */
void k3_kda_step(float *S, const float *q, const float *k, const float *v,
                 const float *alpha, float beta, float *o, int D);

/* out = w * x / sqrt(mean(x^2) + eps)   (w may be NULL: no weight). out may alias x. */
void k3_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
/* The deterministic exp in double (relative error < 1e-15; 0 below -745.2, inf above
 * 709) behind k3_expf/k3_tanhf and the sampler. */
double k3_exp_d(double x);
/* Greedy choice: argmax, lowest index on ties, a NaN never beats a number. */
int k3_argmax(const float *x, int n);
/* In-place softmax over n (max-subtracted, canonical sum). */
void k3_softmax(float *x, int n);
/* out[i] = b1*tanh(g/b1)*sigmoid(g) * b2*tanh(u/b2)  (SiTU-GLU, docs/MODEL.md §3.6). */
void k3_situ(float *out, const float *g, const float *u, int n, float b1, float b2);
/* x[i] = siluf(x[i]); o[i] *= sigmoidf(g[i]) (the gates); both split over the pool when
 * long (elementwise: any split, the same bits). */
void k3_silu_n(float *x, size_t n);
void k3_sigmoid_mul(float *o, const float *g, size_t n);
/* y[i] = expf(x[i]), y[i] = sigmoidf(x[i]) on the calling thread (y may alias x). */
void k3_expf_n(float *y, const float *x, int n);
void k3_sigmoidf_n(float *y, const float *x, int n);

/* Transcendentals: our own, so every path and CPU gives the same bits. */
float k3_expf(float x);
float k3_tanhf(float x);
float k3_sigmoidf(float x);     /* 1 / (1 + exp(-x)) */
float k3_siluf(float x);        /* x * sigmoid(x) */
/* SiTU of one element: b1 tanh(g / b1) sigmoid(g) x b2 tanh(u / b2) (k3_situ's reference) */
float k3_situf(float g, float u, float b1, float b2);

/* bf16 <-> f32 (round to nearest even on narrowing). */
static inline float k3_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f;
}

/* ---- Internal: one table of entry points per implementation (kernels*.c, tests). */
typedef struct {
    const char *name;
    /* Y[t][r] for r in [r0, r1), t in [t0, t1); Y, X are the full [T][rows], [T][cols]. */
    void (*matmul)(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1);
    float (*dot)(const float *a, const float *b, int n);
    float (*sum)(const float *a, int n);
    void (*axpy)(float *y, float a, const float *x, int n);
    void (*kda_step)(float *S, const float *q, const float *k, const float *v,
                     const float *alpha, float beta, float *o, int D);
    /* elementwise transcendentals, the bits of the scalar functions (NULL: those) */
    void (*situ)(float *out, const float *g, const float *u, int n, float b1, float b2);
    void (*silu)(float *x, int n);
    void (*sigmul)(float *o, const float *g, int n);
    void (*expv)(float *y, const float *x, int n);
    void (*sigmoidv)(float *y, const float *x, int n);
    /* k3_dots, k3_axpys (NULL: a loop of dot, of axpy) */
    void (*dots)(float *out, const float *q, const float *K, size_t ks, int nk, int n);
    void (*axpys)(float *y, const float *a, const float *K, size_t ks, int nk, int n);
} K3KernelOps;
/* NULL when the implementation is not compiled into this build. */
const K3KernelOps *k3_kernels_scalar(void);
const K3KernelOps *k3_kernels_avx2(void);
const K3KernelOps *k3_kernels_avx512(void);
const K3KernelOps *k3_kernels_neon(void);
/* x86 only: what each set's kernels ask of the scratch slots (k3_scratch_bound) */
void k3_avx2_scratch(int T, int rows, int cols, size_t *slot);
void k3_avx512_scratch(int T, int rows, int cols, size_t *slot);
/* AVX-512 prefill from 32 tokens: the blocked GEMM (1) or the register tiles (0), the same
 * bits; chosen by the L2's size (K3_AVX512_GEMM=0/1 overrides). on: 0/1 sets, -1 asks;
 * returns the choice before the call. */
int k3_avx512_prefill_gemm(int on);
/* Per-thread scratch of at least `bytes` (64-byte aligned, reused, freed at thread exit);
 * NULL when out of memory (the SIMD prefill then falls back to the scalar kernel).
 * k3_scratch is slot K3_SCRATCH_KERNEL; a caller that holds its slot across a kernel call
 * (the coded prefill's decoded rows) uses another. */
/* The prefill kernels' token blocks: T >= 1 tokens in even blocks of at most `most` (73
 * tokens at 72 go as 37 + 36, not 72 + 1); the tokens of a block */
static inline int k3_block_tokens(int T, int most) {
    const int nb = (T + most - 1) / most;
    return (T + nb - 1) / nb;
}
enum { K3_SCRATCH_KERNEL, K3_SCRATCH_CODEC, K3_SCRATCH_MLA, K3_SCRATCH_SLOTS };   /* MLA: mla.c */
void *k3_scratch_slot(int slot, size_t bytes);
void *k3_scratch(size_t bytes);
/* What one thread's slots K3_SCRATCH_KERNEL and K3_SCRATCH_CODEC grow to over matmuls of
 * up to T tokens on a rows x cols matrix, under any kernel set built in: slot[i] raised to
 * it. The memory plan counts it for every thread (k3_runstate_scratch_bytes). */
void k3_scratch_bound(int T, int rows, int cols, size_t slot[K3_SCRATCH_SLOTS]);
size_t k3_scratch_held(int slot);   /* this thread's slot's bytes now (tests) */
/* Does this CPU run it? (compiled in and supported) */
int k3_kernels_usable(const char *which);

/* E8M0 scales as float bits: k3_e8m0_bits[s] = 2^(s-127), k3_e8m0_half_bits[s] =
 * 2^(s-128) (both exact, subnormal for small s; s = 255: NaN). */
extern const uint32_t k3_e8m0_bits[256];
extern const uint32_t k3_e8m0_half_bits[256];
/* E2M1 values by nibble (bit 3 = sign, so 8 is -0). */
extern const float k3_e2m1[16];
/* ---- Attention tiles (the vision tower's online softmax, src/vision/vision.c), vectorised
 * over a tile of bq queries (bq a multiple of 16): Qt [hd][bq] (the queries transposed),
 * K [nk][hd], S (scores, then probabilities) [nk][bq], V [hd][ldv] (values transposed),
 * O [hd][bq]. The order, defined by the scalar reference (kernels_attn.c); every path gives
 * its bits (a SIMD FMA is one fmaf):
 *   scores: S[j][i] = one fmaf chain over d = 0, 1, ..., hd-1 from +0: fmaf(K[j][d],
 *           Qt[d][i], s); then mx[i] = S[j][i] > mx[i] ? S[j][i] : mx[i], j increasing;
 *   exp:    S[j][i] = k3_exp_neg(S[j][i] - mx[i]); l[i] = l[i] + S[j][i], j increasing;
 *   pv:     O[d][i] = one fmaf chain over j = 0, 1, ..., nk-1: fmaf(V[d][j], S[j][i], o)
 *           from o = O[d][i] * c[i] (the online softmax's rescale, one rounding). */
typedef struct {
    const char *name;
    void (*scores)(float *S, const float *Qt, const float *K, int nk, int hd, int bq,
                   float *mx);
    void (*exp)(float *S, const float *mx, float *l, int nk, int bq);
    void (*pv)(float *O, const float *V, size_t ldv, const float *S, const float *c, int nk,
               int hd, int bq);
} K3AttnOps;
/* The selected path's (k3_kernels_select); the others NULL when not compiled in. */
const K3AttnOps *k3_attn_ops(void);
const K3AttnOps *k3_attn_scalar(void);
const K3AttnOps *k3_attn_avx2(void);
const K3AttnOps *k3_attn_avx512(void);
const K3AttnOps *k3_attn_neon(void);
/* exp(x) for the softmax's x = s - max <= 0, float only: x floored at -104 (as bits: an
 * unsigned min), t = fmaf(x, log2 e, 1.5 2^23), k = t - 1.5 2^23 (round(x log2 e)),
 * r = fmaf(-k, ln2_lo, fmaf(-k, ln2_hi, x)), p = Horner's fmaf chain of Taylor's degree 7,
 * times 2^k built from t's bits (0 when k < -126). Within 1 ulp of exp over [-87, 0]. */
float k3_exp_neg(float x);
#endif
