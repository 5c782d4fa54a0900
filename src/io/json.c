/* json.c — strict RFC 8259 JSON DOM.
 *
 * All nodes, strings and child arrays of one document live in a chunked bump arena
 * owned by the root (no per-node malloc), so parsing a 60 MB safetensors index costs
 * one pass and a handful of large allocations. json_free() must be given the root
 * returned by json_parse(); it releases the whole document at once.
 *
 * Strictness: UTF-8 is validated (no overlongs, no encoded surrogates, <= U+10FFFF),
 * control characters inside strings are refused, \u escapes must pair surrogates,
 * numbers follow the RFC grammar exactly, depth is limited to JSON_MAX_DEPTH, and
 * nothing but whitespace may follow the value. Errors read "line L col C: what"
 * (1-based; col counts bytes). */
#include "json.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <pthread.h>

#define JSON_MAX_DEPTH 512
#define ARENA_MIN_CHUNK ((size_t)64 << 10)
#define ARENA_MAX_CHUNK ((size_t)32 << 20)
#define CHUNK_HDR ((sizeof(Chunk) + 15) & ~(size_t)15)

typedef struct Chunk { struct Chunk *next; size_t cap, used; } Chunk;
typedef struct { Chunk *head; size_t next_cap; } Arena;

/* The root node is the first member so json_free(root) finds the arena. */
typedef struct { Json root; Arena arena; } JsonDoc;

/* Freed chunks are kept (up to CACHE_MAX bytes) for the next document: indexing 96
 * safetensors headers in a row then reuses warm memory instead of faulting in fresh
 * pages for every header. */
#define CACHE_MAX ((size_t)32 << 20)
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static Chunk *cache_head;
static size_t cache_bytes;

static Chunk *chunk_new(size_t cap) {
    Chunk *c = NULL;
    pthread_mutex_lock(&cache_mu);
    for (Chunk **pp = &cache_head; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap >= cap && (*pp)->cap <= cap * 8 + ((size_t)1 << 20)) {
            c = *pp; *pp = c->next; cache_bytes -= c->cap;
            break;
        }
    }
    pthread_mutex_unlock(&cache_mu);
    if (c) { c->used = 0; c->next = NULL; return c; }
    size_t total = CHUNK_HDR + cap;
#ifdef MADV_HUGEPAGE
    /* Large documents (a 60 MB safetensors index) are dominated by page faults on
     * fresh memory; 2 MB pages cut them 512-fold where the kernel allows it. */
    if (total >= ((size_t)4 << 20)) {
        total = (total + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
        void *m = NULL;
        if (posix_memalign(&m, (size_t)2 << 20, total) == 0) {
            madvise(m, total, MADV_HUGEPAGE);
            c = m;
            cap = total - CHUNK_HDR;
        }
    }
#endif
    if (!c) c = malloc(total);
    if (!c) return NULL;
    c->cap = cap; c->used = 0; c->next = NULL;
    return c;
}

static void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    Chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = a->next_cap < ARENA_MIN_CHUNK ? ARENA_MIN_CHUNK : a->next_cap;
        if (n > cap / 4) {
            /* a big block gets its own chunk, kept below the current one */
            Chunk *nc = chunk_new(n);
            if (!nc) return NULL;
            nc->used = n;
            if (c) { nc->next = c->next; c->next = nc; } else a->head = nc;
            return (char *)nc + CHUNK_HDR;
        }
        Chunk *nc = chunk_new(cap);
        if (!nc) return NULL;
        cap = nc->cap;
        a->next_cap = cap * 2 > ARENA_MAX_CHUNK ? ARENA_MAX_CHUNK : cap * 2;
        nc->next = c; a->head = nc; c = nc;
    }
    void *p = (char *)c + CHUNK_HDR + c->used;
    c->used += n;
    return p;
}

static void arena_free(Arena *a) {
    Chunk *c = a->head;
    while (c) {
        Chunk *n = c->next;
        pthread_mutex_lock(&cache_mu);
        int keep = cache_bytes + c->cap <= CACHE_MAX;
        if (keep) { c->next = cache_head; cache_head = c; cache_bytes += c->cap; }
        pthread_mutex_unlock(&cache_mu);
        if (!keep) free(c);
        c = n;
    }
    a->head = NULL;
}

typedef struct {
    const unsigned char *s, *p, *end;
    Arena *arena;
    char *err; size_t errlen;
    int failed;
    /* scratch stack for children of open containers (copied to the arena at close) */
    Json **stk; char **kstk; size_t sn, scap;
} P;

static void fail(P *p, const unsigned char *at, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = 1;
    if (!p->err || !p->errlen) return;
    size_t line = 1, col = 1;
    for (const unsigned char *q = p->s; q < at && q < p->end; q++) {
        if (*q == '\n') { line++; col = 1; } else col++;
    }
    char msg[256];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
    snprintf(p->err, p->errlen, "line %zu col %zu: %s", line, col, msg);
}

static Json *new_node(P *p, JsonType t) {
    Json *j = arena_alloc(p->arena, sizeof(Json));
    if (!j) { fail(p, p->p, "out of memory"); return NULL; }
    memset(j, 0, sizeof *j);
    j->type = t;
    return j;
}

static int push(P *p, Json *v, char *k) {
    if (p->sn == p->scap) {
        size_t nc = p->scap ? p->scap * 2 : 256;
        Json **ns = realloc(p->stk, nc * sizeof *ns);
        if (!ns) { fail(p, p->p, "out of memory"); return -1; }
        p->stk = ns;
        char **nk = realloc(p->kstk, nc * sizeof *nk);
        if (!nk) { fail(p, p->p, "out of memory"); return -1; }
        p->kstk = nk;
        p->scap = nc;
    }
    p->stk[p->sn] = v; p->kstk[p->sn] = k; p->sn++;
    return 0;
}

static inline void skip_ws(P *p) {
    const unsigned char *q = p->p, *e = p->end;
    while (q < e && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) q++;
    p->p = q;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(P *p, const unsigned char *q) {
    if (p->end - q < 4) { fail(p, q, "truncated \\u escape"); return -1; }
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0) { fail(p, q + i, "invalid hex digit in \\u escape"); return -1; }
        v = v * 16 + h;
    }
    return v;
}

/* Length of a valid UTF-8 sequence at q (lead byte >= 0x80), or 0 if invalid. */
static int utf8_len(const unsigned char *q, const unsigned char *e) {
    unsigned c = q[0];
    ptrdiff_t avail = e - q;
    if (c >= 0xC2 && c <= 0xDF) {
        return (avail >= 2 && (q[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (q[1] & 0xC0) != 0x80 || (q[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && q[1] < 0xA0) return 0;          /* overlong */
        if (c == 0xED && q[1] >= 0xA0) return 0;         /* UTF-16 surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (q[1] & 0xC0) != 0x80 || (q[2] & 0xC0) != 0x80 ||
            (q[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && q[1] < 0x90) return 0;          /* overlong */
        if (c == 0xF4 && q[1] >= 0x90) return 0;         /* > U+10FFFF */
        return 4;
    }
    return 0;
}

static size_t put_utf8(unsigned char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18)); o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->p is just past the opening quote. Returns an arena string (NUL-terminated). */
static char *parse_string(P *p, size_t *out_len) {
    const unsigned char *start = p->p, *q = start, *e = p->end;
    /* fast scan: plain ASCII without escapes */
    while (q < e && *q >= 0x20 && *q != '"' && *q != '\\' && *q < 0x80) q++;
    if (q < e && *q == '"') {
        size_t n = (size_t)(q - start);
        char *s = arena_alloc(p->arena, n + 1);
        if (!s) { fail(p, q, "out of memory"); return NULL; }
        memcpy(s, start, n); s[n] = 0;
        *out_len = n; p->p = q + 1;
        return s;
    }
    /* general path: find the closing quote first to size the buffer (decoded <= raw) */
    const unsigned char *r = q;
    while (r < e && *r != '"') { if (*r == '\\') r++; r++; }
    if (r >= e) { fail(p, start - 1, "unterminated string"); return NULL; }
    unsigned char *o = arena_alloc(p->arena, (size_t)(r - start) + 1), *o0 = o;
    if (!o) { fail(p, q, "out of memory"); return NULL; }
    memcpy(o, start, (size_t)(q - start)); o += q - start;
    while (q < e) {
        unsigned c = *q;
        if (c == '"') break;
        if (c < 0x20) {
            fail(p, q, "control character 0x%02x in string (must be escaped)", c); return NULL;
        }
        if (c == '\\') {
            if (q + 1 >= e) { fail(p, q, "unterminated string"); return NULL; }
            unsigned char x = q[1];
            q += 2;
            switch (x) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u': {
                int v = read_hex4(p, q);
                if (v < 0) return NULL;
                unsigned cp = (unsigned)v;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail(p, q - 2, "lone low surrogate \\u%04X", cp); return NULL;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (e - (q + 4) < 6 || q[4] != '\\' || q[5] != 'u') {
                        fail(p, q - 2, "high surrogate \\u%04X not followed by a low surrogate",
                             cp);
                        return NULL;
                    }
                    int lo = read_hex4(p, q + 6);
                    if (lo < 0) return NULL;
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        fail(p, q - 2, "high surrogate \\u%04X not followed by a low surrogate",
                             cp);
                        return NULL;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                    q += 6;
                }
                q += 4;
                o += put_utf8(o, cp);
                break;
            }
            default:
                fail(p, q - 2, "invalid escape '\\%c'", (x >= 0x20 && x < 0x7F) ? x : '?');
                return NULL;
            }
            continue;
        }
        if (c < 0x80) { *o++ = (unsigned char)c; q++; continue; }
        int n = utf8_len(q, e);
        if (!n) { fail(p, q, "invalid UTF-8 byte 0x%02x in string", c); return NULL; }
        memcpy(o, q, (size_t)n); o += n; q += n;
    }
    if (q >= e) { fail(p, start - 1, "unterminated string"); return NULL; }
    *o = 0;
    *out_len = (size_t)(o - o0);
    p->p = q + 1;
    return (char *)o0;
}

static Json *parse_number(P *p) {
    const unsigned char *st = p->p, *q = st, *e = p->end;
    int neg = 0, is_int = 1;
    if (q < e && *q == '-') { neg = 1; q++; }
    if (q >= e || *q < '0' || *q > '9') { fail(p, st, "invalid number"); return NULL; }
    uint64_t mag = 0; int ovf = 0;
    if (*q == '0') {
        q++;
        if (q < e && *q >= '0' && *q <= '9') { fail(p, st, "leading zero in number"); return NULL; }
    } else {
        while (q < e && *q >= '0' && *q <= '9') {
            unsigned d = (unsigned)(*q - '0');
            if (mag > (UINT64_MAX - d) / 10) ovf = 1; else mag = mag * 10 + d;
            q++;
        }
    }
    if (q < e && *q == '.') {
        is_int = 0; q++;
        if (q >= e || *q < '0' || *q > '9') { fail(p, q, "digit expected after '.'"); return NULL; }
        while (q < e && *q >= '0' && *q <= '9') q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        is_int = 0; q++;
        if (q < e && (*q == '+' || *q == '-')) q++;
        if (q >= e || *q < '0' || *q > '9') {
            fail(p, q, "digit expected in exponent"); return NULL;
        }
        while (q < e && *q >= '0' && *q <= '9') q++;
    }
    Json *j = new_node(p, JSON_NUMBER);
    if (!j) return NULL;
    p->p = q;
    int fits = is_int && !ovf &&
               (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX);
    if (fits) {
        j->is_integer = 1;
        j->integer = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag)
                         : (int64_t)mag;
        if (mag <= (1ull << 53)) { j->number = neg ? -(double)mag : (double)mag; return j; }
    }
    size_t n = (size_t)(q - st);
    char buf[64], *b = n < sizeof buf ? buf : malloc(n + 1);
    if (!b) { fail(p, st, "out of memory"); return NULL; }
    memcpy(b, st, n); b[n] = 0;
    j->number = strtod(b, NULL);           /* grammar already checked; "C" locale */
    if (b != buf) free(b);
    return j;
}

static Json *parse_value(P *p, int depth);

static Json *finish_container(P *p, Json *j, size_t base, int is_obj) {
    size_t n = p->sn - base;
    j->len = n;
    if (n) {
        j->items = arena_alloc(p->arena, n * sizeof(Json *));
        if (!j->items) { fail(p, p->p, "out of memory"); return NULL; }
        memcpy(j->items, p->stk + base, n * sizeof(Json *));
        if (is_obj) {
            j->keys = arena_alloc(p->arena, n * sizeof(char *));
            if (!j->keys) { fail(p, p->p, "out of memory"); return NULL; }
            memcpy(j->keys, p->kstk + base, n * sizeof(char *));
        }
    }
    p->sn = base;
    return j;
}

static Json *parse_array(P *p, int depth) {
    Json *j = new_node(p, JSON_ARRAY);
    if (!j) return NULL;
    size_t base = p->sn;
    p->p++;
    skip_ws(p);
    if (p->p < p->end && *p->p == ']') { p->p++; return j; }
    for (;;) {
        Json *v = parse_value(p, depth + 1);
        if (!v || push(p, v, NULL)) return NULL;
        skip_ws(p);
        if (p->p >= p->end) {
            fail(p, p->p, "unexpected end of input in array (missing ']')"); return NULL;
        }
        if (*p->p == ',') { p->p++; skip_ws(p); continue; }
        if (*p->p == ']') { p->p++; break; }
        fail(p, p->p, "expected ',' or ']' in array"); return NULL;
    }
    return finish_container(p, j, base, 0);
}

static Json *parse_object(P *p, int depth) {
    Json *j = new_node(p, JSON_OBJECT);
    if (!j) return NULL;
    size_t base = p->sn;
    p->p++;
    skip_ws(p);
    if (p->p < p->end && *p->p == '}') { p->p++; return j; }
    for (;;) {
        if (p->p >= p->end) {
            fail(p, p->p, "unexpected end of input in object (missing '}')"); return NULL;
        }
        if (*p->p != '"') { fail(p, p->p, "expected a string key"); return NULL; }
        p->p++;
        size_t kl;
        char *k = parse_string(p, &kl);
        if (!k) return NULL;
        skip_ws(p);
        if (p->p >= p->end || *p->p != ':') {
            fail(p, p->p, "expected ':' after object key"); return NULL;
        }
        p->p++;
        skip_ws(p);
        Json *v = parse_value(p, depth + 1);
        if (!v || push(p, v, k)) return NULL;
        skip_ws(p);
        if (p->p >= p->end) {
            fail(p, p->p, "unexpected end of input in object (missing '}')"); return NULL;
        }
        if (*p->p == ',') { p->p++; skip_ws(p); continue; }
        if (*p->p == '}') { p->p++; break; }
        fail(p, p->p, "expected ',' or '}' in object"); return NULL;
    }
    return finish_container(p, j, base, 1);
}

static int match_lit(P *p, const char *lit, size_t n) {
    if ((size_t)(p->end - p->p) >= n && memcmp(p->p, lit, n) == 0) { p->p += n; return 1; }
    return 0;
}

static Json *parse_value(P *p, int depth) {
    if (depth > JSON_MAX_DEPTH) {
        fail(p, p->p, "nesting deeper than %d", JSON_MAX_DEPTH); return NULL;
    }
    skip_ws(p);
    if (p->p >= p->end) { fail(p, p->p, "unexpected end of input (value expected)"); return NULL; }
    Json *j;
    switch (*p->p) {
    case '{': return parse_object(p, depth);
    case '[': return parse_array(p, depth);
    case '"': {
        p->p++;
        size_t n;
        char *s = parse_string(p, &n);
        if (!s || !(j = new_node(p, JSON_STRING))) return NULL;
        j->str = s; j->len = n;
        return j;
    }
    case 't':
        if (!match_lit(p, "true", 4)) break;
        if ((j = new_node(p, JSON_BOOL))) j->boolean = 1;
        return j;
    case 'f':
        if (!match_lit(p, "false", 5)) break;
        return new_node(p, JSON_BOOL);
    case 'n':
        if (!match_lit(p, "null", 4)) break;
        return new_node(p, JSON_NULL);
    default:
        if (*p->p == '-' || (*p->p >= '0' && *p->p <= '9')) return parse_number(p);
        break;
    }
    unsigned c = *p->p;
    if (c >= 0x20 && c < 0x7F) fail(p, p->p, "unexpected character '%c'", c);
    else fail(p, p->p, "unexpected byte 0x%02x", c);
    return NULL;
}

Json *json_parse(const char *text, size_t n, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    JsonDoc *d = calloc(1, sizeof *d);
    if (!d) { if (err && errlen) snprintf(err, errlen, "out of memory"); return NULL; }
    P p = { (const unsigned char *)text, (const unsigned char *)text,
            (const unsigned char *)text + n, &d->arena, err, errlen, 0, NULL, NULL, 0, 0 };
    if (!text) p.s = p.p = p.end = (const unsigned char *)"";
    if (p.end - p.p >= 3 && p.p[0] == 0xEF && p.p[1] == 0xBB && p.p[2] == 0xBF) {
        fail(&p, p.p,
             "UTF-8 byte order mark at the start is not allowed (save the file without BOM)");
    } else {
        Json *v = parse_value(&p, 1);
        if (v) {
            skip_ws(&p);
            if (p.p < p.end) fail(&p, p.p, "trailing characters after the JSON value");
            else { d->root = *v; }
        }
    }
    free(p.stk); free(p.kstk);
    if (p.failed) { arena_free(&d->arena); free(d); return NULL; }
    return &d->root;
}

void json_free(Json *j) {
    if (!j) return;
    JsonDoc *d = (JsonDoc *)j;      /* root is the first member */
    arena_free(&d->arena);
    free(d);
}

const Json *json_get(const Json *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT || !key) return NULL;
    for (size_t i = obj->len; i-- > 0;)
        if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
    return NULL;
}

const Json *json_at(const Json *arr, size_t i) {
    if (!arr || arr->type != JSON_ARRAY || i >= arr->len) return NULL;
    return arr->items[i];
}

const char *json_type_name(JsonType t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "unknown";
}

/* Invalid UTF-8 bytes in s become U+FFFD so the result is always valid JSON. */
char *json_quote(const char *s, size_t n) {
    const unsigned char *q = (const unsigned char *)s, *e = q + n;
    size_t cap = n * 6 + 3;
    if (n > ((size_t)-1 - 3) / 6) return NULL;
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    *o++ = '"';
    while (q < e) {
        unsigned c = *q;
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; q++; continue; }
        if (c < 0x20) {
            *o++ = '\\';
            switch (c) {
            case '\b': *o++ = 'b'; break;
            case '\f': *o++ = 'f'; break;
            case '\n': *o++ = 'n'; break;
            case '\r': *o++ = 'r'; break;
            case '\t': *o++ = 't'; break;
            default: o += sprintf(o, "u%04x", c); break;
            }
            q++; continue;
        }
        if (c < 0x80) { *o++ = (char)c; q++; continue; }
        int l = utf8_len(q, e);
        if (l) { memcpy(o, q, (size_t)l); o += l; q += l; }
        else { memcpy(o, "\xEF\xBF\xBD", 3); o += 3; q++; }
    }
    *o++ = '"';
    *o = 0;
    return out;
}

Json *json_file(const char *path, size_t max, uint64_t *hash, char *err, size_t errlen) {
    size_t len = 0;
    char *text = k3_slurp(path, max, &len, err, errlen);
    if (!text) return NULL;
    if (hash) *hash = k3_hash(K3_HASH_INIT, text, len);
    char jerr[256];
    Json *j = json_parse(text, len, jerr, sizeof jerr);
    free(text);
    if (!j) snprintf(err, errlen, "%s: not valid JSON: %s", path, jerr);
    return j;
}
