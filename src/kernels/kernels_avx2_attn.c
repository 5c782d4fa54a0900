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
#define SET1 _mm256_set1_ps
#define FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define IVEC __m256i
#define ASI _mm256_castps_si256
#define ASF _mm256_castsi256_ps
#define ISET1 _mm256_set1_epi32
#define IADD _mm256_add_epi32
#define IMAX _mm256_max_epi32
#define UMIN _mm256_min_epu32
#define SHL23(e) _mm256_slli_epi32(e, 23)
#define ATTN_OPS OPS
#define ATTN_NAME "avx2"

#include "kernels_attn_body.h"
const K3AttnOps *k3_attn_avx2(void) { return &OPS; }
#else
const K3AttnOps *k3_attn_avx2(void) { return 0; }
#endif
