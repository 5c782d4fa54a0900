/* vision_cli.c — what the commands call: the tower over one image's patches with the
 * report line (seconds, GFLOP/s against the FMA peak when the machine is known), the rows
 * written to a file; and a synthetic full-width tower for the speed check. */
#include "vision_priv.h"
#include "k3.h"
#include "outfile.h"
#include "roofline.h"
#include "util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int k3_vision_run(K3Vision *v, const float *patches, const K3VisionGrid *g, int n, float *rows,
                  int quiet, char *err, size_t errlen) {
    double t0 = k3_now();
    v->progress = !quiet;
    v->t0 = t0; v->next = t0 + k3_progress_every(); v->done = v->total = 0;
    for (int i = 0; i < n; i++) {
        double L = (double)g[i].gh * g[i].gw;
        v->total += L * (L + 4 * v->c.hidden);
    }
    int rc = k3_vision_rows(v, patches, g, n, rows, err, errlen);
    v->progress = 0;
    double s = k3_now() - t0, f = k3_vision_flops(&v->c, g, n);
    if (!rc && !quiet)
        fprintf(stderr, "k3: vision tower: %ld rows from %ld patches in %.3f s, %.1f GFLOP/s "
                "(%.3g GFLOP; kernels %s, %d threads)\n", k3_vision_count_rows(g, n),
                k3_vision_count_patches(g, n), s, s > 0 ? f / s / 1e9 : 0.0, f / 1e9,
                k3_kernels_name(), k3_threads());
    return rc;
}

int k3_vision_rows_file(const char *model, const float *patches, int gh, int gw,
                        const char *out, int quiet, char *err, size_t errlen) {
    K3VisionGrid g = { gh, gw };
    if (k3_vision_grid_ok(g, err, errlen)) return K3_ERR_USAGE;
    K3Vision *v = NULL;
    int rc = k3_vision_open(&v, model, quiet, err, errlen);
    if (rc) return rc;
    size_t n = (size_t)(gh / 2) * (gw / 2) * v->c.out;
    float *rows = malloc(sizeof(float) * n);
    if (!rows) { snprintf(err, errlen, "out of memory"); rc = K3_ERR_RUNTIME; }
    else rc = k3_vision_run(v, patches, &g, 1, rows, quiet, err, errlen);
    if (!rc && k3_out_save(out, rows, sizeof(float) * n, 0644, err, errlen)) rc = K3_ERR_RUNTIME;
    free(rows);
    k3_vision_close(v);
    return rc;
}

void k3_vision_release_config(K3VisionConfig *c) {
    *c = (K3VisionConfig){ .hidden = 1024, .qkv = 1536, .heads = 12, .head_dim = 128,
                           .inter = 4096, .layers = 27, .patch = 14, .pos_h = 64, .pos_w = 64,
                           .out = 7168, .eps = 1.1920928955078125e-7f, .proj_eps = 1e-5f };
}

/* xorshift stream → BF16 values of about unit variance / sqrt(fan_in) */
static uint16_t *rand_bf16(size_t n, int fan, uint64_t *s) {
    uint16_t *w = malloc(2 * n);
    if (!w) return NULL;
    float scale = 1.7320508f / (float)sqrt((double)fan);
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
        float f = ((float)(*s >> 40) / 8388608.0f - 1.0f) * scale;
        uint32_t u;
        memcpy(&u, &f, 4);
        w[i] = (uint16_t)(u >> 16);
    }
    return w;
}

int k3_vision_synthetic(K3Vision **out, const K3VisionConfig *c, unsigned seed, char *err,
                        size_t errlen) {
    K3Vision *v = calloc(1, sizeof *v);
    *out = NULL;
    if (!v) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    v->c = *c;
    v->blocks = calloc((size_t)c->layers, sizeof *v->blocks);
    v->bufs = calloc((size_t)4 * c->layers + 4, sizeof *v->bufs);
    uint64_t s = 0x9E3779B97F4A7C15ull ^ seed;
    const int D = c->hidden, A = c->qkv, F = c->inter, PP = 3 * c->patch * c->patch;
    int ok = v->blocks && v->bufs;
#define MAT(M, r, cl) do { uint16_t *w_ = ok ? rand_bf16((size_t)(r) * (cl), (cl), &s) : NULL; \
        if (!w_) ok = 0; else { v->bufs[v->n_bufs++] = w_; \
        M = (K3Mat){ K3_W_BF16, (r), (cl), w_, NULL, NULL }; \
        v->weight_bytes += (size_t)2 * (r) * (cl); } } while (0)
#define VEC(p, n) do { p = ok ? malloc(sizeof(float) * (size_t)(n)) : NULL; if (!p) ok = 0; \
        else for (size_t i_ = 0; i_ < (size_t)(n); i_++) p[i_] = 1.0f; } while (0)
    MAT(v->pe, D, PP);
    VEC(v->pos, (size_t)c->pos_h * c->pos_w * D);
    for (int l = 0; l < c->layers; l++) {
        K3VisionBlock *b = &v->blocks[l];
        VEC(b->norm0, D); VEC(b->norm1, D);
        MAT(b->wqkv, 3 * A, D); MAT(b->wo, D, A); MAT(b->fc0, F, D); MAT(b->fc1, D, F);
    }
    VEC(v->final_norm, D);
    MAT(v->p0, 4 * D, 4 * D); MAT(v->p2, c->out, 4 * D);
    VEC(v->post_norm, c->out);
#undef MAT
#undef VEC
    if (!ok) { k3_vision_close(v); snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    for (size_t i = 0; i < (size_t)c->pos_h * c->pos_w * D; i++) v->pos[i] = 0.01f * (float)(i % 7);
    *out = v;
    return 0;
}
