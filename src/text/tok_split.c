/* tok_split.c — K3's pre-tokenizer (pat_str, spec §4) as a hand-written scanner, and
 * the Python wrapper's 400k/25k chunking (spec §4.6). No regex library.
 *
 * pat_str, alternatives tried in order at each position, leftmost-first with
 * backtracking (fancy-regex semantics):
 *   1 [\p{Han}]+
 *   2 P? U* W+ C?      3 P? U+ W* C?
 *   4 \p{N}{1,3}       5 ' '? D+ [\r\n]*
 *   6 \s*[\r\n]+       7 \s+(?!\S)        8 \s+
 * P = [^\r\n\p{L}\p{N}], U = (Lu|Lt|Lm|Lo|M)-Han, W = (Ll|Lm|Lo|M)-Han,
 * D = [^\s\p{L}\p{N}], C = (?i:'s|'t|'re|'ve|'m|'ll|'d). */
#include <stdlib.h>
#include <string.h>
#include "tok.h"

int tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len; uint32_t v; unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;          /* no overlongs */
        if (c == 0xED) hi = 0x9F;          /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;          /* <= U+10FFFF */
    } else { *cp = 0xFFFFFFFFu; return 1; }
    if ((size_t)len > n) { *cp = 0xFFFFFFFFu; return 1; }
    for (int i = 1; i < len; i++) {
        unsigned b = s[i];
        if (b < lo || b > hi) { *cp = 0xFFFFFFFFu; return 1; }
        lo = 0x80; hi = 0xBF;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return len;
}

/* Decoded chunk: code points, class flags and byte offsets (off[n] = byte length). */
typedef struct { uint32_t *cp; uint8_t *fl; size_t *off; size_t n; } Chars;

static int decode_chars(const unsigned char *s, size_t len, Chars *c) {
    c->cp = malloc((len + 1) * sizeof *c->cp);
    c->fl = malloc(len + 1);
    c->off = malloc((len + 1) * sizeof *c->off);
    if (!c->cp || !c->fl || !c->off) { free(c->cp); free(c->fl); free(c->off); return -1; }
    size_t i = 0, k = 0;
    while (i < len) {
        uint32_t cp;
        int l = tok_utf8_next(s + i, len - i, &cp);
        c->cp[k] = cp; c->fl[k] = (uint8_t)tok_uflags(cp); c->off[k] = i;
        k++; i += (size_t)l;
    }
    c->off[k] = len; c->n = k;
    return 0;
}

#define IS_CRLF(c) ((c) == '\r' || (c) == '\n')
#define F(i) (ch->fl[i])
#define CP(i) (ch->cp[i])
#define IS_P(i) (!IS_CRLF(CP(i)) && !(F(i) & (TOKU_L | TOKU_N)))
#define IS_U(i) (F(i) & (TOKU_UP | TOKU_BOTH))
#define IS_W(i) (F(i) & (TOKU_LO | TOKU_BOTH))
#define IS_D(i) (!(F(i) & (TOKU_WS | TOKU_L | TOKU_N)))
#define IS_WS(i) (F(i) & TOKU_WS)

/* Simple case folding restricted to the letters of the contractions. */
static int fold(uint32_t c) {
    if (c == 0x17F) return 's';              /* LATIN SMALL LETTER LONG S folds to s */
    if (c >= 'A' && c <= 'Z') return (int)(c + 32);
    if (c >= 'a' && c <= 'z') return (int)c;
    return 0;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)? at e: returns the end. */
static size_t contraction(const Chars *ch, size_t e) {
    size_t n = ch->n;
    if (e + 1 >= n || CP(e) != '\'') return e;
    int a = fold(CP(e + 1)), b = e + 2 < n ? fold(CP(e + 2)) : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return e + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return e + 3;
    return e;
}

/* Alternative 2 from start s (after the optional prefix): U* W+ C?. 0 if no match. */
static size_t alt2(const Chars *ch, size_t s) {
    size_t n = ch->n, u = s;
    while (u < n && IS_U(u)) u++;
    /* greedy U* backs off to the last position k in [s, u] with a W character */
    size_t k = u;
    for (;;) {
        if (k < n && IS_W(k)) break;
        if (k == s) return 0;
        k--;
    }
    size_t e = k + 1;
    while (e < n && IS_W(e)) e++;
    return contraction(ch, e);
}

/* Alternative 3 from s: U+ W* C?. 0 if no match. */
static size_t alt3(const Chars *ch, size_t s) {
    size_t n = ch->n, e = s;
    while (e < n && IS_U(e)) e++;
    if (e == s) return 0;
    while (e < n && IS_W(e)) e++;
    return contraction(ch, e);
}

/* One match at position i (< n); returns its end (> i). */
static size_t match_at(const Chars *ch, size_t i) {
    size_t n = ch->n, e;
    /* 1: Han run */
    if (F(i) & TOKU_HAN) {
        e = i + 1;
        while (e < n && (F(e) & TOKU_HAN)) e++;
        return e;
    }
    /* 2 and 3: try with the prefix first, then without */
    int p = IS_P(i);
    if (p && i + 1 < n && (e = alt2(ch, i + 1))) return e;
    if ((e = alt2(ch, i))) return e;
    if (p && i + 1 < n && (e = alt3(ch, i + 1))) return e;
    if ((e = alt3(ch, i))) return e;
    /* 4: numbers, 1 to 3 */
    if (F(i) & TOKU_N) {
        e = i + 1;
        while (e < n && e < i + 3 && (F(e) & TOKU_N)) e++;
        return e;
    }
    /* 5: ' '? D+ [\r\n]* */
    {
        size_t s = i;
        if (CP(i) == ' ' && i + 1 < n && IS_D(i + 1)) s = i + 1;
        if (IS_D(s)) {
            e = s + 1;
            while (e < n && IS_D(e)) e++;
            while (e < n && IS_CRLF(CP(e))) e++;
            return e;
        }
    }
    /* 6, 7, 8: whitespace (every remaining character is \s) */
    size_t w = i, last_nl = (size_t)-1;
    while (w < n && IS_WS(w)) { if (IS_CRLF(CP(w))) last_nl = w; w++; }
    if (w == i) return i + 1;            /* unreachable: every character has a rule */
    if (last_nl != (size_t)-1) return last_nl + 1;    /* 6 */
    if (w == n) return n;                               /* 7 at the end of text */
    if (w - i >= 2) return w - 1;                       /* 7 gives back one */
    return w;                                           /* 8 */
}

long tok_split(const char *text, size_t len, size_t **ends) {
    Chars c;
    *ends = NULL;
    if (decode_chars((const unsigned char *)text, len, &c)) return -1;
    size_t *out = malloc((c.n + 1) * sizeof *out);
    if (!out) { free(c.cp); free(c.fl); free(c.off); return -1; }
    long np = 0;
    for (size_t i = 0; i < c.n;) {
        size_t e = match_at(&c, i);
        out[np++] = c.off[e];
        i = e;
    }
    free(c.cp); free(c.fl); free(c.off);
    *ends = out;
    return np;
}

/* TikTokenTokenizer.encode: for each 400,000-character window,
 * _split_whitespaces_or_nonwhitespaces(window, 25000) (Python str.isspace). */
#define TOK_WINDOW 400000
#define TOK_MAXRUN 25000

long tok_chunks(const char *text, size_t len, size_t **ends) {
    const unsigned char *s = (const unsigned char *)text;
    size_t cap = 16, n = 0;
    size_t *out = malloc(cap * sizeof *out);
    *ends = NULL;
    if (!out) return -1;
    size_t i = 0;
    while (i < len) {
        /* one window: up to TOK_WINDOW characters starting at byte i */
        size_t nchar = 0, run = 0;
        int run_space = -1;
        while (i < len && nchar < TOK_WINDOW) {
            uint32_t cp;
            int l = tok_utf8_next(s + i, len - i, &cp);
            int sp = (tok_uflags(cp) & TOKU_PYSP) != 0;
            if (run_space < 0) run_space = sp;
            if (sp != run_space) { run = 1; run_space = sp; }
            else if (++run > TOK_MAXRUN) {
                if (n + 2 > cap) {
                    size_t *o = realloc(out, (cap *= 2) * sizeof *out);
                    if (!o) { free(out); return -1; }
                    out = o;
                }
                out[n++] = i;
                run = 1;
            }
            i += (size_t)l; nchar++;
        }
        if (n + 2 > cap) {
            size_t *o = realloc(out, (cap *= 2) * sizeof *out);
            if (!o) { free(out); return -1; }
            out = o;
        }
        out[n++] = i;
    }
    *ends = out;
    return (long)n;
}
