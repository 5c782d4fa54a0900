/* test_fuzz_grammar.c — GBNF grammars (src/text/grammar_parse.c, grammar.c) under fuzzing.
 * An input is grammar text, a NUL byte, then a reply. The grammar parses or is refused with
 * a message "grammar L:C: ..." (or "grammar: ...") that echoes no raw control byte; the
 * reply is fed byte by byte, and after every accepted prefix:
 *   - the prefix has a way on: gr_complete, or some byte is accepted (a mask is never
 *     empty, the sampler never stuck);
 *   - feeding it in one piece or byte by byte gives the same answer; a copy agrees.
 * The built-in loop mutates seed grammars (bytes and GBNF tokens), writes replies by a
 * random walk over the accepted bytes (so deep states are reached) and, with the tiny
 * tokenizer, checks gr_mask keeps exactly the tokens that feeding accepts. Runs in a few
 * seconds; `test_fuzz_grammar SECONDS` runs longer (`make fuzz` without libFuzzer).
 *
 * Built with -DK3_LIBFUZZER it is the libFuzzer target grammar. */
#include "grammar.h"
#include "tok.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void fail(const char *what, const char *doc, size_t n) {
    printf("FAIL: %s after %zu bytes: %.*s\n", what, n, (int)(n > 300 ? 300 : n), doc);
    fflush(stdout);
    abort();
}

static int way_on(const GrState *s, GrState *w) {
    if (gr_complete(s)) return 1;
    for (int c = 0; c < 256; c++) {
        unsigned char b = (unsigned char)c;
        gr_copy(w, s);
        if (!gr_put(w, &b, 1)) return 1;
    }
    return 0;
}

/* Feeds doc[0..n) byte by byte with the checks above; the bytes accepted. */
static size_t check_doc(const GrGrammar *g, const unsigned char *doc, size_t n) {
    GrState *s = gr_new(g), *w = gr_new(g), *whole = gr_new(g), *x = gr_new(g);
    size_t i = 0;
    for (; i < n; i++) {
        gr_copy(w, s);
        if (gr_put(w, doc + i, 1)) break;
        gr_copy(s, w);
        if (!way_on(s, x)) fail("a prefix with no way on", (const char *)doc, i + 1);
    }
    int all = !gr_put(whole, doc, n);
    if (all != (i == n) || (all && gr_complete(whole) != gr_complete(s)))
        fail("whole and byte by byte disagree", (const char *)doc, n);
    gr_state_free(s); gr_state_free(w); gr_state_free(whole); gr_state_free(x);
    return i;
}

static GrGrammar *grammar_of(const unsigned char *d, size_t n) {
    char err[512] = "";
    GrGrammar *g = gr_parse((const char *)d, n, err, sizeof err);
    if (!g) {
        int raw = 0;
        for (const char *p = err; *p; p++) raw |= (unsigned char)*p < 0x20;
        if (!err[0] || raw || strncmp(err, "grammar", 7))
            fail("a refusal without a clean message", err, strlen(err));
    }
    return g;
}

static void one(const unsigned char *d, size_t n) {
    const unsigned char *z = memchr(d, 0, n);
    size_t sl = z ? (size_t)(z - d) : n;
    GrGrammar *g = grammar_of(d, sl);
    if (!g) return;
    if (z) check_doc(g, z + 1, n - sl - 1);
    gr_free(g);
}

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { one(d, n); return 0; }
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11; }
#define N(a) (sizeof a / sizeof *a)

static const char *const SEEDS[] = {
    "root ::= \"a\" | \"b\" root",
    "root ::= \"[\" num (\",\" num){0,3} \"]\"\nnum ::= \"-\"? [1-9] [0-9]{0,2} | \"0\"",
    "root ::= obj\nobj ::= \"{\" (pair (\",\" pair)*)? \"}\"\npair ::= str \":\" val\n"
    "val ::= obj | str | [0-9]+ | \"true\"\nstr ::= \"\\\"\" [^\"\\\\\\n]{0,4} \"\\\"\"",
    "root ::= ( # c\n  [a-z]+ \" \" |\n  \"\\u00e9\"{2,} )* \"!\"",
    "root ::= .{1,3} [^\\x00-\\x7f]? \"\\U0001F600\"",
    "root ::= a b c\na ::= \"x\" | \"\"\nb ::= (\"y\" | ){1,3}\nc ::= \"!\"?",
    "root ::= p\np ::= \"(\" p \")\" p | \"\"",
    "root ::= [\\]\\-a-c]{,3} (\"q\" | [^q])?",
};
static const char *const TOKENS[] = { "::=", "|", "(", ")", "*", "+", "?", "{2}", "{1,}",
    "{0,3}", "{,2}", "\"", "[", "]", "[^", "-", ".", "\\", "\\x4", "\\u00e9", "\\U0010FFFF",
    "\n", " ", "#", "root", "a", "root ::= ", "\xc3\xa9", "\xff", "\xed\xa0\x80", "{999}" };

static void mutate(unsigned char *b, size_t *n, size_t cap) {
    size_t at = *n ? rnd() % (*n + 1) : 0;
    switch (rnd() % 4) {
    case 0: if (*n) { b[rnd() % *n] = (unsigned char)rnd(); } break;
    case 1: if (*n) {                                     /* delete a run */
        size_t k = 1 + rnd() % 4;
        if (at + k > *n) k = *n - at;
        memmove(b + at, b + at + k, *n - at - k);
        *n -= k;
    } break;
    default: {                                            /* insert a token */
        const char *t = TOKENS[rnd() % N(TOKENS)];
        size_t k = strlen(t);
        if (*n + k > cap) return;
        memmove(b + at + k, b + at, *n - at);
        memcpy(b + at, t, k);
        *n += k;
    }
    }
}

/* A reply written by choosing among the accepted bytes. */
static size_t walk(const GrGrammar *g, unsigned char *out, size_t cap, const Tok *t) {
    GrState *s = gr_new(g), *w = gr_new(g);
    size_t n = 0;
    static float lg[1 << 12];
    while (n < cap) {
        if (gr_complete(s) && rnd() % 4 == 0) break;
        if (t) {                                  /* the mask = feeding each token */
            int V = tok_vocab_size(t) < (1 << 12) ? tok_vocab_size(t) : 1 << 12;
            int nr = tok_n_ranks(t), left = 0;
            for (int i = 0; i < V; i++) lg[i] = 0;
            int got = gr_mask(s, t, V, nr, lg);
            for (int id = 0; id < V; id++) {
                size_t m = 0;
                const char *b = id < nr ? tok_token_bytes(t, id, &m) : NULL;
                gr_copy(w, s);
                int ok = (b && m && !gr_put(w, (const unsigned char *)b, m)) ||
                         (id == nr && gr_complete(s));
                if (ok != (lg[id] == 0)) fail("gr_mask disagrees with feeding", (char *)out, n);
                left += ok;
            }
            if (got != left || !got) fail("gr_mask's count, or an empty mask", (char *)out, n);
        }
        unsigned char ok[256];
        int k = 0;
        for (int c = 0; c < 256; c++) {
            unsigned char b = (unsigned char)c;
            gr_copy(w, s);
            if (!gr_put(w, &b, 1)) ok[k++] = b;
        }
        if (!k) break;                            /* complete, nothing may follow */
        unsigned char b = ok[rnd() % k];
        gr_put(s, &b, 1);
        out[n++] = b;
    }
    gr_state_free(s); gr_state_free(w);
    return n;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    char err[512];
    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);      /* NULL: no mask checks */
    static unsigned char buf[1 << 13], doc[1 << 10];
    long iters = 0, parsed = 0, complete = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 1500 || clock() < end) {
        const char *s = SEEDS[rnd() % N(SEEDS)];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (int m = (int)(rnd() % 4); m > 0; m--) mutate(buf, &n, sizeof buf / 2);
        iters++;
        GrGrammar *g = grammar_of(buf, n);
        if (!g) continue;
        parsed++;
        size_t dn = walk(g, doc, 200, iters % 16 == 0 ? t : NULL);
        if (check_doc(g, doc, dn) != dn) fail("the walk's own bytes refused", (char *)doc, dn);
        GrState *st = gr_new(g);
        complete += !gr_put(st, doc, dn) && gr_complete(st);
        gr_state_free(st);
        for (int m = 1 + (int)(rnd() % 3); m > 0; m--) mutate(doc, &dn, sizeof doc);
        check_doc(g, doc, dn);
        gr_free(g);
        memcpy(buf + n, "", 1);                   /* the libFuzzer form: grammar NUL reply */
        if (n + 1 + dn <= sizeof buf) { memcpy(buf + n + 1, doc, dn); one(buf, n + 1 + dn); }
    }
    tok_free(t);
    printf("test_fuzz_grammar: %ld grammars (%ld parsed), %ld complete walks, no prefix "
           "without a way on%s\n", iters, parsed, complete,
           t ? ", masks equal feeding" : "");
    return 0;
}
#endif
