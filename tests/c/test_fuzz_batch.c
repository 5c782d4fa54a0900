/* test_fuzz_batch.c — the --batch JSONL parser (src/batch/batch_jsonl.c) under mutation, in
 * the deterministic style of test_fuzz_hist.c: byte-level, line-level (drop, duplicate,
 * swap) and structural JSON mutations of a file of prompt lines. Every input is either
 * refused with 2 and a message "line N: ..." (N a line of the input) that echoes no raw
 * control byte, or parses into lines that each hold exactly one of ids and prompt, an
 * id, a gen >= -1 and sampling parameters the sampler accepts; re-written as JSON and
 * parsed again they give the same lines. 10000 inputs, always the same ones;
 * `test_fuzz_batch SECONDS` runs longer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "batch/batch.h"
#include "fuzz_json.h"


static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11; }

/* A parsed line written back as JSON (every field explicit). */
static size_t write_line(const BatchLine *l, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "{\"id\": %s, \"gen\": %d, \"seed\": %llu, "
                                "\"temperature\": %.17g, \"top_p\": %.17g, \"min_p\": %.17g, "
                                "\"top_k\": %d, ", l->id, l->gen < 0 ? 16 : l->gen,
                                (unsigned long long)l->seed, l->sp.temperature, l->sp.top_p,
                                l->sp.min_p, l->sp.top_k);
    if (l->ids) {
        o += (size_t)snprintf(out + o, cap - o, "\"ids\": [");
        for (int i = 0; i < l->n_ids && o < cap; i++)
            o += (size_t)snprintf(out + o, cap - o, i ? ",%d" : "%d", l->ids[i]);
        o += (size_t)snprintf(out + o, cap - o, "]}");
    } else {
        char *q = json_quote(l->prompt, l->prompt_len);
        o += (size_t)snprintf(out + o, cap - o, "\"prompt\": %s}", q ? q : "\"\"");
        free(q);
    }
    return o;
}

static int check(const unsigned char *d, size_t n) {
    char err[1024] = "";
    SamplerParams sp; sampler_defaults(&sp);
    BatchLine *v = NULL;
    int nv = 0, lines = 1;
    for (size_t i = 0; i < n; i++) lines += d[i] == '\n';
    int rc = batch_parse_all((const char *)d, n, &sp, 0, 0, &v, &nv, err, sizeof err);
    if (rc) {
        int ln = 0;
        if (rc != 2) fj_fail_now("batch", "refused with an exit code other than 2");
        if (fj_raw_control(err)) fj_fail_now("batch refusal echoes a raw control byte", err);
        if (strncmp(err, "no prompt lines", 15) &&
            (sscanf(err, "line %d:", &ln) != 1 || ln < 1 || ln > lines))
            fj_fail_now("batch refusal does not name a line of the input", err);
        return 0;
    }
    static char buf[1 << 16];
    for (int i = 0; i < nv; i++) {
        const BatchLine *l = &v[i];
        if (!l->id || !!l->ids == !!l->prompt)
            fj_fail_now("batch", "a line without id or one input");
        if (l->gen < -1 || sampler_check(&l->sp, err, sizeof err))
            fj_fail_now("batch", "bad field");
        if (l->line < 1 || l->line > lines) fj_fail_now("batch", "line number out of range");
        size_t m = write_line(l, buf, sizeof buf);
        if (m >= sizeof buf) continue;
        BatchLine r;
        if (batch_parse_line(buf, m, 1, &sp, 0, 0, &r, err, sizeof err))
            fj_fail_now("batch: a parsed line written back was refused", err);
        if (strcmp(r.id, l->id) || r.n_ids != l->n_ids || r.seed != l->seed ||
            (l->ids && memcmp(r.ids, l->ids, sizeof(int) * (size_t)l->n_ids)) ||
            (l->prompt && (r.prompt_len != l->prompt_len ||
                           memcmp(r.prompt, l->prompt, l->prompt_len))) ||
            r.sp.temperature != l->sp.temperature || r.sp.top_k != l->sp.top_k)
            fj_fail_now("batch", "a parsed line written back parses differently");
        batch_line_free(&r);
    }
    batch_lines_free(v, nv);
    return 1;
}

static const char *SEEDS[] = {
    "{\"id\": \"a\", \"ids\": [1, 2, 3], \"gen\": 4}\n"
    "{\"id\": 7, \"prompt\": \"Hello \\u00e9\\ud83d\\ude00\\n\", \"temperature\": 0.7}\n"
    "\n"
    "{\"ids\": [5], \"top_p\": 0.9, \"top_k\": 40, \"min_p\": 0.05, \"seed\": 12}\r\n",
    "{\"id\": \"x\", \"ids\": [0]}",
};
#define NSEEDS (sizeof SEEDS / sizeof *SEEDS)
static const char *TOKENS[] = { "{", "}", "\"", "\\", "\n", "\r", ",", ":", "\\u0000",
    "\\u001b", "\\ud800", "\"id\"", "\"ids\"", "\"prompt\"", "\"gen\"", "\"seed\"", "-1",
    "1e308", "null", "[]", "\xff", "\xc3", "0.5", "9223372036854775808" };


int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    long ok, iters = fj_fuzz_lines("batch", SEEDS, NSEEDS, TOKENS, FJ_N(TOKENS), secs, check,
                                   rnd, &ok);
    if (ok < iters / 20) { printf("FAIL only %ld of %ld inputs parsed\n", ok, iters); return 1; }
    printf("test_fuzz_batch: %ld mutated batch files, %ld parsed (and re-parsed equal), no "
           "crash, every refusal 2 naming a line\n", iters, ok);
    return 0;
}
