/* test_fuzz_schema.c — the JSON Schema compiler (src/text/json_schema*.c) under fuzzing.
 * An input is a schema (seeds using every keyword the compiler takes, mutated
 * structurally, tests/c/fuzz_json.h, and byte by byte with regular-expression and schema
 * tokens). It compiles or is refused with a message that echoes no raw control byte; a
 * grammar it writes must be one the engine (grammar.h) parses, and a document written by
 * a random walk over the bytes the grammar accepts must, once complete, be JSON the DOM
 * parser (src/io/json.c) accepts. Runs in a few seconds; `test_fuzz_schema SECONDS` runs
 * longer (`make fuzz` without libFuzzer).
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_json_schema it is the libFuzzer target
 * json_schema. */
#include "json_schema.h"
#include "grammar.h"
#include "json.h"
#include "fuzz_json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void fail(const char *what, const char *s, size_t n) {
    printf("FAIL: %s: %.*s\n", what, (int)(n > 100000 ? 100000 : n), s);
    fflush(stdout);
    abort();
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11; }

/* A document by a random walk over the accepted bytes (structure preferred, so it ends);
 * checked to be JSON when the grammar says it is complete. */
static void walk(const GrGrammar *g) {
    GrState *s = gr_new(g), *w = gr_new(g);
    unsigned char out[600];
    size_t n = 0;
    if (!s || !w) fail("out of memory", "", 0);
    while (n < sizeof out) {
        if (gr_complete(s) && rnd() % 3 == 0) break;
        unsigned char ok[256];
        int k = 0;
        for (int c = 0; c < 256; c++) {
            unsigned char b = (unsigned char)c;
            if (gr_copy(w, s)) fail("out of memory", "", 0);
            if (!gr_put(w, &b, 1)) ok[k++] = b;
        }
        if (!k) break;
        unsigned char b = ok[rnd() % k];
        for (int i = 0; i < k && rnd() % 2; i++)
            if (ok[i] && strchr("\"}],:0123456789tfn", ok[i])) { b = ok[i]; break; }
        if (gr_put(s, &b, 1)) fail("a byte the grammar accepted, refused", (char *)out, n);
        out[n++] = b;
    }
    if (gr_complete(s)) {
        char err[256];
        Json *j = json_parse((const char *)out, n, err, sizeof err);
        if (!j) fail("complete but not JSON", (const char *)out, n);
        json_free(j);
    }
    gr_state_free(s); gr_state_free(w);
}

static int one(const unsigned char *d, size_t n, int walks) {
    char err[512] = "";
    Json *j = json_parse((const char *)d, n, err, sizeof err);
    if (!j) return 0;
    char *text = jsc_gbnf(j, err, sizeof err);
    json_free(j);
    if (!text) {
        if (!err[0] || fj_raw_control(err)) fail("a refusal without a clean message", err,
                                                 strlen(err));
        return 0;
    }
    GrGrammar *g = gr_parse(text, strlen(text), err, sizeof err);
    if (!g) { printf("engine: %s\n", err); fail("a grammar the engine refuses", text,
                                                strlen(text)); }
    for (int i = 0; i < walks; i++) walk(g);
    gr_free(g);
    free(text);
    return 1;
}

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { one(d, n, 1); return 0; }
#else
static const char *const SCHEMAS[] = {
    "{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\", "
    "\"minimum\": -3, \"exclusiveMaximum\": 250}, \"k\": {\"type\": \"array\", \"items\": "
    "{\"$ref\": \"#/$defs/n\"}, \"maxItems\": 2}}, \"required\": [\"v\"], "
    "\"additionalProperties\": false}}, \"$ref\": \"#/$defs/n\"}",
    "{\"anyOf\": [{\"const\": \"ab\"}, {\"type\": \"string\", \"pattern\": \"^a(b|c)*[^x-z]?$\"},"
    " {\"type\": \"number\", \"minimum\": 0.5, \"maximum\": 7}, {\"type\": \"null\"}]}",
    "{\"type\": \"object\", \"properties\": {\"d\": {\"format\": \"date-time\"}, \"u\": "
    "{\"format\": \"uuid\"}, \"e\": {\"format\": \"email\"}, \"i\": {\"format\": \"ipv4\"}, \"r\": "
    "{\"format\": \"uri\"}}, \"additionalProperties\": {\"type\": \"boolean\"}}",
    "{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
    "\"maxLength\": 3}}, \"required\": [\"a\"]}, {\"properties\": {\"b\": {\"oneOf\": [{\"type\":"
    " \"integer\"}, {\"enum\": [\"x\", [1], {\"k\": null}]}]}}}]}",
    "{\"type\": \"array\", \"prefixItems\": [{\"type\": \"boolean\"}, {\"type\": \"string\", "
    "\"pattern\": \"\\\\d{2,4}\\\\.\\\\w+\\\\s\"}], \"items\": {\"type\": [\"integer\", \"null\"]},"
    " \"minItems\": 1, \"maxItems\": 5}",
    "{\"type\": \"object\", \"properties\": {\"a\\\"\": {}, \"ab\": true, \"\\u00e9\": false}, "
    "\"required\": [\"z\"], \"additionalProperties\": {\"type\": \"string\", \"minLength\": 2}}",
    "{\"type\": \"string\", \"pattern\": \"(?:[A-Z][a-z]+){1,3}|^\\\\u00e9.$|\\\\(\\\\)\"}",
};
static const char *const TOKENS[] = { "{", "}", "[", "]", "\"", ",", ":", "\\\\", "$ref",
    "\"#\"", "\"#/$defs/n\"", "anyOf", "allOf", "oneOf", "pattern", "format", "minimum",
    "maxLength", "items", "prefixItems", "required", "additionalProperties", "enum", "const",
    "(", ")", "(?:", "(?=", "\\\\1", "[^", "]", "{2,", "{1,3}", "{0}", "*", "+", "?", "|",
    "^", "$", "\\\\d", "\\\\u00", ".", "-", "1e18", "-0.5", "1000", "1001", "true", "false",
    "null", "\xc3\xa9", "\xf0\x9f\x98\x80" };

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    static unsigned char buf[1 << 14], tmp[1 << 14];
    long iters = 0, compiled = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    for (size_t i = 0; i < FJ_N(SCHEMAS); i++)             /* every seed compiles */
        if (!one((const unsigned char *)SCHEMAS[i], strlen(SCHEMAS[i]), 3))
            fail("a seed refused", SCHEMAS[i], strlen(SCHEMAS[i]));
    while (iters < 1500 || clock() < end) {
        const char *s = SCHEMAS[rnd() % FJ_N(SCHEMAS)];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (int m = (int)(rnd() % 3); m > 0; m--) {
            size_t k = rnd() % 2 ? fj_mutate((char *)buf, n, (char *)tmp, sizeof tmp, rnd) : 0;
            if (k) { memcpy(buf, tmp, k); n = k; }
            else fj_mutate_bytes(buf, &n, sizeof buf / 2, TOKENS, FJ_N(TOKENS), rnd);
        }
        iters++;
        compiled += one(buf, n, iters % 4 == 0);
    }
    printf("test_fuzz_schema: %ld schemas (%ld compiled), every grammar parsed by the engine, "
           "every complete walk JSON, every refusal clean\n", iters, compiled);
    return 0;
}
#endif
