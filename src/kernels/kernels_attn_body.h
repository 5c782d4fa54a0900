/* kernels_attn_body.h — the attention tiles' SIMD body (kernels.h, "Attention tiles"), once
 * for every ISA: kernels_{avx512,avx2,neon}_attn.c define the vector type and its operations,
 * then include this. Each output (a score, a weighted sum) lives in one lane of one register
 * and takes exactly the scalar reference's fmaf chain; a register tile of AR rows x AV
 * vectors of queries only changes which outputs are computed together.
 *
 * Needed: VEC, VW (lanes), AR, AV (the tile), LD, ST, SET1P (broadcast from memory), SET1
 * (broadcast a constant), ZERO, FMA(a, b, c) = fused a b + c, FNMA(a, b, c) = fused c - a b,
 * MUL, ADD, SUB, MAXGT(a, b) = a > b ? a : b; for exp_neg_v's bits, IVEC (int32 lanes), ASI
 * and ASF (the bits as IVEC, as VEC), ISET1, IADD, IMAX, UMIN (unsigned), SHL23; and ATTN_OPS
 * (the table's name) and ATTN_NAME. */
#define AUNROLL _Pragma("GCC unroll 8")
#define AINL static inline __attribute__((always_inline))
#ifndef AJC
#define AJC 64   /* keys per pass of pv: 64 rows of S per query block stay in L1 */
#endif

/* k3_exp_neg (kernels.h) lane by lane: the same fmaf steps, so the same bits */
AINL VEC exp_neg_v(VEC x) {
    VEC a = ASF(UMIN(ASI(x), ISET1((int)0xC2D00000u)));          /* x floored at -104 */
    const VEC sh = SET1(12582912.0f);                              /* 1.5 2^23 */
    VEC t = FMA(a, SET1(1.44269504088896341f), sh);
    VEC k = SUB(t, sh);
    VEC r = FNMA(k, SET1(0.693145751953125f), a);
    r = FNMA(k, SET1(1.42860682030941723212e-6f), r);
    VEC q = SET1(1.0f / 5040);
    q = FMA(q, r, SET1(1.0f / 720));
    q = FMA(q, r, SET1(1.0f / 120));
    q = FMA(q, r, SET1(1.0f / 24));
    q = FMA(q, r, SET1(1.0f / 6));
    q = FMA(q, r, SET1(0.5f));
    q = FMA(q, r, SET1(1.0f));
    q = FMA(q, r, SET1(1.0f));
    IVEC e = IADD(ASI(t), ISET1(-0x4B400000 + 127));             /* k + 127 */
    e = SHL23(IMAX(e, ISET1(0)));                                 /* 2^k, 0 below 2^-126 */
    return MUL(q, ASF(e));
}

/* rr rows of S (keys) x nv vectors of queries; mx updated in increasing key order */
AINL void sc_block(float *S, const float *Qt, const float *K, int hd, int bq, float *mx,
                   const int rr, const int nv) {
    VEC acc[AR][AV];
    AUNROLL for (int r = 0; r < rr; r++)
        AUNROLL for (int v = 0; v < nv; v++) acc[r][v] = ZERO;
    for (int d = 0; d < hd; d++) {
        VEC q[AV];
        AUNROLL for (int v = 0; v < nv; v++) q[v] = LD(Qt + (size_t)d * bq + v * VW);
        AUNROLL for (int r = 0; r < rr; r++) {
            VEC b = SET1P(K + (size_t)r * hd + d);
            AUNROLL for (int v = 0; v < nv; v++) acc[r][v] = FMA(b, q[v], acc[r][v]);
        }
    }
    AUNROLL for (int v = 0; v < nv; v++) {
        VEC m = LD(mx + v * VW);
        AUNROLL for (int r = 0; r < rr; r++) {
            ST(S + (size_t)r * bq + v * VW, acc[r][v]);
            m = MAXGT(acc[r][v], m);
        }
        ST(mx + v * VW, m);
    }
}

static void scores_v(float *S, const float *Qt, const float *K, int nk, int hd, int bq,
                     float *mx) {
    int i0 = 0, j;
    for (; i0 + AV * VW <= bq; i0 += AV * VW) {
        for (j = 0; j + AR <= nk; j += AR)
            sc_block(S + (size_t)j * bq + i0, Qt + i0, K + (size_t)j * hd, hd, bq, mx + i0, AR, AV);
        for (; j < nk; j++)
            sc_block(S + (size_t)j * bq + i0, Qt + i0, K + (size_t)j * hd, hd, bq, mx + i0, 1, AV);
    }
    for (; i0 < bq; i0 += VW) {
        for (j = 0; j + AR <= nk; j += AR)
            sc_block(S + (size_t)j * bq + i0, Qt + i0, K + (size_t)j * hd, hd, bq, mx + i0, AR, 1);
        for (; j < nk; j++)
            sc_block(S + (size_t)j * bq + i0, Qt + i0, K + (size_t)j * hd, hd, bq, mx + i0, 1, 1);
    }
}

AINL void ex_block(float *S, const float *mx, float *l, int nk, int bq, const int nv) {
    VEC m[AV], s[AV];
    AUNROLL for (int v = 0; v < nv; v++) { m[v] = LD(mx + v * VW); s[v] = LD(l + v * VW); }
    for (int j = 0; j < nk; j++)
        AUNROLL for (int v = 0; v < nv; v++) {
            float *p = S + (size_t)j * bq + v * VW;
            VEC e = exp_neg_v(SUB(LD(p), m[v]));
            ST(p, e);
            s[v] = ADD(s[v], e);
        }
    AUNROLL for (int v = 0; v < nv; v++) ST(l + v * VW, s[v]);
}

static void exp_v(float *S, const float *mx, float *l, int nk, int bq) {
    int i0 = 0;
    for (; i0 + AV * VW <= bq; i0 += AV * VW) ex_block(S + i0, mx + i0, l + i0, nk, bq, AV);
    for (; i0 < bq; i0 += VW) ex_block(S + i0, mx + i0, l + i0, nk, bq, 1);
}

/* rr rows of O (head dims) x nv vectors of queries over keys [j0, j1); first: o = O c */
AINL void pv_block(float *O, const float *V, size_t ldv, const float *S, const float *c,
                   int j0, int j1, int bq, int first, const int rr, const int nv) {
    VEC acc[AR][AV];
    AUNROLL for (int r = 0; r < rr; r++)
        AUNROLL for (int v = 0; v < nv; v++) {
            acc[r][v] = LD(O + (size_t)r * bq + v * VW);
            if (first) acc[r][v] = MUL(acc[r][v], LD(c + v * VW));
        }
    for (int j = j0; j < j1; j++) {
        VEC p[AV];
        AUNROLL for (int v = 0; v < nv; v++) p[v] = LD(S + (size_t)j * bq + v * VW);
        AUNROLL for (int r = 0; r < rr; r++) {
            VEC b = SET1P(V + (size_t)r * ldv + j);
            AUNROLL for (int v = 0; v < nv; v++) acc[r][v] = FMA(b, p[v], acc[r][v]);
        }
    }
    AUNROLL for (int r = 0; r < rr; r++)
        AUNROLL for (int v = 0; v < nv; v++) ST(O + (size_t)r * bq + v * VW, acc[r][v]);
}

static void pv_v(float *O, const float *V, size_t ldv, const float *S, const float *c, int nk,
                 int hd, int bq) {
    for (int i0 = 0; i0 < bq;) {
        const int full = i0 + AV * VW <= bq, w = full ? AV * VW : VW;
        for (int j0 = 0; j0 < nk || j0 == 0; j0 += AJC) {
            const int j1 = nk - j0 < AJC ? nk : j0 + AJC, first = j0 == 0;
            int d = 0;
            float *o = O + i0;
            const float *s = S + i0, *cc = c + i0;
            if (full) {
                for (; d + AR <= hd; d += AR)
                    pv_block(o + (size_t)d * bq, V + (size_t)d * ldv, ldv, s, cc, j0, j1, bq,
                             first, AR, AV);
                for (; d < hd; d++)
                    pv_block(o + (size_t)d * bq, V + (size_t)d * ldv, ldv, s, cc, j0, j1, bq,
                             first, 1, AV);
            } else {
                for (; d + AR <= hd; d += AR)
                    pv_block(o + (size_t)d * bq, V + (size_t)d * ldv, ldv, s, cc, j0, j1, bq,
                             first, AR, 1);
                for (; d < hd; d++)
                    pv_block(o + (size_t)d * bq, V + (size_t)d * ldv, ldv, s, cc, j0, j1, bq,
                             first, 1, 1);
            }
        }
        i0 += w;
    }
}

static const K3AttnOps ATTN_OPS = { ATTN_NAME, scores_v, exp_v, pv_v };
