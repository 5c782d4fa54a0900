/* json_schema_str.c — strings and numbers for the schema compiler (json_schema_int.h):
 * minLength/maxLength (code points: an escape is one), pattern (json_schema_re.c),
 * format (date, time, date-time, uuid, email, uri, ipv4, hostname: each a grammar of
 * some of the strings the format allows, all of them valid, none of unbounded length:
 * an email of at most 4 dotted atoms of 32 at 4 labels of 63, a uri of at most 6 labels,
 * 8 path segments of 40, a query of 80, a fragment of 40), and integer and number
 * ranges (minimum, maximum, exclusiveMinimum, exclusiveMaximum) written digit by digit. */
#include "json_schema.h"
#include "json_schema_int.h"
#include "json_gram.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rule_text(Jsc *c, const char *t) {
    int r = jsc_new_rule(c);
    jsc_rule(c, r, t);
    return r;
}

/* the content (between the quotes) of each format */
static const char *const FORMAT[][2] = {
    { "date", "year \"-\" (m31 \"-\" (d30 | \"31\") | m30 \"-\" d30 | \"02-\" d28)"
              " | leap \"-02-29\"" },
    { "time", "hms (\".\" [0-9]{1,9})? (\"Z\" | [-+] hh \":\" [0-5] [0-9])" },
    { "date-time", "fdate \"T\" ftime" },
    { "uuid", "hx{8} \"-\" hx{4} \"-\" hx{4} \"-\" hx{4} \"-\" hx{12}" },
    { "email", "atom (\".\" atom){0,3} \"@\" label (\".\" label){1,3}" },
    { "uri", "[a-z] [a-z0-9+.\\x2D]{0,15} \"://\" label (\".\" label){0,5} (\":\" [0-9]{1,5})?"
             " (\"/\" pch{0,40}){0,8} (\"?\" (pch | \"/\" | \"?\"){0,80})?"
             " (\"#\" (pch | \"/\" | \"?\"){0,40})?" },
    { "ipv4", "oct \".\" oct \".\" oct \".\" oct" },
    { "hostname", "(label \".\"){0,2} label" },
};
static const char FORMAT_RULES[] =
    "year ::= [0-9]{4}\n"
    "leap ::= [0-9] [0-9] (\"0\" [48] | [2468] [048] | [13579] [26])"
    " | (\"0\" [048] | [2468] [048] | [13579] [26]) \"00\"\n"
    "m31 ::= \"0\" [13578] | \"1\" [02]\n"
    "m30 ::= \"0\" [469] | \"11\"\n"
    "d28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "d30 ::= d28 | \"29\" | \"30\"\n"
    "hh ::= [01] [0-9] | \"2\" [0-3]\n"
    "hms ::= hh \":\" [0-5] [0-9] \":\" [0-5] [0-9]\n"
    "label ::= [A-Za-z0-9] ([A-Za-z0-9\\x2D]{0,61} [A-Za-z0-9])?\n"
    "pch ::= [A-Za-z0-9._~!$&'()*+,;=:@\\x2D]\n"
    "atom ::= [A-Za-z0-9_+\\x2D]{1,32}\n"
    "oct ::= [0-9] | [1-9] [0-9] | \"1\" [0-9] [0-9] | \"2\" [0-4] [0-9] | \"25\" [0-5]\n";

static int format(Jsc *c, const Json *f, const char *path) {
    int n = (int)(sizeof FORMAT / sizeof *FORMAT);
    for (int i = 0; i < n; i++)
        if (f->type == JSON_STRING && !strcmp(f->str, FORMAT[i][0])) {
            if (!c->fmt) {                      /* the shared rules, once */
                c->fmt = 1;
                jsc_add(&c->out, FORMAT_RULES);
                jsc_fmt(&c->out, "fdate ::= %s\nftime ::= %s\n", FORMAT[0][1], FORMAT[1][1]);
            }
            char t[300];
            snprintf(t, sizeof t, "\"\\\"\" (%s) \"\\\"\"", FORMAT[i][1]);
            return rule_text(c, t);
        }
    char c64[64];
    return jsc_error(c, path, "'format' %s%s%s is not supported (date, time, date-time, "
                     "uuid, email, uri, ipv4, hostname)", f->type == JSON_STRING ? "'" : "",
                     f->type == JSON_STRING ? jsc_clean(f->str, c64) : "(not a string)",
                     f->type == JSON_STRING ? "'" : "");
}

int jsc_string(Jsc *c, const Json *s, const char *path) {
    const Json *pat = json_get(s, "pattern"), *fmt = json_get(s, "format");
    long lo, hi;
    if (jsc_count(c, s, "minLength", 0, &lo, path) ||
        jsc_count(c, s, "maxLength", -1, &hi, path))
        return -1;
    int len = json_get(s, "minLength") || json_get(s, "maxLength");
    if ((pat && fmt) || ((pat || fmt) && len))
        return jsc_error(c, path, "'%s' together with '%s' is not supported", pat ? "pattern"
                         : "format", fmt && pat ? "format" : "minLength'/'maxLength");
    if (fmt) return format(c, fmt, path);
    if (pat) {
        if (pat->type != JSON_STRING || strlen(pat->str) != pat->len)
            return jsc_error(c, path, "'pattern' must be a string");
        int r = jsc_pattern(c, pat->str, path);
        if (r < 0) return r;
        char t[64];
        snprintf(t, sizeof t, "\"\\\"\" r%d \"\\\"\"", r);
        return rule_text(c, t);
    }
    if (hi >= 0 && lo > hi) return JSC_NONE;
    char t[96];
    if (hi < 0) snprintf(t, sizeof t, "\"\\\"\" sc{%ld,} \"\\\"\"", lo);
    else snprintf(t, sizeof t, "\"\\\"\" sc{%ld,%ld} \"\\\"\"", lo, hi);
    return rule_text(c, t);
}

/* ---- integer ranges ---- */
#define INF (-1LL)                               /* an open upper end */
/* decimal strings of x..y, both n digits (x <= y), into b */
static void same_len(JscBuf *b, const char *x, const char *y, int n) {
    if (n == 0) return;
    if (x[0] == y[0]) {
        jsc_fmt(b, "\"%c\"", x[0]);
        if (n > 1) { jsc_add(b, " "); same_len(b, x + 1, y + 1, n - 1); }
        return;
    }
    int lo0 = 1, hi9 = 1;
    for (int i = 1; i < n; i++) { lo0 &= x[i] == '0'; hi9 &= y[i] == '9'; }
    char a = lo0 ? x[0] : (char)(x[0] + 1), z = hi9 ? y[0] : (char)(y[0] - 1);
    int alts = 0;
    jsc_add(b, "(");
    if (!lo0) {
        char nines[24];
        memset(nines, '9', (size_t)n - 1);
        jsc_fmt(b, "\"%c\" (", x[0]); same_len(b, x + 1, nines, n - 1); jsc_add(b, ")");
        alts++;
    }
    if (a <= z) {
        jsc_fmt(b, "%s[%c-%c]", alts++ ? " | " : "", a, z);
        if (n > 1) jsc_fmt(b, " [0-9]{%d}", n - 1);
    }
    if (!hi9) {
        char zeros[24];
        memset(zeros, '0', (size_t)n - 1);
        jsc_fmt(b, "%s\"%c\" (", alts++ ? " | " : "", y[0]);
        same_len(b, zeros, y + 1, n - 1); jsc_add(b, ")");
    }
    jsc_add(b, ")");
}
/* 0 <= a <= b (b INF: no end): the decimal strings, no leading zero */
static void urange(JscBuf *b, long long a, long long z) {
    char x[24], y[24];
    int la = snprintf(x, sizeof x, "%lld", a), alts = 0;
    int lz = z == INF ? JG_MAX_DIGITS : snprintf(y, sizeof y, "%lld", z);
    jsc_add(b, "(");
    for (int n = la; n <= lz && n <= 19; n++) {
        long long p = 1;
        for (int i = 1; i < n; i++) p *= 10;
        long long lo = n == 1 ? 0 : p, hi = n == 19 ? 0x7fffffffffffffffLL : p * 10 - 1;
        if (lo < a) lo = a;
        if (z != INF && hi > z) hi = z;
        if (z == INF && n > la) {                /* every n-digit string, and longer */
            jsc_fmt(b, "%s[1-9] [0-9]{%d,%d}", alts ? " | " : "", n - 1, JG_MAX_DIGITS - 1);
            alts++;
            break;
        }
        if (lo > hi) continue;
        snprintf(x, sizeof x, "%lld", lo);
        snprintf(y, sizeof y, "%lld", hi);
        if (alts++) jsc_add(b, " | ");
        same_len(b, x, y, n);
    }
    jsc_add(b, ")");
}

/* v >= 0 as its integer part and its fraction's digits without trailing zeros, from the
 * shortest decimal that reads back as v (the number the schema wrote); -1 when the
 * fraction would be over 40 digits */
static int dec_parts(double v, long long *ip, char fr[48]) {
    char t[64], dig[24];
    for (int p = 1; p <= 17; p++) {
        snprintf(t, sizeof t, "%.*e", p - 1, v);
        if (strtod(t, NULL) == v) break;
    }
    int nd = 0, e = atoi(strchr(t, 'e') + 1), n = 0;
    for (const char *q = t; *q && *q != 'e'; q++) if (*q >= '0' && *q <= '9') dig[nd++] = *q;
    if (e < -40) return -1;
    *ip = 0;
    for (int i = 0; i <= e; i++) *ip = *ip * 10 + (i < nd ? dig[i] - '0' : 0);
    for (int i = e + 1; i < 0; i++) fr[n++] = '0';
    for (int i = e + 1 > 0 ? e + 1 : 0; i < nd; i++) fr[n++] = dig[i];
    while (n && fr[n - 1] == '0') n--;
    fr[n] = 0;
    return 0;
}

/* The digits F (at least one) of a fraction .F between two bounds, compared digit by
 * digit: L the lower bound's digits still to match (NULL once F is above it; lx: strictly
 * above), H likewise for the upper. 0 when no F fits. */
static int frac(JscBuf *b, const char *L, int lx, const char *H, int hx, int k) {
    if (L && !*L && !lx) L = NULL;               /* >= .000...: anything */
    if (H && !*H) {                              /* <= .000...: zeros only */
        if (hx || L) return 0;
        jsc_add(b, "\"0\"{1,32}");
        return 1;
    }
    if (k > 32) return 0;
    if (L && !*L && !H) { jsc_add(b, "(\"0\"{0,30} [1-9] [0-9]{0,30})"); return 1; }
    if (!L && !H) { jsc_add(b, "[0-9]{1,32}"); return 1; }
    int lo0 = L && *L ? *L - '0' : 0, hi0 = H ? *H - '0' : 9, n = 0;
    int a = L ? lo0 + 1 : lo0, z = H ? hi0 - 1 : hi0;
    jsc_add(b, "(");
    if (a <= z) { jsc_fmt(b, "[%d-%d] [0-9]{0,30}", a, z); n++; }
    for (int t = 0; t < 2; t++) {
        int d = t ? hi0 : lo0;
        if (t ? !H || (L && hi0 == lo0) : !L) continue;
        int tl = L && d == lo0, th = H && d == hi0;
        const char *L2 = tl ? (*L ? L + 1 : L) : NULL, *H2 = th ? H + 1 : NULL;
        int end = (!tl || (!*L2 && !lx)) && (!th || !hx || *H2);
        JscBuf sub = { 0 };
        int more = frac(&sub, L2, lx, H2, hx, k + 1);
        if (more || end) {
            jsc_fmt(b, "%s\"%d\"", n++ ? " | " : "", d);
            if (more) jsc_fmt(b, end ? " (%s)?" : " %s", sub.b);
        }
        b->oom |= sub.oom;
        free(sub.b);
    }
    jsc_add(b, ")");
    return n > 0;
}

/* decimals x (no exponent) with lo <= x <= hi (lx, hx: strictly), 0 <= lo, hi may be
 * infinite: "I", "I.F"; 0 when none */
static int nonneg(JscBuf *b, double lo, int lx, double hi, int hx) {
    long long A, B = 0;
    char al[48], be[48] = "";
    if (dec_parts(lo, &A, al) || (isfinite(hi) && dec_parts(hi, &B, be))) return 0;
    if (isfinite(hi) && (hi < lo || (hi == lo && (lx || hx)))) return 0;
    int n = 0;
    JscBuf f = { 0 };
    if (isfinite(hi) && A == B) {
        int alone = !*al && !lx && !(!*be && hx);
        if (frac(&f, al, lx, be, hx, 0) || alone) {
            jsc_fmt(b, "\"%lld\"", A);
            if (f.n) jsc_fmt(b, alone ? " (\".\" %s)?" : " \".\" %s", f.b);
            n++;
        }
        free(f.b);
        return n;
    }
    int alone = !*al && !lx;                     /* A itself */
    if (frac(&f, al, lx, NULL, 0, 0) || alone) {
        jsc_fmt(b, "\"%lld\"", A);
        if (f.n) jsc_fmt(b, alone ? " (\".\" %s)?" : " \".\" %s", f.b);
        n++;
    }
    free(f.b);
    if (!isfinite(hi) || B > A + 1) {            /* the whole numbers between: any fraction */
        jsc_add(b, n++ ? " | " : "");
        urange(b, A + 1, isfinite(hi) ? B - 1 : INF);
        jsc_fmt(b, " (\".\" [0-9]{1,%d})?", JG_MAX_DIGITS);
    }
    if (isfinite(hi)) {
        JscBuf g = { 0 };
        int ok = frac(&g, NULL, 0, be, hx, 0), balone = !(!*be && hx);
        if (ok || balone) {
            jsc_fmt(b, "%s\"%lld\"", n++ ? " | " : "", B);
            if (g.n) jsc_fmt(b, balone ? " (\".\" %s)?" : " \".\" %s", g.b);
        }
        b->oom |= g.oom;
        free(g.b);
    }
    return n;
}

/* the bound kw of s as a number; draft 4's boolean exclusive forms set *excl */
static int bound(Jsc *c, const Json *s, int upper, double *v, int *excl, const char *path) {
    const Json *m = json_get(s, upper ? "maximum" : "minimum");
    const Json *x = json_get(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
    *excl = 0;
    *v = upper ? INFINITY : -INFINITY;
    if (m && m->type != JSON_NUMBER) return jsc_error(c, path, "'%s' must be a number",
                                                      upper ? "maximum" : "minimum");
    if (m) *v = m->number;
    if (x && x->type == JSON_BOOL) *excl = x->boolean && m;
    else if (x && x->type == JSON_NUMBER) {
        if (upper ? x->number <= *v : x->number >= *v) { *v = x->number; *excl = 1; }
    } else if (x) return jsc_error(c, path, "'%s' must be a number", upper ?
                                   "exclusiveMaximum" : "exclusiveMinimum");
    if (isfinite(*v) && fabs(*v) > 1e18)
        return jsc_error(c, path, "a bound beyond +-1e18 is not supported");
    return 0;
}

int jsc_number(Jsc *c, const Json *s, int integer, const char *path) {
    double lo, hi;
    int xl, xh;
    if (bound(c, s, 0, &lo, &xl, path) || bound(c, s, 1, &hi, &xh, path)) return -1;
    if (isinf(lo) && isinf(hi)) return rule_text(c, integer ? "int" : "number");
    /* the integers in range: [a, z], a/z beyond +-2^62 as open ends */
    const long long OPEN = 1LL << 62;
    long long a = isinf(lo) ? -OPEN : (long long)ceil(lo), z = isinf(hi) ? OPEN
                  : (long long)floor(hi);
    if (xl && (double)a == lo) a++;
    if (xh && (double)z == hi) z--;
    JscBuf b = { 0 };
    int alts = 0;
    if (!integer) {                              /* decimals, exact at both ends */
        if (!(lo >= 0)) {                        /* below zero: "-" and -x in range */
            jsc_add(&b, "\"-\" (");
            if (nonneg(&b, hi < 0 ? -hi : 0, hi < 0 ? xh : 1, -lo, xl)) { alts++;
                                                                        jsc_add(&b, ")"); }
            else b.n = 0;
        }
        if (hi >= 0) {
            size_t at = b.n;
            jsc_add(&b, alts ? " | (" : "(");
            if (nonneg(&b, lo >= 0 ? lo : 0, lo >= 0 ? xl : 0, hi, xh)) { alts++;
                                                                        jsc_add(&b, ")"); }
            else b.n = at;
        }
        if (b.b) b.b[b.n] = 0;
        a = 1; z = 0;                            /* (no integer part below) */
    }
    if (a < 0 && z >= a) {                       /* -|z'| .. -|a| */
        jsc_add(&b, "\"-\" ");
        urange(&b, z < 0 ? -z : 1, a == -OPEN ? INF : -a);
        alts++;
    }
    if (z >= 0 && z >= a) {
        jsc_add(&b, alts++ ? " | " : "");
        urange(&b, a > 0 ? a : 0, z == OPEN ? INF : z);
    }
    if (!alts) { free(b.b); return JSC_NONE; }
    if (b.oom) { free(b.b); return jsc_error(c, "", "out of memory"); }
    int r = rule_text(c, b.b);
    free(b.b);
    return r;
}
