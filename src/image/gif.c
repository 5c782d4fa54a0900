/* gif.c — a GIF's first frame, as Pillow 9 gives it after convert("RGBA"): the frame's LZW
 * indices (interlaced or not) placed at its offset on the logical screen; the rest of the
 * screen is index 0, or the transparency index when the frame has one (the background
 * colour is not used); the local palette, else the global one; an index past the palette
 * is the gray (i, i, i) of Pillow's default palette, and with no palette at all the image
 * is mode L (index = gray). The transparency index has alpha 0. A frame reaching past the
 * screen grows the screen to hold it (Pillow's rule). Later frames are ignored. */
#include "image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const uint8_t *p, *end; char *err; size_t el; } G;

static int fail(G *g, const char *msg) {
    snprintf(g->err, g->el, "%s", msg);
    return -1;
}

/* Skips data sub-blocks (size byte, bytes... , 0). */
static int skip_blocks(G *g) {
    for (;;) {
        if (g->p >= g->end) return fail(g, "the file ends inside a block (truncated)");
        int n = *g->p++;
        if (!n) return 0;
        if (g->end - g->p < n) return fail(g, "the file ends inside a block (truncated)");
        g->p += n;
    }
}

/* LZW (GIF's variable-width flavour) into idx[0..npix); fewer pixels than the frame is an
 * error, codes past them are ignored (Pillow stops at the frame's end too). */
static int lzw(G *g, int mincode, uint8_t *idx, size_t npix) {
    static const int MAXC = 4096;
    uint16_t *prefix = malloc(MAXC * sizeof *prefix);
    uint8_t *suffix = malloc(MAXC), *stack = malloc(MAXC + 1), *first = malloc(MAXC);
    int rc = -1;
    if (!prefix || !suffix || !stack || !first) { fail(g, "out of memory"); goto out; }
    const int clear = 1 << mincode, eoi = clear + 1;
    for (int i = 0; i < clear; i++) {
        suffix[i] = (uint8_t)i; first[i] = (uint8_t)i; prefix[i] = 0;
    }
    int size = mincode + 1, next = eoi + 1, prev = -1, nbits = 0, blk = 0;
    uint32_t acc = 0;
    size_t out = 0;
    for (;;) {
        while (nbits < size) {
            if (!blk) {
                if (g->p >= g->end) { fail(g, "the image data ends early (truncated)"); goto out; }
                blk = *g->p++;
                if (!blk) {
                    if (out >= npix) { rc = 0; goto out; }   /* no end code, but whole */
                    fail(g, "the image data ends before the frame is whole (truncated)");
                    goto out;
                }
            }
            if (g->p >= g->end) { fail(g, "the image data ends early (truncated)"); goto out; }
            acc |= (uint32_t)*g->p++ << nbits;
            nbits += 8; blk--;
        }
        int code = (int)(acc & ((1u << size) - 1));
        acc >>= size; nbits -= size;
        if (code == clear) { size = mincode + 1; next = eoi + 1; prev = -1; continue; }
        if (code == eoi) break;
        int sp = 0, c = code;
        if (prev < 0) {
            if (code >= clear) {
                fail(g, "the LZW data starts with a code not in its table");
                goto out;
            }
        } else if (code > next || (code == next && next >= MAXC)) {
            fail(g, "the LZW data holds a code not in its table (damaged)");
            goto out;
        } else if (code == next) {      /* KwKwK: the previous string plus its first byte */
            stack[sp++] = first[prev];
            c = prev;
        }
        while (c >= clear) { stack[sp++] = suffix[c]; c = prefix[c]; }
        stack[sp++] = (uint8_t)c;
        if (prev >= 0 && next < MAXC) {
            prefix[next] = (uint16_t)prev; suffix[next] = (uint8_t)c; first[next] = first[prev];
            next++;
            if (next == (1 << size) && size < 12) size++;
        }
        while (sp) { if (out < npix) idx[out] = stack[sp - 1]; out++; sp--; }
        prev = code;
    }
    if (out < npix) {
        fail(g, "the image data ends before the frame is whole (truncated)");
        goto out;
    }
    rc = skip_blocks(g);
out:
    free(prefix); free(suffix); free(stack); free(first);
    return rc;
}

int k3_gif_decode(const uint8_t *b, size_t n, K3Image *im, char *err, size_t el) {
    G g = { b + 6, b + n, err, el };
    im->format = "GIF";
    if (n < 13) return fail(&g, "the file ends inside its screen descriptor (truncated)");
    int sw = b[6] | b[7] << 8, sh = b[8] | b[9] << 8, flags = b[10];
    g.p = b + 13;
    uint8_t pal[256][4];
    for (int i = 0; i < 256; i++) {
        pal[i][0] = pal[i][1] = pal[i][2] = (uint8_t)i; pal[i][3] = 255;
    }
    int has_pal = 0, trns = -1;
    if (flags & 0x80) {
        int np = 2 << (flags & 7);
        if (g.end - g.p < 3 * np) return fail(&g, "the global palette is cut short (truncated)");
        for (int i = 0; i < np; i++) memcpy(pal[i], g.p + 3 * i, 3);
        g.p += 3 * np; has_pal = 1;
    }
    for (;;) {
        if (g.p >= g.end) return fail(&g, "the file ends before its first image (truncated)");
        int t = *g.p++;
        if (t == 0x3b) return fail(&g, "the file has no image (trailer before any frame)");
        if (t == 0x21) {
            if (g.p >= g.end) return fail(&g, "the file ends inside an extension (truncated)");
            int label = *g.p++;
            if (label == 0xf9 && g.end - g.p >= 6 && g.p[0] >= 4) {
                trns = g.p[1] & 1 ? g.p[4] : -1;   /* the last control block before counts */
            }
            if (skip_blocks(&g)) return -1;
            continue;
        }
        if (t != 0x2c) {
            snprintf(err, el, "byte 0x%02X at offset %zu is not a GIF block (damaged)", t,
                     (size_t)(g.p - 1 - b));
            return -1;
        }
        break;
    }
    if (g.end - g.p < 9) return fail(&g, "the file ends inside the image descriptor (truncated)");
    int fx = g.p[0] | g.p[1] << 8, fy = g.p[2] | g.p[3] << 8;
    int fw = g.p[4] | g.p[5] << 8, fh = g.p[6] | g.p[7] << 8, ff = g.p[8];
    g.p += 9;
    if (ff & 0x80) {
        int np = 2 << (ff & 7);
        if (g.end - g.p < 3 * np) return fail(&g, "the local palette is cut short (truncated)");
        for (int i = 0; i < 256; i++) { pal[i][0] = pal[i][1] = pal[i][2] = (uint8_t)i; }
        for (int i = 0; i < np; i++) memcpy(pal[i], g.p + 3 * i, 3);
        g.p += 3 * np; has_pal = 1;
    }
    if (trns >= 0) pal[trns][3] = 0;
    if (g.p >= g.end) return fail(&g, "the file ends before the image data (truncated)");
    int mincode = *g.p++;
    if (mincode < 1 || mincode > 8) {
        snprintf(err, el, "LZW minimum code size %d (1..8 are valid)", mincode);
        return -1;
    }
    /* k LZW codes (2 bits or more each) give at most k(k+1)/2 pixels: a bound on the frame
     * before allocating it */
    double codes = (double)(g.end - g.p) * 4.0;
    if ((double)fw * fh > codes * (codes + 1) / 2) {
        snprintf(err, el, "a %d x %d frame cannot come from the %zu bytes left (truncated, or "
                 "a bogus size)", fw, fh, (size_t)(g.end - g.p));
        return -1;
    }
    if (fx + fw > sw) sw = fx + fw;
    if (fy + fh > sh) sh = fy + fh;
    if (k3_image_alloc(im, sw, sh, err, el)) return -1;
    if ((long)fw * fh > (long)K3_IMAGE_MAX_PIXELS) return fail(&g, "the frame is over the limit");
    uint8_t *idx = malloc(fw && fh ? (size_t)fw * fh : 1);
    if (!idx) return fail(&g, "out of memory");
    if (fw && fh && lzw(&g, mincode, idx, (size_t)fw * fh)) { free(idx); return -1; }
    const uint8_t fill = (uint8_t)(trns >= 0 ? trns : 0);
    for (size_t i = 0; i < (size_t)sw * sh; i++) memcpy(im->rgba + 4 * i, pal[fill], 4);
    static const int START[4] = { 0, 4, 2, 1 }, STEP[4] = { 8, 8, 4, 2 };
    int row = 0;
    for (int pass = 0; pass < ((ff & 0x40) ? 4 : 1); pass++) {
        int y0 = ff & 0x40 ? START[pass] : 0, dy = ff & 0x40 ? STEP[pass] : 1;
        for (int y = y0; y < fh; y += dy, row++) {
            for (int x = 0; x < fw; x++)
                memcpy(im->rgba + 4 * ((size_t)(fy + y) * sw + fx + x),
                       pal[idx[(size_t)row * fw + x]], 4);
        }
    }
    free(idx);
    int gray = 1;   /* Pillow opens a palette that is the gray ramp as mode L */
    for (int i = 0; i < 256 && has_pal; i++)
        gray &= pal[i][0] == i && pal[i][1] == i && pal[i][2] == i;
    snprintf(im->mode, sizeof im->mode, "%s", has_pal && !gray ? "P" : "L");
    snprintf(im->detail, sizeof im->detail, "first frame %dx%d at %d,%d%s%s", fw, fh, fx, fy,
             ff & 0x40 ? ", interlaced" : "", trns >= 0 ? ", transparency index" : "");
    im->has_alpha = trns >= 0;
    if (trns >= 0 && !strcmp(im->mode, "L")) im->trns_key = trns;   /* index = gray value */
    return 0;
}
