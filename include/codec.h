/* codec.h — the lossless BF16 code of a coded trunk (K3_W_BF16C, docs/CODEC.md).
 *
 * A coded matrix [rows][cols] is stored as
 *   u32 rowoff[rows + 1]   byte offset of row r's data from the end of this table
 *                          (rowoff[0] = 0, rowoff[rows] = data length), so rows
 *                          [r0, r1) are the one byte range [rowoff[r0], rowoff[r1]);
 *   row data               every row on its own: ceil(cols / 256) blocks of 256 weights
 *                          (the last one shorter), each of G = ceil(n / 16) groups.
 * A block of n weights starts with two bytes, lo and nesc:
 *   coded (nesc <= 254): 6G bytes of code planes, nesc escape bytes, then 16G sign+mantissa
 *     bytes (bf16 bit 15 -> bit 7, bits 0-6 -> bits 0-6). Code c < 7: exponent lo + c
 *     (lo <= 249); code 7: the next escape byte is the exponent. The planes come in
 *     chunks of 4 groups (64 weights, the last chunk shorter): plane 0, 1, 2 of the
 *     chunk, each 2 bytes per group, bit j = bit k of the 3-bit code of the chunk's
 *     weight j; a full chunk is three u64 masks (AVX-512), any 8 lanes one byte each.
 *   raw (nesc == 255, lo == 0): 16G exponent bytes, then 16G sign+mantissa bytes.
 * A full block (n = 256, code bc2) stores each chunk of 64 weights in lane order: storage
 * lane s of a chunk (its plane bit, escape turn, exponent and sign+mantissa byte) holds
 * the chunk's weight k3_codec_lane(s), so byte unpacks place the weights of 4 groups in
 * their canonical lanes (docs/CODEC.md); a shorter block keeps weight order (s = weight).
 * Lanes past n (the last group of a row's last block) have code 0 and zero bytes.
 * Reading 16 bytes from any escape position stays inside the block (the sign+mantissa
 * plane follows), which the SIMD decoders rely on; k3_codec_check proves the rest
 * (offsets, sizes, escape counts) once when the bytes arrive, not in the hot loop. */
#ifndef K3_CODEC_H
#define K3_CODEC_H
#include "kernels.h"
#include <stddef.h>
#include <stdint.h>

#define K3_CODEC_BLOCK 256
#define K3_CODEC_RAW 255

typedef struct {
    uint64_t weights, blocks, raw_blocks, escapes;
} K3CodecStats;

/* Offset from a block's planes (block + 2) of the byte of code plane p (0..2) for lanes
 * 8h..8h+7 of group g, in a block of G groups. */
static inline size_t k3_codec_plane(int G, int g, int p, int h) {
    int k = g >> 2, gc = G - 4 * k < 4 ? G - 4 * k : 4;
    return 24 * (size_t)k + 2 * (size_t)(p * gc + (g & 3)) + (size_t)h;
}

/* Storage lane s (0..63) of a full block's chunk -> its weight 16 g + m: AVX-512
 * vpunpck{l,h}bw of (low, high) BF16 bytes give words whose dword halves, shifted and
 * masked, are groups g = 0..3 in lanes m; the same in every 128-bit lane, so the 8- and
 * 4-lane decoders (AVX2, NEON) follow from the 16-byte quarter s >> 4 = lanes 4 (s >> 4)
 * + (0..3). s = 16 (m >> 2) + 8 (g >> 1) + 2 (m & 3) + (g & 1). */
static inline int k3_codec_lane(int s) {
    return 16 * (2 * (s >> 3 & 1) + (s & 1)) + 4 * (s >> 4) + (s >> 1 & 3);
}

/* Exact size of a block of G groups from its header h (lo, nesc): what every decoder
 * steps over to reach the next block. */
static inline size_t k3_codec_block_bytes(const uint8_t *h, int G) {
    return h[1] == K3_CODEC_RAW ? 2 + 32 * (size_t)G : 2 + 22 * (size_t)G + h[1];
}

/* Bytes of the row offset table. */
static inline size_t k3_codec_table_bytes(int rows) { return 4 * ((size_t)rows + 1); }
/* Most bytes k3_codec_encode can write for this shape. */
size_t k3_codec_bound(int rows, int cols);
/* Codes w [rows][cols] into out (k3_codec_bound bytes); returns the stored size, or 0
 * when the data would pass 4 GiB (u32 offsets): store such a tensor raw. */
size_t k3_codec_encode(uint8_t *out, const uint16_t *w, int rows, int cols, K3CodecStats *st);
/* The structure of a stored coded tensor of n bytes: 0, or -1 with a message naming the
 * row and block ("row 3 block 1: 9 escape codes, its header says 8"). Always: the offset
 * table, every block's size from its header, lo — all the decoders need to stay inside
 * the tensor and to agree bit for bit (a few operations per block). full: also the
 * escape counts against the code planes and the zero padding (the canonical form the
 * encoder writes; one pass over the planes). */
int k3_codec_check(const uint8_t *stored, size_t n, int rows, int cols, int full, char *err,
                   size_t errlen);
/* The same check of rows [r0, r1) alone: ro is the (already checked: in order, inside the
 * tensor) offset table, data row r0's bytes (a streamed piece). */
int k3_codec_check_rows(const uint32_t *ro, int r0, int r1, const uint8_t *data, int cols,
                        int full, char *err, size_t errlen);
/* Points M (rows, cols already set) at checked stored bytes: type K3_W_BF16C, scale =
 * the row offset table. A view of rows [r0, r1) is the same with scale advanced by
 * 4 * r0 bytes (the offsets are relative to w). */
void k3_codec_bind(K3Mat *M, const uint8_t *stored);
/* One block of n weights at p back to BF16 (the reference decoder); returns the next
 * block. */
const uint8_t *k3_codec_decode_block(uint16_t *out, const uint8_t *p, int n);
/* Row r of a coded matrix back to BF16 (cols values). */
void k3_codec_decode_row(uint16_t *out, const K3Mat *W, int r);
/* Row r's coded bytes. */
static inline const uint32_t *k3_codec_rowoff(const K3Mat *W) {
    return (const uint32_t *)(const void *)W->scale;       /* 4-aligned (k3_codec_check) */
}
static inline const uint8_t *k3_codec_row(const K3Mat *W, int r) {
    return (const uint8_t *)W->w + k3_codec_rowoff(W)[r];
}

/* Prefill (T > 1) where a SIMD path has none of its own (NEON, AVX2 from 73 tokens,
 * docs/CODEC.md): rows decoded a few at a time into per-thread scratch (a block of rows,
 * never a layer) and multiplied by o's own BF16 kernel, which gives each row's bits
 * independently of the tiling (kernels.h). dec: the path's fast row decoder (NULL:
 * k3_codec_decode_row). */
typedef void (*K3RowDecoder)(uint16_t *out, const K3Mat *W, int r);
void k3_codec_prefill(const K3KernelOps *o, K3RowDecoder dec, float *Y, const K3Mat *W,
                      const float *X, int r0, int r1, int t0, int t1);
/* its scratch for up to T tokens on a rows x cols matrix: slot[K3_SCRATCH_CODEC] raised */
void k3_codec_prefill_scratch(int T, int rows, int cols, size_t *slot);

/* Tests: the AVX-512 coded matvec uses its VBMI decoder when the CPU has it and on != 0
 * (on < 0: no change); returns the previous setting. */
int k3_avx512_codec_vbmi(int on);

/* For the 8-lane SIMD decoders (AVX2, NEON): k3_codec_expand8[m] is the byte shuffle
 * that moves escape byte j to the j-th set lane of the 8-bit mask m (0x80 elsewhere). */
extern const uint8_t k3_codec_expand8[256][8];
#endif
