/* test_fuzz_gram.c — JSON mode's validator (src/text/json_gram.c) under fuzzing. An input
 * is a schema, a NUL byte, then a document. The schema (seeds mutated structurally and
 * byte by byte, tests/c/fuzz_json.h) compiles or is refused with a message that echoes no
 * raw control byte; the document is fed byte by byte, and after every accepted prefix:
 *   - the prefix has a way on: jg_complete, or some byte is accepted (a mask is never
 *     empty, the sampler never stuck);
 *   - once complete, the document is JSON the DOM parser (src/io/json.c) accepts;
 *   - feeding it in one piece or byte by byte gives the same answer.
 * The built-in loop also writes documents by a random walk over the accepted bytes (so
 * the deep states are reached, not only what mutation finds) and, with the tiny
 * tokenizer, checks jg_mask leaves an id at each step. Runs in a few seconds;
 * `test_fuzz_gram SECONDS` runs longer (`make fuzz` without libFuzzer).
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_json_gram it is the libFuzzer target json_gram. */
#include "json_gram.h"
#include "json.h"
#include "tok.h"
#include "fuzz_json.h"
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

static int way_on(const JgState *s) {
    if (jg_complete(s)) return 1;
    JgState w;
    for (int c = 0; c < 256; c++) {
        unsigned char b = (unsigned char)c;
        jg_copy(&w, s);
        if (!jg_put(&w, &b, 1)) return 1;
    }
    return 0;
}

/* Feeds doc[0..n) byte by byte with the checks above; the bytes accepted. */
static size_t check_doc(const JgSchema *g, const unsigned char *doc, size_t n) {
    JgState s, whole;
    jg_init(&s, g);
    size_t i = 0;
    for (; i < n; i++) {
        JgState w;
        jg_copy(&w, &s);
        if (jg_put(&w, doc + i, 1)) break;
        jg_copy(&s, &w);
        if (!way_on(&s)) fail("a prefix with no way on", (const char *)doc, i + 1);
    }
    jg_init(&whole, g);
    int all = !jg_put(&whole, doc, n);
    if (all != (i == n) || (all && jg_complete(&whole) != jg_complete(&s)))
        fail("whole and byte by byte disagree", (const char *)doc, n);
    if (jg_complete(&s)) {
        char err[256];
        Json *j = json_parse((const char *)doc, i, err, sizeof err);
        if (!j) fail("complete but not JSON", (const char *)doc, i);
        json_free(j);
    }
    return i;
}

static JgSchema *schema_of(const unsigned char *d, size_t n) {
    char err[512] = "";
    Json *j = json_parse((const char *)d, n, err, sizeof err);
    if (!j) return NULL;
    JgSchema *g = jg_compile(j, err, sizeof err);
    json_free(j);
    if (!g && (!err[0] || fj_raw_control(err))) fail("a refusal without a clean message", err,
                                                     strlen(err));
    if (jg_grammar(g)) { jg_free(g); return NULL; }   /* a grammar: test_fuzz_schema.c's */
    return g;
}

static void one(const unsigned char *d, size_t n) {
    const unsigned char *z = memchr(d, 0, n);
    size_t sl = z ? (size_t)(z - d) : n;
    JgSchema *g = schema_of(d, sl);
    if (!g) return;
    if (z) check_doc(g, z + 1, n - sl - 1);
    jg_free(g);
}

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { one(d, n); return 0; }
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11; }

static const char *const SCHEMAS[] = {
    "{}", "{\"type\": \"object\"}", "true",
    "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}, \"b\": {\"type\": "
    "\"boolean\"}, \"c\": {\"enum\": [\"x\", \"yy\", 3, null, [1], {\"k\": 2}]}, \"s\": {\"type\": "
    "\"string\", \"minLength\": 1, \"maxLength\": 3}, \"l\": {\"type\": \"array\", \"items\": "
    "{\"type\": [\"null\", \"number\"]}, \"minItems\": 1, \"maxItems\": 2}}, \"required\": "
    "[\"n\", \"c\"], \"additionalProperties\": false}",
    "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"a\\\"\\u00e9\": "
    "{\"const\": \"q\\n\"}}, \"additionalProperties\": {\"type\": \"string\"}}}",
    "{\"type\": [\"number\", \"string\", \"boolean\", \"null\"]}",
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"object\", \"properties\": {\"b\": "
    "{\"type\": \"array\", \"maxItems\": 0}}, \"required\": [\"b\"]}}, \"required\": [\"a\"]}",
};
static const char *const TOKENS[] = { "{", "}", "[", "]", "\"", "\\", ",", ":", " ", "\n",
    "\\u", "\\ud83d", "\\ude00", "\\udc00", "-", "0", "1.5e+3", "true", "null", "\"n\"",
    "\xc3\xa9", "\xed\xa0\x80", "\xf4\x90", "\xff", "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t" };

/* A document written by choosing among the accepted bytes; *nout its length. */
static size_t walk(const JgSchema *g, unsigned char *out, size_t cap, const Tok *t) {
    JgState s;
    jg_init(&s, g);
    size_t n = 0;
    static float lg[1024];
    while (n < cap) {
        if (jg_complete(&s) && rnd() % 4 == 0) break;
        if (t) {                                  /* the mask keeps an id */
            int V = tok_vocab_size(t) < 1024 ? tok_vocab_size(t) : 1024;
            for (int i = 0; i < V; i++) lg[i] = 0;
            if (!jg_mask(&s, t, V, V - 1, lg)) fail("an empty mask", (const char *)out, n);
        }
        unsigned char ok[256];
        int k = 0;
        for (int c = 0; c < 256; c++) {
            JgState w;
            unsigned char b = (unsigned char)c;
            jg_copy(&w, &s);
            if (!jg_put(&w, &b, 1)) ok[k++] = b;
        }
        if (!k) break;                            /* complete, nothing may follow */
        /* prefer structure over string bytes, so documents end */
        unsigned char b = ok[rnd() % k];
        for (int i = 0; i < k && rnd() % 2; i++)
            if (strchr("\"}],:0123456789tfn", ok[i]) && ok[i]) { b = ok[i]; break; }
        jg_put(&s, &b, 1);
        out[n++] = b;
    }
    return n;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    char err[512];
    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);      /* NULL: no mask checks */
    static unsigned char buf[1 << 14], tmp[1 << 14];
    long iters = 0, compiled = 0, complete = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 3000 || clock() < end) {
        const char *s = SCHEMAS[rnd() % FJ_N(SCHEMAS)];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (int m = (int)(rnd() % 3); m > 0; m--) {
            size_t k = rnd() % 2 ? fj_mutate((char *)buf, n, (char *)tmp, sizeof tmp, rnd) : 0;
            if (k) { memcpy(buf, tmp, k); n = k; }
            else fj_mutate_bytes(buf, &n, sizeof buf / 2, TOKENS, FJ_N(TOKENS), rnd);
        }
        iters++;
        JgSchema *g = schema_of(buf, n);
        if (!g) continue;
        compiled++;
        size_t dn = walk(g, buf, 512, iters % 8 == 0 ? t : NULL);
        size_t got = check_doc(g, buf, dn);
        if (got != dn) fail("the walk's own bytes refused", (const char *)buf, dn);
        JgState st;
        jg_init(&st, g);
        complete += !jg_put(&st, buf, dn) && jg_complete(&st);
        for (int m = 1 + (int)(rnd() % 3); m > 0; m--)         /* and mutated */
            fj_mutate_bytes(buf, &dn, 1024, TOKENS, FJ_N(TOKENS), rnd);
        check_doc(g, buf, dn);
        jg_free(g);
        one(buf, dn);                             /* the libFuzzer form: a schema? a NUL */
    }
    tok_free(t);
    printf("test_fuzz_gram: %ld schemas (%ld compiled), %ld complete walks, no prefix without "
           "a way on, every complete document JSON%s\n", iters, compiled, complete,
           t ? ", masks never empty" : "");
    return 0;
}
#endif
