/* data_url.c — an image sent inline, as a data: URL (RFC 2397) with base64 (RFC 4648) bytes:
 * what OpenAI's image_url parts carry (K3_VISION.md §6). The reference takes the text after
 * the first comma and base64-decodes it, the media type ignored (the format is sniffed from
 * the bytes); so does this, strictly: the standard alphabet, '=' padding only at the end and
 * only as much as the length needs (or none), no other characters (line breaks and spaces are
 * refused, as a URL cannot hold them). */
#include "image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int b64v(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

long k3_base64_decode(const char *s, size_t n, uint8_t *out, size_t cap, char *err,
                      size_t errlen) {
    size_t pad = 0;
    while (pad < 2 && n > pad && s[n - 1 - pad] == '=') pad++;
    const size_t m = n - pad;                    /* the characters that carry bits */
    if (pad && n % 4) {
        snprintf(err, errlen, "base64: %zu characters with '=' padding (a multiple of 4 is "
                 "needed)", n);
        return -1;
    }
    if (m % 4 == 1) {
        snprintf(err, errlen, "base64: %zu characters cannot end a byte (truncated?)", m);
        return -1;
    }
    const size_t bytes = m / 4 * 3 + (m % 4 ? m % 4 - 1 : 0);
    if (bytes > cap) {
        snprintf(err, errlen, "base64: %zu bytes, over the limit of %zu", bytes, cap);
        return -1;
    }
    uint32_t acc = 0;
    size_t o = 0;
    for (size_t i = 0; i < m; i++) {
        const int v = b64v((unsigned char)s[i]);
        if (v < 0) {
            const unsigned char c = (unsigned char)s[i];
            if (c >= 0x20 && c < 0x7f)
                snprintf(err, errlen, "base64: '%c' at character %zu is not in the alphabet "
                         "(A-Z a-z 0-9 + /, '=' only at the end)", c, i);
            else
                snprintf(err, errlen, "base64: byte 0x%02X at character %zu is not in the "
                         "alphabet (A-Z a-z 0-9 + /)", c, i);
            return -1;
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            out[o++] = (uint8_t)(acc >> 16); out[o++] = (uint8_t)(acc >> 8);
            out[o++] = (uint8_t)acc;
            acc = 0;
        }
    }
    if (m % 4 == 2) out[o++] = (uint8_t)(acc >> 4);
    else if (m % 4 == 3) { out[o++] = (uint8_t)(acc >> 10); out[o++] = (uint8_t)(acc >> 2); }
    return (long)o;
}

int k3_data_url(const char *s, size_t n, uint8_t **out, size_t *outn, size_t cap, char *err,
                size_t errlen) {
    *out = NULL;
    *outn = 0;
    if (n < 5 || strncmp(s, "data:", 5)) {
        if ((n >= 7 && !strncmp(s, "http://", 7)) || (n >= 8 && !strncmp(s, "https://", 8)))
            snprintf(err, errlen, "an http(s) URL: k3 does not fetch images; send the bytes as "
                     "a data: URL (data:image/png;base64,...)");
        else
            snprintf(err, errlen, "not a data: URL (data:image/png;base64,... is expected)");
        return -1;
    }
    const char *comma = memchr(s, ',', n);
    if (!comma) {
        snprintf(err, errlen, "the data: URL has no ',' before its data");
        return -1;
    }
    const size_t head = (size_t)(comma - s);
    if (head < 12 || strncmp(comma - 7, ";base64", 7)) {
        snprintf(err, errlen, "the data: URL is not base64 (its head must end in ';base64', "
                 "e.g. data:image/png;base64,...)");
        return -1;
    }
    const size_t dn = n - head - 1;
    uint8_t *b = malloc(dn / 4 * 3 + 3);
    if (!b) { snprintf(err, errlen, "out of memory for %zu bytes of base64", dn); return -1; }
    const long k = k3_base64_decode(comma + 1, dn, b, cap, err, errlen);
    if (k <= 0) {
        if (k == 0) snprintf(err, errlen, "the data: URL holds no bytes");
        free(b);
        return -1;
    }
    *out = b;
    *outn = (size_t)k;
    return 0;
}
