/* serve_disk.c — k3 serve --state-dir: every kept state is also a file, HASH.state (HASH:
 * of the ids it holds), so a restart resumes conversations (tool conversations too)
 * without re-prefill. A file leaves with its kept state.
 *
 * File (every integer and float little-endian):
 *   "K3SERVE\n", u32 version (2)
 *   u64 checkpoint identity (K3Model.identity), u32 layers, hidden, vocab, KDA heads, KDA
 *     head dim, conv kernel, kv_lora, rope dim, u8 is_kda[layers]
 *   u32 pos; i32 fed[pos]                      the exact ids the state holds
 *   u32 has_logits; f32 logits[vocab] when 1   the row of the last position
 *   f32 data: per KDA layer S [heads][D][D] then conv [3][C][K-1]; per MLA layer c'
 *     [pos][kv_lora] then k_pe [pos][rope]
 *   u64 checksum of every byte before it (k3_state_sum)
 * then, with --draft and its context covering the state's positions, chat_state.c's trailer
 * (a file without one, as every file before it, resumes with no draft context: plain steps;
 * a server without --draft or with another draft reads over it):
 *   "K3DRAFT\n", u32 version (1), u64 the draft's identity, u32 layers, kv_lora, rope, P
 *   (= pos); f32 per draft layer latents [P][kv_lora] then k_pe [P][rope]; u64 checksum of
 *   the trailer's bytes before it
 * Version 1 was the chat REPL's state format (K3STATE, no logits row): refused with a
 * note, the conversation is prefilled once more and saved anew. Written to FILE.tmp.PID,
 * fsynced, renamed; on load everything is checked before use. */
#include "serve.h"
#include "outfile.h"
#include "util.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "K3SERVE\n"
#define VERSION 2u
#define DMAGIC "K3DRAFT\n"                  /* the draft's context, a trailer */
#define DVERSION 1u

static void path_of(const Server *s, const char *file, const char *ext, char *p, size_t n) {
    snprintf(p, n, "%s/%s%s", s->state_dir, file, ext);
}

void serve_disk_forget(Server *s, const char *file) {
    char p[4200];
    if (!s->state_dir || !file[0]) return;
    path_of(s, file, ".state", p, sizeof p); unlink(p);
}

/* ---- little-endian words in a byte buffer ---- */
typedef struct { unsigned char *b; size_t n, cap; } Out;
static void put32(Out *o, uint32_t x) {
    unsigned char *p = o->b + o->n;
    p[0] = (unsigned char)x; p[1] = (unsigned char)(x >> 8);
    p[2] = (unsigned char)(x >> 16); p[3] = (unsigned char)(x >> 24);
    o->n += 4;
}
static void put64(Out *o, uint64_t x) { put32(o, (uint32_t)x); put32(o, (uint32_t)(x >> 32)); }
static void put_words(Out *o, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u; memcpy(&u, (const char *)p + 4 * i, 4); put32(o, u);
    }
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void get_words(void *d, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = get32(p + 4 * i); memcpy((char *)d + 4 * i, &u, 4);
    }
}

static void dims(const K3Config *c, uint32_t d[8]) {
    uint32_t v[8] = { (uint32_t)c->num_hidden_layers, (uint32_t)c->hidden_size,
                      (uint32_t)c->vocab_size, (uint32_t)c->kda_num_heads,
                      (uint32_t)c->kda_head_dim, (uint32_t)c->short_conv_kernel_size,
                      (uint32_t)c->kv_lora_rank, (uint32_t)c->qk_rope_head_dim };
    memcpy(d, v, sizeof v);
}
static size_t kda_len(const K3Config *c) {
    return (size_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim;
}
static size_t conv_len(const K3Config *c) {
    return 3 * (size_t)c->kda_num_heads * c->kda_head_dim * (size_t)(c->short_conv_kernel_size - 1);
}
/* Bytes of the file for pos positions (with or without the logits row). */
static size_t file_bytes(const K3Config *c, size_t pos, int has_logits) {
    size_t b = 8 + 4 + 8 + 32 + (size_t)c->num_hidden_layers + 4 + 4 * pos + 4 + 8;
    if (has_logits) b += 4 * (size_t)c->vocab_size;
    for (int L = 0; L < c->num_hidden_layers; L++)
        b += c->is_kda[L] ? 4 * (kda_len(c) + conv_len(c))
                          : 4 * pos * (size_t)(c->kv_lora_rank + c->qk_rope_head_dim);
    return b;
}

/* A state file, whole or not at all: outfile.h's temporary beside it, renamed. */
static int write_all(const char *path, const unsigned char *b, size_t n, char *err,
                     size_t errlen) {
    return k3_out_save(path, b, n, 0600, err, errlen);
}

/* The trailer's bytes for d over P positions (0: none, or not this server's draft's). */
static size_t draft_bytes(const Server *s, const KeptDraft *d, size_t P) {
    int nl, kl, dr;
    uint64_t id;
    if (!d || !d->rows || !P || !serve_draft_shape(s, &nl, &kl, &dr, &id) || d->id != id ||
        d->n != (size_t)nl * P * (size_t)(kl + dr))
        return 0;
    return 8 + 4 + 8 + 16 + 4 * d->n + 8;
}

int serve_disk_save(Server *s, const int32_t *fed, size_t nfed, void *stv, const float *logits,
                    const KeptDraft *kd, char file[64]) {
    const K3Model *m = &s->eng.m;
    const K3Config *c = &m->cfg;
    const K3State *st = stv;
    char err[4400], p[4200];
    file[0] = 0;
    if (!s->state_dir) return 0;
    uint64_t h = k3_hash(K3_HASH_INIT, fed, 4 * nfed);
    snprintf(file, 64, "%016llx", (unsigned long long)h);
    const size_t tb = draft_bytes(s, kd, nfed);
    Out o = { NULL, 0, file_bytes(c, nfed, logits != NULL) + tb };
    o.b = (size_t)st->pos == nfed ? malloc(o.cap) : NULL;
    int rc = -1;
    if (!o.b) snprintf(err, sizeof err, "out of memory (or a state out of step); not saved");
    else {
        memcpy(o.b, MAGIC, 8); o.n = 8;
        put32(&o, VERSION);
        put64(&o, m->identity);
        uint32_t d[8];
        dims(c, d);
        for (int i = 0; i < 8; i++) put32(&o, d[i]);
        memcpy(o.b + o.n, c->is_kda, (size_t)c->num_hidden_layers);
        o.n += (size_t)c->num_hidden_layers;
        put32(&o, (uint32_t)nfed);
        put_words(&o, fed, nfed);
        put32(&o, logits != NULL);
        if (logits) put_words(&o, logits, (size_t)c->vocab_size);
        for (int L = 0; L < c->num_hidden_layers; L++) {
            if (c->is_kda[L]) {
                put_words(&o, st->kda_S[L], kda_len(c));
                put_words(&o, st->kda_conv[L], conv_len(c));
            } else if (nfed) {
                put_words(&o, st->mla_c[L], nfed * (size_t)c->kv_lora_rank);
                put_words(&o, st->mla_pe[L], nfed * (size_t)c->qk_rope_head_dim);
            }
        }
        put64(&o, k3_state_sum(o.b, o.n));
        if (tb) {                                 /* --draft: its context, a trailer */
            int nl, kl, dr;
            uint64_t id;
            serve_draft_shape(s, &nl, &kl, &dr, &id);
            const size_t t0 = o.n;
            memcpy(o.b + o.n, DMAGIC, 8); o.n += 8;
            put32(&o, DVERSION);
            put64(&o, kd->id);
            put32(&o, (uint32_t)nl); put32(&o, (uint32_t)kl); put32(&o, (uint32_t)dr);
            put32(&o, (uint32_t)nfed);
            put_words(&o, kd->rows, kd->n);
            put64(&o, k3_state_sum(o.b + t0, o.n - t0));
        }
        path_of(s, file, ".state", p, sizeof p);
        rc = write_all(p, o.b, o.n, err, sizeof err);
    }
    free(o.b);
    if (rc) {
        fprintf(stderr, "k3: serve: --state-dir: %s\n", err);
        file[0] = 0;
    }
    return rc;
}

/* The bytes of the state before a trailer: file_bytes of the header's positions when the
 * header is this model's and fits in n, else n (the checks below then name the problem). */
static size_t main_len(const unsigned char *b, size_t n, const K3Config *c, size_t head) {
    if (n < head + 4) return n;
    const uint32_t pos = get32(b + head - 4);
    const size_t at = head + 4 * (size_t)pos;
    if (pos > (1u << 28) || at + 4 > n || get32(b + at) > 1) return n;
    const size_t m = file_bytes(c, pos, (int)get32(b + at));
    return m + 8 <= n && !memcmp(b + m, DMAGIC, 8) ? m : n;
}

/* A trailer t[0..tn) for pos positions into d when it is this server's draft's (else it is
 * read over: no draft context). 0, or -1 with err: a damaged trailer. */
static int load_trailer(const Server *s, const char *path, const unsigned char *t, size_t tn,
                        uint32_t pos, KeptDraft *d, char *err, size_t errlen) {
    if (tn < 8 + 4 + 8 + 16 + 8 || get32(t + 8) != DVERSION)
        return snprintf(err, errlen, "%s: a draft context of another version or truncated",
                        path), -1;
    if (k3_state_sum(t, tn - 8) != ((uint64_t)get32(t + tn - 4) << 32 | get32(t + tn - 8)))
        return snprintf(err, errlen, "%s: the draft context's checksum does not match; the "
                        "file is corrupt", path), -1;
    const uint64_t id = (uint64_t)get32(t + 16) << 32 | get32(t + 12);
    const uint32_t nl = get32(t + 20), kl = get32(t + 24), dr = get32(t + 28), P = get32(t + 32);
    const uint64_t nf = (uint64_t)nl * P * ((uint64_t)kl + dr);
    if (P != pos || nl > 64 || kl > (1u << 20) || dr > (1u << 20) ||
        tn != 8 + 4 + 8 + 16 + 4 * nf + 8)
        return snprintf(err, errlen, "%s: the draft context's sizes do not match the state; "
                        "the file is corrupt", path), -1;
    int l0, k0, r0;
    uint64_t mine;
    if (!serve_draft_shape(s, &l0, &k0, &r0, &mine) || mine != id || (uint32_t)l0 != nl ||
        (uint32_t)k0 != kl || (uint32_t)r0 != dr)
        return 0;                                 /* no --draft, or another draft's */
    if (!(d->rows = malloc(sizeof(float) * (nf ? nf : 1))))
        return snprintf(err, errlen, "%s: out of memory", path), -1;
    get_words(d->rows, t + 36, nf);
    d->n = nf; d->id = id;
    return 0;
}

/* One file into a kept state. 0, or -1 with the reason in err. */
static int load_one(Server *s, const char *path, const char *file, char *err, size_t errlen) {
    const K3Model *m = &s->eng.m;
    const K3Config *c = &m->cfg;
    size_t n;
    unsigned char *b = (unsigned char *)k3_read_file(path, &n);
    if (!b) return snprintf(err, errlen, "%s: cannot read it", path), -1;
    int rc = -1;
    K3State *st = NULL;
    int32_t *fed = NULL;
    float *lg = NULL;
    uint32_t d[8];
    dims(c, d);
    size_t head = 8 + 4 + 8 + 32 + (size_t)c->num_hidden_layers + 4;
    KeptDraft dd = { NULL, 0, 0 };
    const size_t n_all = n;                       /* with the draft's trailer */
    n = main_len(b, n, c, head);
    if (n >= 8 && !memcmp(b, "K3STATE\n", 8))
        snprintf(err, errlen, "%s: a version 1 state (the chat REPL's format, without the "
                 "logits row); the conversation is prefilled once more and saved anew", path);
    else if (n < 12 || memcmp(b, MAGIC, 8))
        snprintf(err, errlen, "%s: not a k3 serve state (bad magic)", path);
    else if (get32(b + 8) != VERSION)
        snprintf(err, errlen, "%s: format version %u, this k3 reads version %u", path,
                 get32(b + 8), VERSION);
    else if (n < head + 4 + 8)
        snprintf(err, errlen, "%s: truncated (%zu bytes)", path, n);
    else if (k3_state_sum(b, n - 8) !=
             ((uint64_t)get32(b + n - 4) << 32 | get32(b + n - 8)))
        snprintf(err, errlen, "%s: checksum mismatch; the file is corrupt", path);
    else if (((uint64_t)get32(b + 16) << 32 | get32(b + 12)) != m->identity)
        snprintf(err, errlen, "%s was saved from another checkpoint (identity differs)", path);
    else {
        int ok = 1;
        for (int i = 0; i < 8; i++) ok &= get32(b + 20 + 4 * i) == d[i];
        ok = ok && !memcmp(b + 52, c->is_kda, (size_t)c->num_hidden_layers);
        uint32_t pos = ok ? get32(b + head - 4) : 0;
        size_t at = head + 4 * (size_t)pos;
        uint32_t hl = ok && pos <= (1u << 28) && at + 4 <= n ? get32(b + at) : 2;
        if (!ok || hl > 1 || n != file_bytes(c, pos, (int)hl))
            snprintf(err, errlen, "%s: the model dimensions or the sizes differ; the file is "
                     "corrupt or from another model", path);
        else if (n_all > n && load_trailer(s, path, b + n, n_all - n, pos, &dd, err, errlen))
            ;                                     /* (a damaged trailer: named in err) */
        else if ((long)pos + 1 > s->ctx)
            snprintf(err, errlen, "%s holds %u positions, over the context limit %d (--ctx)",
                     path, pos, s->ctx);
        else if (!(st = k3_state_new(m)) || k3_state_reserve(m, st, (int)pos + 1) ||
                 !(fed = malloc(4 * ((size_t)pos + 1))) ||
                 (hl && !(lg = malloc(4 * (size_t)c->vocab_size))))
            snprintf(err, errlen, "%s: out of memory", path);
        else {
            const unsigned char *q = b + head;
            get_words(fed, q, pos); q += 4 * (size_t)pos + 4;
            rc = 0;
            for (uint32_t i = 0; i < pos; i++)
                if (fed[i] < 0 || fed[i] >= c->vocab_size) rc = -1;
            if (lg) { get_words(lg, q, (size_t)c->vocab_size); q += 4 * (size_t)c->vocab_size; }
            for (int L = 0; L < c->num_hidden_layers; L++) {
                if (c->is_kda[L]) {
                    get_words(st->kda_S[L], q, kda_len(c)); q += 4 * kda_len(c);
                    get_words(st->kda_conv[L], q, conv_len(c)); q += 4 * conv_len(c);
                } else if (pos) {
                    get_words(st->mla_c[L], q, (size_t)pos * c->kv_lora_rank);
                    q += 4 * (size_t)pos * c->kv_lora_rank;
                    get_words(st->mla_pe[L], q, (size_t)pos * c->qk_rope_head_dim);
                    q += 4 * (size_t)pos * c->qk_rope_head_dim;
                }
            }
            if (rc) snprintf(err, errlen, "%s: an id outside the vocabulary; corrupt", path);
            else {
                st->pos = (int)pos;
                k3_sched_share(s->sch, st);       /* the other ranks hold it too */
                serve_keep_file(s, st, fed, pos, lg, file, &dd);
                st = NULL; fed = NULL; lg = NULL;
            }
        }
    }
    if (st) k3_state_free(m, st);
    free(fed); free(lg); free(b); free(dd.rows);
    return rc;
}

int serve_disk_load(Server *s) {
    if (!s->state_dir) return 0;
    DIR *d = opendir(s->state_dir);
    if (!d) {
        fprintf(stderr, "k3: --state-dir %s: cannot open it (create it first)\n", s->state_dir);
        return K3_ERR_USAGE;
    }
    int loaded = 0, refused = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t L = strlen(de->d_name);
        if (L < 7 || L > 60 || strcmp(de->d_name + L - 6, ".state")) continue;
        char file[64], p[4200], err[4400];
        snprintf(file, sizeof file, "%.*s", (int)(L - 6), de->d_name);
        path_of(s, file, ".state", p, sizeof p);
        if (load_one(s, p, file, err, sizeof err)) {
            fprintf(stderr, "k3: serve: --state-dir: %s; ignored\n", err);
            refused++;
        } else loaded++;
    }
    closedir(d);
    fprintf(stderr, "k3: --state-dir %s: %d state(s) resumed%s\n", s->state_dir, loaded,
            refused ? " (some refused, see above)" : "");
    return 0;
}
