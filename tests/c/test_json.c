/* test_json.c — strict JSON parser: valid and invalid documents, escapes, UTF-8,
 * depth, numbers, lookups, quoting, and a throughput check. */
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static Json *P(const char *s) { char err[256]; return json_parse(s, strlen(s), err, sizeof err); }

static void expect_ok(const char *s) {
    char err[256];
    Json *j = json_parse(s, strlen(s), err, sizeof err);
    CHECK(j != NULL, "should parse: %s (%s)", s, err);
    json_free(j);
}

static void expect_bad(const char *s, size_t n, const char *what) {
    char err[256] = "";
    Json *j = json_parse(s, n, err, sizeof err);
    CHECK(j == NULL, "should be refused: %s", what);
    CHECK(j != NULL || strncmp(err, "line ", 5) == 0, "error lacks line/col for %s: '%s'",
          what, err);
    json_free(j);
}
#define BAD(s) expect_bad(s, sizeof(s) - 1, s)

static void test_valid(void) {
    const char *ok[] = { "null", "true", "false", "0", "-0", "1", "-1", "1.5", "1e5", "1E+5",
        "1e-5", "-0.0e0", "\"\"", "\"abc\"", "[]", "{}", " [ 1 , 2 ] ",
        "{\"a\":{\"b\":[null,true,{}]}}",
        "\t\r\n 7 \n", "[\"\\u00e9\\ud83d\\ude00\"]", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
        "123456789012345678901234567890", "{\"a\":1,\"a\":2}" };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) expect_ok(ok[i]);
    printf("valid documents: ok\n");
}

static void test_invalid(void) {
    BAD(""); BAD("   "); BAD("nul"); BAD("tru"); BAD("True"); BAD("[1,]"); BAD("{\"a\":1,}");
    BAD("[1 2]"); BAD("{\"a\" 1}"); BAD("{a:1}"); BAD("{'a':1}"); BAD("[1]]"); BAD("[1] x");
    BAD("{} {}"); BAD("["); BAD("{\"a\":"); BAD("\"abc"); BAD("01"); BAD("-"); BAD("1."); BAD(".5");
    BAD("+1"); BAD("1e"); BAD("1e+");
    BAD("0x10"); BAD("NaN"); BAD("Infinity"); BAD("-Infinity"); BAD("\"\\x\""); BAD("\"\\u12\"");
    BAD("\"\\u12g4\""); BAD("\"a\tb\""); BAD("\"a\nb\""); BAD("[1,\n2,\n@]"); BAD("/* c */ 1");
    BAD("[,1]");
    BAD("\"\\ud800\""); BAD("\"\\udc00\""); BAD("\"\\ud800\\u0041\""); BAD("\"\\ud800x\"");
    BAD("\"\\ud83d\\ud83d\"");
    BAD("\xef\xbb\xbf{}");
    expect_bad("[1,\0]", 5, "NUL byte");
    expect_bad("\"a\0b\"", 5, "raw NUL in string");
    printf("invalid documents: ok\n");
}

static void test_utf8(void) {
    /* invalid UTF-8 inside strings */
    BAD("\"\x80\"");                 /* lone continuation */
    BAD("\"\xc0\xaf\"");             /* overlong '/' */
    BAD("\"\xc1\xbf\"");             /* overlong */
    BAD("\"\xe0\x80\xaf\"");         /* overlong 3-byte */
    BAD("\"\xf0\x80\x80\xaf\"");     /* overlong 4-byte */
    BAD("\"\xed\xa0\x80\"");         /* encoded surrogate U+D800 */
    BAD("\"\xf4\x90\x80\x80\"");     /* > U+10FFFF */
    BAD("\"\xf5\x80\x80\x80\"");
    BAD("\"\xc3\"");                 /* truncated */
    BAD("\"\xe2\x82\"");
    BAD("\"\xff\"");
    /* valid boundaries */
    expect_ok("\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"
              "\xed\x9f\xbf\xee\x80\x80\"");
    printf("utf-8 validation: ok\n");
}

static void test_escapes(void) {
    Json *j = P("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\te\\u0041\\u00e9\\u20ac\\ud83d\\ude00\\u0000z\"");
    CHECK(j && j->type == JSON_STRING, "escape string parsed");
    if (j) {
        const char want[] = "a\"b\\c/d\b\f\n\r\teA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0z";
        CHECK(j->len == sizeof want - 1, "decoded length %zu want %zu", j->len, sizeof want - 1);
        CHECK(j->len == sizeof want - 1 && memcmp(j->str, want, j->len) == 0, "decoded bytes");
        CHECK(j->str[j->len] == 0, "NUL-terminated");
    }
    json_free(j);
    j = P("\"\\uD834\\uDD1E\"");  /* upper-case hex, U+1D11E */
    CHECK(j && j->len == 4 && memcmp(j->str, "\xf0\x9d\x84\x9e", 4) == 0,
          "surrogate pair upper-case hex");
    json_free(j);
    /* escaped key */
    j = P("{\"k\\u0065y\":5}");
    CHECK(j && json_get(j, "key") && json_get(j, "key")->integer == 5, "escaped key lookup");
    json_free(j);
    printf("escapes: ok\n");
}

static void test_numbers(void) {
    struct { const char *s; int is_int; int64_t i; double d; } t[] = {
        { "0", 1, 0, 0 }, { "-0", 1, 0, -0.0 }, { "42", 1, 42, 42 }, { "-17", 1, -17, -17 },
        { "9223372036854775807", 1, INT64_MAX, 9223372036854775807.0 },
        { "-9223372036854775808", 1, INT64_MIN, -9223372036854775808.0 },
        { "9223372036854775808", 0, 0, 9223372036854775808.0 },
        { "18446744073709551616", 0, 0, 18446744073709551616.0 },
        { "1.0", 0, 0, 1.0 }, { "1e-05", 0, 0, 1e-05 }, { "2.5E3", 0, 0, 2500 },
        { "-5.0", 0, 0, -5.0 },
        { "1560860324864", 1, 1560860324864LL, 1560860324864.0 },
        { "9007199254740993", 1, 9007199254740993LL, 9007199254740992.0 },
        { "1e400", 0, 0, HUGE_VAL }, { "0.1", 0, 0, 0.1 },
    };
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        Json *j = P(t[k].s);
        CHECK(j && j->type == JSON_NUMBER, "number %s parsed", t[k].s);
        if (!j) continue;
        CHECK(j->is_integer == t[k].is_int, "%s is_integer=%d", t[k].s, j->is_integer);
        if (t[k].is_int)
            CHECK(j->integer == t[k].i, "%s integer=%lld", t[k].s, (long long)j->integer);
        CHECK(j->number == t[k].d, "%s number=%.17g", t[k].s, j->number);
        json_free(j);
    }
    printf("numbers: ok\n");
}

static void test_depth(void) {
    size_t n = 600;
    char *s = malloc(2 * n + 1);
    for (size_t d = 510; d <= 514; d++) {
        memset(s, '[', d); memset(s + d, ']', d); s[2 * d] = 0;
        char err[256];
        Json *j = json_parse(s, 2 * d, err, sizeof err);
        if (d <= 512) CHECK(j != NULL, "depth %zu accepted (%s)", d, err);
        else CHECK(j == NULL && strstr(err, "deeper"), "depth %zu refused: %s", d, err);
        json_free(j);
    }
    /* very deep input must not blow the stack */
    size_t big = 1000000;
    char *b = malloc(big);
    memset(b, '[', big);
    char err[256];
    Json *j = json_parse(b, big, err, sizeof err);
    CHECK(j == NULL, "1e6 '[' refused");
    json_free(j);
    free(b); free(s);
    printf("depth limit: ok\n");
}

static void test_errors_linecol(void) {
    char err[256];
    const char *s = "{\n  \"a\": 1,\n  \"b\": tru\n}";
    Json *j = json_parse(s, strlen(s), err, sizeof err);
    CHECK(!j && strstr(err, "line 3 col 8"), "line/col: '%s'", err);
    json_free(j);
    s = "[1,\n2,\n3,]";
    j = json_parse(s, strlen(s), err, sizeof err);
    CHECK(!j && strstr(err, "line 3"), "line/col 2: '%s'", err);
    json_free(j);
    printf("error positions: ok\n");
}

static void test_lookup(void) {
    Json *j = P("{\"a\":[1,\"x\",{\"b\":false}],\"c\":null,\"a2\":3,\"c\":7}");
    CHECK(j && j->type == JSON_OBJECT && j->len == 4, "object");
    const Json *a = json_get(j, "a");
    CHECK(a && a->type == JSON_ARRAY && a->len == 3, "array child");
    CHECK(json_at(a, 0) && json_at(a, 0)->integer == 1, "json_at 0");
    CHECK(json_at(a, 1) && strcmp(json_at(a, 1)->str, "x") == 0, "json_at 1");
    CHECK(json_at(a, 3) == NULL, "json_at out of range");
    CHECK(json_at(j, 0) == NULL, "json_at on object");
    CHECK(json_get(json_at(a, 2), "b") && json_get(json_at(a, 2), "b")->type == JSON_BOOL,
          "nested");
    CHECK(json_get(j, "zz") == NULL, "absent key");
    CHECK(json_get(a, "a") == NULL, "json_get on array");
    CHECK(json_get(j, "c") && json_get(j, "c")->type == JSON_NUMBER &&
          json_get(j, "c")->integer == 7, "later duplicate wins");
    CHECK(strcmp(j->keys[0], "a") == 0 && strcmp(j->keys[3], "c") == 0, "document order");
    CHECK(strcmp(json_type_name(JSON_OBJECT), "object") == 0, "type name");
    json_free(j);
    json_free(NULL);
    printf("lookups: ok\n");
}

static void test_quote(void) {
    const char in[] = "a\"b\\c\n\x01\xc3\xa9\xff\0z";
    char *q = json_quote(in, sizeof in - 1);
    CHECK(q && strcmp(q, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\xef\xbf\xbd\\u0000z\"") == 0,
          "quote: %s", q ? q : "(null)");
    Json *j = q ? P(q) : NULL;
    CHECK(j && j->type == JSON_STRING && j->len == 14, "quoted text parses back (len %zu)",
          j ? j->len : 0);
    json_free(j); free(q);
    q = json_quote("", 0);
    CHECK(q && strcmp(q, "\"\"") == 0, "empty quote");
    free(q);
    printf("json_quote: ok\n");
}

static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}

static void test_speed(void) {
    /* an index-like document: 500k "name": "file" pairs (~ 50 MB) */
    size_t n = 500000, cap = n * 160 + 64, len = 0;
    char *s = malloc(cap);
    len += sprintf(s + len, "{\"metadata\":{\"total_size\":1},\"weight_map\":{");
    for (size_t i = 0; i < n; i++)
        len += sprintf(s + len, "%s\"language_model.model.layers.%zu.block_sparse_moe.experts.%zu"
                       ".w1.weight_packed\":\"model-%05zu-of-000096.safetensors\"",
                       i ? "," : "", i % 93, i, i % 96 + 1);
    len += sprintf(s + len, "}}");
    char err[256];
    double t0 = now();
    Json *j = json_parse(s, len, err, sizeof err);
    double dt = now() - t0;
    const Json *wm = json_get(j, "weight_map");
    CHECK(wm && wm->len == n, "big document parsed (%s)", j ? "" : err);
    CHECK(dt < 2.0, "parse of %.1f MB took %.3f s", len / 1e6, dt);
    printf("speed: %.1f MB in %.3f s (%.0f MB/s)\n", len / 1e6, dt, len / 1e6 / dt);
    json_free(j);
    free(s);
}

int main(void) {
    test_valid();
    test_invalid();
    test_utf8();
    test_escapes();
    test_numbers();
    test_depth();
    test_errors_linecol();
    test_lookup();
    test_quote();
    test_speed();
    if (fails) { printf("test_json: %d failures\n", fails); return 1; }
    printf("test_json: all passed\n");
    return 0;
}
