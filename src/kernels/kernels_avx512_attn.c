/* kernels_avx512_attn.c — the attention tiles on AVX-512 (kernels_attn_body.h): 16 queries
 * a register, tiles of 6 rows x 4 registers (24 accumulators), the scalar reference's bits. */
#include "kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#define VEC __m512
#define VW 16
#ifndef AR
#define AR 6
#endif
#ifndef AV
#define AV 4
#endif
#define LD(p) _mm512_loadu_ps(p)
#define ST(p, v) _mm512_storeu_ps(p, v)
#define SET1P(p) _mm512_set1_ps(*(p))
#define ZERO _mm512_setzero_ps()
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define MUL _mm512_mul_ps
#define ADD _mm512_add_ps
#define SUB _mm512_sub_ps
#define MAXGT _mm512_max_ps          /* vmaxps: a > b ? a : b, as the reference */
#define ATTN_OPS OPS
#define ATTN_NAME "avx512"

static inline __attribute__((always_inline)) __m512 exp_neg_v(__m512 x) {
    __m512 a = _mm512_castsi512_ps(_mm512_min_epu32(_mm512_castps_si512(x),
                                                    _mm512_set1_epi32((int)0xC2D00000u)));
    const __m512 sh = _mm512_set1_ps(12582912.0f);
    __m512 t = _mm512_fmadd_ps(a, _mm512_set1_ps(1.44269504088896341f), sh);
    __m512 k = _mm512_sub_ps(t, sh);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145751953125f), a);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 q = _mm512_set1_ps(1.0f / 5040);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 720));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 120));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 24));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f / 6));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(-0x4B400000 + 127));
    e = _mm512_slli_epi32(_mm512_max_epi32(e, _mm512_setzero_si512()), 23);
    return _mm512_mul_ps(q, _mm512_castsi512_ps(e));
}

#include "kernels_attn_body.h"
const K3AttnOps *k3_attn_avx512(void) { return &OPS; }
#else
const K3AttnOps *k3_attn_avx512(void) { return 0; }
#endif
