/* test_bench_json.c — checks a `k3 bench -o json` (or `-o jsonl`) document against the
 * schema in docs/BENCH.md with the project's own JSON parser (tests/sh/bench.sh):
 *   test_bench_json FILE ROWS REPS [--jsonl] [--compare] [--error ROW]
 * valid JSON, schema 1, a machine object, ROWS rows; every row but the --error one has
 * REPS reps, min <= median <= max, peak RSS > 0 and a plan; the --error row has an
 * "error" string; with --compare, positive B/A ratios. Without arguments: a self-test on
 * small documents (a good one passes, broken ones fail). */
#include "json.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char why[300];
#define NEED(c, ...) \
    do { if (!(c)) { snprintf(why, sizeof why, __VA_ARGS__); return -1; } } while (0)

static double num(const Json *o, const char *k) {
    const Json *v = json_get(o, k);
    return v && v->type == JSON_NUMBER ? v->number : -1e300;
}

static int stat_ok(const Json *row, const char *k, int r) {
    const Json *s = json_get(row, k);
    NEED(s && s->type == JSON_OBJECT, "row %d: %s is not an object", r, k);
    double md = num(s, "median"), mn = num(s, "min"), mx = num(s, "max");
    NEED(mn > -1e300 && md > -1e300 && mx > -1e300, "row %d: %s lacks median/min/max", r, k);
    NEED(mn <= md && md <= mx, "row %d: %s: min %g median %g max %g", r, k, mn, md, mx);
    return 0;
}

static int row_ok(const Json *row, int r, int reps, int compare, int error_row) {
    NEED(row && row->type == JSON_OBJECT, "row %d is not an object", r);
    NEED(num(row, "row") == r, "row %d: \"row\" is %g", r, num(row, "row"));
    static const char *const keys[] = { "trunk_gb", "cache_gb", "threads", "n_prompt", "n_gen",
        "reps", "seconds_per_token", "prefill_tokens_per_second", "tokens_per_second",
        "peak_rss_bytes", "plan_bytes", "bytes_per_token", "limits", "ratios", "error" };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        NEED(json_get(row, keys[i]), "row %d lacks \"%s\"", r, keys[i]);
    const Json *e = json_get(row, "error");
    if (r == error_row) {
        NEED(e->type == JSON_STRING && e->len > 0, "row %d: no error reported", r);
        return 0;
    }
    NEED(e->type == JSON_NULL, "row %d: error %s", r, e->type == JSON_STRING ? e->str : "?");
    NEED(num(row, "reps") == reps, "row %d: %g reps, want %d", r, num(row, "reps"), reps);
    if (num(row, "batch") > 1) {           /* batch mode times the run, not its prefill */
        const Json *p = json_get(row, "prefill_tokens_per_second"), *md = json_get(p, "median");
        NEED(p->type == JSON_OBJECT && md && md->type == JSON_NULL,
             "row %d: a batched row with a prefill rate", r);
        NEED(num(row, "n_generated") == num(row, "batch") * num(row, "n_gen"),
             "row %d: n_generated is not batch x n_gen", r);
        if (stat_ok(row, "seconds_per_token", r)) return -1;
    } else if (stat_ok(row, "seconds_per_token", r) ||
               stat_ok(row, "prefill_tokens_per_second", r))
        return -1;
    NEED(num(row, "peak_rss_bytes") > 0, "row %d: peak_rss_bytes not > 0", r);
    NEED(num(row, "plan_bytes") > 0, "row %d: plan_bytes not > 0", r);
    NEED(num(row, "tokens_per_second") > 0, "row %d: tokens_per_second not > 0", r);
    const Json *b = json_get(row, "bytes_per_token");
    NEED(b->type == JSON_OBJECT && json_get(b, "trunk") && json_get(b, "experts") &&
         json_get(b, "lm_head"), "row %d: bytes_per_token lacks a kind", r);
    if (compare) {
        const Json *c = json_get(row, "compare"), *q = c ? json_get(c, "ratio") : NULL;
        NEED(q, "row %d: no compare.ratio", r);
        NEED(num(q, "seconds_per_token") > 0 && num(q, "prefill_tokens_per_second") > 0 &&
             num(q, "peak_rss_bytes") > 0, "row %d: a B/A ratio is not > 0", r);
    }
    return 0;
}

static int header_ok(const Json *j) {
    NEED(j && j->type == JSON_OBJECT, "the document is not an object");
    NEED(num(j, "schema") == 1, "schema is not 1");
    const Json *m = json_get(j, "machine");
    NEED(m && m->type == JSON_OBJECT && json_get(m, "cpu") && json_get(m, "cores") &&
         json_get(m, "mem_total_bytes") && json_get(m, "filesystem"), "no machine object");
    return 0;
}

/* 0 when text is a bench document with rows rows of reps reps. */
static int check(const char *text, size_t len, int jsonl, int rows, int reps, int compare,
                 int error_row) {
    char err[200];
    if (!jsonl) {
        Json *j = json_parse(text, len, err, sizeof err);
        int rc = j ? header_ok(j) : -1;
        if (!j) snprintf(why, sizeof why, "not JSON: %s", err);
        const Json *a = j ? json_get(j, "rows") : NULL;
        if (!rc && (!a || a->type != JSON_ARRAY || (int)a->len != rows)) {
            snprintf(why, sizeof why, "want %d rows, have %d", rows, a ? (int)a->len : -1);
            rc = -1;
        }
        for (int i = 0; !rc && i < rows; i++)
            rc = row_ok(json_at(a, (size_t)i), i + 1, reps, compare, error_row);
        json_free(j);
        return rc;
    }
    int line = 0, rc = 0;
    for (const char *p = text; !rc && p < text + len; line++) {
        const char *nl = memchr(p, '\n', (size_t)(text + len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
        Json *j = json_parse(p, n, err, sizeof err);
        if (!j) { snprintf(why, sizeof why, "line %d: not JSON: %s", line + 1, err); rc = -1; }
        else rc = line ? row_ok(j, line, reps, compare, error_row) : header_ok(j);
        json_free(j);
        p += n + 1;
    }
    if (!rc && line - 1 != rows) {
        snprintf(why, sizeof why, "want %d rows, have %d", rows, line - 1);
        rc = -1;
    }
    return rc;
}

static const char *GOOD =
    "{\"schema\": 1, \"machine\": {\"cpu\": \"x\", \"cores\": 2, \"mem_total_bytes\": 1, "
    "\"filesystem\": \"ext4\"}, \"rows\": [{\"row\": 1, \"trunk_gb\": 0, \"cache_gb\": 0, "
    "\"threads\": 2, \"n_prompt\": 8, \"n_gen\": 4, \"reps\": 3, \"seconds_per_token\": "
    "{\"median\": 2, \"min\": 1, \"max\": 3}, \"prefill_tokens_per_second\": {\"median\": 5, "
    "\"min\": 5, \"max\": 5}, \"tokens_per_second\": 0.5, \"peak_rss_bytes\": 10, "
    "\"plan_bytes\": 12, \"bytes_per_token\": {\"trunk\": 0, \"experts\": 1, \"lm_head\": 0}, "
    "\"limits\": {}, \"ratios\": {}, \"error\": null}]}";

static int self_test(void) {
    int fails = 0;
    fails += check(GOOD, strlen(GOOD), 0, 1, 3, 0, 0) != 0;
    fails += check(GOOD, strlen(GOOD), 0, 2, 3, 0, 0) == 0;            /* row count */
    fails += check(GOOD, strlen(GOOD), 0, 1, 2, 0, 0) == 0;            /* reps */
    fails += check(GOOD, strlen(GOOD), 0, 1, 3, 1, 0) == 0;            /* no compare */
    fails += check(GOOD, strlen(GOOD) - 2, 0, 1, 3, 0, 0) == 0;        /* truncated */
    char *bad = strdup(GOOD), *p = strstr(bad, "\"min\": 1");
    p[7] = '9';                                                         /* min > median */
    fails += check(bad, strlen(bad), 0, 1, 3, 0, 0) == 0;
    free(bad);
    printf("%s test_bench_json self-test (%d failed)\n", fails ? "FAIL" : "ok", fails);
    return fails != 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return self_test();
    int jsonl = 0, compare = 0, error_row = 0, rows, reps;
    if (argc < 4 || k3_parse_int("ROWS", argv[2], 0, &rows) ||
        k3_parse_int("REPS", argv[3], 1, &reps)) {
        fprintf(stderr, "usage: test_bench_json FILE ROWS REPS [--jsonl] [--compare] "
                "[--error ROW]\n");
        return 2;
    }
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--jsonl")) jsonl = 1;
        else if (!strcmp(argv[i], "--compare")) compare = 1;
        else if (!strcmp(argv[i], "--error") && i + 1 < argc) error_row = atoi(argv[++i]);
        else { fprintf(stderr, "test_bench_json: unknown argument %s\n", argv[i]); return 2; }
    }
    size_t len = 0;
    char *text = k3_read_file(argv[1], &len);
    if (!text) { fprintf(stderr, "test_bench_json: cannot read %s\n", argv[1]); return 2; }
    int rc = check(text, len, jsonl, rows, reps, compare, error_row);
    free(text);
    if (rc) printf("FAIL %s: %s\n", argv[1], why);
    else printf("ok   %s: %d rows, %d reps each, schema 1\n", argv[1], rows, reps);
    return rc != 0;
}
