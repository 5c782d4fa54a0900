/* kernels_avx2_attn.c — the attention tiles on AVX2 + FMA (kernels_attn_body.h): 8 queries a
 * register, tiles of 6 rows x 2 registers (12 accumulators of 16 ymm), the reference's bits. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define VEC __m256
#define VW 8
#define AR 6
#define AV 2
#define LD(p) _mm256_loadu_ps(p)
#define ST(p, v) _mm256_storeu_ps(p, v)
#define SET1P(p) _mm256_broadcast_ss(p)
#define ZERO _mm256_setzero_ps()
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define MUL _mm256_mul_ps
#define ADD _mm256_add_ps
#define SUB _mm256_sub_ps
#define MAXGT _mm256_max_ps          /* vmaxps: a > b ? a : b, as the reference */
#define ATTN_OPS OPS
#define ATTN_NAME "avx2"

static inline __attribute__((always_inline)) __m256 exp_neg_v(__m256 x) {
    __m256 a = _mm256_castsi256_ps(_mm256_min_epu32(_mm256_castps_si256(x),
                                                    _mm256_set1_epi32((int)0xC2D00000u)));
    const __m256 sh = _mm256_set1_ps(12582912.0f);
    __m256 t = _mm256_fmadd_ps(a, _mm256_set1_ps(1.44269504088896341f), sh);
    __m256 k = _mm256_sub_ps(t, sh);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), a);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 q = _mm256_set1_ps(1.0f / 5040);
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 720));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 120));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 24));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 6));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.5f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(-0x4B400000 + 127));
    e = _mm256_slli_epi32(_mm256_max_epi32(e, _mm256_setzero_si256()), 23);
    return _mm256_mul_ps(q, _mm256_castsi256_ps(e));
}

#include "kernels_attn_body.h"
const K3AttnOps *k3_attn_avx2(void) { return &OPS; }
#else
const K3AttnOps *k3_attn_avx2(void) { return 0; }
#endif
