/* kernels_neon_attn.c — the attention tiles on AArch64 NEON (kernels_attn_body.h): 4 queries
 * a register, tiles of 6 rows x 4 registers (24 accumulators of 32), the reference's bits
 * (vfmaq_f32 and vfmsq_f32 are fused, like fmaf). On other architectures: no code. */
#include "kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#define VEC float32x4_t
#define VW 4
#define AR 6
#define AV 4
#define LD(p) vld1q_f32(p)
#define ST(p, v) vst1q_f32(p, v)
#define SET1P(p) vld1q_dup_f32(p)
#define ZERO vdupq_n_f32(0.0f)
#define FMA(a, b, c) vfmaq_f32(c, a, b)
#define MUL vmulq_f32
#define ADD vaddq_f32
#define SUB vsubq_f32
#define SET1 vdupq_n_f32
#define FNMA(a, b, c) vfmsq_f32(c, a, b)
#define IVEC int32x4_t
#define ASI vreinterpretq_s32_f32
#define ASF vreinterpretq_f32_s32
#define ISET1 vdupq_n_s32
#define IADD vaddq_s32
#define IMAX vmaxq_s32
#define UMIN(a, b) vreinterpretq_s32_u32(vminq_u32(vreinterpretq_u32_s32(a), \
                                                    vreinterpretq_u32_s32(b)))
#define SHL23(e) vshlq_n_s32(e, 23)
#define ATTN_OPS OPS
#define ATTN_NAME "neon"

/* a > b ? a : b exactly (vmaxq_f32 orders zeros and NaNs its own way) */
static inline __attribute__((always_inline)) float32x4_t MAXGT(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}

#include "kernels_attn_body.h"
const K3AttnOps *k3_attn_neon(void) { return &OPS; }
#else
const K3AttnOps *k3_attn_neon(void) { return 0; }
#endif
