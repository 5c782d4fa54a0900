/* kernels_avx2_coded.c — the AVX2 twin of the scalar K3_W_BF16C kernels (codec.h,
 * kernels.c dot_bf16c), same bits: the matvec (T = 1), the prefill's row decoder
 * (k3_codec_prefill) and the GEMM's panel decoder (kernels_avx2_gemm.c decode_w).
 * Compiled with -mavx2 -mfma (Makefile); elsewhere this file is empty of code. */
#include "kernels.h"
#include "kernels_avx2.h"
#include "codec.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <string.h>

#define INL static inline __attribute__((always_inline))
#ifndef PFC
#define PFC 1024  /* matvec: bytes ahead on the row stream, to L1 (the BF16 kernel's PF) */
#endif
#ifndef PFD
/* and further ahead to L2 (issue 40: 8-24 KB measured alike, 1.12-1.17x over the 4-row
 * interleave with the next rows' bytes fetched to L2, the best of that kind) */
#define PFD 16384
#endif

static float fold_arr(float acc[16]) {
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

INL __m256 ld_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* K3_W_BF16C matvec (codec.h). A full block (bc2) goes 32 storage lanes a step: half h
 * of chunk k is storage quarters 2h, 2h + 1, i.e. lanes 8h..8h+7 of the chunk's 4 groups
 * (codec.h k3_codec_lane), so it all goes into acc[h], groups in order: the reference's
 * order with no cross-lane permute. Exponents in the byte domain: the three plane
 * dwords of the step are broadcast and spread to one byte per lane (pshufb, and, cmpeq
 * with the lane's bit); the masks add 1, 2, 4 to lo. Escapes (all three bits, found
 * from the dwords in a register) take their bytes by pshufb through k3_codec_expand8,
 * 8 lanes at a time (a full block's matvec: cf_exp, two groups a 16-byte load). The
 * rows go one at a time (4 interleaved spilled registers and measured slower), each
 * fetched 1 KB ahead to L1 and 16 KB ahead to L2. The BF16 bytes hi = sign | exp >> 1
 * and lo = (exp & 1) << 7 | mantissa, unpacked per 128-bit lane, give dwords (group 0 |
 * group 1 << 16) and (group 2 | group 3 << 16) at lanes 8h..8h+7; a shift or an and
 * makes each fp32.
 * A shorter block (weight order) goes two groups a step the same way, its bytes put in
 * the dword order C_PERM first, a lone last group 8 lanes a step; a row's last block
 * when cols % 16 != 0 through the reference decoder and the BF16 lanes (spilled tail,
 * as tail_finish): same order, same bits. */
typedef struct { __m256i idx, bit, four, hi, top; } CConst;

INL CConst c_const(void) {
    CConst k;
    /* byte i of the step <- bit i % 8 of plane byte i / 8 (broadcast dword) */
    k.idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                             2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    k.bit = _mm256_set1_epi64x(0x8040201008040201);
    k.four = _mm256_set1_epi8(4);
    k.hi = _mm256_set1_epi8((char)0x80);
    k.top = _mm256_set1_epi32((int)0xFFFF0000u);
    /* opaque to the compiler: kept in registers, not rebuilt from immediates each step */
    __asm__("" : "+x"(k.idx), "+x"(k.bit), "+x"(k.four), "+x"(k.hi), "+x"(k.top));
    return k;
}

/* the BF16 words of 32 lanes from exponent bytes e and sign+mantissa bytes s, unpacked
 * per 128-bit lane: a from bytes 0-7 of each, b from bytes 8-15. For a full block's
 * half h, dword j of a = groups 0, 1 (low, high word) at lane 8h + j, of b groups 2, 3 */
INL void c_words(const CConst *k, __m256i e, __m256i s, __m256i *a, __m256i *b) {
    __m256i hi = _mm256_or_si256(_mm256_and_si256(s, k->hi),
                                 _mm256_andnot_si256(k->hi, _mm256_srli_epi16(e, 1)));
    __m256i lo = _mm256_or_si256(_mm256_andnot_si256(k->hi, s),
                                 _mm256_and_si256(_mm256_slli_epi16(e, 7), k->hi));
    *a = _mm256_unpacklo_epi8(lo, hi); *b = _mm256_unpackhi_epi8(lo, hi);
}

/* half h of a chunk into acc (= acc[h]); x = the chunk's x + 8h */
INL __m256 c_fma32(const CConst *k, __m256i e, __m256i s, const float *x, __m256 acc) {
    __m256i a, b;
    c_words(k, e, s, &a, &b);
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_loadu_ps(x),
                          acc);
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(a, k->top)),
                          _mm256_loadu_ps(x + 16), acc);
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(b, 16)),
                          _mm256_loadu_ps(x + 32), acc);
    return _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(b, k->top)),
                           _mm256_loadu_ps(x + 48), acc);
}

INL __m256i ld256(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* storage lane s (a multiple of 32) of a full block: chunk s / 64, half h = s / 32 % 2;
 * its weights' offset 64 (s / 64) + 8 h, its plane dwords' offset 24 (s / 64) + 4 h */
INL int c_off(int s) { return (s & ~63) + (s >> 2 & 8); }
INL int c_planes(int s) { return 24 * (s >> 6) + (s >> 3 & 4); }

/* plane dword (broadcast from q) -> 0xFF in the lanes whose bit is set */
INL __m256i c_mask(const CConst *k, const uint8_t *q) {
    __m256i b = _mm256_castps_si256(_mm256_broadcast_ss((const float *)(const void *)q));
    __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(b, k->idx), k->bit);
    return _mm256_cmpeq_epi8(t, k->bit);
}

INL uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

INL __m128i ld2x64(const uint8_t *a, const uint8_t *b) {     /* 8 bytes at a, 8 at b */
    return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(_mm_loadl_epi64((const __m128i *)a)),
                                         (const double *)(const void *)b));
}

/* the escape bytes of the lanes set in be, in lane order */
INL __m256i c_escapes(const uint8_t **escp, uint32_t be) {
    unsigned m0 = be & 255, m1 = be >> 8 & 255, m2 = be >> 16 & 255, m3 = be >> 24;
    const uint8_t *e0 = *escp, *e1 = e0 + __builtin_popcount(m0);
    const uint8_t *e2 = e1 + __builtin_popcount(m1), *e3 = e2 + __builtin_popcount(m2);
    *escp = e3 + __builtin_popcount(m3);
    __m256i v = _mm256_set_m128i(ld2x64(e2, e3), ld2x64(e0, e1));      /* in block */
    __m256i i = _mm256_set_m128i(ld2x64(k3_codec_expand8[m2], k3_codec_expand8[m3]),
                                 ld2x64(k3_codec_expand8[m0], k3_codec_expand8[m1]));
    i = _mm256_add_epi8(i, _mm256_setr_epi64x(0, 0x0808080808080808, 0, 0x0808080808080808));
    return _mm256_shuffle_epi8(v, i);
}

/* the exponent bytes of 32 lanes (storage order): plane dwords at q, q + gc, q + 2 gc
 * (a full block: q = planes + 24 k + 4 h, gc = 8) */
INL __m256i c_exp(const CConst *k, const uint8_t *q, int gc, __m256i lo, const uint8_t **esc) {
    uint32_t be = ld32(q) & ld32(q + gc) & ld32(q + 2 * gc);
    __m256i m0 = c_mask(k, q), m1 = c_mask(k, q + gc), m2 = c_mask(k, q + 2 * gc);
    __m256i e = _mm256_sub_epi8(_mm256_sub_epi8(lo, m0), _mm256_add_epi8(m1, m1));
    e = _mm256_add_epi8(e, _mm256_and_si256(m2, k->four));
    /* no branch on be (issue 40): with 2% escapes half the 32-lane steps have one, so a
     * branch mispredicts every other step on weights that do not repeat (from RAM
     * 1.1-1.5x slower; in a repeated in-cache set the predictor learns them) */
    e = _mm256_blendv_epi8(e, c_escapes(esc, be), _mm256_and_si256(_mm256_and_si256(m0, m1), m2));
    return e;
}

/* Full blocks (issue 40): k3_codec_expand8 with o added to the set lanes' indices, so
 * that the escape indices of two 8-lane groups come from one 16-byte load of escapes */
#define XE(m, j, o) ((m) >> (j) & 1 ? __builtin_popcount((m) & ((1u << (j)) - 1)) + (o) : 0x80)
#define XO8(m, o) { XE(m, 0, o), XE(m, 1, o), XE(m, 2, o), XE(m, 3, o), XE(m, 4, o), \
                    XE(m, 5, o), XE(m, 6, o), XE(m, 7, o) }
#define XO4(m, o) XO8(m, o), XO8(m + 1, o), XO8(m + 2, o), XO8(m + 3, o)
#define XO16(m, o) XO4(m, o), XO4(m + 4, o), XO4(m + 8, o), XO4(m + 12, o)
#define XO64(m, o) XO16(m, o), XO16(m + 16, o), XO16(m + 32, o), XO16(m + 48, o)
#define XO(o) { XO64(0, o), XO64(64, o), XO64(128, o), XO64(192, o) }
static const uint8_t c_xo[9][256][8] = { XO(0), XO(1), XO(2), XO(3), XO(4), XO(5), XO(6),
                                         XO(7), XO(8) };
/* byte i of the step <- byte o + i / 8 (both 128-bit lanes: o, o + 1 | o + 2, o + 3) */
static const uint8_t c_ix[4][32] __attribute__((aligned(32))) = {
#define IX(o) { o, o, o, o, o, o, o, o, o + 1, o + 1, o + 1, o + 1, o + 1, o + 1, o + 1, o + 1, \
    o + 2, o + 2, o + 2, o + 2, o + 2, o + 2, o + 2, o + 2, o + 3, o + 3, o + 3, o + 3, \
    o + 3, o + 3, o + 3, o + 3 }
    IX(0), IX(4), IX(8), IX(12)
#undef IX
};
INL __m256i c_mask2(const CConst *k, __m256i b, int o) {
    __m256i t = _mm256_shuffle_epi8(b, _mm256_load_si256((const __m256i *)c_ix[o / 4]));
    return _mm256_cmpeq_epi8(_mm256_and_si256(t, k->bit), k->bit);
}
/* the exponent bytes of half h of a full block's chunk: q its planes (24 bytes), A, B
 * their bytes 0-15, 8-23 in both 128-bit lanes; lo7 = lo + 7 (the escape code's) */
INL __m256i cf_exp(const CConst *k, const uint8_t *q, __m256i A, __m256i B, int h, __m256i lo,
                   __m256i lo7, const uint8_t **escp) {
    uint32_t be = ld32(q + 4 * h) & ld32(q + 8 + 4 * h) & ld32(q + 16 + 4 * h);
    __m256i m0 = c_mask2(k, A, 4 * h), m1 = c_mask2(k, A, 8 + 4 * h);
    __m256i m2 = c_mask2(k, B, 8 + 4 * h);
    __m256i e = _mm256_sub_epi8(_mm256_sub_epi8(lo, m0), _mm256_add_epi8(m1, m1));
    e = _mm256_add_epi8(e, _mm256_and_si256(m2, k->four));
    unsigned b0 = be & 255, b1 = be >> 8 & 255, b2 = be >> 16 & 255, b3 = be >> 24;
    const uint8_t *e0 = *escp;
    int n0 = __builtin_popcount(b0), n2 = __builtin_popcount(b2);
    int n01 = __builtin_popcount(be & 0xFFFF);
    *escp = e0 + __builtin_popcount(be);
    /* 16 bytes from any escape position of a full block stay inside it */
    __m256i v = _mm256_loadu2_m128i((const __m128i *)(e0 + n01), (const __m128i *)e0);
    __m256i i = _mm256_set_m128i(ld2x64(c_xo[0][b2], c_xo[n2][b3]),
                                 ld2x64(c_xo[0][b0], c_xo[n0][b1]));
    return _mm256_blendv_epi8(e, _mm256_shuffle_epi8(v, i), _mm256_cmpeq_epi8(e, lo7));
}

/* Groups g, g + 1 of a short block (weight order) from exponent bytes e and
 * sign+mantissa bytes s in weight order: after the dword permute C_PERM the 128-bit
 * unpacks give weights 0-7, 8-15, 16-23, 24-31 in turn, for acc[0], acc[1], acc[0],
 * acc[1]: the reference's order */
#define C_PERM _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)
INL void c_pair(const CConst *k, __m256i e, __m256i s, const float *x, __m256 acc[2]) {
    const __m256i z = _mm256_setzero_si256();
    __m256i a, b;
    c_words(k, _mm256_permutevar8x32_epi32(e, C_PERM), _mm256_permutevar8x32_epi32(s, C_PERM),
            &a, &b);
    acc[0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, a)),
                             _mm256_loadu_ps(x), acc[0]);
    acc[1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, a)),
                             _mm256_loadu_ps(x + 8), acc[1]);
    acc[0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, b)),
                             _mm256_loadu_ps(x + 16), acc[0]);
    acc[1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, b)),
                             _mm256_loadu_ps(x + 24), acc[1]);
}

/* the lone last group of a short block (odd G), 8 lanes a step */
INL __m256 c_bits(__m256i v, __m256i e) {            /* sign+mantissa bytes, exponent<<23 */
    __m256i s = _mm256_and_si256(_mm256_slli_epi32(v, 24), _mm256_set1_epi32((int)0x80000000u));
    __m256i m = _mm256_and_si256(_mm256_slli_epi32(v, 16), _mm256_set1_epi32(0x7F0000));
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(s, m), e));
}
INL __m256i c_lanes(unsigned b, __m256i lb) {        /* bit l of b -> all-ones lane l */
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), lb), lb);
}
INL __m256i u8x8(const uint8_t *p) {                 /* 8 bytes -> 8 dwords */
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
static void c_group(const uint8_t *p, int G, int g, const uint8_t **escp, const uint8_t *sm,
                    const float *x, __m256 acc[2]) {
    const uint8_t *pl = p + 2, *esc = *escp;
    const __m256i lb = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i base = _mm256_set1_epi32(p[0] << 23), c1 = _mm256_set1_epi32(1 << 23);
    const __m256i c2 = _mm256_set1_epi32(2 << 23), c4 = _mm256_set1_epi32(4 << 23);
    for (int h = 0; h < 2; h++) {
        const uint8_t *q = pl + k3_codec_plane(G, g, 0, h);
        const int o = 16 * g + 8 * h, gc = 2 * (G - (g & ~3) < 4 ? G - (g & ~3) : 4);
        unsigned b0 = q[0], b1 = q[gc], b2 = q[2 * gc], be = b0 & b1 & b2;
        __m256i m0 = c_lanes(b0, lb), m1 = c_lanes(b1, lb), m2 = c_lanes(b2, lb);
        __m256i e = _mm256_add_epi32(base, _mm256_and_si256(m0, c1));
        e = _mm256_add_epi32(e, _mm256_and_si256(m1, c2));
        e = _mm256_add_epi32(e, _mm256_and_si256(m2, c4));
        __m128i xb = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)esc),   /* in block */
                                      _mm_loadl_epi64((const __m128i *)k3_codec_expand8[be]));
        __m256i xe = _mm256_slli_epi32(_mm256_cvtepu8_epi32(xb), 23);
        e = _mm256_blendv_epi8(e, xe, _mm256_and_si256(_mm256_and_si256(m0, m1), m2));
        esc += __builtin_popcount(be);
        acc[h] = _mm256_fmadd_ps(c_bits(u8x8(sm + o), e), _mm256_loadu_ps(x + o), acc[h]);
    }
    *escp = esc;
}

INL void c_block(const CConst *k, const uint8_t *p, int G, const float *x, __m256 acc[2]) {
    const uint8_t *pl = p + 2, *esc = pl + 6 * G;
    const int raw = p[1] == K3_CODEC_RAW;
    const uint8_t *sm = raw ? pl + 16 * G : esc + p[1];
    const __m256i lo = _mm256_set1_epi8((char)p[0]);
    if (G < 16) {                                /* short: weight order, 2 groups a step */
        int g = 0;
        for (; g + 2 <= G; g += 2) {             /* g even: g and g + 1 share a chunk */
            const int gc = 2 * (G - (g & ~3) < 4 ? G - (g & ~3) : 4);
            __m256i e = raw ? ld256(pl + 16 * g)
                            : c_exp(k, pl + k3_codec_plane(G, g, 0, 0), gc, lo, &esc);
            c_pair(k, e, ld256(sm + 16 * g), x + 16 * g, acc);
        }
        if (g < G && !raw) c_group(p, G, g, &esc, sm, x, acc);
        else if (g < G)
            for (int h = 0; h < 2; h++) {
                const int o = 16 * g + 8 * h;
                __m256i e = _mm256_slli_epi32(u8x8(pl + o), 23);
                acc[h] = _mm256_fmadd_ps(c_bits(u8x8(sm + o), e), _mm256_loadu_ps(x + o), acc[h]);
            }
        return;
    }
    __m256 a[2] = { acc[0], acc[1] };
    if (raw)
#pragma GCC unroll 8
        for (int s = 0; s < 256; s += 32)
            a[s >> 5 & 1] = c_fma32(k, ld256(pl + s), ld256(sm + s), x + c_off(s), a[s >> 5 & 1]);
    else
#pragma GCC unroll 8
        for (int s = 0; s < 256; s += 32) {
            if (s < 192) {                       /* spread: +3-9% over a burst */
                _mm_prefetch((const char *)p + PFC + 2 * s, _MM_HINT_T0);
                _mm_prefetch((const char *)p + PFD + 2 * s, _MM_HINT_T1);
            }
            const uint8_t *q = pl + 24 * (s >> 6);
            __m256i A = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q));
            __m256i B = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(q + 8)));
            __m256i e = cf_exp(k, q, A, B, s >> 5 & 1, lo,
                               _mm256_add_epi8(lo, _mm256_set1_epi8(7)), &esc);
            a[s >> 5 & 1] = c_fma32(k, e, ld256(sm + s), x + c_off(s), a[s >> 5 & 1]);
        }
    acc[0] = a[0]; acc[1] = a[1];
}

/* the rest of a row from column c (a multiple of 256; the block at p) into acc, folded */
static float c_rest(const uint8_t *p, int c, int cols, const float *x, __m256 acc[2]) {
    const CConst k = c_const();
    for (; c < cols; c += K3_CODEC_BLOCK) {
        int n = cols - c < K3_CODEC_BLOCK ? cols - c : K3_CODEC_BLOCK, G = (n + 15) / 16;
        const uint8_t *next = p + k3_codec_block_bytes(p, G);
        if (G < 16 || p[1] == K3_CODEC_RAW) {    /* full coded: spread in c_block */
            for (int l = 0; l < 6; l++) _mm_prefetch((const char *)p + PFC + 64 * l, _MM_HINT_T0);
            for (int l = 0; l < 6; l++) _mm_prefetch((const char *)p + PFD + 64 * l, _MM_HINT_T1);
        }
        if (n % 16 == 0) { c_block(&k, p, G, x + c, acc); p = next; continue; }
        __m256 a0 = acc[0], a1 = acc[1];
        uint16_t w[K3_CODEC_BLOCK];              /* the row's last block: cols % 16 != 0 */
        k3_codec_decode_block(w, p, n);
        int i = 0;
        for (; i + 16 <= n; i += 16) {
            a0 = _mm256_fmadd_ps(ld_bf16(w + i), _mm256_loadu_ps(x + c + i), a0);
            a1 = _mm256_fmadd_ps(ld_bf16(w + i + 8), _mm256_loadu_ps(x + c + i + 8), a1);
        }
        float lanes[16];
        _mm256_storeu_ps(lanes, a0); _mm256_storeu_ps(lanes + 8, a1);
        for (int j = 0; i < n; i++, j++)
            lanes[j] = __builtin_fmaf(k3_bf16_to_f32(w[i]), x[c + i], lanes[j]);
        return fold_arr(lanes);
    }
    return k3_avx2_fold2(acc[0], acc[1]);
}

static float dot_c(const uint8_t *p, int cols, const float *x) {
    __m256 acc[2] = { _mm256_setzero_ps(), _mm256_setzero_ps() };
    return c_rest(p, 0, cols, x, acc);
}

/* Prefill's row decoder (k3_codec_prefill): full blocks 32 storage lanes a step as the
 * matvec decodes them, the BF16 words put back in weight order (out = the chunk's
 * out + 8h); other blocks by the reference */
INL void c_store32(const CConst *k, __m256i e, __m256i s, uint16_t *out) {
    /* per 128-bit lane: words 0, 2, 4, 6 (first group), then 1, 3, 5, 7 (second) */
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    __m256i a, b;
    c_words(k, e, s, &a, &b);
    for (int i = 0; i < 2; i++, out += 32) {     /* groups 2i, 2i + 1 */
        __m256i v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(i ? b : a, split), 0xD8);
        _mm_storeu_si128((__m128i *)out, _mm256_castsi256_si128(v));
        _mm_storeu_si128((__m128i *)(out + 16), _mm256_extracti128_si256(v, 1));
    }
}
void k3_avx2_coded_row(uint16_t *out, const K3Mat *W, int r) {
    const CConst k = c_const();
    const uint8_t *p = k3_codec_row(W, r);
    for (int c = 0; c < W->cols; c += K3_CODEC_BLOCK, out += K3_CODEC_BLOCK) {
        if (W->cols - c < K3_CODEC_BLOCK) { k3_codec_decode_block(out, p, W->cols - c); break; }
        const uint8_t *pl = p + 2, *esc = pl + 6 * 16;
        const int raw = p[1] == K3_CODEC_RAW;
        const uint8_t *sm = raw ? pl + 256 : esc + p[1];
        const __m256i lo = _mm256_set1_epi8((char)p[0]);
        if (raw)
#pragma GCC unroll 8
            for (int s = 0; s < 256; s += 32)
                c_store32(&k, ld256(pl + s), ld256(sm + s), out + c_off(s));
        else
#pragma GCC unroll 8
            for (int s = 0; s < 256; s += 32)
                c_store32(&k, c_exp(&k, pl + c_planes(s), 8, lo, &esc), ld256(sm + s),
                          out + c_off(s));
        p = sm + 256;
    }
}

/* Prefill through the GEMM (decode_w in kernels_avx2_gemm.c): the blocks of a coded row
 * from *pp, columns [c0, c1) (c0 a multiple of 256; c1 one too, or n16 = cols & ~15 and
 * then the rest of the row), into the GEMM's half panels as fp32: columns c0 + 16 s + 0..7
 * at d0 + 8 s, + 8..15 at d1 + 8 s; columns from n16 on (cols % 16) to tail as BF16. *pp
 * advanced. nx: the next row's same bytes (NULL: none), fetched a block ahead. A full
 * block 32 storage lanes a step as the matvec decodes them: half h of chunk k is lanes
 * 8h..8h+7 of its 4 groups, i.e. 4 contiguous 8-float steps of half panel h. */
void k3_avx2_coded_panel(const uint8_t **pp, int c0, int c1, int cols, float *d0, float *d1,
                         uint16_t *tail, const uint8_t *nx) {
    const CConst k = c_const();
    const int n16 = cols & ~15, end = c1 == n16 ? cols : c1;
    const uint8_t *p = *pp;
    for (int c = c0; c < end; c += K3_CODEC_BLOCK) {
        int n = cols - c < K3_CODEC_BLOCK ? cols - c : K3_CODEC_BLOCK, G = (n + 15) / 16;
        const uint8_t *next = p + k3_codec_block_bytes(p, G);
        float *e[2] = { d0 + (c - c0) / 2, d1 + (c - c0) / 2 };
        if (nx)
            for (int l = 0; l < 6; l++)
                _mm_prefetch((const char *)nx + (p - *pp) + 64 * l, _MM_HINT_T0);
        if (n < K3_CODEC_BLOCK) {                    /* a row's last block: the reference */
            uint16_t w[K3_CODEC_BLOCK];
            k3_codec_decode_block(w, p, n);
            int m = n16 - c, i = 0;
            for (; i < m; i += 16) {
                _mm256_store_ps(e[0] + i / 2, ld_bf16(w + i));
                _mm256_store_ps(e[1] + i / 2, ld_bf16(w + i + 8));
            }
            for (; i < n; i++) tail[i - m] = w[i];
            p = next;
            continue;
        }
        const uint8_t *pl = p + 2, *esc = pl + 6 * 16;
        const int raw = p[1] == K3_CODEC_RAW;
        const uint8_t *sm = raw ? pl + 256 : esc + p[1];
        const __m256i lo = _mm256_set1_epi8((char)p[0]);
#pragma GCC unroll 8
        for (int s = 0; s < 256; s += 32) {
            __m256i a, b;
            c_words(&k, raw ? ld256(pl + s) : c_exp(&k, pl + c_planes(s), 8, lo, &esc),
                    ld256(sm + s), &a, &b);
            float *o = e[s >> 5 & 1] + 32 * (s >> 6);
            _mm256_store_ps(o, _mm256_castsi256_ps(_mm256_slli_epi32(a, 16)));
            _mm256_store_ps(o + 8, _mm256_castsi256_ps(_mm256_and_si256(a, k.top)));
            _mm256_store_ps(o + 16, _mm256_castsi256_ps(_mm256_slli_epi32(b, 16)));
            _mm256_store_ps(o + 24, _mm256_castsi256_ps(_mm256_and_si256(b, k.top)));
        }
        p = next;
    }
    *pp = p;
}

void k3_avx2_coded_matvec(float *y, const K3Mat *W, const float *x, int r0, int r1) {
    for (int r = r0; r < r1; r++) y[r] = dot_c(k3_codec_row(W, r), W->cols, x);
}
#endif
