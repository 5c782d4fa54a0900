/* kernels_avx512_gemm.c — the AVX-512 prefill (T > 1) as a blocked GEMM, same bits.
 *
 * An output element (row r, token t) is one zmm accumulator whose 16 lanes are the
 * canonical lanes of kernels.h: lanes run along the reduction (columns), so the usual
 * GEMM that broadcasts x across a vector of rows would change the order, and is not
 * used. Instead a register tile of TR rows x TM tokens (24 accumulators) takes one
 * 16-column step at a time: TR weight vectors and TM x vectors feed TR*TM FMAs, each on
 * its own accumulator, in increasing column order, exactly the sequence of the T = 1
 * kernel. Tiling only changes which outputs are computed together.
 *
 * Cache blocks: SC_R rows x SC_T tokens x KC columns. The weights of the block are
 * decoded once into an fp32 panel (BF16: a shift; MXFP4: the table lookup, every
 * 32-block de-interleaved into its 16 even then 16 odd elements, the x panel likewise,
 * which turns the MXFP4 lane order into plain 16-column steps), so the decode costs once
 * per block, not once per token. Between column blocks the accumulators are parked in
 * scratch (stored and reloaded unchanged: same lane sequence, same bits). */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#include "kernels_avx512.h"
#include <string.h>

#ifndef SC_R
#define SC_R 64
#endif
#ifndef SC_T
#define SC_T 72
#endif
#ifndef KC
#define KC 1024   /* 512 measured 5-10% slower on Zen 4: 1 KB row pieces are too short for the
                   * hardware prefetcher, and twice the parking per FMA */
#endif
#ifndef TR
#define TR 4
#endif
#ifndef TM
#define TM 6
#endif
#if KC & (KC - 1) || KC < 256
#error "KC must be a power of two >= 256 (lg in k3_avx512_gemm)"
#endif
#define KS (KC + 16)   /* panel stride in floats: rows of a panel do not share L1 sets */

/* rows [r, r+nr) x columns [c0, c1) of W into wp (stride KS), as fp32 */
static void decode_w(const K3Mat *W, int r, int nr, int c0, int c1, float *wp) {
    const size_t cols = (size_t)W->cols;
    for (int i = 0; i < nr; i++) {
        float *d = wp + (size_t)i * KS;
        size_t o = (size_t)(r + i) * cols;
        if (W->type == K3_W_MXFP4) {
            const uint8_t *p = (const uint8_t *)W->w + o / 2, *s = W->scale + o / 32;
            for (int c = c0; c < c1; c += 32) {
                __m512 tab = _mm512_load_ps(k3_avx512_mxtab[s[c / 32]]);
                __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p + c / 2)));
                _mm512_store_ps(d + c - c0, _mm512_permutexvar_ps(v, tab));
                _mm512_store_ps(d + c - c0 + 16,
                                _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab));
            }
        } else if (W->type == K3_W_BF16) {
            const uint16_t *w = (const uint16_t *)W->w + o;
            for (int c = c0; c < c1; c += 16) {
                __mmask16 k = c1 - c >= 16 ? 0xFFFF : tailmask(c1 - c);
                __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, w + c));
                _mm512_store_ps(d + c - c0, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
            }
        } else {
            memcpy(d, (const float *)W->w + o + c0, sizeof(float) * (size_t)(c1 - c0));
        }
    }
}

/* tokens [t, t+nt) x columns [c0, c1) of X into xp (stride KS); MXFP4 de-interleaved */
static void copy_x(const float *X, size_t cols, int type, int t, int nt, int c0, int c1,
                   float *xp) {
    const __m512i EV = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i OD = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int j = 0; j < nt; j++) {
        const float *x = X + (size_t)(t + j) * cols;
        float *d = xp + (size_t)j * KS;
        if (type != K3_W_MXFP4) {
            memcpy(d, x + c0, sizeof(float) * (size_t)(c1 - c0)); continue;
        }
        for (int c = c0; c < c1; c += 32) {
            __m512 x0 = _mm512_loadu_ps(x + c), x1 = _mm512_loadu_ps(x + c + 16);
            _mm512_store_ps(d + c - c0, _mm512_permutex2var_ps(x0, EV, x1));
            _mm512_store_ps(d + c - c0 + 16, _mm512_permutex2var_ps(x0, OD, x1));
        }
    }
}

/* the tile's weights (kernels_avx512_tile.h): rows of the panel from wp (stride KS). pf
 * (NULL: none): the next block's weights, fetched into L2 during the first token tile of
 * this one (the row pieces of a block are short and far apart: the hardware prefetcher
 * does not get ahead of the decode): the tile's row i at pf + i * stride, 1 << lg lines */
typedef struct { const float *wp; const char *pf; size_t stride; int lg; } Src;
INL void src_pf(const Src *s, int R, int c) {
    if (s->pf)                                   /* up to 4 lines a step, R rows' worth */
        for (int q = 0, L = c / 4; q < 4 && L < R << s->lg; q++, L++)
            _mm_prefetch(s->pf + (size_t)(L >> s->lg) * s->stride +
                         ((size_t)(L & ((1 << s->lg) - 1)) << 6), _MM_HINT_T1);
}
INL Src src_at(const Src *s, int i) {
    return (Src){ s->wp + (size_t)i * KS, s->pf ? s->pf + i * s->stride : NULL, s->stride, s->lg };
}
#define TILE_TR TR
#define TILE_TM TM
#define TILE_PS SC_T
#define TILE_SRC Src
#define TILE_NS(s) 1
#define TILE_PF(s, R, c) src_pf(s, R, c)
#define TILE_W(s, i, c, w) ((w)[0] = _mm512_load_ps((s)->wp + (i) * KS + (c)))
#define TILE_WT(s, i, c, k) _mm512_maskz_load_ps(k, (s)->wp + (i) * KS + (c))
#define TILE_AT(s, i) src_at(s, i)
#define TILE_NOPF(s) ((s)->pf = NULL)
#include "kernels_avx512_tile.h"

/* n rows, T tokens: the parked lanes (only a row of more than one column block parks), a
 * row block's panel, a token block's */
static size_t gemm_floats(int n, int T, int cols, size_t *park) {
    const size_t r = (size_t)(n < SC_R ? n : SC_R);
    *park = cols > KC ? r * SC_T * 16 : 0;
    return *park + (r + (size_t)k3_block_tokens(T, SC_T)) * KS;
}

size_t k3_avx512_gemm_scratch(int T, int rows, int cols) {
    size_t park;
    return sizeof(float) * gemm_floats(rows, T, cols, &park);
}

int k3_avx512_gemm(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    const size_t rows = (size_t)W->rows, cols = (size_t)W->cols;
    size_t park;
    float *sc = k3_scratch(sizeof(float) * gemm_floats(r1 - r0, t1 - t0, (int)cols, &park));
    if (!sc) return -1;
    float *wpan = sc + park, *xpan = wpan + (size_t)(r1 - r0 < SC_R ? r1 - r0 : SC_R) * KS;
    /* es: weight bytes x 2 per element; lg: log2 of the 64-byte lines of KC columns */
    const size_t es = W->type == K3_W_F32 ? 8 : W->type == K3_W_BF16 ? 4 : 1;
    const int lg = __builtin_ctz((unsigned)(KC * es / 2 / 64));
    const int per = k3_block_tokens(t1 - t0, SC_T);
    for (int tb = t0; tb < t1; tb += per) {
        int nt = t1 - tb > per ? per : t1 - tb;
        for (int rb = r0; rb < r1; rb += SC_R) {
            int nr = r1 - rb > SC_R ? SC_R : r1 - rb;
            for (int c0 = 0; c0 < (int)cols; c0 += KC) {
                int c1 = (int)cols - c0 > KC ? c0 + KC : (int)cols, n = c1 - c0;
                int first = c0 == 0, last = c1 == (int)cols;
                decode_w(W, rb, nr, c0, c1, wpan);
                int nrow = c1 < (int)cols ? rb : rb + SC_R, ncol = c1 < (int)cols ? c1 : 0;
                Src s = { wpan, NULL, cols * es / 2, lg };
                if (nrow < r1) s.pf = (const char *)W->w + ((size_t)nrow * cols + ncol) * es / 2;
                copy_x(X, cols, W->type, tb, nt, c0, c1, xpan);
                tile_tokens(&s, nr, nt, xpan, KS, n, sc, first, last, Y, rows, rb, tb);
            }
        }
    }
    return 0;
}
#endif
