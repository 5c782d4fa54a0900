/* test_logprob.c — the log-softmax of raw logits (src/text/logprob.c): k3_log_d against
 * libm's log (within 1 ulp: a series with a wrong term or a lost ln2 split fails), the
 * log-sum-exp and each logprob against a long-double reference (within 1e-6 of the
 * float32 result: a temperature, a wrong max or a sum missing a term fails), probabilities
 * summing to 1, the top alternatives' order (larger logit, lower id on ties, NaN last, k
 * capped) and rows with NaN and -inf. */
#include "logprob.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static void log_d(void) {
    const double xs[] = { 1, 2, 0.5, 0.7071067811865476, 1.4142135623730951, 3, 10, 1e-300,
                          1e300, 1024, 1023.999, 5e-324, 1.0000000001, 0.9999999999, 163584 };
    for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
        double a = k3_log_d(xs[i]), b = log(xs[i]);
        CHECK(fabs(a - b) <= nextafter(fabs(b), INFINITY) - fabs(b) || a == b,
              "log(%g): %.17g, libm %.17g", xs[i], a, b);
    }
    for (double x = 1e-6; x < 1e7; x *= 1.0137) {
        double a = k3_log_d(x), b = log(x);
        if (!(fabs(a - b) <= 2.3e-16 * (fabs(b) > 1 ? fabs(b) : 1))) {
            CHECK(0, "log(%.17g): %.17g, libm %.17g", x, a, b);
            break;
        }
    }
    CHECK(k3_log_d(0) == -HUGE_VAL && isnan(k3_log_d(-1)), "log(0), log(-1)");
}

static void row(void) {
    enum { N = 1000 };
    static float l[N];
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        l[i] = (float)((int)(s >> 8) % 20000) / 1000.0f - 10.0f;
    }
    long double m = -1e30L, z = 0;
    for (int i = 0; i < N; i++) if (l[i] > m) m = l[i];
    for (int i = 0; i < N; i++) z += expl((long double)l[i] - m);
    long double lse = m + logl(z);
    double got = k3_logsumexp(l, N), sum = 0;
    CHECK(fabs(got - (double)lse) < 1e-12, "lse %.17g, reference %.17Lg", got, lse);
    for (int i = 0; i < N; i++) {
        float lp = k3_logprob(l, i, got);
        CHECK(fabsl((long double)lp - ((long double)l[i] - lse)) < 1e-6L, "logprob %d", i);
        sum += exp((double)lp);
    }
    CHECK(fabs(sum - 1) < 1e-5, "probabilities sum to %.9g", sum);
    K3Logprob e;
    k3_logprob_at(l, N, 7, 20, &e);
    CHECK(e.id == 7 && e.logprob == k3_logprob(l, 7, got) && e.n_top == 20, "entry");
    for (int t = 0; t < e.n_top; t++) {
        int better = 0;
        for (int i = 0; i < N; i++)
            better += l[i] > l[e.top[t]] || (l[i] == l[e.top[t]] && i < e.top[t]);
        CHECK(better == t, "top[%d] = %d has %d ahead of it", t, e.top[t], better);
        CHECK(e.top_logprob[t] == k3_logprob(l, e.top[t], got), "top_logprob[%d]", t);
    }
}

static void edges(void) {
    float l[6] = { 1, NAN, 3, 3, -INFINITY, 2 };
    K3Logprob e;
    k3_logprob_at(l, 6, 1, 50, &e);
    CHECK(e.n_top == 6, "k capped at n: %d", e.n_top);
    const int want[6] = { 2, 3, 5, 0, 4, 1 };
    for (int t = 0; t < 6; t++) CHECK(e.top[t] == want[t], "edge top[%d] = %d", t, e.top[t]);
    CHECK(e.logprob == -INFINITY && e.top_logprob[4] == -INFINITY, "NaN and -inf: -inf");
    double lse = 3 + log(exp(-2.0) + 2 + exp(-1.0));
    CHECK(fabs(k3_logsumexp(l, 6) - lse) < 1e-15, "lse with NaN and -inf skipped");
    k3_logprob_at(l, 6, 2, 0, &e);
    CHECK(e.n_top == 0 && e.id == 2, "k = 0");
    float all_nan[2] = { NAN, NAN };
    CHECK(k3_logsumexp(all_nan, 2) == -HUGE_VAL, "all NaN");
}

int main(void) {
    log_d();
    row();
    edges();
    if (fails) { printf("%d failures\n", fails); return 1; }
    printf("ok logprob\n");
    return 0;
}
