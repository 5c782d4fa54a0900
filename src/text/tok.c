/* tok.c — loading tiktoken.model + tokenizer_config.json, encode, decode, streaming
 * decode. Spec: docs/TOKENIZER.md §1–§5. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "json.h"
#include "tok.h"
#include "util.h"

struct Tok {
    int n_ranks;
    unsigned char *arena;       /* token bytes, then the reserved names */
    uint32_t *start, *len;      /* per id, n_ranks + 256 */
    uint32_t *ht; size_t hmask; /* rank bytes -> id + 1 (0 = empty) */
    uint32_t *sht; size_t smask;/* reserved name -> id + 1 */
    unsigned char first[256];   /* first bytes of reserved names */
    size_t slens[TOK_N_RESERVED]; int nslens; /* distinct name lengths, longest first */
};

static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static int32_t ht_find(const Tok *t, const uint32_t *ht, size_t mask,
                       const unsigned char *p, size_t n) {
    for (size_t i = hash_bytes(p, n) & mask;; i = (i + 1) & mask) {
        uint32_t v = ht[i];
        if (!v) return -1;
        v--;
        if (t->len[v] == n && !memcmp(t->arena + t->start[v], p, n)) return (int32_t)v;
    }
}
/* Inserts id; returns -1 if done, or the id that already has these bytes. */
static int32_t ht_insert(Tok *t, uint32_t *ht, size_t mask, uint32_t id) {
    const unsigned char *p = t->arena + t->start[id];
    size_t n = t->len[id];
    for (size_t i = hash_bytes(p, n) & mask;; i = (i + 1) & mask) {
        uint32_t v = ht[i];
        if (!v) { ht[i] = id + 1; return -1; }
        v--;
        if (t->len[v] == n && !memcmp(t->arena + t->start[v], p, n)) return (int32_t)v;
    }
}

int32_t tok_rank(const Tok *t, const unsigned char *p, size_t len) {
    return ht_find(t, t->ht, t->hmask, p, len);
}
int tok_n_ranks(const Tok *t) { return t->n_ranks; }
int tok_vocab_size(const Tok *t) { return t->n_ranks + TOK_N_RESERVED; }
int tok_special_id(const Tok *t, const char *name) {
    return ht_find(t, t->sht, t->smask, (const unsigned char *)name, strlen(name));
}

void tok_free(Tok *t) {
    if (!t) return;
    free(t->arena); free(t->start); free(t->len); free(t->ht); free(t->sht);
    free(t);
}

static char *read_file(const char *path, size_t *n, char *err, size_t errlen) {
    char *txt = k3_slurp(path, (size_t)1 << 30, n, err, errlen);
    if (!txt && errno == ENOENT) {
        size_t o = strlen(err);
        snprintf(err + o, errlen - o,
                 " (fix: point --tok / K3_TOK_FILES at the tokenizer directory)");
    }
    return txt;
}

/* base64 alphabet: value + 1 (0 = not base64) */
static const unsigned char B64[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
    ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15,
    ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22,
    ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29,
    ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36,
    ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43,
    ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49, ['x'] = 50,
    ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57,
    ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};
#define b64val(c) ((int)B64[(unsigned char)(c)] - 1)
/* Strict standard base64 with '=' padding. Returns decoded length or -1. */
static long b64dec(const unsigned char *s, size_t n, unsigned char *out) {
    if (n == 0 || n % 4) return -1;
    size_t pad = 0;
    if (s[n - 1] == '=') pad++;
    if (s[n - 2] == '=') pad++;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            if (i + 4 == n && k >= 4 - (int)pad) { v[k] = 0; continue; }
            if ((v[k] = b64val(s[i + k])) < 0) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (!(i + 4 == n && pad == 2)) out[o++] = (unsigned char)(w >> 8);
        if (!(i + 4 == n && pad >= 1)) out[o++] = (unsigned char)w;
    }
    return (long)o;
}

static size_t pow2_at_least(size_t n) { size_t p = 16; while (p < n) p <<= 1; return p; }

/* Up to max bytes of p as a JSON string literal (control and invalid bytes escaped, so
 * binary garbage never reaches the terminal raw), "..." appended when cut. */
static const char *show(char **buf, const unsigned char *p, size_t n, size_t max) {
    char *q = json_quote((const char *)p, n > max ? max : n);
    free(*buf);
    *buf = q ? malloc(strlen(q) + 4) : NULL;
    if (!*buf) { free(q); return "(out of memory)"; }
    snprintf(*buf, strlen(q) + 4, "%s%s", q, n > max ? "..." : "");
    free(q);
    return *buf;
}

#define LOADERR(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static int load_ranks(Tok *t, const char *path, char *err, size_t errlen) {
    size_t n;
    char *txt = read_file(path, &n, err, errlen);
    uint32_t *line_of = NULL;
    char *shown = NULL;            /* the offending bytes, escaped by json_quote */
    if (!txt) return -1;
    size_t nlines = 0;
    for (const char *q = txt; (q = memchr(q, '\n', n - (size_t)(q - txt))); q++) nlines++;
    nlines++;
    t->arena = malloc(n + TOK_N_RESERVED * 48 + 1);
    t->start = malloc((nlines + TOK_N_RESERVED) * sizeof *t->start);
    t->len = malloc((nlines + TOK_N_RESERVED) * sizeof *t->len);
    line_of = calloc(nlines, sizeof *line_of);
    if (!t->arena || !t->start || !t->len || !line_of) LOADERR("%s: out of memory", path);
    /* first pass: parse into (rank -> bytes); count ranks */
    size_t ar = 0, nr = 0, lineno = 0;
    const unsigned char *s = (const unsigned char *)txt;
    for (size_t i = 0; i < n;) {
        const unsigned char *nl = memchr(s + i, '\n', n - i);
        size_t e = nl ? (size_t)(nl - s) : n;
        lineno++;
        size_t le = e;
        if (le > i && s[le - 1] == '\r') le--;
        if (le > i) {
            size_t sp = i;
            while (sp < le && s[sp] != ' ') sp++;
            if (sp == le || sp == i)
                LOADERR("%s:%zu: expected \"BASE64 RANK\" (one space), got %s "
                        "(fix: the file must be a tiktoken rank file)", path, lineno,
                        show(&shown, s + i, le - i, 40));
            long bl = b64dec(s + i, sp - i, t->arena + ar);
            if (bl <= 0)
                LOADERR("%s:%zu: bad base64 token %s (fix: standard alphabet "
                        "A-Za-z0-9+/ with = padding; the file may be damaged)",
                        path, lineno, show(&shown, s + i, sp - i, 40));
            size_t q = sp + 1;
            if (q == le)
                LOADERR("%s:%zu: missing rank after the token (fix: \"BASE64 RANK\")",
                        path, lineno);
            uint64_t r = 0;
            for (; q < le; q++) {
                if (s[q] < '0' || s[q] > '9' || r > 100000000)
                    LOADERR("%s:%zu: bad rank %s (fix: a decimal number 0..N-1)",
                            path, lineno, show(&shown, s + sp + 1, le - sp - 1, 20));
                r = r * 10 + (uint64_t)(s[q] - '0');
            }
            if (r >= nlines)
                LOADERR("%s:%zu: rank %llu is beyond the number of lines "
                        "(fix: ranks must be 0..N-1 without gaps)",
                        path, lineno, (unsigned long long)r);
            if (line_of[r])
                LOADERR("%s:%zu: duplicate rank %llu (first on line %u) "
                        "(fix: every rank must appear once)",
                        path, lineno, (unsigned long long)r, line_of[r]);
            line_of[r] = (uint32_t)lineno;
            t->start[r] = (uint32_t)ar; t->len[r] = (uint32_t)bl;
            ar += (size_t)bl; nr++;
        }
        i = e + 1;
    }
    if (nr == 0) LOADERR("%s: no ranks (fix: point at a real tiktoken.model)", path);
    for (size_t r = 0; r < nr; r++)
        if (!line_of[r])
            LOADERR("%s: rank %zu is missing (gap) while %zu ranks are listed "
                    "(fix: ranks must be 0..N-1 without gaps)", path, r, nr);
    t->n_ranks = (int)nr;
    t->hmask = pow2_at_least(nr * 2) - 1;
    t->ht = calloc(t->hmask + 1, sizeof *t->ht);
    if (!t->ht) LOADERR("%s: out of memory", path);
    for (uint32_t r = 0; r < nr; r++) {
        int32_t d = ht_insert(t, t->ht, t->hmask, r);
        if (d >= 0)
            LOADERR("%s:%u: token of rank %u has the same bytes as rank %d (line %u) "
                    "(fix: every token must be unique)", path, line_of[r], r, d, line_of[d]);
    }
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        if (tok_rank(t, &c, 1) < 0)
            LOADERR("%s: no token for the single byte 0x%02X "
                    "(fix: a byte-level BPE file has all 256 one-byte tokens)", path, b);
    }
    t->start[nr] = (uint32_t)ar;      /* where the reserved names go */
    free(line_of); free(txt);
    return 0;
fail:
    free(shown); free(line_of); free(txt);
    return -1;
}

/* "ID" with ID the canonical decimal of a reserved id (no sign, space or leading zero). */
static long config_id(const char *k) {
    long id = 0;
    if (!k[0] || (k[0] == '0' && k[1])) return -1;
    for (const char *q = k; *q; q++) {
        if (*q < '0' || *q > '9' || id > 100000000) return -1;
        id = id * 10 + (*q - '0');
    }
    return id;
}

/* tokenizer_config.json: only added_tokens_decoder matters, {"ID": {"content": NAME}};
 * every other key is ignored, whatever its type. Names and keys are echoed quoted. */
static int load_config(Tok *t, const char *path, char **names, char *err, size_t errlen) {
    size_t n;
    char *txt = read_file(path, &n, err, errlen);
    if (!txt) return -1;
    char jerr[160];
    char *q = NULL;
    Json *j = json_parse(txt, n, jerr, sizeof jerr);
    free(txt);
    if (!j) { snprintf(err, errlen, "%s: %s (fix: valid JSON)", path, jerr); return -1; }
    if (j->type != JSON_OBJECT)
        LOADERR("%s: the top level is %s, expected an object "
                "(fix: point --tok at the tokenizer directory of the checkpoint)",
                path, json_type_name(j->type));
    const Json *atd = json_get(j, "added_tokens_decoder");
    if (!atd) { json_free(j); return 0; }
    if (atd->type != JSON_OBJECT)
        LOADERR("%s: added_tokens_decoder must be an object {\"ID\": {\"content\": NAME}}, "
                "got %s (fix: use the tokenizer_config.json that ships with this rank file)",
                path, json_type_name(atd->type));
    for (size_t i = 0; i < atd->len; i++) {
        const char *k = atd->keys[i];
        free(q);
        if (!(q = json_quote(k, strlen(k)))) LOADERR("%s: out of memory", path);
        long id = config_id(k);
        if (id < 0)
            LOADERR("%s: added_tokens_decoder key %s is not an id "
                    "(fix: keys are decimal ids)", path, q);
        if (id < t->n_ranks || id >= t->n_ranks + TOK_N_RESERVED)
            LOADERR("%s: added_tokens_decoder id %ld is outside the reserved range [%d, %d) "
                    "of this tiktoken.model (fix: use the config that ships with this rank file)",
                    path, id, t->n_ranks, t->n_ranks + TOK_N_RESERVED);
        const Json *e = atd->items[i];
        if (e->type != JSON_OBJECT)
            LOADERR("%s: added_tokens_decoder %s must be an object with \"content\", got %s "
                    "(fix: {\"content\": NAME})", path, q, json_type_name(e->type));
        const Json *c = json_get(e, "content");
        if (!c || c->type != JSON_STRING || c->len == 0 || c->len > 200 ||
            memchr(c->str, 0, c->len))
            LOADERR("%s: added_tokens_decoder %s.content is %s "
                    "(fix: a non-empty string of at most 200 bytes without NUL)", path, q,
                    !c ? "missing" : c->type != JSON_STRING ? json_type_name(c->type)
                    : c->len == 0 ? "empty" : c->len > 200 ? "too long" : "a string with NUL");
        int slot = (int)(id - t->n_ranks);
        free(names[slot]);
        names[slot] = strdup(c->str);
        if (!names[slot]) LOADERR("%s: out of memory", path);
    }
    free(q);
    json_free(j);
    return 0;
fail:
    free(q);
    json_free(j);
    return -1;
}

Tok *tok_load_files(const char *model_path, const char *config_path,
                    char *err, size_t errlen) {
    Tok *t = calloc(1, sizeof *t);
    char *names[TOK_N_RESERVED] = {0};
    if (!t) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (load_ranks(t, model_path, err, errlen)) goto fail;
    if (config_path && load_config(t, config_path, names, err, errlen)) goto fail;
    size_t total = 0;
    for (int i = 0; i < TOK_N_RESERVED; i++) {
        if (!names[i]) {
            char b[48];
            snprintf(b, sizeof b, "<|reserved_token_%d|>", t->n_ranks + i);
            if (!(names[i] = strdup(b))) LOADERR("out of memory");
        }
        total += strlen(names[i]);
    }
    size_t base = t->start[t->n_ranks];
    unsigned char *a2 = realloc(t->arena, base + total + 1);
    if (!a2) LOADERR("out of memory");
    t->arena = a2;
    t->smask = 1023;
    t->sht = calloc(t->smask + 1, sizeof *t->sht);
    if (!t->sht) LOADERR("out of memory");
    for (int i = 0; i < TOK_N_RESERVED; i++) {
        uint32_t id = (uint32_t)(t->n_ranks + i);
        size_t l = strlen(names[i]);
        memcpy(t->arena + base, names[i], l);
        t->start[id] = (uint32_t)base; t->len[id] = (uint32_t)l;
        base += l;
        int32_t d = ht_insert(t, t->sht, t->smask, id);
        if (d >= 0) {
            char *q = json_quote(names[i], l);
            snprintf(err, errlen, "%s: reserved name %s is used by ids %d and %u "
                     "(fix: names must be unique)",
                     config_path ? config_path : model_path, q ? q : "(out of memory)", d, id);
            free(q);
            goto fail;
        }
        t->first[(unsigned char)names[i][0]] = 1;
        int k = 0;
        while (k < t->nslens && t->slens[k] != l) k++;
        if (k == t->nslens) t->slens[t->nslens++] = l;
    }
    for (int i = 1; i < t->nslens; i++)       /* longest first */
        for (int k = i; k > 0 && t->slens[k] > t->slens[k - 1]; k--) {
            size_t x = t->slens[k]; t->slens[k] = t->slens[k - 1]; t->slens[k - 1] = x;
        }
    for (int i = 0; i < TOK_N_RESERVED; i++) free(names[i]);
    return t;
fail:
    for (int i = 0; i < TOK_N_RESERVED; i++) free(names[i]);
    tok_free(t);
    return NULL;
}

Tok *tok_load(const char *dir, char *err, size_t errlen) {
    size_t dl = strlen(dir);
    char *mp = malloc(dl + 32), *cp = malloc(dl + 32);
    if (!mp || !cp) { free(mp); free(cp); snprintf(err, errlen, "out of memory"); return NULL; }
    snprintf(mp, dl + 32, "%s/tiktoken.model", dir);
    snprintf(cp, dl + 32, "%s/tokenizer_config.json", dir);
    /* absent means "no config"; present but unreadable (or a directory) is an error */
    struct stat sb;
    int has_cfg = stat(cp, &sb) == 0 || errno != ENOENT;
    Tok *t = tok_load_files(mp, has_cfg ? cp : NULL, err, errlen);
    free(mp); free(cp);
    return t;
}

/* ---- encoding ---- */

/* Ordinary text (no special tokens): pre-tokenize, then whole-piece lookup or BPE. */
static int encode_ordinary(const Tok *t, const unsigned char *s, size_t len,
                           int32_t *out, size_t *n) {
    size_t *ends;
    long np = tok_split((const char *)s, len, &ends);
    if (np < 0) return -1;
    size_t a = 0;
    for (long i = 0; i < np; i++) {
        size_t b = ends[i];
        int32_t r = tok_rank(t, s + a, b - a);
        if (r >= 0) out[(*n)++] = r;
        else {
            size_t k = tok_bpe(t, s + a, b - a, out + *n, 0);
            if (k == (size_t)-1) { free(ends); return -1; }
            *n += k;
        }
        a = b;
    }
    free(ends);
    return 0;
}

/* Leftmost reserved name in s[from..len): its position and id, or -1. */
static long find_special(const Tok *t, const unsigned char *s, size_t len, size_t from,
                         int32_t *id) {
    for (size_t i = from; i < len; i++) {
        if (!t->first[s[i]]) continue;
        for (int k = 0; k < t->nslens; k++) {
            size_t l = t->slens[k];
            if (l > len - i) continue;
            int32_t v = ht_find(t, t->sht, t->smask, s + i, l);
            if (v >= 0) { *id = v; return (long)i; }
        }
    }
    return -1;
}

int32_t *tok_encode(const Tok *t, const char *text, size_t len, int special, size_t *n) {
    const unsigned char *s = (const unsigned char *)text;
    int32_t *out = malloc((len + 1) * sizeof *out);
    size_t *ce = NULL;
    *n = 0;
    if (!out) return NULL;
    long nc = tok_chunks(text, len, &ce);
    if (nc < 0) goto oom;
    size_t a = 0;
    for (long c = 0; c < nc; c++) {
        size_t b = ce[c], pos = a;
        if (special) {
            int32_t id;
            long m;
            while ((m = find_special(t, s + a, b - a, pos - a, &id)) >= 0) {
                size_t at = a + (size_t)m;
                if (encode_ordinary(t, s + pos, at - pos, out, n)) goto oom;
                out[(*n)++] = id;
                pos = at + t->len[id];
            }
        }
        if (encode_ordinary(t, s + pos, b - pos, out, n)) goto oom;
        a = b;
    }
    free(ce);
    int32_t *o2 = realloc(out, (*n + 1) * sizeof *out);
    return o2 ? o2 : out;
oom:
    free(ce); free(out);
    *n = 0;
    return NULL;
}

/* ---- decoding ---- */

const char *tok_token_bytes(const Tok *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_ranks + TOK_N_RESERVED) { *len = 0; return NULL; }
    *len = t->len[id];
    return (const char *)t->arena + t->start[id];
}

char *tok_decode(const Tok *t, const int32_t *ids, size_t n, size_t *len, size_t *n_bad) {
    size_t total = 0, bad = 0, l;
    for (size_t i = 0; i < n; i++) { if (tok_token_bytes(t, ids[i], &l)) total += l; else bad++; }
    char *out = malloc(total + 1);
    if (!out) { *len = 0; return NULL; }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = tok_token_bytes(t, ids[i], &l);
        if (p) { memcpy(out + o, p, l); o += l; }
    }
    out[o] = 0; *len = o;
    if (n_bad) *n_bad = bad;
    return out;
}

void tok_stream_init(TokStream *s) { memset(s, 0, sizeof *s); }
void tok_stream_free(TokStream *s) { free(s->buf); memset(s, 0, sizeof *s); }

/* 1 if p[0..k) (k >= 1) is a proper prefix of a well-formed UTF-8 sequence. */
static int utf8_incomplete(const unsigned char *p, size_t k) {
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    size_t need;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (k >= need) return 0;
    for (size_t i = 1; i < k; i++) {
        if (p[i] < lo || p[i] > hi) return 0;
        lo = 0x80; hi = 0xBF;
    }
    return 1;
}

int tok_stream_put(TokStream *s, const Tok *t, int32_t id, const char **out, size_t *outlen) {
    size_t l;
    const char *p = tok_token_bytes(t, id, &l);
    *out = NULL; *outlen = 0;
    if (!p) return -1;
    size_t total = (size_t)s->nheld + l;
    if (total + 1 > s->cap) {
        size_t nc = s->cap ? s->cap : 64;
        while (nc < total + 1) nc *= 2;
        char *b = realloc(s->buf, nc);
        if (!b) return -1;
        s->buf = b; s->cap = nc;
    }
    memcpy(s->buf, s->held, (size_t)s->nheld);
    memcpy(s->buf + s->nheld, p, l);
    /* hold back the tail if it is the start of a sequence that may still complete */
    size_t keep = total;
    for (size_t k = 1; k <= 3 && k <= total; k++) {
        unsigned char c = (unsigned char)s->buf[total - k];
        if (c >= 0x80 && c < 0xC0) continue;       /* continuation byte: look further */
        if (utf8_incomplete((unsigned char *)s->buf + total - k, k)) keep = total - k;
        break;
    }
    s->nheld = (int)(total - keep);
    memcpy(s->held, s->buf + keep, (size_t)s->nheld);
    *out = s->buf; *outlen = keep;
    return 0;
}

void tok_stream_flush(TokStream *s, const char **out, size_t *outlen) {
    if (s->cap < 5) {
        char *b = realloc(s->buf, 64);
        if (!b) { *out = NULL; *outlen = 0; return; }
        s->buf = b; s->cap = 64;
    }
    memcpy(s->buf, s->held, (size_t)s->nheld);
    *out = s->buf; *outlen = (size_t)s->nheld;
    s->nheld = 0;
}
