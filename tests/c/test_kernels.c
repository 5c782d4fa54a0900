/* test_kernels.c — conformance of every kernel path against the scalar reference,
 * bit for bit, at several thread counts; the scalar reference against independent
 * double-precision math; our transcendentals against libm in double. */
#include "kernels.h"
#include "pool.h"
#if defined(__x86_64__)
#include "kernels/kernels_avx2.h"
#endif
#include <math.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 16);
}
static float frand(void) {           /* mixed magnitudes, both signs */
    float m = (float)(rnd() % 100000) / 100000.0f;
    int e = (int)(rnd() % 9) - 4;
    return (rnd() & 1 ? -1 : 1) * ldexpf(m, e);
}
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int same(float a, float b) { return bits(a) == bits(b) || (a != a && b != b); }

#define CHECK(cond, ...) do { if (!(cond)) { if (fails++ < 20) {                              \
        printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); } } } while (0)

static void fill_mat(K3Mat *m, int type, int rows, int cols, int special, void **buf) {
    m->type = type; m->rows = rows; m->cols = cols; m->scale = NULL; m->src = NULL;
    size_t n = (size_t)rows * cols;
    if (type == K3_W_F32) {
        float *w = malloc(n * 4 + 4);
        for (size_t i = 0; i < n; i++) w[i] = frand();
        *buf = w;
    } else if (type == K3_W_BF16) {
        uint16_t *w = malloc(n * 2 + 2);
        for (size_t i = 0; i < n; i++) w[i] = (uint16_t)(bits(frand()) >> 16);
        *buf = w;
    } else {
        uint8_t *p = malloc(n / 2 + n / 32 + 2);
        uint8_t *s = p + n / 2;
        for (size_t i = 0; i < n / 2; i++) p[i] = (uint8_t)rnd();
        for (size_t i = 0; i < n / 32; i++) {
            uint32_t r = rnd() % 8;   /* adversarial scale bytes: 0 (2^-127), 1, 254 */
            s[i] = special == 1 ? 254 : r == 0 ? 0 : r == 1 ? 1 : (uint8_t)(110 + rnd() % 30);
        }
        for (size_t i = 0; i < n / 2; i += 7) p[i] = 0x88;     /* negative zeros */
        m->scale = s;
        *buf = p;
    }
    m->w = *buf;
}

static const char *TYPES[] = { "f32", "bf16", "mxfp4" };

/* every matmul shape on the current path+threads vs the scalar reference */
static void check_matmul(const char *path, int nth) {
    static const int ROWS[] = { 1, 3, 7, 16, 33, 67 };
    static const int COLS[] = { 1, 5, 16, 17, 31, 64, 100, 259 };
    static const int MCOLS[] = { 32, 64, 96, 288 };
    const K3KernelOps *ref = k3_kernels_scalar();
    for (int type = 0; type < 3; type++)
    for (int ri = 0; ri < 6; ri++)
    for (int ci = 0; ci < (type == 2 ? 4 : 8); ci++)
    for (int special = 0; special < (type == 2 ? 2 : 1); special++) {
        static int tc;
        int rows = ROWS[ri], cols = type == 2 ? MCOLS[ci] : COLS[ci],
            T = 1 + tc++ % 7;                                                     /* T = 1..7 */
        K3Mat m; void *buf;
        fill_mat(&m, type, rows, cols, special, &buf);
        float *X = malloc(sizeof(float) * T * cols), *Y = malloc(sizeof(float) * T * rows);
        float *R = malloc(sizeof(float) * T * rows), *Y1 = malloc(sizeof(float) * rows);
        for (int i = 0; i < T * cols; i++) X[i] = special ? ldexpf(frand(), -12) : frand();
        ref->matmul(R, &m, X, 0, rows, 0, T);
        k3_matmul(Y, &m, X, T);
        int bad = 0;
        for (int i = 0; i < T * rows; i++) bad += !same(Y[i], R[i]);
        CHECK(!bad, "%s threads=%d matmul %s %dx%d T=%d special=%d: %d outputs differ", path, nth,
              TYPES[type], rows, cols, T, special, bad);
        for (int t = 0; t < T; t++) {       /* T tokens == T calls with one token */
            k3_matmul(Y1, &m, X + (size_t)t * cols, 1);
            bad = 0;
            for (int r = 0; r < rows; r++) bad += !same(Y1[r], Y[(size_t)t * rows + r]);
            CHECK(!bad, "%s matmul %s %dx%d token %d of %d differs from T=1", path, TYPES[type],
                  rows, cols, t, T);
        }
        free(X); free(Y); free(R); free(Y1); free(buf);
    }
    /* big enough to be split over the pool and to take the column-blocked prefill path
     * (cols > 1024: more than one 1024-column block, bf16: T = 75 = two 72-token blocks,
     * every tile width 1..6, more than one 128-row block), odd rows */
    for (int type = 0; type < 3; type++) {
        int rows = 131, cols = 1088 + (type == 2 ? 0 : 3), T = type == 1 ? 75 : type == 2 ? 13 : 7;
        K3Mat m; void *buf;
        fill_mat(&m, type, rows, cols, 0, &buf);
        float *X = malloc(sizeof(float) * T * cols), *Y = malloc(sizeof(float) * T * rows),
              *R = malloc(sizeof(float) * T * rows);
        for (int i = 0; i < T * cols; i++) X[i] = frand();
        ref->matmul(R, &m, X, 0, rows, 0, T);
        k3_matmul(Y, &m, X, T);
        int bad = 0;
        for (int i = 0; i < T * rows; i++) bad += !same(Y[i], R[i]);
        CHECK(!bad, "%s threads=%d threaded matmul %s %dx%d T=%d: %d differ", path, nth,
              TYPES[type], rows, cols, T, bad);
        free(X); free(Y); free(R); free(buf);
    }
}

/* the prefill tiles' edges (issue 24): T = 1, 2 and around the 3- and 6-token tiles and
 * the 64/72-token blocks, odd rows that are not a multiple of the 4-row tile nor of the
 * 32/64-row blocks, the fewest columns and column counts past one and two 1024-column
 * blocks (both GEMMs' KC; parked lanes continue over the block edges), with a tail; MXFP4
 * with NaN scale bytes (255) in some blocks. Every output must equal the scalar's bits
 * and the path's own T = 1 call. */
static void check_edges(const char *path, int nth) {
    static const int TS[] = { 1, 2, 63, 64, 65, 257 };
    static const int RS[] = { 5, 67 };
    static const int CS[] = { 1, 17, 529, 1040, 2065 }, MCS[] = { 32, 544, 1056, 2080 };
    const K3KernelOps *ref = k3_kernels_scalar();
    for (int type = 0; type < 3; type++)
    for (int ti = 0; ti < 6; ti++)
    for (int ri = 0; ri < 2; ri++)
    for (int ci = 0; ci < (type == 2 ? 4 : 5); ci++) {
        int T = TS[ti], rows = RS[ri], cols = type == 2 ? MCS[ci] : CS[ci];
        K3Mat m; void *buf;
        fill_mat(&m, type, rows, cols, 0, &buf);
        if (type == 2)
            for (int i = 0; i < rows * cols / 32; i += 5) ((uint8_t *)m.scale)[i] = 255;
        float *X = malloc(sizeof(float) * T * cols), *Y = malloc(sizeof(float) * T * rows),
              *R = malloc(sizeof(float) * T * rows);
        for (int i = 0; i < T * cols; i++) X[i] = frand();
        ref->matmul(R, &m, X, 0, rows, 0, T);
        k3_matmul(Y, &m, X, T);
        int bad = 0;
        for (int i = 0; i < T * rows; i++) bad += !same(Y[i], R[i]);
        CHECK(!bad, "%s threads=%d edges %s %dx%d T=%d: %d outputs differ", path, nth,
              TYPES[type], rows, cols, T, bad);
        bad = 0;
        for (int t = 0; t < T; t++) {       /* the prefill tile == the matvec, token by token */
            k3_matmul(R, &m, X + (size_t)t * cols, 1);
            for (int r = 0; r < rows; r++) bad += !same(R[r], Y[(size_t)t * rows + r]);
        }
        CHECK(!bad, "%s threads=%d edges %s %dx%d T=%d: %d outputs differ from T = 1", path,
              nth, TYPES[type], rows, cols, T, bad);
        free(X); free(Y); free(R); free(buf);
    }
}

static void check_vec(const char *path) {
    const K3KernelOps *ref = k3_kernels_scalar();
    enum { N = 1100 };
    static float a[N], b[N], y1[N], y2[N];
    for (int n = 0; n < N; n += (n < 70 ? 1 : 257)) {
        for (int i = 0; i < n; i++) { a[i] = frand(); b[i] = frand(); y1[i] = y2[i] = frand(); }
        CHECK(same(k3_dot(a, b, n), ref->dot(a, b, n)), "%s dot n=%d", path, n);
        CHECK(same(k3_sum(a, n), ref->sum(a, n)), "%s sum n=%d", path, n);
        float s = frand();
        k3_axpy(y1, s, a, n); ref->axpy(y2, s, a, n);
        CHECK(!memcmp(y1, y2, sizeof(float) * n), "%s axpy n=%d", path, n);
    }
    /* several rows at once (the MLA): the bits of one scalar dot / axpy per row, in order;
     * rows a stride apart, n with and without a 16-lane tail, nk across the 8-row blocks */
    static const int NS[] = { 1, 16, 37, 64, 128, 144, 512, 576 };
    static float K[21 * 600], o1[21], w[21];
    for (int ni = 0; ni < 8; ni++)
        for (int nk = 1; nk <= 21; nk += (nk < 9 ? 1 : 4)) {
            const int n = NS[ni];
            const size_t ks = (size_t)n + (ni & 1) * 7;
            for (size_t i = 0; i < (size_t)nk * ks; i++) K[i] = frand();
            for (int i = 0; i < n; i++) { a[i] = frand(); y1[i] = y2[i] = frand(); }
            for (int j = 0; j < nk; j++) w[j] = frand();
            k3_dots(o1, a, K, ks, nk, n);
            int bad = 0;
            for (int j = 0; j < nk; j++) bad += !same(o1[j], ref->dot(a, K + j * ks, n));
            CHECK(!bad, "%s dots n=%d nk=%d: %d differ", path, n, nk, bad);
            k3_axpys(y1, w, K, ks, nk, n);
            for (int j = 0; j < nk; j++) ref->axpy(y2, w[j], K + j * ks, n);
            CHECK(!memcmp(y1, y2, sizeof(float) * n), "%s axpys n=%d nk=%d", path, n, nk);
        }
    static const int DS[] = { 1, 5, 16, 31, 64, 128 };
    for (int di = 0; di < 6; di++) {
        int D = DS[di];
        float *S1 = malloc(sizeof(float) * D * D), *S2 = malloc(sizeof(float) * D * D);
        float q[128], k[128], v[128], al[128], o1[128], o2[128];
        for (int i = 0; i < D * D; i++) S1[i] = S2[i] = frand();
        for (int i = 0; i < D; i++) {
            q[i] = frand(); k[i] = frand(); v[i] = frand();
            al[i] = 0.5f + 0.5f * fabsf(frand()) / 16;
        }
        for (int rep = 0; rep < 3; rep++) {
            k3_kda_step(S1, q, k, v, al, 0.7f, o1, D);
            ref->kda_step(S2, q, k, v, al, 0.7f, o2, D);
        }
        CHECK(!memcmp(S1, S2, sizeof(float) * D * D) && !memcmp(o1, o2, sizeof(float) * D),
              "%s kda_step D=%d", path, D);
        free(S1); free(S2);
    }
}

/* rmsnorm/softmax/situ: compared across paths via a fingerprint recorded on scalar */
static uint32_t fp_misc(void) {
    enum { N = 517 };
    static float x[N], w[N], o[N], g[N];
    uint64_t save = rs; rs = 12345;
    uint32_t h = 2166136261u;
    for (int i = 0; i < N; i++) { x[i] = frand(); w[i] = frand(); g[i] = frand(); }
    k3_rmsnorm(o, x, w, N, 1e-6f);
    for (int i = 0; i < N; i++) h = (h ^ bits(o[i])) * 16777619u;
    memcpy(o, x, sizeof x); k3_softmax(o, N);
    for (int i = 0; i < N; i++) h = (h ^ bits(o[i])) * 16777619u;
    k3_situ(o, g, x, N, 3.0f, 4.0f);
    for (int i = 0; i < N; i++) h = (h ^ bits(o[i])) * 16777619u;
    rs = save;
    return h;
}

/* The elementwise transcendentals (situ, silu, sigmoid gate, expf, sigmoidf): every value
 * bit for bit against the scalar functions, across the branch edges (tanh's 0.125 and
 * 10, expf's 89 and -104), specials and n % 8, n % 16 tails; then the pooled public calls. */
static const K3KernelOps *ops_of(const char *path) {
    return !strcmp(path, "avx2") ? k3_kernels_avx2() : !strcmp(path, "avx512") ?
           k3_kernels_avx512() : !strcmp(path, "neon") ? k3_kernels_neon() : k3_kernels_scalar();
}
static float ew_val(int i) {
    static const float sp[] = { 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 0.125f, -0.125f, 0.5f, -0.5f,
                                10.0f, -10.0f, 5.0f, -5.0f, 89.0f, -89.0f, 104.0f, -104.0f,
                                1e-40f, -1e-40f, 1e-30f, 1e30f, -1e30f, 3.4e38f, -3.4e38f,
                                __builtin_inff(), -__builtin_inff(), __builtin_nanf(""),
                                20.0f, -20.0f, 40.0f, -40.0f, 100.0f, -100.0f, 250.0f, 0.03f };
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    if (i < 4 * ns) {                       /* each special, its neighbours, times 4 and 25 */
        float v = sp[i % ns];
        int k = i / ns;
        return k == 0 ? v : k == 1 ? nextafterf(v, 1e38f) : k == 2 ? nextafterf(v, -1e38f)
                                   : v * (rnd() & 1 ? 4.0f : 25.0f);
    }
    switch (rnd() % 4) {
    case 0: return frand();
    case 1: return ((float)(rnd() % 2000001) / 1000000.0f - 1.0f) * 120.0f;
    case 2: return ((float)(rnd() % 2000001) / 1000000.0f - 1.0f) * 50.0f;
    default: return ((float)(rnd() % 2000001) / 1000000.0f - 1.0f) * 0.6f;
    }
}
static void check_ew(const char *path) {
    enum { N = 20011 };
    const K3KernelOps *o = ops_of(path), *s = k3_kernels_scalar();
    if (!o->situ) { printf("ok   %s: elementwise ops fall back to scalar\n", path); return; }
    float *g = malloc(N * 4), *u = malloc(N * 4), *a = malloc(N * 4), *b = malloc(N * 4);
    for (int i = 0; i < N; i++) { g[i] = ew_val(i); u[i] = ew_val((i * 7) % N); }
    int bad = 0;
    for (int n = 0; n <= 33; n++) {          /* tails: every length up to two zmm + 1 */
        o->situ(a, g + 100, u + 3, n, 4.0f, 25.0f); s->situ(b, g + 100, u + 3, n, 4.0f, 25.0f);
        for (int i = 0; i < n; i++) bad += !same(a[i], b[i]);
    }
#define EW_CMP(what, call_o, call_s)                                                        \
    do {                                                                                    \
        call_o; call_s;                                                                     \
        int first = -1;                                                                     \
        for (int i = 0; i < N; i++) if (!same(a[i], b[i]) && first < 0) first = i;         \
        CHECK(first < 0, "%s %s: element %d (in %a) %a != scalar %a", path, what, first,    \
              first < 0 ? 0.0 : (double)g[first], first < 0 ? 0.0 : (double)a[first],      \
              first < 0 ? 0.0 : (double)b[first]);                                          \
    } while (0)
    EW_CMP("situ", o->situ(a, g, u, N, 4.0f, 25.0f), s->situ(b, g, u, N, 4.0f, 25.0f));
    EW_CMP("situ b 3,4", o->situ(a, g, u, N, 3.0f, 4.0f), s->situ(b, g, u, N, 3.0f, 4.0f));
    EW_CMP("expf", o->expv(a, g, N), s->expv(b, g, N));
    EW_CMP("sigmoidf", o->sigmoidv(a, g, N), s->sigmoidv(b, g, N));
    EW_CMP("silu", (memcpy(a, g, N * 4), o->silu(a, N)), (memcpy(b, g, N * 4), s->silu(b, N)));
    EW_CMP("sigmul", (memcpy(a, u, N * 4), o->sigmul(a, g, N)),
           (memcpy(b, u, N * 4), s->sigmul(b, g, N)));
    EW_CMP("tanhf (situ u)", o->situ(a, u, g, N, 1e30f, 1.0f), s->situ(b, u, g, N, 1e30f, 1.0f));
    for (int t = 1; t <= 2; t++) {           /* the public calls, split over the pool */
        k3_threads_set(t);
        EW_CMP("k3_situ", k3_situ(a, g, u, N, 4.0f, 25.0f), s->situ(b, g, u, N, 4.0f, 25.0f));
        EW_CMP("k3_silu_n", (memcpy(a, g, N * 4), k3_silu_n(a, N)),
               (memcpy(b, g, N * 4), s->silu(b, N)));
        EW_CMP("k3_sigmoid_mul", (memcpy(a, u, N * 4), k3_sigmoid_mul(a, g, N)),
               (memcpy(b, u, N * 4), s->sigmul(b, g, N)));
        EW_CMP("k3_expf_n", k3_expf_n(a, g, N), s->expv(b, g, N));
        EW_CMP("k3_sigmoidf_n", k3_sigmoidf_n(a, g, N), s->sigmoidv(b, g, N));
    }
#undef EW_CMP
#if defined(__x86_64__)
    void (*exp_d)(double *, const double *, int) = !strcmp(path, "avx2") ? k3_avx2_exp_d
        : !strcmp(path, "avx512") ? k3_avx512_exp_d : NULL;
    if (exp_d) {                             /* its double exp, before the float rounding */
        double *xd = malloc(N * 8), *yd = malloc(N * 8);
        for (int i = 0; i < N; i++)
            xd[i] = i % 3 ? (double)g[i] * (1.0 + ldexp(rnd(), -40)) : (rnd() / 4294967296.0 -
                                                                    1.0 / 4096) * 1400.0;
        exp_d(yd, xd, N);
        int first = -1;
        for (int i = 0; i < N; i++)
            if (memcmp(&yd[i], &(double){ k3_exp_d(xd[i]) }, 8) && first < 0 && xd[i] == xd[i]
                && fabs(xd[i]) <= 700) first = i;
        CHECK(first < 0, "%s exp_d: element %d (x %a) %a != scalar %a", path, first,
              first < 0 ? 0 : xd[first], first < 0 ? 0 : yd[first],
              first < 0 ? 0 : k3_exp_d(xd[first]));
        free(xd); free(yd);
    }
#endif
    for (int i = 0; i < N; i++) {            /* the scalar table is the functions */
        bad += !same(b[i], k3_sigmoidf(g[i]));
    }
    CHECK(bad == 0, "%s elementwise: %d tail or table mismatches", path, bad);
    printf("ok   %s: situ, silu, sigmoid gate, expf, sigmoidf = scalar bits (%d values)\n",
           path, N);
    free(g); free(u); free(a); free(b);
}

/* ---------------------------------------------------------- independent checks */
static double e2m1_indep(int nib) {          /* from the bit fields, not a table */
    int sgn = nib >> 3, e = (nib >> 1) & 3, m = nib & 1;
    double v = e == 0 ? m * 0.5 : (1.0 + m * 0.5) * ldexp(1.0, e - 1);
    return sgn ? -v : v;
}

static void check_double_math(void) {
    int rows = 13, cols = 96 * 2;
    K3Mat m; void *buf;
    fill_mat(&m, K3_W_MXFP4, rows, cols, 0, &buf);
    uint8_t *p = buf;
    uint8_t *sc = (uint8_t *)m.scale;
    for (int i = 0; i < rows * cols / 32; i++) sc[i] = (uint8_t)(120 + rnd() % 14);
    float x[192], y[13];
    for (int i = 0; i < cols; i++) x[i] = frand();
    k3_kernels_scalar()->matmul(y, &m, x, 0, rows, 0, 1);
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        double s = 0, sa = 0;
        for (int c = 0; c < cols; c++) {
            uint8_t byte = p[(r * cols + c) / 2];
            int nib = c % 2 == 0 ? byte & 15 : byte >> 4;     /* low nibble = even element */
            double w = e2m1_indep(nib) * ldexp(1.0, sc[(r * cols + c) / 32] - 127);
            s += w * x[c]; sa += fabs(w * x[c]);
        }
        bad += fabs(y[r] - s) > 1e-6 * sa + 1e-30;
    }
    CHECK(!bad, "mxfp4 scalar vs double decoding: %d rows off", bad);
    /* bf16 and f32 against double */
    float wf[300], xb[300]; uint16_t wb[300];
    for (int i = 0; i < 300; i++) {
        wf[i] = frand(); xb[i] = frand(); wb[i] = (uint16_t)(bits(wf[i]) >> 16);
    }
    double s = 0, sb = 0, sa = 0;
    for (int i = 0; i < 300; i++) {
        s += (double)wf[i] * xb[i]; sa += fabs((double)wf[i] * xb[i]);
        uint32_t u = (uint32_t)wb[i] << 16; float f; memcpy(&f, &u, 4); sb += (double)f * xb[i];
    }
    K3Mat mf = { K3_W_F32, 1, 300, wf, NULL, NULL }, mb = { K3_W_BF16, 1, 300, wb, NULL, NULL };
    float yf, yb;
    k3_kernels_scalar()->matmul(&yf, &mf, xb, 0, 1, 0, 1);
    k3_kernels_scalar()->matmul(&yb, &mb, xb, 0, 1, 0, 1);
    CHECK(fabs(yf - s) <= 1e-6 * sa && fabs(yb - sb) <= 1e-6 * sa, "f32/bf16 scalar vs double");
    free(buf);
    printf("ok   scalar reference vs double math (mxfp4 nibble order, e2m1, e8m0, bf16)\n");
}

static double ulps(float got, double want) {
    if (isinf(want) || fabs(want) > 3.4028234663852886e38) return isinf(got) ? 0 : 1e9;
    float w = (float)want;
    double u = fabs(nextafterf(w, INFINITY) - w);
    if (u == 0 || !isfinite(u)) u = ldexp(1.0, -149);
    return fabs((double)got - want) / u;
}

static void check_transcendentals(void) {
    double me = 0, mt = 0;
    for (int i = 0; i < 400000; i++) {
        float x = (float)(((double)rnd() / 65536.0 / 65536.0 * 2 - 1) * (i % 2 ? 110 : 12));
        double e = ulps(k3_expf(x), exp((double)x)), t = ulps(k3_tanhf(x), tanh((double)x));
        if (e > me) me = e;
        if (t > mt) mt = t;
        float z = ldexpf(frand(), -(int)(rnd() % 40));   /* tiny arguments */
        t = ulps(k3_tanhf(z), tanh((double)z)); if (t > mt) mt = t;
        e = ulps(k3_expf(z), exp((double)z)); if (e > me) me = e;
    }
    CHECK(me <= 1.0 && mt <= 1.0, "transcendental error: exp %.2f ulp, tanh %.2f ulp", me, mt);
    CHECK(k3_expf(0) == 1 && k3_expf(-INFINITY) == 0 && isinf(k3_expf(INFINITY)) &&
          isnan(k3_expf(NAN)) && k3_expf(-200) == 0 && isinf(k3_expf(100)), "expf special values");
    CHECK(bits(k3_tanhf(-0.0f)) == 0x80000000u && k3_tanhf(INFINITY) == 1 &&
          k3_tanhf(-INFINITY) == -1 && k3_tanhf(20) == 1 && isnan(k3_tanhf(NAN)),
          "tanhf special values");
    /* fingerprint of a fixed sweep: must be the same number on every CPU and arch */
    uint32_t h = 2166136261u;
    for (int i = -20000; i <= 20000; i++) {
        float x = (float)i * 0.00437f;
        h = (h ^ bits(k3_expf(x))) * 16777619u;
        h = (h ^ bits(k3_tanhf(x))) * 16777619u;
        h = (h ^ bits(k3_sigmoidf(x))) * 16777619u;
    }
    printf("ok   transcendentals: exp max %.3f ulp, tanh max %.3f ulp; sweep fingerprint %08x\n",
           me, mt, h);
}

/* Teeth: a plausible but different order (one sequential accumulator) must be caught. */
static void check_teeth(void) {
    int caught = 0;
    for (int rep = 0; rep < 50; rep++) {
        float a[257], b[257];
        for (int i = 0; i < 257; i++) { a[i] = frand(); b[i] = frand(); }
        float seq = 0; for (int i = 0; i < 257; i++) seq = fmaf(a[i], b[i], seq);
        caught += !same(seq, k3_kernels_scalar()->dot(a, b, 257));
    }
    CHECK(caught > 25, "teeth: a sequential-order dot matched the canonical one %d/50 times",
          50 - caught);
    printf("ok   teeth: a different summation order is detected in %d/50 random cases\n", caught);
}

/* scalar matmul outputs on fixed inputs: the same number on every CPU and arch */
static void ref_fingerprint(void) {
    uint64_t save = rs; rs = 777;
    uint32_t h = 2166136261u;
    for (int type = 0; type < 3; type++) {
        K3Mat m; void *buf;
        int rows = 37, cols = 96 + (type == 2 ? 0 : 5), T = 3;
        fill_mat(&m, type, rows, cols, 0, &buf);
        float X[3 * 101], Y[3 * 37];
        for (int i = 0; i < T * cols; i++) X[i] = frand();
        k3_kernels_scalar()->matmul(Y, &m, X, 0, rows, 0, T);
        for (int i = 0; i < T * rows; i++) h = (h ^ bits(Y[i])) * 16777619u;
        free(buf);
    }
    rs = save;
    printf("ok   scalar matmul fingerprint %08x, misc fingerprint %08x\n", h, fp_misc());
}

/* BF16 matvec on a matrix that ends where a PROT_NONE page begins: the kernels prefetch
 * ahead of every row and (AVX2) the next tile's rows, past the last row here; a prefetch
 * must never fault and no load may read past the end. Rows not a multiple of the 4- and
 * 8-row tiles, with and without a column tail; bits equal the scalar's. */
static void check_guard(const char *path) {
    static const int RS[] = { 67, 9 }, CS[] = { 1040, 1047 };
    for (int ri = 0; ri < 2; ri++)
    for (int ci = 0; ci < 2; ci++) {
        int rows = RS[ri], cols = CS[ci];
        size_t bytes = (size_t)rows * cols * 2, room = (bytes + 4095) & ~(size_t)4095;
        uint8_t *base = mmap(NULL, room + 4096, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(base != MAP_FAILED && mprotect(base + room, 4096, PROT_NONE) == 0, "guard mmap");
        if (base == MAP_FAILED) return;
        uint16_t *w = (uint16_t *)(base + room - bytes);
        for (size_t i = 0; i < (size_t)rows * cols; i++) w[i] = (uint16_t)(bits(frand()) >> 16);
        K3Mat m = { K3_W_BF16, rows, cols, w, NULL, NULL };
        float *x = malloc(sizeof(float) * cols), *y = malloc(sizeof(float) * rows),
              *r = malloc(sizeof(float) * rows);
        for (int i = 0; i < cols; i++) x[i] = frand();
        k3_kernels_scalar()->matmul(r, &m, x, 0, rows, 0, 1);
        k3_matmul(y, &m, x, 1);
        int bad = 0;
        for (int i = 0; i < rows; i++) bad += !same(y[i], r[i]);
        CHECK(!bad, "%s guard-page bf16 matvec %dx%d: %d outputs differ", path, rows, cols, bad);
        free(x); free(y); free(r); munmap(base, room + 4096);
    }
}

int main(void) {
    check_double_math();
    check_transcendentals();
    check_teeth();
    char err[200];
    k3_kernels_select("scalar", err, sizeof err);
    uint32_t misc_ref = fp_misc();
    ref_fingerprint();
    const char *paths[] = { "scalar", "avx2", "avx512", "neon" };
    static const int NTH[] = { 1, 2, 3, 5 };
    for (int p = 0; p < 4; p++) {
        if (!k3_kernels_usable(paths[p])) {
            k3_kernels_select(paths[p], err, sizeof err);
            printf("SKIP: %s\n", err);
            continue;
        }
        CHECK(k3_kernels_select(paths[p], err, sizeof err) == 0, "select %s: %s", paths[p], err);
        int f0 = fails;
        for (int t = 0; t < 4; t++) { k3_threads_set(NTH[t]); check_matmul(paths[p], NTH[t]); }
        for (int t = 0; t < 2; t++) { k3_threads_set(NTH[t]); check_edges(paths[p], NTH[t]); }
        if (!strcmp(paths[p], "avx512")) {   /* the prefill path this CPU did not choose */
            int g = k3_avx512_prefill_gemm(-1);
            k3_avx512_prefill_gemm(!g);
            for (int t = 0; t < 2; t++) { k3_threads_set(NTH[t]); check_edges(paths[p], NTH[t]); }
            k3_threads_set(2);
            check_matmul(paths[p], 2);
            k3_avx512_prefill_gemm(g);
            printf("ok   avx512: prefill by the GEMM and by the register tiles (this CPU: %s)\n",
                   g ? "GEMM" : "tiles");
        }
        for (int t = 0; t < 2; t++) { k3_threads_set(NTH[t]); check_guard(paths[p]); }
        check_vec(paths[p]);
        check_ew(paths[p]);
        CHECK(fp_misc() == misc_ref, "%s rmsnorm/softmax/situ differ from scalar", paths[p]);
        printf("%s   %s: matmul f32/bf16/mxfp4, dot(s), sum, axpy(s), kda_step, rmsnorm, "
               "softmax, situ at threads 1,2,3,5\n", fails == f0 ? "ok" : "FAIL", paths[p]);
    }
    CHECK(k3_kernels_select("bogus", err, sizeof err) == -1 && strstr(err, "unknown"),
          "bogus kernels accepted");
    k3_kernels_select("auto", err, sizeof err);
    printf("auto selects: %s\n", k3_kernels_name());
    k3_pool_shutdown();
    if (fails) { printf("%d failures\n", fails); return 1; }
    return 0;
}
