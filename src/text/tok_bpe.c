/* tok_bpe.c — tiktoken's byte-pair merge (spec §5): repeatedly merge the adjacent
 * pair whose concatenated bytes have the lowest rank, leftmost on ties.
 * Two equivalent implementations: tiktoken's own O(n^2) loop for short pieces (fast
 * in cache) and a heap + linked list, O(n log n), for long ones (a 25,000-character
 * chunk of one letter is a single piece). tests/c/test_tok_bpe.c checks they agree. */
#include <stdlib.h>
#include "tok.h"

#define NORANK 0x7FFFFFFF
#define SHORT_PIECE 128

static int32_t rank_or_max(const Tok *t, const unsigned char *p, size_t len) {
    int32_t r = tok_rank(t, p, len);
    return r < 0 ? NORANK : r;
}

/* openai/tiktoken src/lib.rs _byte_pair_merge, transcribed. */
static size_t bpe_quadratic(const Tok *t, const unsigned char *p, size_t len, int32_t *out) {
    size_t m = len + 1;
    size_t stackbuf_s[SHORT_PIECE + 1]; int32_t stackbuf_r[SHORT_PIECE + 1];
    size_t *st = stackbuf_s; int32_t *rk = stackbuf_r;
    if (m > SHORT_PIECE + 1) {
        st = malloc(m * sizeof *st); rk = malloc(m * sizeof *rk);
        if (!st || !rk) { free(st); free(rk); return (size_t)-1; }
    }
    for (size_t i = 0; i + 1 < len; i++) { st[i] = i; rk[i] = rank_or_max(t, p + i, 2); }
    st[len - 1] = len - 1; rk[len - 1] = NORANK;
    st[len] = len; rk[len] = NORANK;
    for (;;) {
        int32_t best = NORANK; size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++) if (rk[i] < best) { best = rk[i]; bi = i; }
        if (best == NORANK) break;
        if (bi > 0)
            rk[bi - 1] = bi - 1 + 3 < m ? rank_or_max(t, p + st[bi - 1], st[bi + 2] - st[bi - 1])
                                        : NORANK;
        rk[bi] = bi + 3 < m ? rank_or_max(t, p + st[bi], st[bi + 3] - st[bi]) : NORANK;
        for (size_t i = bi + 1; i + 1 < m; i++) { st[i] = st[i + 1]; rk[i] = rk[i + 1]; }
        m--;
    }
    size_t n = 0;
    for (size_t i = 0; i + 1 < m; i++) out[n++] = tok_rank(t, p + st[i], st[i + 1] - st[i]);
    if (st != stackbuf_s) { free(st); free(rk); }
    return n;
}

typedef struct { int32_t rank; uint32_t start, end; } Ent;

static int ent_less(const Ent *a, const Ent *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->start < b->start);
}
static void heap_push(Ent *h, size_t *n, Ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t pa = (i - 1) / 2;
        if (!ent_less(&e, &h[pa])) break;
        h[i] = h[pa]; i = pa;
    }
    h[i] = e;
}
static Ent heap_pop(Ent *h, size_t *n) {
    Ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && ent_less(&h[c + 1], &h[c])) c++;
        if (!ent_less(&h[c], &last)) break;
        h[i] = h[c]; i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* Same merge order with a min-heap keyed (rank, start) and a linked list of parts. */
static size_t bpe_heap(const Tok *t, const unsigned char *p, size_t len, int32_t *out) {
    uint32_t *nx = malloc((len + 1) * sizeof *nx), *pv = malloc((len + 1) * sizeof *pv);
    unsigned char *alive = malloc(len + 1);
    size_t hcap = 3 * len + 4, hn = 0;
    Ent *h = malloc(hcap * sizeof *h);
    if (!nx || !pv || !alive || !h) { free(nx); free(pv); free(alive); free(h); return (size_t)-1; }
    for (size_t i = 0; i <= len; i++) {
        nx[i] = (uint32_t)(i + 1); pv[i] = (uint32_t)(i ? i - 1 : 0); alive[i] = 1;
    }
    for (size_t i = 0; i + 1 < len; i++) {
        int32_t r = tok_rank(t, p + i, 2);
        if (r >= 0) heap_push(h, &hn, (Ent){r, (uint32_t)i, (uint32_t)(i + 2)});
    }
    while (hn) {
        Ent e = heap_pop(h, &hn);
        uint32_t s = e.start, m = nx[s];
        if (!alive[s] || m >= len || nx[m] != e.end) continue;     /* stale entry */
        alive[m] = 0; nx[s] = nx[m];
        if (nx[s] < len) pv[nx[s]] = s;
        if (hn + 2 > hcap) {
            Ent *h2 = realloc(h, (hcap *= 2) * sizeof *h);
            if (!h2) { free(nx); free(pv); free(alive); free(h); return (size_t)-1; }
            h = h2;
        }
        if (s > 0) {
            uint32_t l = pv[s];
            int32_t r = tok_rank(t, p + l, nx[s] - l);
            if (r >= 0) heap_push(h, &hn, (Ent){r, l, nx[s]});
        }
        if (nx[s] < len) {
            uint32_t e2 = nx[nx[s]];
            int32_t r = tok_rank(t, p + s, e2 - s);
            if (r >= 0) heap_push(h, &hn, (Ent){r, s, e2});
        }
    }
    size_t n = 0;
    for (size_t s = 0; s < len; s = nx[s]) out[n++] = tok_rank(t, p + s, nx[s] - s);
    free(nx); free(pv); free(alive); free(h);
    return n;
}

size_t tok_bpe(const Tok *t, const unsigned char *p, size_t len, int32_t *out, int algo) {
    if (len == 0) return 0;
    if (len == 1) { out[0] = tok_rank(t, p, 1); return 1; }
    if (algo == 1 || (algo == 0 && len <= SHORT_PIECE)) return bpe_quadratic(t, p, len, out);
    return bpe_heap(t, p, len, out);
}
