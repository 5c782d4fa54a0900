/* json_schema_merge.c — $ref and allOf for the schema compiler (json_schema_int.h): a
 * local $ref ("#", "#/$defs/x", any JSON pointer into the document) is replaced by what it
 * points at; allOf's branches (and the keywords beside allOf or $ref) are merged into one
 * schema object: types intersected, properties united (a name in two branches gets both
 * schemas as allOf; a name in one branch also the other's additionalProperties),
 * required united, the tighter of two bounds, enum/const intersected, anyOf/oneOf of two
 * branches crossed into one anyOf. A keyword the merge cannot combine (pattern, format or
 * prefixItems in two branches with different values) is refused by name. */
#include "json_schema_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const Json EMPTY = { .type = JSON_OBJECT };
static void *alloc(Jsc *c, size_t n) {
    if (c->narena == c->caparena) {
        int cap = c->caparena ? c->caparena * 2 : 64;
        void **a = realloc(c->arena, sizeof *a * (size_t)cap);
        if (!a) return NULL;
        c->arena = a; c->caparena = cap;
    }
    void *p = calloc(1, n ? n : 1);
    if (p) c->arena[c->narena++] = p;
    return p;
}
/* a new array or object of room for n children */
static Json *node(Jsc *c, JsonType t, size_t n) {
    Json *j = alloc(c, sizeof *j);
    if (!j) return NULL;
    j->type = t;
    j->items = alloc(c, sizeof *j->items * (n + 1));
    if (t == JSON_OBJECT) j->keys = alloc(c, sizeof *j->keys * (n + 1));
    if (!j->items || (t == JSON_OBJECT && !j->keys)) return NULL;
    return j;
}
static void put(Json *o, const char *k, const Json *v) {
    if (o->keys) o->keys[o->len] = (char *)k;
    o->items[o->len++] = (Json *)v;
}
static Json *all_of(Jsc *c, const Json *a, const Json *b) {
    Json *o = node(c, JSON_OBJECT, 1), *l = node(c, JSON_ARRAY, 2);
    if (!o || !l) return NULL;
    put(l, NULL, a); put(l, NULL, b); put(o, "allOf", l);
    return o;
}

static int ignored(const char *k) {
    static const char *const A[] = { "title", "description", "default", "examples", "$schema",
                                     "$id", "$comment", "deprecated", "readOnly", "writeOnly",
                                     "$defs", "definitions", "$anchor", "$dynamicAnchor",
                                     "$vocabulary", "contentMediaType", "contentEncoding",
                                     "contentSchema", "example", "discriminator",
                                     "externalDocs", NULL };
    for (int i = 0; A[i]; i++) if (!strcmp(A[i], k)) return 1;
    return 0;
}

/* the target of a local $ref */
static const Json *resolve(Jsc *c, const Json *ref, const char *path) {
    if (ref->type != JSON_STRING || ref->str[0] != '#' || strlen(ref->str) != ref->len ||
        (ref->str[1] && ref->str[1] != '/')) {
        jsc_error(c, path, "only a local '$ref' (\"#\" or \"#/...\", a JSON pointer into this "
                  "schema) is supported");
        return NULL;
    }
    const Json *j = c->root;
    const char *p = ref->str + 1;
    while (*p == '/' && j) {
        char tok[256];
        size_t n = 0;
        for (p++; *p && *p != '/' && n + 1 < sizeof tok; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~' : '/';
            else if (ch == '%' && p[1] && p[2]) {
                unsigned v;
                if (sscanf(p + 1, "%2x", &v) == 1) { ch = (char)v; p += 2; }
            }
            tok[n++] = ch;
        }
        tok[n] = 0;
        if (j->type == JSON_OBJECT) j = json_get(j, tok);
        else if (j->type == JSON_ARRAY) {
            char *e;
            long i = strtol(tok, &e, 10);
            j = *e || !*tok || i < 0 ? NULL : json_at(j, (size_t)i);
        } else j = NULL;
    }
    if (!j || *p) {
        char c64[64];
        jsc_error(c, path, "'$ref' %s points at nothing in this schema", jsc_clean(ref->str, c64));
        return NULL;
    }
    return j;
}

typedef struct { const Json **b; int n, cap; } List;
static int add(Jsc *c, List *l, const Json *s) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        const Json **b = realloc(l->b, sizeof *b * (size_t)cap);
        if (!b) return jsc_error(c, "", "out of memory");
        l->b = b; l->cap = cap;
    }
    l->b[l->n++] = s;
    return 0;
}
/* s's branches into l: s itself, or what its $ref and allOf hold, and the rest of s */
static int flatten(Jsc *c, const Json *s, List *l, int depth, int *none, const char *path) {
    if (depth > 64) return jsc_error(c, path, "'$ref' and 'allOf' chain over 64 deep");
    if (s->type == JSON_BOOL) { if (!s->boolean) *none = 1; return 0; }
    if (s->type != JSON_OBJECT) return jsc_error(c, path, "a schema must be an object or a "
                                                 "boolean");
    const Json *ref = json_get(s, "$ref"), *all = json_get(s, "allOf");
    if (!ref && !all) return add(c, l, s);
    if (ref) {
        const Json *t = resolve(c, ref, path);
        if (!t || flatten(c, t, l, depth + 1, none, path)) return -1;
    }
    if (all) {
        if (all->type != JSON_ARRAY || !all->len)
            return jsc_error(c, path, "'allOf' must be a non-empty list of schemas");
        for (size_t i = 0; i < all->len; i++)
            if (flatten(c, all->items[i], l, depth + 1, none, path)) return -1;
    }
    size_t rest = 0;
    for (size_t i = 0; i < s->len; i++)
        rest += strcmp(s->keys[i], "$ref") && strcmp(s->keys[i], "allOf") && !ignored(s->keys[i]);
    if (!rest) return 0;
    Json *o = node(c, JSON_OBJECT, rest);
    if (!o) return jsc_error(c, "", "out of memory");
    for (size_t i = 0; i < s->len; i++)
        if (strcmp(s->keys[i], "$ref") && strcmp(s->keys[i], "allOf") && !ignored(s->keys[i]))
            put(o, s->keys[i], s->items[i]);
    return add(c, l, o);
}

static int same(const Json *a, const Json *b) {
    JscBuf x = { 0 }, y = { 0 };
    jsc_ser(&x, a); jsc_ser(&y, b);
    int r = !x.oom && !y.oom && x.n == y.n && !memcmp(x.b, y.b, x.n);
    free(x.b); free(y.b);
    return r;
}
static const Json *as_list(Jsc *c, const Json *s, const char *k) {
    const Json *v = json_get(s, k);
    if (!v || strcmp(k, "const")) return v;
    Json *l = node(c, JSON_ARRAY, 1);
    if (l) put(l, NULL, v);
    return l;
}
static int is_num(const Json *v) { return v && v->type == JSON_NUMBER; }

/* a and b (objects without $ref, allOf) as one object; NULL with *none or an error */
static const Json *merge(Jsc *c, const Json *a, const Json *b, int *none, const char *path) {
    Json *o = node(c, JSON_OBJECT, a->len + b->len + 2);
    if (!o) { jsc_error(c, "", "out of memory"); return NULL; }
    for (int side = 0; side < 2; side++) {
        const Json *x = side ? b : a, *y = side ? a : b;
        for (size_t i = 0; i < x->len; i++) {
            const char *k = x->keys[i];
            const Json *v = x->items[i], *w = json_get(y, k);
            if (ignored(k) || (side && w) || json_get(o, k)) continue;   /* done once */
            if (!strcmp(k, "enum") || !strcmp(k, "const")) {
                const Json *la = as_list(c, a, json_get(a, "enum") ? "enum" : "const");
                const Json *lb = as_list(c, b, json_get(b, "enum") ? "enum" : "const");
                if (!la || !lb) { v = la ? la : lb; k = "enum"; goto keep; }
                if (la->type != JSON_ARRAY || lb->type != JSON_ARRAY) goto twice;
                Json *l = node(c, JSON_ARRAY, la->len);
                if (!l) goto oom;
                for (size_t p = 0; p < la->len; p++)
                    for (size_t q = 0; q < lb->len; q++)
                        if (same(la->items[p], lb->items[q])) { put(l, NULL, la->items[p]);
                                                                break; }
                if (!l->len) { *none = 1; return NULL; }
                if (json_get(o, "enum")) continue;
                put(o, "enum", l);
                continue;
            }
            if (!w) {
                if (!strcmp(k, "properties") && v->type == JSON_OBJECT) {
                    const Json *ad = json_get(y, "additionalProperties");
                    if (ad && !(ad->type == JSON_BOOL && ad->boolean)) {
                        /* each name must also satisfy the other's additionalProperties */
                        Json *p = node(c, JSON_OBJECT, v->len);
                        if (!p) goto oom;
                        for (size_t n = 0; n < v->len; n++) {
                            const Json *m = all_of(c, v->items[n], ad);
                            if (!m) goto oom;
                            put(p, v->keys[n], m);
                        }
                        v = p;
                    }
                }
                goto keep;
            }
            if (!strcmp(k, "type") || !strcmp(k, "nullable")) {
                unsigned ta, tb;
                if (!strcmp(k, "nullable")) {
                    if (v->boolean && w->boolean) goto keep;
                    continue;
                }
                if (jsc_types(c, a, &ta, path) || jsc_types(c, b, &tb, path)) return NULL;
                Json *l = node(c, JSON_ARRAY, 7);
                if (!l) goto oom;
                for (int t = 0; t < 7; t++)
                    if ((ta & tb) >> t & 1) {
                        Json *s = alloc(c, sizeof *s);
                        if (!s) goto oom;
                        s->type = JSON_STRING; s->str = (char *)JSC_TYPE[t];
                        s->len = strlen(s->str);
                        put(l, NULL, s);
                    }
                if (!l->len) { *none = 1; return NULL; }
                put(o, "type", l);
            } else if (!strcmp(k, "properties") && v->type == JSON_OBJECT &&
                       w->type == JSON_OBJECT) {
                Json *p = node(c, JSON_OBJECT, v->len + w->len);
                if (!p) goto oom;
                for (int s2 = 0; s2 < 2; s2++) {
                    const Json *u = s2 ? w : v, *z = s2 ? v : w;
                    const Json *ad = json_get(s2 ? a : b, "additionalProperties");
                    for (size_t n = 0; n < u->len; n++) {
                        const Json *zz = json_get(z, u->keys[n]), *m = u->items[n];
                        if (s2 && zz) continue;
                        if (zz) m = all_of(c, m, zz);
                        else if (ad && !(ad->type == JSON_BOOL && ad->boolean))
                            m = all_of(c, m, ad);
                        if (!m) goto oom;
                        put(p, u->keys[n], m);
                    }
                }
                put(o, k, p);
            } else if (!strcmp(k, "required") && v->type == JSON_ARRAY && w->type == JSON_ARRAY) {
                Json *l = node(c, JSON_ARRAY, v->len + w->len);
                if (!l) goto oom;
                for (size_t n = 0; n < v->len; n++) put(l, NULL, v->items[n]);
                for (size_t n = 0; n < w->len; n++) {
                    size_t q = 0;
                    while (q < v->len && !same(v->items[q], w->items[n])) q++;
                    if (q == v->len) put(l, NULL, w->items[n]);
                }
                put(o, k, l);
            } else if (!strcmp(k, "items") || !strcmp(k, "additionalProperties")) {
                const Json *m = all_of(c, v, w);
                if (!m) goto oom;
                put(o, k, m);
            } else if (!strncmp(k, "min", 3) || !strncmp(k, "exclusiveMin", 12)) {
                if (!is_num(v) || !is_num(w)) goto twice;
                v = v->number >= w->number ? v : w;
                goto keep;
            } else if (!strncmp(k, "max", 3) || !strncmp(k, "exclusiveMax", 12)) {
                if (!is_num(v) || !is_num(w)) goto twice;
                v = v->number <= w->number ? v : w;
                goto keep;
            } else if (!strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
                continue;                              /* below */
            } else if (same(v, w)) goto keep;
            else goto twice;
            continue;
        keep:
            put(o, k, v);
        }
    }
    /* anyOf/oneOf in both: one anyOf of the pairs */
    const Json *xa = json_get(a, "anyOf"), *xb = json_get(b, "anyOf");
    if (!xa) xa = json_get(a, "oneOf");
    if (!xb) xb = json_get(b, "oneOf");
    if (xa && xb && !json_get(o, "anyOf") && !json_get(o, "oneOf")) {
        if (xa->type != JSON_ARRAY || xb->type != JSON_ARRAY || xa->len * xb->len > 256) {
            jsc_error(c, path, "'allOf' of two 'anyOf'/'oneOf' lists: over 256 pairs");
            return NULL;
        }
        Json *l = node(c, JSON_ARRAY, xa->len * xb->len);
        if (!l) goto oom;
        for (size_t p = 0; p < xa->len; p++)
            for (size_t q = 0; q < xb->len; q++) {
                const Json *m = all_of(c, xa->items[p], xb->items[q]);
                if (!m) goto oom;
                put(l, NULL, m);
            }
        put(o, "anyOf", l);
    }
    return o;
twice:
    jsc_error(c, path, "'allOf': two branches give different values of a keyword k3 cannot "
              "combine (pattern, format, prefixItems, ...)");
    return NULL;
oom:
    jsc_error(c, "", "out of memory");
    return NULL;
}

const Json *jsc_norm(Jsc *c, const Json *s, const char *path, int *none) {
    List l = { 0 };
    *none = 0;
    if (flatten(c, s, &l, 0, none, path) || *none) { free(l.b); return NULL; }
    const Json *r = l.n ? l.b[0] : &EMPTY;
    for (int i = 1; i < l.n && r; i++) r = merge(c, r, l.b[i], none, path);
    free(l.b);
    return r;
}

const Json *jsc_with(Jsc *c, const Json *s, const char *kw, const Json *b, const char *path) {
    static const Json NO = { .type = JSON_BOOL };
    size_t rest = 0;
    for (size_t i = 0; i < s->len; i++) rest += strcmp(s->keys[i], kw) && !ignored(s->keys[i]);
    if (!rest) return b;
    Json *o = node(c, JSON_OBJECT, rest);
    if (!o) { jsc_error(c, "", "out of memory"); return NULL; }
    for (size_t i = 0; i < s->len; i++)
        if (strcmp(s->keys[i], kw) && !ignored(s->keys[i])) put(o, s->keys[i], s->items[i]);
    int none = 0;
    List l = { 0 };
    if (add(c, &l, o) || flatten(c, b, &l, 0, &none, path)) { free(l.b); return NULL; }
    const Json *r = o;
    for (int i = 1; i < l.n && r; i++) r = merge(c, r, l.b[i], &none, path);
    free(l.b);
    if (!r && none && !c->fail) return &NO;
    return r;
}
