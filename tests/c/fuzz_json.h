/* fuzz_json.h — structure-aware JSON mutations shared by the fuzzers (tests/c/test_fuzz_*.c,
 * test_tok_fuzz.c) and their libFuzzer custom mutators. A byte-level mutator rarely turns
 * an object into an array and keeps the document valid, which is what a loader's type
 * assumptions break on; these do: the document is parsed, one node is picked, and it is
 * written back with its JSON type swapped, dropped, duplicated (a duplicate key), renamed,
 * nested hundreds deep, replaced by another node of the document or by a boundary value.
 * Header-only (static functions): each fuzzer includes it once. */
#ifndef K3_FUZZ_JSON_H
#define K3_FUZZ_JSON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "json.h"

typedef uint64_t (*FjRand)(void);

/* Values a loader may not expect where it expects another type or a sane number. */
static const char *const FJ_VALUES[] = {
    "null", "true", "false", "0", "-1", "1", "-5", "768", "2147483647", "2147483648",
    "-2147483649", "4294967296", "9223372036854775807", "18446744073709551616", "1e9", "-1e9",
    "1e308", "1e999", "-1e999", "1e-50", "0.5", "-0.0", "\"\"", "\"x\"", "\"0\"", "\"768\"",
    "\"-1\"", "\"\\u0000\"", "\"\\u001b[2J\"", "\"[X]\"", "\"F32\"", "\"BF16\"", "\"user\"",
    "\"assistant\"", "\"system\"", "\"situ\"", "[]", "[1]", "[null]", "[[]]", "[0,0]", "[1,2,3]",
    "{}", "{\"content\":\"x\"}", "{\"a\":{}}", "{\"\":null}", "\"\\ud83d\\ude00\"",
};
static const char *const FJ_KEYS[] = {
    "", "0", "768", "1023", "-1", " 768", "0768", "content", "role", "weight_map", "dtype",
    "shape", "data_offsets", "__metadata__", "text_config", "added_tokens_decoder",
    "\\u001b[2J", "\\u0000", "x",
};
#define FJ_N(a) (sizeof a / sizeof *a)

typedef struct {
    char *o; size_t n, cap; int full;     /* output */
    long node, target;                    /* pre-order counter, the node to mutate */
    int op;
    const Json *splice;                   /* OP_SPLICE: the node written in its place */
    FjRand rnd;
} FjW;

enum { FJ_TYPE, FJ_DROP, FJ_DUP, FJ_NEST, FJ_SPLICE, FJ_KEY, FJ_EMPTY, FJ_NOPS };

static inline void fj_put(FjW *w, const char *s, size_t n) {
    if (w->full || n > w->cap - w->n) { w->full = 1; return; }
    memcpy(w->o + w->n, s, n); w->n += n;
}
static inline void fj_puts(FjW *w, const char *s) { fj_put(w, s, strlen(s)); }
static inline void fj_str(FjW *w, const char *s, size_t n) {
    char *q = json_quote(s, n);
    if (q) fj_puts(w, q); else w->full = 1;
    free(q);
}

static inline long fj_count(const Json *j) {
    long n = 1;
    if (j->type == JSON_ARRAY || j->type == JSON_OBJECT)
        for (size_t i = 0; i < j->len; i++) n += fj_count(j->items[i]);
    return n;
}
static inline const Json *fj_nth(const Json *j, long *k) {
    if ((*k)-- == 0) return j;
    if (j->type == JSON_ARRAY || j->type == JSON_OBJECT)
        for (size_t i = 0; i < j->len; i++) {
            const Json *r = fj_nth(j->items[i], k);
            if (r) return r;
        }
    return NULL;
}

/* Plain writing (no mutation below this point). */
static inline void fj_plain(FjW *w, const Json *j) {
    char b[64];
    switch (j->type) {
    case JSON_NULL: fj_puts(w, "null"); break;
    case JSON_BOOL: fj_puts(w, j->boolean ? "true" : "false"); break;
    case JSON_NUMBER:
        if (j->is_integer) snprintf(b, sizeof b, "%lld", (long long)j->integer);
        else if (j->number != j->number || j->number - j->number != 0)
            snprintf(b, sizeof b, "%s", j->number < 0 ? "-1e999" : "1e999");
        else snprintf(b, sizeof b, "%.17g", j->number);
        fj_puts(w, b);
        break;
    case JSON_STRING: fj_str(w, j->str, j->len); break;
    case JSON_ARRAY: case JSON_OBJECT:
        fj_puts(w, j->type == JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < j->len; i++) {
            if (i) fj_puts(w, ",");
            if (j->type == JSON_OBJECT) {
                fj_str(w, j->keys[i], strlen(j->keys[i]));
                fj_puts(w, ":");
            }
            fj_plain(w, j->items[i]);
        }
        fj_puts(w, j->type == JSON_ARRAY ? "]" : "}");
        break;
    }
}

static inline void fj_value(FjW *w, const Json *j);

/* One member of a container (key may be NULL); applies DROP, DUP and KEY at the target. */
static inline void fj_member(FjW *w, const char *key, const Json *v, int *first) {
    int hit = w->node == w->target;
    int times = hit && w->op == FJ_DROP ? 0 : hit && w->op == FJ_DUP ? 2 : 1;
    if (times == 0) { w->node += fj_count(v); return; }
    long at = w->node;
    for (int t = 0; t < times; t++) {
        w->node = at;
        if (!*first) fj_puts(w, ",");
        *first = 0;
        if (key) {
            if (hit && w->op == FJ_KEY) {
                const char *k = FJ_KEYS[w->rnd() % FJ_N(FJ_KEYS)];
                fj_puts(w, "\""); fj_puts(w, k); fj_puts(w, "\"");
            } else fj_str(w, key, strlen(key));
            fj_puts(w, ":");
        }
        if (t == 1) { long keep = w->target; w->target = -1; fj_value(w, v); w->target = keep; }
        else fj_value(w, v);
    }
}

static inline void fj_value(FjW *w, const Json *j) {
    if (w->node++ == w->target) {
        switch (w->op) {
        case FJ_TYPE: fj_puts(w, FJ_VALUES[w->rnd() % FJ_N(FJ_VALUES)]); break;
        case FJ_NEST: {
            /* sometimes past the parser's 512 levels */
            int d = 1 + (int)(w->rnd() % (w->rnd() % 4 ? 8 : 600));
            int obj = (int)(w->rnd() % 2);
            for (int i = 0; i < d; i++) fj_puts(w, obj ? "{\"k\":" : "[");
            fj_plain(w, j);
            for (int i = 0; i < d; i++) fj_puts(w, obj ? "}" : "]");
            break;
        }
        case FJ_SPLICE: fj_plain(w, w->splice); break;
        case FJ_EMPTY:
            fj_puts(w, j->type == JSON_OBJECT ? "{}" : j->type == JSON_ARRAY ? "[]"
                       : j->type == JSON_STRING ? "\"\"" : "0");
            break;
        default: fj_plain(w, j); break;    /* DROP/DUP/KEY at the root: unchanged */
        }
        w->node += fj_count(j) - 1;
        return;
    }
    if (j->type != JSON_ARRAY && j->type != JSON_OBJECT) { fj_plain(w, j); return; }
    fj_puts(w, j->type == JSON_ARRAY ? "[" : "{");
    int first = 1;
    for (size_t i = 0; i < j->len; i++)
        fj_member(w, j->type == JSON_OBJECT ? j->keys[i] : NULL, j->items[i], &first);
    fj_puts(w, j->type == JSON_ARRAY ? "]" : "}");
}

/* One structural mutation of the JSON document in[0..n) into out (capacity cap).
 * Returns the new length, or 0 when in is not valid JSON or the result does not fit. */
static inline size_t fj_mutate(const char *in, size_t n, char *out, size_t cap, FjRand rnd) {
    Json *j = json_parse(in, n, NULL, 0);
    if (!j) return 0;
    long cnt = fj_count(j);
    FjW w = { out, 0, cap, 0, 0, 0, 0, NULL, rnd };
    w.target = (long)(rnd() % (uint64_t)cnt);
    w.op = (int)(rnd() % FJ_NOPS);
    long k = (long)(rnd() % (uint64_t)cnt);
    w.splice = fj_nth(j, &k);
    fj_value(&w, j);
    json_free(j);
    return w.full ? 0 : w.n;
}

/* Line-level mutations of a JSONL document (drop, duplicate, swap lines) or a structural
 * mutation of one of its lines. Returns the new length, or 0 if nothing could be done. */
static inline size_t fj_mutate_lines(const char *in, size_t n, char *out, size_t cap,
                                     FjRand rnd) {
    size_t starts[256], nl = 0;
    for (size_t i = 0; i < n && nl < 256; i++)
        if (i == 0 || in[i - 1] == '\n') starts[nl++] = i;
    if (!nl) return 0;
#define FJ_LEND(k) ((k) + 1 < nl ? starts[(k) + 1] : n)
    size_t pick = (size_t)(rnd() % nl), other = (size_t)(rnd() % nl), o = 0;
    int op = (int)(rnd() % 5);
    for (size_t k = 0; k < nl; k++) {
        size_t a = starts[k], e = FJ_LEND(k);
        if (op == 4 && (k == pick || k == other)) {       /* swap two lines */
            size_t s2 = k == pick ? other : pick;
            a = starts[s2]; e = FJ_LEND(s2);
        }
        int times = k != pick ? 1 : op == 0 ? 0 : op == 1 ? 2 : 1;
        for (int t = 0; t < times; t++) {
            if (k == pick && op >= 2 && op < 4) {            /* mutate this line */
                size_t le = e;
                while (le > a && (in[le - 1] == '\n' || in[le - 1] == '\r')) le--;
                size_t m = fj_mutate(in + a, le - a, out + o, cap - o, rnd);
                if (!m) return 0;
                o += m;
                if (o + (e - le) > cap) return 0;
                memcpy(out + o, in + le, e - le);
                o += e - le;
                continue;
            }
            if (o + (e - a) > cap) return 0;
            memcpy(out + o, in + a, e - a); o += e - a;
            if (e == n && t + 1 < times && n && in[n - 1] != '\n') {
                if (o + 1 > cap) return 0;
                out[o++] = '\n';
            }
        }
    }
#undef FJ_LEND
    return o;
}

/* Where the harnesses write their files: $TMPDIR, else /dev/shm (memory: no disk writes or
 * fsync waits on a busy machine), else /tmp. */
static inline const char *fj_tmpdir(void) {
    const char *t = getenv("TMPDIR");
    if (t && *t) return t;
    return access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
}

/* 1 if msg holds a raw control byte other than '\n' (refusals must escape what they echo). */
static inline int fj_raw_control(const char *msg) {
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        if (*p < 0x20 && *p != '\n') return 1;
    return 0;
}
/* A harness's own failure: the message, then abort (a libFuzzer target keeps the input). */
static inline void fj_fail_now(const char *what, const char *msg) {
    printf("FAIL %s: %s\n", what, msg);
    fflush(stdout);
    abort();
}

static inline void fj_write_file(const char *p, const unsigned char *d, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f) fj_fail_now(p, "cannot write");
    if (n && fwrite(d, 1, n, f) != n) fj_fail_now(p, "cannot write");
    fclose(f);
}

/* One byte-level mutation of b[0..*np) (cap bytes of room): a random byte, a deletion, a
 * truncation, or one of the format's tokens inserted. */
static inline void fj_mutate_bytes(unsigned char *b, size_t *np, size_t cap,
                                   const char *const *tokens, size_t ntokens, FjRand rnd) {
    size_t n = *np, pos = n ? rnd() % n : 0;
    switch (rnd() % 4) {
    case 0: if (n) b[pos] = (unsigned char)rnd(); break;
    case 1: if (n) { memmove(b + pos, b + pos + 1, n - pos - 1); n--; } break;
    case 2: if (n) n = rnd() % n; break;
    default: {
        const char *t = tokens[rnd() % ntokens];
        size_t l = strlen(t);
        if (n + l < cap) { memmove(b + pos + l, b + pos, n - pos); memcpy(b + pos, t, l); n += l; }
    }
    }
    *np = n;
}

/* m mutations of seed[0..n) into buf: structural (fj_mutate, into at most scap bytes:
 * at most 64 KB and buf's size) unless rnd() % mix is 0, else one of fj_mutate_bytes'
 * within cap bytes. The length. */
static inline size_t fj_mutated_as(const char *seed, size_t n, unsigned char *buf, size_t cap,
                                   size_t scap, unsigned mix, int m, const char *const *tokens,
                                   size_t ntokens, FjRand rnd) {
    static char tmp[1 << 16];
    if (scap > sizeof tmp) scap = sizeof tmp;
    memcpy(buf, seed, n);
    for (int k = 0; k < m; k++) {
        size_t s = rnd() % mix ? fj_mutate((const char *)buf, n, tmp, scap, rnd) : 0;
        if (s) { memcpy(buf, tmp, s); n = s; }
        else fj_mutate_bytes(buf, &n, cap, tokens, ntokens, rnd);
    }
    return n;
}
/* The same, structural two times in three, within cap (at most 64 KB). */
static inline size_t fj_mutated(const char *seed, size_t n, unsigned char *buf, size_t cap,
                                int m, const char *const *tokens, size_t ntokens, FjRand rnd) {
    return fj_mutated_as(seed, n, buf, cap, cap, 3, m, tokens, ntokens, rnd);
}

/* The built-in fuzzers' loop over a JSONL format (test_fuzz_batch.c, test_fuzz_hist.c):
 * every seed must pass check; then each input is a seed under 1 to 4 mutations (two in
 * three line-level or structural, else byte-level with the format's tokens), 50 at a
 * time, at least 10000 inputs (always the same ones) and on until secs of CPU time.
 * check returns 1 when the input parsed; *ok counts those. Returns the inputs run. */
static inline long fj_fuzz_lines(const char *what, const char *const *seeds, size_t nseeds,
                                 const char *const *tokens, size_t ntokens, double secs,
                                 int (*check)(const unsigned char *, size_t), FjRand rnd,
                                 long *ok) {
    static unsigned char buf[1 << 15], tmp[1 << 15];
    long iters = 0;
    *ok = 0;
    for (size_t i = 0; i < nseeds; i++)
        if (!check((const unsigned char *)seeds[i], strlen(seeds[i])))
            fj_fail_now(what, "a seed was refused");
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 10000 || clock() < end) {
        for (int k = 0; k < 50; k++, iters++) {
            const char *s = seeds[rnd() % nseeds];
            size_t n = strlen(s);
            memcpy(buf, s, n);
            int m = 1 + (int)(rnd() % 4);
            for (int j = 0; j < m; j++) {
                size_t t = rnd() % 3 ? fj_mutate_lines((char *)buf, n, (char *)tmp, sizeof tmp, rnd)
                                     : 0;
                if (t) { memcpy(buf, tmp, t); n = t; }
                else fj_mutate_bytes(buf, &n, sizeof buf, tokens, ntokens, rnd);
            }
            *ok += check(buf, n);
        }
    }
    return iters;
}

#if defined K3_LIBFUZZER && !defined FJ_OWN_MUTATOR   /* (a target with its own mutator) */
/* libFuzzer glue: a target sets its seeds and kind in LLVMFuzzerInitialize; the custom
 * mutator then mixes libFuzzer's byte mutations with seeds and structural mutations. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
enum { FJ_DOC, FJ_LINES, FJ_RAW };
static const char *const *fj_seeds;
static size_t fj_nseeds;
static int fj_kind;
static uint64_t fj_state;
static inline uint64_t fj_lf_rnd(void) {
    fj_state ^= fj_state << 13; fj_state ^= fj_state >> 7; fj_state ^= fj_state << 17;
    return fj_state;
}
size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t n, size_t max, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t n, size_t max, unsigned int seed) {
    static char *tmp;
    static size_t tcap;
    fj_state = ((uint64_t)seed << 32 | seed) ^ 0x9E3779B97F4A7C15ull;
    uint64_t r = fj_lf_rnd() % 8;
    if (fj_nseeds && (n == 0 || r == 0)) {
        const char *s = fj_seeds[fj_lf_rnd() % fj_nseeds];
        size_t l = strlen(s);
        if (l <= max) { memcpy(d, s, l); return l; }
    }
    if (fj_kind != FJ_RAW && r < 4) {
        if (tcap < max) { free(tmp); tmp = malloc(max); tcap = tmp ? max : 0; }
        size_t m = !tmp ? 0 : fj_kind == FJ_DOC ? fj_mutate((const char *)d, n, tmp, max, fj_lf_rnd)
                                                : fj_mutate_lines((const char *)d, n, tmp, max,
                                                                  fj_lf_rnd);
        if (m) { memcpy(d, tmp, m); return m; }
    }
    return LLVMFuzzerMutate(d, n, max);
}
#endif
#endif
