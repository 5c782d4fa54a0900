/* codec.c — the lossless BF16 code (bc2) of a coded trunk (codec.h, docs/CODEC.md): encoder,
 * structure check, row decoder, and the prefill driver the SIMD paths share. The
 * matvec decoders live beside their BF16 twins in kernels*.c. */
#include "codec.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B K3_CODEC_BLOCK

static int ngroups(int n) { return (n + 15) / 16; }

/* Exact size of one block from its header (n weights). */
static size_t block_bytes(const uint8_t *h, int n) { return k3_codec_block_bytes(h, ngroups(n)); }

size_t k3_codec_bound(int rows, int cols) {
    size_t nb = (size_t)(cols + B - 1) / B, G = (size_t)(cols + 15) / 16;
    return k3_codec_table_bytes(rows) + (size_t)rows * (2 * nb + 32 * G);
}

/* The weight at storage lane s of a block of n weights (codec.h). */
static int wlane(int s, int n) { return n == B ? (s & ~63) + k3_codec_lane(s & 63) : s; }

/* One block of n weights at o; returns its size. lo: the window of 7 exponents that
 * holds the most weights (the lowest such lo); everything else escapes. */
static size_t enc_block(uint8_t *o, const uint16_t *w, int n, K3CodecStats *st) {
    int G = ngroups(n), hist[256] = {0};
    for (int i = 0; i < n; i++) hist[(w[i] >> 7) & 255]++;
    int cnt = 0, best = -1, lo = 0;
    for (int e = 0; e < 7; e++) cnt += hist[e];
    for (int l = 0; l <= 249; l++) {
        if (l) cnt += hist[l + 6] - hist[l - 1];
        if (cnt > best) { best = cnt; lo = l; }
    }
    int nesc = n - best;
    size_t raw = 2 + 32 * (size_t)G, coded = 2 + 22 * (size_t)G + (size_t)nesc;
    st->weights += (uint64_t)n; st->blocks++;
    if (nesc >= K3_CODEC_RAW || coded >= raw) {
        uint8_t *ex = o + 2, *sm = o + 2 + 16 * G;
        o[0] = 0; o[1] = K3_CODEC_RAW;
        memset(o + 2, 0, 32 * (size_t)G);
        for (int s = 0; s < n; s++) {
            int i = wlane(s, n);
            ex[s] = (uint8_t)(w[i] >> 7);
            sm[s] = (uint8_t)(((w[i] >> 8) & 0x80) | (w[i] & 0x7F));
        }
        st->raw_blocks++;
        return raw;
    }
    uint8_t *pl = o + 2, *esc = pl + 6 * G, *sm = esc + nesc;
    o[0] = (uint8_t)lo; o[1] = (uint8_t)nesc;
    memset(pl, 0, 6 * (size_t)G);
    memset(sm, 0, 16 * (size_t)G);
    int k = 0;
    for (int s = 0; s < n; s++) {                  /* storage lanes, escapes in their order */
        int i = wlane(s, n), e = (w[i] >> 7) & 255, c = e - lo;
        if (c < 0 || c > 6) { c = 7; esc[k++] = (uint8_t)e; }
        int l = s & 15;
        for (int b = 0; b < 3; b++)
            if (c >> b & 1) pl[k3_codec_plane(G, s >> 4, b, l >> 3)] |= (uint8_t)(1u << (l & 7));
        sm[s] = (uint8_t)(((w[i] >> 8) & 0x80) | (w[i] & 0x7F));
    }
    st->escapes += (uint64_t)nesc;
    return coded;
}

size_t k3_codec_encode(uint8_t *out, const uint16_t *w, int rows, int cols, K3CodecStats *st) {
    K3CodecStats dummy = {0};
    if (!st) st = &dummy;
    size_t tb = k3_codec_table_bytes(rows), o = 0;
    uint8_t *data = out + tb;
    for (int r = 0; r < rows; r++) {
        uint32_t ro = (uint32_t)o;
        memcpy(out + 4 * (size_t)r, &ro, 4);
        for (int c = 0; c < cols; c += B)
            o += enc_block(data + o, w + (size_t)r * cols + c, cols - c < B ? cols - c : B, st);
        if (o > 0xFFFFFFFFu) return 0;
    }
    uint32_t ro = (uint32_t)o;
    memcpy(out + 4 * (size_t)rows, &ro, 4);
    return tb + o;
}

/* inline bit count: the portable build has no popcnt instruction (a libgcc call) */
static int popc16(unsigned v) {
    v &= 0xFFFF;
    v -= v >> 1 & 0x5555;
    v = (v & 0x3333) + (v >> 2 & 0x3333);
    v = (v + (v >> 4)) & 0x0F0F;
    return (int)((v + (v >> 8)) & 0x1F);
}
static unsigned u16le(const uint8_t *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

/* One block of n weights that must fill exactly len bytes. */
static int check_block(const uint8_t *h, size_t len, int n, int r, int b, int full, char *err,
                       size_t errlen) {
    int G = ngroups(n), tail = n - 16 * (G - 1);
    unsigned tailmask = tail == 16 ? 0xFFFF : (1u << tail) - 1;
    if (len < 2) FAIL("row %d block %d: truncated header", r, b);
    if (block_bytes(h, n) != len)
        FAIL("row %d block %d: %zu bytes, its header (lo %u, nesc %u) needs %zu", r, b, len,
             h[0], h[1], block_bytes(h, n));
    const uint8_t *last_sm;
    if (!full) {
        if (h[1] == K3_CODEC_RAW ? h[0] != 0 : h[0] > 249)
            FAIL("row %d block %d: lo %u with nesc %u", r, b, h[0], h[1]);
        return 0;
    }
    if (h[1] == K3_CODEC_RAW) {
        if (h[0]) FAIL("row %d block %d: raw block with lo %u (must be 0)", r, b, h[0]);
        const uint8_t *ex = h + 2 + 16 * (G - 1);
        for (int l = tail; l < 16; l++)
            if (ex[l]) FAIL("row %d block %d: nonzero padding", r, b);
        last_sm = h + 2 + 16 * G + 16 * (G - 1);
    } else {
        if (h[0] > 249) FAIL("row %d block %d: lo %u above 249", r, b, h[0]);
        const uint8_t *pl = h + 2;
        int nesc = 0;
        for (int g = 0; g < G; g++) {
            unsigned p0 = u16le(pl + k3_codec_plane(G, g, 0, 0));
            unsigned p1 = u16le(pl + k3_codec_plane(G, g, 1, 0));
            unsigned p2 = u16le(pl + k3_codec_plane(G, g, 2, 0));
            unsigned valid = g == G - 1 ? tailmask : 0xFFFF;
            if ((p0 | p1 | p2) & ~valid & 0xFFFF)
                FAIL("row %d block %d: codes in padding lanes", r, b);
            nesc += popc16(p0 & p1 & p2);
        }
        if (nesc != h[1])
            FAIL("row %d block %d: %d escape codes, its header says %u", r, b, nesc, h[1]);
        last_sm = h + 2 + 6 * G + h[1] + 16 * (G - 1);
    }
    for (int l = tail; l < 16; l++)
        if (last_sm[l]) FAIL("row %d block %d: nonzero padding", r, b);
    return 0;
}

int k3_codec_check_rows(const uint32_t *ro, int r0, int r1, const uint8_t *data, int cols,
                        int full, char *err, size_t errlen) {
    if (cols <= 0 || r1 < r0) FAIL("bad shape %d x %d", r1 - r0, cols);
    for (int r = r0; r < r1; r++) {
        if (ro[r + 1] < ro[r]) FAIL("row %d: offsets [%u, %u) out of order", r, ro[r], ro[r + 1]);
        size_t o = ro[r] - ro[r0], end = ro[r + 1] - ro[r0];
        for (int c = 0, b = 0; c < cols; c += B, b++) {
            int nb = cols - c < B ? cols - c : B;
            if (end - o < 2) FAIL("row %d block %d: past the end of the row", r, b);
            size_t len = block_bytes(data + o, nb);
            if (len > end - o) FAIL("row %d block %d: runs past the end of the row", r, b);
            if (check_block(data + o, len, nb, r, b, full, err, errlen)) return -1;
            o += len;
        }
        if (o != end) FAIL("row %d: %zu bytes left after its last block", r, (size_t)(end - o));
    }
    return 0;
}

int k3_codec_check(const uint8_t *stored, size_t n, int rows, int cols, int full, char *err,
                   size_t errlen) {
    size_t tb = k3_codec_table_bytes(rows);
    if (rows <= 0 || cols <= 0) FAIL("bad shape %d x %d", rows, cols);
    if ((uintptr_t)stored & 3) FAIL("offset table not 4-byte aligned");
    if (n < tb) FAIL("%zu bytes, smaller than its row offset table (%zu)", n, tb);
    const uint32_t *ro = (const uint32_t *)stored;
    size_t dlen = n - tb;
    if (ro[0] != 0 || ro[rows] != dlen)
        FAIL("row offset table spans [%u, %u), the data is %zu bytes", ro[0], ro[rows], dlen);
    for (int r = 0; r < rows; r++)
        if (ro[r + 1] < ro[r] || ro[r + 1] > dlen)
            FAIL("row %d: offsets [%u, %u) out of order or past the end", r, ro[r], ro[r + 1]);
    return k3_codec_check_rows(ro, 0, rows, stored + tb, cols, full, err, errlen);
}

void k3_codec_bind(K3Mat *M, const uint8_t *stored) {
    M->type = K3_W_BF16C;
    M->scale = stored;
    M->w = stored + k3_codec_table_bytes(M->rows);
}

/* spread[b]: bit j of b -> bit 0 of byte j, so three plane bytes give 8 codes at once */
static uint64_t spread[256];
__attribute__((constructor)) static void spread_init(void) {
    for (int b = 0; b < 256; b++)
        for (int j = 0; j < 8; j++) spread[b] |= (uint64_t)(b >> j & 1) << (8 * j);
}

const uint8_t *k3_codec_decode_block(uint16_t *o, const uint8_t *p, int n) {
    int G = ngroups(n);
    if (p[1] == K3_CODEC_RAW) {
        const uint8_t *ex = p + 2, *sm = ex + 16 * G;
        for (int s = 0; s < n; s++)
            o[wlane(s, n)] = (uint16_t)((sm[s] & 0x80) << 8 | ex[s] << 7 | (sm[s] & 0x7F));
        return p + block_bytes(p, n);
    }
    const uint8_t *pl = p + 2, *esc = pl + 6 * G, *sm = esc + p[1];
    const int lo = p[0];
    for (int i = 0; i < n; i += 8) {                  /* 8 lanes: one byte of each plane */
        int g = i >> 4, gc = G - (g & ~3) < 4 ? G - (g & ~3) : 4;
        const uint8_t *q = pl + k3_codec_plane(G, g, 0, (i >> 3) & 1);
        uint64_t c = spread[q[0]] | spread[q[2 * gc]] << 1 | spread[q[4 * gc]] << 2;
        for (int j = 0; j < 8 && i + j < n; j++, c >>= 8) {
            int code = (int)(c & 7), e = code == 7 ? *esc++ : lo + code;
            o[wlane(i + j, n)] =
                (uint16_t)((sm[i + j] & 0x80) << 8 | e << 7 | (sm[i + j] & 0x7F));
        }
    }
    return p + block_bytes(p, n);
}

void k3_codec_decode_row(uint16_t *out, const K3Mat *W, int r) {
    const uint8_t *p = k3_codec_row(W, r);
    for (int c = 0; c < W->cols; c += B)
        p = k3_codec_decode_block(out + c, p, W->cols - c < B ? W->cols - c : B);
}

/* ------------------------------------------------------------------ expand table */
#define X8(m) { E(m, 0), E(m, 1), E(m, 2), E(m, 3), E(m, 4), E(m, 5), E(m, 6), E(m, 7) }
/* byte j of entry m: index of lane j among m's set lanes, or 0x80 */
#define E(m, j) ((m) >> (j) & 1 ? __builtin_popcount((m) & ((1u << (j)) - 1)) : 0x80)
#define X4(m) X8(m), X8(m + 1), X8(m + 2), X8(m + 3)
#define X16(m) X4(m), X4(m + 4), X4(m + 8), X4(m + 12)
#define X64(m) X16(m), X16(m + 16), X16(m + 32), X16(m + 48)
const uint8_t k3_codec_expand8[256][8] = { X64(0), X64(64), X64(128), X64(192) };

/* ------------------------------------------------------------------ prefill */

/* ~8 MB of rows (up to 512): the BF16 kernel packs X per call, so few rows per call
 * (256 KB) ran at half the plain speed, 2 MB ~5% slower than 8 (measured) */
static int rows_per_block(int cols) {
    const int RB = (int)((8192u << 10) / (2u * (unsigned)cols));
    return RB < 16 ? 16 : RB > 512 ? 512 : RB & ~15;
}

/* a call of n rows: its decoded rows (up to a block's), their outputs */
static size_t prefill_bytes(int n, int cols, int T, size_t *wb) {
    const int RB = rows_per_block(cols), r = n < RB ? n : RB;
    *wb = ((size_t)r * cols * 2 + 63) & ~(size_t)63;
    return *wb + sizeof(float) * (size_t)r * T;
}

void k3_codec_prefill_scratch(int T, int rows, int cols, size_t *slot) {
    size_t wb, b = prefill_bytes(rows, cols, T, &wb);
    if (b > slot[K3_SCRATCH_CODEC]) slot[K3_SCRATCH_CODEC] = b;
}

void k3_codec_prefill(const K3KernelOps *o, K3RowDecoder dec, float *Y, const K3Mat *W,
                      const float *X, int r0, int r1, int t0, int t1) {
    if (!dec) dec = k3_codec_decode_row;
    const int cols = W->cols, T = t1 - t0;
    const int RB = rows_per_block(cols);
    size_t wb;
    uint8_t *s = k3_scratch_slot(K3_SCRATCH_CODEC, prefill_bytes(r1 - r0, cols, T, &wb));
    if (!s) { k3_kernels_scalar()->matmul(Y, W, X, r0, r1, t0, t1); return; }  /* same bits */
    uint16_t *w = (uint16_t *)s;
    float *yt = (float *)(s + wb);
    for (int r = r0; r < r1; r += RB) {
        int nr = r1 - r < RB ? r1 - r : RB;
        for (int i = 0; i < nr; i++) dec(w + (size_t)i * cols, W, r + i);
        K3Mat V = { K3_W_BF16, nr, cols, w, NULL, NULL };
        o->matmul(yt, &V, X + (size_t)t0 * cols, 0, nr, 0, T);
        for (int t = 0; t < T; t++)
            memcpy(Y + (size_t)(t0 + t) * W->rows + r, yt + (size_t)t * nr, sizeof(float) * nr);
    }
}
