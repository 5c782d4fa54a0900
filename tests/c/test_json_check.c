/* test_json_check.c — an independent checker for JSON mode's replies (tests/sh/json_mode.sh):
 * its own parser written from RFC 8259 (not src/io/json.c, not the validator under test,
 * src/text/json_gram.c) and the test schema's rules written out by hand from JSON Schema.
 *   test_json_check                 self-test on fixed documents (make test)
 *   test_json_check schema|object FILE
 *                                   FILE: one server reply a line; the reply's content
 *                                   (chat) or text (completions) must parse whole, as an
 *                                   object matching tests/sh/json_mode.sh's schema (schema)
 *                                   or as any object (object). Exit 1 naming the line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct V { int t; double num; int is_int; char *s; size_t n; struct V **kid;
                   char **key; size_t nk; } V;      /* t: 'o' 'a' 's' 'n' 'b' 'z' (null) */
static const char *p, *e;
static int bad;

static void ws(void) { while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++; }
static V *val(int depth);
static V *mk(int t) { V *v = calloc(1, sizeof *v); v->t = t; return v; }
static void put(char **s, size_t *n, unsigned c) {
    *s = realloc(*s, *n + 2);
    (*s)[(*n)++] = (char)c;
}
static void utf8(char **s, size_t *n, unsigned cp) {
    if (cp < 0x80) put(s, n, cp);
    else if (cp < 0x800) { put(s, n, 0xC0 | cp >> 6); put(s, n, 0x80 | (cp & 63)); }
    else if (cp < 0x10000) { put(s, n, 0xE0 | cp >> 12); put(s, n, 0x80 | (cp >> 6 & 63));
                             put(s, n, 0x80 | (cp & 63)); }
    else { put(s, n, 0xF0 | cp >> 18); put(s, n, 0x80 | (cp >> 12 & 63));
           put(s, n, 0x80 | (cp >> 6 & 63)); put(s, n, 0x80 | (cp & 63)); }
}
static int hex4(unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++, p++) {
        if (p >= e) return -1;
        int c = *p, d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 87 :
                        c >= 'A' && c <= 'F' ? c - 55 : -1;
        if (d < 0) return -1;
        v = v * 16 + (unsigned)d;
    }
    *out = v;
    return 0;
}
/* RFC 8259 §7 and RFC 3629: a string, p after the opening quote */
static V *str(void) {
    V *v = mk('s');
    v->s = calloc(1, 1);
    while (p < e && *p != '"') {
        unsigned char c = (unsigned char)*p++;
        if (c < 0x20) { bad = 1; return v; }
        if (c == '\\') {
            if (p >= e) { bad = 1; return v; }
            char x = *p++;
            const char *m = strchr("\"\\/bfnrt", x), *r = "\"\\/\b\f\n\r\t";
            if (x && m) { put(&v->s, &v->n, (unsigned char)r[m - "\"\\/bfnrt"]); continue; }
            unsigned cp, lo;
            if (x != 'u' || hex4(&cp)) { bad = 1; return v; }
            if (cp >= 0xDC00 && cp <= 0xDFFF) { bad = 1; return v; }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (e - p < 2 || p[0] != '\\' || p[1] != 'u') { bad = 1; return v; }
                p += 2;
                if (hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) { bad = 1; return v; }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            utf8(&v->s, &v->n, cp);
            continue;
        }
        int k = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 :
                c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (k < 0 || e - p < k) { bad = 1; return v; }
        unsigned cp = k ? c & (0x3F >> k) : c;
        for (int i = 0; i < k; i++) {
            unsigned char d = (unsigned char)p[i];
            if ((d & 0xC0) != 0x80) { bad = 1; return v; }
            cp = cp << 6 | (d & 63);
        }
        if ((k == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 3 && (cp < 0x10000 || cp > 0x10FFFF))) { bad = 1; return v; }
        put(&v->s, &v->n, c);
        for (int i = 0; i < k; i++) put(&v->s, &v->n, (unsigned char)*p++);
    }
    if (p >= e) { bad = 1; return v; }
    p++;
    v->s[v->n] = 0;
    return v;
}
static int digits(void) {
    const char *a = p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    return p > a;
}
static V *num(void) {
    const char *a = p;
    V *v = mk('n');
    v->is_int = 1;
    if (*p == '-') p++;
    if (p < e && *p == '0') p++;
    else if (!(p < e && *p >= '1' && *p <= '9') || !digits()) { bad = 1; return v; }
    if (p < e && *p == '.') { p++; v->is_int = 0; if (!digits()) { bad = 1; return v; } }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++; v->is_int = 0;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (!digits()) { bad = 1; return v; }
    }
    char t[64];
    snprintf(t, sizeof t, "%.*s", (int)(p - a), a);
    v->num = strtod(t, NULL);
    return v;
}
static V *val(int depth) {
    ws();
    if (p >= e || depth > 100) { bad = 1; return mk('z'); }
    const char *w[] = { "true", "false", "null" };
    for (int i = 0; i < 3; i++)
        if ((size_t)(e - p) >= strlen(w[i]) && !memcmp(p, w[i], strlen(w[i]))) {
            p += strlen(w[i]);
            V *v = mk(i < 2 ? 'b' : 'z');
            v->num = i == 0;
            return v;
        }
    if (*p == '"') { p++; return str(); }
    if (*p == '-' || (*p >= '0' && *p <= '9')) return num();
    if (*p != '{' && *p != '[') { bad = 1; return mk('z'); }
    V *v = mk(*p == '{' ? 'o' : 'a');
    char close = *p == '{' ? '}' : ']';
    p++; ws();
    if (p < e && *p == close) { p++; return v; }
    for (;;) {
        v->kid = realloc(v->kid, sizeof *v->kid * (v->nk + 1));
        v->key = realloc(v->key, sizeof *v->key * (v->nk + 1));
        v->key[v->nk] = NULL;
        if (v->t == 'o') {
            ws();
            if (p >= e || *p != '"') { bad = 1; return v; }
            p++;
            V *k = str();
            v->key[v->nk] = k->s;
            ws();
            if (p >= e || *p != ':') { bad = 1; return v; }
            p++;
        }
        v->kid[v->nk++] = val(depth + 1);
        if (bad) return v;
        ws();
        if (p < e && *p == ',') { p++; continue; }
        if (p < e && *p == close) { p++; return v; }
        bad = 1;
        return v;
    }
}
/* the whole of s[0..n) as one JSON text; NULL when it is not */
static V *parse(const char *s, size_t n) {
    p = s; e = s + n; bad = 0;
    V *v = val(0);
    ws();
    return bad || p != e ? NULL : v;
}
static const V *get(const V *o, const char *k) {
    for (size_t i = 0; i < o->nk; i++) if (!strcmp(o->key[i], k)) return o->kid[i];
    return NULL;
}
static size_t cps(const V *s) {                         /* code points */
    size_t c = 0;
    for (size_t i = 0; i < s->n; i++) c += ((unsigned char)s->s[i] & 0xC0) != 0x80;
    return c;
}
/* tests/sh/json_mode.sh's schema, by hand: an object with "n" (integer) and "c" (one of
 * "x", "yy", 3) required; optional "b" (boolean), "s" (string of at most 5 code points),
 * "l" (an array of 1 or 2 nulls); no other key, none twice */
static const char *schema_ok(const V *v) {
    if (v->t != 'o') return "not an object";
    for (size_t i = 0; i < v->nk; i++) {
        const char *k = v->key[i];
        for (size_t j = 0; j < i; j++) if (!strcmp(v->key[j], k)) return "a key twice";
        if (strcmp(k, "n") && strcmp(k, "c") && strcmp(k, "b") && strcmp(k, "s") && strcmp(k, "l"))
            return "a key outside the properties";
    }
    const V *n = get(v, "n"), *c = get(v, "c"), *b = get(v, "b"), *s = get(v, "s");
    const V *l = get(v, "l");
    if (!n || !c) return "a required key missing";
    if (n->t != 'n' || !n->is_int) return "n is not an integer";
    if (!((c->t == 's' && (!strcmp(c->s, "x") || !strcmp(c->s, "yy"))) ||
          (c->t == 'n' && c->num == 3)))
        return "c is not in the enum";
    if (b && b->t != 'b') return "b is not a boolean";
    if (s && (s->t != 's' || cps(s) > 5)) return "s is not a string of at most 5";
    if (l && (l->t != 'a' || l->nk < 1 || l->nk > 2)) return "l is not an array of 1..2";
    for (size_t i = 0; l && i < l->nk; i++) if (l->kid[i]->t != 'z') return "l holds a non-null";
    return NULL;
}

static int self_test(void) {
    const char *good[] = { "{}", " {\"a\" : [1, -0.5e+3, \"\\u00e9\\ud83d\\ude00\", true, null]} ",
                           "[]", "0", "\"x\"", "{\"a\":{\"b\":{}}}" };
    const char *badv[] = { "{", "{\"a\"}", "[1,]", "01", "1.", "-", "\"\\ud800\"", "\"\\udc00\"",
                           "{} x", "\"\t\"", "tru", "[1 2]", "{\"a\":1,}", "\"\xC0\xAF\"" };
    int fails = 0;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!parse(good[i], strlen(good[i]))) { printf("FAIL: refused %s\n", good[i]); fails++; }
    for (size_t i = 0; i < sizeof badv / sizeof *badv; i++)
        if (parse(badv[i], strlen(badv[i]))) { printf("FAIL: accepted %s\n", badv[i]); fails++; }
    const char *ok[] = { "{\"n\":1,\"c\":\"x\"}",
                         "{\"c\":3,\"n\":-2,\"l\":[null],\"s\":\"\xc3\xa9t\xc3\xa9s\"}" };
    const char *no[] = { "{\"n\":1}", "{\"n\":1.5,\"c\":\"x\"}", "{\"n\":1,\"c\":\"z\"}",
                         "{\"n\":1,\"c\":\"x\",\"q\":1}", "{\"n\":1,\"c\":\"x\",\"s\":\"abcdef\"}",
                         "{\"n\":1,\"c\":\"x\",\"l\":[]}", "{\"n\":1,\"n\":2,\"c\":\"x\"}" };
    for (size_t i = 0; i < 2; i++) {
        V *v = parse(ok[i], strlen(ok[i]));
        if (!v || schema_ok(v)) { printf("FAIL: schema refused %s\n", ok[i]); fails++; }
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        V *v = parse(no[i], strlen(no[i]));
        if (!v || !schema_ok(v)) { printf("FAIL: schema accepted %s\n", no[i]); fails++; }
    }
    if (!fails) printf("ok json check: the checker's parser and schema rules\n");
    return fails != 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return self_test();
    FILE *f = fopen(argv[2], "r");
    if (!f) { printf("FAIL: cannot open %s\n", argv[2]); return 1; }
    char *line = NULL;
    size_t cap = 0;
    long n = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        n++;
        V *r = parse(line, (size_t)len);
        const V *ch = r && r->t == 'o' ? get(r, "choices") : NULL;
        const V *c0 = ch && ch->t == 'a' && ch->nk ? ch->kid[0] : NULL;
        const V *m = c0 ? get(c0, "message") : NULL;
        const V *t = m ? get(m, "content") : c0 ? get(c0, "text") : NULL;
        if (!t || t->t != 's') { printf("FAIL: line %ld: no content: %s", n, line); return 1; }
        V *d = parse(t->s, t->n);
        const char *why = !d ? "does not parse" : !strcmp(argv[1], "schema") ? schema_ok(d) :
                          d->t != 'o' ? "not an object" : NULL;
        if (why) { printf("FAIL: line %ld: the reply %s: %s\n", n, why, t->s); return 1; }
    }
    printf("ok %ld replies parse%s\n", n, strcmp(argv[1], "schema") ? " as objects" :
           " and match the schema");
    return 0;
}
