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
#include "fuzz_gram.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const FgLang GR = { NULL, fg_gr_free, FG_GR_STATES, 1 };

/* A document by a random walk over the accepted bytes (structure preferred, so it ends);
 * checked to be JSON when the grammar says it is complete. */
static void walk(const GrGrammar *g) {
    static const FgWalk how = { 3, 1, NULL, NULL };
    unsigned char out[600];
    int done;
    size_t n = fg_walk(&GR, g, &how, out, sizeof out, &done);
    if (done) fg_json(out, n);
}

static int one(const unsigned char *d, size_t n, int walks) {
    char err[512] = "";
    Json *j = json_parse((const char *)d, n, err, sizeof err);
    if (!j) return 0;
    char *text = jsc_gbnf(j, err, sizeof err);
    json_free(j);
    if (!text) {
        if (!err[0] || fj_raw_control(err))
            fg_fail("a refusal without a clean message", err, strlen(err));
        return 0;
    }
    GrGrammar *g = gr_parse(text, strlen(text), err, sizeof err);
    if (!g) {
        printf("engine: %s\ngrammar:\n%s\n", err, text);
        fg_fail("a grammar the engine refuses", text, strlen(text));
    }
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
    static unsigned char buf[1 << 14];
    long iters = 0, compiled = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    for (size_t i = 0; i < FJ_N(SCHEMAS); i++)             /* every seed compiles */
        if (!one((const unsigned char *)SCHEMAS[i], strlen(SCHEMAS[i]), 3))
            fg_fail("a seed refused", SCHEMAS[i], strlen(SCHEMAS[i]));
    while (iters < 1500 || clock() < end) {
        const char *s = SCHEMAS[fg_rnd() % FJ_N(SCHEMAS)];
        size_t n = fj_mutated_as(s, strlen(s), buf, sizeof buf / 2, sizeof buf, 2,
                                 (int)(fg_rnd() % 3), TOKENS, FJ_N(TOKENS), fg_rnd);
        iters++;
        compiled += one(buf, n, iters % 4 == 0);
    }
    printf("test_fuzz_schema: %ld schemas (%ld compiled), every grammar parsed by the engine, "
           "every complete walk JSON, every refusal clean\n", iters, compiled);
    return 0;
}
#endif
