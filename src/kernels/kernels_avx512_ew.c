/* kernels_avx512_ew.c — the elementwise transcendentals of the prefill (SiTU-GLU, SiLU,
 * sigmoid gates, exp) on 16 floats at a time (kernels_ew_body.h): kernels_avx2_ew.c's lanes,
 * 8 doubles to a zmm instead of 4 to a ymm, masks for the blends, so every lane does the
 * very operations of the scalar code in the same order and rounds as it does (the same bits;
 * test_kernels compares them). The 8-lane code ran SiTU at ~3% of the 1,024-token prefill's
 * samples on Zen 5 (perf). The tail (n % 16) goes to the AVX2 functions, which end in the
 * scalar ones. */
#include "kernels.h"
#include "kernels_avx2.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512DQ__) && \
    defined(__AVX512VL__)
#include "kernels_avx512.h"

#define VW 16
#define VF __m512
#define VD __m512d
#define F(op) _mm512_##op##_ps
#define D(op) _mm512_##op##_pd
#define FCMP _mm512_cmp_ps_mask
#define DCMP _mm512_cmp_pd_mask
#define FSEL _mm512_mask_blend_ps
#define DSEL _mm512_mask_blend_pd
#define MOR(a, b) ((a) | (b))
#define VI __m256i
#define KTRUNC _mm512_cvttpd_epi32
#define KNEG(k) _mm256_sub_epi32(_mm256_setzero_si256(), k)
#define KSEL _mm256_mask_blend_epi32
#define KTOD _mm512_cvtepi32_pd
#define POW2(k) _mm512_castsi512_pd(_mm512_slli_epi64( \
    _mm512_add_epi64(_mm512_cvtepi32_epi64(k), _mm512_set1_epi64(1023)), 52))
/* both halves of 16 floats as doubles, and back (the (double) and (float) casts) */
#define LO(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define HI(v) _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1))
#define JOIN(lo, hi) \
    _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1)
#define EW(name) k3_avx512_##name
#define EW_TAIL k3_kernels_avx2()

#include "kernels_ew_body.h"
#endif
