/* batch_jsonl.c — the --batch file's lines (include/batch.h): strict, every field checked
 * before the run starts, each refusal naming its line and field. */
#include "batch.h"
#include "json.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void batch_line_free(BatchLine *l) {
    free(l->id); free(l->ids); free(l->prompt);
    jg_free(l->jg); gr_free(l->gr);
    memset(l, 0, sizeof *l);
}

void batch_lines_free(BatchLine *v, int n) {
    for (int i = 0; i < n; i++) batch_line_free(&v[i]);
    free(v);
}

/* A number field: 0, or -1 with the message. */
static int number(const Json *v, int line, const char *key, double *out, char *err,
                  size_t errlen) {
    if (v->type != JSON_NUMBER) {
        snprintf(err, errlen, "line %d: \"%s\" must be a number, got a %s", line, key,
                 json_type_name(v->type));
        return -1;
    }
    *out = v->number;
    return 0;
}

static int integer(const Json *v, int line, const char *key, int64_t lo, int64_t hi,
                   int64_t *out, char *err, size_t errlen) {
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < lo || v->integer > hi) {
        snprintf(err, errlen, "line %d: \"%s\" must be an integer in %" PRId64 "..%" PRId64,
                 line, key, lo, hi);
        return -1;
    }
    *out = v->integer;
    return 0;
}

static int field(const char *key, const Json *v, int line, BatchLine *o, int *seen_sp,
                 char *err, size_t errlen) {
    double x;
    int64_t k;
    if (!strcmp(key, "id")) {
        free(o->id);
        o->id = NULL;                          /* a later duplicate key wins */
        if (v->type == JSON_STRING) o->id = json_quote(v->str, v->len);
        else if (v->type == JSON_NUMBER && v->is_integer) {
            o->id = malloc(32);
            if (o->id) snprintf(o->id, 32, "%" PRId64, v->integer);
        } else {
            snprintf(err, errlen, "line %d: \"id\" must be a string or an integer, got a %s",
                     line, json_type_name(v->type));
            return -1;
        }
        if (!o->id) { snprintf(err, errlen, "line %d: out of memory", line); return -1; }
    } else if (!strcmp(key, "ids")) {
        if (v->type != JSON_ARRAY || v->len == 0 || v->len > (1u << 30)) {
            snprintf(err, errlen, "line %d: \"ids\" must be a non-empty array of token ids",
                     line);
            return -1;
        }
        free(o->ids);
        o->n_ids = 0;
        o->ids = malloc(sizeof(int) * v->len);
        if (!o->ids) { snprintf(err, errlen, "line %d: out of memory", line); return -1; }
        o->n_ids = (int)v->len;
        for (size_t i = 0; i < v->len; i++) {
            const Json *t = v->items[i];
            if (t->type != JSON_NUMBER || !t->is_integer || t->integer < 0 ||
                t->integer > INT32_MAX) {
                snprintf(err, errlen, "line %d: \"ids\" item %zu must be a token id (an "
                         "integer >= 0)", line, i);
                return -1;
            }
            o->ids[i] = (int)t->integer;
        }
    } else if (!strcmp(key, "prompt")) {
        if (v->type != JSON_STRING || v->len == 0) {
            snprintf(err, errlen, "line %d: \"prompt\" must be a non-empty string", line);
            return -1;
        }
        free(o->prompt);
        o->prompt_len = 0;
        o->prompt = malloc(v->len + 1);
        if (!o->prompt) { snprintf(err, errlen, "line %d: out of memory", line); return -1; }
        memcpy(o->prompt, v->str, v->len + 1);
        o->prompt_len = v->len;
    } else if (!strcmp(key, "gen")) {
        if (integer(v, line, key, 0, 1 << 30, &k, err, errlen)) return -1;
        o->gen = (int)k;
    } else if (!strcmp(key, "temperature")) {
        if (number(v, line, key, &x, err, errlen)) return -1;
        o->sp.temperature = x; *seen_sp = 1;
    } else if (!strcmp(key, "top_p")) {
        if (number(v, line, key, &x, err, errlen)) return -1;
        o->sp.top_p = x; *seen_sp = 1;
    } else if (!strcmp(key, "min_p")) {
        if (number(v, line, key, &x, err, errlen)) return -1;
        o->sp.min_p = x; *seen_sp = 1;
    } else if (!strcmp(key, "top_k")) {
        if (integer(v, line, key, 0, 1000000000, &k, err, errlen)) return -1;
        o->sp.top_k = (int)k; *seen_sp = 1;
    } else if (!strcmp(key, "seed")) {
        if (integer(v, line, key, 0, INT64_MAX, &k, err, errlen)) return -1;
        o->seed = (uint64_t)k; *seen_sp = 1;
    } else if (!strcmp(key, "response_format")) {
        jg_free(o->jg);
        if (jg_response_format(v, &o->jg, err, errlen)) {
            char m[512];
            snprintf(m, sizeof m, "%s", err);
            snprintf(err, errlen, "line %d: %s", line, m);
            return -1;
        }
    } else if (!strcmp(key, "grammar")) {     /* GBNF text (docs/SAMPLING.md) */
        char m[512];
        gr_free(o->gr);
        o->gr = NULL;
        if (v->type != JSON_STRING) snprintf(m, sizeof m, "must be a string of "
                                             "GBNF text, got a %s", json_type_name(v->type));
        else if (!(o->gr = gr_parse(v->str, v->len, m, sizeof m))) {}
        if (!o->gr) { snprintf(err, errlen, "line %d: \"grammar\": %s", line, m); return -1; }
    } else if ((k = penalty_json_field(key, v, &o->sp, err + 0, errlen)) != 0) {
        if (k > 0) return 0;                   /* penalties alone keep greedy greedy */
        char m[200];
        snprintf(m, sizeof m, "%s", err);
        snprintf(err, errlen, "line %d: %s", line, m);
        return -1;
    } else {
        char *q = json_quote(key, strlen(key));
        snprintf(err, errlen, "line %d: unknown field %s (known: id, ids, prompt, gen, "
                 "temperature, top_p, top_k, min_p, seed, frequency_penalty, presence_penalty, "
                 "repeat_penalty, repeat_last_n, logit_bias, response_format, grammar)", line,
                 q ? q : "?");
        free(q);
        return -1;
    }
    return 0;
}

int batch_parse_line(const char *text, size_t n, int line, const SamplerParams *sp,
                     uint64_t seed, int sampling, BatchLine *o, char *err, size_t errlen) {
    char jerr[256];
    memset(o, 0, sizeof *o);
    o->line = line; o->gen = -1; o->sp = *sp; o->seed = seed; o->sampling = sampling;
    Json *j = json_parse(text, n, jerr, sizeof jerr);
    if (!j) {
        snprintf(err, errlen, "line %d: not JSON (%s)", line, jerr);
        return 2;
    }
    int rc = 0, seen_sp = 0;
    if (j->type != JSON_OBJECT) {
        snprintf(err, errlen, "line %d: expected a JSON object, got a %s", line,
                 json_type_name(j->type));
        rc = 2;
    }
    for (size_t i = 0; !rc && i < j->len; i++)
        if (field(j->keys[i], j->items[i], line, o, &seen_sp, err, errlen)) rc = 2;
    json_free(j);
    char serr[200];
    if (!rc && !!o->ids + !!o->prompt != 1) {
        snprintf(err, errlen, "line %d: give exactly one of \"ids\" and \"prompt\"", line);
        rc = 2;
    } else if (!rc && o->jg && o->gr) {
        snprintf(err, errlen, "line %d: give \"response_format\" (JSON mode) or \"grammar\", "
                 "not both", line);
        rc = 2;
    } else if (!rc && sampler_check(&o->sp, serr, sizeof serr)) {
        /* the sampler names the flag; here the field is the line's */
        snprintf(err, errlen, "line %d: %s (the field: %s)", line, serr,
                 strstr(serr, "--temperature") ? "temperature" : strstr(serr, "--top-p") ?
                 "top_p" : "min_p");
        rc = 2;
    }
    if (!rc && !o->id) {                       /* no id: the line number */
        o->id = malloc(16);
        if (o->id) snprintf(o->id, 16, "%d", line);
        else { snprintf(err, errlen, "line %d: out of memory", line); rc = 2; }
    }
    o->sampling |= seen_sp;
    if (rc) batch_line_free(o);
    return rc;
}

const char *batch_next_line(const char *buf, size_t n, size_t *p, int last, size_t *len,
                            int *blank) {
    const char *nl = memchr(buf + *p, '\n', n - *p);
    if (!nl && !(last && *p < n)) return NULL;
    const char *t = buf + *p;
    const size_t e = nl ? (size_t)(nl - buf) : n;
    *len = e - *p;
    if (*len && t[*len - 1] == '\r') (*len)--;
    *blank = 1;
    for (size_t i = 0; i < *len && *blank; i++) *blank = t[i] == ' ' || t[i] == '\t';
    *p = nl ? e + 1 : n;
    return t;
}

int batch_parse_each(const char *buf, size_t n, const SamplerParams *sp, uint64_t seed,
                     int sampling, BatchLine **out, int *n_out, int *n_bad,
                     void (*bad)(void *ctx, const char *msg), void *ctx) {
    BatchLine *v = NULL;
    int nv = 0, cap = 0, line = 0;
    *out = NULL; *n_out = 0; *n_bad = 0;
    size_t p = 0, len;
    int blank;
    char err[1024];
    for (const char *t; (t = batch_next_line(buf, n, &p, 1, &len, &blank));) {
        line++;
        if (blank) continue;
        if (nv == cap) {
            cap = cap ? 2 * cap : 16;
            BatchLine *nvp = realloc(v, sizeof *v * (size_t)cap);
            if (!nvp) { batch_lines_free(v, nv); return 1; }
            v = nvp;
        }
        if (batch_parse_line(t, len, line, sp, seed, sampling, &v[nv], err, sizeof err)) {
            (*n_bad)++;                        /* every bad line, not just the first */
            bad(ctx, err);
        } else nv++;
    }
    if (!nv && !*n_bad) {
        free(v);
        return 0;
    }
    *out = v; *n_out = nv;
    return 0;
}

typedef struct { char *err; size_t errlen; int n; } First;

static void keep_first(void *ctx, const char *msg) {
    First *f = ctx;
    if (!f->n++) snprintf(f->err, f->errlen, "%s", msg);
}

int batch_parse_all(const char *buf, size_t n, const SamplerParams *sp, uint64_t seed,
                    int sampling, BatchLine **out, int *n_out, char *err, size_t errlen) {
    First f = { err, errlen, 0 };
    int n_bad = 0;
    if (batch_parse_each(buf, n, sp, seed, sampling, out, n_out, &n_bad, keep_first, &f)) {
        snprintf(err, errlen, "out of memory");
        return 2;
    }
    if (n_bad) {
        batch_lines_free(*out, *n_out);
        *out = NULL; *n_out = 0;
        return 2;
    }
    if (!*n_out) {
        snprintf(err, errlen, "%s", BATCH_NO_LINES);
        return 2;
    }
    return 0;
}
