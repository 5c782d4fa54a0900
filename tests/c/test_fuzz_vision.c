/* test_fuzz_vision.c — the vision tower's loader (k3_vision_open, src/vision/vision_load.c)
 * under mutation: tests/models/tiny5_vision's config.json and a model.safetensors.index.json
 * of its vision entries (structural JSON mutations, tests/c/fuzz_json.h, and byte-level
 * ones), the shards as they are. Every input is refused with exit code 2 (1 for a shard that
 * cannot be read) and a message that echoes no raw control byte, or opens; an opened tower
 * then runs a 2x2 image without a crash and gives finite rows. 2000 inputs, always the same;
 * `test_fuzz_vision SECONDS` runs longer. Built with -DK3_LIBFUZZER -DFUZZ_TARGET_vision it
 * is `make fuzz`'s target vision (both seeds; an input that names "vision_config" is the
 * config, any other the index). */
#include "vision.h"
#include "fuzz_json.h"
#include "kernels.h"
#include "util.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SRC "tests/models/tiny5_vision"
static char g_dir[300], g_cfg[340], g_ix[340];
static char *g_cfg_text, *g_ix_text;
static size_t g_cfg_len, g_ix_len;

static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "%s/k3_fuzz_vision_%d", fj_tmpdir(), (int)getpid());
    snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_dir);
    snprintf(g_ix, sizeof g_ix, "%s/model.safetensors.index.json", g_dir);
    if (mkdir(g_dir, 0700)) fj_fail_now(g_dir, "cannot create");
    g_cfg_text = k3_read_file(SRC "/config.json", &g_cfg_len);
    if (!g_cfg_text) fj_fail_now(SRC, "cannot read config.json");
    char *cwd = getcwd(NULL, 0), p[600], q[400];
    for (int s = 15; s <= 16; s++) {
        snprintf(p, sizeof p, "%s/" SRC "/model-%05d-of-000016.safetensors", cwd, s);
        snprintf(q, sizeof q, "%s/model-%05d-of-000016.safetensors", g_dir, s);
        if (symlink(p, q)) fj_fail_now(q, "cannot link");
    }
    free(cwd);
    /* the index seed: the vision entries only (all the tower reads) */
    size_t n;
    char *ix = k3_read_file(SRC "/model.safetensors.index.json", &n), jerr[200];
    Json *j = ix ? json_parse(ix, n, jerr, sizeof jerr) : NULL;
    const Json *wm = j ? json_get(j, "weight_map") : NULL;
    if (!wm) fj_fail_now(SRC, "cannot read the index");
    size_t cap = 1 << 14, len = 0;
    g_ix_text = malloc(cap);
    len += snprintf(g_ix_text, cap, "{\"weight_map\":{");
    int first = 1;
    for (size_t i = 0; i < wm->len; i++) {
        if (strncmp(wm->keys[i], "vision_tower.", 13) && strncmp(wm->keys[i], "mm_projector.", 13))
            continue;
        len += snprintf(g_ix_text + len, cap - len, "%s\"%s\":\"%s\"", first ? "" : ",",
                        wm->keys[i], wm->items[i]->str);
        first = 0;
    }
    len += snprintf(g_ix_text + len, cap - len, "}}");
    g_ix_len = len;
    json_free(j);
    free(ix);
    k3_threads_set(1);
}

static void cleanup(void) {
    char q[400];
    for (int s = 15; s <= 16; s++) {
        snprintf(q, sizeof q, "%s/model-%05d-of-000016.safetensors", g_dir, s);
        unlink(q);
    }
    unlink(g_cfg); unlink(g_ix); rmdir(g_dir);
    free(g_cfg_text); free(g_ix_text);
}

static int try_open(const char *what, int config) {
    char err[4096] = "";
    K3Vision *v = NULL;
    const int rc = k3_vision_open(&v, g_dir, 1, err, sizeof err);
    if (rc) {
        if (v) fj_fail_now(what, "a refusal that returned a tower");
        if (rc != 2 && (config || rc != 1)) fj_fail_now(what, "an exit code other than 2");
        if (!err[0]) fj_fail_now(what, "a refusal without a message");
        if (fj_raw_control(err)) fj_fail_now(what, err);
        return 0;
    }
    const K3VisionConfig *c = k3_vision_config(v);
    K3VisionGrid g = { 2, 2 };
    float *px = calloc((size_t)4 * 3 * c->patch * c->patch, sizeof(float));
    float *rows = malloc(sizeof(float) * (size_t)c->out);
    for (int i = 0; i < 4 * 3 * c->patch * c->patch; i++) px[i] = (float)(i % 7) / 7.0f;
    if (k3_vision_rows(v, px, &g, 1, rows, err, sizeof err)) fj_fail_now(what, err);
    for (int i = 0; i < c->out; i++)
        if (!isfinite(rows[i])) fj_fail_now(what, "a row that is not finite");
    free(px); free(rows);
    k3_vision_close(v);
    return 1;
}

static int run(int cfg, const unsigned char *d, size_t n) {
    fj_write_file(cfg ? g_cfg : g_ix, d, n);
    fj_write_file(cfg ? g_ix : g_cfg, (const unsigned char *)(cfg ? g_ix_text : g_cfg_text),
                  cfg ? g_ix_len : g_cfg_len);
    return try_open(cfg ? "vision config.json" : "vision index", 1);
}

#ifdef K3_LIBFUZZER
static const char *SEEDS[2];
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    setup();
    atexit(cleanup);
    SEEDS[0] = g_cfg_text; SEEDS[1] = g_ix_text;
    fj_seeds = SEEDS; fj_nseeds = 2; fj_kind = FJ_DOC;
    return 0;
}
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n);
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n) {
    run(memmem(d, n, "\"vision_config\"", 15) != NULL, d, n);
    return 0;
}
#else
static uint64_t rng = 0x13198A2E03707344ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static const char *const TOKENS[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\u001b", "0", "-1", "1e999", "2147483647", "65536",
    "null", "true", "false", "\"bicubic\"", "\"vision_config\"", "\"vt_hidden_size\"", "96",
    "\"qkv_hidden_size\"", "[2,2]", "[3,3]", "\"../x\"", "\"model-00015-of-000016.safetensors\"",
    "\"text_hidden_size\"", "7", "\xff",
};

static size_t mutated(const char *seed, size_t n, unsigned char *buf, size_t cap, int m) {
    return fj_mutated(seed, n, buf, cap, m, TOKENS, FJ_N(TOKENS), rnd);
}

int main(int argc, char **argv) {
    const double secs = argc > 1 ? atof(argv[1]) : 0;
    setup();
    if (!run(1, (const unsigned char *)g_cfg_text, g_cfg_len)) fj_fail_now(SRC, "seed refused");
    const size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    long iters = 0, ok_cfg = 0, ok_ix = 0;
    const clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    for (long batch = 0; iters < 2000 || clock() < end; batch++)
        for (int j = 0; j < 50; j++, iters++) {
            const int m = 1 + (int)(rnd() % 3);
            if (batch % 2) ok_cfg += run(1, buf, mutated(g_cfg_text, g_cfg_len, buf, cap, m));
            else ok_ix += run(0, buf, mutated(g_ix_text, g_ix_len, buf, cap, m));
        }
    free(buf);
    cleanup();
    printf("test_fuzz_vision: %ld mutated inputs (config.json and index), %ld and %ld opened "
           "and ran, no crash, every refusal with a clean message\n", iters, ok_cfg, ok_ix);
    return 0;
}
#endif
