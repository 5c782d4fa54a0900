/* serve_chan.c — the text of a reply's channel from its ids, as the REPL's parser decodes
 * it, for k3 serve's replies and streamed deltas (serve_gen.c, serve_anthropic_out.c). */
#include "serve_gen.h"
#include <stdlib.h>
#include <string.h>

/* Bytes at the end of b[0..n) that start a UTF-8 sequence which may still complete. */
static size_t open_tail(const unsigned char *b, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = b[n - k];
        if (c >= 0x80 && c < 0xC0) continue;
        int need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
        if (!need || (size_t)need <= k || c > 0xF4) return 0;
        unsigned char t[4] = { c, 0x80, 0x80, 0x80 };
        for (size_t i = 1; i < k; i++) t[i] = b[n - k + i];
        if (k >= 2) { uint32_t cp; return tok_utf8_next(t, (size_t)need, &cp) == need &&
                                           cp != 0xFFFFFFFFu ? k : 0; }
        for (int c2 = 0x80; c2 < 0xC0; c2++) {       /* some second byte completes it */
            uint32_t cp;
            t[1] = (unsigned char)c2;
            if (tok_utf8_next(t, (size_t)need, &cp) == need && cp != 0xFFFFFFFFu) return k;
        }
        return 0;
    }
    return 0;
}

/* (serve_gen.h) */
char *chan_text(const Tok *t, const int32_t *ids, size_t n, int stable, size_t *len) {
    size_t rl = 0, j = 0;
    char *raw = tok_decode(t, ids, n, &rl, NULL);
    if (!raw) return NULL;
    if (stable) rl -= open_tail((const unsigned char *)raw, rl);
    char *o = malloc(rl * 3 + 1);
    if (!o) { free(raw); return NULL; }
    for (size_t i = 0; i < rl;) {
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)raw + i, rl - i, &cp);
        if (cp == 0xFFFFFFFFu) { memcpy(o + j, "\xEF\xBF\xBD", 3); j += 3; }
        else if (cp != 0) { memcpy(o + j, raw + i, (size_t)l); j += (size_t)l; }
        i += (size_t)l;
    }
    o[j] = 0;
    free(raw);
    *len = j;
    return o;
}

