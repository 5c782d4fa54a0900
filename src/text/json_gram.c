/* json_gram.c — JSON mode's schema subset and incremental validator (include/json_gram.h):
 * a pushdown automaton over bytes, one frame per open value. Strings, objects and arrays
 * end at their closing byte; numbers, true/false/null and enum values end at the first
 * byte that cannot extend them (then their parent reads it) or at the end of the reply.
 * Every check is made as early as the bytes allow, so a state that accepted its bytes
 * always has a completion: masking by it never leaves the sampler without a way out. */
#include "json_gram.h"
#include "json_schema.h"
#include "grammar.h"
#include "json.h"
#include "strbuf.h"
#include "tok.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_INT = 16, T_BOOL = 32, T_NULL = 64,
       T_ALL = 127 };
typedef struct {
    unsigned types;
    int nprop; char **pname; size_t *plen; int *pnode; uint64_t required;
    int addl, items;                    /* node indices; addl -1: no other keys */
    long min_items, max_items, min_len, max_len;   /* max -1: none */
    int nlit; char **lit; size_t *llen; /* enum / const, serialised */
} Node;
struct JgSchema { Node *n; int nn, cap, root; GrGrammar *gr; };

enum { F_TOP, F_OBJ, F_ARR, F_STR, F_NUM, F_LIT, F_ENUM };
enum { T_BEFORE, T_DONE };
enum { O_START, O_KEY, O_COLON, O_VALUE, O_INVALUE, O_AFTER, O_NEXT };
enum { A_START, A_INVALUE, A_AFTER, A_NEXT };
enum { N_SIGN, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
static const char *const WORD[3] = { "true", "false", "null" };

/* ---- the schema ---- */
static int new_node(JgSchema *g) {
    if (g->nn == g->cap) {
        int c = g->cap ? g->cap * 2 : 16;
        Node *n = realloc(g->n, sizeof *n * (size_t)c);
        if (!n) return -1;
        g->n = n; g->cap = c;
    }
    Node *n = &g->n[g->nn];
    memset(n, 0, sizeof *n);
    n->types = T_ALL; n->max_items = n->max_len = -1;
    return g->nn++;
}

void jg_free(JgSchema *g) {
    if (!g) return;
    for (int i = 0; i < g->nn; i++) {
        Node *n = &g->n[i];
        for (int k = 0; k < n->nprop; k++) free(n->pname[k]);
        for (int k = 0; k < n->nlit; k++) free(n->lit[k]);
        free(n->pname); free(n->plen); free(n->pnode); free(n->lit); free(n->llen);
    }
    gr_free(g->gr);
    free(g->n); free(g);
}

const GrGrammar *jg_grammar(const JgSchema *g) { return g ? g->gr : NULL; }

/* v compact: the form a constrained reply must write to match it */
static void ser(Buf *o, const Json *v) {
    char t[40];
    switch (v->type) {
    case JSON_NULL: buf_add(o, "null", 4); break;
    case JSON_BOOL: buf_add(o, v->boolean ? "true" : "false", v->boolean ? 4 : 5); break;
    case JSON_NUMBER:
        if (v->is_integer) snprintf(t, sizeof t, "%lld", (long long)v->integer);
        else for (int p = 1; p <= 17; p++) {     /* the shortest that reads back */
            snprintf(t, sizeof t, "%.*g", p, v->number);
            if (strtod(t, NULL) == v->number) break;
        }
        buf_add(o, t, strlen(t));
        break;
    case JSON_STRING: buf_json(o, v->str, v->len); break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        buf_add(o, v->type == JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) buf_add(o, ",", 1);
            if (v->type == JSON_OBJECT) { buf_json(o, v->keys[i], strlen(v->keys[i]));
                                          buf_add(o, ":", 1); }
            ser(o, v->items[i]);
        }
        buf_add(o, v->type == JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}

#define REFUSE(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
/* s for a message: at most 60 bytes, control bytes as '?' (a refusal echoes nothing raw) */
static const char *clean(const char *s, char out[64]) {
    size_t i = 0;
    for (; s[i] && i < 60; i++) out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    out[i] = 0;
    return out;
}
static int compile(JgSchema *g, const Json *s, const char *path, int depth, char *err,
                   size_t errlen);

static int count_kw(const Json *v, const char *kw, const char *path, long *out, char *err,
                    size_t errlen) {
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer > 1 << 30)
        REFUSE("%s%s'%s' must be an integer >= 0", path, *path ? ": " : "", kw);
    *out = (long)v->integer;
    return 0;
}

static int types(const Json *v, unsigned *out, const char *path, char *err, size_t errlen) {
    static const char *const name[] = { "object", "array", "string", "number", "integer",
                                        "boolean", "null" };
    const Json *const *it = (const Json *const *)&v;
    size_t n = 1;
    if (v->type == JSON_ARRAY) { it = (const Json *const *)v->items; n = v->len; }
    *out = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned k = 0;
        for (int t = 0; t < 7 && it[i]->type == JSON_STRING; t++)
            if (!strcmp(it[i]->str, name[t])) k = 1u << t;
        if (!k) REFUSE("%s%s'type' must be object, array, string, number, integer, boolean, "
                       "null or a list of them", path, *path ? ": " : "");
        *out |= k;
    }
    if (!*out) REFUSE("%s%s'type' must not be empty", path, *path ? ": " : "");
    return 0;
}

static int literals(JgSchema *g, int ni, const Json *v, int one, const char *path, char *err,
                    size_t errlen) {
    const Json *const *it = (const Json *const *)&v;
    size_t n = 1;
    if (!one) {
        if (v->type != JSON_ARRAY || v->len == 0 || v->len > JG_MAX_PROPS)
            REFUSE("%s%s'enum' must be an array of 1 to %d values", path, *path ? ": " : "",
                   JG_MAX_PROPS);
        it = (const Json *const *)v->items; n = v->len;
    }
    Node *nd = &g->n[ni];
    nd->lit = calloc(n, sizeof *nd->lit); nd->llen = calloc(n, sizeof *nd->llen);
    if (!nd->lit || !nd->llen) REFUSE("out of memory");
    for (size_t i = 0; i < n; i++) {
        Buf o = { 0 };
        ser(&o, it[i]);
        if (o.oom) { free(o.b); REFUSE("out of memory"); }
        nd->lit[nd->nlit] = o.b; nd->llen[nd->nlit++] = o.n;
    }
    return 0;
}

static int properties(JgSchema *g, int ni, const Json *v, const char *path, int depth,
                      char *err, size_t errlen) {
    if (v->type != JSON_OBJECT) REFUSE("%s%s'properties' must be an object", path,
                                       *path ? ": " : "");
    if (v->len > JG_MAX_PROPS) REFUSE("%s%s'properties' has over %d names", path,
                                      *path ? ": " : "", JG_MAX_PROPS);
    int n = (int)v->len;
    char **pn = calloc((size_t)n + 1, sizeof *pn);
    size_t *pl = calloc((size_t)n + 1, sizeof *pl);
    int *pd = calloc((size_t)n + 1, sizeof *pd);
    Node *nd = &g->n[ni];
    nd->pname = pn; nd->plen = pl; nd->pnode = pd;
    if (!pn || !pl || !pd) REFUSE("out of memory");
    for (int i = 0; i < n; i++) {
        char *q = json_quote(v->keys[i], strlen(v->keys[i]));
        if (!q) REFUSE("out of memory");
        size_t ql = strlen(q);
        memmove(q, q + 1, ql - 2); q[ql - 2] = 0;           /* between the quotes */
        char c64[64];
        for (int k = 0; k < i; k++)
            if (!strcmp(pn[k], q)) { free(q); REFUSE("%s: property '%s' twice", path,
                                                     clean(v->keys[i], c64)); }
        pn[i] = q; pl[i] = ql - 2;
        g->n[ni].nprop = i + 1;
        char sub[256];
        snprintf(sub, sizeof sub, "%s%sproperties.%s", path, *path ? "." : "",
                 clean(v->keys[i], c64));
        int c = compile(g, v->items[i], sub, depth + 1, err, errlen);
        if (c < 0) return -1;
        g->n[ni].pnode[i] = c;                 /* (g->n may have moved) */
    }
    return 0;
}

static int required(JgSchema *g, int ni, const Json *v, const char *path, char *err,
                    size_t errlen) {
    if (v->type != JSON_ARRAY) REFUSE("%s%s'required' must be an array of names", path,
                                      *path ? ": " : "");
    for (size_t i = 0; i < v->len; i++) {
        const Json *r = v->items[i];
        int k = -1;
        char *q = r->type == JSON_STRING ? json_quote(r->str, r->len) : NULL;
        for (int p = 0; q && p < g->n[ni].nprop; p++)
            if (strlen(q) == g->n[ni].plen[p] + 2 &&
                !memcmp(q + 1, g->n[ni].pname[p], g->n[ni].plen[p]))
                k = p;
        free(q);
        char c64[64];
        if (k < 0) REFUSE("%s%s'required' names %s%s%s, which is not in 'properties'", path,
                          *path ? ": " : "", r->type == JSON_STRING ? "'" : "a non-string",
                          r->type == JSON_STRING ? clean(r->str, c64) : "",
                          r->type == JSON_STRING ? "'" : "");
        g->n[ni].required |= 1ULL << k;
    }
    return 0;
}

static int compile(JgSchema *g, const Json *s, const char *path, int depth, char *err,
                   size_t errlen) {
    static const char *const ignored[] = { "title", "description", "default", "examples",
                                           "$schema", "$id", "$comment", NULL };
    if (depth >= JG_DEPTH) REFUSE("%s: the schema nests %d deep or more", path, JG_DEPTH);
    if (s->type == JSON_BOOL && s->boolean) return 0;         /* true: any value */
    if (s->type != JSON_OBJECT)
        REFUSE("%s%sa schema must be an object (or true)", path, *path ? ": " : "");
    int ni = new_node(g);
    if (ni < 0) REFUSE("out of memory");
    g->n[ni].addl = 0; g->n[ni].items = 0;
    const Json *props = json_get(s, "properties"), *req = json_get(s, "required");
    if (props && properties(g, ni, props, path, depth, err, errlen)) return -1;
    for (size_t i = 0; i < s->len; i++) {
        const char *k = s->keys[i];
        const Json *v = s->items[i];
        char sub[256];
        int ign = 0;
        for (int a = 0; ignored[a]; a++) ign |= !strcmp(k, ignored[a]);
        if (ign || !strcmp(k, "properties") || !strcmp(k, "required")) continue;
        if (!strcmp(k, "type")) {
            if (types(v, &g->n[ni].types, path, err, errlen)) return -1;
        } else if (!strcmp(k, "additionalProperties")) {
            if (v->type == JSON_BOOL) { g->n[ni].addl = v->boolean ? 0 : -1; continue; }
            snprintf(sub, sizeof sub, "%s%sadditionalProperties", path, *path ? "." : "");
            int c = compile(g, v, sub, depth + 1, err, errlen);
            if (c < 0) return -1;
            g->n[ni].addl = c;
        } else if (!strcmp(k, "items")) {
            snprintf(sub, sizeof sub, "%s%sitems", path, *path ? "." : "");
            if (v->type == JSON_ARRAY) REFUSE("%s: 'items' as an array (tuples) is not "
                                              "supported; give one schema", sub);
            int c = compile(g, v, sub, depth + 1, err, errlen);
            if (c < 0) return -1;
            g->n[ni].items = c;
        } else if (!strcmp(k, "minItems")) {
            if (count_kw(v, k, path, &g->n[ni].min_items, err, errlen)) return -1;
        } else if (!strcmp(k, "maxItems")) {
            if (count_kw(v, k, path, &g->n[ni].max_items, err, errlen)) return -1;
        } else if (!strcmp(k, "minLength")) {
            if (count_kw(v, k, path, &g->n[ni].min_len, err, errlen)) return -1;
        } else if (!strcmp(k, "maxLength")) {
            if (count_kw(v, k, path, &g->n[ni].max_len, err, errlen)) return -1;
        } else if (!strcmp(k, "enum") || !strcmp(k, "const")) {
            if (g->n[ni].nlit) REFUSE("%s%s'enum' and 'const' together", path, *path ? ": " : "");
            if (literals(g, ni, v, !strcmp(k, "const"), path, err, errlen)) return -1;
        } else
            REFUSE("%s%sthe keyword '%s' is not supported by k3's JSON mode (type, "
                   "properties, required, additionalProperties, items, minItems, maxItems, "
                   "minLength, maxLength, enum, const)", path, *path ? ": " : "", clean(k, sub));
    }
    if (req && required(g, ni, req, path, err, errlen)) return -1;
    const Node *n = &g->n[ni];
    if ((n->max_items >= 0 && n->min_items > n->max_items) ||
        (n->max_len >= 0 && n->min_len > n->max_len))
        REFUSE("%s%sa minimum above its maximum (minItems/maxItems or minLength/maxLength)",
               path, *path ? ": " : "");
    return ni;
}

static JgSchema *any_node(void) {
    JgSchema *g = calloc(1, sizeof *g);
    if (!g || new_node(g) != 0) { jg_free(g); return NULL; }    /* node 0: any value */
    return g;
}

JgSchema *jg_compile(const Json *s, char *err, size_t errlen) {
    JgSchema *g = any_node();
    if (!g) { snprintf(err, errlen, "out of memory"); return NULL; }
    int r = compile(g, s, "", 0, err, errlen);
    if (r >= 0) { g->root = r; return g; }
    /* beyond the automaton's subset: the schema as a grammar (json_schema.h) */
    char *text = jsc_gbnf(s, err, errlen), e2[300];
    if (text && !(g->gr = gr_parse(text, strlen(text), e2, sizeof e2)))
        snprintf(err, errlen, "the schema's grammar is refused by the grammar engine (%s)", e2);
    free(text);
    if (!g->gr) { jg_free(g); return NULL; }
    return g;
}

int jg_response_format(const Json *j, JgSchema **out, char *err, size_t errlen) {
    const Json *t = json_get(j, "type");
    *out = NULL;
    if (j->type == JSON_NULL) return 0;
    if (j->type != JSON_OBJECT || !t || t->type != JSON_STRING)
        REFUSE("'response_format' must be {\"type\": \"text\" | \"json_object\" | "
               "\"json_schema\"}");
    for (size_t i = 0; i < j->len; i++)
        if (strcmp(j->keys[i], "type") && strcmp(j->keys[i], "json_schema")) {
            char c64[64];
            REFUSE("response_format: unknown field '%s'", clean(j->keys[i], c64));
        }
    char e2[400];
    if (!strcmp(t->str, "text")) return 0;
    if (!strcmp(t->str, "json_object")) *out = jg_any_object();
    else if (!strcmp(t->str, "json_schema")) {
        const Json *js = json_get(j, "json_schema"), *sc = json_get(js, "schema");
        if (!js || js->type != JSON_OBJECT || !sc)
            REFUSE("response_format: json_schema needs {\"json_schema\": {\"schema\": {...}}}");
        for (size_t i = 0; i < js->len; i++)
            if (strcmp(js->keys[i], "name") && strcmp(js->keys[i], "schema") &&
                strcmp(js->keys[i], "strict") && strcmp(js->keys[i], "description")) {
                char c64[64];
                REFUSE("response_format.json_schema: unknown field '%s'",
                       clean(js->keys[i], c64));
            }
        if (!(*out = jg_compile(sc, e2, sizeof e2)))
            REFUSE("response_format.json_schema.schema: %s", e2);
    } else {
        char c64[64];
        REFUSE("'response_format' type must be text, json_object or json_schema, not '%s'",
               clean(t->str, c64));
    }
    if (!*out) REFUSE("out of memory");
    return 0;
}

JgSchema *jg_any_object(void) {
    JgSchema *g = any_node();
    if (!g) return NULL;
    int r = new_node(g);
    if (r < 0) { jg_free(g); return NULL; }
    g->n[r].types = T_OBJ;
    g->root = r;
    return g;
}

/* ---- the state ---- */
void jg_init(JgState *s, const JgSchema *g) {
    memset(s, 0, sizeof *s - sizeof s->f + sizeof s->f[0]);
    s->g = g;
    s->f[0].kind = F_TOP; s->f[0].node = (uint16_t)g->root;
}

void jg_copy(JgState *d, const JgState *s) {
    memcpy(d, s, sizeof *s - sizeof s->f + sizeof s->f[0] * (size_t)(s->depth + 1));
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int ws(JgState *s) { return ++s->ws > JG_MAX_WS ? -1 : 0; }

static JgFrame *push(JgState *s, int kind, int node) {
    if (s->depth >= JG_DEPTH) return NULL;
    JgFrame *f = &s->f[++s->depth];
    memset(f, 0, sizeof *f);
    f->kind = (uint8_t)kind; f->node = (uint16_t)node;
    return f;
}

/* the innermost value is over: its parent moves on */
static void value_done(JgState *s) {
    JgFrame *p = &s->f[--s->depth];
    if (p->kind == F_TOP) p->phase = T_DONE;
    else if (p->kind == F_OBJ) { p->phase = O_AFTER; if (p->prop >= 0) p->seen |= 1ULL << p->prop; }
    else { p->phase = A_AFTER; p->count++; }
}

/* a number, word or enum value that may end here */
static int lazy_done(const JgState *s, const JgFrame *f) {
    if (f->kind == F_NUM)
        return f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC || f->phase == N_EXP;
    if (f->kind == F_LIT) return f->pos == strlen(WORD[f->count]);
    if (f->kind != F_ENUM) return 0;
    const Node *n = &s->g->n[f->node];
    for (int i = 0; i < n->nlit; i++)
        if ((f->cand >> i & 1) && n->llen[i] == f->pos) return 1;
    return 0;
}

/* 1 consumed, 0 not (the value may end before c), -1 refused */
static int lazy_byte(const JgState *s, JgFrame *f, int c) {
    if (f->kind == F_LIT) {
        const char *w = WORD[f->count];
        if (f->pos < strlen(w) && c == w[f->pos]) { f->pos++; return 1; }
        return 0;
    }
    if (f->kind == F_ENUM) {
        const Node *n = &s->g->n[f->node];
        uint64_t nc = 0;
        for (int i = 0; i < n->nlit; i++)
            if ((f->cand >> i & 1) && f->pos < n->llen[i] && (unsigned char)n->lit[i][f->pos] == c)
                nc |= 1ULL << i;
        if (!nc) return 0;
        f->cand = nc; f->pos++;
        return 1;
    }
    const int only_int = !(s->g->n[f->node].types & T_NUM);
    if (c >= '0' && c <= '9') {
        switch (f->phase) {
        case N_SIGN: f->phase = c == '0' ? N_ZERO : N_INT; f->count = 1; return 1;
        case N_ZERO: return 0;
        case N_DOT: f->phase = N_FRAC; f->count = 1; return 1;
        case N_E: case N_ESIGN: f->phase = N_EXP; f->count = 1; return 1;
        default: return ++f->count > JG_MAX_DIGITS ? -1 : 1;
        }
    }
    if (c == '.' && !only_int && (f->phase == N_ZERO || f->phase == N_INT)) {
        f->phase = N_DOT; return 1;
    }
    if ((c == 'e' || c == 'E') && !only_int &&
        (f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC)) {
        f->phase = N_E; return 1;
    }
    if ((c == '+' || c == '-') && f->phase == N_E) { f->phase = N_ESIGN; return 1; }
    return 0;
}

static int start_value(JgState *s, int node, int c) {
    const Node *n = &s->g->n[node];
    JgFrame *f;
    if (n->nlit) {
        if (!(f = push(s, F_ENUM, node))) return -1;
        f->cand = n->nlit == 64 ? ~0ULL : (1ULL << n->nlit) - 1;
        return lazy_byte(s, f, c) == 1 ? 0 : -1;
    }
    unsigned t = n->types;
    int kind = c == '{' ? F_OBJ : c == '[' ? F_ARR : c == '"' ? F_STR :
               c == 't' || c == 'f' || c == 'n' ? F_LIT :
               c == '-' || (c >= '0' && c <= '9') ? F_NUM : -1;
    if (kind < 0 || (kind == F_OBJ && !(t & T_OBJ)) || (kind == F_ARR && !(t & T_ARR)) ||
        (kind == F_STR && !(t & T_STR)) || (kind == F_NUM && !(t & (T_NUM | T_INT))) ||
        (kind == F_LIT && !(t & (c == 'n' ? T_NULL : T_BOOL))))
        return -1;
    if (!(f = push(s, kind, node))) return -1;
    if (kind == F_LIT) { f->count = c == 't' ? 0 : c == 'f' ? 1 : 2; f->pos = 1; }
    if (kind == F_NUM) { f->phase = c == '-' ? N_SIGN : c == '0' ? N_ZERO : N_INT;
                         f->count = c != '-'; }
    return 0;
}

/* Where a value of [lo, hi] of a \u escape can still end (prefix of k digits in v). */
static int hex_ok(const JgFrame *f, unsigned v, int k) {
    unsigned lo = v << 4 * (4 - k), hi = lo + (1u << 4 * (4 - k)) - 1;
    if (f->surr) return !(hi < 0xDC00 || lo > 0xDFFF);   /* the low half must be possible */
    return !(lo >= 0xDC00 && hi <= 0xDFFF);               /* not a lone low half */
}

/* A string's byte: 0 taken, 1 the closing quote, -1 refused; count: code points. */
static int str_byte(JgFrame *f, int c, long max_len) {
    if (f->utf) {
        if (c < f->lo || c > f->hi) return -1;
        f->lo = 0x80; f->hi = 0xBF;
        if (!--f->utf) f->count++;
        return 0;
    }
    if (f->esc == 1) {
        if (c == 'u') { f->esc = 2; f->hex = 0; return 0; }
        if (f->surr || !c || !strchr("\"\\/bfnrt", c)) return -1;
        f->esc = 0; f->count++;
        return 0;
    }
    if (f->esc >= 2) {
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (v < 0) return -1;
        f->hex = (uint16_t)(f->hex * 16 + v);
        if (!hex_ok(f, f->hex, f->esc - 1)) return -1;
        if (f->esc++ < 5) return 0;
        f->esc = 0;
        if (!f->surr && f->hex >= 0xD800 && f->hex <= 0xDBFF) { f->surr = 1; return 0; }
        f->surr = 0; f->count++;
        return 0;
    }
    if (f->surr) { if (c != '\\') return -1; f->esc = 1; return 0; }
    if (c == '"') return 1;
    if (max_len >= 0 && f->count >= (uint32_t)max_len) return -1;
    if (c == '\\') { f->esc = 1; return 0; }
    if (c < 0x20) return -1;
    if (c < 0x80) { f->count++; return 0; }
    f->lo = 0x80; f->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) f->utf = 1;
    else if (c >= 0xE0 && c <= 0xEF) { f->utf = 2; if (c == 0xE0) f->lo = 0xA0;
                                       if (c == 0xED) f->hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { f->utf = 3; if (c == 0xF0) f->lo = 0x90;
                                       if (c == 0xF4) f->hi = 0x8F; }
    else return -1;
    return 0;
}

static uint64_t all_props(const Node *n) {
    return n->nprop == 64 ? ~0ULL : (1ULL << n->nprop) - 1;
}
/* another key may come: an unseen property, or any other name */
static int key_may_come(const Node *n, const JgFrame *f) {
    return n->addl >= 0 || (all_props(n) & ~f->seen);
}

static int obj_byte(JgState *s, JgFrame *f, const Node *n, int c) {
    switch (f->phase) {
    case O_START: case O_NEXT: case O_AFTER:
        if (is_ws(c)) return ws(s);
        if (c == '}' && f->phase != O_NEXT) {
            if ((f->seen & n->required) != n->required) return -1;
            value_done(s);
            return 0;
        }
        if (f->phase == O_AFTER) {
            if (c != ',' || !key_may_come(n, f)) return -1;
            f->phase = O_NEXT;
            return 0;
        }
        if (c != '"' || !key_may_come(n, f)) return -1;
        f->phase = O_KEY; f->pos = 0; f->cand = all_props(n);
        f->esc = f->utf = f->surr = 0; f->count = 0;
        return 0;
    case O_KEY: {
        int r = str_byte(f, c, -1);
        if (r < 0) return -1;
        if (r == 1) {
            f->prop = -1;
            for (int i = 0; i < n->nprop; i++)
                if ((f->cand >> i & 1) && n->plen[i] == f->pos) f->prop = (int16_t)i;
            if (f->prop >= 0 && (f->seen >> f->prop & 1)) return -1;    /* given twice */
            if (f->prop < 0 && n->addl < 0) return -1;
            f->phase = O_COLON;
            return 0;
        }
        uint64_t nc = 0;
        for (int i = 0; i < n->nprop; i++)
            if ((f->cand >> i & 1) && f->pos < n->plen[i] &&
                (unsigned char)n->pname[i][f->pos] == c)
                nc |= 1ULL << i;
        f->cand = nc; f->pos++;
        return n->addl < 0 && !(nc & ~f->seen) ? -1 : 0;
    }
    case O_COLON:
        if (is_ws(c)) return ws(s);
        if (c != ':') return -1;
        f->phase = O_VALUE;
        return 0;
    default:                                              /* O_VALUE */
        if (is_ws(c)) return ws(s);
        f->phase = O_INVALUE;
        return start_value(s, f->prop >= 0 ? n->pnode[f->prop] : n->addl, c);
    }
}

static int arr_byte(JgState *s, JgFrame *f, const Node *n, int c) {
    if (is_ws(c)) return ws(s);
    if (f->phase == A_AFTER) {
        if (c == ',' && (n->max_items < 0 || f->count < (uint32_t)n->max_items)) {
            f->phase = A_NEXT;
            return 0;
        }
        if (c != ']' || f->count < (uint32_t)n->min_items) return -1;
        value_done(s);
        return 0;
    }
    if (c == ']' && f->phase == A_START) {
        if (n->min_items > 0) return -1;
        value_done(s);
        return 0;
    }
    if (f->phase == A_START && n->max_items == 0) return -1;
    f->phase = A_INVALUE;
    return start_value(s, n->items, c);
}

static int step(JgState *s, int c) {
    for (;;) {
        JgFrame *f = &s->f[s->depth];
        const Node *n = &s->g->n[f->node];
        int in_str = f->kind == F_STR || (f->kind == F_OBJ && f->phase == O_KEY);
        if (!is_ws(c) || in_str) s->ws = 0;
        switch (f->kind) {
        case F_TOP:
            if (f->phase == T_DONE) return -1;            /* only the end may follow */
            if (is_ws(c)) return ws(s);
            return start_value(s, f->node, c);
        case F_OBJ: return obj_byte(s, f, n, c);
        case F_ARR: return arr_byte(s, f, n, c);
        case F_STR: {
            int r = str_byte(f, c, n->max_len);
            if (r == 1) {
                if (f->count < (uint32_t)n->min_len) return -1;
                value_done(s);
                return 0;
            }
            return r;
        }
        default: {                                        /* F_NUM, F_LIT, F_ENUM */
            int r = lazy_byte(s, f, c);
            if (r) return r > 0 ? 0 : -1;
            if (!lazy_done(s, f)) return -1;
            value_done(s);                                /* the parent reads c */
        }
        }
    }
}

int jg_put(JgState *s, const unsigned char *b, size_t n) {
    if (s->g->gr) return n ? -1 : 0;             /* a grammar: constrain.h runs it */
    for (size_t i = 0; i < n; i++) if (step(s, b[i])) return -1;
    return 0;
}

int jg_complete(const JgState *s) {
    if (s->g->gr) return 0;
    if (s->depth == 0) return s->f[0].phase == T_DONE;
    return s->depth == 1 && lazy_done(s, &s->f[1]);
}

int jg_mask(const JgState *s, const Tok *t, int V, int end_id, float *logits) {
    static __thread JgState w;
    unsigned char first[256];
    for (int c = 0; c < 256; c++) {                       /* bytes that may come next */
        unsigned char b = (unsigned char)c;
        jg_copy(&w, s);
        first[c] = !jg_put(&w, &b, 1);
    }
    const int nr = tok_n_ranks(t), done = jg_complete(s);
    int left = 0;
    for (int id = 0; id < V; id++) {
        int ok = 0;
        size_t n = 0;
        const char *b = id < nr ? tok_token_bytes(t, id, &n) : NULL;
        if (b && n && first[(unsigned char)b[0]]) {
            jg_copy(&w, s);
            ok = n == 1 || !jg_put(&w, (const unsigned char *)b, n);
        } else if (id == end_id) ok = done;
        if (ok) left++;
        else logits[id] = -INFINITY;
    }
    return left;
}

int jg_mask_drafts(const JgState *s, const Tok *t, int V, int end_id, float *lg,
                   const int *draft, int k) {
    static __thread JgState c;                 /* jg_mask's own copy is another */
    jg_copy(&c, s);
    for (int i = 0; i <= k; i++) {
        if (!jg_mask(&c, t, V, end_id, lg + (size_t)i * V)) return i;
        size_t n = 0;
        const char *b = i < k && draft[i] >= 0 && draft[i] < tok_n_ranks(t) ?
                        tok_token_bytes(t, draft[i], &n) : NULL;
        if (!b || !n || jg_put(&c, (const unsigned char *)b, n)) break;
    }
    return k + 1;
}
