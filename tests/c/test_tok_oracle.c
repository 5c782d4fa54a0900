/* test_tok_oracle.c — every case of tests/tok/cases.txt (ids computed by tiktoken
 * itself, tools/tok/gen_cases.js) must encode to exactly the same ids, decode back to
 * the same bytes, and stream-decode to the same bytes. Offline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tok.h"


typedef struct { char *p; size_t n, cap; } Buf;
static void put(Buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
        b->p = realloc(b->p, b->cap);
        if (!b->p) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    memcpy(b->p + b->n, s, n); b->n += n;
}
static void put_cp(Buf *b, unsigned long c) {
    unsigned char u[4]; size_t n;
    if (c < 0x80) { u[0] = (unsigned char)c; n = 1; }
    else if (c < 0x800) {
        u[0] = (unsigned char)(0xC0 | c >> 6); u[1] = (unsigned char)(0x80 | (c & 63)); n = 2;
    } else if (c < 0x10000) {
        u[0] = (unsigned char)(0xE0 | c >> 12); u[1] = (unsigned char)(0x80 | (c >> 6 & 63));
        u[2] = (unsigned char)(0x80 | (c & 63)); n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | c >> 18); u[1] = (unsigned char)(0x80 | (c >> 12 & 63));
        u[2] = (unsigned char)(0x80 | (c >> 6 & 63)); u[3] = (unsigned char)(0x80 | (c & 63));
        n = 4;
    }
    put(b, u, n);
}
/* Unescapes \\ \n \r \t \u{HEX} into b. */
static int unescape(Buf *b, const char *s) {
    for (; *s; s++) {
        if (*s != '\\') { put(b, s, 1); continue; }
        s++;
        if (*s == '\\') put(b, "\\", 1);
        else if (*s == 'n') put(b, "\n", 1);
        else if (*s == 'r') put(b, "\r", 1);
        else if (*s == 't') put(b, "\t", 1);
        else if (*s == 'u' && s[1] == '{') {
            char *e; unsigned long c = strtoul(s + 2, &e, 16);
            if (*e != '}') return -1;
            put_cp(b, c); s = e;
        } else return -1;
    }
    return 0;
}

static int run(const char *VOCAB, const char *CASES, long min_cases) {
    char err[512];
    Tok *t = tok_load(VOCAB, err, sizeof err);
    if (!t) { printf("FAIL load %s: %s\n", VOCAB, err); return 1; }
    FILE *f = fopen(CASES, "rb");
    if (!f) { printf("FAIL cannot open %s (run from the repo root)\n", CASES); return 1; }
    size_t cap = 0; char *line = NULL; ssize_t ll;
    Buf text = {0}, dec = {0};
    char name[256] = "", mode[16] = "";
    long ncases = 0, nfail = 0, nids_total = 0, nrt = 0;
    while ((ll = getline(&line, &cap, f)) > 0) {
        if (line[ll - 1] == '\n') line[--ll] = 0;
        if (line[0] == '#' || !line[0]) continue;
        if (line[0] == 'c') {
            if (sscanf(line, "c %255s %15s", name, mode) != 2) {
                printf("FAIL bad line: %.80s\n", line); return 1;
            }
            text.n = 0;
        } else if (line[0] == 't' || line[0] == 'r') {
            long rep = 1; const char *s = line + 2;
            if (line[0] == 'r') { char *e; rep = strtol(s, &e, 10); s = e + 1; }
            Buf one = {0};
            if (unescape(&one, s)) { printf("FAIL bad escape in %s\n", name); return 1; }
            for (long k = 0; k < rep; k++) put(&text, one.p ? one.p : "", one.n);
            free(one.p);
        } else if (line[0] == 'i') {
            /* expected ids */
            size_t nexp = 0, capx = 64;
            int32_t *exp = malloc(capx * sizeof *exp);
            for (char *p = line + 2; *p;) {
                char *e; long v = strtol(p, &e, 10);
                if (e == p) break;
                if (nexp == capx) exp = realloc(exp, (capx *= 2) * sizeof *exp);
                exp[nexp++] = (int32_t)v;
                p = *e == ',' ? e + 1 : e;
            }
            size_t n;
            int32_t *got = tok_encode(t, text.p ? text.p : "", text.n, !strcmp(mode, "special"),
                                      &n);
            ncases++; nids_total += (long)nexp;
            int ok = got && n == nexp && !memcmp(got, exp, n * sizeof *got);
            if (!ok) {
                if (nfail < 10) {
                    size_t i = 0;
                    while (got && i < n && i < nexp && got[i] == exp[i]) i++;
                    printf("DIFF %s %s: %zu ids, expected %zu; first difference at %zu: "
                           "got %d expected %d\n", name, mode, n, nexp, i,
                           got && i < n ? got[i] : -1, i < nexp ? exp[i] : -1);
                }
                nfail++;
            }
            /* round trip: decode and the streaming decoder give the text back */
            size_t dl;
            char *d = got ? tok_decode(t, got, n, &dl, NULL) : NULL;
            TokStream st; tok_stream_init(&st); dec.n = 0;
            for (size_t i = 0; got && i < n; i++) {
                const char *o; size_t ol;
                tok_stream_put(&st, t, got[i], &o, &ol);
                put(&dec, o, ol);
            }
            const char *o; size_t ol;
            tok_stream_flush(&st, &o, &ol); put(&dec, o, ol);
            tok_stream_free(&st);
            if (!d || dl != text.n || memcmp(d, text.p ? text.p : "", dl) || dec.n != text.n ||
                memcmp(dec.p, text.p ? text.p : "", dec.n)) {
                if (nrt < 10) printf("ROUNDTRIP FAIL %s %s\n", name, mode);
                nrt++;
            }
            free(d); free(got); free(exp);
        }
    }
    free(line); fclose(f); free(text.p); free(dec.p);
    tok_free(t);
    printf("oracle %s: %ld cases (%ld ids) vs tiktoken: %ld differences, %ld round-trip failures\n",
           CASES, ncases, nids_total, nfail, nrt);
    if (ncases < min_cases) { printf("FAIL: expected >= %ld cases\n", min_cases); return 1; }
    return nfail || nrt ? 1 : 0;
}

int main(void) {
    int rc = run("tests/tok/o200k_sub", "tests/tok/cases.txt", 2000);
    rc |= run("tests/tok/probe", "tests/tok/probe_cases.txt", 300);
    return rc;
}
