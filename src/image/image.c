/* image.c — sniffs a file's format from its first bytes and hands it to its decoder; the
 * limits every decoder shares; the patch budget plan of K3_VISION.md §2.2. */
#include "image.h"
#include "image_in.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int k3_image_check(long w, long h, char *err, size_t errlen) {
    if (w < 1 || h < 1) {
        snprintf(err, errlen, "the image is %ld x %ld pixels (an empty image)", w, h);
        return -1;
    }
    if (w > K3_IMAGE_MAX_SIDE || h > K3_IMAGE_MAX_SIDE) {
        snprintf(err, errlen, "the image is %ld x %ld pixels, over k3's limit of %d a side",
                 w, h, K3_IMAGE_MAX_SIDE);
        return -1;
    }
    if ((unsigned long)w * (unsigned long)h > K3_IMAGE_MAX_PIXELS) {
        snprintf(err, errlen, "the image is %ld x %ld = %lu pixels, over k3's limit of %u",
                 w, h, (unsigned long)w * (unsigned long)h, K3_IMAGE_MAX_PIXELS);
        return -1;
    }
    return 0;
}

int k3_image_alloc(K3Image *im, long w, long h, char *err, size_t errlen) {
    if (k3_image_check(w, h, err, errlen)) return -1;
    im->w = (int)w; im->h = (int)h;
    im->rgba = calloc((size_t)w * (size_t)h, 4);
    if (!im->rgba) {
        snprintf(err, errlen, "out of memory for %ld x %ld RGBA pixels", w, h);
        return -1;
    }
    return 0;
}

void k3_image_free(K3Image *im) {
    free(im->rgba);
    free(im->gray16);
    im->rgba = NULL;
    im->gray16 = NULL;
}

/* Here, not in image_in.c: the chat history frees its messages' images without the tower
 * (chat_hist.c's fuzz target links the decoders only). */
void k3_image_in_free(K3ImageIn *im) {
    free(im->patches);
    free(im->rows);
    free(im->ids);
    memset(im, 0, sizeof *im);
}

/* A format k3 does not decode, by its magic bytes: its name, or NULL. */
static const char *other_format(const uint8_t *b, size_t n) {
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return "WebP";
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4)) {
        const uint8_t *t = b + 8;
        if (!memcmp(t, "avif", 4) || !memcmp(t, "avis", 4)) return "AVIF";
        if (!memcmp(t, "heic", 4) || !memcmp(t, "heix", 4) || !memcmp(t, "mif1", 4) ||
            !memcmp(t, "msf1", 4) || !memcmp(t, "hevc", 4)) return "HEIC/HEIF";
        return "an ISO media file (MP4/HEIF family)";
    }
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP";
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) return "TIFF";
    if (n >= 4 && !memcmp(b, "\0\0\1\0", 4)) return "ICO";
    if (n >= 4 && !memcmp(b, "8BPS", 4)) return "PSD";
    if (n >= 12 && !memcmp(b, "\0\0\0\x0cjP  ", 8)) return "JPEG 2000";
    if (n >= 4 && !memcmp(b, "\xff\x4f\xff\x51", 4)) return "JPEG 2000 codestream";
    if (n >= 4 && !memcmp(b, "\xff\x0a", 2)) return "JPEG XL";
    if (n >= 12 && !memcmp(b, "\0\0\0\x0cJXL ", 8)) return "JPEG XL";
    if (n >= 4 && !memcmp(b, "qoif", 4)) return "QOI";
    if (n >= 5 && !memcmp(b, "%PDF-", 5)) return "PDF";
    if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return "PNM (PBM/PGM/PPM)";
    if (n >= 5 && (!memcmp(b, "<?xml", 5) || !memcmp(b, "<svg", 4))) return "SVG/XML";
    return NULL;
}

int k3_image_decode(const uint8_t *b, size_t n, const char *name, K3Image *im, char *err,
                    size_t errlen) {
    char why[256];
    int rc;
    memset(im, 0, sizeof *im);
    im->trns_key = -1;
    const char *other = other_format(b, n);
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) {
        rc = k3_png_decode(b, n, im, why, sizeof why);
    } else if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) {
        rc = k3_jpeg_decode(b, n, im, why, sizeof why);
    } else if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) {
        rc = k3_gif_decode(b, n, im, why, sizeof why);
    } else if (other) {
        snprintf(err, errlen, "%s: looks like %s, which k3 does not decode (PNG, JPEG and "
                 "GIF are); convert it, e.g. to PNG", name, other);
        return -1;
    } else {
        snprintf(err, errlen, "%s: not an image k3 knows (%s; PNG, JPEG and GIF are decoded, "
                 "by their first bytes)", name, n < 8 ? "too short" : "unknown first bytes");
        return -1;
    }
    if (rc) {
        snprintf(err, errlen, "%s: %s: %s", name, im->format ? im->format : "image", why);
        k3_image_free(im);
        return -1;
    }
    return 0;
}

void k3_image_plan(int w, int h, K3ImagePlan *p) {
    const double lim = 65536.0, side = 512.0, ps = 14.0;
    double s1 = sqrt(lim / (fmax(1.0, (double)(w / 14)) * fmax(1.0, (double)(h / 14))));
    double s2 = side * ps / (double)w, s3 = side * ps / (double)h;
    double scale = fmin(1.0, fmin(s1, fmin(s2, s3)));
    int nw = (int)((double)w * scale), nh = (int)((double)h * scale);
    if (nw < 1) nw = 1;
    if (nh < 1) nh = 1;
    if (nw > 7168) nw = 7168;
    if (nh > 7168) nh = 7168;
    k3_image_plan_fixed(nw, nh, p);
}

void k3_image_plan_fixed(int nw, int nh, K3ImagePlan *p) {
    const int f = 28;
    p->nw = nw; p->nh = nh;
    p->pw = (f - nw % f) % f; p->ph = (f - nh % f) % f;
    p->gw = (nw + p->pw) / 14; p->gh = (nh + p->ph) / 14;
    p->patches = (long)p->gw * p->gh;
    p->rows = (long)(p->gh / 2) * (p->gw / 2);
}
