/* kernels.c — the scalar reference of every kernel in kernels.h. These functions
 * define the bits; the SIMD twins (kernels_avx2.c, kernels_neon.c, ...) reproduce them. */
#include "kernels.h"
#include <math.h>
#include <string.h>
#include <stdio.h>

/* E2M1 magnitudes by nibble (bit 3 = sign), K3_MODEL.md §4. */
static const float E2M1[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };

static float fold(float acc[K3_LANES]) {
    for (int w = K3_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

float k3_dot(const float *a, const float *b, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % K3_LANES] = fmaf(a[i], b[i], acc[i % K3_LANES]);
    return fold(acc);
}

float k3_sum(const float *a, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % K3_LANES] += a[i];
    return fold(acc);
}

static float dot_bf16(const uint16_t *w, const float *x, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++) acc[i % K3_LANES] = fmaf(k3_bf16_to_f32(w[i]), x[i], acc[i % K3_LANES]);
    return fold(acc);
}

static float scale_e8m0(uint8_t s) {      /* 2^(s-127), exact; s = 0 gives 2^-127 */
    return ldexpf(1.0f, (int)s - 127);
}

static float dot_mxfp4(const uint8_t *p, const uint8_t *sc, const float *x, int n) {
    float acc[K3_LANES] = {0};
    for (int i = 0; i < n; i++) {
        int nib = (p[i >> 1] >> ((i & 1) * 4)) & 15;
        float w = E2M1[nib] * scale_e8m0(sc[i >> 5]);
        acc[i % K3_LANES] = fmaf(w, x[i], acc[i % K3_LANES]);
    }
    return fold(acc);
}

static void matmul_scalar(float *Y, const K3Mat *W, const float *X, int T) {
    for (int t = 0; t < T; t++) {
        const float *x = X + (size_t)t * W->cols;
        float *y = Y + (size_t)t * W->rows;
        for (int r = 0; r < W->rows; r++) {
            size_t ro = (size_t)r * W->cols;
            switch (W->type) {
            case K3_W_F32:  y[r] = k3_dot((const float *)W->w + ro, x, W->cols); break;
            case K3_W_BF16: y[r] = dot_bf16((const uint16_t *)W->w + ro, x, W->cols); break;
            default:        y[r] = dot_mxfp4((const uint8_t *)W->w + ro / 2, W->scale + ro / 32, x, W->cols); break;
            }
        }
    }
}

void k3_matmul(float *Y, const K3Mat *W, const float *X, int T) { matmul_scalar(Y, W, X, T); }

int k3_kernels_select(const char *which, char *err, size_t errlen) {
    if (!which || !strcmp(which, "auto") || !strcmp(which, "scalar")) return 0;
    snprintf(err, errlen, "--kernels %s: not available in this build (have: scalar)", which);
    return -1;
}
const char *k3_kernels_name(void) { return "scalar"; }

void k3_axpy(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

void k3_kda_step(float *S, const float *q, const float *k, const float *v,
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
        for (int j = 0; j < D; j++) { Si[j] = fmaf(k[i], d[j], Si[j]); o[j] = fmaf(Si[j], q[i], o[j]); }
    }
}

void k3_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = k3_dot(x, x, n);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = w ? w[i] * (x[i] * r) : x[i] * r;
}

void k3_softmax(float *x, int n) {
    float m = x[0];
    for (int i = 1; i < n; i++) if (x[i] > m) m = x[i];
    for (int i = 0; i < n; i++) x[i] = k3_expf(x[i] - m);
    float inv = 1.0f / k3_sum(x, n);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void k3_situ(float *out, const float *g, const float *u, int n, float b1, float b2) {
    for (int i = 0; i < n; i++) {
        float a = b1 * k3_tanhf(g[i] / b1) * k3_sigmoidf(g[i]);
        out[i] = a * (b2 * k3_tanhf(u[i] / b2));
    }
}

/* Placeholders until our own portable versions land: libm is not guaranteed to be
 * bit-identical across CPUs. */
float k3_expf(float x) { return expf(x); }
float k3_tanhf(float x) { return tanhf(x); }
float k3_sigmoidf(float x) { return 1.0f / (1.0f + k3_expf(-x)); }
float k3_siluf(float x) { return x * k3_sigmoidf(x); }
