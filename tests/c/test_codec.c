/* test_codec.c — the coded BF16 type (codec.h): round trip on ordinary and adversarial
 * weights (escapes, one exponent, subnormals, zeros, -0, Inf/NaN patterns, random bits
 * that only raw blocks hold, widths that are not multiples of 16 or 256); the K3_W_BF16C
 * matmul on every usable path, 1 and 2 threads, T = 1 and prefill, bit-equal to the BF16
 * matmul of the scalar reference on the decoded weights; and a deterministic fuzzer of
 * the structure check: mutated tensors are refused, or (when the mutation left a valid
 * tensor) decode the same on every path, never reading outside the tensor (it sits
 * between two PROT_NONE pages). */
#include "codec.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fails;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 16);
}
static double gauss(void) {
    double u = (rnd() % 65535 + 1) / 65536.0, v = (rnd() % 65536) / 65536.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}
static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int same(float a, float b) { return bits(a) == bits(b) || (a != a && b != b); }

#define CHECK(cond, ...) do { if (!(cond)) { if (fails++ < 20) {                              \
        printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); } } } while (0)

enum { K_NORMAL, K_TAILS, K_ONE_EXP, K_SUBNORMAL, K_ZEROS, K_SPECIAL, K_RANDOM, K_MIXED,
       K_ROWMIX, K_ESCCHUNK, NK };
static const char *KIND[NK] = { "normal", "heavy tails", "one exponent", "subnormals",
                                "zeros/-0", "inf/nan", "random bits", "mixed blocks",
                                "raw blocks in some rows", "an escape chunk a block" };

static uint16_t weight(int kind, size_t i) {
    float f = (float)(0.02 * gauss());
    uint16_t h = (uint16_t)(bits(f) >> 16);
    switch (kind) {
    case K_TAILS:
        if (rnd() % 16 == 0) h = (uint16_t)(bits((float)(gauss() * 4)) >> 16);
        else if (rnd() % 8 == 0) h = (uint16_t)(bits(f * 1e-6f) >> 16);
        break;
    case K_ONE_EXP: h = (uint16_t)((rnd() & 0x807F) | (120u << 7)); break;
    case K_SUBNORMAL: h = (uint16_t)(rnd() & 0x807F); if (rnd() & 1) h |= 1u << 7; break;
    case K_ZEROS: h = rnd() % 3 == 0 ? 0 : rnd() % 2 ? 0x8000 : h; break;
    case K_SPECIAL: if (rnd() % 4 == 0) h = (uint16_t)(0x7F80 | (rnd() & 0x807F)); break;
    case K_RANDOM: h = (uint16_t)rnd(); break;
    case K_MIXED: if ((i / 256) % 3 == 1) h = (uint16_t)rnd(); break;
    case K_ROWMIX: if ((i / 256) % 3 == 1) h = (uint16_t)rnd(); break;     /* i: rowmix() */
    case K_ESCCHUNK:      /* 64 escapes in one chunk (of 4) of a coded block: its last */
        if ((i % 256) / 64 == (i / 256) % 4) h = (uint16_t)((h & 0x807F) | (200 + rnd() % 50) << 7);
        break;                                         /* escape byte at the chunk's end */
    }
    return h;
}

/* Stored bytes in an mmap'd region ending exactly at a PROT_NONE page (and one before). */
typedef struct { uint8_t *base, *p; size_t map; } Guarded;
static Guarded guarded(const uint8_t *src, size_t n) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
    Guarded g = { 0, 0, body + 2 * pg };
    g.base = mmap(NULL, g.map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.base == MAP_FAILED) { printf("FAIL: mmap\n"); exit(1); }
    mprotect(g.base, pg, PROT_NONE);
    mprotect(g.base + pg + body, pg, PROT_NONE);
    g.p = g.base + pg + body - ((n + 3) & ~(size_t)3);        /* 4-aligned, ends near the guard */
    memcpy(g.p, src, n);
    return g;
}
static void unguard(Guarded *g) { munmap(g->base, g->map); }

static const char *PATHS[] = { "scalar", "avx2", "avx512", "neon" };

/* y = W x for every usable path, T tokens, threads 1 and 2, against the scalar BF16
 * matmul on the reference decoding (ref, [T][rows]); returns the number of paths run. */
static int matmul_all(const K3Mat *C, const float *X, int T, const float *ref, const char *what) {
    int paths = 0;
    float *Y = malloc(sizeof(float) * (size_t)T * C->rows);
    const int vbmi = k3_avx512_codec_vbmi(-1);
    for (int p = 0; p < 5; p++) {          /* 4: avx512 without its VBMI decoder */
        if (!k3_kernels_usable(PATHS[p < 4 ? p : 2]) || (p == 4 && !vbmi)) continue;
        k3_kernels_select(PATHS[p < 4 ? p : 2], NULL, 0);
        k3_avx512_codec_vbmi(p != 4);
        for (int nth = 1; nth <= 2; nth++) {
            k3_threads_set(nth);
            k3_matmul(Y, C, X, T);
            int bad = 0;
            for (size_t i = 0; i < (size_t)T * C->rows; i++) bad += !same(Y[i], ref[i]);
            CHECK(!bad, "%s: %s threads %d, %dx%d T=%d: %d outputs differ from the BF16 matmul",
                  what, p < 4 ? PATHS[p] : "avx512 (no vbmi)", nth, C->rows, C->cols, T, bad);
        }
        paths++;
    }
    k3_avx512_codec_vbmi(vbmi);
    k3_kernels_select("auto", NULL, 0);
    k3_threads_set(1);
    free(Y);
    return paths;
}

/* K_ROWMIX: block b of row r raw when (b + r) % 3 == 1, so the 4-row matvec meets rows
 * whose blocks differ in kind */
static size_t rowmix(int kind, size_t i, int cols) {
    return i % cols + (kind == K_ROWMIX ? 256 * (i / cols) : 0);
}

static void check_shape(int kind, int rows, int cols, int T) {
    size_t n = (size_t)rows * cols;
    uint16_t *w = malloc(n * 2), *back = malloc((size_t)cols * 2);
    for (size_t i = 0; i < n; i++) w[i] = weight(kind, rowmix(kind, i, cols));
    uint8_t *out = malloc(k3_codec_bound(rows, cols));
    K3CodecStats st = {0};
    size_t sz = k3_codec_encode(out, w, rows, cols, &st);
    char err[300] = "";
    CHECK(sz && sz <= k3_codec_bound(rows, cols), "%s %dx%d: encode size %zu", KIND[kind], rows,
          cols, sz);
    Guarded g = guarded(out, sz);
    int ok = !k3_codec_check(g.p, sz, rows, cols, 1, err, sizeof err) &&
             !k3_codec_check(g.p, sz, rows, cols, 0, err, sizeof err);
    CHECK(ok, "%s %dx%d: check refused the encoder's output: %s", KIND[kind], rows, cols, err);
    K3Mat C = { 0, rows, cols, NULL, NULL, NULL }, P = { K3_W_BF16, rows, cols, w, NULL, NULL };
    k3_codec_bind(&C, g.p);
    int bad = 0;
    for (int r = 0; ok && r < rows; r++) {
        k3_codec_decode_row(back, &C, r);
        bad += memcmp(back, w + (size_t)r * cols, (size_t)cols * 2) != 0;
    }
    CHECK(!bad, "%s %dx%d: %d rows do not round-trip", KIND[kind], rows, cols, bad);
    if (kind == K_RANDOM && cols % 256 == 0)
        CHECK(st.raw_blocks == st.blocks, "random bits: %llu of %llu raw",
              (unsigned long long)st.raw_blocks, (unsigned long long)st.blocks);
    if (kind == K_NORMAL && cols % 256 == 0 && cols >= 512)
        CHECK(sz < 0.72 * n * 2, "normal %dx%d: ratio %.3f", rows, cols, sz / (2.0 * n));
    float *X = malloc(sizeof(float) * (size_t)T * cols), *R = malloc(sizeof(float) * T * rows);
    for (size_t i = 0; i < (size_t)T * cols; i++) X[i] = (float)gauss();
    if (kind == K_SPECIAL) X[0] = -X[0];
    k3_kernels_scalar()->matmul(R, &P, X, 0, rows, 0, T);
    char what[64];
    snprintf(what, sizeof what, "%s", KIND[kind]);
    if (ok) matmul_all(&C, X, T, R, what);
    unguard(&g);
    free(w); free(back); free(out); free(X); free(R);
}

/* Mutations of valid tensors: byte flips in headers, planes, offsets; truncation. */
static void fuzz(void) {
    int refused = 0, accepted = 0, paths = 0;
    for (int it = 0; it < 1500; it++) {
        int rows = 1 + rnd() % 5, kind = rnd() % NK;
        int cols = it % 5 ? 1 + (int)(rnd() % 700) : 64 * (1 + (int)(rnd() % 11)); /* chunks */
        size_t n = (size_t)rows * cols;
        uint16_t *w = malloc(n * 2);
        for (size_t i = 0; i < n; i++) w[i] = weight(kind, i % cols);
        uint8_t *out = malloc(k3_codec_bound(rows, cols));
        size_t sz = k3_codec_encode(out, w, rows, cols, NULL);
        size_t tb = k3_codec_table_bytes(rows);
        int nm = 1 + rnd() % 3;
        for (int m = 0; m < nm; m++) {
            size_t at;
            switch (rnd() % 6) {
            case 0: out[rnd() % sz] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: if (sz > tb) out[tb + rnd() % (sz - tb)] = (uint8_t)rnd(); break;
            case 2: out[rnd() % tb] = (uint8_t)rnd(); break;              /* offsets */
            case 3:                                                    /* block headers */
                at = tb + (size_t)((const uint32_t *)out)[rnd() % rows] + rnd() % 2;
                if (at < sz) out[at] = (uint8_t)rnd();
                break;
            case 4: {                          /* a row's last block: every code 7 */
                int r = rows - 1, nb = cols - (cols - 1) / 256 * 256, G = (nb + 15) / 16;
                size_t end = tb + ((const uint32_t *)out)[r + 1];
                size_t hdr = end - 22 * (size_t)G - 2;       /* header if coded, no escapes */
                if (end <= sz && hdr > tb && out[hdr + 1] == 0)
                    memset(out + hdr + 2, 0xFF, 6 * (size_t)G);
                break;
            }
            default: sz -= 1 + rnd() % 8; if (sz < 4) sz = 4; break;       /* truncated */
            }
        }
        Guarded g = guarded(out, sz);
        char err[300];
        int full = it & 1;                /* the light check must be as safe */
        if (k3_codec_check(g.p, sz, rows, cols, full, err, sizeof err)) {
            refused++;
            CHECK(err[0], "refusal without a message");
        } else {                    /* still valid: every path must agree and stay inside */
            accepted++;
            K3Mat C = { 0, rows, cols, NULL, NULL, NULL };
            k3_codec_bind(&C, g.p);
            uint16_t *d = malloc(n * 2);
            for (int r = 0; r < rows; r++) k3_codec_decode_row(d + (size_t)r * cols, &C, r);
            K3Mat P = { K3_W_BF16, rows, cols, d, NULL, NULL };
            int T = it % 7 ? 1 + it % 3 : 9 + it % 5;     /* T > 8: the row decoders */
            float *X = malloc(sizeof(float) * T * cols), *R = malloc(sizeof(float) * T * rows);
            for (int i = 0; i < T * cols; i++) X[i] = (float)gauss();
            k3_kernels_scalar()->matmul(R, &P, X, 0, rows, 0, T);
            paths += matmul_all(&C, X, T, R, "fuzz");
            free(d); free(X); free(R);
        }
        unguard(&g);
        free(w); free(out);
    }
    CHECK(refused > 500 && accepted > 50, "fuzz: %d refused, %d accepted", refused, accepted);
    printf("ok   fuzz: 1500 mutated tensors, %d refused with a message, %d still valid and "
           "bit-equal on every path (%d path runs), no read outside the tensor\n", refused,
           accepted, paths);
}

/* The stored lane order, from docs/CODEC.md's formula (not k3_codec_lane): in a full
 * block, storage lane s = 16 (m >> 2) + 8 (g >> 1) + 2 (m & 3) + (g & 1) of chunk k holds
 * weight 64 k + 16 g + m; a short block keeps weight order. Every weight has its own
 * sign+mantissa byte here, so the stored bytes name the lane order. */
static void lane_order(void) {
    for (int n = 256; n >= 192; n -= 64) {
        uint16_t w[256];
        for (int i = 0; i < n; i++)               /* one exponent: no escapes, coded */
            w[i] = (uint16_t)((i & 128) << 8 | 127 << 7 | (i & 127));
        uint8_t out[4096];
        K3CodecStats st = {0};
        size_t len = k3_codec_encode(out, w, 1, n, &st);
        const uint8_t *b = out + k3_codec_table_bytes(1), *sm = b + 2 + 6 * (n / 16) + b[1];
        CHECK(len > 0 && st.raw_blocks == 0 && b[1] == 0, "lane order: block not coded");
        int bad = 0;
        for (int k = 0; k < n / 64; k++)
            for (int g = 0; g < 4; g++)
                for (int m = 0; m < 16; m++) {
                    int i = 64 * k + 16 * g + m;
                    int s = n == 256 ? 64 * k + 16 * (m >> 2) + 8 * (g >> 1) + 2 * (m & 3) + (g & 1)
                                     : i;
                    bad += sm[s] != (uint8_t)((i & 128) | (i & 127));
                }
        CHECK(!bad, "lane order: %d sign+mantissa bytes of a %d-weight block misplaced", bad, n);
    }
    printf("ok   lane order: a full block in storage lanes, a short one in weight order\n");
}

int main(void) {
    lane_order();
    static const int COLS[] = { 1, 5, 16, 17, 96, 255, 256, 257, 300, 512, 513, 784, 1040 };
    int shapes = 0;
    for (int kind = 0; kind < NK; kind++)
        for (int ci = 0; ci < 13; ci++) {
            int rows = 1 + (kind * 13 + ci) % 9, T = 1 + ci % 4;
            check_shape(kind, rows, COLS[ci], T);
            shapes++;
        }
    check_shape(K_NORMAL, 131, 1088, 75);       /* threaded, column-blocked prefill */
    check_shape(K_TAILS, 67, 2048, 1);
    check_shape(K_ROWMIX, 13, 1792, 1);         /* 4-row steps over mixed rows */
    check_shape(K_ROWMIX, 7, 1300, 7);          /* fused prefill: token groups 4 + 2 + 1 */
    check_shape(K_TAILS, 5, 2048, 8);
    /* T > 8: the row decoders (full blocks in storage lanes, 64-multiple short blocks in
     * weight order, others by the reference) over escapes, raw blocks and specials */
    check_shape(K_TAILS, 9, 1216, 9);
    check_shape(K_ROWMIX, 7, 1300, 12);
    check_shape(K_SPECIAL, 5, 576, 16);
    check_shape(K_MIXED, 3, 2048, 10);
    check_shape(K_ESCCHUNK, 9, 2048, 1);        /* 4-row matvec: 64-escape chunks */
    /* T > 8 through the register tiles over decoded blocks (AVX-512 VBMI) and the GEMM
     * panels (AVX2): ragged rows, columns (< 16, % 16, % 256, over a column block), T */
    check_shape(K_NORMAL, 133, 2309, 33);
    check_shape(K_ROWMIX, 6, 5, 20);
    check_shape(K_TAILS, 5, 300, 300);
    check_shape(K_RANDOM, 11, 1040, 73);
    check_shape(K_TAILS, 70, 2001, 20);         /* even column blocks, row blocks, a tail */
    check_shape(K_NORMAL, 100, 300, 20);        /* one column block, 4 row blocks, a tail */
    shapes += 16;
    printf("ok   codec: %d shapes x %d kinds round-trip; BF16C matmul == BF16 matmul on", shapes,
           NK);
    for (int p = 0; p < 4; p++) if (k3_kernels_usable(PATHS[p])) printf(" %s", PATHS[p]);
    if (k3_avx512_codec_vbmi(-1)) printf(" (avx512 with and without VBMI)");
    printf(", threads 1 and 2\n");
    fuzz();
    if (fails) { printf("%d failures\n", fails); return 1; }
    printf("PASS test_codec\n");
    return 0;
}
