/* kernels_attn.c — the attention tiles' scalar reference (kernels.h, "Attention tiles"): it
 * defines the bits every SIMD twin (kernels_{avx512,avx2,neon}_attn.c) reproduces. Queries
 * run along the vector lanes, so each score and each weighted sum is one plain fmaf chain in
 * its own lane: no lane fold, and the twins need no horizontal work at all. */
#include "kernels.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

float k3_exp_neg(float x) {
    /* floor at -104 (exp is 0 in float below): a negative float's magnitude grows with its
     * bits as an unsigned number, so the floor is an unsigned min (no branch, NaN-proof) */
    union { float f; uint32_t u; } c = { x };
    c.u = c.u > 0xC2D00000u ? 0xC2D00000u : c.u;
    float a = c.f;
    union { float f; int32_t i; } t = { fmaf(a, 1.44269504088896341f, 12582912.0f) };
    float k = t.f - 12582912.0f;                       /* round(a log2 e), exactly */
    float r = fmaf(-k, 0.693145751953125f, a);
    r = fmaf(-k, 1.42860682030941723212e-6f, r);
    float q = 1.0f / 5040;
    q = fmaf(q, r, 1.0f / 720); q = fmaf(q, r, 1.0f / 120); q = fmaf(q, r, 1.0f / 24);
    q = fmaf(q, r, 1.0f / 6); q = fmaf(q, r, 0.5f); q = fmaf(q, r, 1.0f);
    q = fmaf(q, r, 1.0f);
    /* k as an integer from t's low bits (no float-to-int conversion); 2^k, or 0 below -126 */
    int32_t e = t.i - 0x4B400000 + 127;
    e = e < 0 ? 0 : e;
    union { uint32_t i; float f; } u = { (uint32_t)e << 23 };
    return q * u.f;
}

static void scores_s(float *S, const float *Qt, const float *K, int nk, int hd, int bq,
                     float *mx) {
    for (int j = 0; j < nk; j++)
        for (int i = 0; i < bq; i++) {
            float s = 0.0f;
            for (int d = 0; d < hd; d++) s = fmaf(K[(size_t)j * hd + d], Qt[(size_t)d * bq + i], s);
            S[(size_t)j * bq + i] = s;
            mx[i] = s > mx[i] ? s : mx[i];
        }
}

static void exp_s(float *S, const float *mx, float *l, int nk, int bq) {
    for (int j = 0; j < nk; j++)
        for (int i = 0; i < bq; i++) {
            float p = k3_exp_neg(S[(size_t)j * bq + i] - mx[i]);
            S[(size_t)j * bq + i] = p;
            l[i] = l[i] + p;
        }
}

static void pv_s(float *O, const float *V, size_t ldv, const float *S, const float *c, int nk,
                 int hd, int bq) {
    for (int d = 0; d < hd; d++)
        for (int i = 0; i < bq; i++) {
            float o = O[(size_t)d * bq + i] * c[i];
            for (int j = 0; j < nk; j++) o = fmaf(V[(size_t)d * ldv + j], S[(size_t)j * bq + i], o);
            O[(size_t)d * bq + i] = o;
        }
}

static const K3AttnOps OPS = { "scalar", scores_s, exp_s, pv_s };
const K3AttnOps *k3_attn_scalar(void) { return &OPS; }

const K3AttnOps *k3_attn_ops(void) {
    const char *n = k3_kernels_name();
    const K3AttnOps *o = !strcmp(n, "avx512") ? k3_attn_avx512()
                       : !strcmp(n, "avx2") ? k3_attn_avx2()
                       : !strcmp(n, "neon") ? k3_attn_neon() : NULL;
    return o ? o : &OPS;
}
