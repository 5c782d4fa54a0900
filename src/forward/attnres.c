/* attnres.c — attention residuals (docs/MODEL.md §3.1 Mix, pitfalls 14-16).
 *
 * Candidates are the block snapshots then the live prefix sum p. Each is scored with
 * its RMS-normalised value against w = res_norm ⊙ res_proj, the scores go through a
 * softmax over depth, and the output mixes the RAW candidates. out never aliases an
 * input, so the final Mix cannot destroy p while reading it (pitfall 16). */
#include "k3.h"
#include <math.h>
#include <string.h>

void k3_attnres_mix(float *out, const float *const *B, int nb, const float *p,
                    const float *w, int T, int H, float eps) {
    int n = nb + 1;
    float score[n];
    for (int t = 0; t < T; t++) {
        const float *v[n];
        for (int i = 0; i < nb; i++) v[i] = B[i] + (size_t)t * H;
        v[nb] = p + (size_t)t * H;
        for (int i = 0; i < n; i++) {
            float r = sqrtf(k3_dot(v[i], v[i], H) / (float)H + eps);
            score[i] = k3_dot(v[i], w, H) / r;
        }
        k3_softmax(score, n);
        float *o = out + (size_t)t * H;
        memset(o, 0, (size_t)H * sizeof(float));
        for (int i = 0; i < n; i++) k3_axpy(o, score[i], v[i], H);
    }
}
