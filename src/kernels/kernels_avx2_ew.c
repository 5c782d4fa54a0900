/* kernels_avx2_ew.c — the elementwise transcendentals of the prefill (SiTU-GLU, SiLU,
 * sigmoid gates) on 8 floats at a time, the same bits as kernels.c.
 *
 * k3_expf and k3_tanhf are plain double arithmetic (no FMA, no libm): each lane here does
 * the very operations of the scalar code, in the same order, 4 doubles to a ymm, so every
 * lane rounds as the scalar does. Two changes of form, both exact: ldexp(p, k) is
 * p * 2^k with 2^k built from its bits (|k| <= 151 here: the product is a normal double,
 * no rounding), and the branches are computed on clamped inputs and blended. The tail
 * (n % 8) runs the scalar functions. */
#include "kernels.h"
#include "kernels_avx2.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define INL static inline __attribute__((always_inline))

/* k3_exp_d for |x| <= 745 (callers clamp): x = k ln2 + r, Taylor to degree 13, * 2^k */
INL __m256d exp4(__m256d x) {
    const __m256d half = _mm256_set1_pd(0.5);
    __m256d t = _mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634074));
    /* k = t >= 0 ? (long)(t + 0.5) : -(long)(0.5 - t): truncations, as int32 */
    __m128i kp = _mm256_cvttpd_epi32(_mm256_add_pd(t, half));
    __m128i kn = _mm_sub_epi32(_mm_setzero_si128(), _mm256_cvttpd_epi32(_mm256_sub_pd(half, t)));
    __m256d ge = _mm256_cmp_pd(t, _mm256_setzero_pd(), _CMP_GE_OQ);
    __m128i ge32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
        _mm256_castpd_si256(ge), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    __m128i k = _mm_blendv_epi8(kn, kp, ge32);
    __m256d kd = _mm256_cvtepi32_pd(k);
    __m256d r = _mm256_sub_pd(
        _mm256_sub_pd(x, _mm256_mul_pd(kd, _mm256_set1_pd(6.93147180369123816490e-01))),
        _mm256_mul_pd(kd, _mm256_set1_pd(1.90821492927058770002e-10)));
#define HORNER(c) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(c))
    __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
    HORNER(1.0 / 479001600.0); HORNER(1.0 / 39916800.0); HORNER(1.0 / 3628800.0);
    HORNER(1.0 / 362880.0); HORNER(1.0 / 40320.0); HORNER(1.0 / 5040.0);
    HORNER(1.0 / 720.0); HORNER(1.0 / 120.0); HORNER(1.0 / 24.0); HORNER(1.0 / 6.0);
    HORNER(0.5); HORNER(1.0); HORNER(1.0);
#undef HORNER
    __m256i e = _mm256_slli_epi64(
        _mm256_add_epi64(_mm256_cvtepi32_epi64(k), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

/* both halves of 8 floats as doubles, and back (the (double) and (float) casts) */
#define LO4(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define HI4(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))
#define F8(lo, hi) _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo))

/* k3_expf: NaN -> x + x, x > 89 -> inf, x < -104 -> 0, else (float)k3_exp_d(x) */
INL __m256 expf8(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256 y = F8(exp4(LO4(xc)), exp4(HI4(xc)));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()),
                         _mm256_cmp_ps(x, _mm256_set1_ps(89.0f), _CMP_GT_OQ));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* k3_sigmoidf: 1 / (1 + expf(-x)) in float */
INL __m256 sigmoid8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 nx = _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
    return _mm256_div_ps(one, _mm256_add_ps(one, expf8(nx)));
}

/* k3_tanhf on 4 of the 8 (as doubles): |d| < 0.125 the odd series, >= 10 one, else
 * 1 - 2 / (exp_d(2|d|) + 1); the sign of d */
INL __m256d tanh4(__m256d d) {
    const __m256d one = _mm256_set1_pd(1.0), sgn = _mm256_set1_pd(-0.0);
    __m256d a = _mm256_andnot_pd(sgn, d), z = _mm256_mul_pd(d, d);
#define HORNER(c) p = _mm256_add_pd(_mm256_mul_pd(p, z), _mm256_set1_pd(c))
    __m256d p = _mm256_set1_pd(-929569.0 / 638512875.0);
    HORNER(21844.0 / 6081075.0); HORNER(-1382.0 / 155925.0); HORNER(62.0 / 2835.0);
    HORNER(-17.0 / 315.0); HORNER(2.0 / 15.0); HORNER(-1.0 / 3.0);
#undef HORNER
    __m256d small = _mm256_add_pd(d, _mm256_mul_pd(d, _mm256_mul_pd(z, p)));
    __m256d ac = _mm256_min_pd(a, _mm256_set1_pd(10.0));      /* NaN -> 10: blended away */
    __m256d ex = exp4(_mm256_mul_pd(_mm256_set1_pd(2.0), ac));
    __m256d r = _mm256_sub_pd(one, _mm256_div_pd(_mm256_set1_pd(2.0), _mm256_add_pd(ex, one)));
    r = _mm256_blendv_pd(r, one, _mm256_cmp_pd(a, _mm256_set1_pd(10.0), _CMP_GE_OQ));
    r = _mm256_or_pd(r, _mm256_and_pd(d, sgn));                /* d < 0 ? -r : r (r > 0) */
    return _mm256_blendv_pd(r, small, _mm256_cmp_pd(a, _mm256_set1_pd(0.125), _CMP_LT_OQ));
}

/* k3_tanhf: NaN and +-0 give x + x */
INL __m256 tanhf8(__m256 x) {
    __m256 y = F8(tanh4(LO4(x)), tanh4(HI4(x)));
    __m256 odd = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q),
                              _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
    return _mm256_blendv_ps(y, _mm256_add_ps(x, x), odd);
}

void k3_avx2_exp_d(double *y, const double *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(y + i, exp4(_mm256_loadu_pd(x + i)));
    for (; i < n; i++) y[i] = k3_exp_d(x[i]);
}

void k3_avx2_situ(float *out, const float *g, const float *u, int n, float b1, float b2) {
    const __m256 B1 = _mm256_set1_ps(b1), B2 = _mm256_set1_ps(b2);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
        __m256 a = _mm256_mul_ps(_mm256_mul_ps(B1, tanhf8(_mm256_div_ps(gv, B1))), sigmoid8(gv));
        __m256 v = _mm256_mul_ps(B2, tanhf8(_mm256_div_ps(uv, B2)));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(a, v));
    }
    for (; i < n; i++) out[i] = k3_situf(g[i], u[i], b1, b2);
}

void k3_avx2_silu(float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(x + i, _mm256_mul_ps(v, sigmoid8(v)));
    }
    for (; i < n; i++) x[i] = k3_siluf(x[i]);
}

void k3_avx2_sigmul(float *o, const float *g, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(o + i),
                                              sigmoid8(_mm256_loadu_ps(g + i))));
    for (; i < n; i++) o[i] *= k3_sigmoidf(g[i]);
}

void k3_avx2_expf(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, expf8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = k3_expf(x[i]);
}

void k3_avx2_sigmoid(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, sigmoid8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = k3_sigmoidf(x[i]);
}
#endif
