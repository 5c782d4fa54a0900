/* test_fuzz_parsers.c — deterministic mutation fuzzing of the JSON parser, the
 * safetensors header indexer and the config reader: thousands of mutated inputs
 * must never crash (run under ASan/UBSan for the full effect), and every refusal
 * must come with a message. Runs in a few seconds.
 *
 * Built with -DK3_LIBFUZZER it is instead a libFuzzer target (`make fuzz`): the first
 * input byte picks the parser, the rest is the document. */
#include "json.h"
#include "st.h"
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

static char st_path[256], cfg_path[256], st_dir[200];

static void write_file(const char *p, const void *b, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(1); }
    if (n && fwrite(b, 1, n, f) != n) { perror(p); exit(1); }
    fclose(f);
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
    if (rc == 0) {                               /* read every tensor back */
        for (size_t i = 0; i < ix->n_tensors; i++) {
            const StTensor *t = &ix->tensors[i];
            if (st_find(ix, t->name) != t) {
                printf("  FAIL: lookup of '%s'\n", t->name); exit(1);
            }
            if (t->nbytes <= 4096) {
                unsigned char tmp[4096];
                if (st_read(ix, t, tmp, err, sizeof err)) {
                    printf("  FAIL: read of valid tensor: %s\n", err); exit(1);
                }
            }
        }
    } else if (!err[0]) { printf("  FAIL: refusal without a message\n"); exit(1); }
    st_close(ix);
    return rc;
}

static int run_cfg(const unsigned char *s, size_t n) {
    write_file(cfg_path, s, n);
    char err[4096] = "";
    K3Config c;
    int rc = k3_config_load(cfg_path, &c, err, sizeof err);
    if (rc && !err[0]) { printf("  FAIL: config refusal without a message\n"); exit(1); }
    if (rc != 0 && rc != 2) { printf("  FAIL: config rc %d\n", rc); exit(1); }
    return rc;
}

static int run_json(const unsigned char *s, size_t n) {
    char err[256] = "";
    Json *j = json_parse((const char *)s, n, err, sizeof err);
    if (!j && strncmp(err, "line ", 5)) {
        printf("  FAIL: json error without position: %s\n", err); exit(1);
    }
    if (j) { char *q = j->type == JSON_STRING ? json_quote(j->str, j->len) : NULL; free(q); }
    json_free(j);
    return j ? 0 : 1;
}

static void setup_paths(void) {
    snprintf(st_dir, sizeof st_dir, "/tmp/k3_fuzz_%d", (int)getpid());
    snprintf(st_path, sizeof st_path, "%s.safetensors", st_dir);
    snprintf(cfg_path, sizeof cfg_path, "%s.json", st_dir);
}

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n) {
    if (!st_path[0]) setup_paths();
    if (n < 1) return 0;
    switch (d[0] % 3) {
    case 0: run_json(d + 1, n - 1); break;
    case 1: run_st(d + 1, n - 1, 64, 0); break;
    default: run_cfg(d + 1, n - 1); break;
    }
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
    "[1,1,1,1,1,1,1,1,1]", "\"text_config\"", "\"kda_layers\"", "[0]", "\"situ\"", "4294967296" };
#define NTOK (sizeof TOKENS / sizeof *TOKENS)

/* One random mutation of s (len *n, capacity cap). */
static void mutate(unsigned char *s, size_t *n, size_t cap) {
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

static const char *ST_HEADER =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a.w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
    "\"a.b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[12,28]},"
    "\"e.0.w1.weight_packed\":{\"dtype\":\"U8\",\"shape\":[2,2],\"data_offsets\":[28,32]},"
    "\"e.0.w1.weight_scale\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[32,34]},"
    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[34,42]}}";

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

int main(int argc, char **argv) {
    setup_paths();
    int iters = argc > 1 ? atoi(argv[1]) : 3000;
    size_t cap = 8192;
    unsigned char *buf = malloc(cap);
    clock_t t0 = clock();

    /* sanity: the seeds are valid */
    if (run_st((const unsigned char *)ST_HEADER, strlen(ST_HEADER), 42, 0) != 0) {
        printf("FAIL: seed header refused\n"); return 1;
    }
    if (run_cfg((const unsigned char *)CFG, strlen(CFG)) != 0) {
        printf("FAIL: seed config refused\n"); return 1;
    }

    int ok_st = 0, ok_cfg = 0, ok_json = 0;
    for (int i = 0; i < iters; i++) {
        size_t n = strlen(ST_HEADER);
        memcpy(buf, ST_HEADER, n);
        int m = 1 + (int)(rnd() % 4);
        for (int k = 0; k < m; k++) mutate(buf, &n, cap);
        uint64_t lenfix = 0;
        if (rnd() % 16 == 0) lenfix = rnd() % 4 ? rnd() % (n + 64) : rnd();
        ok_st += run_st(buf, n, (size_t)(rnd() % 64), lenfix) == 0;
    }
    printf("safetensors headers: %d mutations, %d still valid, no crash\n", iters, ok_st);
    for (int i = 0; i < iters; i++) {
        size_t n = strlen(CFG);
        memcpy(buf, CFG, n);
        int m = 1 + (int)(rnd() % 3);
        for (int k = 0; k < m; k++) mutate(buf, &n, cap);
        ok_cfg += run_cfg(buf, n) == 0;
    }
    printf("configs: %d mutations, %d still valid, no crash\n", iters, ok_cfg);
    for (int i = 0; i < iters * 5; i++) {
        const char *seed = i % 2 ? CFG : ST_HEADER;
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        int m = 1 + (int)(rnd() % 8);
        for (int k = 0; k < m; k++) mutate(buf, &n, cap);
        ok_json += run_json(buf, n) == 0;
    }
    printf("json documents: %d mutations, %d still valid, no crash\n", iters * 5, ok_json);
    unlink(st_path); unlink(cfg_path);
    free(buf);
    printf("test_fuzz_parsers: all passed (%.2f s cpu)\n",
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    return 0;
}
#endif
