/* strbuf.c — a growing string (include/strbuf.h). */
#include "strbuf.h"
#include "json.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_add(Buf *s, const char *p, size_t n) {
    if (s->oom) return;
    if (s->n + n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap : 256;
        while (nc < s->n + n + 1) nc *= 2;
        char *nb = realloc(s->b, nc);
        if (!nb) { s->oom = 1; return; }
        s->b = nb; s->cap = nc;
    }
    if (n) memcpy(s->b + s->n, p, n);
    s->n += n;
    s->b[s->n] = 0;
}
void buf_str(Buf *s, const char *p) { buf_add(s, p, strlen(p)); }
void buf_fmt(Buf *s, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) { s->oom = 1; return; }
    if ((size_t)k < sizeof tmp) { buf_add(s, tmp, (size_t)k); return; }
    char *big = malloc((size_t)k + 1);
    if (!big) { s->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)k + 1, fmt, ap);
    va_end(ap);
    buf_add(s, big, (size_t)k);
    free(big);
}
void buf_json(Buf *s, const char *p, size_t n) {
    char *q = json_quote(p, n);
    if (!q) { s->oom = 1; return; }
    buf_str(s, q);
    free(q);
}
void buf_free(Buf *s) { free(s->b); memset(s, 0, sizeof *s); }
