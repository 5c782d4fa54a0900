/* test_sampler.c — the sampler: PRNG reference values, deterministic exp, greedy and
 * ties, determinism by seed and turn, argument checks, and chi-square goodness of fit
 * on a fixed logit vector for temperature, top-k, top-p and min-p (the expected
 * distribution is computed here independently, with libm exp). */
#include "sampler.h"
#include "kernels.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

#define NL 10
static const float LOGITS[NL] = { 1.0f, 3.0f, 2.5f, 0.0f, 2.5f, -1.0f, 1.5f, 0.5f, 2.0f, -3.0f };

/* Reference: softmax(l/T) in double, order by p desc then id, top-k, min-p, top-p. */
static void reference(const SamplerParams *p, double *want) {
    double pr[NL], mx = -1e300;
    int ord[NL];
    for (int i = 0; i < NL; i++)
        if (LOGITS[i] / p->temperature > mx) mx = LOGITS[i] / p->temperature;
    for (int i = 0; i < NL; i++) { pr[i] = exp(LOGITS[i] / p->temperature - mx); ord[i] = i; }
    for (int i = 0; i < NL; i++)
        for (int j = i + 1; j < NL; j++)
            if (pr[ord[j]] > pr[ord[i]] || (pr[ord[j]] == pr[ord[i]] && ord[j] < ord[i])) {
                int t = ord[i]; ord[i] = ord[j]; ord[j] = t;
            }
    int K = NL;
    if (p->top_k > 0 && p->top_k < K) K = p->top_k;
    if (p->min_p > 0) {
        int k = 1; while (k < K && pr[ord[k]] >= p->min_p * pr[ord[0]]) k++; K = k;
    }
    double mass = 0;
    for (int k = 0; k < K; k++) mass += pr[ord[k]];
    if (p->top_p < 1) {
        double c = 0; int k = 0;
        while (k < K) { c += pr[ord[k++]]; if (c >= p->top_p * mass) break; }
        K = k; mass = c;
    }
    memset(want, 0, sizeof(double) * NL);
    for (int k = 0; k < K; k++) want[ord[k]] = pr[ord[k]] / mass;
}

/* chi-square critical values at p = 0.001 for df = 1..9 */
static const double CRIT[10] = { 0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88 };

static void chi2(const char *name, double T, int k, double top_p, double min_p, int expect_kept) {
    SamplerParams p; sampler_defaults(&p);
    p.temperature = T; p.top_k = k; p.top_p = top_p; p.min_p = min_p;
    double want[NL], got[NL];
    reference(&p, want);
    Sampler s; sampler_init(&s, &p, 12345);
    sampler_probs(&s, LOGITS, NL, got);
    int kept = 0;
    for (int i = 0; i < NL; i++) {
        CHECK(fabs(got[i] - want[i]) < 1e-12, "%s: p[%d] %.15g want %.15g", name, i, got[i],
              want[i]);
        kept += want[i] > 0;
    }
    CHECK(kept == expect_kept, "%s: %d kept, want %d", name, kept, expect_kept);
    const int N = 40000;
    long cnt[NL] = { 0 };
    for (int i = 0; i < N; i++) {
        int id = sampler_sample(&s, LOGITS, NL); if (id >= 0 && id < NL) cnt[id]++;
    }
    double x2 = 0; int df = -1, out = 0;
    for (int i = 0; i < NL; i++) {
        if (want[i] == 0) { out += cnt[i] != 0; continue; }
        double e = want[i] * N;
        x2 += (cnt[i] - e) * (cnt[i] - e) / e; df++;
    }
    CHECK(out == 0, "%s: drew a filtered-out id", name);
    CHECK(df < 1 || x2 < CRIT[df], "%s: chi-square %.2f >= %.2f (df %d)", name, x2, CRIT[df], df);
    printf("ok chi-square %-22s kept %d  X2 = %6.2f (df %d, 0.1%% critical %.2f)\n", name, kept,
           x2, df, df > 0 ? CRIT[df] : 0.0);
    sampler_free(&s);
}

int main(void) {
    /* splitmix64 reference: seed 0 -> 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4 */
    uint64_t st = 0;
    uint64_t a = k3_splitmix64(&st), b = k3_splitmix64(&st);
    CHECK(a == 0xe220a8397b1dcdafULL && b == 0x6e789e6aa1b965f4ULL, "splitmix64 reference values");
    /* counter-based draws: a pure function of (seed, pos), pinned so the streams cannot
     * drift across builds; neighbouring positions and seeds differ */
    double u = k3_rng_uniform_at(42, 0);
    CHECK(u >= 0 && u < 1, "uniform in [0,1)");
    uint64_t st2 = 42, key = k3_splitmix64(&st2);
    st2 = key ^ 3 * 0xd1b54a32d192ed03ULL;
    CHECK(k3_rng_at(42, 2) == k3_splitmix64(&st2), "k3_rng_at follows its documented formula");
    CHECK(k3_rng_at(42, 2) == k3_rng_at(42, 2) && k3_rng_at(42, 2) != k3_rng_at(42, 3) &&
          k3_rng_at(42, 2) != k3_rng_at(43, 2), "k3_rng_at: same inputs same draw, else not");
    int ones = 0;                        /* the mean bit of 4096 draws is near 1/2 */
    for (long i = 0; i < 4096; i++) ones += __builtin_popcountll(k3_rng_at(7, i));
    CHECK(ones > 4096 * 32 - 2000 && ones < 4096 * 32 + 2000, "k3_rng_at bits balanced: %d", ones);
    printf("ok splitmix64 reference, counter-based draws\n");

    double maxrel = 0;
    for (double x = -745; x <= 0; x += 0.0137) {
        double e = exp(x), g = k3_exp_d(x);
        if (e > 1e-300) { double rel = fabs(g - e) / e; if (rel > maxrel) maxrel = rel; }
    }
    CHECK(maxrel < 4e-15, "k3_exp_d max relative error %g", maxrel);
    CHECK(k3_exp_d(0) == 1.0 && k3_exp_d(-800) == 0.0, "k3_exp_d edge values");
    printf("ok k3_exp_d: max relative error vs libm %.2g\n", maxrel);

    /* greedy: argmax, lowest id on ties */
    SamplerParams p; sampler_defaults(&p);
    p.greedy = 1;
    Sampler s; sampler_init(&s, &p, 7);
    float tie[4] = { 0.5f, 2.0f, 2.0f, 1.0f };
    CHECK(sampler_sample(&s, tie, 4) == 1 && s.pos == 1, "greedy tie -> lowest id");
    sampler_free(&s);
    p.greedy = 0; p.temperature = 0;
    sampler_init(&s, &p, 7);
    CHECK(sampler_sample(&s, LOGITS, NL) == 1 && sampler_is_greedy(&p), "temperature 0 = greedy");
    sampler_free(&s);
    /* top-k 1 with ties picks the lowest id of the tie */
    sampler_defaults(&p); p.top_k = 1;
    sampler_init(&s, &p, 9);
    float tie2[4] = { 0.0f, 1.0f, 3.0f, 3.0f };
    int all2 = 1;
    for (int i = 0; i < 100; i++) all2 &= sampler_sample(&s, tie2, 4) == 2;
    CHECK(all2, "top-k 1 on a tie keeps the lower id");
    sampler_free(&s);
    printf("ok greedy, ties by id, temperature 0\n");

    /* determinism: same seed -> same tokens; another seed -> another sequence; turn seeds */
    sampler_defaults(&p);
    int s1[200], s2[200], s3[200];
    for (int rep = 0; rep < 3; rep++) {
        sampler_init(&s, &p, rep == 2 ? 43 : 42);
        for (int i = 0; i < 200; i++)
            (rep == 0 ? s1 : rep == 1 ? s2 : s3)[i] = sampler_sample(&s, LOGITS, NL);
        sampler_free(&s);
    }
    CHECK(!memcmp(s1, s2, sizeof s1), "same seed, same tokens");
    CHECK(memcmp(s1, s3, sizeof s1), "different seed, different tokens");
    CHECK(sampler_turn_seed(42, 0) != sampler_turn_seed(42, 1) &&
          sampler_turn_seed(42, 3) == sampler_turn_seed(42, 3), "turn seeds");
    /* a draw depends on the position only: sampling positions out of order, or with other
     * logits at the other positions, gives each position the token of the in-order run */
    int fail_at = -1;
    for (int i = 199; i >= 0; i--) {
        sampler_init(&s, &p, 42);
        if (sampler_sample_at(&s, LOGITS, NL, i) != s1[i]) fail_at = i;
        sampler_free(&s);
    }
    CHECK(fail_at < 0, "sample_at position %d differs from the in-order run", fail_at);
    sampler_init(&s, &p, 42);
    float flat[NL] = { 0 };
    for (int i = 0; i < 50; i++) sampler_sample(&s, flat, NL);
    CHECK(sampler_sample(&s, LOGITS, NL) == s1[50], "position 50 after other logits");
    sampler_free(&s);
    /* a fixed expected prefix pins the algorithm (draws + exp + order) across builds */
    sampler_init(&s, &p, 2024);
    char seq[64] = "", want[] = "4162482111";
    for (int i = 0; i < 10; i++) seq[i] = (char)('0' + sampler_sample(&s, LOGITS, NL));
    sampler_free(&s);
    CHECK(!strcmp(seq, want), "seed 2024 sequence %s, want %s", seq, want);
    printf("ok determinism: seed, turn streams, pinned sequence %s\n", seq);

    /* argument checks */
    char err[200];
    sampler_defaults(&p); p.temperature = -1;
    CHECK(sampler_check(&p, err, sizeof err) == -1, "T < 0 rejected");
    sampler_defaults(&p); p.top_p = 0;
    CHECK(sampler_check(&p, err, sizeof err) == -1, "top_p 0 rejected");
    sampler_defaults(&p); p.top_p = 1.5;
    CHECK(sampler_check(&p, err, sizeof err) == -1, "top_p > 1 rejected");
    sampler_defaults(&p); p.min_p = 1;
    CHECK(sampler_check(&p, err, sizeof err) == -1, "min_p 1 rejected");
    sampler_defaults(&p); CHECK(sampler_check(&p, err, sizeof err) == 0, "defaults accepted");
    char *av[] = { "k3", "--top-k", "5", "--seed", "99", "--top-p", "x" };
    uint64_t seed = 0; int seed_set = 0, i = 1;
    CHECK(sampler_parse_flag(7, av, &i, &p, &seed, &seed_set, err, sizeof err) == 1 &&
          p.top_k == 5 && i == 2, "--top-k parsed");
    i = 3;
    CHECK(sampler_parse_flag(7, av, &i, &p, &seed, &seed_set, err, sizeof err) == 1 &&
          seed == 99 && seed_set, "--seed parsed");
    i = 5;
    CHECK(sampler_parse_flag(7, av, &i, &p, &seed, &seed_set, err, sizeof err) == -1,
          "--top-p x rejected");
    printf("ok argument checks\n");

    chi2("T=1", 1.0, 0, 1.0, 0, 10);
    chi2("T=0.5", 0.5, 0, 1.0, 0, 10);
    chi2("T=2", 2.0, 0, 1.0, 0, 10);
    chi2("top-k=3", 1.0, 3, 1.0, 0, 3);
    chi2("top-p=0.8", 1.0, 0, 0.8, 0, 4);
    chi2("min-p=0.2", 1.0, 0, 1.0, 0.2, 5);
    chi2("T=0.7 top-k=6 top-p=0.9", 0.7, 6, 0.9, 0, 4);
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    return 0;
}
