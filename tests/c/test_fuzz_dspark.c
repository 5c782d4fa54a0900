/* test_fuzz_dspark.c — the DSpark draft's loader (k3_dspark_open, src/draft/dspark_load.c)
 * under mutation: draft A's config.json (structural JSON mutations, tests/c/fuzz_json.h,
 * and byte-level ones) and its model.safetensors header (the data kept after it), against
 * the target tests/models/tiny5 opened resident. Every input is refused with exit code 2
 * (1 for a file that cannot be read as safetensors) and a message that echoes no raw
 * control byte, or opens; an opened draft then ingests two positions and drafts a block
 * of 7 rows without a crash, its drafts inside the vocabulary. Runs in a few seconds
 * (2000 inputs, always the same); `test_fuzz_dspark SECONDS` runs longer.
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_dspark it is the libFuzzer target dspark (the
 * config.json). */
#include "dspark.h"
#include "engine.h"
#include "fuzz_json.h"
#include "util.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DRAFT "tests/models/tiny5_dspark"
static char g_dir[300], g_cfg[340], g_st[340];
static char *g_cfg_text, *g_st_bytes;        /* draft A's files */
static size_t g_cfg_len, g_st_len, g_hl;     /* g_hl: its header's length */
static K3Engine g_e;

static void setup(void) {
    char err[4096];
    snprintf(g_dir, sizeof g_dir, "%s/k3_fuzz_dspark_%d", fj_tmpdir(), (int)getpid());
    snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_dir);
    snprintf(g_st, sizeof g_st, "%s/model.safetensors", g_dir);
    if (mkdir(g_dir, 0700)) fj_fail_now(g_dir, "cannot create");
    g_cfg_text = k3_read_file(DRAFT "/config.json", &g_cfg_len);
    g_st_bytes = k3_read_file(DRAFT "/model.safetensors", &g_st_len);
    if (!g_cfg_text || !g_st_bytes || g_st_len < 8) fj_fail_now(DRAFT, "cannot read");
    memcpy(&g_hl, g_st_bytes, 8);
    if (g_hl > g_st_len - 8) fj_fail_now(DRAFT, "bad header length");
    k3_threads_set(1);
    if (k3_engine_open_resident(&g_e, "tests/models/tiny5", 4, 16, err, sizeof err))
        fj_fail_now("tests/models/tiny5", err);
}

static void cleanup(void) {
    unlink(g_cfg); unlink(g_st); rmdir(g_dir);
    k3_engine_close(&g_e);
    free(g_cfg_text); free(g_st_bytes);
}

/* Opens what is in g_dir; 1 when it opened (and drafted), 0 when refused properly. */
static int try_open(const char *what, int config) {
    char err[4096] = "";
    K3DSpark *d = NULL;
    const int rc = k3_dspark_open(&d, g_dir, &g_e, 1, err, sizeof err);
    if (rc) {
        if (d) fj_fail_now(what, "a refusal that returned a draft");
        if (rc != 2 && (config || rc != 1)) fj_fail_now(what, "an exit code other than 2");
        if (!err[0]) fj_fail_now(what, "a refusal without a message");
        if (fj_raw_control(err)) fj_fail_now(what, err);
        return 0;
    }
    const int W = k3_dspark_tap_width(d), V = g_e.m.cfg.vocab_size;
    float *taps = calloc(2 * (size_t)W, sizeof(float));
    for (int i = 0; i < 2 * W; i++) taps[i] = (float)((i * 37) % 11) - 5.0f;
    int drafts[7];
    float conf[7];
    err[0] = 0;
    int r = k3_dspark_ingest(d, taps, 2, err, sizeof err);
    if (!r) r = k3_dspark_draft(d, 5, 7, drafts, conf, NULL, err, sizeof err);
    if (r && (!err[0] || fj_raw_control(err))) fj_fail_now(what, "a failure without a message");
    for (int i = 0; !r && i < 7; i++)
        if (drafts[i] < 0 || drafts[i] >= V) fj_fail_now(what, "a draft outside the vocabulary");
    free(taps);
    k3_dspark_close(d);
    return 1;
}

static int g_st_seed;                      /* g_st holds draft A's file as it is */

static int run_cfg(const unsigned char *c, size_t n) {
    fj_write_file(g_cfg, c, n);
    if (!g_st_seed) fj_write_file(g_st, (const unsigned char *)g_st_bytes, g_st_len);
    g_st_seed = 1;
    return try_open("dspark config.json", 1);
}

/* The header h[0..n) with its length prefix, then draft A's data as it is. */
static int run_header(const unsigned char *h, size_t n) {
    const size_t data = g_st_len - 8 - g_hl;
    unsigned char *b = malloc(8 + n + data);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, h, n);
    memcpy(b + 8 + n, g_st_bytes + 8 + g_hl, data);
    fj_write_file(g_cfg, (const unsigned char *)g_cfg_text, g_cfg_len);
    fj_write_file(g_st, b, 8 + n + data);
    g_st_seed = 0;
    free(b);
    return try_open("dspark model.safetensors header", 0);
}

#ifdef K3_LIBFUZZER
static const char *SEEDS[1];
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    setup();
    atexit(cleanup);
    SEEDS[0] = g_cfg_text;
    fj_seeds = SEEDS; fj_nseeds = 1; fj_kind = FJ_DOC;
    return 0;
}
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n);
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n) {
    run_cfg(d, n);
    return 0;
}
#else
static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng;
}

static const char *const TOKENS[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\u001b", "0", "-1", "1e999", "1e-300", "2147483647",
    "4294967296", "null", "true", "false", "\"yarn\"", "\"default\"", "\"BF16\"", "\"F32\"",
    "\"shape\"", "\"data_offsets\"", "[0,0]", "[]", "[1]", "\xff", "\"fc_norm\"", "256", "13",
    "1024", "\"target_layer_ids\"", "[7,2,0]", "\"rope_parameters\"", "64",
};

static size_t mutated(const char *seed, size_t n, unsigned char *buf, size_t cap, int m) {
    return fj_mutated(seed, n, buf, cap, m, TOKENS, FJ_N(TOKENS), rnd);
}

int main(int argc, char **argv) {
    const double secs = argc > 1 ? atof(argv[1]) : 0;
    setup();
    if (!run_cfg((const unsigned char *)g_cfg_text, g_cfg_len) ||
        !run_header((const unsigned char *)g_st_bytes + 8, g_hl))
        fj_fail_now(DRAFT, "the seed was refused");
    const size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    long iters = 0, ok_cfg = 0, ok_hdr = 0;
    const clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    for (long batch = 0; iters < 2000 || clock() < end; batch++) {
        for (int j = 0; j < 50; j++, iters++) {     /* 50 of a kind: fewer files written */
            const int m = 1 + (int)(rnd() % 3);
            if (batch % 2)
                ok_cfg += run_cfg(buf, mutated(g_cfg_text, g_cfg_len, buf, cap, m));
            else
                ok_hdr += run_header(buf, mutated(g_st_bytes + 8, g_hl, buf, cap, m));
        }
    }
    free(buf);
    cleanup();
    printf("test_fuzz_dspark: %ld mutated inputs (config.json and header), %ld and %ld opened "
           "and drafted, no crash, every refusal with a clean message\n", iters, ok_cfg, ok_hdr);
    return 0;
}
#endif
