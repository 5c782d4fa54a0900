/* chat_state.c — chat --save-state / --load-state: the engine state after a turn, so a
 * long conversation resumes without re-prefilling it (docs/CHAT.md "Saved state").
 *
 * File (every integer and float little-endian):
 *   "K3STATE\n", u32 version (1; 2 when a message holds images)
 *   fingerprint: u64 checkpoint identity (K3Model.identity), u32 layers, hidden, vocab,
 *     KDA heads, KDA head dim, conv kernel, kv_lora, rope dim, u8 is_kda[layers];
 *     u32 n_shards and per shard u64 file size, u32 name length, name (basename)
 *   render options: u32 thinking, u32 canonical, char effort[8]
 *   u32 pos; u64 n_fed (= pos); i32 fed[n_fed]        the exact ids the state holds
 *   u64 hash of the rendered transcript (ids, with generation prompt)
 *   u32 n_msgs; per message u64 hash(role, content, reasoning), i32 n_gen (-1 = no exact
 *     record), u32 gen_thinking, u32 gen_state, i32 gen_ids[n_gen]; version 2: then u32
 *     n_img (0, or the content's placeholders) and per image u32 W, H (original size), u64
 *     hash of its file's bytes, u32 n_ids, i32 ids[n_ids] (its prompt segment), u32 N, u32
 *     hidden, f32 rows[N][hidden] (the projector's output: a later re-prefill, e.g. after
 *     --context-full drops a turn, needs them; the pixels are not kept)
 *   f32 data: per KDA layer S [heads][D][D] then conv [3][C][K-1]; per MLA layer c'
 *     [pos][kv_lora] then k_pe [pos][rope]
 *   u64 checksum of every byte before it
 * then, with --draft and its context covering the state's positions, a trailer (so the part
 * above is the bytes a run without a draft writes, and a file without one, as every file
 * before it, loads with an empty draft context):
 *   "K3DRAFT\n", u32 version (1), u64 the draft's identity (k3_dspark_identity), u32 layers,
 *   kv_lora, rope, P (= pos); f32 per draft layer latents [P][kv_lora] then k_pe [P][rope];
 *   u64 checksum of the trailer's bytes before it
 * Written to FILE.tmp.PID, fsynced, renamed. On load everything is checked before use: a
 * short or corrupt file is refused, never read as zeros. */
#include "chat.h"
#include "json.h"
#include "outfile.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "K3STATE\n"
#define VERSION 1u
#define VERSION_IMG 2u                      /* a message holds images (their records) */
#define DMAGIC "K3DRAFT\n"                   /* the draft's context, a trailer */
#define DVERSION 1u
#define BUF (1u << 20)

/* identities of a message and of a rendered transcript: k3_hash, chained */
static uint64_t msg_hash(const ChatMsg *m) {
    uint64_t h = K3_HASH_INIT;
    const char *s[3] = { m->role, m->content ? m->content : "", m->reasoning ? m->reasoning : "" };
    for (int i = 0; i < 3; i++) h = k3_hash(h, s[i], strlen(s[i]) + 1);
    return h;
}

static uint64_t ids_hash(const int32_t *ids, size_t n) {
    uint64_t h = K3_HASH_INIT;
    unsigned char b[4];
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)ids[i];
        b[0] = (unsigned char)u; b[1] = (unsigned char)(u >> 8);
        b[2] = (unsigned char)(u >> 16); b[3] = (unsigned char)(u >> 24);
        h = k3_hash(h, b, 4);
    }
    return h;
}

/* ---- buffered writer ---- */
typedef struct { int fd, failed; unsigned char *b; size_t n; K3StateSum h; } StateWriter;

static void w_flush(StateWriter *w) {
    size_t off = 0;
    while (off < w->n && !w->failed) {
        ssize_t r = write(w->fd, w->b + off, w->n - off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { w->failed = errno ? errno : EIO; break; }
        off += (size_t)r;
    }
    w->n = 0;
}
static void w_bytes(StateWriter *w, const void *p, size_t n) {
    const unsigned char *s = p;
    k3_state_sum_add(&w->h, p, n);
    while (n) {
        if (w->n == BUF) w_flush(w);
        size_t k = BUF - w->n < n ? BUF - w->n : n;
        memcpy(w->b + w->n, s, k); w->n += k; s += k; n -= k;
    }
}
static void w_u32(StateWriter *w, uint32_t x) {
    unsigned char b[4] = { (unsigned char)x, (unsigned char)(x >> 8), (unsigned char)(x >> 16),
                           (unsigned char)(x >> 24) };
    w_bytes(w, b, 4);
}
static void w_u64(StateWriter *w, uint64_t x) {
    w_u32(w, (uint32_t)x);
    w_u32(w, (uint32_t)(x >> 32));
}
/* 32-bit words (floats or ids) as little-endian, converted 16 K words at a time. */
#define WCHUNK 16384
static void w_words(StateWriter *w, const void *p, size_t n) {
    static unsigned char t[4 * WCHUNK];
    const unsigned char *s = p;
    while (n) {
        size_t k = n < WCHUNK ? n : WCHUNK;
        for (size_t i = 0; i < k; i++) {
            uint32_t u; memcpy(&u, s + 4 * i, 4);
            t[4 * i] = (unsigned char)u; t[4 * i + 1] = (unsigned char)(u >> 8);
            t[4 * i + 2] = (unsigned char)(u >> 16); t[4 * i + 3] = (unsigned char)(u >> 24);
        }
        w_bytes(w, t, 4 * k);
        s += 4 * k; n -= k;
    }
}

/* ---- buffered reader ---- */
typedef struct {
    int fd; unsigned char *b; size_t pos, len; K3StateSum h; uint64_t done, size; int err;
} StateReader;

static int r_bytes(StateReader *r, void *p, size_t n) {
    unsigned char *d = p;
    while (n) {
        if (r->pos == r->len) {
            if (r->fd < 0) { r->err = 0; return -1; }      /* in memory: the end */
            ssize_t k = read(r->fd, r->b, BUF);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) { r->err = k < 0 ? errno : 0; return -1; }
            r->pos = 0; r->len = (size_t)k;
        }
        size_t k = r->len - r->pos < n ? r->len - r->pos : n;
        memcpy(d, r->b + r->pos, k);
        k3_state_sum_add(&r->h, r->b + r->pos, k);
        r->pos += k; r->done += k; d += k; n -= k;
    }
    return 0;
}
static int r_u32(StateReader *r, uint32_t *x) {
    unsigned char b[4];
    if (r_bytes(r, b, 4)) return -1;
    *x = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}
static int r_u64(StateReader *r, uint64_t *x) {
    uint32_t lo, hi;
    if (r_u32(r, &lo) || r_u32(r, &hi)) return -1;
    *x = (uint64_t)hi << 32 | lo;
    return 0;
}
static int r_words(StateReader *r, void *p, size_t n) {
    static unsigned char t[4 * WCHUNK];
    unsigned char *d = p;
    while (n) {
        size_t k = n < WCHUNK ? n : WCHUNK;
        if (r_bytes(r, t, 4 * k)) return -1;
        for (size_t i = 0; i < k; i++) {
            uint32_t u = (uint32_t)t[4 * i] | (uint32_t)t[4 * i + 1] << 8 |
                         (uint32_t)t[4 * i + 2] << 16 | (uint32_t)t[4 * i + 3] << 24;
            memcpy(d + 4 * i, &u, 4);
        }
        d += 4 * k; n -= k;
    }
    return 0;
}

/* ---- shapes ---- */
static size_t kda_s_len(const K3Config *c) {
    return (size_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim;
}
static size_t kda_conv_len(const K3Config *c) {
    return 3 * (size_t)c->kda_num_heads * c->kda_head_dim * (size_t)(c->short_conv_kernel_size - 1);
}
static const char *base(const char *p) { const char *s = strrchr(p, '/'); return s ? s + 1 : p; }

/* The checkpoint identity (k3_checkpoint_identity: config.json bytes, shard names and
 * sizes), then the dimensions and shards again so a refusal can say what differs. */
static void w_fingerprint(StateWriter *w, const K3Model *m) {
    const K3Config *c = &m->cfg;
    w_u64(w, m->identity);
    uint32_t d[8] = { (uint32_t)c->num_hidden_layers, (uint32_t)c->hidden_size,
                      (uint32_t)c->vocab_size, (uint32_t)c->kda_num_heads,
                      (uint32_t)c->kda_head_dim, (uint32_t)c->short_conv_kernel_size,
                      (uint32_t)c->kv_lora_rank, (uint32_t)c->qk_rope_head_dim };
    for (int i = 0; i < 8; i++) w_u32(w, d[i]);
    w_bytes(w, c->is_kda, (size_t)c->num_hidden_layers);
    w_u32(w, (uint32_t)m->st->n_shards);
    for (int i = 0; i < m->st->n_shards; i++) {
        const char *b = base(m->st->shards[i].path);
        w_u64(w, m->st->shards[i].file_size);
        w_u32(w, (uint32_t)strlen(b));
        w_bytes(w, b, strlen(b));
    }
}

/* --draft: its context after the state's checksum, a trailer with its own (above). */
static void w_draft(StateWriter *w, K3DraftLoop *d, int P) {
    int nl, kl, dr;
    k3_draft_ctx_shape(d, &nl, &kl, &dr);
    k3_state_sum_init(&w->h);
    w_bytes(w, DMAGIC, 8);
    w_u32(w, DVERSION);
    w_u64(w, k3_draft_identity(d));
    w_u32(w, (uint32_t)nl); w_u32(w, (uint32_t)kl); w_u32(w, (uint32_t)dr); w_u32(w, (uint32_t)P);
    for (int l = 0; l < nl; l++) {
        w_words(w, k3_draft_ctx_rows(d, l, 0), (size_t)P * kl);
        w_words(w, k3_draft_ctx_rows(d, l, 1), (size_t)P * dr);
    }
    w_u64(w, k3_state_sum_end(&w->h));
}

/* Version 2: a message's images (the rows a re-prefill needs, the ids that render them). */
static void w_images(StateWriter *w, const ChatMsg *m, int hidden) {
    w_u32(w, (uint32_t)m->n_img);
    for (int j = 0; j < m->n_img; j++) {
        const K3ImageIn *im = &m->img[j];
        w_u32(w, (uint32_t)im->w); w_u32(w, (uint32_t)im->h); w_u64(w, im->hash);
        w_u32(w, (uint32_t)im->n_ids);
        w_words(w, im->ids, (size_t)im->n_ids);
        w_u32(w, (uint32_t)im->plan.rows); w_u32(w, (uint32_t)hidden);
        w_words(w, im->rows, (size_t)im->plan.rows * hidden);
    }
}

/* The transcript as the next turn would see it (all messages + generation prompt). */
static int transcript(Chat *c, int nmsgs, int32_t **ids, size_t *n) {
    int keep = c->log.n, rc;
    c->log.n = nmsgs;
    rc = chat_render(c, ids, n);
    c->log.n = keep;
    return rc;
}

int chat_state_save(Chat *c, const char *path, char *err, size_t errlen) {
    const K3Config *cf = &c->eng.m.cfg;
    K3State *s = c->st;
    if ((size_t)s->pos != c->nfed) {
        snprintf(err, errlen, "state %s: internal: %d positions but %zu fed ids; not saved",
                 path, s->pos, c->nfed);
        return -1;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (transcript(c, c->log.n, &ids, &n)) {
        snprintf(err, errlen, "state %s: cannot render the transcript; not saved", path);
        return -1;
    }
    if (c->nfed > n || memcmp(ids, c->fed, sizeof *ids * c->nfed)) {
        size_t d = 0;
        while (d < c->nfed && d < n && ids[d] == c->fed[d]) d++;
        snprintf(err, errlen, "state %s: not saved: the state holds ids that are not a prefix of "
                 "the transcript (they differ at position %zu of %zu), so it could not be "
                 "resumed; the next run prefills from the history", path, d, c->nfed);
        free(ids);
        return -1;
    }
    uint64_t th = ids_hash(ids, n);
    free(ids);
    uint32_t version = VERSION;
    for (int i = 0; i < c->log.n; i++)
        for (int j = 0; j < c->log.v[i].n_img; j++) {
            version = VERSION_IMG;
            if (!c->log.v[i].img[j].rows || !c->log.v[i].img[j].ids) {
                snprintf(err, errlen, "state %s: internal: message %d's image %d has no rows; "
                         "not saved", path, i + 1, j + 1);
                return -1;
            }
        }
    StateWriter w = { -1, 0, malloc(BUF), 0, { { 0 }, { 0 }, 0, 0 } };
    K3Out out;                                  /* outfile.h: never replaces a FIFO, a device */
    char oe[4400];
    if (!w.b) { snprintf(err, errlen, "state %s: out of memory", path); return -1; }
    if (k3_out_open(&out, path, 0, 0600, oe, sizeof oe)) {
        snprintf(err, errlen, "state %s", oe);
        free(w.b);
        return -1;
    }
    w.fd = out.fd;
    k3_state_sum_init(&w.h);
    w_bytes(&w, MAGIC, 8);
    w_u32(&w, version);
    w_fingerprint(&w, &c->eng.m);
    w_u32(&w, (uint32_t)c->thinking); w_u32(&w, (uint32_t)c->canonical);
    char eff[8] = { 0 };
    memcpy(eff, c->effort, strnlen(c->effort, 7));
    w_bytes(&w, eff, 8);
    w_u32(&w, (uint32_t)s->pos);
    w_u64(&w, c->nfed);
    w_words(&w, c->fed, c->nfed);
    w_u64(&w, th);
    w_u32(&w, (uint32_t)c->log.n);
    for (int i = 0; i < c->log.n; i++) {
        const ChatMsg *m = &c->log.v[i];
        w_u64(&w, msg_hash(m));
        w_u32(&w, m->gen_ids ? (uint32_t)m->n_gen : 0xFFFFFFFFu);
        w_u32(&w, (uint32_t)m->gen_thinking); w_u32(&w, (uint32_t)m->gen_state);
        if (m->gen_ids) w_words(&w, m->gen_ids, (size_t)m->n_gen);
        if (version == VERSION_IMG) w_images(&w, m, cf->hidden_size);
    }
    for (int L = 0; L < cf->num_hidden_layers; L++) {
        if (cf->is_kda[L]) {
            w_words(&w, s->kda_S[L], kda_s_len(cf)); w_words(&w, s->kda_conv[L], kda_conv_len(cf));
        }
        else if (s->pos) {
            w_words(&w, s->mla_c[L], (size_t)s->pos * cf->kv_lora_rank);
            w_words(&w, s->mla_pe[L], (size_t)s->pos * cf->qk_rope_head_dim);
        }
    }
    uint64_t sum = k3_state_sum_end(&w.h);
    w_u64(&w, sum);
    if (c->draft && k3_draft_pos(c->draft) == s->pos) w_draft(&w, c->draft, s->pos);
    w_flush(&w);
    int e = w.failed;
    free(w.b);
    if (e) {
        snprintf(err, errlen, "state %s: writing it: %s", path, strerror(e));
        k3_out_abort(&out);
        return -1;
    }
    if (k3_out_commit(&out, oe, sizeof oe)) {
        snprintf(err, errlen, "state %s", oe);
        return -1;
    }
    return 0;
}

/* README "Exit codes": a state file that is damaged (corrupt, truncated), of another format
 * version, or foreign (saved from another checkpoint, history or tokenizer) is a data
 * failure, 1 (CORRUPT, FOREIGN); a sound state that this run's flags contradict (thinking,
 * --canonical-history, --ctx) is a usage error, 2 (FLAGS), as is a missing path. */
#define FLAGS(...) do { snprintf(err, errlen, __VA_ARGS__); rc = K3_ERR_USAGE; goto out; } while (0)
#define CORRUPT(...) \
    do { snprintf(err, errlen, __VA_ARGS__); rc = K3_ERR_RUNTIME; goto out; } while (0)
#define FOREIGN CORRUPT
#define RD(x) do { if (x) goto trunc; } while (0)

/* The room left in the file, for the checks before an allocation. */
static int fits(const StateReader *r, uint64_t n, uint64_t each) {
    return each == 0 || n <= (r->size - r->done) / each;
}

static int load(Chat *c, StateReader *rp, const char *path, char *err, size_t errlen);

/* Version 2: message i's images (w_images), onto m (which has none: a history holds their
 * places, not their records). 0; -1 truncated; K3_ERR_RUNTIME with err (corrupt, memory).
 * m->n_img counts the records begun, so chat_msg_free frees a partial one. */
static int r_images(Chat *c, StateReader *r, ChatMsg *m, uint32_t i, const char *path,
                    char *err, size_t errlen) {
    const K3Config *cf = &c->eng.m.cfg;
    uint32_t k, w = 0, h = 0, nid, N, hid;
    uint64_t hash;
    if (r_u32(r, &k)) return -1;
    if (!k) return 0;
    const int ph = m->content ? k3_image_placeholders(m->content, strlen(m->content)) : 0;
    if (strcmp(m->role, "user") || (int)k != ph || m->n_img) {
        snprintf(err, errlen, "state %s: message %u (%s) has %u image records for %d image "
                 "places (%s); the file is corrupt", path, i + 1, m->role, k, ph,
                 K3_IMAGE_PLACEHOLDER);
        return K3_ERR_RUNTIME;
    }
    if (!(m->img = calloc(k, sizeof *m->img))) goto oom;
    for (uint32_t j = 0; j < k; j++) {
        K3ImageIn *im = &m->img[j];
        m->n_img = (int)j + 1;
        if (r_u32(r, &w) || r_u32(r, &h) || r_u64(r, &hash) || r_u32(r, &nid)) return -1;
        if (w < 1 || h < 1 || w > K3_IMAGE_MAX_SIDE || h > K3_IMAGE_MAX_SIDE ||
            (uint64_t)w * h > K3_IMAGE_MAX_PIXELS) goto bad;
        im->w = (int)w; im->h = (int)h; im->hash = hash;
        k3_image_plan(im->w, im->h, &im->plan);
        if (nid <= (uint32_t)im->plan.rows || nid > (uint32_t)im->plan.rows + 64 ||
            !fits(r, nid, 4)) goto bad;
        if (!(im->ids = malloc(sizeof *im->ids * nid))) goto oom;
        if (r_words(r, im->ids, nid)) return -1;
        im->n_ids = (int)nid;
        for (uint32_t t = 0; t < nid; t++)
            if (im->ids[t] < 0 || im->ids[t] >= cf->vocab_size) goto bad;
        if (r_u32(r, &N) || r_u32(r, &hid)) return -1;
        const uint64_t nr = (uint64_t)N * hid;
        if (N != (uint32_t)im->plan.rows || hid != (uint32_t)cf->hidden_size || !fits(r, nr, 4))
            goto bad;
        if (!(im->rows = malloc(sizeof *im->rows * nr))) goto oom;
        if (r_words(r, im->rows, nr)) return -1;
    }
    return 0;
bad:
    snprintf(err, errlen, "state %s: message %u's image %d: a bad record (%ux%u); the file is "
             "corrupt, re-create it with --save-state", path, i + 1, m->n_img, w, h);
    return K3_ERR_RUNTIME;
oom:
    snprintf(err, errlen, "state %s: out of memory for message %u's images", path, i + 1);
    return K3_ERR_RUNTIME;
}

/* A refused load takes back the images it put on messages (they had none). */
static void drop_images(ChatMsg *m) {
    for (int j = 0; j < m->n_img; j++) k3_image_in_free(&m->img[j]);
    free(m->img);
    m->img = NULL; m->n_img = 0;
}

/* n bytes read and dropped (a draft context this run does not use). */
static int r_skip(StateReader *r, uint64_t n) {
    unsigned char t[4096];
    while (n) {
        const size_t k = n < sizeof t ? (size_t)n : sizeof t;
        if (r_bytes(r, t, k)) return -1;
        n -= k;
    }
    return 0;
}

/* The trailer after the state's checksum: the draft's context for its pos positions, into
 * c->draft when it is this draft (else read over: the conversation then drafts once
 * prefilled again). 0, or 1 with err (a damaged trailer: the file is refused). */
static int r_draft(Chat *c, StateReader *r, uint32_t pos, const char *path, char *err,
                   size_t errlen) {
    char magic[8];
    uint32_t v, dm[4];
    uint64_t id, got;
    const uint64_t extra = r->size - r->done;
    k3_state_sum_init(&r->h);
    if (extra < 8 + 4 + 8 + 16 + 8 || r_bytes(r, magic, 8) || memcmp(magic, DMAGIC, 8)) {
        snprintf(err, errlen, "state %s: %llu bytes after the state's checksum are not a draft "
                 "context; the file is corrupt, re-create it with --save-state", path,
                 (unsigned long long)extra);
        return 1;
    }
    if (r_u32(r, &v) || r_u64(r, &id)) goto trunc;
    for (int i = 0; i < 4; i++) if (r_u32(r, &dm[i])) goto trunc;
    const uint64_t n = 4 * (uint64_t)dm[0] * dm[3] * ((uint64_t)dm[1] + dm[2]);
    if (v != DVERSION || dm[3] != pos || dm[0] > 64 || dm[1] > (1u << 20) || dm[2] > 1024 ||
        r->size - r->done != n + 8) {
        snprintf(err, errlen, "state %s: its draft context (version %u, %u layers, %u "
                 "positions of the state's %u) does not fit the file; the file is corrupt, "
                 "re-create it with --save-state", path, v, dm[0], dm[3], pos);
        return 1;
    }
    int nl = 0, kl = 0, dr = 0;
    if (c->draft) k3_draft_ctx_shape(c->draft, &nl, &kl, &dr);
    const int use = c->draft && id == k3_draft_identity(c->draft) && dm[0] == (uint32_t)nl &&
                    dm[1] == (uint32_t)kl && dm[2] == (uint32_t)dr;
    if (use && k3_draft_restore(c->draft, (int)pos, err, errlen)) return 1;
    for (int l = 0; use && l < nl; l++)
        if (r_words(r, k3_draft_ctx_rows(c->draft, l, 0), (size_t)pos * kl) ||
            r_words(r, k3_draft_ctx_rows(c->draft, l, 1), (size_t)pos * dr)) goto trunc;
    if (!use && r_skip(r, n)) goto trunc;
    const uint64_t sum = k3_state_sum_end(&r->h);
    if (r_u64(r, &got)) goto trunc;
    if (sum != got) {
        snprintf(err, errlen, "state %s: the draft context's checksum does not match (stored "
                 "%016llx, computed %016llx); the file is corrupt, re-create it", path,
                 (unsigned long long)got, (unsigned long long)sum);
        return 1;
    }
    return 0;
trunc:
    snprintf(err, errlen, "state %s: truncated in its draft context at byte %llu of %llu; "
             "re-create it with --save-state", path, (unsigned long long)r->done,
             (unsigned long long)r->size);
    return 1;
}

int chat_state_load(Chat *c, const char *path, char *err, size_t errlen) {
    StateReader r = { -1, NULL, 0, 0, { { 0 }, { 0 }, 0, 0 }, 0, 0, 0 };
    struct stat sb;
    r.fd = open(path, O_RDONLY);
    if (r.fd < 0) {
        snprintf(err, errlen, "state %s: %s", path, strerror(errno));
        return errno == ENOENT ? K3_ERR_USAGE : K3_ERR_RUNTIME;
    }
    if (fstat(r.fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(r.fd); snprintf(err, errlen, "state %s: not a regular file", path);
        return K3_ERR_USAGE;
    }
    r.size = (uint64_t)sb.st_size;
    r.b = malloc(BUF);
    if (!r.b) {
        close(r.fd); snprintf(err, errlen, "state %s: out of memory", path); return K3_ERR_RUNTIME;
    }
    int rc = load(c, &r, path, err, errlen);
    free(r.b);
    close(r.fd);
    return rc;
}

/* The same reader over n bytes in memory (fd -1: the buffer is the whole file). */
int chat_state_load_bytes(Chat *c, const char *name, const void *data, size_t n, char *err,
                          size_t errlen) {
    StateReader r = { -1, (unsigned char *)data, 0, n, { { 0 }, { 0 }, 0, 0 }, 0, n, 0 };
    return load(c, &r, name, err, errlen);
}

static int load(Chat *c, StateReader *rp, const char *path, char *err, size_t errlen) {
    const K3Config *cf = &c->eng.m.cfg;
    K3State *s = c->st;
    int rc = 0;
    int32_t *fed = NULL, *ids = NULL;
    ChatMsg *old = NULL;            /* the records replaced, put back if the load fails */
    uint32_t n_old = 0;
    unsigned char *got_img = NULL;  /* messages given images (taken back if it fails) */
    uint32_t nm = 0;
    StateReader r = *rp;            /* (copied back before returning) */
    const char *hist = c->history ? c->history : "(no --history)";
    k3_state_sum_init(&r.h);
    char magic[8];
    uint32_t u, d[8];
    uint64_t x;
    RD(r_bytes(&r, magic, 8));
    if (memcmp(magic, MAGIC, 8))
        CORRUPT("state %s: not a k3 chat state file (bad magic); pass the file written by "
            "--save-state", path);
    RD(r_u32(&r, &u));
    if (u != VERSION && u != VERSION_IMG)
        FOREIGN("state %s: format version %u, this k3 reads versions %u and %u; re-create it "
            "with --save-state", path, u, VERSION, VERSION_IMG);
    const uint32_t version = u;
    /* fingerprint */
    RD(r_u64(&r, &x));
    if (x != c->eng.m.identity)
        FOREIGN("state %s was saved from another checkpoint: its identity is %016llx, %s "
            "(config.json %s and its shards) has %016llx; use the model it was saved with, "
            "or drop --load-state (the history is then re-prefilled)", path,
            (unsigned long long)x, c->eng.m.dir, cf->source,
            (unsigned long long)c->eng.m.identity);
    for (int i = 0; i < 8; i++) RD(r_u32(&r, &d[i]));
    uint32_t want[8] = { (uint32_t)cf->num_hidden_layers, (uint32_t)cf->hidden_size,
                         (uint32_t)cf->vocab_size, (uint32_t)cf->kda_num_heads,
                         (uint32_t)cf->kda_head_dim, (uint32_t)cf->short_conv_kernel_size,
                         (uint32_t)cf->kv_lora_rank, (uint32_t)cf->qk_rope_head_dim };
    if (memcmp(d, want, sizeof d))
        CORRUPT("state %s: the model dimensions differ from %s; the file is corrupt", path,
                cf->source);
    unsigned char kinds[K3_MAX_LAYERS];
    RD(r_bytes(&r, kinds, (size_t)cf->num_hidden_layers));
    if (memcmp(kinds, cf->is_kda, (size_t)cf->num_hidden_layers))
        CORRUPT("state %s: the layer kinds differ from %s; the file is corrupt", path, cf->source);
    RD(r_u32(&r, &u));
    if (u != (uint32_t)c->eng.m.st->n_shards)
        FOREIGN("state %s was saved from a checkpoint with %u shard(s); %s has %d", path, u,
            c->eng.m.dir, c->eng.m.st->n_shards);
    for (int i = 0; i < c->eng.m.st->n_shards; i++) {
        char name[256];
        const char *b = base(c->eng.m.st->shards[i].path);
        RD(r_u64(&r, &x));
        RD(r_u32(&r, &u));
        if (u >= sizeof name)
            CORRUPT("state %s: shard name %d is %u bytes long; the file is corrupt", path, i, u);
        RD(r_bytes(&r, name, u));
        name[u] = 0;
        if (strcmp(name, b) || x != c->eng.m.st->shards[i].file_size) {
            char *q = json_quote(name, u);          /* the file's bytes, shown escaped */
            snprintf(err, errlen, "state %s was saved from another checkpoint: shard %d there "
                     "is %s (%llu bytes), here %s (%llu bytes)", path, i + 1,
                     q ? q : "(a name)", (unsigned long long)x, b,
                     (unsigned long long)c->eng.m.st->shards[i].file_size);
            free(q);
            rc = K3_ERR_RUNTIME;
            goto out;
        }
    }
    /* render options */
    uint32_t think, canon;
    char eff[9] = { 0 };
    RD(r_u32(&r, &think)); RD(r_u32(&r, &canon)); RD(r_bytes(&r, eff, 8));
    if (think > 1 || canon > 1 || (think && !xtml_effort_ok(eff)))
        CORRUPT("state %s: bad render options (thinking %u, canonical %u); the file is corrupt",
                path, think, canon);
    if ((int)think != c->thinking || (think && strcmp(eff, c->effort)))
        FLAGS("state %s was saved with thinking %s; this run has thinking %s, which renders the "
            "transcript differently; pass the same thinking flags (--no-think or "
            "--think-effort E), or drop --load-state",
            path, think ? eff : "off", c->thinking ? c->effort : "off");
    if ((int)canon != c->canonical)
        FLAGS("state %s was saved %s --canonical-history; pass the same setting, or drop "
            "--load-state", path, canon ? "with" : "without");
    /* the ids the state holds */
    uint32_t pos;
    uint64_t nfed;
    RD(r_u32(&r, &pos)); RD(r_u64(&r, &nfed));
    if (nfed != pos || pos > (1u << 30))
        CORRUPT("state %s: %u positions but %llu ids; the file is corrupt", path, pos,
            (unsigned long long)nfed);
    if ((long)pos + 1 > c->ctx)
        FLAGS("state %s holds %u positions, over the context limit %d (--ctx)", path, pos, c->ctx);
    if (!fits(&r, nfed, 4)) goto trunc;
    fed = malloc(sizeof *fed * (nfed ? nfed : 1));
    if (!fed) {
        snprintf(err, errlen, "state %s: out of memory", path); rc = K3_ERR_RUNTIME; goto out;
    }
    RD(r_words(&r, fed, nfed));
    uint64_t th;
    RD(r_u64(&r, &th));
    /* the conversation: must be the start of the loaded history */
    RD(r_u32(&r, &nm));
    if (nm > CHAT_MAX_MSGS) CORRUPT("state %s: %u messages; the file is corrupt", path, nm);
    if ((int)nm > c->log.n)
        FOREIGN("state %s covers %u messages but %s holds %d; pass the history it was saved with, "
            "or drop --load-state", path, nm, hist, c->log.n);
    old = calloc(nm ? nm : 1, sizeof *old);
    got_img = calloc(nm ? nm : 1, 1);
    if (!old || !got_img) {
        snprintf(err, errlen, "state %s: out of memory", path); rc = K3_ERR_RUNTIME; goto out;
    }
    for (uint32_t i = 0; i < nm; i++, n_old = i) {
        ChatMsg *m = &c->log.v[i];
        uint32_t ng, gt, gs;
        RD(r_u64(&r, &x)); RD(r_u32(&r, &ng)); RD(r_u32(&r, &gt)); RD(r_u32(&r, &gs));
        if (x != msg_hash(m))
            FOREIGN("state %s: message %u (%s) of %s differs from the conversation the state was "
                "saved from; pass the matching history, or drop --load-state (the history is "
                "then re-prefilled)", path, i + 1, m->role, hist);
        if (ng != 0xFFFFFFFFu) {
            if (strcmp(m->role, "assistant") || gs > XP_DONE || gt > 1 || !fits(&r, ng, 4))
                CORRUPT("state %s: bad record for message %u; the file is corrupt", path, i + 1);
            int32_t *g = malloc(sizeof *g * (ng ? ng : 1));
            if (!g) {
                snprintf(err, errlen, "state %s: out of memory", path);
                rc = K3_ERR_RUNTIME;
                goto out;
            }
            if (r_words(&r, g, ng)) { free(g); goto trunc; }
            old[i] = *m;
            n_old = i + 1;                   /* restored if its images are refused below */
            m->gen_ids = g; m->n_gen = (int)ng; m->gen_thinking = (int)gt;
            m->gen_state = (int)gs;
        }
        if (version != VERSION_IMG) continue;
        got_img[i] = m->n_img == 0;
        const int ri = r_images(c, &r, m, i, path, err, errlen);
        if (ri < 0) goto trunc;
        if (ri) { rc = ri; goto out; }
    }
    size_t n = 0;
    if (transcript(c, (int)nm, &ids, &n)) CORRUPT("state %s: cannot render the transcript", path);
    if (ids_hash(ids, n) != th)
        FOREIGN("state %s: the transcript renders to other ids than when the state was saved "
            "although the messages match; was it saved with another tokenizer than %s? "
            "Pass that --tok, or drop --load-state", path, c->tok_dir);
    if (nfed > n || memcmp(ids, fed, sizeof *ids * nfed))
        CORRUPT("state %s: the saved ids are not a prefix of the transcript; the file is corrupt",
            path);
    /* the tensors */
    uint64_t need = 0;
    for (int L = 0; L < cf->num_hidden_layers; L++)
        need += cf->is_kda[L]
                    ? 4 * (uint64_t)(kda_s_len(cf) + kda_conv_len(cf))
                    : 4 * (uint64_t)pos * (uint64_t)(cf->kv_lora_rank + cf->qk_rope_head_dim);
    if (r.size - r.done < need + 8)        /* more: the draft's context (r_draft) */
        CORRUPT("state %s: %llu bytes, expected %llu for %u positions; "
            "the file is truncated or corrupt",
            path, (unsigned long long)r.size, (unsigned long long)(r.done + need + 8), pos);
    k3_state_reset(&c->eng.m, s);
    if (k3_state_reserve(&c->eng.m, s, (int)pos + 1)) {
        snprintf(err, errlen, "state %s: out of memory for %u positions", path, pos);
        rc = K3_ERR_RUNTIME;
        goto out;
    }
    for (int L = 0; L < cf->num_hidden_layers; L++) {
        if (cf->is_kda[L]) {
            RD(r_words(&r, s->kda_S[L], kda_s_len(cf)));
            RD(r_words(&r, s->kda_conv[L], kda_conv_len(cf)));
        }
        else if (pos) {
            RD(r_words(&r, s->mla_c[L], (size_t)pos * cf->kv_lora_rank));
            RD(r_words(&r, s->mla_pe[L], (size_t)pos * cf->qk_rope_head_dim));
        }
    }
    uint64_t sum = k3_state_sum_end(&r.h), got;
    RD(r_u64(&r, &got));
    if (sum != got)
        CORRUPT("state %s: checksum mismatch (stored %016llx, computed %016llx); the file is "
            "corrupt, re-create it", path, (unsigned long long)got, (unsigned long long)sum);
    if (c->draft) k3_draft_truncate(c->draft, 0);   /* none, unless the file has this one's */
    if (r.done < r.size && r_draft(c, &r, pos, path, err, errlen)) {
        rc = K3_ERR_RUNTIME;
        goto out;
    }
    s->pos = (int)pos;
    free(c->fed);
    c->fed = fed; fed = NULL;
    c->nfed = c->capfed = nfed;
    goto out;
trunc:
    if (r.err) {
        snprintf(err, errlen, "state %s: read error at byte %llu: %s", path,
                 (unsigned long long)r.done, strerror(r.err));
        rc = K3_ERR_RUNTIME;
    } else {
        snprintf(err, errlen, "state %s: truncated at byte %llu of %llu; the file is incomplete, "
                 "re-create it with --save-state",
                 path, (unsigned long long)r.done, (unsigned long long)r.size);
        rc = K3_ERR_RUNTIME;
    }
out:
    if (rc) k3_state_reset(&c->eng.m, s);
    if (rc && c->draft) k3_draft_truncate(c->draft, 0);
    for (uint32_t i = 0; old && i < n_old; i++) {
        ChatMsg *m = &c->log.v[i];
        if (old[i].role && rc) {                     /* refused: the records it had */
            free(m->gen_ids);
            m->gen_ids = old[i].gen_ids; m->n_gen = old[i].n_gen;
            m->gen_thinking = old[i].gen_thinking; m->gen_state = old[i].gen_state;
        } else if (old[i].role) free(old[i].gen_ids);
    }
    for (uint32_t i = 0; rc && got_img && i < nm; i++)
        if (got_img[i]) drop_images(&c->log.v[i]);
    free(old); free(fed); free(ids); free(got_img);
    *rp = r;
    return rc;
}
