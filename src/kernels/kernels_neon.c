/* kernels_neon.c — AArch64 NEON twins of the scalar kernels (kernels.c), same bits.
 *
 * The 16 canonical lanes are four float32x4 registers (lanes 0-3, 4-7, 8-11, 12-15);
 * every multiply-add is one vfmaq_f32 (fused, like fmaf); the fold is the same tree
 * (8: v0+=v2, v1+=v3; 4: v0+=v1; 2; 1) — never vaddvq, whose pairing differs. Tails
 * spill the lanes and finish with scalar fmaf. MXFP4 (lane l = byte l of a 32-block, low
 * nibble then high; kernels.h): vqtbl1q_s8 of doubled E2M1 values, widen, convert
 * (exact), times 2^(s-128) (exact), FMA with x de-interleaved by vld2q_f32.
 * On other architectures this file has no code. */
#include "kernels.h"
#include "codec.h"

#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>

#define INL static inline __attribute__((always_inline))

INL float fold4(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
    a0 = vaddq_f32(a0, a2); a1 = vaddq_f32(a1, a3);          /* w = 8 */
    a0 = vaddq_f32(a0, a1);                                   /* w = 4 */
    float32x2_t h = vadd_f32(vget_low_f32(a0), vget_high_f32(a0)); /* w = 2 */
    return vget_lane_f32(h, 0) + vget_lane_f32(h, 1);          /* w = 1 */
}

static float fold_arr(float acc[16]) {
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    return acc[0];
}

static float dot_neon(const float *a, const float *b, int n) {
    float32x4_t z = vdupq_n_f32(0.0f), a0 = z, a1 = z, a2 = z, a3 = z;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(a + i), vld1q_f32(b + i));
        a1 = vfmaq_f32(a1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    if (i == n) return fold4(a0, a1, a2, a3);
    float acc[16];
    vst1q_f32(acc, a0); vst1q_f32(acc + 4, a1); vst1q_f32(acc + 8, a2); vst1q_f32(acc + 12, a3);
    for (int j = 0; i < n; i++, j++) acc[j] = __builtin_fmaf(a[i], b[i], acc[j]);
    return fold_arr(acc);
}

static float sum_neon(const float *a, int n) {
    float32x4_t z = vdupq_n_f32(0.0f), a0 = z, a1 = z, a2 = z, a3 = z;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vaddq_f32(a0, vld1q_f32(a + i));     a1 = vaddq_f32(a1, vld1q_f32(a + i + 4));
        a2 = vaddq_f32(a2, vld1q_f32(a + i + 8)); a3 = vaddq_f32(a3, vld1q_f32(a + i + 12));
    }
    float acc[16];
    vst1q_f32(acc, a0); vst1q_f32(acc + 4, a1); vst1q_f32(acc + 8, a2); vst1q_f32(acc + 12, a3);
    for (int j = 0; i < n; i++, j++) acc[j] += a[i];
    return fold_arr(acc);
}

static void axpy_neon(float *y, float a, const float *x, int n) {
    float32x4_t va = vdupq_n_f32(a);
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
    for (; i < n; i++) y[i] = __builtin_fmaf(a, x[i], y[i]);
}

static void kda_step_neon(float *S, const float *q, const float *k, const float *v,
                          const float *alpha, float beta, float *o, int D) {
    float u[D], d[D];
    int D4 = D & ~3;
    for (int j = 0; j < D; j++) u[j] = 0.0f;
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        float32x4_t al = vdupq_n_f32(alpha[i]), ki = vdupq_n_f32(k[i]);
        int j = 0;
        for (; j < D4; j += 4) {
            float32x4_t s = vmulq_f32(vld1q_f32(Si + j), al);
            vst1q_f32(Si + j, s);
            vst1q_f32(u + j, vfmaq_f32(vld1q_f32(u + j), s, ki));
        }
        for (; j < D; j++) { Si[j] *= alpha[i]; u[j] = __builtin_fmaf(Si[j], k[i], u[j]); }
    }
    for (int j = 0; j < D; j++) { d[j] = beta * (v[j] - u[j]); o[j] = 0.0f; }
    for (int i = 0; i < D; i++) {
        float *Si = S + (size_t)i * D;
        float32x4_t ki = vdupq_n_f32(k[i]), qi = vdupq_n_f32(q[i]);
        int j = 0;
        for (; j < D4; j += 4) {
            float32x4_t s = vfmaq_f32(vld1q_f32(Si + j), ki, vld1q_f32(d + j));
            vst1q_f32(Si + j, s);
            vst1q_f32(o + j, vfmaq_f32(vld1q_f32(o + j), s, qi));
        }
        for (; j < D; j++) {
            Si[j] = __builtin_fmaf(k[i], d[j], Si[j]); o[j] = __builtin_fmaf(Si[j], q[i], o[j]);
        }
    }
}

/* ---- matmul: register tiles of R rows x TT tokens, 16 columns per step. */
typedef struct {
    int type, cols;
    const float *wf; const uint16_t *wb; const uint8_t *wp, *ws;
} M;

INL float32x4_t bf16x4(uint16x4_t w) { return vreinterpretq_f32_u32(vshll_n_u16(w, 16)); }
INL float32x4_t ld_bf16(const uint16_t *p) { return bf16x4(vld1_u16(p)); }

/* The 16 bytes of row r's 32-block at column c (c % 32 == 0) as doubled E2M1 int8:
 * lo = low nibbles (element 2l in byte l), hi = high nibbles (element 2l+1). */
INL void mx16(const M *m, int r, int c, int8x16_t *lo, int8x16_t *hi) {
    static const int8_t T[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
    uint8x16_t v = vld1q_u8(m->wp + ((size_t)r * m->cols + c) / 2);
    int8x16_t t = vld1q_s8(T);
    *lo = vqtbl1q_s8(t, vandq_u8(v, vdupq_n_u8(15)));
    *hi = vqtbl1q_s8(t, vshrq_n_u8(v, 4));
}

INL float32x4_t mx4(int8x16_t e, int q, float32x4_t s) {
    int16x8_t h = q < 2 ? vmovl_s8(vget_low_s8(e)) : vmovl_high_s8(e);
    int32x4_t w = (q & 1) ? vmovl_high_s16(h) : vmovl_s16(vget_low_s16(h));
    return vmulq_f32(vcvtq_f32_s32(w), s);
}

INL float tail_finish(const M *m, int r, const float *x, int c0, const float32x4_t *a) {
    float acc[16];
    vst1q_f32(acc, a[0]); vst1q_f32(acc + 4, a[1]);
    vst1q_f32(acc + 8, a[2]); vst1q_f32(acc + 12, a[3]);
    size_t ro = (size_t)r * m->cols;
    for (int c = c0, j = 0; c < m->cols; c++, j++) {
        float w = m->type == K3_W_F32 ? m->wf[ro + c] : k3_bf16_to_f32(m->wb[ro + c]);
        acc[j] = __builtin_fmaf(w, x[c], acc[j]);
    }
    return fold_arr(acc);
}

INL void tile(const M *m, int type, int R, int TT, float *Y, int rows, const float *X,
              int r, int t) {
    int cols = m->cols, n16 = cols & ~15;
    float32x4_t acc[4][3][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[i][j][q] = vdupq_n_f32(0.0f);
    if (type == K3_W_MXFP4) {              /* cols % 32 == 0: no tail */
        for (int c = 0; c < cols; c += 32) {
            int8x16_t lo[4], hi[4];
            float32x4_t s[4];
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                mx16(m, r + i, c, &lo[i], &hi[i]);
                s[i] = vreinterpretq_f32_u32(
                    vdupq_n_u32(k3_e8m0_half_bits[m->ws[((size_t)(r + i) * cols + c) / 32]]));
            }
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                float32x4x2_t x[3];            /* vld2q: even elements, odd elements */
#pragma GCC unroll 3
                for (int j = 0; j < TT; j++)
                    x[j] = vld2q_f32(X + (size_t)(t + j) * cols + c + 8 * q);
#pragma GCC unroll 4
                for (int i = 0; i < R; i++) {
                    float32x4_t w = mx4(lo[i], q, s[i]);
#pragma GCC unroll 3
                    for (int j = 0; j < TT; j++)
                        acc[i][j][q] = vfmaq_f32(acc[i][j][q], w, x[j].val[0]);
                    w = mx4(hi[i], q, s[i]);
#pragma GCC unroll 3
                    for (int j = 0; j < TT; j++)
                        acc[i][j][q] = vfmaq_f32(acc[i][j][q], w, x[j].val[1]);
                }
            }
        }
        n16 = cols;
    }
    for (int c = 0; c < n16 && type != K3_W_MXFP4; c += 16) {
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            float32x4_t w[4];
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                size_t o = (size_t)(r + i) * cols + c + 4 * q;
                w[i] = type == K3_W_F32 ? vld1q_f32(m->wf + o) : ld_bf16(m->wb + o);
            }
#pragma GCC unroll 3
            for (int j = 0; j < TT; j++) {
                float32x4_t x = vld1q_f32(X + (size_t)(t + j) * cols + c + 4 * q);
#pragma GCC unroll 4
                for (int i = 0; i < R; i++) acc[i][j][q] = vfmaq_f32(acc[i][j][q], w[i], x);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 3
        for (int j = 0; j < TT; j++)
            Y[(size_t)(t + j) * rows + r + i] = n16 == cols
                ? fold4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3])
                : tail_finish(m, r + i, X + (size_t)(t + j) * cols, n16, acc[i][j]);
}

#define TILES(TYPE, RA, TA)                                                               \
    for (t = t0; t < t1;) {                                                               \
        int tt = t1 - t >= TA ? TA : 1;                                                   \
        for (r = r0; r < r1;) {                                                           \
            if (tt == TA && r1 - r >= RA) { tile(&m, TYPE, RA, TA, Y, rows, X, r, t); r += RA; } \
            else if (tt == TA) { tile(&m, TYPE, 1, TA, Y, rows, X, r, t); r += 1; }       \
            else if (r1 - r >= RA) { tile(&m, TYPE, RA, 1, Y, rows, X, r, t); r += RA; }  \
            else { tile(&m, TYPE, 1, 1, Y, rows, X, r, t); r += 1; }                      \
        }                                                                                 \
        t += tt;                                                                          \
    }

/* K3_W_BF16C matvec and row decoder (codec.h), 16 storage lanes a step in the byte
 * domain: plane bytes -> lane masks by vtst, the masks add 1, 2, 4 to lo, escapes (all
 * three bits) take their bytes by vtbl through k3_codec_expand8; the BF16 low and high
 * bytes zipped give 16 words. In a full block (bc2) the 16 storage lanes of quarter q
 * of a chunk are lanes 4q..4q+3 of its 4 groups: as u32, the words of vzip1 are groups
 * 0 (<< 16) and 1 (& 0xFFFF0000), of vzip2 groups 2 and 3, already fp32 in the lanes of
 * acc[q], so no permute. A shorter block keeps weight order: 16 lanes are one group. A
 * row's last block when cols % 16 != 0 goes through the reference decoder and the BF16
 * lanes (spilled tail, as tail_finish): same order, same bits. */
INL uint8x16_t c_mask16(const uint8_t *q) {                /* 2 plane bytes -> 16 lanes */
    const uint8x16_t lb = vreinterpretq_u8_u64(vdupq_n_u64(0x8040201008040201ull));
    return vtstq_u8(vcombine_u8(vdup_n_u8(q[0]), vdup_n_u8(q[1])), lb);
}
/* exponents of 16 storage lanes: q their plane 0 bytes (plane k at q + k ps); esc the
 * block's next escape byte, advanced past those taken */
INL uint8x16_t c_exp16(const uint8_t *q, int ps, uint8x16_t lo, const uint8_t **esc) {
    uint8x16_t m0 = c_mask16(q), m1 = c_mask16(q + ps), m2 = c_mask16(q + 2 * ps);
    uint8x16_t e = vaddq_u8(lo, vandq_u8(m0, vdupq_n_u8(1)));
    e = vaddq_u8(e, vandq_u8(m1, vdupq_n_u8(2)));
    e = vaddq_u8(e, vandq_u8(m2, vdupq_n_u8(4)));
    unsigned b0 = q[0] & q[ps] & q[2 * ps], b1 = q[1] & q[ps + 1] & q[2 * ps + 1];
    if (b0 | b1) {                          /* code 7: the next escape bytes, in order */
        const uint8_t *x = *esc;
        uint8x8_t x0 = vtbl1_u8(vld1_u8(x), vld1_u8(k3_codec_expand8[b0]));  /* in block */
        x += __builtin_popcount(b0);
        uint8x8_t x1 = vtbl1_u8(vld1_u8(x), vld1_u8(k3_codec_expand8[b1]));
        *esc = x + __builtin_popcount(b1);
        e = vbslq_u8(vandq_u8(vandq_u8(m0, m1), m2), vcombine_u8(x0, x1), e);
    }
    return e;
}
/* BF16 words of storage lanes 0-7 (*a) and 8-15 (*b) from exponent and sign+mantissa */
INL void c_words(uint8x16_t e, uint8x16_t s, uint16x8_t *a, uint16x8_t *b) {
    const uint8x16_t B80 = vdupq_n_u8(0x80);
    uint8x16_t hi = vbslq_u8(B80, s, vshrq_n_u8(e, 1));     /* sign | exponent >> 1 */
    uint8x16_t lo = vbslq_u8(B80, vshlq_n_u8(e, 7), s);     /* exponent bit 0 | mantissa */
    *a = vreinterpretq_u16_u8(vzip1q_u8(lo, hi));
    *b = vreinterpretq_u16_u8(vzip2q_u8(lo, hi));
}
/* a block of G groups being read: its planes (or raw exponents), next escape, sign+mantissa */
typedef struct { const uint8_t *pl, *esc, *sm; uint8x16_t lo; int G, raw; } Blk;
INL Blk c_open(const uint8_t *p, int G) {
    Blk k = { p + 2, p + 2 + 6 * G, p + 2 + 6 * G + p[1], vdupq_n_u8(p[0]), G,
              p[1] == K3_CODEC_RAW };
    if (k.raw) k.sm = p + 2 + 16 * G;
    return k;
}
/* the words of storage group sg (storage lanes 16 sg..16 sg+15): in a full block chunk
 * sg >> 2, quarter sg & 3; in a shorter one group sg. Called in increasing sg (escapes). */
INL void c_group(Blk *k, int sg, uint16x8_t *a, uint16x8_t *b) {
    int gc = k->G - (sg & ~3) < 4 ? k->G - (sg & ~3) : 4;   /* groups in sg's chunk */
    uint8x16_t e = k->raw ? vld1q_u8(k->pl + 16 * sg)
                          : c_exp16(k->pl + k3_codec_plane(k->G, sg, 0, 0), 2 * gc, k->lo,
                                    &k->esc);
    c_words(e, vld1q_u8(k->sm + 16 * sg), a, b);
}
INL float32x4_t f_lo(uint16x8_t w) {      /* words 0, 2, 4, 6 as fp32 */
    return vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_u16(w), 16));
}
INL float32x4_t f_hi(uint16x8_t w) {      /* words 1, 3, 5, 7 as fp32 */
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_u16(w), vdupq_n_u32(0xFFFF0000u)));
}

/* the block at p (G groups, full or not) into acc, lanes 4q..4q+3 in acc[q] */
INL void c_block(const uint8_t *p, int G, const float *x, float32x4_t *acc) {
    Blk k = c_open(p, G);
    uint16x8_t a, b;
    if (16 * G < K3_CODEC_BLOCK) {                  /* a shorter block: weight order */
        for (int g = 0; g < G; g++, x += 16) {
            c_group(&k, g, &a, &b);
            acc[0] = vfmaq_f32(acc[0], bf16x4(vget_low_u16(a)), vld1q_f32(x));
            acc[1] = vfmaq_f32(acc[1], bf16x4(vget_high_u16(a)), vld1q_f32(x + 4));
            acc[2] = vfmaq_f32(acc[2], bf16x4(vget_low_u16(b)), vld1q_f32(x + 8));
            acc[3] = vfmaq_f32(acc[3], bf16x4(vget_high_u16(b)), vld1q_f32(x + 12));
        }
        return;
    }
    for (int c = 0; c < 4; c++, x += 64)                    /* storage lanes: chunk c */
        for (int q = 0; q < 4; q++) {                       /* groups 0..3 in order */
            c_group(&k, 4 * c + q, &a, &b);
            acc[q] = vfmaq_f32(acc[q], f_lo(a), vld1q_f32(x + 4 * q));
            acc[q] = vfmaq_f32(acc[q], f_hi(a), vld1q_f32(x + 4 * q + 16));
            acc[q] = vfmaq_f32(acc[q], f_lo(b), vld1q_f32(x + 4 * q + 32));
            acc[q] = vfmaq_f32(acc[q], f_hi(b), vld1q_f32(x + 4 * q + 48));
        }
}

static float dot_c(const uint8_t *p, int cols, const float *x) {
    float32x4_t z = vdupq_n_f32(0.0f), a[4] = { z, z, z, z };
    for (int c = 0; c < cols; c += K3_CODEC_BLOCK) {
        int n = cols - c < K3_CODEC_BLOCK ? cols - c : K3_CODEC_BLOCK, G = (n + 15) / 16;
        const uint8_t *next = p + k3_codec_block_bytes(p, G);
        if (n % 16 == 0) { c_block(p, G, x + c, a); p = next; continue; }
        uint16_t w[K3_CODEC_BLOCK];              /* the row's last block: cols % 16 != 0 */
        k3_codec_decode_block(w, p, n);
        int i = 0;
        for (; i + 16 <= n; i += 16)
            for (int q = 0; q < 4; q++)
                a[q] = vfmaq_f32(a[q], ld_bf16(w + i + 4 * q), vld1q_f32(x + c + i + 4 * q));
        float acc[16];
        for (int q = 0; q < 4; q++) vst1q_f32(acc + 4 * q, a[q]);
        for (int j = 0; i < n; i++, j++)
            acc[j] = __builtin_fmaf(k3_bf16_to_f32(w[i]), x[c + i], acc[j]);
        return fold_arr(acc);
    }
    return fold4(a[0], a[1], a[2], a[3]);
}

/* Prefill's row decoder (k3_codec_prefill): full blocks by c_group, each quarter's words
 * unzipped into its 4 groups' canonical lanes; the row's shorter last block by the
 * reference */
static void dec_row(uint16_t *out, const K3Mat *W, int r) {
    const uint8_t *p = k3_codec_row(W, r);
    for (int c = 0; c < W->cols; c += K3_CODEC_BLOCK, out += K3_CODEC_BLOCK) {
        if (W->cols - c < K3_CODEC_BLOCK) { k3_codec_decode_block(out, p, W->cols - c); break; }
        Blk k = c_open(p, 16);
        for (int sg = 0; sg < 16; sg++) {                   /* chunk sg >> 2, quarter sg & 3 */
            uint16x8_t a, b;
            c_group(&k, sg, &a, &b);
            uint16x8_t g02 = vuzp1q_u16(a, b), g13 = vuzp2q_u16(a, b);   /* groups 0, 2 | 1, 3 */
            uint16_t *o = out + 64 * (sg >> 2) + 4 * (sg & 3);
            vst1_u16(o, vget_low_u16(g02));       vst1_u16(o + 16, vget_low_u16(g13));
            vst1_u16(o + 32, vget_high_u16(g02)); vst1_u16(o + 48, vget_high_u16(g13));
        }
        p = k.sm + 16 * 16;                                 /* past the sign+mantissa bytes */
    }
}

static const K3KernelOps OPS;
static void matmul_neon(float *Y, const K3Mat *W, const float *X, int r0, int r1, int t0, int t1) {
    M m = { W->type, W->cols, W->w, W->w, W->w, W->scale };
    int rows = W->rows, r, t;
    if (W->type == K3_W_BF16C) {
        if (t1 - t0 > 1) { k3_codec_prefill(&OPS, dec_row, Y, W, X, r0, r1, t0, t1); return; }
        for (r = r0; r < r1; r++)
            Y[(size_t)t0 * rows + r] = dot_c(k3_codec_row(W, r), m.cols, X + (size_t)t0 * m.cols);
        return;
    }
    if (t1 - t0 == 1) {
        if (W->type == K3_W_F32) TILES(K3_W_F32, 4, 1)
        else if (W->type == K3_W_BF16) TILES(K3_W_BF16, 4, 1)
        else TILES(K3_W_MXFP4, 4, 1)
    } else {
        if (W->type == K3_W_F32) TILES(K3_W_F32, 2, 3)
        else if (W->type == K3_W_BF16) TILES(K3_W_BF16, 2, 3)
        else TILES(K3_W_MXFP4, 2, 3)
    }
}

static const K3KernelOps OPS = {
    "neon", matmul_neon, dot_neon, sum_neon, axpy_neon, kda_step_neon,
    NULL, NULL, NULL, NULL, NULL,   /* the scalar transcendentals */
    NULL, NULL                      /* k3_dots, k3_axpys: loops of dot_neon, axpy_neon */
};
const K3KernelOps *k3_kernels_neon(void) { return &OPS; }

#else
const K3KernelOps *k3_kernels_neon(void) { return 0; }
#endif
