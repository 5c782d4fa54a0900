/* penalty.c — logit bias, frequency/presence (OpenAI) and repetition (llama.cpp)
 * penalties on a copy of the logits; the order and arithmetic are in include/sampler.h. */
#include "sampler.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int penalty_active(const SamplerParams *p) {
    return p->n_bias > 0 || p->frequency_penalty != 0 || p->presence_penalty != 0 ||
           (p->repeat_penalty != 1 && p->repeat_last_n != 0);
}

void penalty_apply(const SamplerParams *p, const int *hist, long nhist, int *mark,
                   const float *in, float *out, int n) {
    memcpy(out, in, sizeof(float) * (size_t)n);
    for (int b = 0; b < p->n_bias; b++)
        if (p->bias_id[b] >= 0 && p->bias_id[b] < n) out[p->bias_id[b]] += p->bias[b];
    if (p->repeat_penalty != 1 && p->repeat_last_n != 0) {
        const float rp = (float)p->repeat_penalty;
        long w0 = p->repeat_last_n < 0 || nhist <= p->repeat_last_n ? 0
                                                                     : nhist - p->repeat_last_n;
        int *seen = mark + n;
        for (long j = w0; j < nhist; j++) {
            const int t = hist[j];
            if (t < 0 || t >= n || seen[t]) continue;
            seen[t] = 1;
            out[t] = out[t] > 0 ? out[t] / rp : out[t] * rp;
        }
        for (long j = w0; j < nhist; j++) if (hist[j] >= 0 && hist[j] < n) seen[hist[j]] = 0;
    }
    if (p->frequency_penalty != 0 || p->presence_penalty != 0) {
        for (long j = 0; j < nhist; j++) if (hist[j] >= 0 && hist[j] < n) mark[hist[j]]++;
        for (long j = 0; j < nhist; j++) {
            const int t = hist[j];
            if (t < 0 || t >= n || !mark[t]) continue;
            out[t] -= (float)(mark[t] * p->frequency_penalty + p->presence_penalty);
            mark[t] = 0;                                   /* once per distinct token */
        }
    }
}

int sampler_is_penalty_flag(const char *a) {
    return !strcmp(a, "--repeat-penalty") || !strcmp(a, "--repeat-last-n") ||
           !strcmp(a, "--frequency-penalty") || !strcmp(a, "--presence-penalty") ||
           !strcmp(a, "--logit-bias");
}

int penalty_parse_bias(const char *v, SamplerParams *p, char *err, size_t errlen) {
    const char *s = v;
    p->n_bias = 0;
    while (s && *s) {
        char *end;
        errno = 0;
        long id = strtol(s, &end, 10);
        if (end == s || *end != '=' || errno || id < 0 || id > 1L << 30) {
            snprintf(err, errlen, "--logit-bias wants ID=BIAS[,ID=BIAS...] (e.g. 123=-5,77=+2), "
                     "got '%s'", v);
            return -1;
        }
        s = end + 1;
        double b = strtod(s, &end);
        if (end == s || (*end && *end != ',') || errno || b != b) {
            snprintf(err, errlen, "--logit-bias: token %ld needs a number after '=', got '%s'",
                     id, v);
            return -1;
        }
        if (p->n_bias == K3_MAX_BIAS) {
            snprintf(err, errlen, "--logit-bias takes at most %d tokens", K3_MAX_BIAS);
            return -1;
        }
        p->bias_id[p->n_bias] = (int)id;
        p->bias[p->n_bias++] = (float)b;
        if (b < -100 || b > 100) {
            snprintf(err, errlen, "--logit-bias: the bias of token %ld must be in [-100, 100], "
                     "got %g", id, b);
            return -1;
        }
        s = *end ? end + 1 : end;
    }
    return 0;
}
