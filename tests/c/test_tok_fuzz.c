/* test_tok_fuzz.c — built-in mutation fuzzer for the tokenizer: the rank-file loader
 * and the pre-tokenizer/encoder (crashes, hangs, broken invariants).
 * `make test` runs it for ~1 s; `make fuzz` runs it longer (TOK_FUZZ_SECONDS) and
 * under ASan/UBSan. With clang, tests/c/test_tok_fuzz.c also builds as a libFuzzer
 * target: clang -DTOK_LIBFUZZER -fsanitize=fuzzer,address ... (see `make fuzz`).
 * Invariants: encode never fails, every id is in range, decode(encode(x)) == x,
 * pieces of tok_split are non-empty, ordered and cover the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tok.h"

static Tok *g_tok;
static char g_dir[256];

static void check_text(const unsigned char *d, size_t n) {
    size_t *e; long np = tok_split((const char *)d, n, &e);
    if (np < 0) abort();
    size_t a = 0;
    for (long i = 0; i < np; i++) { if (e[i] <= a || e[i] > n) abort(); a = e[i]; }
    if (a != n) abort();
    free(e);
    for (int sp = 0; sp < 2; sp++) {
        size_t k; int32_t *v = tok_encode(g_tok, (const char *)d, n, sp, &k);
        if (!v) abort();
        for (size_t i = 0; i < k; i++) if (v[i] < 0 || v[i] >= tok_vocab_size(g_tok)) abort();
        size_t dl; char *back = tok_decode(g_tok, v, k, &dl, NULL);
        if (!back || dl != n || memcmp(back, d, n)) abort();
        free(back); free(v);
    }
}

static void check_loader(const unsigned char *d, size_t n) {
    char p[300], err[512];
    snprintf(p, sizeof p, "%s/f.model", g_dir);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(d, 1, n, f); fclose(f);
    Tok *t = tok_load_files(p, NULL, err, sizeof err);
    if (t) {   /* whatever loaded must work */
        size_t k; int32_t *v = tok_encode(t, (const char *)d, n < 64 ? n : 64, 1, &k);
        free(v);
        tok_free(t);
    } else if (!err[0]) abort();
}

static int setup(void) {
    char err[512];
    g_tok = tok_load("tests/tok/tiny", err, sizeof err);
    if (!g_tok) { printf("FAIL %s\n", err); return -1; }
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/k3tokfuzz.XXXXXX", tmp);
    if (!mkdtemp(g_dir)) { printf("FAIL mkdtemp\n"); return -1; }
    return 0;
}

#ifdef TOK_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (!g_tok && setup()) abort();
    if (n && d[0] & 1) check_loader(d + 1, n - 1); else check_text(d, n);
    return 0;
}
#else
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11);
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

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1])
                           : (getenv("TOK_FUZZ_SECONDS") ? atof(getenv("TOK_FUZZ_SECONDS")) : 1.0);
    if (setup()) return 1;
    unsigned char buf[4096];
    long iters = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    /* a byte vocabulary to mutate for the loader */
    static char vocab[256 * 10];
    size_t vl = 0;
    static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; b++)
        vl += (size_t)snprintf(vocab + vl, sizeof vocab - vl, "%c%c== %d\n", b64[b >> 2],
                               b64[(b & 3) << 4], b);
    while (clock() < end) {
        for (int k = 0; k < 50; k++, iters++) {
            int loader = (iters % 8) == 7;
            size_t n;
            if (loader) {
                if (rnd() % 2) {
                    n = vl; memcpy(buf, vocab, n > sizeof buf ? sizeof buf : n);
                    if (n > sizeof buf) n = sizeof buf;
                } else { const char *s = VOCAB_SEEDS[rnd() % 5]; n = strlen(s); memcpy(buf, s, n); }
            } else {
                const char *s = SEEDS[rnd() % (sizeof SEEDS / sizeof *SEEDS)];
                n = strlen(s); memcpy(buf, s, n);
            }
            int muts = 1 + (int)(rnd() % 8);
            for (int m = 0; m < muts; m++) {
                uint32_t r = rnd(), pos = n ? rnd() % (uint32_t)n : 0;
                switch (r % 6) {
                case 0: if (n) buf[pos] = (unsigned char)rnd(); break;           /* random byte */
                case 1: if (n) buf[pos] ^= (unsigned char)(1u << (rnd() % 8)); break; /* bit flip */
                case 2:
                    if (n < sizeof buf - 8) {
                        memmove(buf + pos + 1, buf + pos, n - pos);
                        buf[pos] = " \n'\xE4\x80\xC5\xBF" "1aA-="[rnd() % 12]; n++;
                    }
                    break;
                case 3: if (n) { memmove(buf + pos, buf + pos + 1, n - pos - 1); n--; } break;
                case 4: {                                                        /* splice */
                    const char *s = SEEDS[rnd() % (sizeof SEEDS / sizeof *SEEDS)];
                    size_t l = strlen(s);
                    if (n + l < sizeof buf) {
                        memmove(buf + pos + l, buf + pos, n - pos); memcpy(buf + pos, s, l);
                        n += l;
                    }
                } break;
                case 5:                                                          /* repeat */
                    if (n && n * 2 < sizeof buf) { memcpy(buf + n, buf, n); n *= 2; }
                    break;
                }
            }
            if (loader) check_loader(buf, n); else check_text(buf, n);
        }
    }
    char p[300]; snprintf(p, sizeof p, "%s/f.model", g_dir); remove(p); remove(g_dir);
    tok_free(g_tok);
    printf("tok fuzz: %ld inputs in %.1f s (loader and pre-tokenizer/encoder): no crash, "
           "all invariants held\n", iters, secs);
    return 0;
}
#endif
