/* codec_measure.c — ratio of candidate lossless BF16 codes on synthetic weights like
 * trained ones (docs/CODEC.md). Build and run (no k3 binary needed):
 *   make && cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -pthread tools/codec_measure.c \
 *      build/kernels/kernels*.o build/kernels/codec.o build/base/pool.o -lm -o /tmp/codec_measure
 *   /tmp/codec_measure [N_WEIGHTS]
 * Distributions (BF16 round-to-nearest-even of doubles): normal and Student-t (nu = 4,
 * heavy tails) at the std of projections (0.02, also with a per-row scale spread),
 * norm weights (1 + N(0, 0.05)), embeddings (0.01). Candidates, stored bytes / BF16:
 *   W3/256  the chosen code: 8-bit sign+mantissa plane, 3-bit exponent code in a
 *           7-exponent window per 256-block + escape bytes (the real encoder, codec.c)
 *   W3/128  the same with 128-blocks; W4/256: a 4-bit code (15-exponent window)
 *   H0      8 + the order-0 entropy of the exponents: what an ideal per-tensor entropy
 *           coder of the exponent (DFloat11-like Huffman) approaches
 * and the scalar reference decoder's speed (SIMD decoders: k3 bench-kernels). */
#include "codec.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static double urand(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return ((rs >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void) { return sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()); }
static double student4(void) {           /* t with nu = 4, unit variance */
    double c = 0;
    for (int i = 0; i < 4; i++) { double g = gauss(); c += g * g; }
    return gauss() / sqrt(c / 4) / sqrt(2.0);
}
static uint16_t to_bf16(double d) {
    float f = (float)d;
    uint32_t u; memcpy(&u, &f, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* a window code of k bits (2^k - 1 exponents + escape byte) on blocks of bs weights */
static double window_ratio(const uint16_t *w, size_t n, int k, int bs) {
    size_t bytes = 0;
    int win = (1 << k) - 1;
    for (size_t b = 0; b < n; b += bs) {
        int m = n - b < (size_t)bs ? (int)(n - b) : bs, hist[256] = {0}, best = 0;
        for (int i = 0; i < m; i++) hist[(w[b + i] >> 7) & 255]++;
        for (int lo = 0; lo + win <= 256; lo++) {
            int c = 0;
            for (int e = lo; e < lo + win; e++) c += hist[e];
            if (c > best) best = c;
        }
        size_t coded = 2 + (size_t)m + ((size_t)m * k + 7) / 8 + (size_t)(m - best);
        bytes += coded < 2 + 2 * (size_t)m ? coded : 2 + 2 * (size_t)m;
    }
    return bytes / (2.0 * n);
}

static double entropy_bits(const uint16_t *w, size_t n) {
    double h = 0;
    size_t hist[256] = {0};
    for (size_t i = 0; i < n; i++) hist[(w[i] >> 7) & 255]++;
    for (int e = 0; e < 256; e++)
        if (hist[e]) { double p = (double)hist[e] / n; h -= p * log2(p); }
    return h;
}

int main(int argc, char **argv) {
    const int cols = 7168;
    size_t n = argc > 1 ? strtoull(argv[1], 0, 10) : (size_t)1 << 22;
    int rows = (int)(n / cols);
    n = (size_t)rows * cols;
    uint16_t *w = malloc(n * 2), *back = malloc((size_t)cols * 2);
    uint8_t *out = malloc(k3_codec_bound(rows, cols));
    static const char *NAME[] = { "proj normal s=0.02", "proj t4 s=0.02",
                                  "proj normal, row scale x e^N(0,.5)", "norm 1+N(0,.05)",
                                  "embed normal s=0.01", "embed t4 s=0.01" };
    printf("%-36s %7s %7s %7s %6s %7s %8s %9s\n", "distribution", "W3/256", "W3/128", "W4/256",
           "H(exp)", "H0", "esc/w", "dec GB/s");
    for (int d = 0; d < 6; d++) {
        for (int r = 0; r < rows; r++) {
            double rsc = d == 2 ? exp(0.5 * gauss()) : 1;
            for (int c = 0; c < cols; c++) {
                double v;
                switch (d) {
                case 0: v = 0.02 * gauss(); break;
                case 1: v = 0.02 * student4(); break;
                case 2: v = 0.02 * rsc * gauss(); break;
                case 3: v = 1 + 0.05 * gauss(); break;
                case 4: v = 0.01 * gauss(); break;
                default: v = 0.01 * student4(); break;
                }
                w[(size_t)r * cols + c] = to_bf16(v);
            }
        }
        K3CodecStats st = {0};
        size_t sz = k3_codec_encode(out, w, rows, cols, &st);
        char err[200];
        if (!sz || k3_codec_check(out, sz, rows, cols, 1, err, sizeof err)) {
            printf("encode/check failed: %s\n", err); return 1;
        }
        K3Mat M = { 0, rows, cols, NULL, NULL };
        k3_codec_bind(&M, out);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int bad = 0;
        for (int r = 0; r < rows; r++) {
            k3_codec_decode_row(back, &M, r);
            bad |= memcmp(back, w + (size_t)r * cols, (size_t)cols * 2) != 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec);
        double h = entropy_bits(w, n);
        printf("%-36s %7.4f %7.4f %7.4f %6.3f %7.4f %8.4f %9.2f%s\n", NAME[d], sz / (2.0 * n),
               window_ratio(w, n, 3, 128), window_ratio(w, n, 4, 256), h, (8 + h) / 16,
               (double)st.escapes / n, 2.0 * n / s / 1e9, bad ? "  ROUND TRIP FAILED" : "");
        if (bad) return 1;
    }
    free(w); free(back); free(out);
    return 0;
}
