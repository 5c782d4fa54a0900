/* jpeg_pix.c — JPEG coefficients to RGBA, equal to libjpeg(-turbo)'s defaults as Pillow uses
 * them: the ISLOW integer IDCT (jidctint.c's algorithm: 13-bit constants, 2 extra bits
 * between the passes, its wrapping range-limit table), "fancy" upsampling (jdsample.c:
 * triangular h2v1, h2v2 and h1v2 filters; box replication for other integral ratios and for
 * rows of 2 samples or fewer) and jdcolor.c's 16-bit fixed-point YCbCr->RGB tables. Written
 * from those documented algorithms; every rounding below is theirs. */
#include "jpeg.h"
#include "image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CB 13   /* CONST_BITS */
#define P1 2    /* PASS1_BITS */
#define LSH(a, b) ((int64_t)((uint64_t)(a) << (b)))
#define DESC(x, n) (((x) + ((int64_t)1 << ((n) - 1))) >> (n))

/* libjpeg's post-IDCT range limit: x & 1023 indexes it (so far-out values wrap, as there) */
static uint8_t range_idct(int64_t x) {
    int v = (int)(x & 1023);
    return v < 128 ? (uint8_t)(v + 128) : v < 512 ? 255 : v < 896 ? 0 : (uint8_t)(v - 896);
}

/* The odd and even halves of one 1-D pass; in[] holds the 8 (dequantized) inputs. */
static void idct_1d(const int64_t in[8], int64_t out[8]) {
    int64_t z1, z2, z3, z4, z5, tmp0, tmp1, tmp2, tmp3, tmp10, tmp11, tmp12, tmp13;
    z2 = in[2]; z3 = in[6];
    z1 = (z2 + z3) * 4433;
    tmp2 = z1 + z3 * -15137;
    tmp3 = z1 + z2 * 6270;
    z2 = in[0]; z3 = in[4];
    tmp0 = LSH(z2 + z3, CB); tmp1 = LSH(z2 - z3, CB);
    tmp10 = tmp0 + tmp3; tmp13 = tmp0 - tmp3; tmp11 = tmp1 + tmp2; tmp12 = tmp1 - tmp2;
    tmp0 = in[7]; tmp1 = in[5]; tmp2 = in[3]; tmp3 = in[1];
    z1 = tmp0 + tmp3; z2 = tmp1 + tmp2; z3 = tmp0 + tmp2; z4 = tmp1 + tmp3;
    z5 = (z3 + z4) * 9633;
    tmp0 *= 2446; tmp1 *= 16819; tmp2 *= 25172; tmp3 *= 12299;
    z1 *= -7373; z2 *= -20995; z3 *= -16069; z4 *= -3196;
    z3 += z5; z4 += z5;
    tmp0 += z1 + z3; tmp1 += z2 + z4; tmp2 += z2 + z3; tmp3 += z1 + z4;
    out[0] = tmp10 + tmp3; out[7] = tmp10 - tmp3;
    out[1] = tmp11 + tmp2; out[6] = tmp11 - tmp2;
    out[2] = tmp12 + tmp1; out[5] = tmp12 - tmp1;
    out[3] = tmp13 + tmp0; out[4] = tmp13 - tmp0;
}

static void idct_block(const int16_t *c, const int16_t *q, uint8_t *o, size_t stride) {
    int32_t ws[64];
    int64_t in[8], out[8];
    for (int x = 0; x < 8; x++) {           /* columns */
        for (int k = 0; k < 8; k++) in[k] = (int32_t)c[k * 8 + x] * q[k * 8 + x];
        idct_1d(in, out);
        for (int k = 0; k < 8; k++) ws[k * 8 + x] = (int32_t)DESC(out[k], CB - P1);
    }
    for (int y = 0; y < 8; y++) {           /* rows */
        for (int k = 0; k < 8; k++) in[k] = ws[y * 8 + k];
        idct_1d(in, out);
        for (int k = 0; k < 8; k++) o[y * stride + k] = range_idct(DESC(out[k], CB + P1 + 3));
    }
}

/* One component's samples, full size (W x H), into dst. */
static int upsample(const JFrame *f, const JComp *c, const uint8_t *pl, size_t ps,
                    uint8_t *dst, char *err, size_t el) {
    const int W = f->w, H = f->h, dw = c->dw, dh = c->dh;
    const int fx = f->hmax / c->h, fy = f->vmax / c->v;
    if (f->hmax % c->h || f->vmax % c->v) {
        snprintf(err, el, "SOF: component %d's sampling %dx%d is a fractional part of %dx%d "
                 "(libjpeg refuses it too)", c->id, c->h, c->v, f->hmax, f->vmax);
        return -1;
    }
    const int fancy_h = fx == 2 && fy == 1 && dw > 2;
    const int fancy_v = fy == 2 && (fx == 1 || (fx == 2 && dw > 2));
    uint8_t *row = malloc((size_t)dw * 2 + 2);
    int *sum = malloc(sizeof(int) * ((size_t)dw + 1));
    if (!row || !sum) {
        free(row); free(sum);
        snprintf(err, el, "out of memory upsampling");
        return -1;
    }
    for (int y = 0; y < H; y++) {
        uint8_t *d = dst + (size_t)y * W;
        int iy = y / fy;
        if (!fancy_v) {
            const uint8_t *s = pl + (size_t)iy * ps;
            if (fancy_h) {     /* h2v1_fancy_upsample */
                int v = s[0];
                row[0] = (uint8_t)v; row[1] = (uint8_t)((v * 3 + s[1] + 2) >> 2);
                for (int x = 1; x < dw - 1; x++) {
                    v = s[x] * 3;
                    row[2 * x] = (uint8_t)((v + s[x - 1] + 1) >> 2);
                    row[2 * x + 1] = (uint8_t)((v + s[x + 1] + 2) >> 2);
                }
                v = s[dw - 1];
                row[2 * dw - 2] = (uint8_t)((v * 3 + s[dw - 2] + 1) >> 2);
                row[2 * dw - 1] = (uint8_t)v;
                memcpy(d, row, (size_t)W);
            } else {
                for (int x = 0; x < W; x++) d[x] = s[x / fx];
            }
            continue;
        }
        /* h2v2 / h1v2 fancy: the nearer input row x3 plus the farther one; the rows past
         * the component's edges repeat its first and last real rows */
        int vv = y & 1, far = vv ? iy + 1 : iy - 1;
        if (far < 0) far = 0;
        if (far > dh - 1) far = dh - 1;
        const uint8_t *s0 = pl + (size_t)iy * ps, *s1 = pl + (size_t)far * ps;
        for (int x = 0; x < dw; x++) sum[x] = s0[x] * 3 + s1[x];
        if (fx == 1) {         /* h1v2_fancy_upsample */
            int bias = vv ? 2 : 1;
            for (int x = 0; x < W; x++) d[x] = (uint8_t)((sum[x] + bias) >> 2);
            continue;
        }
        int last, th = sum[0], nx = sum[1];   /* h2v2_fancy_upsample */
        row[0] = (uint8_t)((th * 4 + 8) >> 4);
        row[1] = (uint8_t)((th * 3 + nx + 7) >> 4);
        last = th; th = nx;
        for (int x = 1; x < dw - 1; x++) {
            nx = sum[x + 1];
            row[2 * x] = (uint8_t)((th * 3 + last + 8) >> 4);
            row[2 * x + 1] = (uint8_t)((th * 3 + nx + 7) >> 4);
            last = th; th = nx;
        }
        row[2 * dw - 2] = (uint8_t)((th * 3 + last + 8) >> 4);
        row[2 * dw - 1] = (uint8_t)((th * 4 + 7) >> 4);
        memcpy(d, row, (size_t)W);
    }
    free(row); free(sum);
    return 0;
}

int k3_jpeg_pixels(const JFrame *f, uint8_t *rgba, char *err, size_t el) {
    const size_t np = (size_t)f->w * f->h;
    uint8_t *full[3] = { NULL, NULL, NULL }, *pl = NULL;
    int rc = -1;
    for (int ci = 0; ci < f->nc; ci++) {
        const JComp *c = &f->c[ci];
        const size_t ps = (size_t)c->bw * 8;
        int16_t q[64];
        for (int k = 0; k < 64; k++) q[k] = (int16_t)f->q[c->tq][k];  /* as libjpeg's short */
        free(pl);
        pl = malloc(ps * (size_t)c->bh * 8);
        full[ci] = malloc(np);
        if (!pl || !full[ci]) { snprintf(err, el, "out of memory for the pixels"); goto out; }
        for (int by = 0; by < c->bh; by++)
            for (int bx = 0; bx < c->bw; bx++)
                idct_block(c->coef + ((size_t)by * c->bw + bx) * 64, q,
                           pl + (size_t)by * 8 * ps + (size_t)bx * 8, ps);
        if (upsample(f, c, pl, ps, full[ci], err, el)) goto out;
    }
    if (f->nc == 1) {
        for (size_t i = 0; i < np; i++) {
            uint8_t *o = rgba + 4 * i;
            o[0] = o[1] = o[2] = full[0][i]; o[3] = 255;
        }
    } else if (f->rgb) {
        for (size_t i = 0; i < np; i++) {
            uint8_t *o = rgba + 4 * i;
            o[0] = full[0][i]; o[1] = full[1][i]; o[2] = full[2][i]; o[3] = 255;
        }
    } else {   /* jdcolor.c: SCALEBITS 16, FIX(x) = x * 65536 + 0.5 truncated */
        int cr_r[256], cb_b[256];
        int64_t cr_g[256], cb_g[256];
        for (int i = 0; i < 256; i++) {
            int64_t x = i - 128;
            cr_r[i] = (int)((91881 * x + 32768) >> 16);
            cb_b[i] = (int)((116130 * x + 32768) >> 16);
            cr_g[i] = -46802 * x;
            cb_g[i] = -22554 * x + 32768;
        }
        for (size_t i = 0; i < np; i++) {
            int y = full[0][i], cb = full[1][i], cr = full[2][i];
            int r = y + cr_r[cr], g = y + (int)((cb_g[cb] + cr_g[cr]) >> 16), b = y + cb_b[cb];
            uint8_t *o = rgba + 4 * i;
            o[0] = (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
            o[1] = (uint8_t)(g < 0 ? 0 : g > 255 ? 255 : g);
            o[2] = (uint8_t)(b < 0 ? 0 : b > 255 ? 255 : b);
            o[3] = 255;
        }
    }
    rc = 0;
out:
    free(pl);
    for (int i = 0; i < 3; i++) free(full[i]);
    return rc;
}
