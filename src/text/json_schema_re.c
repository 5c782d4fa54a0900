/* json_schema_re.c — a JSON Schema pattern (the ECMA-262 regular expressions schemas use)
 * as GBNF over the JSON text of a string (json_schema_int.h): literals, classes ([a-z],
 * [^...], \d \w \s and their negations, .), escapes, groups ((...), (?:...), (?<n>...)),
 * alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms alike: the same strings),
 * and ^ $ at the ends of the top-level alternatives. A pattern matches anywhere in the
 * string, so an alternative without ^ (or $) may have any characters before (after).
 * Backreferences, lookaround, \b \B and anchors inside groups are refused by name. Each
 * character is written as the JSON text that means it: " and \ escaped, control
 * characters as \uXXXX or their short escape, the rest as themselves. */
#include "json_schema.h"
#include "json_schema_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t lo, hi; } Rng;
typedef struct { Rng r[160]; int n, neg; } Set;
typedef struct { const char *p; Jsc *c; const char *path; int depth; } Re;

#define MAXCP 0x10FFFFu
static int re_err(Re *x, const char *what) {
    return jsc_error(x->c, x->path, "'pattern': %s is not supported", what);
}
static void set_add(Set *s, uint32_t lo, uint32_t hi) {
    if (s->n < (int)(sizeof s->r / sizeof *s->r)) s->r[s->n++] = (Rng){ lo, hi };
}
static const Rng SPACE[] = { { 9, 13 }, { 32, 32 }, { 0xa0, 0xa0 }, { 0x1680, 0x1680 },
                             { 0x2000, 0x200a }, { 0x2028, 0x2029 }, { 0x202f, 0x202f },
                             { 0x205f, 0x205f }, { 0x3000, 0x3000 }, { 0xfeff, 0xfeff } };
static const Rng WORD[] = { { '0', '9' }, { 'A', 'Z' }, { '_', '_' }, { 'a', 'z' } };
static const Rng DIGIT[] = { { '0', '9' } };
static const Rng DOT[] = { { 10, 10 }, { 13, 13 }, { 0x2028, 0x2029 } };

static int cmp_rng(const void *a, const void *b) {
    const Rng *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}
/* sorted, merged, complemented when negated (surrogates left out) */
static void set_norm(Set *s) {
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_rng);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        if (m && s->r[i].lo <= s->r[m - 1].hi + 1) {
            if (s->r[i].hi > s->r[m - 1].hi) s->r[m - 1].hi = s->r[i].hi;
        } else s->r[m++] = s->r[i];
    }
    s->n = m;
    if (s->neg) {
        Set t = { .n = 0 };
        uint32_t at = 0;
        for (int i = 0; i < s->n; i++) {
            if (s->r[i].lo > at) set_add(&t, at, s->r[i].lo - 1);
            at = s->r[i].hi + 1;
        }
        if (at <= MAXCP) set_add(&t, at, MAXCP);
        *s = t;
    }
}
/* s adds the predefined class (upper: its complement) */
static void set_class(Set *s, const Rng *r, int n, int upper) {
    if (!upper) { for (int i = 0; i < n; i++) set_add(s, r[i].lo, r[i].hi); return; }
    uint32_t at = 0;
    for (int i = 0; i < n; i++) { if (r[i].lo > at) set_add(s, at, r[i].lo - 1);
                                  at = r[i].hi + 1; }
    set_add(s, at, MAXCP);
}

static int hexval(int ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}
static uint32_t utf8(Re *x) {
    const unsigned char *u = (const unsigned char *)x->p;
    uint32_t ch = *u++;
    int k = ch < 0x80 ? 0 : ch < 0xe0 ? 1 : ch < 0xf0 ? 2 : 3;
    if (k) ch &= 0x3f >> k;
    for (; k > 0 && *u; k--) ch = ch << 6 | (*u++ & 0x3f);
    x->p = (const char *)u;
    return ch;
}

/* after a backslash: a character (returns it), or a class added to s (returns -2), or -1 */
static long escape(Re *x, Set *s, int in_class) {
    char e = *x->p;
    if (!e) { re_err(x, "a trailing backslash"); return -1; }
    x->p++;
    switch (e) {
    case 'd': case 'D': set_class(s, DIGIT, 1, e == 'D'); return -2;
    case 'w': case 'W': set_class(s, WORD, 4, e == 'W'); return -2;
    case 's': case 'S': set_class(s, SPACE, 10, e == 'S'); return -2;
    case 't': return 9;
    case 'n': return 10;
    case 'v': return 11;
    case 'f': return 12;
    case 'r': return 13;
    case '0': return 0;
    case 'b': if (in_class) return 8;
              re_err(x, "\\b (a word boundary)"); return -1;
    case 'B': re_err(x, "\\B (not a word boundary)"); return -1;
    case 'k': re_err(x, "\\k (a named backreference)"); return -1;
    case 'c': re_err(x, "\\c (a control letter)"); return -1;
    case 'x': case 'u': {
        int n = e == 'x' ? 2 : 4;
        long v = 0;
        for (int i = 0; i < n; i++) {
            int h = hexval((unsigned char)x->p[i]);
            if (h < 0) { re_err(x, e == 'x' ? "\\x without two hex digits"
                                            : "\\u without four hex digits"); return -1; }
            v = v * 16 + h;
        }
        x->p += n;
        if (v >= 0xd800 && v < 0xe000) { re_err(x, "a surrogate \\u escape"); return -1; }
        return v;
    }
    default:
        if (e >= '1' && e <= '9') { re_err(x, "a backreference (\\1...)"); return -1; }
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
            char w[40];
            snprintf(w, sizeof w, "the escape \\%c", e);
            re_err(x, w);
            return -1;
        }
        x->p--;
        return (long)utf8(x);
    }
}

/* the JSON text of code point ch as a GBNF literal */
static void json_char(JscBuf *b, uint32_t ch) {
    static const char SHORT[] = "\b\f\n\r\t", AS[] = "bfnrt";
    char t[8];
    const char *sh = ch && ch < 0x20 ? strchr(SHORT, (int)ch) : NULL;
    if (ch == '"' || ch == '\\') { t[0] = '\\'; t[1] = (char)ch; jsc_lit(b, t, 2); }
    else if (sh) { t[0] = '\\'; t[1] = AS[sh - SHORT]; jsc_lit(b, t, 2); }
    else if (ch < 0x20) { snprintf(t, sizeof t, "\\u%04x", ch); jsc_lit(b, t, 6); }
    else { jsc_add(b, "\""); jsc_cp(b, ch); jsc_add(b, "\""); }
}
/* the set (normalised) as alternatives of JSON text; 0 when it is empty */
static int set_emit(JscBuf *b, const Set *s) {
    JscBuf cls = { 0 }, alt = { 0 };
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        for (uint32_t ch = lo; ch <= hi && ch < 0x20; ch++) {
            if (alt.n) jsc_add(&alt, " | ");
            json_char(&alt, ch);
        }
        if (lo < 0x20) lo = 0x20;
        /* the plain part: without " \ and the surrogates */
        uint32_t cut[][2] = { { '"', '"' }, { '\\', '\\' }, { 0xd800, 0xdfff } };
        for (int k = 0; k < 3 && lo <= hi; k++)
            if (lo <= cut[k][1] && hi >= cut[k][0]) {
                if (k < 2) { if (alt.n) jsc_add(&alt, " | "); json_char(&alt, cut[k][0]); }
                if (lo < cut[k][0]) { jsc_cp(&cls, lo); if (cut[k][0] - 1 > lo) {
                                      jsc_add(&cls, "-"); jsc_cp(&cls, cut[k][0] - 1); } }
                lo = cut[k][1] + 1;
            }
        if (lo <= hi) { jsc_cp(&cls, lo); if (hi > lo) { jsc_add(&cls, "-"); jsc_cp(&cls, hi); } }
    }
    int any = 0;
    jsc_add(b, "(");
    if (cls.n) { jsc_fmt(b, "[%s]", cls.b); any = 1; }
    if (alt.n) { jsc_fmt(b, "%s%s", any ? " | " : "", alt.b); any = 1; }
    jsc_add(b, ")");
    b->oom |= cls.oom || alt.oom;
    free(cls.b); free(alt.b);
    return any;
}

static int alternatives(Re *x, JscBuf *b, int top);

/* one atom and its quantifier; 1 when one was read, 0 at | ) or the end, -1; *empty:
 * it can match empty text */
static int term(Re *x, JscBuf *b, int top, int *empty) {
    JscBuf a = { 0 };
    int nul = 0;
    char ch = *x->p;
    if (!ch || ch == '|' || ch == ')') return 0;
    if (ch == '^' || ch == '$') {
        if (top && ch == '$' && (!x->p[1] || x->p[1] == '|')) return 0;   /* the end: the caller */
        return re_err(x, "'^' or '$' inside the pattern (only at the ends of the top-level "
                      "alternatives)");
    }
    if (ch == '*' || ch == '+' || ch == '?' ) return re_err(x, "a quantifier with nothing "
                                                            "before it");
    if (ch == '(') {
        x->p++;
        if (*x->p == '?') {
            if (x->p[1] == ':') x->p += 2;
            else if (x->p[1] == '<' && x->p[2] != '=' && x->p[2] != '!') {
                const char *e = strchr(x->p, '>');
                if (!e) return re_err(x, "an unclosed group name");
                x->p = e + 1;
            } else return re_err(x, "lookahead or lookbehind ((?=, (?!, (?<=, (?<!)");
        }
        if (++x->depth > 64) return re_err(x, "groups over 64 deep");
        jsc_add(&a, "(");
        if ((nul = alternatives(x, &a, 0)) < 0) { free(a.b); return -1; }
        jsc_add(&a, ")");
        x->depth--;
        if (*x->p != ')') { free(a.b); return re_err(x, "an unclosed group"); }
        x->p++;
    } else if (ch == '[') {
        Set s = { .n = 0 };
        x->p++;
        if (*x->p == '^') { s.neg = 1; x->p++; }
        int first = 1;
        while (*x->p && (*x->p != ']' || first)) {
            long lo, hi;
            first = 0;
            if (*x->p == '\\') { x->p++; lo = escape(x, &s, 1); }
            else lo = (long)utf8(x);
            if (lo == -1) return -1;
            if (lo == -2) continue;
            hi = lo;
            if (x->p[0] == '-' && x->p[1] && x->p[1] != ']') {
                x->p++;
                if (*x->p == '\\') { x->p++; hi = escape(x, &s, 1); }
                else hi = (long)utf8(x);
                if (hi == -1) return -1;
                if (hi == -2 || hi < lo) return re_err(x, "a class range out of order");
            }
            set_add(&s, (uint32_t)lo, (uint32_t)hi);
        }
        if (*x->p != ']') return re_err(x, "an unclosed '['");
        x->p++;
        set_norm(&s);
        if (!set_emit(&a, &s)) { free(a.b); return re_err(x, "a class that matches nothing"); }
    } else {
        Set s = { .n = 0 };
        long c1;
        if (ch == '.') { x->p++; s.neg = 1; set_class(&s, DOT, 3, 0); c1 = -2; }
        else if (ch == '\\') { x->p++; c1 = escape(x, &s, 0); }
        else c1 = (long)utf8(x);
        if (c1 == -1) return -1;
        if (c1 == -2) { set_norm(&s); if (!set_emit(&a, &s)) return re_err(x, "an empty class"); }
        else json_char(&a, (uint32_t)c1);
    }
    /* the quantifier */
    long lo = -1, hi = -1;
    const char *q = x->p;
    if (*q == '*') { lo = 0; hi = -1; q++; }
    else if (*q == '+') { lo = 1; hi = -1; q++; }
    else if (*q == '?') { lo = 0; hi = 1; q++; }
    else if (*q == '{' && q[1] >= '0' && q[1] <= '9') {
        char *e;
        long m = strtol(q + 1, &e, 10), n = m;
        if (*e == ',') { n = e[1] == '}' ? -1 : strtol(e + 1, &e, 10); if (n == -1) e++; }
        if (*e == '}' && (e[-1] >= '0' && e[-1] <= '9' ? 1 : e[-1] == ',')) {
            if (m > JSC_MAX_REPEAT || n > JSC_MAX_REPEAT)
                { free(a.b); return re_err(x, "a repetition count over 1000"); }
            if (n >= 0 && n < m) { free(a.b); return re_err(x, "{m,n} with n < m"); }
            lo = m; hi = n; q = e + 1;
        }
    }
    *empty = nul;
    if (lo >= 0) {
        if (*q == '?') q++;                      /* lazy: the same strings */
        if (nul && (hi < 0 || hi > 1))           /* the engine refuses ("")* */
            { free(a.b); return re_err(x, "a repeated group that can match empty text "
                                       "(such as (a|)* or (b*)+)"); }
        *empty = nul || lo == 0;
        if (*q == '*' || *q == '+' || (*q == '{' && q[1] >= '0' && q[1] <= '9'))
            { free(a.b); return re_err(x, "two quantifiers in a row"); }
        x->p = q;
        if (hi == 0) { jsc_add(b, "\"\""); free(a.b); return 1; }   /* {0}: nothing */
        jsc_add(b, "(");
        jsc_addn(b, a.b, a.n);
        if (lo == 0 && hi < 0) jsc_add(b, ")*");
        else if (lo == 1 && hi < 0) jsc_add(b, ")+");
        else if (lo == 0 && hi == 1) jsc_add(b, ")?");
        else if (hi < 0) jsc_fmt(b, "){%ld,}", lo);
        else jsc_fmt(b, "){%ld,%ld}", lo, hi);
    } else jsc_addn(b, a.b, a.n);
    b->oom |= a.oom;
    free(a.b);
    return 1;
}

/* alt ('|' alt)*; top: the pattern's own alternatives, with their anchors. 1 when one
 * alternative can match empty text, 0 when none, -1 */
static int alternatives(Re *x, JscBuf *b, int top) {
    int nul = 0;
    for (int n = 0;; n++) {
        int all = 1, e = 0;
        if (n) jsc_add(b, " | ");
        int start = top && *x->p == '^', end = 0, terms = 0, t;
        if (start) x->p++;
        if (top && !start) jsc_add(b, "sc* ");
        size_t at = b->n;
        while ((t = term(x, b, top, &e)) > 0) { jsc_add(b, " "); terms++; all &= e; }
        if (t < 0) return -1;
        if (top && *x->p == '$') { end = 1; x->p++; }
        if (!terms && b->n == at) jsc_add(b, "\"\" ");
        if (top && !end) jsc_add(b, "sc*");
        nul |= all;
        if (*x->p != '|') break;
        x->p++;
    }
    return nul;
}

int jsc_pattern(Jsc *c, const char *re, const char *path) {
    Re x = { .p = re, .c = c, .path = path };
    JscBuf b = { 0 };
    if (alternatives(&x, &b, 1) < 0) { free(b.b); return -1; }
    if (*x.p) { free(b.b); return re_err(&x, "an unmatched ')'"); }
    if (b.oom) { free(b.b); return jsc_error(c, "", "out of memory"); }
    int r = jsc_new_rule(c);
    jsc_rule(c, r, b.b);
    free(b.b);
    return r;
}
