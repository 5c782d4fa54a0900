/* png.c — PNG (ISO/IEC 15948) to RGBA as Pillow 9 gives it after convert("RGBA"): every
 * colour type and bit depth, Adam7, the five filters, PLTE + tRNS, every chunk's CRC.
 * Pillow's sample rules, kept here on purpose: 16-bit RGB/RGBA/LA keep the high byte; 16-bit
 * gray opens as mode I and converts with a clip to 0..255 (not a shift); 1/2/4-bit gray scale
 * up (x255, x85, x17); a gray or RGB tRNS makes alpha 0 where that converted sample equals
 * the chunk's raw value's low byte (so a 16-bit or a 2/4-bit tRNS rarely matches, as in
 * Pillow). */
#include "image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t crc32_png(const uint8_t *p, size_t n) {
    static uint32_t t[256];
    static int ready;
    if (!ready) {   /* idempotent: a race writes the same values */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        ready = 1;
    }
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = t[(c ^ p[i]) & 255] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

typedef struct {
    uint32_t w, h;
    int depth, ctype, interlace, chans, bpp;    /* bpp: bytes a pixel for the filters */
    uint8_t pal[256][4]; int npal, ntrns;
    int trns[3], has_trns;                      /* gray/RGB tRNS, raw values */
} Png;

static int paeth(int a, int b, int c) {
    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/* Unfilters rows of rb bytes in place (each row led by its filter byte). */
static int unfilter(uint8_t *d, uint32_t rows, size_t rb, int bpp, char *err, size_t el) {
    const uint8_t *prev = NULL;
    for (uint32_t y = 0; y < rows; y++) {
        uint8_t *r = d + (size_t)y * (rb + 1);
        int f = r[0];
        r++;
        for (size_t i = 0; i < rb; i++) {
            int a = i >= (size_t)bpp ? r[i - bpp] : 0, b = prev ? prev[i] : 0;
            int c = prev && i >= (size_t)bpp ? prev[i - bpp] : 0;
            switch (f) {
            case 0: break;
            case 1: r[i] = (uint8_t)(r[i] + a); break;
            case 2: r[i] = (uint8_t)(r[i] + b); break;
            case 3: r[i] = (uint8_t)(r[i] + ((a + b) >> 1)); break;
            case 4: r[i] = (uint8_t)(r[i] + paeth(a, b, c)); break;
            default:
                snprintf(err, el, "IDAT: row %u has filter type %d (0..4 are defined)", y, f);
                return -1;
            }
        }
        prev = r;
    }
    return 0;
}

static int sample(const uint8_t *r, uint32_t x, int k, const Png *p) {
    if (p->depth == 16) {
        const uint8_t *q = r + ((size_t)x * p->chans + k) * 2;
        return q[0] << 8 | q[1];
    }
    if (p->depth == 8) return r[(size_t)x * p->chans + k];
    size_t bit = (size_t)x * p->depth;
    return (r[bit >> 3] >> (8 - p->depth - (bit & 7))) & ((1 << p->depth) - 1);
}

/* Pillow's 8-bit value of a gray/RGB/alpha sample */
static int to8(int v, const Png *p) {
    switch (p->depth) {
    case 1: return v ? 255 : 0;
    case 2: return v * 85;
    case 4: return v * 17;
    case 16: return p->ctype == 0 ? (v > 255 ? 255 : v) : v >> 8;
    default: return v;
    }
}

static int put_row(const Png *p, const uint8_t *r, uint32_t n, uint8_t *out, size_t step,
                   char *err, size_t el) {
    for (uint32_t x = 0; x < n; x++, out += step) {
        int v[4] = { 0, 0, 0, 255 };
        if (p->ctype == 3) {
            int i = sample(r, x, 0, p);
            if (i >= p->npal) {
                snprintf(err, el, "IDAT: palette index %d past PLTE's %d entries", i, p->npal);
                return -1;
            }
            memcpy(out, p->pal[i], 4);
            continue;
        }
        int raw[4];
        for (int k = 0; k < p->chans; k++) raw[k] = sample(r, x, k, p);
        int c = p->ctype & 2 ? 3 : 1;
        for (int k = 0; k < c; k++) v[k] = to8(raw[k], p);
        if (c == 1) v[1] = v[2] = v[0];
        if (p->ctype & 4) v[3] = to8(raw[c], p);
        else if (p->has_trns && v[0] == (p->trns[0] & 255) &&
                 v[1] == (p->trns[c == 3 ? 1 : 0] & 255) &&
                 v[2] == (p->trns[c == 3 ? 2 : 0] & 255)) v[3] = 0;   /* Pillow: low bytes */
        for (int k = 0; k < 4; k++) out[k] = (uint8_t)v[k];
    }
    return 0;
}

static int header(Png *p, const uint8_t *d, uint32_t len, char *err, size_t el) {
    if (len != 13) { snprintf(err, el, "IHDR: length %u (13 expected)", len); return -1; }
    p->w = be32(d); p->h = be32(d + 4);
    p->depth = d[8]; p->ctype = d[9]; p->interlace = d[12];
    static const int CH[7] = { 1, 0, 3, 1, 2, 0, 4 };
    int ok = p->ctype <= 6 && CH[p->ctype];
    if (ok) switch (p->ctype) {
        case 0: ok = p->depth == 1 || p->depth == 2 || p->depth == 4 || p->depth == 8 ||
                     p->depth == 16; break;
        case 3: ok = p->depth == 1 || p->depth == 2 || p->depth == 4 || p->depth == 8; break;
        default: ok = p->depth == 8 || p->depth == 16;
    }
    if (!ok) {
        snprintf(err, el, "IHDR: colour type %d with bit depth %d is not a PNG combination",
                 p->ctype, p->depth);
        return -1;
    }
    if (d[10] || d[11] || p->interlace > 1) {
        snprintf(err, el, "IHDR: compression %d, filter %d, interlace %d (0, 0, 0 or 1 "
                 "are defined)", d[10], d[11], p->interlace);
        return -1;
    }
    p->chans = CH[p->ctype];
    p->bpp = (p->chans * p->depth + 7) / 8;
    return 0;
}

static void set_mode(const Png *p, K3Image *im) {
    static const char *const M[7] = { "L", "", "RGB", "P", "LA", "", "RGBA" };
    const char *m = M[p->ctype];
    if (p->ctype == 0 && p->depth == 1) m = "1";
    if (p->ctype == 0 && p->depth == 16) m = "I";
    if (p->ctype == 4 && p->depth == 16) m = "RGBA";   /* Pillow opens LA;16B as RGBA */
    snprintf(im->mode, sizeof im->mode, "%s", m);
    static const char *const T[7] = { "gray", "", "RGB", "palette", "gray+alpha", "",
                                      "RGBA" };
    snprintf(im->detail, sizeof im->detail, "%d-bit %s%s%s", p->depth, T[p->ctype],
             p->has_trns || p->ntrns ? " + tRNS" : "", p->interlace ? ", interlaced" : "");
    im->has_alpha = (p->ctype & 4) || p->has_trns || p->ntrns;
    if (p->ctype == 0 && p->has_trns) im->trns_key = p->trns[0] & 255;
}

static int pixels(Png *p, const uint8_t *z, size_t zn, K3Image *im, char *err, size_t el) {
    static const int X0[7] = { 0, 4, 0, 2, 0, 1, 0 }, Y0[7] = { 0, 0, 4, 0, 2, 0, 1 };
    static const int DX[7] = { 8, 8, 4, 4, 2, 2, 1 }, DY[7] = { 8, 8, 8, 4, 4, 2, 2 };
    int np = p->interlace ? 7 : 1;
    size_t total = 0;
    for (int k = 0; k < np; k++) {
        uint32_t pw = np == 1 ? p->w : (p->w + DX[k] - 1 - X0[k]) / DX[k];
        uint32_t ph = np == 1 ? p->h : (p->h + DY[k] - 1 - Y0[k]) / DY[k];
        if (pw && ph) total += (size_t)ph * (((size_t)pw * p->chans * p->depth + 7) / 8 + 1);
    }
    if (total / 1032 > zn) {   /* deflate expands at most 1032:1: bound it before allocating */
        snprintf(err, el, "IDAT: %zu bytes of zlib data cannot hold the %zu bytes a %u x %u "
                 "image needs (truncated, or a bogus size in IHDR)", zn, total, p->w, p->h);
        return -1;
    }
    if (k3_image_alloc(im, p->w, p->h, err, el)) return -1;
    if (p->ctype == 0 && p->depth == 16 &&
        !(im->gray16 = malloc(sizeof *im->gray16 * (size_t)p->w * p->h))) {
        snprintf(err, el, "out of memory for %u x %u 16-bit samples", p->w, p->h);
        return -1;
    }
    uint8_t *raw = malloc(total ? total : 1);
    if (!raw) { snprintf(err, el, "out of memory for %zu bytes of image data", total); return -1; }
    char why[160];
    long got = k3_zlib_inflate(z, zn, raw, total, why, sizeof why);
    if (got < 0 || (size_t)got != total) {
        if (got >= 0) snprintf(why, sizeof why, "zlib data holds %ld bytes, the image needs %zu "
                               "(truncated)", got, total);
        snprintf(err, el, "IDAT: %s", why);
        free(raw);
        return -1;
    }
    const uint8_t *d = raw;
    int rc = 0;
    for (int k = 0; k < np && !rc; k++) {
        uint32_t pw = np == 1 ? p->w : (p->w + DX[k] - 1 - X0[k]) / DX[k];
        uint32_t ph = np == 1 ? p->h : (p->h + DY[k] - 1 - Y0[k]) / DY[k];
        if (!pw || !ph) continue;
        size_t rb = ((size_t)pw * p->chans * p->depth + 7) / 8;
        rc = unfilter((uint8_t *)d, ph, rb, p->bpp, err, el);
        int x0 = np == 1 ? 0 : X0[k], y0 = np == 1 ? 0 : Y0[k];
        int dx = np == 1 ? 1 : DX[k], dy = np == 1 ? 1 : DY[k];
        for (uint32_t y = 0; y < ph && !rc; y++) {
            uint8_t *o = im->rgba + (((size_t)(y0 + y * dy)) * p->w + x0) * 4;
            rc = put_row(p, d + y * (rb + 1) + 1, pw, o, (size_t)dx * 4, err, el);
            for (uint32_t x = 0; im->gray16 && x < pw; x++)
                im->gray16[(size_t)(y0 + y * dy) * p->w + x0 + x * dx] =
                    (uint16_t)sample(d + y * (rb + 1) + 1, x, 0, p);
        }
        d += ph * (rb + 1);
    }
    free(raw);
    return rc;
}

int k3_png_decode(const uint8_t *b, size_t n, K3Image *im, char *err, size_t el) {
    Png p;
    memset(&p, 0, sizeof p);
    size_t pos = 8, zn = 0, zcap = 0;
    uint8_t *z = NULL;
    int seen_hdr = 0, seen_end = 0, idat_done = 0, rc = -1;
    im->format = "PNG";
    while (!seen_end) {
        if (n - pos < 12) {
            snprintf(err, el, "the file ends %s (truncated)", seen_hdr ? "before IEND" :
                     "before IHDR");
            goto out;
        }
        uint32_t len = be32(b + pos);
        char t[5];
        memcpy(t, b + pos + 4, 4); t[4] = 0;
        for (int i = 0; i < 4; i++)
            if (!((t[i] >= 'A' && t[i] <= 'Z') || (t[i] >= 'a' && t[i] <= 'z'))) {
                snprintf(err, el, "a chunk at byte %zu has a type that is not 4 letters "
                         "(damaged)", pos);
                goto out;
            }
        if (len > 0x7fffffffu || n - pos - 12 < len) {
            snprintf(err, el, "%s: chunk length %u runs past the end of the file (truncated)",
                     t, len);
            goto out;
        }
        const uint8_t *d = b + pos + 8;
        if (crc32_png(b + pos + 4, len + 4) != be32(d + len)) {
            snprintf(err, el, "%s: CRC does not match (damaged chunk at byte %zu)", t, pos);
            goto out;
        }
        pos += 12 + (size_t)len;
        if (!seen_hdr && strcmp(t, "IHDR")) {
            snprintf(err, el, "%s: the first chunk must be IHDR", t);
            goto out;
        }
        if (zn && strcmp(t, "IDAT")) idat_done = 1;
        if (!strcmp(t, "IHDR")) {
            if (seen_hdr) { snprintf(err, el, "IHDR: a second IHDR"); goto out; }
            if (header(&p, d, len, err, el)) goto out;
            seen_hdr = 1;
        } else if (!strcmp(t, "PLTE")) {
            if (len % 3 || len == 0 || len / 3 > 256 || zn) {
                snprintf(err, el, "PLTE: length %u (a multiple of 3, 3..768, before IDAT)",
                         len);
                goto out;
            }
            p.npal = (int)(len / 3);
            for (int i = 0; i < p.npal; i++) {
                memcpy(p.pal[i], d + 3 * i, 3); p.pal[i][3] = 255;
            }
        } else if (!strcmp(t, "tRNS")) {
            if (p.ctype == 3) {
                if (len > (uint32_t)p.npal) {
                    snprintf(err, el, "tRNS: %u entries for a %d-entry PLTE", len, p.npal);
                    goto out;
                }
                for (uint32_t i = 0; i < len; i++) p.pal[i][3] = d[i];
                p.ntrns = (int)len;
            } else if (p.ctype == 0 || p.ctype == 2) {
                if (len != (p.ctype ? 6u : 2u)) {
                    snprintf(err, el, "tRNS: length %u (%d for this colour type)", len,
                             p.ctype ? 6 : 2);
                    goto out;
                }
                for (uint32_t i = 0; i < len / 2; i++) p.trns[i] = d[2 * i] << 8 | d[2 * i + 1];
                p.has_trns = 1;
            }   /* an alpha type's tRNS is not allowed; ignored as Pillow does */
        } else if (!strcmp(t, "IDAT")) {
            if (idat_done) { snprintf(err, el, "IDAT: IDAT chunks are not consecutive"); goto out; }
            if (len && zn + len > zcap) {
                zcap = (zn + len) * 2;
                uint8_t *nz = realloc(z, zcap);
                if (!nz) { snprintf(err, el, "IDAT: out of memory"); goto out; }
                z = nz;
            }
            if (len) memcpy(z + zn, d, len);
            zn += len;
        } else if (!strcmp(t, "IEND")) {
            seen_end = 1;
        } else if (t[0] >= 'A' && t[0] <= 'Z') {
            snprintf(err, el, "%s: an unknown critical chunk (k3 cannot decode this PNG)", t);
            goto out;
        }
    }
    if (p.ctype == 3 && !p.npal) {
        snprintf(err, el, "PLTE: missing for a palette image");
        goto out;
    }
    if (!zn) { snprintf(err, el, "IDAT: no image data"); goto out; }
    if (k3_image_check(p.w, p.h, err, el)) goto out;
    set_mode(&p, im);
    rc = pixels(&p, z, zn, im, err, el);
out:
    free(z);
    return rc;
}
