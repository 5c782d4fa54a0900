/* kernels_avx2_gemm.c — the AVX2 prefill (T > 1) as a blocked GEMM, same bits.
 *
 * An output element (row r, token t) is 16 canonical lanes (kernels.h) in two ymm:
 * lanes 0-7 take columns c + 0..7, lanes 8-15 columns c + 8..15 of each 16-column step
 * (MXFP4: lanes 0-7 bytes 0-7 of each 32-block, lanes 8-15 bytes 8-15). The two halves
 * never meet before the fold, so each is its own chain: the GEMM runs half 0 of every
 * output of a block, then half 1, which halves the registers an output needs. A
 * register tile is TR rows x TM tokens of one half (12 ymm accumulators, 3 x and 1 w
 * register): per 8-float step, 3 x loads, 4 w loads and 12 FMAs, each on its own
 * accumulator in increasing column order: the sequence of the T = 1 kernel
 * (kernels_avx2.c). Tiling only changes which outputs are computed together.
 *
 * Cache blocks: SC_R rows x SC_T tokens x KC columns. The block's weights are decoded
 * once into an fp32 panel per half (BF16: a shift; MXFP4: the very pshufb / convert /
 * scale multiply of the matvec, each 32-block's half as its 8 low-nibble then 8
 * high-nibble weights); x is laid out the same way (MXFP4: even then odd elements) once
 * per token block over all columns (per row block it waited on L3: ~10% of the time,
 * ~15% slower), so every step of every half is 8 contiguous floats of both operands.
 * The next block's weight rows are prefetched a few lines per tile (~5%). The lanes are
 * parked in scratch between column blocks and halves (stored and reloaded unchanged), each
 * half's apart (park[h][row][token][8]: a half's pass touches 74 KB of lines, not the
 * whole 147 KB; 1.00-1.06x on a Zen 3's 512 KB L2, docs/data/kernels_zen3_park.txt);
 * after the last block the fold (in registers), and for cols % 16 != 0 the spilled tail
 * with scalar fmaf, as the T = 1 kernel ends. KC = 1024 (a tile runs 64 steps a park
 * round trip) with the step loop unrolled twice and the fold in registers ran 1.2-1.3x
 * KC = 512 with a memory fold; the token tiles sweep 8 rows of the panel (16 KB of a
 * half, in L1) before the next 8, not all 32 (64 KB, L2): +2-4% (docs/data/
 * kernels_avx2_gemm3.txt; a 2-row x 6-token tile was 20% slower here). A coded matrix
 * (BF16C, T <= 72) decodes its blocks straight into the panels (k3_avx2_coded_panel, a
 * cursor per row; the tail weights kept for finish), the next block's coded bytes
 * prefetched the same way (issue 40: 8 MB of BF16 rows and the matmul cost 2-5 points). */
#include "kernels.h"
#include "kernels_avx2.h"
#include "codec.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <string.h>

#define INL static inline __attribute__((always_inline))

#ifndef SC_R
#define SC_R 32
#endif
#ifndef SC_T
#define SC_T 72
#endif
#ifndef KC
#define KC 1024
#endif
#define TR 4
#ifndef SG
#define SG 8           /* rows of the w panel a token tile sweeps (L1) */
#endif
#define TM 3
#ifndef PF_LINES
#define PF_LINES 4
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T1
#endif
#if KC % 256
#error "KC must be a multiple of 256 (coded blocks; MXFP4 blocks of 32)"
#endif

/* rows [r, r+nr) x columns [c0, c1) (c1 - c0 a multiple of 16) of W into the two half
 * panels wp (half 0) and wp + SC_R * ks (half 1), as fp32. Coded (BF16C): cur[i] is row
 * r + i's next block (column blocks come in order; set at c0 = 0), and the last block
 * also puts the row's cols % 16 last weights in tail + 16 i (finish's) */
static void decode_w(const K3Mat *W, int r, int nr, int c0, int c1, float *wp, int ks,
                     const uint8_t **cur, uint16_t *tail) {
    const size_t cols = (size_t)W->cols;
    if (W->type == K3_W_BF16C) {
        if (!c0)
            for (int i = 0; i < nr; i++) cur[i] = k3_codec_row(W, r + i);
        for (int i = 0; i < nr; i++)
            k3_avx2_coded_panel(&cur[i], c0, c1, (int)cols, wp + (size_t)i * ks,
                                wp + (size_t)(SC_R + i) * ks, tail + 16 * i,
                                i + 1 < nr ? cur[i + 1] : NULL);
        return;
    }
    const __m128i tab = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i m0f = _mm_set1_epi8(0x0F);
    for (int i = 0; i < nr; i++) {
        float *d0 = wp + (size_t)i * ks, *d1 = d0 + (size_t)SC_R * ks;
        size_t o = (size_t)(r + i) * cols;
        if (W->type == K3_W_MXFP4) {
            const uint8_t *p = (const uint8_t *)W->w + o / 2, *s = W->scale + o / 32;
            for (int c = c0; c < c1; c += 32) {
                __m128i v = _mm_loadu_si128((const __m128i *)(p + c / 2));
                __m128i lo = _mm_shuffle_epi8(tab, _mm_and_si128(v, m0f));
                __m128i hi = _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(v, 4), m0f));
                __m256 sc =
                    _mm256_castsi256_ps(_mm256_set1_epi32((int)k3_e8m0_half_bits[s[c / 32]]));
                float *e0 = d0 + (c - c0) / 2, *e1 = d1 + (c - c0) / 2;
#define MX8(q) _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), sc)
                _mm256_store_ps(e0, MX8(lo));
                _mm256_store_ps(e0 + 8, MX8(hi));
                _mm256_store_ps(e1, MX8(_mm_srli_si128(lo, 8)));
                _mm256_store_ps(e1 + 8, MX8(_mm_srli_si128(hi, 8)));
#undef MX8
            }
        } else if (W->type == K3_W_BF16) {
            const uint16_t *w = (const uint16_t *)W->w + o;
            for (int c = c0; c < c1; c += 16) {
                __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + c)));
                __m256i g = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(w + c + 8)));
                _mm256_store_ps(d0 + (c - c0) / 2, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
                _mm256_store_ps(d1 + (c - c0) / 2, _mm256_castsi256_ps(_mm256_slli_epi32(g, 16)));
            }
        } else {
            const float *w = (const float *)W->w + o;
            for (int c = c0; c < c1; c += 16) {
                _mm256_store_ps(d0 + (c - c0) / 2, _mm256_loadu_ps(w + c));
                _mm256_store_ps(d1 + (c - c0) / 2, _mm256_loadu_ps(w + c + 8));
            }
        }
    }
}

/* tokens [t, t+nt) x columns [c0, c1) of X into the half panels xp, xp + pt * xs;
 * MXFP4: per 32-block, half h = x[c + 16h + 2l] (l = 0..7) then x[c + 16h + 2l + 1] */
static void copy_x(const float *X, size_t cols, int type, int t, int nt, int c0, int c1,
                   float *xp, size_t xs, int pt) {
    for (int j = 0; j < nt; j++) {
        const float *x = X + (size_t)(t + j) * cols;
        float *d0 = xp + (size_t)j * xs, *d1 = d0 + (size_t)pt * xs;
        if (type != K3_W_MXFP4) {
            for (int c = c0; c < c1; c += 16) {
                _mm256_store_ps(d0 + (c - c0) / 2, _mm256_loadu_ps(x + c));
                _mm256_store_ps(d1 + (c - c0) / 2, _mm256_loadu_ps(x + c + 8));
            }
            continue;
        }
        for (int c = c0; c < c1; c += 16) {     /* c - c0 = 32 b + 16 h: half h of block b */
            __m256 a = _mm256_loadu_ps(x + c), b = _mm256_loadu_ps(x + c + 8);
            __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(
                _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
            __m256 o = _mm256_castpd_ps(_mm256_permute4x64_pd(
                _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
            float *d = ((c - c0) & 16 ? d1 : d0) + (c - c0) / 32 * 16;
            _mm256_store_ps(d, e);
            _mm256_store_ps(d + 8, o);
        }
    }
}

/* One register tile of one half: R rows (wp, stride ks) x TT tokens (xp, stride xs) over
 * n floats; the lanes continue from the half's park (stride pt * 8 a row, 8 a token) or +0 */
INL void tile(const float *wp, int ks, const float *xp, size_t xs, int n, int R, int TT,
              float *park, int pt, int first) {
    __m256 acc[TR][TM];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++)
            acc[i][j] = first ? _mm256_setzero_ps() : _mm256_load_ps(park + (i * pt + j) * 8);
#pragma GCC unroll 2
    for (int c = 0; c < n; c += 8) {
        __m256 x[TM];
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++) x[j] = _mm256_load_ps(xp + j * xs + c);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            __m256 w = _mm256_load_ps(wp + i * ks + c);
#pragma GCC unroll 3
            for (int j = 0; j < TT; j++) acc[i][j] = _mm256_fmadd_ps(w, x[j], acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++) _mm256_store_ps(park + (i * pt + j) * 8, acc[i][j]);
}

/* The next block's weight rows, fetched a few lines per tile while this block computes
 * (decode_w otherwise waits on RAM): line l of row i at base + i * stride + 64 l (coded:
 * at row[i] + 64 l). */
typedef struct {
    const char *base; size_t stride; int lines, nrow, i, l; const uint8_t **row;
} Pf;

INL void pf_some(Pf *p) {
    for (int q = 0; q < PF_LINES && p->i < p->nrow; q++) {
        _mm_prefetch((p->row ? (const char *)p->row[p->i] : p->base + p->i * p->stride) +
                     64 * (size_t)p->l, PF_HINT);
        if (++p->l == p->lines) { p->l = 0; p->i++; }
    }
}

/* every row tile of the block for TT tokens at xp */
INL void rows_tt(const float *wpan, int ks, const float *xp, size_t xs, int n, int nr, int TT,
                 float *park, int pt, int first, Pf *pf) {
    int i = 0;
    for (; i + TR <= nr; i += TR) {
        pf_some(pf);
        tile(wpan + (size_t)i * ks, ks, xp, xs, n, TR, TT, park + i * pt * 8, pt, first);
    }
    const float *w = wpan + (size_t)i * ks;
    float *pk = park + i * pt * 8;
    switch (nr - i) {
    case 3: tile(w, ks, xp, xs, n, 3, TT, pk, pt, first); break;
    case 2: tile(w, ks, xp, xs, n, 2, TT, pk, pt, first); break;
    case 1: tile(w, ks, xp, xs, n, 1, TT, pk, pt, first); break;
    }
}

/* the 16 parked lanes of each output (its halves' 8 each): the T = 1 kernel's end (spilled
 * tail, then fold) */
static void finish(const K3Mat *W, float *Y, const float *X, int rb, int nr, int tb, int nt,
                   int n16, const float *park, int pt, const uint16_t *tail) {
    const size_t cols = (size_t)W->cols, rows = (size_t)W->rows;
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nt; j++) {
            const float *pk = park + (i * pt + j) * 8, *pk1 = pk + SC_R * pt * 8;
            float *y = Y + (size_t)(tb + j) * rows + rb + i, a[16];
            if (n16 == (int)cols) {                     /* no tail: fold in registers */
                *y = k3_avx2_fold2(_mm256_load_ps(pk), _mm256_load_ps(pk1));
                continue;
            }
            memcpy(a, pk, sizeof a / 2);
            memcpy(a + 8, pk1, sizeof a / 2);
            const size_t ro = (size_t)(rb + i) * cols;
            const float *x = X + (size_t)(tb + j) * cols;
            for (int c = n16, l = 0; c < (int)cols; c++, l++) {
                uint16_t h = W->type == K3_W_BF16C ? tail[16 * i + l]
                                                   : ((const uint16_t *)W->w)[ro + c];
                float w = W->type == K3_W_F32 ? ((const float *)W->w)[ro + c] : k3_bf16_to_f32(h);
                a[l] = __builtin_fmaf(w, x[c], a[l]);
            }
            for (int w = 8; w >= 1; w /= 2)
                for (int l = 0; l < w; l++) a[l] += a[l + w];
            *y = a[0];
        }
}

/* x panel stride: a half of every full 16-column step, padded */
static size_t x_stride(int cols) { return (size_t)(cols & ~15) / 2 + 8; }

/* w panel stride: a half of a column block, padded so rows do not share L1 sets (a
 * narrow matrix: its own width, so a small model touches little scratch) */
static int w_stride(int cols) { return ((cols & ~15) < KC ? (cols & ~15) : KC) / 2 + 8; }

/* pt: tokens of a token block (<= SC_T; the park and x panel are laid out for it, so a
 * short prompt touches little scratch: the memory plan's RSS bound holds) */
size_t k3_avx2_gemm_scratch(int cols, int pt) {
    return sizeof(float) * ((size_t)SC_R * pt * 16 + 2 * (size_t)SC_R * w_stride(cols) +
                            2 * (size_t)pt * x_stride(cols));
}

/* the GEMM's (plain and coded up to SC_T tokens), the MXFP4 matvec's de-interleaved x */
void k3_avx2_scratch(int T, int rows, int cols, size_t *slot) {
    size_t k = T > 1 ? k3_avx2_gemm_scratch(cols, k3_block_tokens(T, SC_T)) : 0;
    (void)rows;                                   /* its row panels are SC_R whatever */
    if (k < sizeof(float) * (size_t)cols) k = sizeof(float) * (size_t)cols;
    if (k > slot[K3_SCRATCH_KERNEL]) slot[K3_SCRATCH_KERNEL] = k;
}

int k3_avx2_gemm(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    const int cols = W->cols, n16 = cols & ~15;
    const size_t xs = x_stride(cols);
    const int ks = w_stride(cols);
    const int per = k3_block_tokens(t1 - t0, SC_T);
    float *sc = k3_scratch(k3_avx2_gemm_scratch(cols, per));
    if (!sc) return -1;
    float *wpan = sc + SC_R * per * 16, *xpan = wpan + 2 * (size_t)SC_R * ks;
    const uint8_t *cur[SC_R], *nxt[SC_R];     /* coded rows: decode_w's cursors, the next */
    uint16_t tail[SC_R * 16];                 /* block's; the cols % 16 last weights */
    /* es: weight bytes x 2 per element */
    const size_t es = W->type == K3_W_F32 ? 8 : W->type == K3_W_BF16 ? 4 : 1;
    for (int tb = t0; tb < t1; tb += per) {
        int nt = t1 - tb > per ? per : t1 - tb;
        copy_x(X, (size_t)cols, W->type, tb, nt, 0, n16, xpan, xs, per);   /* once a block */
        for (int rb = r0; rb < r1; rb += SC_R) {
            int nr = r1 - rb > SC_R ? SC_R : r1 - rb;
            for (int c0 = 0; c0 < n16 || c0 == 0; c0 += KC) {
                int c1 = n16 - c0 > KC ? c0 + KC : n16, n = (c1 - c0) / 2, first = c0 == 0;
                decode_w(W, rb, nr, c0, c1, wpan, ks, cur, tail);
                Pf pf = { NULL, (size_t)cols * es / 2, 0, 0, 0, 0, NULL };
                int nc = c1 < n16 ? c1 : 0, nrb = c1 < n16 ? rb : rb + SC_R;
                if (nrb < r1 && n16 > 0) {     /* the next block: rows nrb.., columns nc.. */
                    int nn = n16 - nc > KC ? KC : n16 - nc;
                    pf.base = (const char *)W->w + ((size_t)nrb * cols + nc) * es / 2;
                    pf.lines = (int)(((size_t)nn * es / 2 + 63) / 64);
                    pf.nrow = r1 - nrb > SC_R ? SC_R : r1 - nrb;
                    if (W->type == K3_W_BF16C) {  /* ~1.4 bytes a weight; raw blocks 2 */
                        for (int i = 0; i < pf.nrow; i++)
                            nxt[i] = nrb == rb ? cur[i] : k3_codec_row(W, nrb + i);
                        pf.row = nxt;
                        pf.lines = (3 * nn / 2 + 63) / 64;
                    }
                }
                for (int h = 0; h < 2; h++)
                for (int g = 0; g < nr; g += SG) {
                    const float *wp = wpan + ((size_t)h * SC_R + g) * ks;
                    int ng = nr - g > SG ? SG : nr - g;
                    for (int j = 0; j < nt;) {
                        const float *xp = xpan + ((size_t)h * per + j) * xs + c0 / 2;
                        float *pk = sc + (g * per + j) * 8 + (size_t)h * SC_R * per * 8;
                        /* 3-token tiles; a remainder of 1 after 3s goes as 2 + 2 */
                        int left = nt - j, TT = left >= 3 && left != 4 ? 3 : left >= 2 ? 2 : 1;
                        if (TT == 3) rows_tt(wp, ks, xp, xs, n, ng, 3, pk, per, first, &pf);
                        else if (TT == 2) rows_tt(wp, ks, xp, xs, n, ng, 2, pk, per, first, &pf);
                        else rows_tt(wp, ks, xp, xs, n, ng, 1, pk, per, first, &pf);
                        j += TT;
                    }
                }
                if (c1 >= n16) break;
            }
            finish(W, Y, X, rb, nr, tb, nt, n16, sc, per, tail);
        }
    }
    return 0;
}
#else
void k3_avx2_scratch(int T, int rows, int cols, size_t *slot) {
    (void)T; (void)rows; (void)cols; (void)slot;
}
#endif
