/* xtml_json.c — JSON text exactly as Python's json.dumps(ensure_ascii=False) writes it,
 * which is what the official encoder puts into the prompt (TOKENIZER_XTML.md §6.4): the
 * tool declaration (keys deep-sorted, separators "," ":") and non-string tool-call
 * argument values (document order, separators ", " ": "). Numbers follow Python: an
 * integer as written, a float as repr() (shortest text that reads back, "1.0", "1e+16").
 * A duplicate key keeps its first position and its last value, as a Python dict does. */
#include "xtml.h"
#include "strbuf.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python's repr(float). */
static void py_float(double x, char out[40]) {
    if (isnan(x)) { strcpy(out, "NaN"); return; }
    if (isinf(x)) { strcpy(out, x > 0 ? "Infinity" : "-Infinity"); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) {                 /* the shortest that reads back */
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e is [-]D[.DDD]e[+-]XX: digits and the decimal exponent of the first one */
    char dig[24];
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++) if (*q != '.') dig[nd++] = *q;
    int ex = atoi(q + 1);
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (ex >= -4 && ex < 16) {                      /* repr's fixed notation range */
        if (ex < 0) {
            *o++ = '0'; *o++ = '.';
            for (int i = 0; i < -ex - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = dig[i];
        } else {
            for (int i = 0; i <= ex; i++) *o++ = i < nd ? dig[i] : '0';
            *o++ = '.';
            if (nd > ex + 1) for (int i = ex + 1; i < nd; i++) *o++ = dig[i];
            else *o++ = '0';
        }
        *o = 0;
        return;
    }
    *o++ = dig[0];
    if (nd > 1) { *o++ = '.'; for (int i = 1; i < nd; i++) *o++ = dig[i]; }
    sprintf(o, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
}

static int cmp_key(const void *a, const void *b) {
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

static void value(Buf *o, const Json *j, int compact, int sort) {
    char num[40];
    switch (j->type) {
    case JSON_NULL: buf_str(o, "null"); return;
    case JSON_BOOL: buf_str(o, j->boolean ? "true" : "false"); return;
    case JSON_NUMBER:
        if (j->is_integer) snprintf(num, sizeof num, "%lld", (long long)j->integer);
        else py_float(j->number, num);
        buf_str(o, num);
        return;
    case JSON_STRING: {
        char *s = json_quote(j->str, j->len);
        if (!s) { o->oom = 1; return; }
        buf_str(o, s);
        free(s);
        return;
    }
    case JSON_ARRAY:
        buf_add(o, "[", 1);
        for (size_t i = 0; i < j->len; i++) {
            if (i) buf_str(o, compact ? "," : ", ");
            value(o, j->items[i], compact, sort);
        }
        buf_add(o, "]", 1);
        return;
    case JSON_OBJECT: {
        /* unique keys: first position, last value */
        const char **k = malloc(sizeof *k * (j->len + 1));
        size_t *at = malloc(sizeof *at * (j->len + 1)), n = 0;
        if (!k || !at) { free(k); free(at); o->oom = 1; return; }
        for (size_t i = 0; i < j->len; i++) {
            size_t u = 0;
            while (u < n && strcmp(k[u], j->keys[i])) u++;
            if (u == n) { k[n] = j->keys[i]; at[n++] = i; }
            else at[u] = i;
        }
        const char ***ord = malloc(sizeof *ord * (n + 1));
        if (!ord) { free(k); free(at); o->oom = 1; return; }
        for (size_t u = 0; u < n; u++) ord[u] = &k[u];
        if (sort) qsort(ord, n, sizeof *ord, cmp_key);
        buf_add(o, "{", 1);
        for (size_t u = 0; u < n; u++) {
            size_t i = at[ord[u] - k];
            if (u) buf_str(o, compact ? "," : ", ");
            char *s = json_quote(j->keys[i], strlen(j->keys[i]));
            if (!s) { o->oom = 1; break; }
            buf_str(o, s);
            free(s);
            buf_str(o, compact ? ":" : ": ");
            value(o, j->items[i], compact, sort);
        }
        buf_add(o, "}", 1);
        free(ord); free(k); free(at);
        return;
    }
    }
}

char *xtml_pyjson(const Json *j, int compact, int sort) {
    Buf o = { 0 };
    value(&o, j, compact, sort);
    if (o.oom) { free(o.b); return NULL; }
    return o.b;
}
