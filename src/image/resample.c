/* resample.c — Pillow 9.4's Image.resize(size, BICUBIC) as the vision reference calls it
 * (K3_VISION.md §2.3), on 8-bit samples four to a pixel, byte for byte:
 *  - BICUBIC (a = -0.5, support 2 stretched by the downscale factor): coefficients in double,
 *    each normalised by its tap sum, then to 22-bit fixed point rounded half away from zero;
 *    a horizontal pass (only over the source rows the vertical pass reads) rounding to uint8,
 *    then a vertical pass on that; an axis whose size is unchanged is not filtered at all;
 *  - NEAREST (Pillow's choice for modes P and 1): the affine scale with its stepped double
 *    source coordinate (x0 = step/2, then += step), truncated;
 *  - RGBA/LA go through premultiplied RGBa/La (c*a/255 rounded, back as 255*c/a clipped).
 * The tests (tests/sh/image_prep.sh) compare against Pillow itself on the corpus. */
#include "image.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PREC 22   /* Pillow's PRECISION_BITS for 8-bit images */

static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

/* Per output index o of one axis: the first tap bounds[2o], the tap count bounds[2o+1], and
 * ksize weights at w[o*ksize], each normalised by its taps' sum. Returns ksize, or 0 out of
 * memory. */
static int coeffs_d(int in, int out, int **boundsp, double **wp) {
    double scale = (double)(float)in / out, fs = scale < 1.0 ? 1.0 : scale;
    double support = 2.0 * fs, ss = 1.0 / fs;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = malloc(sizeof *bounds * 2 * (size_t)out);
    double *w = calloc((size_t)ksize * out, sizeof *w);
    if (!bounds || !w) { free(bounds); free(w); return 0; }
    for (int o = 0; o < out; o++) {
        double center = (o + 0.5) * scale, ww = 0.0, *k = w + (size_t)o * ksize;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in) xmax = in;
        xmax -= xmin;
        for (int x = 0; x < xmax; x++) {
            k[x] = bicubic((x + xmin - center + 0.5) * ss);
            ww += k[x];
        }
        for (int x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        bounds[2 * o] = xmin;
        bounds[2 * o + 1] = xmax;
    }
    *boundsp = bounds;
    *wp = w;
    return ksize;
}

/* coeffs_d in 22-bit fixed point, rounded half away from zero (the 8-bit path's weights) */
static int coeffs(int in, int out, int **boundsp, int32_t **kp) {
    double *w;
    int ksize = coeffs_d(in, out, boundsp, &w);
    if (!ksize) return 0;
    int32_t *k = malloc(sizeof *k * (size_t)ksize * out);
    if (!k) { free(*boundsp); free(w); return 0; }
    for (size_t i = 0; i < (size_t)ksize * out; i++)
        k[i] = w[i] < 0 ? (int32_t)(-0.5 + w[i] * (1 << PREC))
                        : (int32_t)(0.5 + w[i] * (1 << PREC));
    free(w);
    *kp = k;
    return ksize;
}

static uint8_t clip8(int64_t v) {
    v >>= PREC;   /* arithmetic: floor, as Pillow's int shift */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One pass over nc of the 4 bytes: out[y][x] from in, taps along x (horizontal: step 4 bytes)
 * or along y (vertical: step one row). */
static void pass_h(const uint8_t *in, int inw, int y0, uint8_t *out, int outw, int rows, int nc,
                   const int *b, const int32_t *k, int ksize) {
    for (int y = 0; y < rows; y++) {
        const uint8_t *r = in + (size_t)(y + y0) * inw * 4;
        uint8_t *o = out + (size_t)y * outw * 4;
        for (int x = 0; x < outw; x++) {
            const int32_t *kk = k + (size_t)x * ksize;
            const uint8_t *p = r + (size_t)b[2 * x] * 4;
            for (int c = 0; c < nc; c++) {
                int64_t s = 1 << (PREC - 1);
                for (int t = 0; t < b[2 * x + 1]; t++) s += (int64_t)p[4 * t + c] * kk[t];
                o[4 * x + c] = clip8(s);
            }
        }
    }
}

static void pass_v(const uint8_t *in, int w, uint8_t *out, int outh, int nc, const int *b,
                   int y0, const int32_t *k, int ksize) {
    for (int y = 0; y < outh; y++) {
        const int32_t *kk = k + (size_t)y * ksize;
        const uint8_t *r = in + (size_t)(b[2 * y] - y0) * w * 4;
        uint8_t *o = out + (size_t)y * w * 4;
        for (int x = 0; x < w; x++)
            for (int c = 0; c < nc; c++) {
                int64_t s = 1 << (PREC - 1);
                for (int t = 0; t < b[2 * y + 1]; t++)
                    s += (int64_t)r[(size_t)t * w * 4 + 4 * x + c] * kk[t];
                o[4 * x + c] = clip8(s);
            }
    }
}

int k3_resample_bicubic(const uint8_t *in, int w, int h, uint8_t *out, int nw, int nh, int nc) {
    int *bh = NULL, *bv = NULL;
    int32_t *kh = NULL, *kv = NULL;
    int ksh = 0, ksv = 0, rc = -1;
    uint8_t *tmp = NULL;
    if (nw != w && !(ksh = coeffs(w, nw, &bh, &kh))) goto done;
    if (nh != h && !(ksv = coeffs(h, nh, &bv, &kv))) goto done;
    if (nw == w && nh == h) {
        memcpy(out, in, (size_t)w * h * 4);
    } else if (nh == h) {
        pass_h(in, w, 0, out, nw, h, nc, bh, kh, ksh);
    } else if (nw == w) {
        pass_v(in, w, out, nh, nc, bv, 0, kv, ksv);
    } else {
        /* only the source rows the vertical pass reads: [first tap of row 0, end of last) */
        int y0 = bv[0], y1 = bv[2 * nh - 2] + bv[2 * nh - 1];
        tmp = malloc((size_t)nw * (y1 - y0) * 4);
        if (!tmp) goto done;
        pass_h(in, w, y0, tmp, nw, y1 - y0, nc, bh, kh, ksh);
        pass_v(tmp, nw, out, nh, nc, bv, y0, kv, ksv);
    }
    rc = 0;
done:
    free(bh); free(bv); free(kh); free(kv); free(tmp);
    return rc;
}

void k3_resample_nearest(const uint8_t *in, int w, int h, uint8_t *out, int nw, int nh) {
    double ax = (double)w / nw, ay = (double)h / nh, yo = ay * 0.5;
    int *xin = malloc(sizeof *xin * (size_t)nw);
    if (!xin) {   /* a few KB: fall back to the same positions computed per row */
        for (int y = 0; y < nh; y++, yo += ay) {
            int yi = yo < 0 ? 0 : (int)yo < h ? (int)yo : h - 1;
            double xo = ax * 0.5;
            for (int x = 0; x < nw; x++, xo += ax) {
                int xi = xo < 0 ? 0 : (int)xo < w ? (int)xo : w - 1;
                memcpy(out + ((size_t)y * nw + x) * 4, in + ((size_t)yi * w + xi) * 4, 4);
            }
        }
        return;
    }
    double xo = ax * 0.5;
    for (int x = 0; x < nw; x++, xo += ax)   /* the positions never leave the image here */
        xin[x] = xo < 0 ? 0 : (int)xo < w ? (int)xo : w - 1;
    for (int y = 0; y < nh; y++, yo += ay) {
        int yi = yo < 0 ? 0 : (int)yo < h ? (int)yo : h - 1;
        for (int x = 0; x < nw; x++)
            memcpy(out + ((size_t)y * nw + x) * 4, in + ((size_t)yi * w + xin[x]) * 4, 4);
    }
    free(xin);
}

/* RGBA -> RGBa in place (Pillow's MULDIV255: t = c*a + 128, (t + t>>8) >> 8) */
void k3_premultiply(uint8_t *p, size_t npix) {
    for (size_t i = 0; i < npix; i++, p += 4)
        for (int c = 0; c < 3; c++) {
            unsigned t = (unsigned)p[c] * p[3] + 128;
            p[c] = (uint8_t)(((t >> 8) + t) >> 8);
        }
}

/* RGBa -> RGBA in place: alpha 0 and 255 keep the bytes, else 255*c/a clipped */
void k3_unpremultiply(uint8_t *p, size_t npix) {
    for (size_t i = 0; i < npix; i++, p += 4) {
        unsigned a = p[3];
        if (a == 0 || a == 255) continue;
        for (int c = 0; c < 3; c++) {
            unsigned v = 255u * p[c] / a;
            p[c] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

/* Pillow's 32-bit integer path (mode I): double sums of sample * weight, each pass rounded
 * as its ROUND_UP does ((int)(s + 0.5f) or (int)(s - 0.5f)). */
static int32_t round_up(double s) { return (int32_t)(s >= 0.0 ? s + 0.5f : s - 0.5f); }

int k3_resample_bicubic_i32(const int32_t *in, int w, int h, int32_t *out, int nw, int nh) {
    int *bh = NULL, *bv = NULL, rc = -1;
    double *kh = NULL, *kv = NULL;
    int ksh = 0, ksv = 0;
    int32_t *tmp = NULL;
    if (nw != w && !(ksh = coeffs_d(w, nw, &bh, &kh))) goto done;
    if (nh != h && !(ksv = coeffs_d(h, nh, &bv, &kv))) goto done;
    int y0 = 0, y1 = h;
    if (nh != h) { y0 = bv[0]; y1 = bv[2 * nh - 2] + bv[2 * nh - 1]; }
    const int32_t *src = in;
    if (nw != w) {
        tmp = malloc(sizeof *tmp * (size_t)nw * (y1 - y0));
        if (!tmp) goto done;
        for (int y = y0; y < y1; y++)
            for (int x = 0; x < nw; x++) {
                double s = 0.0;
                const int32_t *r = in + (size_t)y * w + bh[2 * x];
                for (int t = 0; t < bh[2 * x + 1]; t++) s += r[t] * kh[(size_t)x * ksh + t];
                tmp[(size_t)(y - y0) * nw + x] = round_up(s);
            }
        src = tmp;
    } else {
        src = in + (size_t)y0 * w;
    }
    if (nh != h) {
        for (int y = 0; y < nh; y++)
            for (int x = 0; x < nw; x++) {
                double s = 0.0;
                for (int t = 0; t < bv[2 * y + 1]; t++)
                    s += src[(size_t)(bv[2 * y] - y0 + t) * nw + x] * kv[(size_t)y * ksv + t];
                out[(size_t)y * nw + x] = round_up(s);
            }
    } else {
        memcpy(out, src, sizeof *out * (size_t)nw * nh);
    }
    rc = 0;
done:
    free(bh); free(bv); free(kh); free(kv); free(tmp);
    return rc;
}
