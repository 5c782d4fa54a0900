/* checksum.c — XXH64 (Yann Collet's xxHash, 64-bit, seed 0) for the packed trunk's
 * per-tensor checksums (util.h). Four independent multiply-rotate lanes over 32-byte
 * stripes: it runs at memory speed where the byte-wise FNV-1a of k3_hash does about
 * 1 GB/s, so verifying every pinned (or, with --verify-reads, streamed) byte costs
 * little next to reading it. Streaming and one-shot give the same value for any
 * split of the input. */
#include "util.h"
#include <string.h>

#define P1 11400714785074694791ull
#define P2 14029467366897019727ull
#define P3 1609587929392839161ull
#define P4 9650029242287828579ull
#define P5 2870177450012600261ull

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t rd64(const unsigned char *p) {      /* little-endian, any alignment */
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t round64(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
static uint64_t merge(uint64_t h, uint64_t v) { return (h ^ round64(0, v)) * P1 + P4; }

static void stripes(K3Sum *s, const unsigned char *p, size_t n) {   /* n % 32 == 0 */
    uint64_t v0 = s->v[0], v1 = s->v[1], v2 = s->v[2], v3 = s->v[3];
    for (size_t i = 0; i < n; i += 32) {
        v0 = round64(v0, rd64(p + i));
        v1 = round64(v1, rd64(p + i + 8));
        v2 = round64(v2, rd64(p + i + 16));
        v3 = round64(v3, rd64(p + i + 24));
    }
    s->v[0] = v0; s->v[1] = v1; s->v[2] = v2; s->v[3] = v3;
}

void k3_sum_init(K3Sum *s) {
    memset(s, 0, sizeof *s);
    s->v[0] = P1 + P2; s->v[1] = P2; s->v[2] = 0; s->v[3] = 0 - P1;
}

void k3_sum_add(K3Sum *s, const void *data, size_t n) {
    const unsigned char *p = data;
    s->len += n;
    if (s->ntail) {                                /* complete the pending stripe */
        size_t k = 32 - s->ntail < n ? 32 - s->ntail : n;
        memcpy(s->tail + s->ntail, p, k);
        s->ntail += (unsigned)k; p += k; n -= k;
        if (s->ntail < 32) return;
        stripes(s, s->tail, 32);
        s->ntail = 0;
    }
    size_t whole = n & ~(size_t)31;
    stripes(s, p, whole);
    memcpy(s->tail, p + whole, n - whole);
    s->ntail = (unsigned)(n - whole);
}

uint64_t k3_sum_end(const K3Sum *s) {
    uint64_t h;
    if (s->len >= 32) {
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = merge(h, s->v[i]);
    } else h = P5;
    h += s->len;
    const unsigned char *p = s->tail;
    size_t n = s->ntail;
    for (; n >= 8; p += 8, n -= 8) h = rotl(h ^ round64(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) { h = rotl(h ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3; p += 4; n -= 4; }
    for (; n; p++, n--) h = rotl(h ^ (uint64_t)*p * P5, 11) * P1;
    h ^= h >> 33; h *= P2; h ^= h >> 29; h *= P3; h ^= h >> 32;
    return h;
}

uint64_t k3_sum64(const void *p, size_t n) {
    K3Sum s;
    k3_sum_init(&s);
    k3_sum_add(&s, p, n);
    return k3_sum_end(&s);
}

/* ---- k3_state_sum: the saved states' checksum (chat --save-state, serve --state-dir): 4
 * lanes of XXH64's multiply-rotate over 32-byte blocks without its merge rounds, so not
 * XXH64's value; independent of how the byte stream is split. Kept for the files. ---- */
void k3_state_sum_init(K3StateSum *h) {
    memset(h, 0, sizeof *h); h->v[0] = P1 + P2; h->v[1] = P2; h->v[3] = 0 - P1;
}
static void h_block(K3StateSum *h, const unsigned char *p) {
    for (int i = 0; i < 4; i++) h->v[i] = rotl(h->v[i] + rd64(p + 8 * i) * P2, 31) * P1;
}
void k3_state_sum_add(K3StateSum *h, const void *data, size_t n) {
    const unsigned char *p = data;
    h->total += n;
    if (h->nt) {
        size_t k = 32 - h->nt < n ? 32 - h->nt : n;
        memcpy(h->tail + h->nt, p, k); h->nt += k; p += k; n -= k;
        if (h->nt < 32) return;
        h_block(h, h->tail); h->nt = 0;
    }
    for (; n >= 32; p += 32, n -= 32) h_block(h, p);
    memcpy(h->tail, p, n); h->nt = n;
}
uint64_t k3_state_sum_end(const K3StateSum *h) {
    uint64_t x = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
    x ^= h->total * P1;
    for (size_t i = 0; i < h->nt; i++) x = rotl(x ^ (h->tail[i] * P1), 11) * P2;
    x ^= x >> 33; x *= P2; x ^= x >> 29; x *= P1; x ^= x >> 32;
    return x;
}

uint64_t k3_state_sum(const void *p, size_t n) {
    K3StateSum h;
    k3_state_sum_init(&h);
    k3_state_sum_add(&h, p, n);
    return k3_state_sum_end(&h);
}
