/* sampler.c — deterministic sampling (see include/sampler.h for the exact pipeline). */
#include "sampler.h"
#include "kernels.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t k3_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Counter-based: a function of (seed, pos) only, so no order of calls can move a draw. */
uint64_t k3_rng_at(uint64_t seed, long pos) {
    uint64_t st = seed;
    uint64_t key = k3_splitmix64(&st);
    st = key ^ ((uint64_t)pos + 1) * 0xd1b54a32d192ed03ULL;
    return k3_splitmix64(&st);
}

double k3_rng_uniform_at(uint64_t seed, long pos) {
    return (double)(k3_rng_at(seed, pos) >> 11) * 0x1.0p-53;
}

void sampler_defaults(SamplerParams *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0; p->top_k = 0; p->top_p = 1.0; p->min_p = 0.0; p->greedy = 0;
    p->repeat_penalty = 1.0; p->repeat_last_n = 64;
}

int sampler_check(const SamplerParams *p, char *err, size_t errlen) {
    if (!(p->temperature >= 0) || p->temperature > 1e6) {
        snprintf(err, errlen, "--temperature must be a number >= 0 (0 = greedy), got %g",
                 p->temperature);
        return -1;
    }
    if (!(p->top_p > 0 && p->top_p <= 1)) {
        snprintf(err, errlen, "--top-p must be in (0, 1] (1 = off), got %g", p->top_p);
        return -1;
    }
    if (!(p->min_p >= 0 && p->min_p < 1)) {
        snprintf(err, errlen, "--min-p must be in [0, 1) (0 = off), got %g", p->min_p);
        return -1;
    }
    if (!(p->repeat_penalty > 0 && p->repeat_penalty <= 100)) {
        snprintf(err, errlen, "--repeat-penalty must be in (0, 100] (1 = off), got %g",
                 p->repeat_penalty);
        return -1;
    }
    if (p->repeat_last_n < -1) {
        snprintf(err, errlen, "--repeat-last-n must be >= -1 (-1 = all, 0 = off), got %d",
                 p->repeat_last_n);
        return -1;
    }
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2)) {
        snprintf(err, errlen, "--frequency-penalty must be in [-2, 2] (0 = off), got %g",
                 p->frequency_penalty);
        return -1;
    }
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2)) {
        snprintf(err, errlen, "--presence-penalty must be in [-2, 2] (0 = off), got %g",
                 p->presence_penalty);
        return -1;
    }
    for (int b = 0; b < p->n_bias; b++)
        if (!(p->bias[b] >= -100 && p->bias[b] <= 100) || p->bias_id[b] < 0) {
            snprintf(err, errlen, "--logit-bias: token %d: the bias must be in [-100, 100], "
                     "got %g", p->bias_id[b], p->bias[b]);
            return -1;
        }
    return 0;
}

int sampler_check_vocab(const SamplerParams *p, int vocab, const char *what, char *err,
                        size_t errlen) {
    for (int b = 0; b < p->n_bias; b++)
        if (p->bias_id[b] < 0 || p->bias_id[b] >= vocab) {
            snprintf(err, errlen, "%s: token id %d is outside the vocabulary [0, %d)", what,
                     p->bias_id[b], vocab);
            return -1;
        }
    return 0;
}

int sampler_is_greedy(const SamplerParams *p) { return p->greedy || p->temperature == 0; }

void sampler_init(Sampler *s, const SamplerParams *p, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->seed = seed;
}

void sampler_reseed(Sampler *s, uint64_t seed) { s->seed = seed; s->pos = 0; s->nhist = 0; }

uint64_t sampler_turn_seed(uint64_t seed, int turn) {
    uint64_t st = seed ^ ((uint64_t)turn * 0x9e3779b97f4a7c15ULL);
    return k3_splitmix64(&st);
}

void sampler_free(Sampler *s) {
    free(s->idx); free(s->prob); free(s->work); free(s->cnt); free(s->hist);
    s->idx = NULL; s->prob = NULL; s->cap = 0;
    s->work = NULL; s->cnt = NULL; s->wcap = 0; s->hist = NULL; s->nhist = s->hcap = 0;
}

static const double *g_prob;        /* qsort has no context argument in C11 */
static int cmp_cand(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    double pi = g_prob[i], pj = g_prob[j];
    if (pi > pj) return -1;
    if (pi < pj) return 1;
    return (i > j) - (i < j);
}

/* Fills s->idx[0..K) (sorted) and s->prob (by id); returns K (>= 1), or -1 (OOM).
 * *kept_mass = the mass of the K kept candidates, summed in sorted order. */
static int candidates(Sampler *s, const float *logits, int n, double *kept_mass) {
    if (n > s->cap) {
        int *ni = realloc(s->idx, sizeof(int) * (size_t)n);
        if (ni) s->idx = ni;
        double *np = realloc(s->prob, sizeof(double) * (size_t)n);
        if (np) s->prob = np;
        if (!ni || !np) return -1;
        s->cap = n;
    }
    const double invT = 1.0 / s->p.temperature;
    int b = k3_argmax(logits, n);
    double mx = (double)logits[b] * invT;
    int m = 0;
    for (int i = 0; i < n; i++) {
        double x = (double)logits[i] * invT - mx;
        double p = x == x ? k3_exp_d(x) : 0.0;
        s->prob[i] = p;
        if (p > 0) s->idx[m++] = i;
    }
    if (m == 0) { s->idx[0] = b; s->prob[b] = 1.0; m = 1; }  /* all NaN: fall back */
    g_prob = s->prob;
    qsort(s->idx, (size_t)m, sizeof(int), cmp_cand);
    int K = m;
    if (s->p.top_k > 0 && s->p.top_k < K) K = s->p.top_k;
    if (s->p.min_p > 0) {
        double th = s->p.min_p * s->prob[s->idx[0]];
        int k = 1;
        while (k < K && s->prob[s->idx[k]] >= th) k++;
        K = k;
    }
    double mass = 0;
    for (int k = 0; k < K; k++) mass += s->prob[s->idx[k]];
    if (s->p.top_p < 1) {
        double th = s->p.top_p * mass, cum = 0;
        int k = 0;
        while (k < K) { cum += s->prob[s->idx[k]]; k++; if (cum >= th) break; }
        K = k; mass = cum;
    }
    *kept_mass = mass;
    return K;
}

int sampler_sample(Sampler *s, const float *logits, int n) {
    return sampler_sample_at(s, logits, n, s->pos++);
}

/* The penalised logits of position pos into s->work (the history cut at pos: a pass
 * that rejected drafts samples their position again); NULL when out of memory. */
static const float *penalised(Sampler *s, const float *logits, int n, long pos) {
    if (n > s->wcap) {
        float *w = realloc(s->work, sizeof(float) * (size_t)n);
        if (w) s->work = w;
        int *c = realloc(s->cnt, sizeof(int) * 2 * (size_t)n);
        if (c) { s->cnt = c; memset(c, 0, sizeof(int) * 2 * (size_t)n); }
        if (!w || !c) return NULL;
        s->wcap = n;
    }
    if (s->nhist > pos) s->nhist = pos;
    penalty_apply(&s->p, s->hist, s->nhist, s->cnt, logits, s->work, n);
    return s->work;
}

static int record(Sampler *s, long pos, int id) {
    if (id < 0 || s->nhist != pos) return id;
    if (s->nhist == s->hcap) {
        long c = s->hcap ? s->hcap * 2 : 256;
        int *h = realloc(s->hist, sizeof(int) * (size_t)c);
        if (!h) return -1;
        s->hist = h; s->hcap = c;
    }
    s->hist[s->nhist++] = id;
    return id;
}

static int pick(Sampler *s, const float *logits, int n, long pos);

int sampler_sample_at(Sampler *s, const float *logits, int n, long pos) {
    if (!penalty_active(&s->p)) return pick(s, logits, n, pos);
    const float *lg = penalised(s, logits, n, pos);
    return lg ? record(s, pos, pick(s, lg, n, pos)) : -1;
}

static int pick(Sampler *s, const float *logits, int n, long pos) {
    if (sampler_is_greedy(&s->p)) return k3_argmax(logits, n);
    double mass;
    int K = candidates(s, logits, n, &mass);
    if (K < 0) return -1;
    double r = k3_rng_uniform_at(s->seed, pos) * mass, cum = 0;
    for (int k = 0; k < K; k++) {
        cum += s->prob[s->idx[k]];
        if (cum > r) return s->idx[k];
    }
    return s->idx[K - 1];
}

int sampler_probs(Sampler *s, const float *logits, int n, double *probs) {
    for (int i = 0; i < n; i++) probs[i] = 0;
    if (penalty_active(&s->p) && !(logits = penalised(s, logits, n, s->nhist))) return -1;
    if (sampler_is_greedy(&s->p)) { probs[k3_argmax(logits, n)] = 1; return 0; }
    double mass;
    int K = candidates(s, logits, n, &mass);
    if (K < 0) return -1;
    for (int k = 0; k < K; k++) probs[s->idx[k]] = s->prob[s->idx[k]] / mass;
    return 0;
}

static int num(const char *flag, const char *v, double *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || *end || errno || x != x) {
        snprintf(err, errlen, "%s needs a number, got '%s'", flag, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

int sampler_parse_flag(int argc, char **argv, int *i, SamplerParams *p, uint64_t *seed,
                       int *seed_set, char *err, size_t errlen) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    double x;
    if (!strcmp(a, "--greedy")) { p->greedy = 1; return 1; }
    if (!strcmp(a, "--temperature")) {
        if (num(a, v, &x, err, errlen)) return -1;
        p->temperature = x;
    } else if (!strcmp(a, "--top-p")) { if (num(a, v, &x, err, errlen)) return -1; p->top_p = x; }
    else if (!strcmp(a, "--min-p")) { if (num(a, v, &x, err, errlen)) return -1; p->min_p = x; }
    else if (!strcmp(a, "--top-k")) {
        if (num(a, v, &x, err, errlen)) return -1;
        if (x != floor(x) || x < 0 || x > 1e9) {
            snprintf(err, errlen, "--top-k must be an integer >= 0 (0 = off), got '%s'", v);
            return -1;
        }
        p->top_k = (int)x;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (num(a, v, &x, err, errlen)) return -1;
        p->repeat_penalty = x;
    } else if (!strcmp(a, "--frequency-penalty")) {
        if (num(a, v, &x, err, errlen)) return -1;
        p->frequency_penalty = x;
    } else if (!strcmp(a, "--presence-penalty")) {
        if (num(a, v, &x, err, errlen)) return -1;
        p->presence_penalty = x;
    } else if (!strcmp(a, "--repeat-last-n")) {
        if (num(a, v, &x, err, errlen)) return -1;
        if (x != floor(x) || x < -1 || x > 1e9) {
            snprintf(err, errlen, "--repeat-last-n must be an integer >= -1 (-1 = all, "
                     "0 = off), got '%s'", v);
            return -1;
        }
        p->repeat_last_n = (int)x;
    } else if (!strcmp(a, "--logit-bias")) {
        if (!v) { snprintf(err, errlen, "--logit-bias needs ID=BIAS[,ID=BIAS...]"); return -1; }
        if (penalty_parse_bias(v, p, err, errlen)) return -1;
    } else if (!strcmp(a, "--seed")) {
        char *end;
        errno = 0;
        unsigned long long s = v && *v && *v != '-' ? strtoull(v, &end, 10) : 0;
        if (!v || !*v || *v == '-' || *end || errno) {
            snprintf(err, errlen, "--seed needs an unsigned integer, got '%s'", v ? v : "");
            return -1;
        }
        *seed = s;
        if (seed_set) *seed_set = 1;
    } else return 0;
    (*i)++;
    return 1;
}
