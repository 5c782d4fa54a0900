/* penalty_json.c — the penalty and bias fields of a JSON request (batch lines, the
 * server): frequency_penalty, presence_penalty, repetition_penalty (or repeat_penalty),
 * repeat_last_n and logit_bias {"ID": BIAS}; the same ranges as the flags, messages
 * naming the field. */
#include "sampler.h"
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int number(const Json *v, const char *key, double lo, double hi, double *out,
                  char *err, size_t errlen) {
    if (v->type != JSON_NUMBER || !(v->number >= lo && v->number <= hi)) {
        snprintf(err, errlen, "'%s' must be a number in [%g, %g]", key, lo, hi);
        return -1;
    }
    *out = v->number;
    return 1;
}

static int bias(const Json *v, SamplerParams *p, char *err, size_t errlen) {
    if (v->type != JSON_OBJECT) {
        snprintf(err, errlen, "'logit_bias' must be an object of token id -> bias, "
                 "e.g. {\"123\": -5}");
        return -1;
    }
    if (v->len > K3_MAX_BIAS) {
        snprintf(err, errlen, "'logit_bias' takes at most %d tokens", K3_MAX_BIAS);
        return -1;
    }
    p->n_bias = 0;
    for (size_t i = 0; i < v->len; i++) {
        const char *k = v->keys[i];
        char *end;
        long id = strtol(k, &end, 10);
        if (!*k || *end || *k == '-' || *k == '+' || id > 1L << 30) {
            snprintf(err, errlen, "'logit_bias' keys must be token ids (integers >= 0), "
                     "got \"%.40s\"", k);
            return -1;
        }
        const Json *b = v->items[i];
        if (b->type != JSON_NUMBER || !(b->number >= -100 && b->number <= 100)) {
            snprintf(err, errlen, "'logit_bias' of token %ld must be a number in "
                     "[-100, 100]", id);
            return -1;
        }
        p->bias_id[p->n_bias] = (int)id;
        p->bias[p->n_bias++] = (float)b->number;
    }
    return 1;
}

int penalty_json_field(const char *key, const Json *v, SamplerParams *p, char *err,
                       size_t errlen) {
    if (v->type == JSON_NULL) return !strcmp(key, "logit_bias") ||
        !strcmp(key, "frequency_penalty") || !strcmp(key, "presence_penalty") ||
        !strcmp(key, "repetition_penalty") || !strcmp(key, "repeat_penalty") ||
        !strcmp(key, "repeat_last_n");
    if (!strcmp(key, "frequency_penalty"))
        return number(v, key, -2, 2, &p->frequency_penalty, err, errlen);
    if (!strcmp(key, "presence_penalty"))
        return number(v, key, -2, 2, &p->presence_penalty, err, errlen);
    if (!strcmp(key, "repetition_penalty") || !strcmp(key, "repeat_penalty")) {
        if (number(v, key, 0, 100, &p->repeat_penalty, err, errlen) < 0) return -1;
        if (p->repeat_penalty > 0) return 1;
        snprintf(err, errlen, "'%s' must be > 0 (1 = off)", key);
        return -1;
    }
    if (!strcmp(key, "repeat_last_n")) {
        if (v->type != JSON_NUMBER || !v->is_integer || v->integer < -1 ||
            v->integer > 1 << 30) {
            snprintf(err, errlen, "'repeat_last_n' must be an integer >= -1 (-1 = all, "
                     "0 = off)");
            return -1;
        }
        p->repeat_last_n = (int)v->integer;
        return 1;
    }
    if (!strcmp(key, "logit_bias")) return bias(v, p, err, errlen);
    return 0;
}
