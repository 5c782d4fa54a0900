/* fuzz_gram.h — the harness the grammar fuzzers share: test_fuzz_grammar.c (GBNF),
 * test_fuzz_gram.c (JSON mode's validator) and test_fuzz_schema.c (the JSON Schema
 * compiler). Each runs an automaton fed a reply's bytes (FgLang: its grammar's and its
 * states' functions); here are the checks made after every accepted prefix, the reply
 * written by a random walk over the accepted bytes, the libFuzzer form of an input and
 * the random numbers. A fuzzer keeps its seeds, tokens, mutations and what it checks of
 * its own. Header-only (static functions): each fuzzer includes it once. */
#ifndef K3_FUZZ_GRAM_H
#define K3_FUZZ_GRAM_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "grammar.h"
#include "json.h"

/* The fuzzer's random numbers (xorshift: the same inputs every run). */
static uint64_t fg_rs = 0x9E3779B97F4A7C15ull;
static inline uint64_t fg_rnd(void) {
    fg_rs ^= fg_rs << 13; fg_rs ^= fg_rs >> 7; fg_rs ^= fg_rs << 17;
    return fg_rs >> 11;
}

/* A finding: what, and the document's first n bytes; abort keeps the input (libFuzzer). */
static inline void fg_fail(const char *what, const char *doc, size_t n) {
    printf("FAIL: %s after %zu bytes: %.*s\n", what, n, (int)(n > 300 ? 300 : n), doc);
    fflush(stdout);
    abort();
}

/* An automaton. compile: text (a grammar, a schema) to what the states run on, NULL when
 * refused (the refusal checked); put feeds bytes, 0 while they keep a valid prefix (a
 * refused state is undefined: feed a copy); copy is nonzero when out of memory. */
typedef struct {
    void *(*compile)(const unsigned char *text, size_t n);
    void (*free)(void *g);
    void *(*start)(const void *g);            /* a state at the start */
    int (*copy)(void *to, const void *from);
    int (*put)(void *s, const unsigned char *b, size_t n);
    int (*complete)(const void *s);
    void (*drop)(void *s);
    int json;                                 /* a complete document must be JSON */
} FgLang;

/* The GBNF engine's states (grammar.h), for FgLang's start..drop. */
static inline void fg_gr_free(void *g) { gr_free(g); }
static inline void *fg_gr_start(const void *g) { return gr_new(g); }
static inline int fg_gr_copy(void *to, const void *from) { return gr_copy(to, from); }
static inline int fg_gr_put(void *s, const unsigned char *b, size_t n) { return gr_put(s, b, n); }
static inline int fg_gr_complete(const void *s) { return gr_complete(s); }
static inline void fg_gr_drop(void *s) { gr_state_free(s); }
#define FG_GR_STATES fg_gr_start, fg_gr_copy, fg_gr_put, fg_gr_complete, fg_gr_drop

static inline void *fg_start(const FgLang *L, const void *g) {
    void *s = L->start(g);
    if (!s) fg_fail("out of memory", "", 0);
    return s;
}
static inline void fg_copy(const FgLang *L, void *to, const void *from) {
    if (L->copy(to, from)) fg_fail("out of memory", "", 0);
}

static inline void fg_json(const unsigned char *doc, size_t n) {
    char err[256];
    Json *j = json_parse((const char *)doc, n, err, sizeof err);
    if (!j) fg_fail("complete but not JSON", (const char *)doc, n);
    json_free(j);
}

/* 1 when s has a way on: it is complete, or some byte is accepted (a mask is never empty,
 * the sampler never stuck). w: a scratch state. */
static inline int fg_way_on(const FgLang *L, const void *s, void *w) {
    if (L->complete(s)) return 1;
    for (int c = 0; c < 256; c++) {
        unsigned char b = (unsigned char)c;
        fg_copy(L, w, s);
        if (!L->put(w, &b, 1)) return 1;
    }
    return 0;
}

/* Feeds doc[0..n) byte by byte: every accepted prefix has a way on, feeding it in one
 * piece gives the same answer, and (L->json) a complete one is JSON. The bytes accepted. */
static inline size_t fg_check_doc(const FgLang *L, const void *g, const unsigned char *doc,
                                  size_t n) {
    void *s = fg_start(L, g), *w = fg_start(L, g), *whole = fg_start(L, g),
         *x = fg_start(L, g);
    size_t i = 0;
    for (; i < n; i++) {
        fg_copy(L, w, s);
        if (L->put(w, doc + i, 1)) break;
        fg_copy(L, s, w);
        if (!fg_way_on(L, s, x)) fg_fail("a prefix with no way on", (const char *)doc, i + 1);
    }
    int all = !L->put(whole, doc, n);
    if (all != (i == n) || (all && L->complete(whole) != L->complete(s)))
        fg_fail("whole and byte by byte disagree", (const char *)doc, n);
    if (L->json && L->complete(s)) fg_json(doc, i);
    L->drop(s); L->drop(w); L->drop(whole); L->drop(x);
    return i;
}

/* How a walk goes: at a complete state it ends one time in stop; prefer: structural bytes
 * ("}],: digits, literals) are preferred, so a JSON document ends; mask (or NULL): a check
 * at every step of state s (w a scratch state), out[0..n) the bytes so far. */
typedef struct {
    int stop, prefer;
    void (*mask)(void *ctx, const void *s, void *w, const unsigned char *out, size_t n);
    void *ctx;
} FgWalk;

/* A reply written by choosing among the accepted bytes (so deep states are reached, not
 * only what mutation finds), at most cap; its length, *done (if not NULL) whether it is
 * complete. */
static inline size_t fg_walk(const FgLang *L, const void *g, const FgWalk *how,
                             unsigned char *out, size_t cap, int *done) {
    void *s = fg_start(L, g), *w = fg_start(L, g);
    size_t n = 0;
    while (n < cap) {
        if (L->complete(s) && fg_rnd() % (unsigned)how->stop == 0) break;
        if (how->mask) how->mask(how->ctx, s, w, out, n);
        unsigned char ok[256];
        int k = 0;
        for (int c = 0; c < 256; c++) {
            unsigned char b = (unsigned char)c;
            fg_copy(L, w, s);
            if (!L->put(w, &b, 1)) ok[k++] = b;
        }
        if (!k) break;                            /* complete, nothing may follow */
        unsigned char b = ok[fg_rnd() % (unsigned)k];
        for (int i = 0; how->prefer && i < k && fg_rnd() % 2; i++)
            if (ok[i] && strchr("\"}],:0123456789tfn", ok[i])) { b = ok[i]; break; }
        if (L->put(s, &b, 1)) fg_fail("a byte the grammar accepted, refused", (char *)out, n);
        out[n++] = b;
    }
    if (done) *done = L->complete(s);
    L->drop(s); L->drop(w);
    return n;
}

/* One grammar g's round: a walk into doc (at most cap bytes) fed back and checked, then 1
 * to 3 mutations of it (mutate) checked again. 1 when the walk ended complete; *dn the
 * mutated document's length. */
static inline int fg_round(const FgLang *L, const void *g, const FgWalk *how,
                           unsigned char *doc, size_t cap, size_t *dn,
                           void (*mutate)(unsigned char *b, size_t *n)) {
    size_t n = fg_walk(L, g, how, doc, cap, NULL);
    if (fg_check_doc(L, g, doc, n) != n) fg_fail("the walk's own bytes refused",
                                                 (const char *)doc, n);
    void *st = fg_start(L, g);
    int complete = !L->put(st, doc, n) && L->complete(st);
    L->drop(st);
    for (int m = 1 + (int)(fg_rnd() % 3); m > 0; m--) mutate(doc, &n);
    fg_check_doc(L, g, doc, n);
    *dn = n;
    return complete;
}

/* The libFuzzer form of an input: the grammar's text, a NUL byte, then a document. */
static inline void fg_one(const FgLang *L, const unsigned char *d, size_t n) {
    const unsigned char *z = memchr(d, 0, n);
    size_t sl = z ? (size_t)(z - d) : n;
    void *g = L->compile(d, sl);
    if (!g) return;
    if (z) fg_check_doc(L, g, z + 1, n - sl - 1);
    L->free(g);
}
#endif
