/* json_schema.c — JSON Schema to a GBNF grammar (include/json_schema.h): $ref and allOf
 * resolved into one schema object (merged, json_schema_merge.c), anyOf/oneOf as
 * alternatives, then one alternative per allowed type: objects and arrays here, strings
 * and numbers in json_schema_str.c, patterns in json_schema_re.c. A schema is compiled
 * once per nesting depth (memo), so a recursive $ref is unrolled down to JG_DEPTH and
 * stops there (the branch that would go deeper is dropped: JSC_NONE). */
#include "json_schema.h"
#include "json_schema_int.h"
#include "json_gram.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text ---- */
void jsc_addn(JscBuf *o, const char *p, size_t n) {
    if (o->n + n + 1 > o->cap && o->n + n + 1 > (size_t)JSC_MAX_TEXT) { o->oom = 1; return; }
    buf_add(o, p, n);
}
void jsc_add(JscBuf *o, const char *s) { jsc_addn(o, s, strlen(s)); }
void jsc_fmt(JscBuf *o, const char *fmt, ...) {
    char t[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof t) { o->oom = 1; return; }
    jsc_addn(o, t, (size_t)n);
}
/* printable ASCII but the bytes that mean something in a literal or a class as
 * themselves; the rest as \xHH, \uHHHH or \UHHHHHHHH */
void jsc_cp(JscBuf *o, uint32_t c) {
    if (c >= 0x20 && c < 0x7f && !strchr("\"\\[]-^", (int)c)) { char t = (char)c;
                                                              jsc_addn(o, &t, 1); }
    else if (c < 0x100) jsc_fmt(o, "\\x%02X", c);
    else if (c < 0x10000) jsc_fmt(o, "\\u%04X", c);
    else jsc_fmt(o, "\\U%08X", c);
}
/* the next code point of UTF-8 s[*i..n) (the DOM's strings are valid UTF-8) */
static uint32_t utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    int k = c < 0x80 ? 0 : c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
    if (k) c &= 0x3f >> k;
    (*i)++;
    for (; k > 0 && *i < n; k--) c = c << 6 | (u[(*i)++] & 0x3f);
    return c;
}
void jsc_lit(JscBuf *o, const char *s, size_t n) {
    jsc_add(o, "\"");
    for (size_t i = 0; i < n;) jsc_cp(o, utf8_next(s, n, &i));
    jsc_add(o, "\"");
}

const char *jsc_clean(const char *s, char out[64]) {
    size_t i = 0;
    for (; s[i] && i < 60; i++) out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    out[i] = 0;
    return out;
}

int jsc_error(Jsc *c, const char *path, const char *fmt, ...) {
    if (c->fail) return -1;
    c->fail = 1;
    char m[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s%s%s", path, *path ? ": " : "", m);
    return -1;
}
int jsc_new_rule(Jsc *c) { return ++c->nrule; }
void jsc_rule(Jsc *c, int r, const char *body) { jsc_fmt(&c->out, "r%d ::= ", r);
                                                 jsc_add(&c->out, body);
                                                 jsc_add(&c->out, "\n"); }
/* a rule of the text in b (freed), or -1 out of memory */
static int rule_of(Jsc *c, JscBuf *b) {
    if (b->oom || !b->b) { free(b->b); return jsc_error(c, "", "out of memory"); }
    int r = jsc_new_rule(c);
    jsc_rule(c, r, b->b);
    free(b->b);
    return r;
}

int jsc_count(Jsc *c, const Json *s, const char *kw, long dflt, long *v, const char *path) {
    const Json *j = json_get(s, kw);
    *v = dflt;
    if (!j) return 0;
    if (j->type != JSON_NUMBER || !j->is_integer || j->integer < 0)
        return jsc_error(c, path, "'%s' must be an integer >= 0", kw);
    if (j->integer > JSC_MAX_REPEAT) {
        if (strncmp(kw, "max", 3)) return jsc_error(c, path, "'%s' over %d is not supported",
                                                    kw, JSC_MAX_REPEAT);
        *v = JSC_MAX_REPEAT;        /* a larger maximum: this one (narrower, still valid) */
        return 0;
    }
    *v = (long)j->integer;
    return 0;
}

/* ---- memo: (schema, depth) -> rule ---- */
static JscMemo *memo_find(Jsc *c, const Json *s, int depth) {
    for (int i = c->nmemo - 1; i >= 0; i--)
        if (c->memo[i].node == s && c->memo[i].depth == depth) return &c->memo[i];
    return NULL;
}
static JscMemo *memo_add(Jsc *c, const Json *s, int depth) {
    if (c->nmemo == c->capmemo) {
        int cap = c->capmemo ? c->capmemo * 2 : 64;
        JscMemo *m = realloc(c->memo, sizeof *m * (size_t)cap);
        if (!m) return NULL;
        c->memo = m; c->capmemo = cap;
    }
    JscMemo *m = &c->memo[c->nmemo++];
    m->node = s; m->depth = depth; m->rule = 0; m->busy = 1;
    return m;
}

static int value(Jsc *c, const Json *s, int depth, const char *path);

/* any JSON value at depth d (its objects' and arrays' members at d + 1) */
static int any_value(Jsc *c, int d) {
    if (c->any[d]) return c->any[d];
    int r = c->any[d] = jsc_new_rule(c);
    JscBuf b = { 0 };
    if (d < JG_DEPTH) {
        int in = any_value(c, d + 1);
        if (in < 0) return -1;
        jsc_fmt(&b, "\"{\" ws (string ws \":\" ws r%d (ws \",\" ws string ws \":\" ws r%d)* ws)? "
                "\"}\" | \"[\" ws (r%d (ws \",\" ws r%d)* ws)? \"]\" | ", in, in, in, in);
    }
    jsc_add(&b, "string | number | \"true\" | \"false\" | \"null\"");
    if (b.oom) { free(b.b); return jsc_error(c, "", "out of memory"); }
    jsc_rule(c, r, b.b);
    free(b.b);
    return r;
}

/* ---- types ---- */
const char *const JSC_TYPE[] = { "object", "array", "string", "number", "integer",
                                    "boolean", "null" };
int jsc_types(Jsc *c, const Json *s, unsigned *out, const char *path) {
    const Json *t = json_get(s, "type"), *nl = json_get(s, "nullable");
    *out = T_ALL;
    if (t) {
        const Json *const *it = (const Json *const *)&t;
        size_t n = 1;
        if (t->type == JSON_ARRAY) { it = (const Json *const *)t->items; n = t->len; }
        *out = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned k = 0;
            for (int y = 0; y < 7 && it[i]->type == JSON_STRING; y++)
                if (!strcmp(it[i]->str, JSC_TYPE[y])) k = 1u << y;
            if (!k) return jsc_error(c, path, "'type' must be object, array, string, number, "
                                     "integer, boolean, null or a list of them");
            *out |= k;
        }
    }
    if (nl && nl->type == JSON_BOOL && nl->boolean) *out |= T_NULL;
    return 0;
}

/* ---- enum / const ---- */
/* v compact, as json_gram.c writes it (strings by json_quote, the shortest number) */
void jsc_ser(JscBuf *o, const Json *v) {
    char t[40];
    switch (v->type) {
    case JSON_NULL: jsc_add(o, "null"); break;
    case JSON_BOOL: jsc_add(o, v->boolean ? "true" : "false"); break;
    case JSON_NUMBER:
        if (v->is_integer) snprintf(t, sizeof t, "%lld", (long long)v->integer);
        else for (int p = 1; p <= 17; p++) {
            snprintf(t, sizeof t, "%.*g", p, v->number);
            if (strtod(t, NULL) == v->number) break;
        }
        jsc_add(o, t);
        break;
    case JSON_STRING: {
        char *q = json_quote(v->str, v->len);
        if (!q) { o->oom = 1; break; }
        jsc_add(o, q);
        free(q);
        break;
    }
    case JSON_ARRAY:
    case JSON_OBJECT:
        jsc_add(o, v->type == JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->len; i++) {
            if (i) jsc_add(o, ",");
            if (v->type == JSON_OBJECT) {
                char *q = json_quote(v->keys[i], strlen(v->keys[i]));
                if (!q) { o->oom = 1; break; }
                jsc_add(o, q); jsc_add(o, ":");
                free(q);
            }
            jsc_ser(o, v->items[i]);
        }
        jsc_add(o, v->type == JSON_ARRAY ? "]" : "}");
        break;
    }
}

static unsigned type_of(const Json *v) {
    switch (v->type) {
    case JSON_NULL: return T_NULL;
    case JSON_BOOL: return T_BOOL;
    case JSON_NUMBER:        /* integral: no cast (1e308 is past long long) */
        return v->is_integer || (isfinite(v->number) && floor(v->number) == v->number)
               ? T_NUM | T_INT : T_NUM;
    case JSON_STRING: return T_STR;
    case JSON_ARRAY: return T_ARR;
    default: return T_OBJ;
    }
}

/* The values v[0..n) (sorted, distinct, sharing their first `at` bytes) from byte `at`
 * on, as a trie: one alternative per next code point, runs without a branch as one
 * literal, so the engine follows one parse however many values there are (a flat list
 * of thousands would be thousands of parses at once). */
typedef struct { char *b; size_t n; } Lit;
static void lit_trie(JscBuf *b, const Lit *v, int n, size_t at) {
    int ends = 0;
    while (ends < n && v[ends].n == at) ends++;  /* shorter first: sorted */
    if (ends == n) return;
    jsc_add(b, "(");
    for (int i = ends; i < n;) {
        size_t p = at;
        utf8_next(v[i].b, v[i].n, &p);
        int j = i;
        while (j < n && v[j].n >= p && !memcmp(v[j].b + at, v[i].b + at, p - at)) j++;
        size_t q = p;                            /* the run they all share */
        for (;;) {
            size_t r = q;
            if (v[i].n <= q) break;
            utf8_next(v[i].b, v[i].n, &r);
            int k = i;
            while (k < j && v[k].n >= r && !memcmp(v[k].b + q, v[i].b + q, r - q)) k++;
            if (k < j) break;
            q = r;
        }
        if (i > ends) jsc_add(b, " | ");
        jsc_lit(b, v[i].b + at, q - at);
        if (v[j - 1].n > q) { jsc_add(b, " "); lit_trie(b, v + i, j - i, q); }
        i = j;
    }
    jsc_add(b, ends ? ")?" : ")");
}
static int lit_cmp(const void *x, const void *y) {
    const Lit *a = x, *b = y;
    int r = memcmp(a->b, b->b, a->n < b->n ? a->n : b->n);
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

static int literals(Jsc *c, const Json *s, unsigned types, const char *path) {
    const Json *e = json_get(s, "enum"), *k = json_get(s, "const");
    if (e && k) return jsc_error(c, path, "'enum' and 'const' together");
    const Json *const *it = (const Json *const *)&k;
    size_t n = 1;
    if (e) {
        if (e->type != JSON_ARRAY || e->len == 0)
            return jsc_error(c, path, "'enum' must be an array of at least one value");
        it = (const Json *const *)e->items; n = e->len;
    }
    Lit *v = calloc(n, sizeof *v);
    int m = 0, r = JSC_NONE;
    if (!v) return jsc_error(c, "", "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!(type_of(it[i]) & types)) continue;
        JscBuf t = { 0 };
        jsc_ser(&t, it[i]);
        if (t.oom) { free(t.b); r = jsc_error(c, "", "out of memory"); goto out; }
        v[m].b = t.b; v[m++].n = t.n;
    }
    qsort(v, (size_t)m, sizeof *v, lit_cmp);
    int u = 0;
    for (int i = 0; i < m; i++) {                /* one of each */
        if (u && !lit_cmp(&v[u - 1], &v[i])) { free(v[i].b); continue; }
        v[u++] = v[i];
    }
    m = u;
    if (m) {
        JscBuf b = { 0 };
        lit_trie(&b, v, m, 0);
        r = rule_of(c, &b);
    }
out:
    for (int i = 0; i < m; i++) free(v[i].b);
    free(v);
    return r;
}

/* ---- objects ---- */
/* The key of an additional property: a JSON string that is none of the declared names,
 * each of its characters written one way (no \u or \/ escapes). One rule per node of the
 * names' trie: the key may end there (unless a name ends there), follow a name with its
 * next character, or leave them all with another character (then any string). names
 * [0..n) are sorted and share their first `at` bytes; kc: the rest of any string. */
static const char ESC_OF[] = "\"\\\b\f\n\r\t", ESC_AS[] = "\"\\bfnrt";
static int other_key(Jsc *c, char **names, int n, size_t at, int kc) {
    JscBuf b = { 0 }, cls = { 0 };
    char esc[8] = "";                           /* escape letters some name goes on with */
    int whole = 0;
    for (int i = 0; i < n; i++) whole |= names[i][at] == 0;
    if (!whole) jsc_add(&b, "\"\\\"\"");
    for (int i = 0; i < n;) {
        if (!names[i][at]) { i++; continue; }
        size_t p = at;
        uint32_t ch = utf8_next(names[i], strlen(names[i]), &p);
        int j = i;                              /* names[i..j) go on with ch */
        while (j < n && !memcmp(names[j] + at, names[i] + at, p - at)) j++;
        int sub = other_key(c, names + i, j - i, p, kc);
        if (sub < 0) { free(b.b); free(cls.b); return -1; }
        const char *e = ch && ch < 0x80 ? strchr(ESC_OF, (int)ch) : NULL;
        if (b.n) jsc_add(&b, " | ");
        if (e) {
            jsc_fmt(&b, "\"\\\\%s%c\" r%d", ESC_AS[e - ESC_OF] == '"' ||
                    ESC_AS[e - ESC_OF] == '\\' ? "\\" : "", ESC_AS[e - ESC_OF], sub);
            esc[strlen(esc)] = ESC_AS[e - ESC_OF];
        } else {
            jsc_add(&b, "\""); jsc_cp(&b, ch); jsc_fmt(&b, "\" r%d", sub);
            jsc_cp(&cls, ch);
        }
        i = j;
    }
    JscBuf left = { 0 };                        /* the escape letters no name goes on with */
    for (const char *l = ESC_AS; *l; l++)
        if (!strchr(esc, *l)) jsc_cp(&left, (uint32_t)(unsigned char)*l);
    if (b.n) jsc_add(&b, " | ");
    jsc_fmt(&b, "([^\"\\\\\\x00-\\x1F%s]", cls.b ? cls.b : "");
    if (left.b) jsc_fmt(&b, " | \"\\\\\" [%s]", left.b);
    jsc_fmt(&b, ") r%d", kc);
    free(cls.b); free(left.b);
    return rule_of(c, &b);
}
static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* a rule of the text fmt..., or -1 */
static int rule_fmt(Jsc *c, const char *fmt, ...) {
    char t[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof t) return jsc_error(c, "", "out of memory");
    int r = jsc_new_rule(c);
    jsc_rule(c, r, t);
    return r;
}

/* Members in the order of 'properties', then the required names not among them, then
 * (additionalProperties true or a schema) other keys; absent additionalProperties allows
 * none (a narrower grammar: every such document is valid) unless no name is declared.
 * aft[i]: what may follow once a member is written and members i.. remain; ne[i]: a
 * non-empty list from member i on. */
static int object(Jsc *c, const Json *s, int d, const char *path) {
    const Json *props = json_get(s, "properties"), *req = json_get(s, "required");
    const Json *ad = json_get(s, "additionalProperties");
    char sub[256], c64[64];
    if (props && props->type != JSON_OBJECT)
        return jsc_error(c, path, "'properties' must be an object");
    if (req && req->type != JSON_ARRAY)
        return jsc_error(c, path, "'required' must be an array of names");
    size_t np = props ? props->len : 0, nr = req ? req->len : 0, nm = np;
    for (size_t i = 0; i < nr; i++)
        if (req->items[i]->type != JSON_STRING ||
            strlen(req->items[i]->str) != req->items[i]->len)
            return jsc_error(c, path, "'required' must be an array of names");
    if (np + nr > 4096) return jsc_error(c, path, "over 4096 properties");
    char **name = calloc(np + nr + 1, sizeof *name);
    int *rule = calloc(np + nr + 1, sizeof *rule), *must = calloc(np + nr + 1, sizeof *must);
    int *kv = calloc(np + nr + 2, sizeof *kv), *aft = calloc(np + nr + 2, sizeof *aft);
    int *ne = calloc(np + nr + 2, sizeof *ne);
    int r = -1, addl = JSC_NONE, any = 0, addkv = 0;
    if (!name || !rule || !must || !kv || !aft || !ne) { jsc_error(c, "", "out of memory");
                                                          goto out; }
    for (size_t i = 0; i < np; i++) {
        name[i] = props->keys[i];
        for (size_t k = 0; k < i; k++)
            if (!strcmp(name[k], name[i])) { jsc_error(c, path, "property '%s' twice",
                                                       jsc_clean(name[i], c64)); goto out; }
    }
    for (size_t i = 0; i < nr; i++) {
        size_t k = 0;
        while (k < nm && strcmp(name[k], req->items[i]->str)) k++;
        if (k == nm) { name[nm++] = req->items[i]->str; rule[k] = -3; }
        must[k] = 1;
    }
    if (!ad && !nm) addl = any_value(c, d + 1);     /* no names at all: any members */
    else if (ad && ad->type == JSON_BOOL) addl = ad->boolean ? any_value(c, d + 1) : JSC_NONE;
    else if (ad) {
        snprintf(sub, sizeof sub, "%s%sadditionalProperties", path, *path ? "." : "");
        addl = value(c, ad, d + 1, sub);
    }
    if (addl == -1) goto out;
    for (size_t i = 0; i < nm; i++) {
        if (rule[i] == -3) rule[i] = ad ? addl : (any = any_value(c, d + 1));
        else {
            snprintf(sub, sizeof sub, "%s%sproperties.%s", path, *path ? "." : "",
                     jsc_clean(name[i], c64));
            rule[i] = value(c, props->items[i], d + 1, sub);
        }
        if (rule[i] == -1 || any == -1) goto out;
        if (rule[i] == JSC_NONE && must[i]) { r = JSC_NONE; goto out; }
        if (rule[i] == JSC_NONE) continue;
        JscBuf b = { 0 };
        char *q = json_quote(name[i], strlen(name[i]));
        if (q) jsc_lit(&b, q, strlen(q));
        else b.oom = 1;
        free(q);
        jsc_fmt(&b, " ws \":\" ws r%d", rule[i]);
        if ((kv[i] = rule_of(c, &b)) < 0) goto out;
    }
    if (addl != JSC_NONE) {
        int key = 0;
        if (nm) {
            char **sorted = calloc(nm, sizeof *sorted);
            int kc = rule_fmt(c, "sc* \"\\\"\"");
            if (!sorted || kc < 0) { free(sorted); jsc_error(c, "", "out of memory"); goto out; }
            memcpy(sorted, name, nm * sizeof *sorted);
            qsort(sorted, nm, sizeof *sorted, name_cmp);
            key = other_key(c, sorted, (int)nm, 0, kc);
            free(sorted);
            if (key < 0) goto out;
            addkv = rule_fmt(c, "\"\\\"\" r%d ws \":\" ws r%d", key, addl);
        } else addkv = rule_fmt(c, "string ws \":\" ws r%d", addl);
        if (addkv < 0) goto out;
        if ((aft[nm] = rule_fmt(c, "(ws \",\" ws r%d)*", addkv)) < 0) goto out;
        if ((ne[nm] = rule_fmt(c, "r%d r%d", addkv, aft[nm])) < 0) goto out;
    } else ne[nm] = JSC_NONE;
    int required = 0;
    for (size_t i = nm; i-- > 0;) {
        required |= must[i];
        if (!kv[i]) { aft[i] = aft[i + 1]; ne[i] = ne[i + 1]; continue; }
        char tail[24] = "";
        if (aft[i + 1]) snprintf(tail, sizeof tail, " r%d", aft[i + 1]);
        aft[i] = rule_fmt(c, must[i] ? "ws \",\" ws r%d%s" : "(ws \",\" ws r%d)?%s", kv[i], tail);
        if (aft[i] < 0) goto out;
        if (must[i] || ne[i + 1] == JSC_NONE) ne[i] = rule_fmt(c, "r%d%s", kv[i], tail);
        else ne[i] = rule_fmt(c, "r%d%s | r%d", kv[i], tail, ne[i + 1]);
        if (ne[i] < 0) goto out;
    }
    if (ne[0] == JSC_NONE) r = required ? JSC_NONE : rule_fmt(c, "\"{\" ws \"}\"");
    else if (required) r = rule_fmt(c, "\"{\" ws r%d ws \"}\"", ne[0]);
    else r = rule_fmt(c, "\"{\" ws (r%d ws)? \"}\"", ne[0]);
out:
    free(name); free(rule); free(must); free(kv); free(aft); free(ne);
    return c->fail ? -1 : r;
}

/* ---- arrays ---- */
/* a repetition suffix {lo,hi} (hi -1: none) */
static void reps(char *t, size_t n, long lo, long hi) {
    if (lo == 0 && hi < 0) snprintf(t, n, "*");
    else if (lo == 1 && hi < 0) snprintf(t, n, "+");
    else if (lo == 0 && hi == 1) snprintf(t, n, "?");
    else if (hi < 0) snprintf(t, n, "{%ld,}", lo);
    else snprintf(t, n, "{%ld,%ld}", lo, hi);
}

/* prefixItems (or items as a list, draft 7), then items (additionalItems) for the rest;
 * minItems, maxItems. */
static int array(Jsc *c, const Json *s, int d, const char *path) {
    const Json *pre = json_get(s, "prefixItems"), *it = json_get(s, "items");
    char sub[256], t[48];
    long lo, hi;
    if (jsc_count(c, s, "minItems", 0, &lo, path) || jsc_count(c, s, "maxItems", -1, &hi, path))
        return -1;
    if (it && it->type == JSON_ARRAY) {
        if (pre) return jsc_error(c, path, "'items' as a list and 'prefixItems' together");
        pre = it; it = json_get(s, "additionalItems");
    } else if (json_get(s, "additionalItems"))
        return jsc_error(c, path, "'additionalItems' needs 'items' as a list");
    if (pre && pre->type != JSON_ARRAY) return jsc_error(c, path, "'prefixItems' must be a list");
    if (hi >= 0 && lo > hi) return JSC_NONE;
    long k = pre ? (long)pre->len : 0;
    if (hi >= 0 && k > hi) k = hi;
    int *p = calloc((size_t)k + 1, sizeof *p), rest = JSC_NONE, r = -1;
    if (!p) return jsc_error(c, "", "out of memory");
    for (long i = 0; i < k; i++) {
        snprintf(sub, sizeof sub, "%s%sprefixItems[%ld]", path, *path ? "." : "", i);
        if ((p[i] = value(c, pre->items[i], d + 1, sub)) == -1) goto out;
        if (p[i] == JSC_NONE) { k = i; break; }      /* no array reaches past it */
    }
    if (k == (pre ? (long)pre->len : 0) && (hi < 0 || k < hi)) {
        if (!it || (it->type == JSON_BOOL && it->boolean)) rest = any_value(c, d + 1);
        else if (it->type != JSON_BOOL) {
            snprintf(sub, sizeof sub, "%s%sitems", path, *path ? "." : "");
            rest = value(c, it, d + 1, sub);
        }
        if (rest == -1) goto out;
    }
    if (rest == JSC_NONE && lo > k) { r = JSC_NONE; goto out; }
    /* tail: after i items; built from the end */
    int tail = 0;
    if (rest != JSC_NONE) {
        reps(t, sizeof t, lo > k + 1 ? lo - k - 1 : 0, hi < 0 ? -1 : hi - k - 1);
        if (k == 0) {                            /* the first item is one of the rest */
            if (hi == 0) goto empty;
            tail = hi == 1 ? rule_fmt(c, "r%d", rest)
                           : rule_fmt(c, "r%d (ws \",\" ws r%d)%s", rest, rest, t);
            goto done;
        }
        reps(t, sizeof t, lo > k ? lo - k : 0, hi < 0 ? -1 : hi - k);
        if ((tail = rule_fmt(c, "(ws \",\" ws r%d)%s", rest, t)) < 0) goto out;
    }
    for (long i = k - 1; i >= 1; i--) {         /* item i (0-based) is optional past lo */
        char tl[24] = "";
        if (tail) snprintf(tl, sizeof tl, " r%d", tail);
        tail = rule_fmt(c, i < lo ? "ws \",\" ws r%d%s" : "(ws \",\" ws r%d%s)?", p[i], tl);
        if (tail < 0) goto out;
    }
    if (k) {
        char tl[24] = "";
        if (tail) snprintf(tl, sizeof tl, " r%d", tail);
        tail = rule_fmt(c, "r%d%s", p[0], tl);
    }
done:
    if (tail < 0) goto out;
    if (!tail) goto empty;
    r = rule_fmt(c, lo ? "\"[\" ws r%d ws \"]\"" : "\"[\" ws (r%d ws)? \"]\"", tail);
    goto out;
empty:
    r = lo ? JSC_NONE : rule_fmt(c, "\"[\" ws \"]\"");
out:
    free(p);
    return c->fail ? -1 : r;
}

/* ---- a schema ---- */
static const char *const KNOWN[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "nullable", "$anchor",
    "$dynamicAnchor", "$vocabulary", "contentMediaType", "contentEncoding", "contentSchema",
    "example", "discriminator", "externalDocs",
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern",
    "format", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "anyOf", "oneOf", NULL };

/* one alternative per type s allows (s without $ref, allOf, anyOf) */
static int typed(Jsc *c, const Json *s, int d, const char *path) {
    unsigned ty;
    char c64[64];
    for (size_t i = 0; i < s->len; i++) {
        int k = 0;
        while (KNOWN[k] && strcmp(KNOWN[k], s->keys[i])) k++;
        if (!KNOWN[k])
            return jsc_error(c, path, "the keyword '%s' is not supported (docs/SAMPLING.md "
                             "\"JSON Schema\" lists the keywords k3 compiles)",
                             jsc_clean(s->keys[i], c64));
    }
    if (jsc_types(c, s, &ty, path)) return -1;
    if (json_get(s, "enum") || json_get(s, "const")) return literals(c, s, ty, path);
    JscBuf b = { 0 };
    int alt[5] = { JSC_NONE, JSC_NONE, JSC_NONE, JSC_NONE, JSC_NONE };
    if (ty & T_OBJ) { if (d >= JG_DEPTH) alt[0] = JSC_NONE; else alt[0] = object(c, s, d, path); }
    if (ty & T_ARR && !c->fail) alt[1] = d >= JG_DEPTH ? JSC_NONE : array(c, s, d, path);
    if (ty & T_STR && !c->fail) alt[2] = jsc_string(c, s, path);
    if (ty & (T_NUM | T_INT) && !c->fail) alt[3] = jsc_number(c, s, !(ty & T_NUM), path);
    if (c->fail) return -1;
    for (int i = 0; i < 4; i++)
        if (alt[i] != JSC_NONE) jsc_fmt(&b, "%sr%d", b.n ? " | " : "", alt[i]);
    if (ty & T_BOOL) jsc_fmt(&b, "%s\"true\" | \"false\"", b.n ? " | " : "");
    if (ty & T_NULL) jsc_fmt(&b, "%s\"null\"", b.n ? " | " : "");
    if (!b.n) { free(b.b); return JSC_NONE; }
    return rule_of(c, &b);
}

/* s at nesting depth d: a rule, JSC_NONE or -1 */
static int value1(Jsc *c, const Json *s, int d, const char *path);
static int value(Jsc *c, const Json *s, int d, const char *path) {
    if (c->fail) return -1;
    if (c->out.oom) return jsc_error(c, "", "the schema's grammar is over %d bytes",
                                     JSC_MAX_TEXT);
    if (c->level >= 400) return jsc_error(c, path, "$ref, allOf and anyOf nest over 400 deep");
    c->level++;
    int r = value1(c, s, d, path);
    c->level--;
    return r;
}
static int value1(Jsc *c, const Json *s, int d, const char *path) {
    if (d > JG_DEPTH) return JSC_NONE;
    if (s->type == JSON_BOOL) return s->boolean ? any_value(c, d) : JSC_NONE;
    if (s->type != JSON_OBJECT) return jsc_error(c, path, "a schema must be an object or a "
                                                 "boolean");
    JscMemo *m = memo_find(c, s, d);
    if (m && m->busy) return jsc_error(c, path, "the schema refers to itself ($ref, allOf, "
                                       "anyOf) without an object or array in between");
    if (m) return m->rule;
    if (!(m = memo_add(c, s, d))) return jsc_error(c, "", "out of memory");
    int mi = (int)(m - c->memo), none = 0, r;
    const Json *n = jsc_norm(c, s, path, &none);   /* $ref and allOf merged */
    if (!n) r = none ? JSC_NONE : -1;
    else {
        const Json *any = json_get(n, "anyOf"), *one = json_get(n, "oneOf");
        if (any && one) r = jsc_error(c, path, "'anyOf' and 'oneOf' together");
        else if (any || one) {
            /* each branch with the keywords beside it (merged as allOf) */
            const Json *br = any ? any : one;
            if (br->type != JSON_ARRAY || !br->len)
                return jsc_error(c, path, "'%s' must be a non-empty list of schemas",
                                 any ? "anyOf" : "oneOf");
            JscBuf b = { 0 };
            for (size_t i = 0; i < br->len && !c->fail; i++) {
                char sub[256];
                snprintf(sub, sizeof sub, "%s%s%s[%zu]", path, *path ? "." : "",
                         any ? "anyOf" : "oneOf", i);
                const Json *bi = jsc_with(c, n, any ? "anyOf" : "oneOf", br->items[i], sub);
                int x = bi ? value(c, bi, d, sub) : -1;
                if (x >= 0) jsc_fmt(&b, "%sr%d", b.n ? " | " : "", x);
            }
            if (c->fail) { free(b.b); r = -1; }
            else if (!b.n) { free(b.b); r = JSC_NONE; }
            else r = rule_of(c, &b);
        } else r = typed(c, n, d, path);
    }
    c->memo[mi].busy = 0;
    c->memo[mi].rule = r;
    return r;
}

char *jsc_gbnf(const Json *s, char *err, size_t errlen) {
    Jsc c = { .root = s, .err = err, .errlen = errlen };
    int r = value(&c, s, 0, "");
    if (r == JSC_NONE) jsc_error(&c, "", "no value satisfies the schema (within k3's bounds: "
                                 "nesting depth %d)", JG_DEPTH);
    if (!c.fail && c.out.oom)
        jsc_error(&c, "", "the schema's grammar is over %d bytes", JSC_MAX_TEXT);
    char *g = NULL;
    if (!c.fail) {
        JscBuf h = { 0 };
        jsc_fmt(&h, "root ::= ws r%d ws\nws ::= [ \\t\\n\\r]{0,%d}\n", r, JG_MAX_WS);
        jsc_add(&h, "hx ::= [0-9a-fA-F]\n"
                "sc ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\""
                " ([0-9a-cA-CefEF] hx hx hx"
                " | [dD] [0-7] hx hx | [dD] [89abAB] hx hx \"\\\\u\" [dD] [c-fC-F] hx hx))\n"
                "string ::= \"\\\"\" sc* \"\\\"\"\n");
        jsc_fmt(&h, "int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,%d})\n"
                "number ::= int (\".\" [0-9]{1,%d})? ([eE] [-+]? [0-9]{1,%d})?\n",
                JG_MAX_DIGITS - 1, JG_MAX_DIGITS, JG_MAX_DIGITS);
        jsc_addn(&h, c.out.b ? c.out.b : "", c.out.n);
        if (h.oom || h.n > JSC_MAX_TEXT) {
            free(h.b);
            jsc_error(&c, "", "the schema's grammar is over %d bytes", JSC_MAX_TEXT);
        } else g = h.b;
    }
    free(c.out.b);
    free(c.memo);
    for (int i = 0; i < c.narena; i++) free(c.arena[i]);
    free(c.arena);
    return g;
}
