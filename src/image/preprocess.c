/* preprocess.c — one decoded image to the tower's input (K3_VISION.md §2.3-2.7), as the
 * reference's PIL + NumPy code computes it, bit for bit:
 *  - the resize (only when the plan changes the size) in the image's own PIL mode: P and 1
 *    nearest, RGBA and LA premultiplied bicubic, the rest bicubic (resample.c);
 *  - the transparency fill after the resize: mode RGB is kept as is (a tRNS colour key
 *    ignored), an image with neither an alpha band nor a transparency key becomes its RGB,
 *    anything else is composited in float32 on the 8-pixel chessboard (255 / 180, white top
 *    left): out = trunc(a*c + (1-a)*bg) with a = alpha/255.0f;
 *  - black padding at the bottom and right to the plan's grid, (u/255.0 in double, rounded
 *    to float, -0.5, *2) per channel, and the patches row-major over the grid, each
 *    channel-major then row then column (588 values).
 * Mode I (16-bit gray PNG) is resized on its 16-bit samples in Pillow's 32-bit path and
 * clipped to 0..255 after, as convert("RGB") does. */
#include "image.h"
#include <stdlib.h>
#include <string.h>

int k3_resample_bicubic(const uint8_t *in, int w, int h, uint8_t *out, int nw, int nh, int nc);
void k3_resample_nearest(const uint8_t *in, int w, int h, uint8_t *out, int nw, int nh);
void k3_premultiply(uint8_t *p, size_t npix);
void k3_unpremultiply(uint8_t *p, size_t npix);
int k3_resample_bicubic_i32(const int32_t *in, int w, int h, int32_t *out, int nw, int nh);

/* Mode I: the 16-bit samples resized, clipped to 0..255 into out's gray. -1 out of memory. */
static int resized_i(const K3Image *im, uint8_t *out, int nw, int nh) {
    size_t ni = (size_t)im->w * im->h, n = (size_t)nw * nh;
    int32_t *in = malloc(sizeof *in * ni), *o = malloc(sizeof *o * n);
    int rc = -1;
    if (in && o) {
        for (size_t i = 0; i < ni; i++) in[i] = im->gray16[i];
        rc = k3_resample_bicubic_i32(in, im->w, im->h, o, nw, nh);
        for (size_t i = 0; !rc && i < n; i++)
            out[4 * i] = out[4 * i + 1] = out[4 * i + 2] =
                (uint8_t)(o[i] < 0 ? 0 : o[i] > 255 ? 255 : o[i]);
    }
    free(in);
    free(o);
    return rc;
}

static int is(const K3Image *im, const char *mode) { return !strcmp(im->mode, mode); }

/* The RGBA pixels at nw x nh as Pillow's resize in the image's mode leaves them, alpha as
 * convert("RGBA") would then give it. NULL out of memory. */
static uint8_t *resized(const K3Image *im, int nw, int nh) {
    size_t n = (size_t)nw * nh;
    uint8_t *out = malloc(n * 4);
    if (!out) return NULL;
    if (nw == im->w && nh == im->h) {          /* Pillow returns a copy: no filtering */
        memcpy(out, im->rgba, n * 4);
        return out;
    }
    if (is(im, "P") || is(im, "1")) {          /* Pillow switches these to NEAREST */
        k3_resample_nearest(im->rgba, im->w, im->h, out, nw, nh);
        return out;
    }
    if (is(im, "RGBA") || is(im, "LA")) {      /* through RGBa / La */
        size_t ni = (size_t)im->w * im->h;
        uint8_t *pm = malloc(ni * 4);
        if (!pm) { free(out); return NULL; }
        memcpy(pm, im->rgba, ni * 4);
        k3_premultiply(pm, ni);
        int rc = k3_resample_bicubic(pm, im->w, im->h, out, nw, nh, 4);
        free(pm);
        if (rc) { free(out); return NULL; }
        k3_unpremultiply(out, n);
        return out;
    }
    /* RGB, L, I: the colour alone (I on its 16-bit samples); a gray transparency key is
     * matched again afterwards, on the resized values, as convert("RGBA") matches it (the
     * key's low byte) */
    int rc = is(im, "I") && im->gray16 ? resized_i(im, out, nw, nh)
                                        : k3_resample_bicubic(im->rgba, im->w, im->h, out, nw,
                                                              nh, 3);
    if (rc) { free(out); return NULL; }
    for (size_t i = 0; i < n; i++)
        out[4 * i + 3] = im->trns_key >= 0 && out[4 * i] == im->trns_key ? 0 : 255;
    return out;
}

uint8_t *k3_image_rgb(const K3Image *im, int nw, int nh) {
    uint8_t *px = resized(im, nw, nh);
    if (!px) return NULL;
    size_t n = (size_t)nw * nh;
    uint8_t *rgb = malloc(n * 3);
    if (!rgb) { free(px); return NULL; }
    int fill = !is(im, "RGB") && im->has_alpha;
    for (int y = 0; y < nh; y++)
        for (int x = 0; x < nw; x++) {
            const uint8_t *p = px + ((size_t)y * nw + x) * 4;
            uint8_t *o = rgb + ((size_t)y * nw + x) * 3;
            if (!fill) { memcpy(o, p, 3); continue; }
            float a = (float)p[3] / 255.0f, bg = ((y / 8 + x / 8) % 2) ? 180.0f : 255.0f;
            for (int c = 0; c < 3; c++) {
                float v = a * (float)p[c] + (1.0f - a) * bg;
                o[c] = (uint8_t)v;   /* numpy's astype(uint8): truncation, v in [0, 255] */
            }
        }
    free(px);
    return rgb;
}

float *k3_image_patches(const uint8_t *rgb, const K3ImagePlan *p) {
    float norm[256];
    for (int u = 0; u < 256; u++) {
        float f = (float)((double)u / 255.0);   /* float64 division, then float32 */
        norm[u] = (f - 0.5f) * 2.0f;
    }
    float *pv = malloc(sizeof *pv * (size_t)p->patches * K3_PATCH_DIM);
    if (!pv) return NULL;
    for (int r = 0; r < p->gh; r++)
        for (int c = 0; c < p->gw; c++) {
            float *o = pv + ((size_t)r * p->gw + c) * K3_PATCH_DIM;
            for (int ch = 0; ch < 3; ch++)
                for (int dy = 0; dy < 14; dy++)
                    for (int dx = 0; dx < 14; dx++) {
                        int y = 14 * r + dy, x = 14 * c + dx;
                        int u = y < p->nh && x < p->nw ? rgb[((size_t)y * p->nw + x) * 3 + ch]
                                                       : 0;   /* the black padding */
                        o[ch * 196 + dy * 14 + dx] = norm[u];
                    }
        }
    return pv;
}
