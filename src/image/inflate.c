/* inflate.c — zlib (RFC 1950) and deflate (RFC 1951) decoding for PNG: stored, fixed and
 * dynamic Huffman blocks, the adler-32 checked. Canonical codes are decoded from their
 * per-length counts (a code is read bit by bit against the first code of each length), which
 * needs no table that a malformed length set could overflow. The output never passes cap. */
#include "image.h"
#include <stdio.h>
#include <string.h>

typedef struct {
    const uint8_t *in; size_t n, pos;   /* input and the next byte */
    uint32_t bits; int nbits;           /* bit buffer, LSB first */
    uint8_t *out; size_t cap, len;
    char *err; size_t errlen;
} Inf;

/* fast: codes of up to FASTB bits by a table lookup, (length << 9) | symbol, 0 for longer
 * codes (decoded bit by bit) */
enum { FASTB = 9 };
typedef struct { short count[16]; short sym[288]; uint16_t fast[1 << FASTB]; } Huff;

static int fail(Inf *s, const char *msg) {
    snprintf(s->err, s->errlen, "%s", msg);
    return -1;
}

/* need bits; -1 at the end of the input (a truncated stream) */
static int getbits(Inf *s, int need, uint32_t *v) {
    while (s->nbits < need) {
        if (s->pos >= s->n) return fail(s, "zlib data ends inside a deflate block (truncated)");
        s->bits |= (uint32_t)s->in[s->pos++] << s->nbits;
        s->nbits += 8;
    }
    *v = s->bits & ((1u << need) - 1);
    s->bits >>= need; s->nbits -= need;
    return 0;
}

/* Builds h from n code lengths: 0, or -1 for an over-subscribed set. An incomplete set is
 * allowed (a single distance code is legal); a code that is not in it fails when read. */
static int build(Huff *h, const uint8_t *len, int n) {
    short offs[16];
    memset(h->count, 0, sizeof h->count);
    memset(h->fast, 0, sizeof h->fast);   /* before any return: an empty set decodes nothing */
    for (int i = 0; i < n; i++) h->count[len[i]]++;
    if (h->count[0] == n) return 0;
    int left = 1;
    for (int l = 1; l < 16; l++) {
        left <<= 1; left -= h->count[l];
        if (left < 0) return -1;
    }
    offs[1] = 0;
    for (int l = 1; l < 15; l++) offs[l + 1] = (short)(offs[l] + h->count[l]);
    for (int i = 0; i < n; i++) if (len[i]) h->sym[offs[len[i]]++] = (short)i;
    int code = 0, k = 0;
    for (int l = 1; l <= FASTB; l++, code <<= 1)
        for (int c = 0; c < h->count[l]; c++, code++, k++) {
            int rev = 0;   /* deflate sends a code's first bit first: reversed in the buffer */
            for (int b = 0; b < l; b++) rev |= ((code >> b) & 1) << (l - 1 - b);
            for (int e = rev; e < (1 << FASTB); e += 1 << l)
                h->fast[e] = (uint16_t)(l << 9 | h->sym[k]);
        }
    return 0;
}

static int decode(Inf *s, const Huff *h) {
    while (s->nbits <= 24 && s->pos < s->n) {   /* read ahead whole bytes for the table */
        s->bits |= (uint32_t)s->in[s->pos++] << s->nbits;
        s->nbits += 8;
    }
    if (s->nbits >= FASTB) {
        unsigned e = h->fast[s->bits & ((1u << FASTB) - 1)];
        if (e) {
            s->bits >>= e >> 9; s->nbits -= (int)(e >> 9);
            return (int)(e & 511);
        }
    }
    int code = 0, first = 0, index = 0;
    for (int l = 1; l < 16; l++) {
        uint32_t b;
        if (getbits(s, 1, &b)) return -1;
        code |= (int)b;
        int c = h->count[l];
        if (code - c < first) return h->sym[index + (code - first)];
        index += c; first += c; first <<= 1; code <<= 1;
    }
    return fail(s, "deflate data holds a Huffman code that is not in its table");
}

static const short LBASE[29] = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35,
    43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258 };
static const short LEXT[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4,
    4, 4, 4, 5, 5, 5, 5, 0 };
static const short DBASE[30] = { 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193,
    257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577 };
static const short DEXT[30] = { 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9,
    9, 10, 10, 11, 11, 12, 12, 13, 13 };

static int codes(Inf *s, const Huff *lit, const Huff *dist) {
    for (;;) {
        int sym = decode(s, lit);
        if (sym < 0) return -1;
        if (sym < 256) {
            if (s->len >= s->cap) return fail(s, "zlib data inflates past the image's size");
            s->out[s->len++] = (uint8_t)sym;
        } else if (sym == 256) {
            return 0;
        } else {
            sym -= 257;
            if (sym >= 29) return fail(s, "deflate data holds an invalid length code");
            uint32_t e, de;
            if (getbits(s, LEXT[sym], &e)) return -1;
            size_t len = (size_t)LBASE[sym] + e;
            int d = decode(s, dist);
            if (d < 0) return -1;
            if (d >= 30) return fail(s, "deflate data holds an invalid distance code");
            if (getbits(s, DEXT[d], &de)) return -1;
            size_t back = (size_t)DBASE[d] + de;
            if (back > s->len) return fail(s, "deflate data refers before its start");
            if (len > s->cap - s->len) return fail(s, "zlib data inflates past the image's size");
            uint8_t *o = s->out + s->len;
            for (size_t i = 0; i < len; i++) o[i] = o[(ptrdiff_t)i - (ptrdiff_t)back];
            s->len += len;
        }
    }
}

static int stored(Inf *s) {
    s->pos -= (size_t)(s->nbits / 8);   /* to the byte boundary; bytes read ahead go back */
    s->bits = 0; s->nbits = 0;
    if (s->n - s->pos < 4) return fail(s, "zlib data ends inside a stored block (truncated)");
    unsigned len = s->in[s->pos] | (unsigned)s->in[s->pos + 1] << 8;
    unsigned nlen = s->in[s->pos + 2] | (unsigned)s->in[s->pos + 3] << 8;
    s->pos += 4;
    if (len != (~nlen & 0xffff)) return fail(s, "a stored deflate block's length check fails");
    if (s->n - s->pos < len) return fail(s, "zlib data ends inside a stored block (truncated)");
    if (len > s->cap - s->len) return fail(s, "zlib data inflates past the image's size");
    memcpy(s->out + s->len, s->in + s->pos, len);
    s->pos += len; s->len += len;
    return 0;
}

static int fixed(Inf *s) {
    Huff lit, dist;   /* built each time: cheap, and no shared state between threads */
    {
        uint8_t l[288];
        int i = 0;
        for (; i < 144; i++) l[i] = 8;
        for (; i < 256; i++) l[i] = 9;
        for (; i < 280; i++) l[i] = 7;
        for (; i < 288; i++) l[i] = 8;
        build(&lit, l, 288);
        for (i = 0; i < 30; i++) l[i] = 5;
        build(&dist, l, 30);
    }
    return codes(s, &lit, &dist);
}

static int dynamic(Inf *s) {
    static const uint8_t ORD[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2,
                                     14, 1, 15 };
    uint32_t nlen, ndist, ncode, v;
    uint8_t len[320];
    Huff lit, dist;
    if (getbits(s, 5, &nlen) || getbits(s, 5, &ndist) || getbits(s, 4, &ncode)) return -1;
    nlen += 257; ndist += 1; ncode += 4;
    if (nlen > 286 || ndist > 30) return fail(s, "a dynamic deflate block has too many codes");
    memset(len, 0, sizeof len);
    for (uint32_t i = 0; i < ncode; i++) {
        if (getbits(s, 3, &v)) return -1;
        len[ORD[i]] = (uint8_t)v;
    }
    if (build(&lit, len, 19)) return fail(s, "a dynamic deflate block's code lengths are bad");
    uint32_t i = 0;
    while (i < nlen + ndist) {
        int sym = decode(s, &lit);
        if (sym < 0) return -1;
        if (sym < 16) { len[i++] = (uint8_t)sym; continue; }
        uint8_t rep = 0;
        uint32_t cnt;
        if (sym == 16) {
            if (i == 0) return fail(s, "a dynamic deflate block repeats a length before one");
            rep = len[i - 1];
            if (getbits(s, 2, &cnt)) return -1;
            cnt += 3;
        } else if (sym == 17) {
            if (getbits(s, 3, &cnt)) return -1;
            cnt += 3;
        } else {
            if (getbits(s, 7, &cnt)) return -1;
            cnt += 11;
        }
        if (i + cnt > nlen + ndist) return fail(s, "a dynamic deflate block's lengths overrun");
        while (cnt--) len[i++] = rep;
    }
    if (len[256] == 0) return fail(s, "a dynamic deflate block has no end-of-block code");
    if (build(&lit, len, (int)nlen) || build(&dist, len + nlen, (int)ndist))
        return fail(s, "a dynamic deflate block's Huffman codes are over-subscribed");
    return codes(s, &lit, &dist);
}

long k3_zlib_inflate(const uint8_t *in, size_t n, uint8_t *out, size_t cap, char *err,
                     size_t errlen) {
    Inf s = { .in = in, .n = n, .out = out, .cap = cap, .err = err, .errlen = errlen };
    if (n < 2) return fail(&s, "zlib data is truncated (no header)");
    if ((in[0] & 15) != 8 || (in[0] >> 4) > 7 || ((in[0] << 8) | in[1]) % 31)
        return fail(&s, "zlib header is bad (not deflate, or its check fails)");
    if (in[1] & 0x20) return fail(&s, "zlib data asks for a preset dictionary (not in PNG)");
    s.pos = 2;
    uint32_t last = 0, type;
    while (!last) {
        if (getbits(&s, 1, &last) || getbits(&s, 2, &type)) return -1;
        int r = type == 0 ? stored(&s) : type == 1 ? fixed(&s) : type == 2 ? dynamic(&s)
              : fail(&s, "deflate data holds a block of the reserved type 3");
        if (r) return -1;
    }
    s.pos -= (size_t)(s.nbits / 8);   /* whole bytes read ahead go back */
    if (s.n - s.pos < 4) return fail(&s, "zlib data is truncated (no adler-32 at its end)");
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < s.len; ) {
        size_t m = s.len - i < 5552 ? s.len - i : 5552;
        for (size_t j = 0; j < m; j++) { a += out[i + j]; b += a; }
        a %= 65521; b %= 65521; i += m;
    }
    const uint8_t *p = s.in + s.pos;
    uint32_t want = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (want != (b << 16 | a)) return fail(&s, "zlib data's adler-32 does not match (damaged)");
    return (long)s.len;
}
