/* kernels_ew_body.h — the elementwise transcendentals of the prefill (SiTU-GLU, SiLU,
 * sigmoid gates, exp), once for the x86 ISAs: kernels_avx2_ew.c (8 floats, 4 doubles a ymm)
 * and kernels_avx512_ew.c (16 floats, 8 doubles a zmm) name their intrinsics, then include
 * this. The same bits as kernels.c.
 *
 * k3_expf and k3_tanhf are plain double arithmetic (no FMA, no libm): each lane here does
 * the very operations of the scalar code, in the same order, so every lane rounds as the
 * scalar does. Two changes of form, both exact: ldexp(p, k) is p * 2^k with 2^k built from
 * its bits (|k| <= 151 here: the product is a normal double, no rounding), and the branches
 * are computed on clamped inputs and blended. The tail (n % VW) goes to EW_TAIL's table.
 *
 * Needed: VW (float lanes), VF, VD (VW floats, VW / 2 doubles), F(op) and D(op) (the _ps and
 * _pd intrinsic op), FCMP, DCMP (a compare's mask), FSEL(m, a, b), DSEL (m ? b : a), MOR (the
 * masks' or); k: VI (VW / 2 int32), KTRUNC (doubles truncated to it), KNEG, KSEL(m, a, b)
 * (m: a DCMP mask), KTOD, POW2 (2^k as doubles from its bits); LO, HI (a VF's halves as VD),
 * JOIN(lo, hi) (back to floats); EW(name) (the public names), EW_TAIL (a K3KernelOps *). */
#define EINL static inline __attribute__((always_inline))

/* k3_exp_d for |x| <= 745 (callers clamp): x = k ln2 + r, Taylor to degree 13, * 2^k */
EINL VD exp_pd(VD x) {
    const VD half = D(set1)(0.5);
    VD t = D(mul)(x, D(set1)(1.4426950408889634074));
    /* k = t >= 0 ? (long)(t + 0.5) : -(long)(0.5 - t): truncations, as int32 */
    VI kp = KTRUNC(D(add)(t, half));
    VI kn = KNEG(KTRUNC(D(sub)(half, t)));
    VI k = KSEL(DCMP(t, D(setzero)(), _CMP_GE_OQ), kn, kp);
    VD kd = KTOD(k);
    VD r = D(sub)(D(sub)(x, D(mul)(kd, D(set1)(6.93147180369123816490e-01))),
                  D(mul)(kd, D(set1)(1.90821492927058770002e-10)));
#define HORNER(c) p = D(add)(D(mul)(p, r), D(set1)(c))
    VD p = D(set1)(1.0 / 6227020800.0);
    HORNER(1.0 / 479001600.0); HORNER(1.0 / 39916800.0); HORNER(1.0 / 3628800.0);
    HORNER(1.0 / 362880.0); HORNER(1.0 / 40320.0); HORNER(1.0 / 5040.0);
    HORNER(1.0 / 720.0); HORNER(1.0 / 120.0); HORNER(1.0 / 24.0); HORNER(1.0 / 6.0);
    HORNER(0.5); HORNER(1.0); HORNER(1.0);
#undef HORNER
    return D(mul)(p, POW2(k));
}

/* k3_expf: NaN -> x + x, x > 89 -> inf, x < -104 -> 0, else (float)k3_exp_d(x) */
EINL VF expf_v(VF x) {
    VF xc = F(min)(F(max)(x, F(set1)(-104.0f)), F(set1)(89.0f));
    VF y = JOIN(exp_pd(LO(xc)), exp_pd(HI(xc)));
    y = FSEL(FCMP(x, F(set1)(89.0f), _CMP_GT_OQ), y, F(set1)(__builtin_inff()));
    y = FSEL(FCMP(x, F(set1)(-104.0f), _CMP_LT_OQ), y, F(setzero)());
    return FSEL(FCMP(x, x, _CMP_UNORD_Q), y, F(add)(x, x));
}

/* k3_sigmoidf: 1 / (1 + expf(-x)) in float */
EINL VF sigmoid_v(VF x) {
    const VF one = F(set1)(1.0f);
    VF nx = F(xor)(x, F(set1)(-0.0f));
    return F(div)(one, F(add)(one, expf_v(nx)));
}

/* k3_tanhf on half the lanes (as doubles): |d| < 0.125 the odd series, >= 10 one, else
 * 1 - 2 / (exp_d(2|d|) + 1); the sign of d */
EINL VD tanh_pd(VD d) {
    const VD one = D(set1)(1.0), sgn = D(set1)(-0.0);
    VD a = D(andnot)(sgn, d), z = D(mul)(d, d);
#define HORNER(c) p = D(add)(D(mul)(p, z), D(set1)(c))
    VD p = D(set1)(-929569.0 / 638512875.0);
    HORNER(21844.0 / 6081075.0); HORNER(-1382.0 / 155925.0); HORNER(62.0 / 2835.0);
    HORNER(-17.0 / 315.0); HORNER(2.0 / 15.0); HORNER(-1.0 / 3.0);
#undef HORNER
    VD small = D(add)(d, D(mul)(d, D(mul)(z, p)));
    VD ac = D(min)(a, D(set1)(10.0));                   /* NaN -> 10: blended away */
    VD ex = exp_pd(D(mul)(D(set1)(2.0), ac));
    VD r = D(sub)(one, D(div)(D(set1)(2.0), D(add)(ex, one)));
    r = DSEL(DCMP(a, D(set1)(10.0), _CMP_GE_OQ), r, one);
    r = D(or)(r, D(and)(d, sgn));                       /* d < 0 ? -r : r (r > 0) */
    return DSEL(DCMP(a, D(set1)(0.125), _CMP_LT_OQ), r, small);
}

/* k3_tanhf: NaN and +-0 give x + x */
EINL VF tanhf_v(VF x) {
    VF y = JOIN(tanh_pd(LO(x)), tanh_pd(HI(x)));
    return FSEL(MOR(FCMP(x, x, _CMP_UNORD_Q), FCMP(x, F(setzero)(), _CMP_EQ_OQ)), y,
                F(add)(x, x));
}

/* k3_exp_d on VW / 2 lanes for |x| <= 700 (the result a normal double); for the tests */
void EW(exp_d)(double *y, const double *x, int n) {
    int i = 0;
    for (; i + VW / 2 <= n; i += VW / 2) D(storeu)(y + i, exp_pd(D(loadu)(x + i)));
    for (; i < n; i++) y[i] = k3_exp_d(x[i]);
}

void EW(situ)(float *out, const float *g, const float *u, int n, float b1, float b2) {
    const VF B1 = F(set1)(b1), B2 = F(set1)(b2);
    int i = 0;
    for (; i + VW <= n; i += VW) {
        VF gv = F(loadu)(g + i), uv = F(loadu)(u + i);
        VF a = F(mul)(F(mul)(B1, tanhf_v(F(div)(gv, B1))), sigmoid_v(gv));
        VF v = F(mul)(B2, tanhf_v(F(div)(uv, B2)));
        F(storeu)(out + i, F(mul)(a, v));
    }
    if (i < n) EW_TAIL->situ(out + i, g + i, u + i, n - i, b1, b2);
}

void EW(silu)(float *x, int n) {
    int i = 0;
    for (; i + VW <= n; i += VW) {
        VF v = F(loadu)(x + i);
        F(storeu)(x + i, F(mul)(v, sigmoid_v(v)));
    }
    if (i < n) EW_TAIL->silu(x + i, n - i);
}

void EW(sigmul)(float *o, const float *g, int n) {
    int i = 0;
    for (; i + VW <= n; i += VW)
        F(storeu)(o + i, F(mul)(F(loadu)(o + i), sigmoid_v(F(loadu)(g + i))));
    if (i < n) EW_TAIL->sigmul(o + i, g + i, n - i);
}

void EW(expf)(float *y, const float *x, int n) {
    int i = 0;
    for (; i + VW <= n; i += VW) F(storeu)(y + i, expf_v(F(loadu)(x + i)));
    if (i < n) EW_TAIL->expv(y + i, x + i, n - i);
}

void EW(sigmoid)(float *y, const float *x, int n) {
    int i = 0;
    for (; i + VW <= n; i += VW) F(storeu)(y + i, sigmoid_v(F(loadu)(x + i)));
    if (i < n) EW_TAIL->sigmoidv(y + i, x + i, n - i);
}
