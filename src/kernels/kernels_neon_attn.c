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
#define ATTN_OPS OPS
#define ATTN_NAME "neon"

/* a > b ? a : b exactly (vmaxq_f32 orders zeros and NaNs its own way) */
static inline __attribute__((always_inline)) float32x4_t MAXGT(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vcgtq_f32(a, b), a, b);
}

static inline __attribute__((always_inline)) float32x4_t exp_neg_v(float32x4_t x) {
    float32x4_t a = vreinterpretq_f32_u32(vminq_u32(vreinterpretq_u32_f32(x),
                                                     vdupq_n_u32(0xC2D00000u)));
    const float32x4_t sh = vdupq_n_f32(12582912.0f);
    float32x4_t t = vfmaq_f32(sh, a, vdupq_n_f32(1.44269504088896341f));
    float32x4_t k = vsubq_f32(t, sh);
    float32x4_t r = vfmsq_f32(a, k, vdupq_n_f32(0.693145751953125f));
    r = vfmsq_f32(r, k, vdupq_n_f32(1.42860682030941723212e-6f));
    float32x4_t q = vdupq_n_f32(1.0f / 5040);
    q = vfmaq_f32(vdupq_n_f32(1.0f / 720), q, r);
    q = vfmaq_f32(vdupq_n_f32(1.0f / 120), q, r);
    q = vfmaq_f32(vdupq_n_f32(1.0f / 24), q, r);
    q = vfmaq_f32(vdupq_n_f32(1.0f / 6), q, r);
    q = vfmaq_f32(vdupq_n_f32(0.5f), q, r);
    q = vfmaq_f32(vdupq_n_f32(1.0f), q, r);
    q = vfmaq_f32(vdupq_n_f32(1.0f), q, r);
    int32x4_t e = vaddq_s32(vreinterpretq_s32_f32(t), vdupq_n_s32(-0x4B400000 + 127));
    e = vmaxq_s32(e, vdupq_n_s32(0));
    uint32x4_t u = vshlq_n_u32(vreinterpretq_u32_s32(e), 23);
    return vmulq_f32(q, vreinterpretq_f32_u32(u));
}

#include "kernels_attn_body.h"
const K3AttnOps *k3_attn_neon(void) { return &OPS; }
#else
const K3AttnOps *k3_attn_neon(void) { return 0; }
#endif
