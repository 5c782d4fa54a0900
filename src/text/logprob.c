/* logprob.c — log-softmax of raw logits and the top alternatives (include/logprob.h). */
#include "logprob.h"
#include "kernels.h"
#include <math.h>

double k3_log_d(double x) {
    const double LN2_HI = 6.93147180369123816490e-01;   /* as k3_exp_d's split */
    const double LN2_LO = 1.90821492927058770002e-10;
    const double SQRT_HALF = 0.70710678118654752440;
    if (x != x || x < 0) return NAN;
    if (x == 0) return -HUGE_VAL;
    if (x > 1.7976931348623157e308) return x;
    int e;
    double m = frexp(x, &e);                             /* x = m 2^e, m in [0.5, 1) */
    if (m < SQRT_HALF) { m *= 2; e--; }                  /* m in [0.707, 1.414) */
    /* log m = 2 atanh(f), f = (m-1)/(m+1), |f| <= 0.1716: 2 f sum f^2k / (2k+1); the 13th
     * term is below 1e-19 of the first */
    double f = (m - 1) / (m + 1), z = f * f, p = 1.0 / 25;
    for (int k = 11; k >= 0; k--) p = p * z + 1.0 / (2 * k + 1);
    return ((double)e * LN2_HI + 2 * f * p) + (double)e * LN2_LO;
}

double k3_logsumexp(const float *l, int n) {
    int b = k3_argmax(l, n);
    double m = (double)l[b];
    if (m != m || m == -HUGE_VAL) return -HUGE_VAL;
    if (m == HUGE_VAL) return HUGE_VAL;
    double s = 0;
    for (int i = 0; i < n; i++) {
        double x = (double)l[i] - m;
        if (x == x) s += k3_exp_d(x);
    }
    return m + k3_log_d(s);
}

float k3_logprob(const float *l, int j, double lse) {
    double x = (double)l[j];
    if (x != x) return -HUGE_VALF;
    return (float)(x - lse);
}

/* a before b: larger logit, then lower id; NaN after every number */
static int before(const float *l, int a, int b) {
    float x = l[a], y = l[b];
    if (x != x) return 0;
    if (y != y) return 1;
    return x > y || (x == y && a < b);
}

void k3_logprob_at(const float *l, int n, int id, int k, K3Logprob *e) {
    double lse = k3_logsumexp(l, n);
    e->id = id;
    e->logprob = k3_logprob(l, id, lse);
    if (k > K3_MAX_TOP_LOGPROBS) k = K3_MAX_TOP_LOGPROBS;
    if (k > n) k = n;
    e->n_top = 0;
    for (int i = 0; i < n; i++) {                        /* insertion into the k best */
        int j = e->n_top;
        if (j == k && (k == 0 || !before(l, i, e->top[k - 1]))) continue;
        if (j < k) e->n_top++;
        else j = k - 1;
        while (j > 0 && before(l, i, e->top[j - 1])) { e->top[j] = e->top[j - 1]; j--; }
        e->top[j] = i;
    }
    for (int t = 0; t < e->n_top; t++) e->top_logprob[t] = k3_logprob(l, e->top[t], lse);
}
