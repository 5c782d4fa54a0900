/* test_attn.c — the attention tiles (kernels.h, "Attention tiles"): the scalar reference
 * against the order kernels.h writes down (an fmaf chain per output, queries in lanes) and
 * against double math; k3_exp_neg within 1 ulp of exp; every SIMD path this CPU runs (NEON
 * under qemu: tests/sh/vision_aarch64.sh) bit for bit equal to the scalar reference, on
 * awkward shapes (key and head-dim tails, query blocks of 16/48/80, head_dim 72) and special
 * values (ties of +0 and -0, -inf and NaN scores, the first tile's -inf maximum). */
#include "kernels.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { if (fails++ < 20) {                              \
        printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); } } } while (0)
static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 16; }
static float urand(void) { return (float)(rnd() % 2000001) / 1000000.0f - 1.0f; }
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int same(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (bits(a[i]) != bits(b[i]) && !(a[i] != a[i] && b[i] != b[i])) return 0;
    return 1;
}
static double ulps(float got, double want) {
    float w = (float)want;
    double u = fabs((double)nextafterf(w, INFINITY) - w);
    if (u == 0 || !isfinite(u)) u = ldexp(1.0, -149);
    return fabs((double)got - want) / u;
}

/* k3_exp_neg: within 1 ulp of exp over [-87, 0] (normal results), 0 far below, NaN kept */
static void check_exp(void) {
    double worst = 0;
    for (int i = 0; i < 1000000; i++) {
        float x = -87.0f * (float)(rnd() % 10000001) / 1e7f;
        if (i < 1000) x = -(float)i * 1e-6f;
        double u = ulps(k3_exp_neg(x), exp((double)x));
        if (u > worst) worst = u;
    }
    CHECK(worst <= 1.0, "k3_exp_neg: %.3f ulp from exp over [-87, 0]", worst);
    CHECK(k3_exp_neg(0.0f) == 1.0f && k3_exp_neg(-0.0f) == 1.0f, "exp(0) != 1");
    CHECK(k3_exp_neg(-104.5f) == 0.0f && k3_exp_neg(-1e30f) == 0.0f &&
          k3_exp_neg(-INFINITY) == 0.0f, "exp of far negative != 0");
    CHECK(k3_exp_neg(NAN) != k3_exp_neg(NAN), "exp(NaN) not NaN");
    printf("ok   k3_exp_neg: %.3f ulp at worst over [-87, 0]; 0 below; NaN kept\n", worst);
}

typedef struct { int nk, hd, bq; } Shape;
static const Shape SH[] = { { 256, 72, 128 }, { 1, 1, 16 }, { 5, 7, 48 }, { 7, 72, 80 },
                            { 65, 13, 16 }, { 100, 72, 144 }, { 6, 6, 64 }, { 13, 64, 32 } };
enum { NS = sizeof SH / sizeof SH[0] };

typedef struct { float *Qt, *K, *V, *S, *mx, *l, *O, *c; } Tile;
static void tile_alloc(Tile *t, Shape s) {
    size_t ldv = (size_t)s.nk + 3;
    t->Qt = malloc(sizeof(float) * s.hd * s.bq); t->K = malloc(sizeof(float) * s.nk * s.hd);
    t->V = malloc(sizeof(float) * s.hd * ldv); t->S = malloc(sizeof(float) * s.nk * s.bq);
    t->mx = malloc(sizeof(float) * s.bq); t->l = malloc(sizeof(float) * s.bq);
    t->O = malloc(sizeof(float) * s.hd * s.bq); t->c = malloc(sizeof(float) * s.bq);
}
static void tile_free(Tile *t) {
    free(t->Qt); free(t->K); free(t->V); free(t->S); free(t->mx); free(t->l); free(t->O);
    free(t->c);
}
/* inputs; special: exact +0/-0 score ties, NaN and -inf scores, -inf first maxima */
static void tile_fill(Tile *t, Shape s, int special) {
    size_t ldv = (size_t)s.nk + 3;
    for (int i = 0; i < s.hd * s.bq; i++) t->Qt[i] = 2 * urand();
    for (int i = 0; i < s.nk * s.hd; i++) t->K[i] = 2 * urand();
    for (size_t i = 0; i < s.hd * ldv; i++) t->V[i] = urand();
    for (int i = 0; i < s.hd * s.bq; i++) t->O[i] = 3 * urand();
    for (int i = 0; i < s.bq; i++) {
        t->mx[i] = i % 3 ? -INFINITY : 4 * urand(); t->l[i] = i % 3 ? 0 : 5 * urand() + 5;
        t->c[i] = i % 3 ? 0 : (urand() + 1) / 2;
    }
    if (!special) return;
    for (int d = 0; d < s.hd; d++) {                     /* query 0: all scores +-0 */
        t->Qt[(size_t)d * s.bq] = 0.0f;
        if (s.bq > 1) t->Qt[(size_t)d * s.bq + 1] = d % 2 ? -0.0f : NAN;
    }
    t->K[0] = -1.0f;                                      /* key 0 . query 0: -0 */
    for (int i = 2; i < s.bq; i += 7) t->Qt[i] = INFINITY;   /* +-inf, NaN scores */
}

/* The order kernels.h writes down, element by element (the test's own loops). */
static void by_definition(Tile *t, Shape s, float *S, float *mx, float *l, float *O) {
    size_t ldv = (size_t)s.nk + 3;
    memcpy(mx, t->mx, sizeof(float) * s.bq); memcpy(l, t->l, sizeof(float) * s.bq);
    for (int i = 0; i < s.bq; i++)
        for (int j = 0; j < s.nk; j++) {
            float a = 0.0f;
            for (int d = 0; d < s.hd; d++)
                a = fmaf(t->Qt[(size_t)d * s.bq + i], t->K[(size_t)j * s.hd + d], a);
            S[(size_t)j * s.bq + i] = a;
            if (a > mx[i]) mx[i] = a;
        }
    for (int i = 0; i < s.bq; i++)
        for (int j = 0; j < s.nk; j++) {
            float *p = S + (size_t)j * s.bq + i;
            *p = k3_exp_neg(*p - mx[i]);
            l[i] += *p;
        }
    for (int i = 0; i < s.bq; i++)
        for (int d = 0; d < s.hd; d++) {
            float o = t->c[i] * t->O[(size_t)d * s.bq + i];
            for (int j = 0; j < s.nk; j++)
                o = fmaf(S[(size_t)j * s.bq + i], t->V[(size_t)d * ldv + j], o);
            O[(size_t)d * s.bq + i] = o;
        }
}

/* one path on a tile: S, mx, l, O after scores, exp, pv */
static void run_path(const K3AttnOps *a, Tile *t, Shape s, float *S, float *mx, float *l,
                     float *O) {
    memcpy(mx, t->mx, sizeof(float) * s.bq); memcpy(l, t->l, sizeof(float) * s.bq);
    memcpy(O, t->O, sizeof(float) * s.hd * s.bq);
    a->scores(S, t->Qt, t->K, s.nk, s.hd, s.bq, mx);
    a->exp(S, mx, l, s.nk, s.bq);
    a->pv(O, t->V, (size_t)s.nk + 3, S, t->c, s.nk, s.hd, s.bq);
}

/* double math: the softmax-weighted sums of the scalar result near the exact ones */
static void check_double(Tile *t, Shape s, const float *S, const float *mx, const float *l,
                         const float *O) {
    size_t ldv = (size_t)s.nk + 3;
    double worst = 0;
    for (int i = 0; i < s.bq; i++) {
        double m = t->mx[i], e[300], sum = t->l[i];
        for (int j = 0; j < s.nk; j++) {
            double a = 0;
            for (int d = 0; d < s.hd; d++)
                a += (double)t->Qt[(size_t)d * s.bq + i] * t->K[(size_t)j * s.hd + d];
            e[j] = a;
            if (a > m) m = a;
        }
        CHECK(fabs(m - mx[i]) <= 1e-5 * (fabs(m) + 1), "max %d: %g vs %g", i, mx[i], m);
        for (int j = 0; j < s.nk; j++) {
            e[j] = exp(e[j] - m);
            sum += e[j];
            double err = fabs(S[(size_t)j * s.bq + i] - e[j]);
            if (err > worst) worst = err;
        }
        CHECK(fabs(sum - l[i]) <= 1e-5 * sum, "sum %d: %g vs %g", i, l[i], sum);
        for (int d = 0; d < s.hd; d++) {
            double o = (double)t->O[(size_t)d * s.bq + i] * t->c[i], mag = fabs(o);
            for (int j = 0; j < s.nk; j++) {
                o += e[j] * t->V[(size_t)d * ldv + j];
                mag += fabs(e[j] * t->V[(size_t)d * ldv + j]);
            }
            CHECK(fabs(o - O[(size_t)d * s.bq + i]) <= 1e-5 * mag,
                  "pv %d,%d: %g vs %g", d, i, O[(size_t)d * s.bq + i], o);
        }
    }
    CHECK(worst <= 1e-5, "probabilities off by %g", worst);
}

int main(void) {
    check_exp();
    const char *paths[] = { "avx2", "avx512", "neon" };
    const K3AttnOps *(*get[])(void) = { k3_attn_avx2, k3_attn_avx512, k3_attn_neon };
    int ran[3] = { 0 };
    for (int k = 0; k < NS; k++)
        for (int special = 0; special < 2; special++) {
            Shape s = SH[k];
            Tile t;
            tile_alloc(&t, s);
            tile_fill(&t, s, special);
            size_t nS = (size_t)s.nk * s.bq, nO = (size_t)s.hd * s.bq;
            float *S0 = malloc(sizeof(float) * nS), *S1 = malloc(sizeof(float) * nS);
            float *O0 = malloc(sizeof(float) * nO), *O1 = malloc(sizeof(float) * nO);
            float m0[160], m1[160], l0[160], l1[160];
            by_definition(&t, s, S0, m0, l0, O0);
            run_path(k3_attn_scalar(), &t, s, S1, m1, l1, O1);
            CHECK(same(S0, S1, nS) && same(m0, m1, s.bq) && same(l0, l1, s.bq) &&
                  same(O0, O1, nO), "scalar vs the definition: nk %d hd %d bq %d special %d",
                  s.nk, s.hd, s.bq, special);
            if (!special && s.nk < 300) check_double(&t, s, S1, m1, l1, O1);
            for (int p = 0; p < 3; p++) {
                if (!get[p]() || !k3_kernels_usable(paths[p])) continue;
                ran[p] = 1;
                float *S2 = malloc(sizeof(float) * nS), *O2 = malloc(sizeof(float) * nO);
                float m2[160], l2[160];
                run_path(get[p](), &t, s, S2, m2, l2, O2);
                CHECK(same(S1, S2, nS) && same(m1, m2, s.bq) && same(l1, l2, s.bq) &&
                      same(O1, O2, nO), "%s vs scalar: nk %d hd %d bq %d special %d", paths[p],
                      s.nk, s.hd, s.bq, special);
                free(S2); free(O2);
            }
            free(S0); free(S1); free(O0); free(O1);
            tile_free(&t);
        }
    printf("ok   attention tiles: scalar == the definition, near double math (%d shapes)\n", NS);
    for (int p = 0; p < 3; p++)
        if (ran[p]) printf("ok   %s: attention tiles == scalar, bit for bit\n", paths[p]);
        else printf("SKIP: %s not on this CPU/build\n", paths[p]);
    printf("attn ops selected: %s\n", k3_attn_ops()->name);
    if (fails) { printf("%d failures\n", fails); return 1; }
    return 0;
}
