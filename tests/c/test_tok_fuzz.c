/* test_tok_fuzz.c — built-in mutation fuzzer for the tokenizer: the rank-file loader
 * (tiktoken.model), the tokenizer_config.json loader (structural JSON mutations from
 * tests/c/fuzz_json.h: a value's type swapped, keys dropped or duplicated, deep nesting)
 * and the pre-tokenizer/encoder (crashes, hangs, broken invariants).
 * `make test` runs it for ~1 s; `test_tok_fuzz SECONDS` runs longer (`make fuzz` without
 * libFuzzer, under ASan/UBSan). With clang it also builds as the libFuzzer targets
 * tok_text, tok_model and tok_config: -DK3_LIBFUZZER -DFUZZ_TARGET_tok_text ... (`make fuzz`).
 * Invariants: encode never fails, every id is in range, decode(encode(x)) == x, pieces of
 * tok_split are non-empty, ordered and cover the input; whatever loads works (every
 * reserved name encodes to its id); every refusal has a message with no raw control byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "fuzz_json.h"
#include "tok.h"

#define TOK_DIR "tests/tok/tiny"
static Tok *g_tok;
static char g_dir[256], g_model[300], g_cfg[300];
static char *g_cfg_seed;               /* tests/tok/tiny/tokenizer_config.json */


static void check_encode(const Tok *t, const unsigned char *d, size_t n) {
    for (int sp = 0; sp < 2; sp++) {
        size_t k; int32_t *v = tok_encode(t, (const char *)d, n, sp, &k);
        if (!v) fj_fail_now("encode", "failed");
        for (size_t i = 0; i < k; i++)
            if (v[i] < 0 || v[i] >= tok_vocab_size(t)) fj_fail_now("encode", "id out of range");
        size_t dl; char *back = tok_decode(t, v, k, &dl, NULL);
        if (!back || dl != n || memcmp(back, d, n)) fj_fail_now("encode", "decode(encode(x)) != x");
        free(back); free(v);
    }
}

static void check_text(const unsigned char *d, size_t n) {
    size_t *e; long np = tok_split((const char *)d, n, &e);
    if (np < 0) fj_fail_now("split", "failed");
    size_t a = 0;
    for (long i = 0; i < np; i++) {
        if (e[i] <= a || e[i] > n) fj_fail_now("split", "pieces out of order");
        a = e[i];
    }
    if (a != n) fj_fail_now("split", "pieces do not cover the input");
    free(e);
    check_encode(g_tok, d, n);
}


static void check_refusal(const char *what, const char *err) {
    if (!err[0]) fj_fail_now(what, "refusal without a message");
    if (fj_raw_control(err)) fj_fail_now(what, "raw control byte in the message");
}

static int check_loader(const unsigned char *d, size_t n) {
    char err[512] = "";
    fj_write_file(g_model, d, n);
    Tok *t = tok_load_files(g_model, NULL, err, sizeof err);
    if (t) {   /* whatever loaded must work */
        size_t k; int32_t *v = tok_encode(t, (const char *)d, n < 64 ? n : 64, 1, &k);
        free(v);
        tok_free(t);
    } else check_refusal("tiktoken.model", err);
    return t != NULL;
}

/* A config that loads names every reserved id uniquely: each name encodes to its id. */
static int check_config(const unsigned char *d, size_t n) {
    char err[512] = "";
    fj_write_file(g_cfg, d, n);
    Tok *t = tok_load_files(TOK_DIR "/tiktoken.model", g_cfg, err, sizeof err);
    if (!t) { check_refusal("tokenizer_config.json", err); return 0; }
    for (int id = tok_n_ranks(t); id < tok_vocab_size(t); id++) {
        size_t l, k;
        const char *name = tok_token_bytes(t, id, &l);
        char buf[256];
        if (!name || l == 0 || l >= sizeof buf) fj_fail_now("config", "reserved name length");
        memcpy(buf, name, l); buf[l] = 0;
        if (tok_special_id(t, buf) != id) fj_fail_now("config", "reserved name not found");
        char dflt[48];
        snprintf(dflt, sizeof dflt, "<|reserved_token_%d|>", id);
        if (!strcmp(buf, dflt)) continue;         /* not from the config: cheap checks only */
        int32_t *v = tok_encode(t, name, l, 1, &k);
        if (!v || k != 1 || v[0] != id)
            fj_fail_now("config", "a reserved name encodes to another id");
        free(v);
    }
    check_encode(t, d, n < 256 ? n : 256);
    tok_free(t);
    return 1;
}

static int setup(void) {
    char err[512];
    g_tok = tok_load(TOK_DIR, err, sizeof err);
    if (!g_tok) { printf("FAIL %s\n", err); return -1; }
    const char *tmp = fj_tmpdir();
    snprintf(g_dir, sizeof g_dir, "%s/k3tokfuzz.XXXXXX", tmp);
    if (!mkdtemp(g_dir)) { printf("FAIL mkdtemp\n"); return -1; }
    snprintf(g_model, sizeof g_model, "%s/f.model", g_dir);
    snprintf(g_cfg, sizeof g_cfg, "%s/c.json", g_dir);
    FILE *f = fopen(TOK_DIR "/tokenizer_config.json", "rb");
    if (!f) { printf("FAIL no " TOK_DIR "/tokenizer_config.json\n"); return -1; }
    g_cfg_seed = calloc(1, 1 << 16);
    size_t r = g_cfg_seed ? fread(g_cfg_seed, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (!r) { printf("FAIL cannot read the config seed\n"); return -1; }
    return 0;
}

static void cleanup(void) {
    remove(g_model); remove(g_cfg); rmdir(g_dir);
    tok_free(g_tok); free(g_cfg_seed);
}

static const char *SEEDS[] = {
    "getUserName iPhone HTTPServer", "DON'T it's \xC5\xBF'\xC5\xBF", "  \n  x\t\t\ty",
    "\xE4\xB8\xAD\xE6\x96\x87" "abc", "1234567 \xD9\xA1\xD9\xA2", "<|open|>message<|sep|>[EOS]",
    "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9", "a\xCC\x81\xCC\x82",
    "\xE2\xBA\x80\xE3\x80\x85\xE3\x80\x87", "x\xE2\x80\x8B" "y\xC2\xA0z\xE3\x80\x80",
    "\x80\xFF\xC3",
};
static const char *VOCAB_SEEDS[] = {
    "IQ== 0\nIg== 1\n", "aGk= 0\r\n\r\nYQ== 1\n", "AA== 0\nAQ== 2\n", "==== 0\n", "YQ 0\n"
};
static const char *CFG_SEEDS[] = {
    NULL,     /* the fixture's config, set by setup */
    "{\"added_tokens_decoder\": {\"768\": {\"content\": \"[BOS]\"}, \"769\": {\"content\": "
    "\"[EOS]\", \"special\": true}}, \"bos_token\": \"[BOS]\"}",
    "{\"added_tokens_decoder\": {}}", "{}",
};
#define NSEEDS(a) (sizeof a / sizeof *a)

/* A byte vocabulary (256 one-byte tokens) for the loader to mutate. */
static char g_vocab[256 * 10];
static void make_vocab(void) {
    static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t vl = 0;
    for (int b = 0; b < 256; b++)
        vl += (size_t)snprintf(g_vocab + vl, sizeof g_vocab - vl, "%c%c== %d\n", b64[b >> 2],
                               b64[(b & 3) << 4], b);
}

#ifdef K3_LIBFUZZER
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    if (setup()) abort();
    atexit(cleanup);
    make_vocab();
#if defined(FUZZ_TARGET_tok_text)
    fj_seeds = SEEDS; fj_nseeds = NSEEDS(SEEDS); fj_kind = FJ_RAW;
#elif defined(FUZZ_TARGET_tok_model)
    static const char *ms[NSEEDS(VOCAB_SEEDS) + 1];
    memcpy(ms, VOCAB_SEEDS, sizeof VOCAB_SEEDS);
    ms[NSEEDS(VOCAB_SEEDS)] = g_vocab;
    fj_seeds = ms; fj_nseeds = NSEEDS(ms); fj_kind = FJ_LINES;
#elif defined(FUZZ_TARGET_tok_config)
    CFG_SEEDS[0] = g_cfg_seed;
    fj_seeds = CFG_SEEDS; fj_nseeds = NSEEDS(CFG_SEEDS); fj_kind = FJ_DOC;
#else
#error "define one of FUZZ_TARGET_tok_text, _tok_model, _tok_config"
#endif
    return 0;
}
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
#if defined(FUZZ_TARGET_tok_text)
    check_text(d, n);
#elif defined(FUZZ_TARGET_tok_model)
    check_loader(d, n);
#else
    check_config(d, n);
#endif
    return 0;
}
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs >> 11;
}

/* One byte-level mutation of buf[0..*n) (capacity cap). */
static void mutate_bytes(unsigned char *buf, size_t *np, size_t cap) {
    size_t n = *np;
    uint32_t r = (uint32_t)rnd(), pos = n ? (uint32_t)(rnd() % n) : 0;
    switch (r % 6) {
    case 0: if (n) buf[pos] = (unsigned char)rnd(); break;                   /* random byte */
    case 1: if (n) buf[pos] ^= (unsigned char)(1u << (rnd() % 8)); break;      /* bit flip */
    case 2:
        if (n < cap - 8) {
            memmove(buf + pos + 1, buf + pos, n - pos);
            buf[pos] = " \n'\xE4\x80\xC5\xBF" "1aA-="[rnd() % 12]; n++;
        }
        break;
    case 3: if (n) { memmove(buf + pos, buf + pos + 1, n - pos - 1); n--; } break;
    case 4: {                                                                /* splice */
        const char *s = SEEDS[rnd() % NSEEDS(SEEDS)];
        size_t l = strlen(s);
        if (n + l < cap) {
            memmove(buf + pos + l, buf + pos, n - pos); memcpy(buf + pos, s, l);
            n += l;
        }
    } break;
    case 5:                                                                  /* repeat */
        if (n && n * 2 < cap) { memcpy(buf + n, buf, n); n *= 2; }
        break;
    }
    *np = n;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1])
                           : (getenv("TOK_FUZZ_SECONDS") ? atof(getenv("TOK_FUZZ_SECONDS")) : 1.0);
    if (setup()) return 1;
    make_vocab();
    CFG_SEEDS[0] = g_cfg_seed;
    static unsigned char buf[1 << 16], tmp[1 << 16];
    long iters = 0, n_cfg = 0, ok_cfg = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    for (size_t i = 0; i < NSEEDS(CFG_SEEDS); i++)
        if (!check_config((const unsigned char *)CFG_SEEDS[i], strlen(CFG_SEEDS[i])))
            fj_fail_now("config seed", "refused");
    while (clock() < end) {
        for (int k = 0; k < 50; k++, iters++) {
            int kind = iters % 8 == 7 ? 1 : iters % 8 >= 5 ? 2 : 0;  /* 1 model, 2 config */
            size_t n, cap = kind == 2 ? sizeof buf : 4096;
            const char *s = kind == 1 ? (rnd() % 2 ? g_vocab : VOCAB_SEEDS[rnd() % 5])
                            : kind == 2 ? CFG_SEEDS[rnd() % NSEEDS(CFG_SEEDS)]
                                        : SEEDS[rnd() % NSEEDS(SEEDS)];
            n = strlen(s);
            if (n > cap) n = cap;
            memcpy(buf, s, n);
            int muts = 1 + (int)(rnd() % (kind == 2 ? 3 : 8));
            for (int m = 0; m < muts; m++) {
                size_t t = kind == 2 && rnd() % 4 ? fj_mutate((char *)buf, n, (char *)tmp, cap, rnd)
                           : kind == 1 && rnd() % 4 == 0
                               ? fj_mutate_lines((char *)buf, n, (char *)tmp, cap, rnd) : 0;
                if (t) { memcpy(buf, tmp, t); n = t; } else mutate_bytes(buf, &n, cap);
            }
            if (kind == 1) check_loader(buf, n);
            else if (kind == 2) { n_cfg++; ok_cfg += check_config(buf, n); }
            else check_text(buf, n);
        }
    }
    cleanup();
    printf("tok fuzz: %ld inputs in %.1f s (loader, config: %ld, %ld loaded, and pre-tokenizer/"
           "encoder): no crash, all invariants held\n", iters, secs, n_cfg, ok_cfg);
    return 0;
}
#endif
