/* grammar_parse.c — GBNF text to rules (include/grammar.h states the notation, the
 * errors and the limits; src/text/grammar_ir.h the form). A recursive descent over the
 * text; repetitions become rules (x* is R ::= x R | "", x{m,n} m copies of x then n - m
 * nested optionals), so the recogniser knows only terminals, rule references and ends.
 * After parsing: every referenced rule defined, root present, and no left recursion (the
 * recogniser expands rule references eagerly, so a rule that reaches itself before any
 * code point would loop). */
#include "grammar.h"
#include "grammar_ir.h"
#include "util.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ELEMS (1 << 20)       /* elements after expanding repetitions */
#define MAX_NEST 200              /* groups inside groups */

typedef struct { GrElem *v; int n, cap; } Ev;

typedef struct {
    const char *s, *p, *end;
    const char *lp; int line, col;          /* the last position located */
    GrGrammar *g;
    Ev *body; int cap_rule;                 /* body[r]: alternatives split by GE_END */
    int *use_line, *use_col, *defined;      /* named rules: first use, defined? */
    int *ht; int htcap;                     /* named rules by name */
    long total;
    int nest;
    char *err; size_t errlen; int failed;
} P;

static void locate(P *q, const char *at, int *line, int *col) {
    if (at < q->lp) { q->lp = q->s; q->line = 1; q->col = 1; }
    for (; q->lp < at; q->lp++) {
        if (*q->lp == '\n') { q->line++; q->col = 1; }
        else if (((unsigned char)*q->lp & 0xC0) != 0x80) q->col++;
    }
    *line = q->line; *col = q->col;
}

static int fail_at(P *q, const char *at, const char *fmt, ...) {
    if (q->failed) return -1;
    q->failed = 1;
    int line, col;
    locate(q, at, &line, &col);
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(q->err, q->errlen, "grammar %d:%d: %s", line, col, msg);
    return -1;
}

/* What is at p, for messages: a printable character quoted, else its name. */
static const char *what(const P *q, const char *p, char buf[16]) {
    if (p >= q->end) return "the end of the text";
    unsigned char c = (unsigned char)*p;
    if (c == '\n') return "a newline";
    if (c >= 0x21 && c < 0x7F) { snprintf(buf, 16, "'%c'", c); return buf; }
    snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

static int peek(const P *q) { return q->p < q->end ? (unsigned char)*q->p : -1; }
static int word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* Spaces, tabs, CRs and comments; newlines too when nested (inside a group, after '|'). */
static void space(P *q, int nested) {
    while (q->p < q->end) {
        int c = (unsigned char)*q->p;
        if (c == ' ' || c == '\t' || c == '\r' || (nested && c == '\n')) q->p++;
        else if (c == '#') while (q->p < q->end && *q->p != '\n') q->p++;
        else break;
    }
}

static int push(P *q, Ev *e, uint32_t type, uint32_t arg) {
    if (++q->total > MAX_ELEMS)
        return fail_at(q, q->p, "the grammar is too large (over %d elements once "
                       "repetitions are expanded): lower the repetition counts", MAX_ELEMS);
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 8;
        e->v = xrealloc(e->v, sizeof *e->v * (size_t)e->cap);
    }
    e->v[e->n++] = (GrElem){ type, arg };
    return 0;
}

static int new_rule(P *q, int kind, const char *at) {
    GrGrammar *g = q->g;
    if (g->nrule == q->cap_rule) {
        int c = q->cap_rule ? q->cap_rule * 2 : 16;
        g->rule = xrealloc(g->rule, sizeof *g->rule * (size_t)c);
        q->body = xrealloc(q->body, sizeof *q->body * (size_t)c);
        q->use_line = xrealloc(q->use_line, sizeof(int) * (size_t)c);
        q->use_col = xrealloc(q->use_col, sizeof(int) * (size_t)c);
        q->defined = xrealloc(q->defined, sizeof(int) * (size_t)c);
        q->cap_rule = c;
    }
    int r = g->nrule++;
    memset(&g->rule[r], 0, sizeof g->rule[r]);
    g->rule[r].kind = kind;
    locate(q, at, &g->rule[r].line, &g->rule[r].col);
    q->body[r] = (Ev){ 0 };
    q->defined[r] = kind != 0;
    q->use_line[r] = q->use_col[r] = 0;
    return r;
}

static uint32_t hash_name(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The named rule s[0..n), created (undefined) on first mention. */
static int named(P *q, const char *s, size_t n) {
    GrGrammar *g = q->g;
    if (2 * (g->nrule + 1) > q->htcap) {                    /* grow and rehash */
        int c = q->htcap ? q->htcap * 2 : 64;
        free(q->ht);
        q->ht = xmalloc(sizeof(int) * (size_t)c);
        for (int i = 0; i < c; i++) q->ht[i] = -1;
        q->htcap = c;
        for (int r = 0; r < g->nrule; r++) {
            if (g->rule[r].kind) continue;
            uint32_t h = hash_name(g->rule[r].name, strlen(g->rule[r].name));
            while (q->ht[h & (uint32_t)(c - 1)] >= 0) h++;
            q->ht[h & (uint32_t)(c - 1)] = r;
        }
    }
    uint32_t h = hash_name(s, n);
    for (;; h++) {
        int r = q->ht[h & (uint32_t)(q->htcap - 1)];
        if (r < 0) break;
        if (strlen(g->rule[r].name) == n && !memcmp(g->rule[r].name, s, n)) return r;
    }
    int r = new_rule(q, 0, s);
    q->defined[r] = 0;
    g->rule[r].name = xmalloc(n + 1);
    memcpy(g->rule[r].name, s, n);
    g->rule[r].name[n] = 0;
    q->ht[h & (uint32_t)(q->htcap - 1)] = r;
    return r;
}

static int hex(P *q, const char *at, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int c = peek(q), d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ?
                c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail_at(q, q->p, "expected %d hex digits after '%.2s'", digits, at);
        v = v * 16 + (uint32_t)d;
        q->p++;
    }
    *out = v;
    return 0;
}

/* One code point of a literal or class: an escape or a UTF-8 character. */
static int one_char(P *q, uint32_t *out) {
    const char *at = q->p;
    int c = peek(q);
    if (c == '\\') {
        q->p++;
        int e = peek(q);
        q->p++;
        switch (e) {
        case 'n': *out = '\n'; return 0;
        case 'r': *out = '\r'; return 0;
        case 't': *out = '\t'; return 0;
        case '\\': case '"': case '[': case ']': case '-': *out = (uint32_t)e; return 0;
        case 'x': if (hex(q, at, 2, out)) return -1; break;
        case 'u': if (hex(q, at, 4, out)) return -1; break;
        case 'U': if (hex(q, at, 8, out)) return -1; break;
        default:
            q->p--;
            return fail_at(q, at, "unknown escape: expected one of \\n \\r \\t \\\\ \\\" \\[ "
                           "\\] \\- \\xHH \\uHHHH \\UHHHHHHHH after '\\'");
        }
        if (*out > 0x10FFFF || (*out >= 0xD800 && *out <= 0xDFFF))
            return fail_at(q, at, "escape %.*s is not a Unicode scalar value",
                           (int)(q->p - at), at);
        return 0;
    }
    if (c < 0x80) { *out = (uint32_t)c; q->p++; return 0; }
    int n = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : -1;
    uint32_t v = (uint32_t)c & (n == 3 ? 0x07 : n == 2 ? 0x0F : 0x1F);
    const char *p = q->p + 1;
    for (int i = 0; i < n; i++, p++) {
        if (p >= q->end || ((unsigned char)*p & 0xC0) != 0x80) { n = -1; break; }
        v = v << 6 | ((unsigned char)*p & 0x3F);
    }
    if (n < 0 || (n == 2 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) ||
        (n == 3 && (v < 0x10000 || v > 0x10FFFF)))
        return fail_at(q, at, "invalid UTF-8 in the grammar text");
    q->p = p;
    *out = v;
    return 0;
}

static int cmp_rng(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* [ranges] or [^ranges] after '[': a set, ranges sorted and merged. */
static int char_class(P *q, const char *open, int *set) {
    GrGrammar *g = q->g;
    int neg = peek(q) == '^';
    if (neg) q->p++;
    uint32_t *r = NULL;
    int n = 0, cap = 0;
    while (peek(q) != ']') {
        if (q->p >= q->end) {
            int line, col;
            free(r);
            locate(q, open, &line, &col);
            return fail_at(q, q->p, "expected ']' to close the class opened at %d:%d",
                           line, col);
        }
        uint32_t lo, hi;
        if (one_char(q, &lo)) { free(r); return -1; }
        hi = lo;
        if (peek(q) == '-' && q->p + 1 < q->end && q->p[1] != ']') {
            const char *at = q->p;
            q->p++;
            if (one_char(q, &hi)) { free(r); return -1; }
            if (hi < lo) { free(r); return fail_at(q, at, "the range ends below its start"); }
        }
        if (n == cap) { cap = cap ? cap * 2 : 8; r = xrealloc(r, sizeof *r * 2 * (size_t)cap); }
        r[2 * n] = lo; r[2 * n + 1] = hi; n++;
    }
    q->p++;
    if (n) qsort(r, (size_t)n, 2 * sizeof *r, cmp_rng);
    int m = 0;
    for (int i = 0; i < n; i++) {                          /* merge overlapping, adjacent */
        if (m && r[2 * i] <= r[2 * m - 1] + 1) {
            if (r[2 * i + 1] > r[2 * m - 1]) r[2 * m - 1] = r[2 * i + 1];
        } else { r[2 * m] = r[2 * i]; r[2 * m + 1] = r[2 * i + 1]; m++; }
    }
    if ((!neg && !m) || (neg && m == 1 && r[0] == 0 && r[1] >= 0x10FFFF)) {
        free(r);                       /* a parse would stop there with no way on */
        return fail_at(q, open, "the class matches no character");
    }
    g->rng = xrealloc(g->rng, sizeof *g->rng * 2 * (size_t)(g->nrng + m + 1));
    if (m) memcpy(g->rng + 2 * g->nrng, r, sizeof *r * 2 * (size_t)m);
    free(r);
    g->set = xrealloc(g->set, sizeof *g->set * (size_t)(g->nset + 1));
    g->set[g->nset] = (GrSet){ g->nrng, m, neg };
    g->nrng += m;
    *set = g->nset++;
    return 0;
}

static int alternates(P *q, int r, int nested);

/* A repetition operator at q->p applied to body[r].v[start..n). */
static int repeat(P *q, int r, int start) {
    const char *at = q->p;
    long lo = 0, hi = -1;
    int c = peek(q);
    q->p++;
    if (c == '+') lo = 1;
    else if (c == '?') hi = 1;
    else if (c == '{') {
        space(q, 1);
        int any = 0;
        for (lo = 0; peek(q) >= '0' && peek(q) <= '9'; q->p++, any = 1)
            if ((lo = lo * 10 + (*q->p - '0')) > GR_MAX_REP)
                return fail_at(q, at, "repetition count over the limit of %d", GR_MAX_REP);
        space(q, 1);
        if (peek(q) == ',') {
            q->p++;
            space(q, 1);
            if (peek(q) >= '0' && peek(q) <= '9')
                for (hi = 0; peek(q) >= '0' && peek(q) <= '9'; q->p++)
                    if ((hi = hi * 10 + (*q->p - '0')) > GR_MAX_REP)
                        return fail_at(q, at, "repetition count over the limit of %d",
                                       GR_MAX_REP);
            space(q, 1);
        } else if (!any) {
            return fail_at(q, q->p, "expected a count in {m}, {m,}, {m,n} or {,n}");
        } else hi = lo;
        if (peek(q) != '}') {
            char b[16];
            return fail_at(q, q->p, "expected '}' to close the repetition, found %s",
                           what(q, q->p, b));
        }
        q->p++;
        if (hi >= 0 && hi < lo) return fail_at(q, at, "repetition {m,n} with n below m");
    }
    Ev *e = &q->body[r];
    if (e->n == start) return 0;                           /* ""* is "" */
    if (e->n - start > 1) {                                /* one item: wrap a sequence */
        int w = new_rule(q, 2, at);
        e = &q->body[r];
        for (int i = start; i < e->n; i++)
            if (push(q, &q->body[w], e->v[i].type, e->v[i].arg)) return -1;
        e->n = start;
        if (push(q, &q->body[w], GE_END, 0) || push(q, e, GE_REF, (uint32_t)w)) return -1;
    }
    GrElem x = e->v[start];
    e->n = start;
    for (long i = 0; i < lo; i++) if (push(q, &q->body[r], x.type, x.arg)) return -1;
    if (hi < 0) {                                          /* R ::= x R | "" */
        int R = new_rule(q, 2, at);
        if (push(q, &q->body[R], x.type, x.arg) || push(q, &q->body[R], GE_REF, (uint32_t)R) ||
            push(q, &q->body[R], GE_END, 0) || push(q, &q->body[R], GE_END, 0) ||
            push(q, &q->body[r], GE_REF, (uint32_t)R))
            return -1;
    } else if (hi > lo) {                                  /* O_i ::= x O_i+1 | "" */
        int next = -1;
        for (long i = hi - lo; i > 0; i--) {
            int o = new_rule(q, 2, at);
            if (push(q, &q->body[o], x.type, x.arg) ||
                (next >= 0 && push(q, &q->body[o], GE_REF, (uint32_t)next)) ||
                push(q, &q->body[o], GE_END, 0) || push(q, &q->body[o], GE_END, 0))
                return -1;
            next = o;
        }
        if (push(q, &q->body[r], GE_REF, (uint32_t)next)) return -1;
    }
    return 0;
}

/* Items of one alternative into body[r], until something that is not an item. */
static int sequence(P *q, int r, int nested) {
    for (;;) {
        int start = q->body[r].n, c = peek(q);
        const char *at = q->p;
        if (c == '"') {
            q->p++;
            while (peek(q) != '"') {
                if (q->p >= q->end) return fail_at(q, at, "unterminated string literal");
                uint32_t cp;
                if (one_char(q, &cp) || push(q, &q->body[r], GE_CP, cp)) return -1;
            }
            q->p++;
        } else if (c == '[') {
            int set = 0;
            q->p++;
            if (char_class(q, at, &set) || push(q, &q->body[r], GE_SET, (uint32_t)set))
                return -1;
        } else if (c == '.') {
            q->p++;
            if (push(q, &q->body[r], GE_ANY, 0)) return -1;
        } else if (c >= 0 && word(c)) {
            while (q->p < q->end && word((unsigned char)*q->p)) q->p++;
            int ref = named(q, at, (size_t)(q->p - at));
            if (!q->defined[ref] && !q->use_line[ref])
                locate(q, at, &q->use_line[ref], &q->use_col[ref]);
            if (push(q, &q->body[r], GE_REF, (uint32_t)ref)) return -1;
        } else if (c == '(') {
            if (++q->nest > MAX_NEST)
                return fail_at(q, at, "groups nested deeper than %d", MAX_NEST);
            q->p++;
            space(q, 1);
            int grp = new_rule(q, 1, at);
            if (alternates(q, grp, 1)) return -1;
            if (peek(q) != ')') {
                char b[16];
                int line, col;
                locate(q, at, &line, &col);
                return fail_at(q, q->p, "expected ')' to close the group opened at %d:%d, "
                               "found %s", line, col, what(q, q->p, b));
            }
            q->p++;
            q->nest--;
            if (push(q, &q->body[r], GE_REF, (uint32_t)grp)) return -1;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            return fail_at(q, at, "'%c' with nothing before it to repeat", c);
        } else {
            return 0;
        }
        space(q, nested);
        while ((c = peek(q)) == '*' || c == '+' || c == '?' || c == '{') {
            if (repeat(q, r, start)) return -1;
            space(q, nested);
        }
    }
}

static int alternates(P *q, int r, int nested) {
    if (sequence(q, r, nested)) return -1;
    while (peek(q) == '|') {
        if (push(q, &q->body[r], GE_END, 0)) return -1;
        q->p++;
        space(q, 1);
        if (sequence(q, r, nested)) return -1;
    }
    return push(q, &q->body[r], GE_END, 0);
}

static int rule(P *q) {
    const char *at = q->p;
    char b[16];
    while (q->p < q->end && word((unsigned char)*q->p)) q->p++;
    if (q->p == at) return fail_at(q, at, "expected a rule name, found %s", what(q, at, b));
    size_t n = (size_t)(q->p - at);
    int r = named(q, at, n);
    if (q->defined[r])
        return fail_at(q, at, "rule '%s' is defined twice (first at %d:%d)",
                       q->g->rule[r].name, q->g->rule[r].line, q->g->rule[r].col);
    q->defined[r] = 1;
    locate(q, at, &q->g->rule[r].line, &q->g->rule[r].col);
    space(q, 0);
    if (q->end - q->p < 3 || memcmp(q->p, "::=", 3))
        return fail_at(q, q->p, "expected '::=' after the rule name '%s', found %s",
                       q->g->rule[r].name, what(q, q->p, b));
    q->p += 3;
    space(q, 1);
    if (alternates(q, r, 0)) return -1;
    if (q->p < q->end && *q->p != '\n')
        return fail_at(q, q->p, "expected an item, '|' or the end of the line, found %s",
                       what(q, q->p, b));
    return 0;
}

static int check(P *q);

GrGrammar *gr_parse(const char *text, size_t n, char *err, size_t errlen) {
    if (n > GR_MAX_TEXT) {
        snprintf(err, errlen, "grammar: %zu bytes, over the limit of %d", n, GR_MAX_TEXT);
        return NULL;
    }
    P q = { .s = text, .p = text, .end = text + n, .lp = text, .line = 1, .col = 1,
            .err = err, .errlen = errlen };
    q.g = xcalloc(1, sizeof *q.g);
    q.g->root = -1;
    int rc = 0;
    space(&q, 1);
    while (!rc && q.p < q.end) {
        rc = rule(&q);
        space(&q, 1);
    }
    if (!rc) rc = check(&q);
    GrGrammar *g = q.g;
    if (!rc) {                                        /* flatten the bodies */
        for (int r = 0; r < g->nrule; r++) g->nel += q.body[r].n, g->nalt += q.body[r].n;
        g->el = xmalloc(sizeof *g->el * (size_t)(g->nel + 1));
        g->alt = xmalloc(sizeof *g->alt * (size_t)(g->nalt + 1));
        g->nel = g->nalt = 0;
        for (int r = 0; r < g->nrule; r++) {
            Ev *e = &q.body[r];
            g->rule[r].alt0 = g->nalt;
            for (int i = 0; i < e->n; i++) {
                if (i == 0 || e->v[i - 1].type == GE_END) g->alt[g->nalt++] = g->nel;
                g->el[g->nel++] = e->v[i];
            }
            g->rule[r].nalt = g->nalt - g->rule[r].alt0;
        }
    }
    for (int r = 0; r < g->nrule; r++) free(q.body[r].v);
    free(q.body); free(q.use_line); free(q.use_col); free(q.defined); free(q.ht);
    if (rc) { gr_free(g); return NULL; }
    return g;
}

static const char *rule_desc(const GrGrammar *g, int r, char *b, size_t n) {
    const GrRule *u = &g->rule[r];
    if (u->kind == 0) snprintf(b, n, "rule '%s' (%d:%d)", u->name, u->line, u->col);
    else snprintf(b, n, "the %s at %d:%d", u->kind == 1 ? "group" : "repetition", u->line,
                  u->col);
    return b;
}

/* Undefined rules, root, and left recursion: the rules that may match empty text
 * (nullable, by counting down each alternative's references as rules become nullable),
 * then a depth-first search of "r may begin with s" for a cycle. */
static int check(P *q) {
    GrGrammar *g = q->g;
    char b[160];
    for (int r = 0; r < g->nrule; r++)
        if (!q->defined[r]) {
            q->failed = 1;
            snprintf(q->err, q->errlen, "grammar %d:%d: rule '%s' is used but never defined",
                     q->use_line[r], q->use_col[r], g->rule[r].name);
            return -1;
        }
    for (int r = 0; r < g->nrule && g->root < 0; r++)
        if (g->rule[r].kind == 0 && !strcmp(g->rule[r].name, "root")) g->root = r;
    if (g->root < 0) {
        snprintf(q->err, q->errlen, "grammar: no rule named 'root' (the start rule)");
        return -1;
    }
    int nr = g->nrule, na = 0;
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < q->body[r].n; i++) na += q->body[r].v[i].type == GE_END;
    int *cnt = xcalloc((size_t)na + 1, sizeof *cnt), *arule = xmalloc(sizeof(int) * (na + 1));
    int *occn = xcalloc((size_t)nr + 1, sizeof *occn), *nul = xcalloc((size_t)nr, sizeof *nul);
    int *queue = xmalloc(sizeof(int) * (size_t)(nr + 1)), qh = 0, qt = 0;
    for (int r = 0, a = 0; r < nr; r++)                   /* references per alternative */
        for (int i = 0; i < q->body[r].n; i++) {
            GrElem e = q->body[r].v[i];
            arule[a] = r;
            if (e.type == GE_END) a++;
            else if (e.type != GE_REF) cnt[a] = 1 << 30;
            else { cnt[a]++; occn[e.arg + 1]++; }
        }
    for (int r = 0; r < nr; r++) occn[r + 1] += occn[r];
    int *occ = xmalloc(sizeof(int) * (size_t)(occn[nr] + 1)), *fill = xcalloc(nr, sizeof(int));
    for (int r = 0, a = 0; r < nr; r++)
        for (int i = 0; i < q->body[r].n; i++) {
            GrElem e = q->body[r].v[i];
            if (e.type == GE_END) a++;
            else if (e.type == GE_REF) occ[occn[e.arg] + fill[e.arg]++] = a;
        }
    for (int a = 0; a < na; a++)
        if (!cnt[a] && !nul[arule[a]]) { nul[arule[a]] = 1; queue[qt++] = arule[a]; }
    while (qh < qt) {
        int r = queue[qh++];
        for (int k = occn[r]; k < occn[r + 1]; k++)
            if (--cnt[occ[k]] == 0 && !nul[arule[occ[k]]]) {
                nul[arule[occ[k]]] = 1;
                queue[qt++] = arule[occ[k]];
            }
    }
    /* edges r -> s: s referenced after only nullable elements in an alternative of r */
    int *en = xcalloc((size_t)nr + 1, sizeof *en), ne = 0;
    for (int pass = 0; pass < 2; pass++) {
        int *to = pass ? occ : NULL;
        if (pass) { for (int r = 0; r < nr; r++) en[r + 1] += en[r]; memset(fill, 0,
                    sizeof(int) * nr); occ = xrealloc(occ, sizeof(int) * (ne + 1)); to = occ; }
        for (int r = 0; r < nr; r++) {
            int lead = 1;
            for (int i = 0; i < q->body[r].n; i++) {
                GrElem e = q->body[r].v[i];
                if (e.type == GE_END) { lead = 1; continue; }
                if (!lead) continue;
                if (e.type != GE_REF) { lead = 0; continue; }
                if (pass) to[en[r] + fill[r]++] = (int)e.arg;
                else { en[r + 1]++; ne++; }
                if (!nul[e.arg]) lead = 0;
            }
        }
    }
    int *color = nul, *it = cnt, bad = -1;          /* reuse: 0 new, 2 on path, 3 done */
    memset(color, 0, sizeof(int) * nr);
    for (int s0 = 0; s0 < nr && bad < 0; s0++) {
        if (color[s0]) continue;
        int top = 0;
        queue[top++] = s0; color[s0] = 2; it[s0] = en[s0];
        while (top && bad < 0) {
            int r = queue[top - 1];
            if (it[r] == en[r + 1]) { color[r] = 3; top--; continue; }
            int s = occ[it[r]++];
            if (color[s] == 2) bad = s;
            else if (!color[s]) { color[s] = 2; it[s] = en[s]; queue[top++] = s; }
        }
    }
    free(cnt); free(arule); free(occn); free(nul); free(queue); free(occ); free(fill); free(en);
    if (bad >= 0) {
        q->failed = 1;
        const GrRule *u = &g->rule[bad];
        if (u->kind == 2)
            snprintf(q->err, q->errlen, "grammar %d:%d: the repetition repeats something that "
                     "can match empty text (left recursion): make the item non-empty",
                     u->line, u->col);
        else
            snprintf(q->err, q->errlen, "grammar %d:%d: %s is left-recursive: it can reach "
                     "itself before matching any character; rewrite it with a repetition",
                     u->line, u->col, rule_desc(g, bad, b, sizeof b));
        return -1;
    }
    return 0;
}

GrGrammar *gr_parse_file(const char *path, char *err, size_t errlen) {
    size_t n;
    char *t = k3_slurp(path, GR_MAX_TEXT, &n, err, errlen);
    if (!t) return NULL;
    char e[400];
    GrGrammar *g = gr_parse(t, n, e, sizeof e);
    free(t);
    if (!g) snprintf(err, errlen, "%s: %s", path, e);
    return g;
}

void gr_free(GrGrammar *g) {
    if (!g) return;
    for (int r = 0; r < g->nrule; r++) free(g->rule[r].name);
    free(g->rule); free(g->el); free(g->alt); free(g->rng); free(g->set);
    free(g);
}

int gr_n_rules(const GrGrammar *g) { return g->nrule; }

static int in_set(const GrGrammar *g, const GrSet *s, uint32_t lo, uint32_t hi, int all) {
    /* all: [lo, hi] inside one range; else: [lo, hi] meets some range */
    int a = 0, b = s->n;
    const uint32_t *r = g->rng + 2 * s->first;
    while (a < b) {                                   /* first range ending at or after lo */
        int m = (a + b) / 2;
        if (r[2 * m + 1] < lo) a = m + 1; else b = m;
    }
    if (a == s->n) return 0;
    return all ? r[2 * a] <= lo && hi <= r[2 * a + 1] : r[2 * a] <= hi;
}

int gr_elem_range(const GrGrammar *g, const GrElem *e, uint32_t lo, uint32_t hi) {
    if (lo < 0xE000 && hi >= 0xD800) {                /* skip the surrogates */
        if (lo < 0xD800 && gr_elem_range(g, e, lo, 0xD7FF)) return 1;
        if (hi < 0xE000) return 0;
        lo = 0xE000;
    }
    if (lo > hi) return 0;
    switch (e->type) {
    case GE_CP: return lo <= e->arg && e->arg <= hi;
    case GE_ANY: return 1;
    case GE_SET: {
        const GrSet *s = &g->set[e->arg];
        return s->neg ? !in_set(g, s, lo, hi, 1) : in_set(g, s, lo, hi, 0);
    }
    }
    return 0;
}

int gr_elem_match(const GrGrammar *g, const GrElem *e, uint32_t c) {
    if (e->type == GE_CP) return e->arg == c;
    if (e->type == GE_ANY) return 1;
    if (e->type != GE_SET) return 0;
    const GrSet *s = &g->set[e->arg];
    return in_set(g, s, c, c, 0) != s->neg;
}
