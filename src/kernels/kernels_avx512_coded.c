/* kernels_avx512_coded.c — the AVX-512 twins of the coded BF16C kernels (codec.h):
 * matvec and prefill decode the coded bytes in registers and give the bits of the BF16
 * kernels in kernels_avx512.c (same lanes, same fused multiply-adds, same fold).
 * Compiled with the flags of kernels_avx512.c (Makefile); VBMI paths chosen at run time. */
#include "kernels.h"
#include "codec.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#include "kernels_avx512.h"
#include <string.h>

/* K3_W_BF16C matvec (codec.h), decoded in registers with VBMI/VBMI2 (vbmi_ok): 4 rows at
 * a time, full coded blocks by cb_rows4 (64 weights a step: vpermb and gf2p8affineqb
 * to the 3-bit codes, an add, vpexpandb, two vpternlog, two in-lane byte unpacks, then
 * shift/and to fp32: bc2's storage lanes put the weights where the unpacks place them;
 * bc1's two vpermt2b cost 2 cycles each on port 5, and the old 4 masked vpermt2b with
 * spilled escape cursors half the speed); raw full blocks by ch_full, short blocks
 * (weight order) in chunks of 4 groups by ch_step, the rest group by group (c_groups).
 * Without VBMI the AVX2 twin decodes (k3_avx512_coded_matmul), and without GFNI (no CPU
 * with VBMI2 lacks it) too. A row's last block when cols % 16 != 0 goes through
 * the reference decoder (a 256-weight stack buffer) and the BF16 lanes: same order, same
 * bits either way. */
INL __m512 c_bits(__m512i v, __m512i e) {            /* sign+mantissa bytes, exponent<<23 */
    __m512i s = _mm512_and_si512(_mm512_slli_epi32(v, 24), _mm512_set1_epi32((int)0x80000000u));
    __m512i m = _mm512_and_si512(_mm512_slli_epi32(v, 16), _mm512_set1_epi32(0x7F0000));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_or_si512(s, m), e));
}

/* groups [g0, G) of the block at p; esc: its next escape byte (coded blocks) */
INL __m512 c_groups(const uint8_t *p, int G, int g0, const uint8_t *esc, const float *x,
                    __m512 acc) {
    if (p[1] == K3_CODEC_RAW) {
        const uint8_t *ex = p + 2, *sm = ex + 16 * G;
        for (int g = g0; g < G; g++) {
            __m512i e = _mm512_slli_epi32(
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ex + 16 * g))), 23);
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sm + 16 * g)));
            acc = _mm512_fmadd_ps(c_bits(v, e), _mm512_loadu_ps(x + 16 * g), acc);
        }
        return acc;
    }
    const uint8_t *pl = p + 2, *sm = pl + 6 * G + p[1];
    const __m512i base = _mm512_set1_epi32(p[0] << 23), c1 = _mm512_set1_epi32(1 << 23);
    const __m512i c2 = _mm512_set1_epi32(2 << 23), c4 = _mm512_set1_epi32(4 << 23);
    for (int g = g0; g < G; g++) {
        uint16_t q[3];
        for (int k = 0; k < 3; k++) memcpy(&q[k], pl + k3_codec_plane(G, g, k, 0), 2);
        __mmask16 k0 = q[0], k1 = q[1], k2 = q[2], ke = (__mmask16)(q[0] & q[1] & q[2]);
        __m512i e = _mm512_mask_add_epi32(base, k0, base, c1);
        e = _mm512_mask_add_epi32(e, k1, e, c2);
        e = _mm512_mask_add_epi32(e, k2, e, c4);
        __m512i xe = _mm512_slli_epi32(
            _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)esc)), 23);  /* in block */
        e = _mm512_mask_expand_epi32(e, ke, xe);
        esc += __builtin_popcount(ke);
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sm + 16 * g)));
        acc = _mm512_fmadd_ps(c_bits(v, e), _mm512_loadu_ps(x + 16 * g), acc);
    }
    return acc;
}

/* the row's last block when cols % 16 != 0: reference decoder, then the BF16 lanes */
INL __m512 c_tail(const uint8_t *p, int n, const float *x, __m512 acc) {
    uint16_t w[K3_CODEC_BLOCK];
    k3_codec_decode_block(w, p, n);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(
            _mm256_loadu_si256((const __m256i *)(w + i))), 16)), _mm512_loadu_ps(x + i), acc);
    __mmask16 k = tailmask(n - i);
    __m512 wt = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(
        _mm256_maskz_loadu_epi16(k, w + i)), 16));
    return _mm512_mask3_fmadd_ps(wt, _mm512_maskz_loadu_ps(k, x + i), acc, k);
}

#ifndef PFC
#define PFC 1024  /* coded matvec prefetch distance (bytes ahead on each row stream) */
#endif
#ifndef PFN
#define PFN _MM_HINT_T1   /* the next 4 rows' stream: to L2, a group (~40 KB) ahead */
#endif
#define VB __attribute__((target("avx512vbmi,avx512vbmi2"), always_inline)) static inline
typedef struct { const uint8_t *pl, *esc, *sm; __m512i lo; int raw; } Chunks;

VB void ch_init(Chunks *s, const uint8_t *p, int G) {
    s->raw = p[1] == K3_CODEC_RAW;
    s->pl = p + 2;
    s->esc = s->pl + 6 * G;
    s->sm = s->raw ? s->pl + 16 * G : s->esc + p[1];
    s->lo = _mm512_set1_epi8((char)p[0]);
}

/* full chunk k (4 groups) of a block: the BF16 low and high bytes of its 64 weights */
VB void ch_bytes(Chunks *s, int k, __m512i *blo, __m512i *bhi) {
    const __m512i B80 = _mm512_set1_epi8((char)0x80);
    __m512i e;
    if (s->raw) e = _mm512_loadu_si512(s->pl + 64 * k);
    else {
        __mmask64 *q = (__mmask64 *)(uintptr_t)(s->pl + 24 * k);    /* only read */
        __mmask64 k0 = _load_mask64(q), k1 = _load_mask64(q + 1), k2 = _load_mask64(q + 2);
        __mmask64 ke = _kand_mask64(_kand_mask64(k0, k1), k2);
        e = _mm512_mask_add_epi8(s->lo, k0, s->lo, _mm512_set1_epi8(1));
        e = _mm512_mask_add_epi8(e, k1, e, _mm512_set1_epi8(2));
        e = _mm512_mask_add_epi8(e, k2, e, _mm512_set1_epi8(4));
        /* 64 bytes from any escape position of a block of >= 4 groups stay inside it */
        e = _mm512_mask_expand_epi8(e, ke, _mm512_loadu_si512(s->esc));
        s->esc += __builtin_popcountll(_cvtmask64_u64(ke));
    }
    __m512i sm = _mm512_loadu_si512(s->sm + 64 * k);
    /* 0xE4: C ? A : B per bit. hi = sign | exponent >> 1, lo = exponent bit 0 | mantissa */
    __m512i hi = _mm512_ternarylogic_epi32(sm, _mm512_srli_epi16(e, 1), B80, 0xE4);
    *bhi = hi;
    *blo = _mm512_ternarylogic_epi32(_mm512_slli_epi16(e, 7), sm, B80, 0xE4);
}

/* chunk k (4 groups) of a short block (weight order): 64 weights into acc */
VB __m512 ch_step(Chunks *s, int k, const float *x, __m512 acc) {
    __m512i lo, hi;
    ch_bytes(s, k, &lo, &hi);
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512i idx = _mm512_add_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(16 * g));
        /* dword l: byte 2 = lo[16g + l], byte 3 = hi[16g + l] (index 64 + ...) */
        idx = _mm512_or_si512(_mm512_slli_epi32(idx, 16),
                              _mm512_slli_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(64)), 24));
        __m512i w = _mm512_maskz_permutex2var_epi8(0xCCCCCCCCCCCCCCCCull, lo, idx, hi);
        acc = _mm512_fmadd_ps(_mm512_castsi512_ps(w), _mm512_loadu_ps(x + 64 * k + 16 * g), acc);
    }
    return acc;
}

/* Fast path: full coded blocks (256 weights) of 4 rows, chunk k of every row in turn.
 * Exponents: three kmask adds and vpexpandb; the escape cursor advances by a popcount
 * of the plane bytes read as integers (a short chain in general registers). Two
 * vpermt2b per chunk place [lo, hi] byte pairs as BF16 words: dword l of the first holds
 * weights l and 16 + l, of the second 32 + l and 48 + l, so a shift and an and give the
 * fp32 of four groups in the canonical lanes. */
VB __m512i cb_exp(const uint8_t *pl, const uint8_t **esc, __m512i lo) {
    uint64_t q0, q1, q2;
    memcpy(&q0, pl, 8); memcpy(&q1, pl + 8, 8); memcpy(&q2, pl + 16, 8);
    __mmask64 *q = (__mmask64 *)(uintptr_t)pl;                         /* only read */
    __mmask64 k0 = _load_mask64(q), k1 = _load_mask64(q + 1), k2 = _load_mask64(q + 2);
    __m512i e = _mm512_mask_add_epi8(lo, k0, lo, _mm512_set1_epi8(1));
    e = _mm512_mask_add_epi8(e, k1, e, _mm512_set1_epi8(2));
    e = _mm512_mask_add_epi8(e, k2, e, _mm512_set1_epi8(4));
    /* 64 bytes from any escape position of a full block stay inside it */
    e = _mm512_mask_expand_epi8(e, _kand_mask64(_kand_mask64(k0, k1), k2),
                                _mm512_loadu_si512(*esc));
    *esc += __builtin_popcountll(q0 & q1 & q2);
    return e;
}

/* the fp32 of a full block's chunk from its BF16 low and high bytes in storage lanes
 * (codec.h k3_codec_lane): the in-lane unpacks make words 2m, 2m + 1 of a = groups 0, 1,
 * of b = groups 2, 3 at lane m; w[g] is group g in its canonical lanes */
VB void cb_words(__m512i lo, __m512i hi, __m512 w[4]) {
    const __m512i HI = _mm512_set1_epi32((int)0xFFFF0000u);
    __m512i a = _mm512_unpacklo_epi8(lo, hi), b = _mm512_unpackhi_epi8(lo, hi);
    w[0] = _mm512_castsi512_ps(_mm512_slli_epi32(a, 16));
    w[1] = _mm512_castsi512_ps(_mm512_and_si512(a, HI));
    w[2] = _mm512_castsi512_ps(_mm512_slli_epi32(b, 16));
    w[3] = _mm512_castsi512_ps(_mm512_and_si512(b, HI));
}

/* the same from the exponents e and the sign+mantissa bytes at sm */
VB void cb_f32(__m512i e, const uint8_t *sm, __m512 w[4]) {
    const __m512i B80 = _mm512_set1_epi8((char)0x80);
    __m512i s = _mm512_loadu_si512(sm);
    /* 0xE4: C ? A : B per bit. hi = sign | exponent >> 1, lo = exponent bit 0 | mantissa */
    __m512i hi = _mm512_ternarylogic_epi32(s, _mm512_srli_epi16(e, 1), B80, 0xE4);
    __m512i lo = _mm512_ternarylogic_epi32(_mm512_slli_epi16(e, 7), s, B80, 0xE4);
    cb_words(lo, hi, w);
}

/* a chunk's four groups w into acc, in group order (the reference's) */
VB __m512 cb_acc(const __m512 w[4], const float *x, __m512 acc) {
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) acc = _mm512_fmadd_ps(w[g], _mm512_loadu_ps(x + 16 * g), acc);
    return acc;
}

/* chunk k of a full block (storage lanes, raw or coded): 64 weights into acc */
VB __m512 ch_full(Chunks *s, int k, const float *x, __m512 acc) {
    __m512i lo, hi;
    __m512 w[4];
    ch_bytes(s, k, &lo, &hi);
    cb_words(lo, hi, w);
    return cb_acc(w, x, acc);
}

/* one block of one row, any kind (raw, short, a row's last): returns the next block */
VB const uint8_t *cb_any(const uint8_t *p, int n, const float *x, __m512 *acc) {
    const int G = (n + 15) / 16;
    const uint8_t *next = p + k3_codec_block_bytes(p, G);
    if (n % 16) { *acc = c_tail(p, n, x, *acc); return next; }
    if (n == K3_CODEC_BLOCK) {                       /* storage lanes (codec.h) */
        Chunks s;
        ch_init(&s, p, G);
        for (int k = 0; k < 4; k++) *acc = ch_full(&s, k, x + 64 * k, *acc);
        return next;
    }
    int g0 = 0;                                      /* a short block: weight order */
    if (G >= 4 && p[1] != K3_CODEC_RAW) {
        Chunks s;
        ch_init(&s, p, G);
        for (int k = 0; k < G / 4; k++) *acc = ch_step(&s, k, x, *acc);
        g0 = G & ~3;
        if (g0 < G) *acc = c_groups(p, G, g0, s.esc, x, *acc);
    } else *acc = c_groups(p, G, 0, p + 2 + 6 * G, x, *acc);
    return next;
}

/* full coded blocks of 4 rows (p, advanced) at x; the prefetches spread over the
 * chunks (a burst of 24 at the block start filled the line fill buffers: perf showed the
 * pipeline stalled on them). dn[i]: bytes from row i to the same row of the next group,
 * prefetched at the same offset to L2, so 8 row streams are in flight as in the BF16
 * kernel (one linear stream of the next group, or T0, measured slower).
 * Codes (issue 40): the three plane masks of a chunk become its 64 3-bit codes by one
 * vpermb (plane bytes to bytes 7, 6, 5 of each qword) and one gf2p8affineqb (a bit
 * transpose), then lo + code and vpexpandb over the code-7 lanes: 5 vector ops and one
 * kmask where the three kmask loads, two kand and three masked adds were 9 (+4-6% in
 * cache, +7-10% from RAM at 1 thread on Zen 5). */
#define VG __attribute__((target("avx512vbmi,avx512vbmi2,gfni"), always_inline)) static inline
VG void cb_rows4(const uint8_t **p, __m512 *acc, const float *x, const ptrdiff_t *dn) {
    const __m512i B80 = _mm512_set1_epi8((char)0x80), HI = _mm512_set1_epi32((int)0xFFFF0000u);
    /* code planes -> 3-bit codes: byte 8j + 7, 6, 5 of A = plane 0, 1, 2 byte j, then
     * gf2p8affine with x = 1 << (lane & 7) picks bit lane & 7 of each (a bit transpose) */
    const __m512i XB = _mm512_set1_epi64(0x8040201008040201ll), C7 = _mm512_set1_epi8(7);
    const __m512i TI = _mm512_set_epi8(
        7, 15, 23, 0, 0, 0, 0, 0, 6, 14, 22, 0, 0, 0, 0, 0, 5, 13, 21, 0, 0, 0, 0, 0,
        4, 12, 20, 0, 0, 0, 0, 0, 3, 11, 19, 0, 0, 0, 0, 0, 2, 10, 18, 0, 0, 0, 0, 0,
        1, 9, 17, 0, 0, 0, 0, 0, 0, 8, 16, 0, 0, 0, 0, 0);
    const uint8_t *b[4], *s[4];
    size_t eo[4];
    __m512i lo[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        b[i] = p[i]; s[i] = p[i] + p[i][1]; eo[i] = 0;
        lo[i] = _mm512_set1_epi8((char)p[i][0]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) xv[g] = _mm512_loadu_ps(x + 64 * k + 16 * g);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            if (k < 3) {
                _mm_prefetch((const char *)b[i] + dn[i] + 128 * k, PFN);
                _mm_prefetch((const char *)b[i] + dn[i] + 128 * k + 64, PFN);
                _mm_prefetch((const char *)b[i] + PFC + 128 * k, _MM_HINT_T0);
                _mm_prefetch((const char *)b[i] + PFC + 128 * k + 64, _MM_HINT_T0);
            }
            __m512i A = _mm512_maskz_permutexvar_epi8(0xE0E0E0E0E0E0E0E0ull, TI,
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(b[i] + 2 + 24 * k))));
            __m512i c = _mm512_gf2p8affine_epi64_epi8(XB, A, 0);
            __mmask64 ke = _mm512_cmpeq_epi8_mask(c, C7);
            __m512i e = _mm512_add_epi8(c, lo[i]);
            /* 64 bytes from any escape position of a full block stay inside it */
            e = _mm512_mask_expand_epi8(e, ke, _mm512_loadu_si512(b[i] + 98 + eo[i]));
            eo[i] += (size_t)__builtin_popcountll(_cvtmask64_u64(ke));
            __m512i sm = _mm512_loadu_si512(s[i] + 98 + 64 * k);
            /* 0xD8: C ? B : A, 0xE4: C ? A : B per bit (sm read once, no copy) */
            __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(e, 1), sm, B80, 0xD8);
            __m512i lb = _mm512_ternarylogic_epi32(_mm512_slli_epi16(e, 7), sm, B80, 0xE4);
            __m512i u = _mm512_unpacklo_epi8(lb, hi), v = _mm512_unpackhi_epi8(lb, hi);
            __m512 a = acc[i];
            a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(u, 16)), xv[0], a);
            a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(u, HI)), xv[1], a);
            a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), xv[2], a);
            acc[i] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, HI)), xv[3], a);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) p[i] = s[i] + 98 + 256;
}

/* 4 rows from r (8 rows, as the BF16 kernel reads them, measured 5% slower); the next 4
 * rows' offsets are read only below r1 (a view's table may end there: k3_matmul_into) */
VG void mv_cv4(const K3Mat *W, int r, int r1, float *y, const float *x) {
    const int cols = W->cols;
    __m512 acc[4];
    const uint8_t *p[4];
    for (int i = 0; i < 4; i++) { acc[i] = _mm512_setzero_ps(); p[i] = k3_codec_row(W, r + i); }
    /* the next 4 rows' first PFC bytes, a line of each per block: new streams start warm */
    const uint32_t *nx = k3_codec_rowoff(W) + r + 4;
    const char *w0 = (const char *)W->w;
    int nlines = r + 8 <= r1 ? PFC / 64 : 0;
    ptrdiff_t dn[4];                       /* 0 in the last group: its own lines, harmless */
    for (int i = 0; i < 4; i++) dn[i] = nlines ? (ptrdiff_t)nx[i] - (ptrdiff_t)nx[i - 4] : 0;
    for (int c = 0; c < cols; c += K3_CODEC_BLOCK) {
        int n = cols - c < K3_CODEC_BLOCK ? cols - c : K3_CODEC_BLOCK, b = c / K3_CODEC_BLOCK;
        if (b < nlines)
            for (int i = 0; i < 4; i++) _mm_prefetch(w0 + nx[i] + 64 * b, _MM_HINT_T0);
        if (n < K3_CODEC_BLOCK || p[0][1] == K3_CODEC_RAW || p[1][1] == K3_CODEC_RAW ||
            p[2][1] == K3_CODEC_RAW || p[3][1] == K3_CODEC_RAW) {
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                for (int l = 0; l < 6; l++)
                    _mm_prefetch((const char *)p[i] + PFC + 64 * l, _MM_HINT_T0);
                p[i] = cb_any(p[i], n, x + c, &acc[i]);
            }
            continue;
        }
        cb_rows4(p, acc, x + c, dn);
    }
    for (int i = 0; i < 4; i++) y[r + i] = fold(acc[i]);
}

VB void mv_cv1(const K3Mat *W, int r, float *y, const float *x) {
    __m512 acc = _mm512_setzero_ps();
    const uint8_t *p = k3_codec_row(W, r);
    for (int c = 0; c < W->cols; c += K3_CODEC_BLOCK) {
        int n = W->cols - c < K3_CODEC_BLOCK ? W->cols - c : K3_CODEC_BLOCK;
        for (int l = 0; l < 6; l++) _mm_prefetch((const char *)p + PFC + 64 * l, _MM_HINT_T0);
        p = cb_any(p, n, x + c, &acc);
    }
    y[r] = fold(acc);
}

/* Prefill with few tokens (T <= CP_T, VBMI): R (1, 2) rows x TT (1, 2, 4, 8) tokens, each
 * chunk decoded once into fp32 and multiplied into the TT accumulators of its row (the
 * canonical lanes of every (row, token), so the bits of the BF16 matmul). Decoding into
 * scratch for the BF16 kernel cost as much as the FMAs at these T (measured: 0.65x the
 * plain prefill at T = 16); the FMAs are the bound here, the decode's shuffles are not. */
/* xp: the token group's panel at this block: (token t, column i) at xp[(i / 16 * TT + t) *
 * 16 + i % 16] (pf_c), zero past the last column */
VB void pf_any(const uint8_t *p, int n, const float *xp, const int TT, __m512 *acc) {
    uint16_t w[K3_CODEC_BLOCK];
    k3_codec_decode_block(w, p, n);
    for (int i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xFFFF : tailmask(n - i);
        __m512 wv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(
            _mm256_maskz_loadu_epi16(k, w + i)), 16));
#pragma GCC unroll 8
        for (int t = 0; t < TT; t++)
            acc[t] = _mm512_mask3_fmadd_ps(wv, _mm512_load_ps(xp + (i / 16 * TT + t) * 16),
                                           acc[t], k);
    }
}

VB void pf_rows(const K3Mat *W, int r, const int R, float *Y, const float *X,
                const int TT) {                       /* X: the group's panel (pf_any) */
    const int cols = W->cols;
    const size_t rows = (size_t)W->rows;
    __m512 acc[2][8];
    const uint8_t *p[2];
#pragma GCC unroll 2
    for (int i = 0; i < R; i++) {
        p[i] = k3_codec_row(W, r + i);
#pragma GCC unroll 8
        for (int t = 0; t < TT; t++) acc[i][t] = _mm512_setzero_ps();
    }
    for (int c = 0; c < cols; c += K3_CODEC_BLOCK) {
        int n = cols - c < K3_CODEC_BLOCK ? cols - c : K3_CODEC_BLOCK, fast = n == K3_CODEC_BLOCK;
#pragma GCC unroll 2
        for (int i = 0; i < R; i++) fast &= p[i][1] != K3_CODEC_RAW;
        if (!fast) {
#pragma GCC unroll 2
            for (int i = 0; i < R; i++) {
                pf_any(p[i], n, X + (size_t)c * TT, TT, acc[i]);
                p[i] += k3_codec_block_bytes(p[i], (n + 15) / 16);
            }
            continue;
        }
#pragma GCC unroll 2
        for (int i = 0; i < R; i++) {
            const uint8_t *esc = p[i] + 98, *sm = esc + p[i][1];
            __m512i lo = _mm512_set1_epi8((char)p[i][0]);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m512 w[4];
                cb_f32(cb_exp(p[i] + 2 + 24 * k, &esc, lo), sm + 64 * k, w);
#pragma GCC unroll 8
                for (int t = 0; t < TT; t++)
#pragma GCC unroll 4
                    for (int g = 0; g < 4; g++)
                        acc[i][t] = _mm512_fmadd_ps(
                            w[g], _mm512_load_ps(X + (size_t)c * TT + ((4 * k + g) * TT + t) * 16),
                            acc[i][t]);
            }
            p[i] = sm + K3_CODEC_BLOCK;
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int t = 0; t < TT; t++) Y[(size_t)t * rows + r + i] = fold(acc[i][t]);
}

#ifndef CP_T
#define CP_T 8
#endif
/* Rows outer, so a row pair's coded bytes stay in cache over the token groups. X is first
 * copied to panels, one per token group, so that one register addresses every token's x
 * (eight token pointers spilled). Returns -1 without scratch. */
static int pf_tokens(int n) { return n >= 8 ? 8 : n >= 4 ? 4 : n >= 2 ? 2 : 1; }
__attribute__((target("avx512vbmi,avx512vbmi2")))
static int pf_c(const K3Mat *W, int r0, int r1, float *Y, const float *X, int t0, int t1) {
    const size_t rows = (size_t)W->rows, cols = (size_t)W->cols, cp = (cols + 15) & ~(size_t)15;
    float *panel = k3_scratch_slot(K3_SCRATCH_CODEC, sizeof(float) * cp * (size_t)(t1 - t0));
    if (!panel) return -1;
    for (int t = t0; t < t1;) {                          /* group [t, t + tt) at (t - t0) * cp */
        int tt = pf_tokens(t1 - t);
        float *g = panel + (size_t)(t - t0) * cp;
        for (int j = 0; j < tt; j++)
            for (size_t c = 0; c < cp; c += 16) {
                __mmask16 k = cols - c >= 16 ? 0xFFFF : tailmask((int)(cols - c));
                _mm512_store_ps(g + (c / 16 * tt + j) * 16,
                                _mm512_maskz_loadu_ps(k, X + (size_t)(t + j) * cols + c));
            }
        t += tt;
    }
    for (int r = r0; r < r1;) {
        int R = r1 - r >= 2 ? 2 : 1;
        for (int t = t0; t < t1;) {
            int tt = pf_tokens(t1 - t);
            float *y = Y + (size_t)t * rows;
            const float *x = panel + (size_t)(t - t0) * cp;
#define PF_CASE(TT) case TT:                                                          \
                if (R == 2) pf_rows(W, r, 2, y, x, TT);                                   \
                else pf_rows(W, r, 1, y, x, TT);                                          \
                break;
            switch (tt) { PF_CASE(8) PF_CASE(4) PF_CASE(2) PF_CASE(1) }
#undef PF_CASE
            t += tt;
        }
        r += R;
    }
    return 0;
}

/* Prefill: row r to BF16 (64 weights a step; blocks of < 4 groups by the reference). */
__attribute__((target("avx512vbmi,avx512vbmi2")))
static void dec_row_v(uint16_t *out, const K3Mat *W, int r) {
    const uint8_t *p = k3_codec_row(W, r);
    __m512i ia = _mm512_setzero_si512(), ib = ia;
    {
        uint8_t a[64], b[64];                         /* word j = lo[j], hi[j] (64 + j) */
        for (int j = 0; j < 32; j++) {
            a[2 * j] = (uint8_t)j; a[2 * j + 1] = (uint8_t)(64 + j);
            b[2 * j] = (uint8_t)(32 + j); b[2 * j + 1] = (uint8_t)(96 + j);
        }
        ia = _mm512_loadu_si512(a); ib = _mm512_loadu_si512(b);
    }
    for (int c = 0; c < W->cols; c += K3_CODEC_BLOCK) {
        int n = W->cols - c < K3_CODEC_BLOCK ? W->cols - c : K3_CODEC_BLOCK, G = (n + 15) / 16;
        if (n % 64) { p = k3_codec_decode_block(out + c, p, n); continue; }
        Chunks s;
        ch_init(&s, p, G);
        for (int k = 0; k < G / 4; k++) {
            __m512i lo, hi;
            ch_bytes(&s, k, &lo, &hi);
            uint16_t *o = out + c + 64 * k;
            if (n < K3_CODEC_BLOCK) {                                /* weight order */
                _mm512_storeu_si512(o, _mm512_permutex2var_epi8(lo, ia, hi));
                _mm512_storeu_si512(o + 32, _mm512_permutex2var_epi8(lo, ib, hi));
                continue;
            }
            /* storage lanes: group g is the low (g even) or high words of a, b's dwords */
            __m512i a = _mm512_unpacklo_epi8(lo, hi), b = _mm512_unpackhi_epi8(lo, hi);
            __m256i *og = (__m256i *)o;
            _mm256_storeu_si256(og, _mm512_cvtepi32_epi16(a));
            _mm256_storeu_si256(og + 1, _mm512_cvtepi32_epi16(_mm512_srli_epi32(a, 16)));
            _mm256_storeu_si256(og + 2, _mm512_cvtepi32_epi16(b));
            _mm256_storeu_si256(og + 3, _mm512_cvtepi32_epi16(_mm512_srli_epi32(b, 16)));
        }
        p += k3_codec_block_bytes(p, G);
    }
}

/* Prefill above CP_T tokens (VBMI) through register tiles over an L2 buffer: blocks of
 * CT_R rows x CT_K columns decoded once a token block to BF16 (ct_decode, weight order, a
 * cursor per row), then the register tiles of the BF16 matmul (kernels_avx512_tile.h: 4
 * rows x up to 6 tokens, column-ordered FMAs, lanes parked between column blocks, the fold
 * at the end: the same bits) read the buffer instead of the matrix. X is laid out once per token
 * block over all columns; the first token tile fetches the next block's coded bytes to
 * L2 (without it the 1.4 KB row pieces waited on RAM: T = 16 at 49%). The 8 MB of BF16
 * rows and the BF16 matmul this replaces (k3_codec_prefill) ran 4-6 points lower at T = 16
 * and 64 (Zen 5, docs/KERNELS.md); the fp32-panel GEMM (kernels_avx512_gemm.c) with the
 * decode in its panels 66-68% at T = 64 and 256 against 75-78% (its 840 KB of panels). */
#define CT_R 128
#define CT_T 72
#define CT_K 1024
#define CT_TR 4
#define CT_TM 6

/* the blocks of a coded row from *pp, columns [c0, c1) (c0 a multiple of 256; c1 one too,
 * or the row's end), into o as BF16 in weight order; *pp advanced; nx: the next row's
 * same bytes (NULL: none), fetched a block ahead */
__attribute__((target("avx512vbmi,avx512vbmi2")))
static void ct_decode(const uint8_t **pp, int c0, int c1, int cols, uint16_t *o,
                      const uint8_t *nx) {
    const uint8_t *p = *pp;
    for (int c = c0; c < c1; c += K3_CODEC_BLOCK, o += K3_CODEC_BLOCK) {
        int n = cols - c < K3_CODEC_BLOCK ? cols - c : K3_CODEC_BLOCK, G = (n + 15) / 16;
        const uint8_t *next = p + k3_codec_block_bytes(p, G);
        if (nx)
            for (int l = 0; l < 6; l++)
                _mm_prefetch((const char *)nx + (p - *pp) + 64 * l, _MM_HINT_T0);
        if (n < K3_CODEC_BLOCK) { k3_codec_decode_block(o, p, n); p = next; continue; }
        Chunks s;
        ch_init(&s, p, G);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i lo, hi;
            ch_bytes(&s, k, &lo, &hi);
            __m512i a = _mm512_unpacklo_epi8(lo, hi), b = _mm512_unpackhi_epi8(lo, hi);
            __m256i *og = (__m256i *)(o + 64 * k);
            _mm256_store_si256(og, _mm512_cvtepi32_epi16(a));
            _mm256_store_si256(og + 1, _mm512_cvtepi32_epi16(_mm512_srli_epi32(a, 16)));
            _mm256_store_si256(og + 2, _mm512_cvtepi32_epi16(b));
            _mm256_store_si256(og + 3, _mm512_cvtepi32_epi16(_mm512_srli_epi32(b, 16)));
        }
        p = next;
    }
    *pp = p;
}

/* the tile's weights (kernels_avx512_tile.h): BF16 rows from w (stride ks); pf (NULL: none):
 * per row, the coded bytes the next decode reads */
typedef struct { const uint16_t *w; int ks; const uint8_t *const *pf; } Src;
INL __m512 src_w(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
INL void src_pf(const Src *s, int R, int c) {
    if (s->pf)                  /* the rows' next coded bytes: 2 lines a step, 32 a row */
        for (int q = 0, L = c / 8; q < 2; q++, L++)
            if ((L & 3) < R && s->pf[L & 3])
                _mm_prefetch((const char *)s->pf[L & 3] + 64 * (L >> 2), _MM_HINT_T1);
}
INL Src src_at(const Src *s, int i) {
    return (Src){ s->w + (size_t)i * s->ks, s->ks, s->pf ? s->pf + i : NULL };
}
#define TILE_TR CT_TR
#define TILE_TM CT_TM
#define TILE_PS CT_T
#define TILE_SRC Src
#define TILE_NS(s) 1
#define TILE_PF(s, R, c) src_pf(s, R, c)
#define TILE_W(s, i, c, v) \
    ((v)[0] = src_w(_mm256_loadu_si256((const __m256i *)((s)->w + (i) * (s)->ks + (c)))))
#define TILE_WT(s, i, c, k) src_w(_mm256_maskz_loadu_epi16(k, (s)->w + (i) * (s)->ks + (c)))
#define TILE_AT(s, i) src_at(s, i)
#define TILE_NOPF(s) ((s)->pf = NULL)
#include "kernels_avx512_tile.h"

/* x panel stride: every column (16-padded) and 16 more (kernels_avx512.c's panel_stride) */
static size_t ct_xs(int cols) { return (size_t)((cols + 15) & ~15) + 16; }
/* Sized by the call: its rows (up to CT_R), its token blocks (per tokens each); parked
 * lanes only where a row has more than one column block (a small model's plan has little
 * room beside). Bytes; *park the parked floats, *ks the BF16 row stride. */
static size_t ct_bytes(int n, int T, int cols, int *per, size_t *park, int *ks) {
    const size_t R = n < CT_R ? (size_t)n : CT_R, xs = ct_xs(cols);
    *per = k3_block_tokens(T, CT_T);
    *ks = (cols < CT_K ? (cols + 15) & ~15 : CT_K) + 32;      /* rows miss L1 sets */
    *park = cols > CT_K ? R * CT_T * 16 : 0;   /* CT_T a row: 4 KB strides alias L1 */
    return sizeof(float) * (*park + (size_t)*per * xs) + 2 * R * (size_t)*ks;
}

static int ct_prefill(const K3Mat *W, float *Y, const float *X, int r0, int r1, int t0,
                      int t1) {
    const int cols = W->cols;
    const size_t rows = (size_t)W->rows, xs = ct_xs(cols);
    int per, ks;
    size_t park;
    float *sc = k3_scratch_slot(K3_SCRATCH_CODEC, ct_bytes(r1 - r0, t1 - t0, cols, &per, &park,
                                                           &ks));
    if (!sc) return -1;
    float *panel = sc + park;
    uint16_t *wb = (uint16_t *)(panel + (size_t)per * xs);
    const uint8_t *cur[CT_R], *nxt[CT_R];
    for (int tb = t0; tb < t1; tb += per) {
        int nt = t1 - tb > per ? per : t1 - tb;
        for (int j = 0; j < nt; j++)
            memcpy(panel + (size_t)j * xs, X + (size_t)(tb + j) * cols, sizeof(float) * cols);
        for (int rb = r0; rb < r1; rb += CT_R) {
            int nr = r1 - rb > CT_R ? CT_R : r1 - rb;
            for (int i = 0; i < nr; i++) cur[i] = k3_codec_row(W, rb + i);
            for (int c0 = 0; c0 < cols; c0 += CT_K) {
                int c1 = cols - c0 > CT_K ? c0 + CT_K : cols, first = !c0, last = c1 == cols;
                for (int i = 0; i < nr; i++)
                    ct_decode(&cur[i], c0, c1, cols, wb + (size_t)i * ks,
                              i + 1 < nr ? cur[i + 1] : NULL);
                for (int i = 0; i < nr; i++)          /* the next column or row block */
                    nxt[i] = !last ? cur[i] : rb + CT_R + i < r1 ? k3_codec_row(W, rb + CT_R + i)
                                                                 : NULL;
/* the full-width stride as a constant (the tiles' addresses fold it), else the call's */
#define CTK(K) tile_tokens(&(Src){ wb, K, nxt }, nr, nt, panel + c0, xs, c1 - c0, sc, first, \
                           last, Y, rows, rb, tb)
                if (ks == CT_K + 32) CTK(CT_K + 32);
                else CTK(ks);
#undef CTK
            }
        }
    }
    return 0;
}

static int vbmi_ok;
__attribute__((constructor)) static void vbmi_init(void) {
    __builtin_cpu_init();
    vbmi_ok = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vbmi2");
}
int k3_avx512_codec_vbmi(int on) {
    int was = vbmi_ok;
    if (on >= 0) {
        __builtin_cpu_init();
        vbmi_ok = on && __builtin_cpu_supports("avx512vbmi") &&
                  __builtin_cpu_supports("avx512vbmi2");
    }
    return was;
}

#define XA_COLS 16384
static int gfni_ok;
__attribute__((constructor)) static void gfni_init(void) {
    __builtin_cpu_init();
    gfni_ok = __builtin_cpu_supports("gfni");
}
__attribute__((target("avx512vbmi,avx512vbmi2,gfni")))
static void mv_cv_rows(const K3Mat *W, int r0, int r1, float *y, const float *x) {
    if (!gfni_ok) { k3_kernels_avx2()->matmul(y, W, x, r0, r1, 0, 1); return; }
    /* x read 64 bytes a load, shared by 4 rows: a copy at 64 bytes when it is not there
     * (a split load each: 7% of the in-cache decode, bench-kernels' x is 16-aligned) */
    float xa[XA_COLS] __attribute__((aligned(64)));
    if (((uintptr_t)x & 63) && W->cols <= XA_COLS) x = memcpy(xa, x, sizeof(float) * W->cols);
    int r = r0;
    for (; r + 4 <= r1; r += 4) mv_cv4(W, r, r1, y, x);
    for (; r < r1; r++) mv_cv1(W, r, y, x);
}

/* Without VBMI the AVX2 twin decodes (same bits: every path has the canonical lanes;
 * kernels_avx2.c is built wherever this file is, with -mavx2 -mfma, Makefile). */
void k3_avx512_coded_matmul(const K3KernelOps *ops, float *Y, const K3Mat *W, const float *X,
                            int r0, int r1, int t0, int t1) {
    if (!vbmi_ok) { k3_kernels_avx2()->matmul(Y, W, X, r0, r1, t0, t1); return; }
    if (t1 - t0 > 1 && t1 - t0 <= CP_T && !pf_c(W, r0, r1, Y, X, t0, t1)) return;
    if (t1 - t0 > 1 && !ct_prefill(W, Y, X, r0, r1, t0, t1)) return;
    if (t1 - t0 > 1) { k3_codec_prefill(ops, dec_row_v, Y, W, X, r0, r1, t0, t1); return; }
    mv_cv_rows(W, r0, r1, Y + (size_t)t0 * W->rows, X + (size_t)t0 * W->cols);
}
/* pf_c's panel up to CP_T tokens, ct_prefill's above */
void k3_avx512_coded_scratch(int T, int rows, int cols, size_t *slot) {
    int per, ks;
    size_t park, b = T <= CP_T ? sizeof(float) * (size_t)((cols + 15) & ~15) * T
                               : ct_bytes(rows, T, cols, &per, &park, &ks);
    if (b > slot[K3_SCRATCH_CODEC]) slot[K3_SCRATCH_CODEC] = b;
}
#else
int k3_avx512_codec_vbmi(int on) { (void)on; return 0; }
#endif
