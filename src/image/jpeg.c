/* jpeg.c — JPEG (ITU T.81) markers and Huffman entropy decoding: baseline, extended
 * (8-bit) and progressive scans, restart intervals, JFIF/Adobe colour rules as libjpeg
 * applies them. Every scan's coefficients are kept whole (progressive needs them; baseline
 * uses the same path), then jpeg_pix.c makes the pixels. CMYK/YCCK, arithmetic coding,
 * lossless and 12-bit files are refused by name. Entropy data that ends early (a marker or
 * the file's end where bits are needed) is an error, not libjpeg's gray fill. */
#include "jpeg.h"
#include "image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t ZZ[64] = { 0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12,
    19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
    29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55,
    62, 63 };

typedef struct { int ok; uint8_t val[256]; int maxcode[18], valptr[17], mincode[17]; } JHuff;

typedef struct {
    const uint8_t *b, *p, *end;
    uint32_t acc; int n, fake, marker, bad;   /* bit buffer; fake: zero bits past the data */
    JFrame f;
    JHuff dc[4], ac[4];
    int progressive, restart, eobrun, have_frame, adobe, adobe_t, jfif, qset[4];
    char *err; size_t el;
} J;

static int fail(J *j, const char *msg) {
    snprintf(j->err, j->el, "%s", msg);
    return -1;
}

/* Appends one byte of entropy data (0xFF00 unstuffed) to the bit buffer; past the data (a
 * marker or the end) a zero byte counted in fake, as libjpeg pads, so it can be detected. */
static void fill(J *j) {
    uint32_t byte = 0;
    if (!j->marker && j->p < j->end) {
        if (*j->p != 0xff) byte = *j->p++;
        else if (j->p + 1 < j->end && j->p[1] == 0) { byte = 0xff; j->p += 2; }
        else j->marker = 1;
    } else {
        j->marker = 1;
    }
    if (j->marker) j->fake += 8;
    j->acc = j->acc << 8 | byte;
    j->n += 8;
}

static uint32_t bits(J *j, int k) {
    if (!k) return 0;
    while (j->n < k) fill(j);
    j->n -= k;
    if (j->n < j->fake) j->bad = 1;      /* read past the entropy data */
    return (j->acc >> j->n) & ((1u << k) - 1);
}

static int huff(J *j, const JHuff *h) {
    int code = (int)bits(j, 1), l = 1;
    while (code > h->maxcode[l]) {
        if (++l > 16) { j->bad = 2; return 0; }
        code = code << 1 | (int)bits(j, 1);
    }
    return h->val[h->valptr[l] + code - h->mincode[l]];
}

static int extend(uint32_t v, int s) {
    return s == 0 ? 0 : v < (1u << (s - 1)) ? (int)v - (1 << s) + 1 : (int)v;
}

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static int dht(J *j, const uint8_t *d, size_t n) {
    while (n) {
        if (n < 17) return fail(j, "DHT: a table is cut short");
        int tc = d[0] >> 4, th = d[0] & 15, total = 0;
        if (tc > 1 || th > 3)
            return fail(j, "DHT: table class/id out of range (class 0..1, id 0..3)");
        JHuff *h = tc ? &j->ac[th] : &j->dc[th];
        for (int l = 1; l <= 16; l++) total += d[l];
        if (total > 256 || n < 17 + (size_t)total) return fail(j, "DHT: more codes than bytes");
        memcpy(h->val, d + 17, (size_t)total);
        int code = 0, k = 0;
        for (int l = 1; l <= 16; l++) {
            h->valptr[l] = k; h->mincode[l] = code;
            code += d[l]; k += d[l];
            if (code > (1 << l)) return fail(j, "DHT: the code lengths overflow their space");
            h->maxcode[l] = d[l] ? code - 1 : -1;
            code <<= 1;
        }
        h->maxcode[17] = 0x7fffffff;
        h->ok = 1;
        d += 17 + total; n -= 17 + (size_t)total;
    }
    return 0;
}

static int dqt(J *j, const uint8_t *d, size_t n) {
    while (n) {
        int pq = d[0] >> 4, tq = d[0] & 15;
        if (pq > 1 || tq > 3) return fail(j, "DQT: precision/id out of range (0..1, 0..3)");
        if (n < 1 + 64 * (size_t)(pq + 1)) return fail(j, "DQT: a table is cut short");
        for (int k = 0; k < 64; k++)
            j->f.q[tq][ZZ[k]] = pq ? be16(d + 1 + 2 * k) : d[1 + k];
        j->qset[tq] = 1;
        d += 1 + 64 * (pq + 1); n -= 1 + 64 * (size_t)(pq + 1);
    }
    return 0;
}

static int sof(J *j, int type, const uint8_t *d, size_t n, K3Image *im) {
    if (j->have_frame) return fail(j, "SOF: a second frame (k3 decodes one)");
    if (n < 6) return fail(j, "SOF: segment too short");
    if (d[0] != 8) {
        snprintf(j->err, j->el, "SOF%d: %d-bit samples (k3, like Pillow's libjpeg, decodes "
                 "8-bit JPEG)", type, d[0]);
        return -1;
    }
    JFrame *f = &j->f;
    f->h = be16(d + 1); f->w = be16(d + 3); f->nc = d[5];
    if (f->h == 0) return fail(j, "SOF: height 0 (a DNL marker's height is not supported)");
    if (f->nc == 4) return fail(j, "SOF: 4 components: a CMYK or YCCK JPEG, which k3 refuses "
                                "(convert it to RGB)");
    if (f->nc != 1 && f->nc != 3) {
        snprintf(j->err, j->el, "SOF: %d components (1 gray or 3 colour are decoded)", f->nc);
        return -1;
    }
    if (n < 6 + 3 * (size_t)f->nc) return fail(j, "SOF: segment too short for its components");
    f->hmax = f->vmax = 1;
    for (int i = 0; i < f->nc; i++) {
        JComp *c = &f->c[i];
        c->id = d[6 + 3 * i]; c->h = d[7 + 3 * i] >> 4; c->v = d[7 + 3 * i] & 15;
        c->tq = d[8 + 3 * i];
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->tq > 3)
            return fail(j, "SOF: a component's sampling factor (1..4) or table (0..3) is bad");
        if (c->h > f->hmax) f->hmax = c->h;
        if (c->v > f->vmax) f->vmax = c->v;
    }
    if (k3_image_check(f->w, f->h, j->err, j->el)) return -1;
    /* every block costs at least one bit (its DC code): a bound before allocating them */
    double blocks = 0;
    for (int i = 0; i < f->nc; i++) {
        const JComp *c = &f->c[i];
        blocks += (double)((f->w * c->h + f->hmax * 8 - 1) / (f->hmax * 8)) *
                  (double)((f->h * c->v + f->vmax * 8 - 1) / (f->vmax * 8));
    }
    if (blocks > 8.0 * (double)(j->end - d)) {
        snprintf(j->err, j->el, "SOF: a %d x %d image needs %.0f blocks, more than the %zu "
                 "bytes left can hold (truncated, or a bogus size)", f->w, f->h, blocks,
                 (size_t)(j->end - d));
        return -1;
    }
    if (k3_image_alloc(im, f->w, f->h, j->err, j->el)) return -1;
    int mx = (f->w + 8 * f->hmax - 1) / (8 * f->hmax);
    int my = (f->h + 8 * f->vmax - 1) / (8 * f->vmax);
    for (int i = 0; i < f->nc; i++) {
        JComp *c = &f->c[i];
        c->bw = mx * c->h; c->bh = my * c->v;
        c->dw = (f->w * c->h + f->hmax - 1) / f->hmax;
        c->dh = (f->h * c->v + f->vmax - 1) / f->vmax;
        c->coef = calloc((size_t)c->bw * c->bh, 64 * sizeof(int16_t));
        if (!c->coef) return fail(j, "out of memory for the coefficients");
    }
    j->progressive = type == 2;
    j->have_frame = 1;
    return 0;
}

/* One block of the scan (ss..se, ah, al) for component c. */
static void block(J *j, JComp *c, int16_t *b, int ss, int se, int ah, int al) {
    if (!j->progressive) {
        int t = huff(j, &j->dc[c->td]);
        if (t > 11) { j->bad = 2; return; }
        c->pred = (int)((unsigned)c->pred + (unsigned)extend(bits(j, t), t));   /* wraps */
        b[0] = (int16_t)c->pred;
        for (int k = 1; k < 64; k++) {
            int rs = huff(j, &j->ac[c->ta]), r = rs >> 4, s = rs & 15;
            if (s) {
                k += r;
                if (k > 63) { j->bad = 2; return; }
                b[ZZ[k]] = (int16_t)extend(bits(j, s), s);
            } else if (r == 15) {
                k += 15;
            } else {
                break;
            }
        }
        return;
    }
    if (ss == 0) {                           /* DC, first or refinement */
        if (ah == 0) {
            int t = huff(j, &j->dc[c->td]);
            if (t > 11) { j->bad = 2; return; }
            c->pred = (int)((unsigned)c->pred + (unsigned)extend(bits(j, t), t));
            b[0] = (int16_t)((unsigned)c->pred << al);
        } else if (bits(j, 1)) {
            b[0] = (int16_t)(b[0] | (1 << al));
        }
        return;
    }
    if (ah == 0) {                           /* AC first */
        if (j->eobrun) { j->eobrun--; return; }
        for (int k = ss; k <= se; k++) {
            int rs = huff(j, &j->ac[c->ta]), r = rs >> 4, s = rs & 15;
            if (s) {
                k += r;
                if (k > se) { j->bad = 2; return; }
                b[ZZ[k]] = (int16_t)(extend(bits(j, s), s) * (1 << al));
            } else if (r < 15) {
                j->eobrun = (1 << r) - 1 + (int)bits(j, r);
                return;
            } else {
                k += 15;
            }
        }
        return;
    }
    const int p1 = 1 << al, m1 = -1 * (1 << al);   /* AC refinement (T.81 G.1.2.3) */
    int k = ss;
    if (!j->eobrun) {
        for (; k <= se; ) {
            int rs = huff(j, &j->ac[c->ta]), r = rs >> 4, s = rs & 15, v = 0;
            if (s == 0) {
                if (r < 15) { j->eobrun = (1 << r) + (int)bits(j, r); break; }
            } else {
                if (s != 1) { j->bad = 2; return; }
                v = bits(j, 1) ? p1 : m1;
            }
            while (k <= se) {
                int16_t *q = &b[ZZ[k++]];
                if (*q) {
                    if (bits(j, 1) && !(*q & p1)) *q = (int16_t)(*q + (*q >= 0 ? p1 : m1));
                } else {
                    if (r == 0) { *q = (int16_t)v; break; }
                    r--;
                }
            }
            if (j->bad) return;
        }
    }
    if (j->eobrun) {                         /* this block is in an end-of-band run */
        for (; k <= se; k++) {
            int16_t *q = &b[ZZ[k]];
            if (*q && bits(j, 1) && !(*q & p1)) *q = (int16_t)(*q + (*q >= 0 ? p1 : m1));
        }
        j->eobrun--;
    }
}

/* A restart marker or the scan's end: drop the bits left of the last byte. */
static void byte_align(J *j) { j->n = 0; j->fake = 0; j->marker = 0; j->acc = 0; }

static int sos(J *j, const uint8_t *d, size_t n) {
    if (!j->have_frame) return fail(j, "SOS: a scan before the frame header (SOF)");
    int ns = n ? d[0] : 0;
    if (ns < 1 || ns > j->f.nc || n < 4 + 2 * (size_t)ns)
        return fail(j, "SOS: bad component count or segment length");
    JComp *cs[4];
    for (int i = 0; i < ns; i++) {
        cs[i] = NULL;
        for (int k = 0; k < j->f.nc; k++) if (j->f.c[k].id == d[1 + 2 * i]) cs[i] = &j->f.c[k];
        if (!cs[i]) return fail(j, "SOS: a component that is not in the frame");
        cs[i]->td = d[2 + 2 * i] >> 4; cs[i]->ta = d[2 + 2 * i] & 15;
        if (cs[i]->td > 3 || cs[i]->ta > 3) return fail(j, "SOS: a Huffman table id over 3");
        cs[i]->pred = 0;
    }
    int ss = d[1 + 2 * ns], se = d[2 + 2 * ns], ah = d[3 + 2 * ns] >> 4, al = d[3 + 2 * ns] & 15;
    if (j->progressive) {
        if (ss > se || se > 63 || (ss == 0 && se != 0) || (ss > 0 && ns != 1) || ah > 13 ||
            al > 13)
            return fail(j, "SOS: a progressive scan's spectral band or bit positions are bad");
    } else if (ss != 0 || se != 63 || ah || al) {
        return fail(j, "SOS: a baseline scan must cover coefficients 0..63");
    }
    for (int i = 0; i < ns; i++) {
        int need_dc = !j->progressive || ss == 0, need_ac = !j->progressive || ss > 0;
        if ((need_dc && !ah && !j->dc[cs[i]->td].ok) || (need_ac && !j->ac[cs[i]->ta].ok))
            return fail(j, "SOS: a scan uses a Huffman table no DHT defined");
        if (!j->qset[cs[i]->tq]) return fail(j, "SOS: a component's quantization table is "
                                             "not defined (DQT)");
    }
    const uint8_t *p = d + n;
    j->p = p; byte_align(j); j->eobrun = 0;
    long mx, my;
    if (ns == 1) {   /* non-interleaved: the component's own blocks, no MCU padding */
        mx = (cs[0]->dw + 7) / 8; my = (cs[0]->dh + 7) / 8;
    } else {
        mx = (j->f.w + 8 * j->f.hmax - 1) / (8 * j->f.hmax);
        my = (j->f.h + 8 * j->f.vmax - 1) / (8 * j->f.vmax);
    }
    long total = mx * my, left = j->restart;
    int next_rst = 0;
    for (long m = 0; m < total; m++) {
        if (j->restart && left == 0) {
            byte_align(j);
            while (j->p + 1 < j->end && j->p[0] == 0xff && j->p[1] == 0xff) j->p++;
            if (j->p + 1 >= j->end || j->p[0] != 0xff || j->p[1] != 0xd0 + next_rst) {
                snprintf(j->err, j->el, "SOS: restart marker RST%d missing after %ld MCUs "
                         "(damaged or truncated)", next_rst, m);
                return -1;
            }
            j->p += 2; next_rst = (next_rst + 1) & 7; left = j->restart;
            for (int i = 0; i < ns; i++) cs[i]->pred = 0;
            j->eobrun = 0;
        }
        left--;
        long bx = m % mx, by = m / mx;
        for (int i = 0; i < ns; i++) {
            JComp *c = cs[i];
            int hh = ns == 1 ? 1 : c->h, vv = ns == 1 ? 1 : c->v;
            for (int v = 0; v < vv; v++)
                for (int h = 0; h < hh; h++) {
                    long x = bx * hh + h, y = by * vv + v;
                    block(j, c, c->coef + ((size_t)y * c->bw + x) * 64, ss, se, ah, al);
                }
        }
        if (j->bad) {
            snprintf(j->err, j->el, j->bad == 1 ? "the entropy-coded data ends early at MCU "
                     "%ld of %ld (truncated or damaged)" : "the entropy-coded data is "
                     "damaged (an invalid Huffman code at MCU %ld of %ld)", m, total);
            return -1;
        }
    }
    byte_align(j);
    return 0;
}

int k3_jpeg_decode(const uint8_t *b, size_t n, K3Image *im, char *err, size_t el) {
    J *j = calloc(1, sizeof *j);
    if (!j) { snprintf(err, el, "out of memory"); return -1; }
    j->b = b; j->end = b + n; j->err = err; j->el = el;
    im->format = "JPEG";
    const uint8_t *p = b + 2;
    int rc = -1, scans = 0;
    for (;;) {
        while (p < j->end && *p != 0xff) p++;            /* libjpeg skips stray bytes too */
        while (p + 1 < j->end && p[1] == 0xff) p++;
        if (p + 1 >= j->end) {
            fail(j, scans ? "the file ends before EOI (truncated)" : "the file ends before "
                 "its first scan (truncated)");
            goto out;
        }
        int m = p[1];
        p += 2;
        if (m == 0xd9) break;                             /* EOI */
        if (m >= 0xd0 && m <= 0xd7) continue;             /* a stray RST: no payload */
        if (j->end - p < 2 || be16(p) < 2 || (size_t)(j->end - p) < be16(p)) {
            snprintf(err, el, "marker 0x%02X: its segment runs past the end of the file "
                     "(truncated)", m);
            goto out;
        }
        const uint8_t *d = p + 2;
        size_t len = be16(p) - 2u;
        p += 2 + len;
        int r = 0;
        if (m == 0xc0 || m == 0xc1 || m == 0xc2) r = sof(j, m - 0xc0, d, len, im);
        else if (m == 0xc4) r = dht(j, d, len);
        else if (m == 0xdb) r = dqt(j, d, len);
        else if (m == 0xdd) j->restart = len >= 2 ? be16(d) : 0;
        else if (m == 0xda) {
            if (scans == 512) {   /* each scan walks every block: bound the work */
                fail(j, "SOS: more than 512 scans (damaged; real files have about 10)");
                goto out;
            }
            r = sos(j, d, len);
            p = j->p;
            scans++;
        } else if (m == 0xe0 && len >= 5 && !memcmp(d, "JFIF\0", 5)) j->jfif = 1;
        else if (m == 0xee && len >= 12 && !memcmp(d, "Adobe", 5)) {
            j->adobe = 1; j->adobe_t = d[11];
        } else if ((m >= 0xc3 && m <= 0xcf) && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            snprintf(err, el, "SOF%d: %s JPEG, which k3 (like most decoders) does not decode",
                     m - 0xc0, m == 0xc3 || m == 0xc7 || m == 0xcb || m == 0xcf ? "a lossless"
                     : m >= 0xc9 ? "an arithmetic-coded" : "a hierarchical");
            goto out;
        } else if (m == 0xdc) {
            fail(j, "DNL: a height given after the scan (not supported)");
            goto out;
        }
        if (r) goto out;
    }
    if (!scans || !j->have_frame) { fail(j, "EOI before any scan (no image data)"); goto out; }
    JFrame *f = &j->f;
    if (f->nc == 3) {   /* libjpeg's rule: JFIF means YCbCr, then Adobe's transform, then ids */
        f->rgb = !j->jfif && (j->adobe ? j->adobe_t == 0 :
                 f->c[0].id == 'R' && f->c[1].id == 'G' && f->c[2].id == 'B');
    }
    snprintf(im->mode, sizeof im->mode, "%s", f->nc == 1 ? "L" : "RGB");
    const char *ss = "";
    if (f->nc == 3) {
        int h = f->c[0].h, v = f->c[0].v, same = f->c[1].h == f->c[2].h && f->c[1].v == f->c[2].v
                && f->c[1].h == 1 && f->c[1].v == 1;
        ss = !same ? " (unusual sampling)" : h == 1 && v == 1 ? " 4:4:4" : h == 2 && v == 1 ?
             " 4:2:2" : h == 2 && v == 2 ? " 4:2:0" : h == 1 && v == 2 ? " 4:4:0" :
             h == 4 && v == 1 ? " 4:1:1" : " (unusual sampling)";
    }
    snprintf(im->detail, sizeof im->detail, "%s%s%s%s", j->progressive ? "progressive" :
             "baseline", f->nc == 1 ? " gray" : f->rgb ? " RGB" : " YCbCr", ss,
             j->restart ? ", restart markers" : "");
    rc = k3_jpeg_pixels(f, im->rgba, err, el);
out:
    for (int i = 0; i < 3; i++) free(j->f.c[i].coef);
    free(j);
    return rc;
}
