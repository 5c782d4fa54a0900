/* kernels_avx2_ew.c — the elementwise transcendentals of the prefill (SiTU-GLU, SiLU,
 * sigmoid gates, exp) on 8 floats at a time, 4 doubles to a ymm (kernels_ew_body.h), the
 * same bits as kernels.c. The tail (n % 8) runs the scalar functions. */
#include "kernels.h"
#include "kernels_avx2.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define VW 8
#define VF __m256
#define VD __m256d
#define F(op) _mm256_##op##_ps
#define D(op) _mm256_##op##_pd
#define FCMP _mm256_cmp_ps
#define DCMP _mm256_cmp_pd
#define FSEL(m, a, b) _mm256_blendv_ps(a, b, m)
#define DSEL(m, a, b) _mm256_blendv_pd(a, b, m)
#define MOR _mm256_or_ps
#define VI __m128i
#define KTRUNC _mm256_cvttpd_epi32
#define KNEG(k) _mm_sub_epi32(_mm_setzero_si128(), k)
#define KSEL(m, a, b) _mm_blendv_epi8(a, b, lanes32(m))
#define KTOD _mm256_cvtepi32_pd
#define POW2(k) _mm256_castsi256_pd(_mm256_slli_epi64( \
    _mm256_add_epi64(_mm256_cvtepi32_epi64(k), _mm256_set1_epi64x(1023)), 52))
/* both halves of 8 floats as doubles, and back (the (double) and (float) casts) */
#define LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))
#define JOIN(lo, hi) _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo))
#define EW(name) k3_avx2_##name
#define EW_TAIL k3_kernels_scalar()

/* a double compare's 4 lane masks as int32 lanes (for the blend of k) */
static inline __attribute__((always_inline)) __m128i lanes32(__m256d m) {
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(
        _mm256_castpd_si256(m), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}

#include "kernels_ew_body.h"
#endif
