/* test_json_schema.c — JSON Schema compiled to GBNF (include/json_schema.h), run by the
 * grammar engine (grammar.h): documents judged valid or not by hand from the JSON Schema
 * specification (2020-12, and draft 7's items list), chosen so that plausible slips fail:
 * a recursive $ref (and the depth where its unrolling stops), anyOf branches that share a
 * prefix, pattern quantifiers and anchors, date-time's leap years and month lengths,
 * integer ranges at each digit boundary, additional property names that start like a
 * declared one, allOf merging, the whitespace bound. Then the refusals (named keyword,
 * backreference, lookaround, remote $ref), 300 random integer/number ranges against
 * arithmetic, and the JSON-mode split: the automaton's
 * subset keeps the automaton (jg_grammar NULL), the rest gets a grammar. */
#include "json_schema.h"
#include "json_gram.h"
#include "grammar.h"
#include "json.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, \
                           __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static GrGrammar *compile(const char *schema, char *err, size_t errlen) {
    Json *j = json_parse(schema, strlen(schema), err, errlen);
    if (!j) return NULL;
    char *text = jsc_gbnf(j, err, errlen);
    json_free(j);
    if (!text) return NULL;
    GrGrammar *g = gr_parse(text, strlen(text), err, errlen);
    if (!g) printf("%s\n", text);
    free(text);
    return g;
}
static int accepts(const GrGrammar *g, const char *doc) {
    GrState *s = gr_new(g);
    int ok = !gr_put(s, (const unsigned char *)doc, strlen(doc)) && gr_complete(s);
    gr_state_free(s);
    return ok;
}

/* a schema, then documents: "+doc" valid, "-doc" not; NULL ends */
static const char *const CASES[][16] = {
    /* $ref recursion: a tree of nodes */
    { "{\"$defs\": {\"n\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": "
      "\"integer\"}, \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/n\"}}}, "
      "\"required\": [\"v\"], \"additionalProperties\": false}}, \"$ref\": \"#/$defs/n\"}",
      "+{\"v\":1}", "+{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]},{\"v\":3,\"kids\":[{\"v\":4}]}]}",
      "-{\"v\":1,\"kids\":[{\"w\":2}]}", "-{\"kids\":[]}", "-{\"v\":1,\"kids\":[{\"v\":\"x\"}]}",
      NULL },
    /* "#" itself, definitions (draft 7), anyOf with null */
    { "{\"definitions\": {\"s\": {\"type\": \"string\", \"maxLength\": 2}}, \"type\": \"array\","
      " \"items\": {\"anyOf\": [{\"$ref\": \"#\"}, {\"$ref\": \"#/definitions/s\"}, {\"type\": "
      "\"null\"}]}}",
      "+[]", "+[[],\"ab\",null,[[\"x\"]]]", "-[\"abc\"]", "-[1]", "-{}", NULL },
    /* an object schema without names: any members; with names: only those */
    { "{\"anyOf\": [{\"type\": \"object\"}, {\"type\": \"object\", \"properties\": {\"a\": "
      "{\"type\": \"null\"}}, \"required\": [\"a\"]}], \"$comment\": \"x\"}",
      "+{}", "+{\"x\":[1,{\"y\":null}]}", "+{\"a\":null}", "-[]", NULL },
    /* anyOf: branches that share a prefix */
    { "{\"anyOf\": [{\"const\": \"ab\"}, {\"const\": \"abc\"}, {\"type\": \"string\", "
      "\"maxLength\": 1}, {\"type\": \"integer\", \"maximum\": 5}, {\"type\": \"integer\", "
      "\"minimum\": 10}]}",
      "+\"ab\"", "+\"abc\"", "+\"a\"", "+\"\"", "-\"abcd\"", "-\"xy\"", "+5", "+-3", "+10",
      "+12", "-7", "-5.5", NULL },
    /* oneOf of objects told apart by a const */
    { "{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"k\": {\"const\": \"a\"}, \"x\": "
      "{\"type\": \"integer\"}}, \"required\": [\"k\", \"x\"], \"additionalProperties\": false},"
      " {\"type\": \"object\", \"properties\": {\"k\": {\"const\": \"b\"}, \"y\": {\"type\": "
      "\"boolean\"}}, \"required\": [\"k\"], \"additionalProperties\": false}]}",
      "+{\"k\":\"a\",\"x\":1}", "+{\"k\":\"b\"}", "+{\"k\":\"b\",\"y\":true}",
      "-{\"k\":\"a\"}", "-{\"k\":\"b\",\"x\":1}", "-{\"k\":\"c\"}", NULL },
    /* pattern: quantifiers and anchors */
    { "{\"type\": \"string\", \"pattern\": \"^a{2,3}b?c*$\"}",
      "+\"aa\"", "+\"aaab\"", "+\"aabccc\"", "-\"a\"", "-\"aaaa\"", "-\"aabb\"", "-\"xaa\"", NULL },
    { "{\"type\": \"string\", \"pattern\": \"^[A-Z]{2}-\\\\d{4}(\\\\.[a-z]+)?$\"}",
      "+\"AB-1234\"", "+\"XY-0000.ab\"", "-\"AB-123\"", "-\"AB-1234.\"", "-\"ab-1234\"", NULL },
    { "{\"type\": \"string\", \"pattern\": \"(ab)+$\"}",
      "+\"zzabab\"", "+\"ab\"", "-\"aba\"", "-\"\"", NULL },
    { "{\"type\": \"string\", \"pattern\": \"^x|y$\"}",
      "+\"xa\"", "+\"ay\"", "+\"x\"", "-\"ax\"", "-\"ya\"", NULL },
    { "{\"type\": \"string\", \"pattern\": \"^[^\\\"\\\\\\\\]*$\"}",
      "+\"abc\"", "+\"a\\nb\"", "-\"a\\\"b\"", "-\"a\\\\b\"", NULL },
    { "{\"type\": \"string\", \"pattern\": \"^\\\"[\\\\w.-]+\\\\s?\\\\S$\"}",
      "+\"\\\"a.b-c_d9 x\"", "+\"\\\"x\\ty\"", "-\"\\\"a  b\"", "-\"a\"", NULL },
    { "{\"type\": \"string\", \"pattern\": \"^(?:[0-9]{3}|\\\\(x\\\\))(?<n>z)?.$\"}",
      "+\"123a\"", "+\"(x)z!\"", "+\"(x)\xc3\xa9\"", "-\"12a\"", "-\"123\\n\"", NULL },
    /* formats */
    { "{\"type\": \"string\", \"format\": \"date-time\"}",
      "+\"2024-02-29T12:30:00Z\"", "+\"2000-02-29T00:00:00.123+05:30\"",
      "+\"2024-12-31T23:59:59-01:00\"", "-\"2023-02-29T12:30:00Z\"", "-\"1900-02-29T00:00:00Z\"",
      "-\"2024-04-31T00:00:00Z\"", "-\"2024-13-01T00:00:00Z\"", "-\"2024-12-31T24:00:00Z\"",
      "-\"2024-12-31T10:00:00\"", "-\"2024-12-31\"", NULL },
    { "{\"type\": \"array\", \"prefixItems\": [{\"format\": \"date\"}, {\"format\": \"uuid\"}, "
      "{\"format\": \"ipv4\"}, {\"format\": \"time\"}], \"items\": false}",
      "+[\"2024-01-31\",\"123e4567-e89b-12d3-a456-426614174000\",\"255.0.10.1\",\"08:00:00Z\"]",
      "+[\"1600-02-29\"]", "-[\"2024-06-31\"]", "-[\"2024-01-01\",\"123e4567\"]",
      "-[\"2024-01-01\",\"123e4567-e89b-12d3-a456-426614174000\",\"256.0.0.1\"]",
      "-[\"2024-01-01\",\"123e4567-e89b-12d3-a456-426614174000\",\"01.0.0.1\"]",
      "-[\"2024-01-01\",\"123e4567-e89b-12d3-a456-426614174000\",\"1.1.1.1\",\"8:00:00Z\"]",
      "-[\"2024-01-01\",\"123e4567-e89b-12d3-a456-426614174000\",\"1.1.1.1\",\"08:00:00Z\",1]",
      NULL },
    { "{\"type\": \"array\", \"items\": [{\"format\": \"email\"}, {\"format\": \"uri\"}], "
      "\"additionalItems\": false, \"minItems\": 2}",
      "+[\"a.b+c@x-y.example.org\",\"https://example.com:8080/a/b?c=d#e\"]",
      "-[\"a@b\",\"http://x\"]", "-[\"a@b.c\"]", "-[\"a..b@x.y\",\"http://x\"]",
      "-[\"a@x.y\",\"no-scheme\"]", NULL },
    /* integer ranges at the digit boundaries */
    { "{\"type\": \"integer\", \"minimum\": 7, \"maximum\": 123}",
      "+7", "+9", "+10", "+99", "+100", "+123", "-6", "-124", "-0", "-007", "-200", "-1000",
      NULL },
    { "{\"type\": \"integer\", \"exclusiveMinimum\": -21, \"exclusiveMaximum\": -2}",
      "+-20", "+-3", "+-10", "-21", "--21", "--2", "-0", "-2", NULL },
    { "{\"type\": \"integer\", \"minimum\": -5}",
      "+-5", "+0", "+1000000", "+-1", "--6", "--10", "-1.5", NULL },
    { "{\"type\": \"number\", \"minimum\": 0, \"maximum\": 1}",
      "+0", "+1", "+0.5", "+0.999", "+1.0", "+1.000", "-1.5", "--0.1", "-2", "-1.01", NULL },
    { "{\"type\": \"number\", \"minimum\": -1.5, \"exclusiveMaximum\": 2}",
      "+-1.5", "+-1.50", "+-1.49", "+-1", "+0", "+1.999", "--1.51", "--2", "-2", "-2.0", "--0",
      NULL },
    { "{\"type\": \"number\", \"exclusiveMinimum\": 0.25, \"maximum\": 13.25}",
      "-0.25", "-0.250", "+0.2500001", "+0.26", "+9.5", "+13", "+13.25", "-13.2501", "-14",
      "-0.1", NULL },
    { "{\"type\": \"number\", \"maximum\": -0.05}",
      "+-0.05", "+-0.051", "+-7", "+-123.456", "--0.04", "-0", NULL },
    /* additional property names beside declared ones */
    { "{\"type\": \"object\", \"properties\": {\"ab\": {\"type\": \"integer\"}, \"a\\\"\": "
      "{\"type\": \"null\"}}, \"additionalProperties\": {\"type\": \"string\"}}",
      "+{\"ab\":1,\"a\":\"x\"}", "+{\"ab\":1,\"abc\":\"x\"}", "+{\"a\\\"\":null,\"a\\\"b\":\"x\"}",
      "-{\"ab\":1,\"ab\":\"x\"}", "-{\"a\\\"\":null,\"a\\\"\":\"x\"}", "+{\"x\":\"y\"}",
      "-{\"ab\":1,\"b\":2}", "+{\"\":\"e\"}", "-{\"ab\":\"x\"}", NULL },
    /* allOf merged; required names outside properties */
    { "{\"allOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, "
      "\"required\": [\"a\"]}, {\"properties\": {\"b\": {\"type\": \"integer\", \"maximum\": "
      "5}, \"a\": {\"maxLength\": 1}}, \"required\": [\"b\", \"c\"]}]}",
      "+{\"a\":\"x\",\"b\":5,\"c\":[1]}", "-{\"a\":\"x\",\"b\":5}",
      "-{\"a\":\"xy\",\"b\":5,\"c\":1}",
      "-{\"a\":\"x\",\"b\":6,\"c\":1}", NULL },
    /* counts, tuples, enum filtered by type, lengths in code points */
    { "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"enum\": [\"a\", 1, \"b\"]}, "
      "\"minItems\": 2, \"maxItems\": 3}",
      "+[\"a\",\"b\"]", "+[\"a\",\"a\",\"b\"]", "-[\"a\"]", "-[\"a\",\"a\",\"a\",\"a\"]",
      "-[\"a\",1]", NULL },
    { "{\"type\": [\"string\", \"null\"], \"minLength\": 1, \"maxLength\": 2, \"$comment\": "
      "\"x\"}",
      "+\"\\u00e9\\n\"", "+\"\\ud83d\\ude00\"", "+null", "-\"abc\"", "-\"\"",
      "-\"\\ud83d\"", NULL },
    /* the bounds: whitespace runs, nesting */
    { "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"boolean\"}}, \"required\": "
      "[\"a\"], \"additionalProperties\": false, \"title\": \"t\"}",
      "+{                \"a\":true}", "-{                 \"a\":true}", "+ {\"a\" :\n false} ",
      NULL },
    { "{\"anyOf\": [{\"type\": \"array\"}, {\"type\": \"integer\", \"maximum\": 0}]}",
      "+[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
      "-[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", "+0", "-1", NULL },
};

/* refused, with these words in the message */
static const char *const REFUSED[][2] = {
    { "{\"type\": \"object\", \"properties\": {\"a\": {\"not\": {}}}}",
      "properties.a: the keyword 'not' is not supported" },
    { "{\"type\": \"string\", \"pattern\": \"(a)\\\\1\"}", "backreference" },
    { "{\"type\": \"string\", \"pattern\": \"a(?=b)\"}", "lookahead" },
    { "{\"type\": \"string\", \"pattern\": \"\\\\bx\"}", "word boundary" },
    { "{\"type\": \"string\", \"pattern\": \"a^b\"}", "'^' or '$' inside" },
    { "{\"$ref\": \"http://example.com/s.json\"}", "only a local '$ref'" },
    { "{\"$ref\": \"#/$defs/nope\"}", "points at nothing" },
    { "{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/a\"}}, \"$ref\": \"#/$defs/a\"}", "over 64 deep" },
    { "{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"null\"}]}", "without an object or array" },
    { "{\"allOf\": [{\"type\": \"string\"}, {\"type\": \"integer\"}]}", "no value satisfies" },
    { "{\"allOf\": [{\"pattern\": \"a\"}, {\"pattern\": \"b\"}]}", "cannot combine" },
    { "{\"format\": \"ipv6\"}", "'format' 'ipv6' is not supported" },
    { "{\"type\": \"string\", \"pattern\": \"a\", \"maxLength\": 3}", "together with" },
    { "{\"type\": \"strung\"}", "'type' must be" },
    { "{\"type\": \"array\", \"minItems\": 5000}", "'minItems' over 1000" },
    { "{\"type\": \"integer\", \"minimum\": 1e20}", "beyond +-1e18" },
    { "{\"anyOf\": []}", "non-empty list" },
};

/* Random bounds against arithmetic: for numbers (decimals of up to 3 places) and
 * integers, each candidate accepted exactly when strtod's value is within the bounds. */
static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11; }
static void decimal(char *t, size_t n, int places) {
    long long v = (long long)(rnd() % 4000) - 2000;
    int p = places ? (int)(rnd() % (unsigned)(places + 1)) : 0;
    long long den = 1;
    for (int i = 0; i < p; i++) den *= 10;
    if (!p) { snprintf(t, n, "%lld", v / 10); return; }
    snprintf(t, n, "%s%lld.%0*lld", v < 0 ? "-" : "", llabs(v) / den, p, llabs(v) % den);
}
static int ranges(void) {
    char err[512], sch[256], lo[32], hi[32], x[32];
    int trials = 0;
    for (int t = 0; t < 300; t++) {
        int integer = t % 3 == 0, lx = rnd() % 2, hx = rnd() % 2, has_lo = rnd() % 5 != 0,
            has_hi = rnd() % 5 != 0;
        decimal(lo, sizeof lo, integer ? 0 : 3);
        decimal(hi, sizeof hi, integer ? 0 : 3);
        snprintf(sch, sizeof sch, "{\"type\": \"%s\"%s%s%s%s%s%s}", integer ? "integer" : "number",
                 has_lo ? (lx ? ", \"exclusiveMinimum\": " : ", \"minimum\": ") : "",
                 has_lo ? lo : "", has_hi ? (hx ? ", \"exclusiveMaximum\": " : ", \"maximum\": ")
                 : "", has_hi ? hi : "", "", "");
        double l = strtod(lo, NULL), h = strtod(hi, NULL);
        GrGrammar *g = compile(sch, err, sizeof err);
        int empty = has_lo && has_hi && (h < l || (h == l && (lx || hx)));
        if (!g) { CHECK(strstr(err, "no value") && (empty || integer), "%s: %s", sch, err);
                  continue; }
        for (int k = 0; k < 40; k++) {
            decimal(x, sizeof x, integer ? 0 : 4);
            if (k == 0) snprintf(x, sizeof x, "%s", lo);       /* the bounds themselves */
            if (k == 1) snprintf(x, sizeof x, "%s", hi);
            double v = strtod(x, NULL);
            int in = (!has_lo || (lx ? v > l : v >= l)) && (!has_hi || (hx ? v < h : v <= h));
            if (!strcmp(x, "-0")) continue;                    /* (not written) */
            CHECK(accepts(g, x) == in, "%s: %s %s", sch, x, in ? "refused" : "accepted");
            trials++;
        }
        gr_free(g);
    }
    return trials;
}

int main(void) {
    char err[512];
    int docs = ranges();
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        GrGrammar *g = compile(CASES[i][0], err, sizeof err);
        CHECK(g, "schema %zu refused: %s", i, err);
        if (!g) continue;
        for (int k = 1; CASES[i][k]; k++) {
            int want = CASES[i][k][0] == '+', got = accepts(g, CASES[i][k] + 1);
            CHECK(got == want, "schema %zu: %s %s", i, CASES[i][k] + 1,
                  want ? "refused" : "accepted");
            docs++;
        }
        gr_free(g);
    }
    for (size_t i = 0; i < sizeof REFUSED / sizeof *REFUSED; i++) {
        err[0] = 0;
        GrGrammar *g = compile(REFUSED[i][0], err, sizeof err);
        CHECK(!g && strstr(err, REFUSED[i][1]), "%s: wanted '%s', got '%s'", REFUSED[i][0],
              REFUSED[i][1], g ? "(compiled)" : err);
        gr_free(g);
    }
    /* an enum of 5000 values: a trie, so the engine's parse count stays small */
    size_t cap = 5000 * 16 + 64, at = 0;
    char *big = malloc(cap);
    at += (size_t)snprintf(big, cap, "{\"anyOf\": [{\"enum\": [");
    for (int i = 0; i < 5000; i++)
        at += (size_t)snprintf(big + at, cap - at, "%s\"item%d\"", i ? ", " : "", i);
    snprintf(big + at, cap - at, "]}, {\"type\": \"null\"}]}");
    GrGrammar *g = compile(big, err, sizeof err);
    CHECK(g && accepts(g, "\"item12\"") && accepts(g, "\"item4999\"") &&
          accepts(g, "\"item0\"") && !accepts(g, "\"item5000\"") && !accepts(g, "\"item\""),
          "a 5000-value enum: %s", g ? "wrong answers" : err);
    gr_free(g);
    free(big);
    /* JSON mode: the automaton's subset stays on the automaton; beyond, a grammar */
    static const char *const SPLIT[][2] = {
        { "{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [1, 2]}}}", "" },
        { "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 3}}", "" },
        { "{\"type\": \"object\", \"properties\": {\"a\": {\"anyOf\": [{}]}}}", "g" },
        { "{\"type\": \"string\", \"format\": \"date\"}", "g" },
        { "{\"type\": \"integer\", \"minimum\": 0}", "g" },
    };
    for (size_t i = 0; i < sizeof SPLIT / sizeof *SPLIT; i++) {
        Json *j = json_parse(SPLIT[i][0], strlen(SPLIT[i][0]), err, sizeof err);
        JgSchema *s = j ? jg_compile(j, err, sizeof err) : NULL;
        CHECK(s && !jg_grammar(s) == !*SPLIT[i][1], "%s: %s", SPLIT[i][0],
              s ? (jg_grammar(s) ? "a grammar" : "the automaton") : err);
        jg_free(s);
        json_free(j);
    }
    printf("test_json_schema: %d checks (%zu schemas, %d documents, %zu refusals), %d failed\n",
           checks, sizeof CASES / sizeof *CASES, docs, sizeof REFUSED / sizeof *REFUSED, fails);
    return fails != 0;
}
