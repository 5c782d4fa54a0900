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
#define SET1 _mm512_set1_ps
#define FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define IVEC __m512i
#define ASI _mm512_castps_si512
#define ASF _mm512_castsi512_ps
#define ISET1 _mm512_set1_epi32
#define IADD _mm512_add_epi32
#define IMAX _mm512_max_epi32
#define UMIN _mm512_min_epu32
#define SHL23(e) _mm512_slli_epi32(e, 23)
#define ATTN_OPS OPS
#define ATTN_NAME "avx512"

#include "kernels_attn_body.h"
const K3AttnOps *k3_attn_avx512(void) { return &OPS; }
#else
const K3AttnOps *k3_attn_avx512(void) { return 0; }
#endif
