/* test_matmul_into.c — k3_matmul_into (kernels.h): a piece of a matrix's rows multiplied
 * straight into its columns of the whole product, as the streamed trunk does with each
 * piece it reads (src/mem/stream.c). Against the scalar reference's product of the whole
 * matrix: the piece's columns carry exactly its bits, every other column of Y keeps the
 * canary it had, and no kernel reads outside the piece: its rows (and an MXFP4 piece's
 * scales, a coded piece's offset table) are copies that end flush against an unmapped
 * page, then start flush after one, so a read past either end faults. F32, BF16, MXFP4
 * and coded BF16; every kernel set the CPU runs; 1 and 2 threads; pieces at the start, in
 * the middle (odd rows), at the end and of one row; T from 1 to past a token block. */
#include "kernels.h"
#include "codec.h"
#include "weight_kinds.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fails, cases;
#define CHECK(c, ...) do { if (!(c)) { if (fails++ < 20) { printf("FAIL: "); \
        printf(__VA_ARGS__); printf("\n"); } } } while (0)
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }
static float small(void) { return ((int)(rnd() % 2001) - 1000) / 1024.0f; }

/* n bytes of src between two unmapped pages, flush against the one after (end) or the
 * one before (!end) */
typedef struct { unsigned char *map; size_t len; const void *p; } Guard;
static Guard guarded(const void *src, size_t n, int end) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
    Guard g = { NULL, body + 2 * pg, NULL };
    g.map = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED) { g.map = NULL; return g; }
    mprotect(g.map, pg, PROT_NONE);
    mprotect(g.map + pg + body, pg, PROT_NONE);
    unsigned char *d = end ? g.map + pg + body - n : g.map + pg;
    memcpy(d, src, n);
    g.p = d;
    return g;
}
static void unguard(Guard *g) { if (g->map) munmap(g->map, g->len); }

static const uint32_t CANARY = 0x7FC0BEEFu;   /* a NaN no product gives */

/* rows [a, b) of W as a piece in guarded copies, multiplied into Y [T][rows] */
static void piece(const char *set, const K3Mat *W, const uint8_t *stored, int a, int b,
                  const float *X, int T, const float *ref, int end) {
    const int rows = W->rows, cols = W->cols, n = b - a;
    K3Mat P = { W->type, n, cols, NULL, NULL, NULL };
    Guard gw = { 0 }, gs = { 0 };
    uint32_t *rel = NULL;
    if (W->type == K3_W_BF16C) {             /* the piece's rows and a table relative to them */
        const uint32_t *ro = k3_codec_rowoff(W);
        rel = malloc(4 * ((size_t)n + 1));
        for (int i = 0; i <= n; i++) rel[i] = ro[a + i] - ro[a];
        gw = guarded(stored + k3_codec_table_bytes(rows) + ro[a], rel[n], end);
        gs = guarded(rel, 4 * ((size_t)n + 1), end);
    } else if (W->type == K3_W_MXFP4) {
        const size_t rb = (size_t)cols / 2, sb = (size_t)cols / 32;
        gw = guarded((const uint8_t *)W->w + a * rb, n * rb, end);
        gs = guarded(W->scale + a * sb, n * sb, end);
    } else {
        const size_t rb = (size_t)cols * (W->type == K3_W_F32 ? 4 : 2);
        gw = guarded((const uint8_t *)W->w + a * rb, n * rb, end);
    }
    P.w = gw.p;
    P.scale = gs.p;
    uint32_t *Y = malloc(sizeof(float) * (size_t)T * rows);
    for (size_t i = 0; i < (size_t)T * rows; i++) Y[i] = CANARY;
    k3_matmul_into((float *)Y, rows, a, &P, X, T);
    int bad_in = 0, bad_out = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            const size_t i = (size_t)t * rows + r;
            if (r >= a && r < b) bad_in += memcmp(&Y[i], &ref[i], 4) != 0;
            else bad_out += Y[i] != CANARY;
        }
    CHECK(!bad_in, "%s type %d %dx%d rows %d..%d T=%d threads %d: %d outputs not the bits of "
          "the whole product", set, W->type, rows, cols, a, b, T, k3_threads(), bad_in);
    CHECK(!bad_out, "%s type %d %dx%d rows %d..%d T=%d: %d outputs outside the piece written",
          set, W->type, rows, cols, a, b, T, bad_out);
    free(Y); free(rel);
    unguard(&gw); unguard(&gs);
    cases++;
}

/* every set the CPU runs, 1 and 2 threads, pieces at the start, in the middle (odd rows), at
 * the end and of one row; flush against the page after or before, by turns */
static void pieces(const K3Mat *W, const uint8_t *coded, const float *X, int T, const float *ref,
                   int ti) {
    static const char *sets[] = { "scalar", "avx2", "avx512", "neon" };
    const int rows = W->rows;
    const int cuts[][2] = { { 0, 16 }, { 5, rows - 9 }, { rows - 21, rows }, { 17, 18 } };
    for (size_t j = 0; j < sizeof sets / sizeof sets[0]; j++) {
        char err[200];
        if (strcmp(sets[j], "scalar") && !k3_kernels_usable(sets[j])) continue;
        if (k3_kernels_select(sets[j], err, sizeof err)) continue;
        for (int th = 1; th <= 2; th++) {
            k3_threads_set(th);
            for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++)
                piece(sets[j], W, coded, cuts[c][0], cuts[c][1], X, T, ref, (int)(c + ti) & 1);
        }
    }
}

int main(void) {
    static const int shapes[][2] = { { 37, 64 }, { 200, 1056 } };
    static const int Ts[] = { 1, 2, 9, 33, 73 };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        if (weight_kinds_each(shapes[s][0], shapes[s][1], Ts, (int)(sizeof Ts / sizeof Ts[0]),
                              small, rnd, pieces)) { CHECK(0, "encode"); return 1; }
    CHECK(cases > 0, "no kernel set ran");
    printf("%d cases: each piece's outputs the whole product's bits, the rest untouched, no "
           "read outside the piece%s\n", cases, fails ? "" : " (ok)");
    return fails ? 1 : 0;
}
