/* kernels_avx512_tile.h — the AVX-512 prefill's register tile, once for its three users:
 * kernels_avx512.c (F32, BF16, MXFP4 read from the weights), kernels_avx512_gemm.c (fp32
 * panels decoded per block) and kernels_avx512_coded.c (BF16 rows decoded into L2). Each
 * defines its weight source, then includes this (as kernels_attn_body.h is shared).
 *
 * R rows x TT tokens, one zmm accumulator each. An accumulator's 16 lanes are the output's
 * canonical lanes (kernels.h), so a 16-column step is one FMA per accumulator in increasing
 * column order: the sequence of the T = 1 kernel, whatever the tile; tiling only changes
 * which outputs share a step. Between column blocks the lanes are parked (stored and
 * reloaded as they are: the same sequence, the same bits); the last block folds them to Y.
 *
 * Needed: TILE_TR x TILE_TM (the largest tile), TILE_PS (parked tokens a row), TILE_SRC (the
 * caller's weight source, a struct) and, for a source s:
 *   TILE_NS(s)          16-column vectors a step: 1, or 2 (MXFP4's 32-blocks; no tail)
 *   TILE_PF(s, R, c)    the step's prefetch, before its weight loads
 *   TILE_W(s, i, c, w)  row i's NS weight vectors at column c of the block into w[0..NS)
 *   TILE_WT(s, i, c, k) row i's last columns (cols % 16) as one vector under the mask k
 *   TILE_AT(s, i)       the source moved i rows on (a TILE_SRC value)
 *   TILE_NOPF(s)        no prefetch from now on (the first token tile alone prefetches) */
#if TILE_TM < 6 || TILE_TM > 8
#error "TILE_TM: 6 to 8 tokens (tile_tokens' cases)"
#endif

/* R rows x TT tokens over the block's n columns; token j's column c is x[j * xs + c]; lanes
 * from park (unless first) and back to it (unless last: then the fold into Y) */
INL void tile(const TILE_SRC *s, int R, int TT, const float *x, size_t xs, int n, float *park,
              int first, int last, float *Y, size_t rows, int r, int t) {
    __m512 acc[TILE_TR][TILE_TM];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < TT; j++)
            acc[i][j] = first ? _mm512_setzero_ps() : _mm512_load_ps(park + (i * TILE_PS + j) * 16);
    const int ns = TILE_NS(s);
    int c = 0;
    for (; c + 16 * ns <= n; c += 16 * ns) {
        TILE_PF(s, R, c);
        __m512 w[TILE_TR][2];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) TILE_W(s, i, c, w[i]);
#pragma GCC unroll 8
        for (int j = 0; j < TT; j++)
#pragma GCC unroll 2
            for (int h = 0; h < ns; h++) {
                __m512 xv = _mm512_loadu_ps(x + j * xs + c + 16 * h);
#pragma GCC unroll 4
                for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(w[i][h], xv, acc[i][j]);
            }
    }
    if (ns == 1 && c < n) {                  /* a row's last columns (cols % 16): masked lanes */
        __mmask16 k = tailmask(n - c);
        __m512 w[TILE_TR];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) w[i] = TILE_WT(s, i, c, k);
#pragma GCC unroll 8
        for (int j = 0; j < TT; j++) {
            __m512 xv = _mm512_maskz_loadu_ps(k, x + j * xs + c);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) acc[i][j] = _mm512_mask3_fmadd_ps(w[i], xv, acc[i][j], k);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 8
        for (int j = 0; j < TT; j++) {
            if (last) Y[(size_t)(t + j) * rows + r + i] = fold(acc[i][j]);
            else _mm512_store_ps(park + (i * TILE_PS + j) * 16, acc[i][j]);
        }
}

/* the block's nr rows from r (s at row r), TILE_TR a tile, then one by one */
INL void tile_rows(const TILE_SRC *s, int nr, int TT, const float *x, size_t xs, int n,
                   float *park, int first, int last, float *Y, size_t rows, int r, int t) {
    int i = 0;
    for (; i + TILE_TR <= nr; i += TILE_TR) {
        TILE_SRC a = TILE_AT(s, i);
        tile(&a, TILE_TR, TT, x, xs, n, park + i * TILE_PS * 16, first, last, Y, rows, r + i, t);
    }
    for (; i < nr; i++) {
        TILE_SRC a = TILE_AT(s, i);
        tile(&a, 1, TT, x, xs, n, park + i * TILE_PS * 16, first, last, Y, rows, r + i, t);
    }
}

/* every token tile of nt tokens from t (token j's x at x + j * xs, its lanes at park + j * 16),
 * TILE_TM tokens a tile (the count a constant in each, so the tile unrolls) */
INL void tile_tokens(TILE_SRC *s, int nr, int nt, const float *x, size_t xs, int n, float *park,
                     int first, int last, float *Y, size_t rows, int r, int t) {
    for (int j = 0; j < nt;) {
        const int tt = nt - j < TILE_TM ? nt - j : TILE_TM;
        switch (tt) {
#define TT(N) tile_rows(s, nr, N, x + j * xs, xs, n, park + j * 16, first, last, Y, rows, r, \
                        t + j); break
        case 1: TT(1);
        case 2: TT(2);
        case 3: TT(3);
        case 4: TT(4);
        case 5: TT(5);
#if TILE_TM > 6
        case 6: TT(6);
#endif
#if TILE_TM > 7
        case 7: TT(7);
#endif
        default: TT(TILE_TM);
#undef TT
        }
        TILE_NOPF(s);
        j += tt;
    }
}
