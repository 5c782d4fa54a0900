/* kernels_avx512_ew.c — the elementwise transcendentals of the prefill (SiTU-GLU, SiLU,
 * sigmoid gates, exp) on 16 floats at a time: kernels_avx2_ew.c's lanes, 8 doubles to a zmm
 * instead of 4 to a ymm, so every lane does the very operations of the scalar code in the
 * same order and rounds as it does (the same bits; test_kernels compares them). The
 * 8-lane code ran SiTU at ~3% of the 1,024-token prefill's samples on Zen 5 (perf). The
 * tail (n % 16) goes to the AVX2 functions, which end in the scalar ones. */
#include "kernels.h"
#include "kernels_avx2.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__)
#include "kernels_avx512.h"

/* k3_exp_d for |x| <= 745 (callers clamp): x = k ln2 + r, Taylor to degree 13, * 2^k */
INL __m512d exp8(__m512d x) {
    const __m512d half = _mm512_set1_pd(0.5);
    __m512d t = _mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634074));
    /* k = t >= 0 ? (long)(t + 0.5) : -(long)(0.5 - t): truncations, as int32 */
    __m256i kp = _mm512_cvttpd_epi32(_mm512_add_pd(t, half));
    __m256i kn = _mm256_sub_epi32(_mm256_setzero_si256(),
                                  _mm512_cvttpd_epi32(_mm512_sub_pd(half, t)));
    __mmask8 ge = _mm512_cmp_pd_mask(t, _mm512_setzero_pd(), _CMP_GE_OQ);
    __m256i k = _mm256_mask_blend_epi32(ge, kn, kp);
    __m512d kd = _mm512_cvtepi32_pd(k);
    __m512d r = _mm512_sub_pd(
        _mm512_sub_pd(x, _mm512_mul_pd(kd, _mm512_set1_pd(6.93147180369123816490e-01))),
        _mm512_mul_pd(kd, _mm512_set1_pd(1.90821492927058770002e-10)));
#define HORNER(c) p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(c))
    __m512d p = _mm512_set1_pd(1.0 / 6227020800.0);
    HORNER(1.0 / 479001600.0); HORNER(1.0 / 39916800.0); HORNER(1.0 / 3628800.0);
    HORNER(1.0 / 362880.0); HORNER(1.0 / 40320.0); HORNER(1.0 / 5040.0);
    HORNER(1.0 / 720.0); HORNER(1.0 / 120.0); HORNER(1.0 / 24.0); HORNER(1.0 / 6.0);
    HORNER(0.5); HORNER(1.0); HORNER(1.0);
#undef HORNER
    __m512i e = _mm512_slli_epi64(
        _mm512_add_epi64(_mm512_cvtepi32_epi64(k), _mm512_set1_epi64(1023)), 52);
    return _mm512_mul_pd(p, _mm512_castsi512_pd(e));
}

/* both halves of 16 floats as doubles, and back (the (double) and (float) casts) */
#define LO8(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define HI8(v) _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1))
#define F16(lo, hi) \
    _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1)

/* k3_expf: NaN -> x + x, x > 89 -> inf, x < -104 -> 0, else (float)k3_exp_d(x) */
INL __m512 expf16(__m512 x) {
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    __m512 y = F16(exp8(LO8(xc)), exp8(HI8(xc)));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(89.0f), _CMP_GT_OQ), y,
                             _mm512_set1_ps(__builtin_inff()));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LT_OQ), y,
                             _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, _mm512_add_ps(x, x));
}

/* k3_sigmoidf: 1 / (1 + expf(-x)) in float */
INL __m512 sigmoid16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 nx = _mm512_xor_ps(x, _mm512_set1_ps(-0.0f));
    return _mm512_div_ps(one, _mm512_add_ps(one, expf16(nx)));
}

/* k3_tanhf on 8 of the 16 (as doubles): |d| < 0.125 the odd series, >= 10 one, else
 * 1 - 2 / (exp_d(2|d|) + 1); the sign of d */
INL __m512d tanh8(__m512d d) {
    const __m512d one = _mm512_set1_pd(1.0), sgn = _mm512_set1_pd(-0.0);
    __m512d a = _mm512_andnot_pd(sgn, d), z = _mm512_mul_pd(d, d);
#define HORNER(c) p = _mm512_add_pd(_mm512_mul_pd(p, z), _mm512_set1_pd(c))
    __m512d p = _mm512_set1_pd(-929569.0 / 638512875.0);
    HORNER(21844.0 / 6081075.0); HORNER(-1382.0 / 155925.0); HORNER(62.0 / 2835.0);
    HORNER(-17.0 / 315.0); HORNER(2.0 / 15.0); HORNER(-1.0 / 3.0);
#undef HORNER
    __m512d small = _mm512_add_pd(d, _mm512_mul_pd(d, _mm512_mul_pd(z, p)));
    __m512d ac = _mm512_min_pd(a, _mm512_set1_pd(10.0));      /* NaN -> 10: blended away */
    __m512d ex = exp8(_mm512_mul_pd(_mm512_set1_pd(2.0), ac));
    __m512d r = _mm512_sub_pd(one, _mm512_div_pd(_mm512_set1_pd(2.0), _mm512_add_pd(ex, one)));
    r = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, _mm512_set1_pd(10.0), _CMP_GE_OQ), r, one);
    r = _mm512_or_pd(r, _mm512_and_pd(d, sgn));                /* d < 0 ? -r : r (r > 0) */
    return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a, _mm512_set1_pd(0.125), _CMP_LT_OQ), r,
                                small);
}

/* k3_tanhf: NaN and +-0 give x + x */
INL __m512 tanhf16(__m512 x) {
    __m512 y = F16(tanh8(LO8(x)), tanh8(HI8(x)));
    __mmask16 odd = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) |
                    _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_mask_blend_ps(odd, y, _mm512_add_ps(x, x));
}

void k3_avx512_situ(float *out, const float *g, const float *u, int n, float b1, float b2) {
    const __m512 B1 = _mm512_set1_ps(b1), B2 = _mm512_set1_ps(b2);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gv = _mm512_loadu_ps(g + i), uv = _mm512_loadu_ps(u + i);
        __m512 a = _mm512_mul_ps(_mm512_mul_ps(B1, tanhf16(_mm512_div_ps(gv, B1))),
                                 sigmoid16(gv));
        __m512 v = _mm512_mul_ps(B2, tanhf16(_mm512_div_ps(uv, B2)));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(a, v));
    }
    if (i < n) k3_avx2_situ(out + i, g + i, u + i, n - i, b1, b2);
}

void k3_avx512_silu(float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        _mm512_storeu_ps(x + i, _mm512_mul_ps(v, sigmoid16(v)));
    }
    if (i < n) k3_avx2_silu(x + i, n - i);
}

void k3_avx512_sigmul(float *o, const float *g, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_loadu_ps(o + i),
                                              sigmoid16(_mm512_loadu_ps(g + i))));
    if (i < n) k3_avx2_sigmul(o + i, g + i, n - i);
}

void k3_avx512_expf(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, expf16(_mm512_loadu_ps(x + i)));
    if (i < n) k3_avx2_expf(y + i, x + i, n - i);
}

void k3_avx512_sigmoid(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, sigmoid16(_mm512_loadu_ps(x + i)));
    if (i < n) k3_avx2_sigmoid(y + i, x + i, n - i);
}
#endif
