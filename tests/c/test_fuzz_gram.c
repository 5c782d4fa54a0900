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
#include "fuzz_gram.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* JSON mode's states (json_gram.h) for the shared harness. */
static void *jgs_start(const void *g) {
    JgState *s = malloc(sizeof *s);
    if (s) jg_init(s, g);
    return s;
}
static int jgs_copy(void *to, const void *from) { jg_copy(to, from); return 0; }
static int jgs_put(void *s, const unsigned char *b, size_t n) { return jg_put(s, b, n); }
static int jgs_complete(const void *s) { return jg_complete(s); }
static void jgs_free(void *g) { jg_free(g); }

static void *schema_of(const unsigned char *d, size_t n) {
    char err[512] = "";
    Json *j = json_parse((const char *)d, n, err, sizeof err);
    if (!j) return NULL;
    JgSchema *g = jg_compile(j, err, sizeof err);
    json_free(j);
    if (!g && (!err[0] || fj_raw_control(err)))
        fg_fail("a refusal without a clean message", err, strlen(err));
    if (jg_grammar(g)) { jg_free(g); return NULL; }   /* a grammar: test_fuzz_schema.c's */
    return g;
}

static const FgLang JG = { schema_of, jgs_free, jgs_start, jgs_copy, jgs_put, jgs_complete,
                           free, 1 };

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { fg_one(&JG, d, n); return 0; }
#else

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

/* At a walk's step: the mask keeps an id. */
static void check_mask(void *ctx, const void *s, void *w, const unsigned char *out, size_t n) {
    const Tok *t = ctx;
    static float lg[1024];
    int V = tok_vocab_size(t) < 1024 ? tok_vocab_size(t) : 1024;
    for (int i = 0; i < V; i++) lg[i] = 0;
    if (!jg_mask(s, t, V, V - 1, lg)) fg_fail("an empty mask", (const char *)out, n);
    (void)w;
}

static void mutate_doc(unsigned char *b, size_t *n) {
    fj_mutate_bytes(b, n, 1024, TOKENS, FJ_N(TOKENS), fg_rnd);
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    char err[512];
    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);      /* NULL: no mask checks */
    static unsigned char buf[1 << 14];
    long iters = 0, compiled = 0, complete = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 3000 || clock() < end) {
        const char *s = SCHEMAS[fg_rnd() % FJ_N(SCHEMAS)];
        size_t n = fj_mutated_as(s, strlen(s), buf, sizeof buf / 2, sizeof buf, 2,
                                 (int)(fg_rnd() % 3), TOKENS, FJ_N(TOKENS), fg_rnd);
        iters++;
        JgSchema *g = schema_of(buf, n);
        if (!g) continue;
        compiled++;
        FgWalk how = { 4, 1, iters % 8 == 0 && t ? check_mask : NULL, t };
        size_t dn;
        complete += fg_round(&JG, g, &how, buf, 512, &dn, mutate_doc);
        jg_free(g);
        fg_one(&JG, buf, dn);                     /* the libFuzzer form: a schema? a NUL */
    }
    tok_free(t);
    printf("test_fuzz_gram: %ld schemas (%ld compiled), %ld complete walks, no prefix without "
           "a way on, every complete document JSON%s\n", iters, compiled, complete,
           t ? ", masks never empty" : "");
    return 0;
}
#endif
