/* test_penalty.c — logit bias and the frequency/presence/repetition penalties against
 * tools/penalty_ref.py's NumPy fixtures (bit for bit: every operation is a single IEEE
 * float32 or double operation in a stated order, so there is nothing to tolerate), the
 * sampler's own history (greedy run, a rewind as a speculative pass makes one), the
 * flag parser and the range checks. */
#include "sampler.h"
#include "penalty_fixtures.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static void params(SamplerParams *p, double rp, int n, double fp, double pp) {
    sampler_defaults(p);
    p->repeat_penalty = rp; p->repeat_last_n = n;
    p->frequency_penalty = fp; p->presence_penalty = pp;
}

static void fixed_cases(void) {
    int mark[2 * PF_V] = { 0 };
    for (int c = 0; c < PF_NCASE; c++) {
        const PfCase *k = &PF_CASES[c];
        SamplerParams p;
        params(&p, k->rp, k->last_n, k->fp, k->pp);
        p.n_bias = k->nb;
        for (int b = 0; b < k->nb; b++) { p.bias_id[b] = k->id[b]; p.bias[b] = k->b[b]; }
        CHECK(penalty_active(&p), "case %d: not active", c);
        float out[PF_V];
        penalty_apply(&p, PF_HIST, PF_NHIST, mark, PF_LOGITS, out, PF_V);
        for (int i = 0; i < PF_V; i++)
            CHECK(!memcmp(&out[i], &k->want[i], 4), "case %d: logit %d %a want %a", c, i,
                  out[i], k->want[i]);
        for (int i = 0; i < 2 * PF_V; i++) CHECK(!mark[i], "case %d: mark %d left set", c, i);
    }
}

static void greedy_history(void) {
    SamplerParams p;
    params(&p, 1.5, 3, 0.4, 0.6);
    p.greedy = 1; p.n_bias = 1; p.bias_id[0] = 4; p.bias[0] = 0.75f;
    Sampler s; sampler_init(&s, &p, 7);
    for (int t = 0; t < PF_STEPS; t++) {
        int id = sampler_sample_at(&s, PF_ROWS[t], PF_V, t);
        CHECK(id == PF_GREEDY[t], "greedy step %d: %d want %d", t, id, PF_GREEDY[t]);
    }
    /* a verify pass that rejected a draft samples position 9 again: the history is cut */
    for (int t = 9; t < PF_STEPS; t++) {
        int id = sampler_sample_at(&s, PF_ROWS[t], PF_V, t);
        CHECK(id == PF_GREEDY[t], "rewound step %d: %d want %d", t, id, PF_GREEDY[t]);
    }
    sampler_reseed(&s, 7);                     /* a new reply: the history starts empty */
    CHECK(sampler_sample(&s, PF_ROWS[0], PF_V) == PF_GREEDY[0], "after reseed");
    sampler_free(&s);
    sampler_defaults(&p); p.greedy = 1;        /* no flags: plain argmax, unchanged */
    CHECK(!penalty_active(&p), "defaults active");
    sampler_init(&s, &p, 7);
    for (int t = 0; t < PF_STEPS; t++)
        CHECK(sampler_sample(&s, PF_ROWS[t], PF_V) == PF_GREEDY_PLAIN[t], "plain step %d", t);
    sampler_free(&s);
}

/* Sampled: the distribution is the softmax of the penalised logits (case 0). */
static void sampled_probs(void) {
    const PfCase *k = &PF_CASES[0];
    SamplerParams p;
    params(&p, k->rp, k->last_n, k->fp, k->pp);
    p.n_bias = k->nb;
    for (int b = 0; b < k->nb; b++) { p.bias_id[b] = k->id[b]; p.bias[b] = k->b[b]; }
    p.temperature = 0.7;
    Sampler s; sampler_init(&s, &p, 3);
    for (int t = 0; t < PF_NHIST; t++) {       /* build the history by forcing each token */
        float lg[PF_V];
        for (int i = 0; i < PF_V; i++) lg[i] = i == PF_HIST[t] ? 100.0f : -100.0f;
        SamplerParams q = s.p; s.p.n_bias = 0; s.p.greedy = 1;
        CHECK(sampler_sample_at(&s, lg, PF_V, t) == PF_HIST[t], "forcing %d", t);
        s.p = q;
    }
    double got[PF_V], want[PF_V], mx = -1e300, z = 0;
    CHECK(!sampler_probs(&s, PF_LOGITS, PF_V, got), "probs");
    for (int i = 0; i < PF_V; i++) if (k->want[i] / 0.7 > mx) mx = k->want[i] / 0.7;
    for (int i = 0; i < PF_V; i++) z += want[i] = exp(k->want[i] / 0.7 - mx);
    for (int i = 0; i < PF_V; i++)
        CHECK(fabs(got[i] - want[i] / z) < 1e-12, "p[%d] %.15g want %.15g", i, got[i],
              want[i] / z);
    sampler_free(&s);
}

static int parse(const char *flag, const char *val, SamplerParams *p, char *err) {
    char *argv[3] = { "k3", (char *)flag, (char *)val };
    int i = 1; uint64_t seed = 0;
    int r = sampler_parse_flag(val ? 3 : 2, argv, &i, p, &seed, NULL, err, 256);
    return r == 1 ? sampler_check(p, err, 256) : -1;
}

static void flags(void) {
    SamplerParams p; char err[256];
    sampler_defaults(&p);
    CHECK(!parse("--logit-bias", "123=-5,77=+2,123=1.5", &p, err), "%s", err);
    CHECK(p.n_bias == 3 && p.bias_id[1] == 77 && p.bias[1] == 2.0f && p.bias[0] == -5.0f,
          "parsed bias");
    CHECK(!sampler_check_vocab(&p, 124, "x", err, sizeof err), "vocab 124: %s", err);
    CHECK(sampler_check_vocab(&p, 100, "x", err, sizeof err) && strstr(err, "123"), "vocab 100");
    const char *bad[][2] = { { "--logit-bias", "5" }, { "--logit-bias", "5=x" },
        { "--logit-bias", "-1=2" }, { "--logit-bias", "5=101" }, { "--logit-bias", "5=1;" },
        { "--repeat-penalty", "0" }, { "--repeat-penalty", "-1" }, { "--repeat-last-n", "-2" },
        { "--repeat-last-n", "1.5" }, { "--frequency-penalty", "2.5" },
        { "--presence-penalty", "-3" }, { "--presence-penalty", "nan" } };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        sampler_defaults(&p); err[0] = 0;
        CHECK(parse(bad[b][0], bad[b][1], &p, err) && strstr(err, bad[b][0]),
              "%s %s accepted (%s)", bad[b][0], bad[b][1], err);
    }
    sampler_defaults(&p);
    CHECK(!parse("--repeat-penalty", "1.1", &p, err) && p.repeat_penalty == 1.1, "rp");
    CHECK(!parse("--repeat-last-n", "-1", &p, err) && p.repeat_last_n == -1, "last n");
    CHECK(!parse("--frequency-penalty", "-2", &p, err) && p.frequency_penalty == -2, "fp");
    CHECK(!parse("--presence-penalty", "2", &p, err) && p.presence_penalty == 2, "pp");
}

int main(void) {
    fixed_cases();
    greedy_history();
    sampled_probs();
    flags();
    if (fails) { printf("test_penalty: %d failure(s)\n", fails); return 1; }
    printf("test_penalty: ok\n");
    return 0;
}
