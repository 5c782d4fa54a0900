/* test_fuzz_parsers.c — deterministic mutation fuzzing of the JSON parser, the safetensors
 * header indexer, the safetensors index (model.safetensors.index.json over real shards)
 * and the config reader: thousands of mutated inputs, byte-level and structural
 * (tests/c/fuzz_json.h: a value's JSON type swapped, keys dropped or duplicated, deep
 * nesting), must never crash (run under ASan/UBSan for the full effect), and every
 * refusal must come with a message that echoes nothing raw. Runs in a few seconds;
 * `test_fuzz_parsers SECONDS` repeats rounds for that long (`make fuzz` without libFuzzer).
 *
 * Built with -DK3_LIBFUZZER -DFUZZ_TARGET_json (or _st_header, _st_index, _config) it is
 * instead that one libFuzzer target (`make fuzz`). */
#include "json.h"
#include "st.h"
#include "config.h"
#include "fuzz_json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

static char st_path[400], cfg_path[400], ix_dir[300], ix_path[400];

static void fail_now(const char *what, const char *msg) {
    printf("  FAIL: %s: %s\n", what, msg);
    fflush(stdout);
    abort();
}

static void write_file(const char *p, const void *b, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(1); }
    if (n && fwrite(b, 1, n, f) != n) { perror(p); exit(1); }
    fclose(f);
}

/* A refusal has a message, and the message holds no raw control byte. */
static void check_refusal(const char *what, const char *err) {
    if (!err[0]) fail_now(what, "refusal without a message");
    if (fj_raw_control(err)) fail_now(what, "raw control byte in the message");
}

/* Every tensor of an index is found by name and its bytes can be read. */
static void check_index(StIndex *ix, const char *what) {
    char err[512];
    for (size_t i = 0; i < ix->n_tensors; i++) {
        const StTensor *t = &ix->tensors[i];
        if (st_find(ix, t->name) != t) fail_now(what, t->name);
        if (t->nbytes <= 4096) {
            unsigned char tmp[4096];
            if (st_read(ix, t, tmp, err, sizeof err)) fail_now(what, err);
        }
    }
}

/* Safetensors file from a header (length prefix correct unless lenfix != 0) + data. */
static int run_st(const unsigned char *h, size_t hl, size_t data, uint64_t lenfix) {
    unsigned char *b = calloc(1, 8 + hl + data);
    uint64_t L = lenfix ? lenfix : hl;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(L >> (8 * i));
    memcpy(b + 8, h, hl);
    write_file(st_path, b, 8 + hl + data);
    free(b);
    char err[512] = "";
    StIndex *ix = st_new();
    int rc = st_add_file(ix, st_path, err, sizeof err);
    if (rc == 0) check_index(ix, "safetensors header");
    else check_refusal("safetensors header", err);
    st_close(ix);
    return rc;
}

static int run_cfg(const unsigned char *s, size_t n) {
    write_file(cfg_path, s, n);
    char err[4096] = "";
    K3Config c;
    int rc = k3_config_load(cfg_path, &c, err, sizeof err);
    if (rc) check_refusal("config", err);
    if (rc != 0 && rc != 2) fail_now("config", "exit code other than 0 and 2");
    return rc;
}

static int run_json(const unsigned char *s, size_t n) {
    char err[256] = "";
    Json *j = json_parse((const char *)s, n, err, sizeof err);
    if (!j && strncmp(err, "line ", 5)) fail_now("json error without position", err);
    if (!j) check_refusal("json", err);
    if (j) { char *q = j->type == JSON_STRING ? json_quote(j->str, j->len) : NULL; free(q); }
    json_free(j);
    return j ? 0 : 1;
}

static int run_index(const unsigned char *s, size_t n) {
    write_file(ix_path, s, n);
    char err[1024] = "";
    StIndex *ix = st_open(ix_dir, err, sizeof err);
    if (ix) check_index(ix, "safetensors index");
    else check_refusal("safetensors index", err);
    st_close(ix);
    return ix ? 0 : 1;
}

static const char *ST_HEADER =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a.w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
    "\"a.b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]},"
    "\"e.0.w1.weight_packed\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[28,32]},"
    "\"e.0.w1.weight_scale\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[32,34]},"
    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[34,42]}}";

/* The shards the index names (written once by setup), and the index itself. */
static const char *SHARD1 =
    "{\"a.w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
    "\"a.b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]}}";
static const char *SHARD2 =
    "{\"__metadata__\":{},\"e.w\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[0,4]}}";
static const char *INDEX =
    "{\"metadata\":{\"total_size\":32},\"weight_map\":{"
    "\"a.w\":\"model-00001-of-00002.safetensors\",\"a.b\":\"model-00001-of-00002.safetensors\","
    "\"e.w\":\"model-00002-of-00002.safetensors\","
    "\"vision_tower.x\":\"model-00003-of-00003.safetensors\"}}";

static const char *CFG =
    "{\"bos_token_id\": 1, \"text_config\": {\"hidden_size\": 256, \"num_hidden_layers\": 4,"
    " \"vocab_size\": 512, \"rms_norm_eps\": 1e-05, \"intermediate_size\": 512,"
    " \"first_k_dense_replace\": 1, \"moe_layer_freq\": 1, \"num_experts\": 16,"
    " \"num_experts_per_token\": 4, \"num_shared_experts\": 2, \"moe_intermediate_size\": 64,"
    " \"routed_expert_hidden_size\": 128, \"latent_moe_use_norm\": true,"
    " \"moe_router_activation_func\": \"sigmoid\", \"moe_renormalize\": true,"
    " \"routed_scaling_factor\": 1.0, \"use_grouped_topk\": true, \"num_expert_group\": 1,"
    " \"topk_group\": 1, \"hidden_act\": \"situ\", \"activation_situ_beta\": 4.0,"
    " \"activation_situ_linear_beta\": 25.0, \"attn_res_block_size\": 5,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"q_lora_rank\": 64,"
    " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"v_head_dim\": 32,"
    " \"mla_use_nope\": true, \"mla_use_output_gate\": true,"
    " \"linear_attn_config\": {\"num_heads\": 4, \"head_dim\": 32, \"short_conv_kernel_size\": 4,"
    " \"use_full_rank_gate\": true, \"gate_lower_bound\": -5.0, \"kda_layers\": [1, 2, 3],"
    " \"full_attn_layers\": [4]}, \"num_nextn_predict_layers\": 0, \"tie_word_embeddings\": false,"
    " \"quantization_config\": {\"quant_method\": \"compressed-tensors\","
    " \"format\": \"mxfp4-pack-quantized\", \"config_groups\": {\"group_0\": {\"weights\":"
    " {\"num_bits\": 4, \"type\": \"float\", \"group_size\": 32}}}}}}";

static void write_shard(const char *name, const char *header, size_t data) {
    char p[400];
    snprintf(p, sizeof p, "%s/%s", ix_dir, name);
    size_t hl = strlen(header);
    unsigned char *b = calloc(1, 8 + hl + data);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    write_file(p, b, 8 + hl + data);
    free(b);
}

static void setup(void) {
    const char *tmp = fj_tmpdir();
    snprintf(ix_dir, sizeof ix_dir, "%s/k3_fuzz_%d", tmp, (int)getpid());
    snprintf(st_path, sizeof st_path, "%s.safetensors", ix_dir);
    snprintf(cfg_path, sizeof cfg_path, "%s.json", ix_dir);
    snprintf(ix_path, sizeof ix_path, "%s/model.safetensors.index.json", ix_dir);
    mkdir(ix_dir, 0700);
    write_shard("model-00001-of-00002.safetensors", SHARD1, 28);
    write_shard("model-00002-of-00002.safetensors", SHARD2, 4);
}

static void cleanup(void) {
    char p[400];
    unlink(st_path); unlink(cfg_path); unlink(ix_path);
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", ix_dir); unlink(p);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", ix_dir); unlink(p);
    rmdir(ix_dir);
}

#ifdef K3_LIBFUZZER
#if defined(FUZZ_TARGET_json)
static const char *const SEEDS[] = { "{\"a\":[1,2.5,\"x\",null,true,{}]}", "[]", "\"\\u00e9\"" };
#define RUN(d, n) run_json(d, n)
#elif defined(FUZZ_TARGET_st_header)
static const char *SEEDS[1];
#define RUN(d, n) run_st(d, n, 64, 0)
#elif defined(FUZZ_TARGET_st_index)
static const char *SEEDS[1];
#define RUN(d, n) run_index(d, n)
#elif defined(FUZZ_TARGET_config)
static const char *SEEDS[1];
#define RUN(d, n) run_cfg(d, n)
#else
#error "define one of FUZZ_TARGET_json, _st_header, _st_index, _config"
#endif
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
#if defined(FUZZ_TARGET_st_header)
    SEEDS[0] = ST_HEADER;
#elif defined(FUZZ_TARGET_st_index)
    SEEDS[0] = INDEX;
#elif defined(FUZZ_TARGET_config)
    SEEDS[0] = CFG;
#endif
    fj_seeds = SEEDS; fj_nseeds = sizeof SEEDS / sizeof *SEEDS; fj_kind = FJ_DOC;
    setup();
    atexit(cleanup);
    return 0;
}
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n);
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n) {
    RUN(d, n);
    return 0;
}
#else

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng;
}

static const char *TOKENS[] = { "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud800",
    "\\udc00", "0", "-1", "1e999", "18446744073709551616", "9223372036854775807", "null", "true",
    "\"BF16\"", "\"U8\"", "\"F32\"", "\"shape\"", "\"data_offsets\"", "\"dtype\"",
    "\"__metadata__\"", "[0,0]", "[]", "\xff", "\xc3", "\xed\xa0\x80", "1.5",
    "[1,1,1,1,1,1,1,1,1]", "\"text_config\"", "\"kda_layers\"", "[0]", "\"situ\"", "4294967296",
    "\\u001b", "\"../x\"", "\"model-00002-of-00002.safetensors\"", "\"weight_map\"" };
#define NTOK (sizeof TOKENS / sizeof *TOKENS)

/* One random byte-level mutation of s (len *n, capacity cap). */
static void mutate_bytes(unsigned char *s, size_t *n, size_t cap) {
    int k = (int)(rnd() % 7);
    size_t pos = *n ? rnd() % *n : 0;
    switch (k) {
    case 0: if (*n) s[pos] ^= (unsigned char)(1u << (rnd() % 8)); break;              /* bit flip */
    case 1: if (*n) s[pos] = (unsigned char)rnd(); break;                             /* byte set */
    case 2:                                                                             /* delete */
        if (*n) {
            size_t l = 1 + rnd() % 8; if (pos + l > *n) l = *n - pos;
            memmove(s + pos, s + pos + l, *n - pos - l); *n -= l;
        }
        break;
    case 3: {                                                                     /* insert token */
        const char *t = TOKENS[rnd() % NTOK]; size_t l = strlen(t);
        if (*n + l < cap) {
            memmove(s + pos + l, s + pos, *n - pos); memcpy(s + pos, t, l); *n += l;
        }
    } break;
    case 4: if (*n) *n = rnd() % *n; break;                                           /* truncate */
    case 5:                                                                   /* duplicate a span */
        if (*n > 2) {
            size_t a = rnd() % *n, l = 1 + rnd() % 32;
            if (a + l > *n) l = *n - a;
            if (*n + l < cap) {
                memmove(s + pos + l, s + pos, *n - pos);
                memmove(s + pos, s + (a < pos ? a : a + l), l); *n += l;
            }
        }
        break;
    default:                                                                   /* change a number */
        if (*n) {
            size_t p = pos; while (p < *n && (s[p] < '0' || s[p] > '9')) p++;
            if (p < *n) s[p] = (unsigned char)('0' + rnd() % 10);
        }
        break;
    }
}

/* m mutations of seed into buf: each structural (while the text is JSON) or byte-level. */
static size_t mutated(const char *seed, unsigned char *buf, size_t cap, int m) {
    static unsigned char tmp[16384];
    size_t n = strlen(seed);
    memcpy(buf, seed, n);
    for (int k = 0; k < m; k++) {
        size_t s = rnd() % 2 ? fj_mutate((const char *)buf, n, (char *)tmp, cap, rnd) : 0;
        if (s) { memcpy(buf, tmp, s); n = s; } else mutate_bytes(buf, &n, cap);
    }
    return n;
}

static int round_(int iters, int verbose) {
    size_t cap = 16384;
    unsigned char *buf = malloc(cap);
    int ok_st = 0, ok_cfg = 0, ok_json = 0, ok_ix = 0;
    for (int i = 0; i < iters; i++) {
        size_t n = mutated(ST_HEADER, buf, cap, 1 + (int)(rnd() % 4));
        uint64_t lenfix = 0;
        if (rnd() % 16 == 0) lenfix = rnd() % 4 ? rnd() % (n + 64) : rnd();
        ok_st += run_st(buf, n, (size_t)(rnd() % 64), lenfix) == 0;
    }
    for (int i = 0; i < iters; i++)
        ok_cfg += run_cfg(buf, mutated(CFG, buf, cap, 1 + (int)(rnd() % 3))) == 0;
    for (int i = 0; i < iters; i++)
        ok_ix += run_index(buf, mutated(INDEX, buf, cap, 1 + (int)(rnd() % 3))) == 0;
    for (int i = 0; i < iters * 5; i++) {
        const char *seed = i % 3 == 0 ? CFG : i % 3 == 1 ? ST_HEADER : INDEX;
        ok_json += run_json(buf, mutated(seed, buf, cap, 1 + (int)(rnd() % 8))) == 0;
    }
    if (verbose) {
        printf("safetensors headers: %d mutations, %d still valid, no crash\n", iters, ok_st);
        printf("configs: %d mutations, %d still valid, no crash\n", iters, ok_cfg);
        printf("safetensors index: %d mutations, %d still valid, no crash\n", iters, ok_ix);
        printf("json documents: %d mutations, %d still valid, no crash\n", iters * 5, ok_json);
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    setup();
    clock_t t0 = clock();
    /* sanity: the seeds are valid */
    if (run_st((const unsigned char *)ST_HEADER, strlen(ST_HEADER), 42, 0) != 0) {
        printf("FAIL: seed header refused\n"); return 1;
    }
    if (run_cfg((const unsigned char *)CFG, strlen(CFG)) != 0) {
        printf("FAIL: seed config refused\n"); return 1;
    }
    if (run_index((const unsigned char *)INDEX, strlen(INDEX)) != 0) {
        printf("FAIL: seed index refused\n"); return 1;
    }
    long rounds = 0;
    do { round_(2000, rounds == 0); rounds++; }
    while ((double)(clock() - t0) / CLOCKS_PER_SEC < secs);
    cleanup();
    printf("test_fuzz_parsers: all passed (%ld round%s, %.2f s cpu)\n", rounds,
           rounds > 1 ? "s" : "", (double)(clock() - t0) / CLOCKS_PER_SEC);
    return 0;
}
#endif
