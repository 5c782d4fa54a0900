/* safetensors.c — index a (sharded) safetensors checkpoint from its headers alone.
 *
 * Opening reads 8 + N header bytes of each shard (pread), never tensor data, and
 * validates everything: header length sane and inside the file, JSON well-formed,
 * dtype known, ndim <= 8, dims >= 0, shape x dtype size == end - begin (overflow
 * safe), offsets inside the data section, no two tensors of a file overlapping, no
 * name listed twice, and (with model.safetensors.index.json) the weight_map agreeing
 * with the shard headers both ways. Lookup is an open-addressing hash on the name.
 * Reads are pread loops; a short read (file truncated after open) is an error. */
#include "st.h"
#include "util.h"
#include "json.h"
#include "sysmem.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20)
#define ST_MAX_INDEX ((uint64_t)1 << 30)
#define POOL_CHUNK ((size_t)1 << 20)

/* idx = tensor index + 1 (0 = empty); tag = 32 bits of the name's hash, which also
 * gives the home slot, so probing and rehashing rarely touch the names themselves. */
typedef struct { uint32_t idx, tag; } Slot;

typedef struct PoolChunk { struct PoolChunk *next; size_t used, cap; char data[]; } PoolChunk;

typedef struct {
    Slot *slots;              /* open addressing, linear probing, load <= 1/2 */
    size_t mask;              /* nslots - 1 (power of two) */
    PoolChunk *pool;
    size_t cap_tensors, cap_shards;
    char *hbuf; size_t hcap;  /* header read buffer, reused across files */
    pthread_mutex_t mu;       /* guards lazy opening of shard fds */
} Priv;

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap; va_start(ap, fmt); vsnprintf(err, errlen, fmt, ap); va_end(ap);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Names are echoed in later messages: one holding a control byte is refused up front,
 * shown escaped by json_quote, so no raw control byte ever reaches the terminal. */
static int has_control(const char *s) {
    for (; *s; s++) if ((unsigned char)*s < 0x20 || *s == 0x7F) return 1;
    return 0;
}
static void control_err(char *err, size_t errlen, const char *fn, const char *what,
                        const char *name, const char *fix) {
    char *q = json_quote(name, strlen(name) > 80 ? 80 : strlen(name));
    seterr(err, errlen, "%s: %s %s holds a control character; %s", fn, what,
           q ? q : "(out of memory)", fix);
    free(q);
}

static const struct { const char *name; StDtype t; size_t size; } DTYPES[] = {
    { "BF16", ST_BF16, 2 }, { "F16", ST_F16, 2 }, { "F32", ST_F32, 4 }, { "U8", ST_U8, 1 },
    { "I8", ST_I8, 1 }, { "I16", ST_I16, 2 }, { "I32", ST_I32, 4 }, { "I64", ST_I64, 8 },
    { "F64", ST_F64, 8 }, { "U16", ST_U16, 2 }, { "U32", ST_U32, 4 }, { "U64", ST_U64, 8 },
    { "BOOL", ST_BOOL, 1 },
};
#define N_DTYPES (sizeof DTYPES / sizeof *DTYPES)

size_t st_dtype_size(StDtype t) {
    for (size_t i = 0; i < N_DTYPES; i++) if (DTYPES[i].t == t) return DTYPES[i].size;
    return 0;
}

const char *st_dtype_name(StDtype t) {
    for (size_t i = 0; i < N_DTYPES; i++) if (DTYPES[i].t == t) return DTYPES[i].name;
    return "?";
}

int64_t st_numel(const StTensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

const char *st_shape_str(const StTensor *t, char *buf, size_t n) {
    size_t o = snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && o < n; i++)
        o += snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
    return buf;
}

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 0x243F6A8885A308D3ull ^ n;
    while (n >= 8) {
        uint64_t w; memcpy(&w, s, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull; h ^= h >> 29;
        s += 8; n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32; h *= 0xD6E8FEB86659FD93ull; h ^= h >> 32;
    return h;
}

static void *big_alloc(size_t bytes);

static char *pool_strdup(Priv *pv, const char *s, size_t n) {
    PoolChunk *c = pv->pool;
    if (!c || c->cap - c->used < n + 1) {
        size_t cap = c ? c->cap * 2 : POOL_CHUNK;
        if (cap > 16 * POOL_CHUNK) cap = 16 * POOL_CHUNK;
        if (cap < n + 1) cap = n + 1;
        PoolChunk *nc = big_alloc(sizeof *nc + cap);
        if (!nc) return NULL;
        nc->cap = cap; nc->used = 0; nc->next = c; pv->pool = nc; c = nc;
    }
    char *d = c->data + c->used;
    memcpy(d, s, n); d[n] = 0;
    c->used += n + 1;
    return d;
}

static uint32_t name_tag(const char *s, size_t n) { return (uint32_t)(hash_name(s, n) >> 32); }

/* Slot lookups are cache/TLB misses; callers that know the next names prefetch their
 * home slots a few iterations ahead so the misses overlap. */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif
#define AHEAD 16

/* Large blocks go on 2 MB pages where the kernel allows it (sysmem.h): indexing 497k
 * tensors otherwise spends much of its time faulting in 4 KB pages. */
static void *big_alloc(size_t bytes) {
    if (bytes >= ((size_t)4 << 20)) { void *m = k3_alloc_huge(bytes); if (m) return m; }
    return malloc(bytes ? bytes : 1);
}

static Slot *slots_alloc(size_t ns) {
    Slot *s = big_alloc(ns * sizeof(Slot));
    if (s) memset(s, 0, ns * sizeof(Slot));
    return s;
}

/* Returns the slot holding name, or the empty slot where it would go. */
static size_t hash_slot(const StIndex *ix, const char *name, uint32_t tag) {
    const Priv *pv = ix->priv;
    size_t i = tag & pv->mask;
    for (;;) {
        const Slot *sl = &pv->slots[i];
        if (!sl->idx) return i;
        if (sl->tag == tag && strcmp(ix->tensors[sl->idx - 1].name, name) == 0) return i;
        i = (i + 1) & pv->mask;
    }
}

/* Rebuild the table for the first n_keep slots' tensors (growth, or rollback after a
 * failed file: entries with idx > n_keep are dropped). Names are unique. */
static int rehash(StIndex *ix, size_t want, size_t n_keep) {
    Priv *pv = ix->priv;
    size_t ns = 1024;
    while (ns < want * 2) ns <<= 1;
    Slot *nsl = slots_alloc(ns);
    if (!nsl) return -1;
    Slot *old = pv->slots;
    size_t oldn = old ? pv->mask + 1 : 0;
    for (size_t k = 0; k < oldn; k++) {
        if (!old[k].idx || old[k].idx > n_keep) continue;
        size_t i = old[k].tag & (ns - 1);
        while (nsl[i].idx) i = (i + 1) & (ns - 1);
        nsl[i] = old[k];
    }
    free(old);
    pv->slots = nsl; pv->mask = ns - 1;
    return 0;
}

StIndex *st_new(void) {
    StIndex *ix = calloc(1, sizeof *ix);
    Priv *pv = calloc(1, sizeof *pv);
    if (!ix || !pv) { free(ix); free(pv); return NULL; }
    pthread_mutex_init(&pv->mu, NULL);
    ix->priv = pv;
    if (rehash(ix, 0, 0)) { free(pv); free(ix); return NULL; }
    return ix;
}

void st_close(StIndex *ix) {
    if (!ix) return;
    Priv *pv = ix->priv;
    for (int i = 0; i < ix->n_shards; i++) {
        if (ix->shards[i].fd >= 0) close(ix->shards[i].fd);
        free(ix->shards[i].path);
    }
    free(ix->shards);
    free(ix->tensors);
    if (pv) {
        PoolChunk *c = pv->pool;
        while (c) { PoolChunk *n = c->next; free(c); c = n; }
        free(pv->slots);
        free(pv->hbuf);
        pthread_mutex_destroy(&pv->mu);
        free(pv);
    }
    free(ix);
}

const StTensor *st_find(const StIndex *ix, const char *name) {
    if (!ix || !name) return NULL;
    const Priv *pv = ix->priv;
    uint32_t v = pv->slots[hash_slot(ix, name, name_tag(name, strlen(name)))].idx;
    return v ? &ix->tensors[v - 1] : NULL;
}

typedef struct { uint64_t begin, end; size_t k; } Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int get_u64(const Json *v, uint64_t *out) {
    if (!v || v->type != JSON_NUMBER || !v->is_integer || v->integer < 0) return -1;
    *out = (uint64_t)v->integer;
    return 0;
}

/* Validates one header entry; fills t (name not set). */
static int parse_entry(const char *fn, const char *name, const Json *e, uint64_t data_len,
                       StTensor *t, uint64_t *begin, uint64_t *end, char *err, size_t errlen) {
    if (!e || e->type != JSON_OBJECT) {
        seterr(err, errlen, "%s: tensor '%s': header entry is a %s, expected an object with "
               "dtype, shape, data_offsets; the file is corrupt — re-download it",
               fn, name, e ? json_type_name(e->type) : "?");
        return -1;
    }
    const Json *dt = NULL, *sh = NULL, *of = NULL;
    for (size_t i = 0; i < e->len; i++) {     /* one pass; later duplicates win */
        const char *k = e->keys[i];
        if (!strcmp(k, "dtype")) dt = e->items[i];
        else if (!strcmp(k, "shape")) sh = e->items[i];
        else if (!strcmp(k, "data_offsets")) of = e->items[i];
    }
    if (!dt || dt->type != JSON_STRING) {
        seterr(err, errlen, "%s: tensor '%s': 'dtype' is %s, expected a string; "
               "the file is corrupt — re-download it",
               fn, name, dt ? json_type_name(dt->type) : "missing");
        return -1;
    }
    size_t d = 0;
    while (d < N_DTYPES && strcmp(DTYPES[d].name, dt->str) != 0) d++;
    if (d == N_DTYPES) {
        char *q = json_quote(dt->str, dt->len);
        seterr(err, errlen, "%s: tensor '%s': unknown dtype %s "
               "(known: BF16 F16 F32 F64 I8 I16 I32 I64 U8 U16 U32 U64 BOOL)",
               fn, name, q ? q : "?");
        free(q);
        return -1;
    }
    t->dtype = DTYPES[d].t;
    if (!sh || sh->type != JSON_ARRAY) {
        seterr(err, errlen, "%s: tensor '%s': 'shape' is %s, expected an array of integers; "
               "the file is corrupt — re-download it",
               fn, name, sh ? json_type_name(sh->type) : "missing");
        return -1;
    }
    if (sh->len > 8) {
        seterr(err, errlen, "%s: tensor '%s': shape has %zu dimensions, at most 8 are supported",
               fn, name, sh->len);
        return -1;
    }
    t->ndim = (int)sh->len;
    uint64_t numel = 1; int ovf = 0;
    for (size_t i = 0; i < sh->len; i++) {
        uint64_t v;
        if (get_u64(sh->items[i], &v)) {
            seterr(err, errlen, "%s: tensor '%s': shape[%zu] is not a non-negative integer; "
                   "the file is corrupt — re-download it", fn, name, i);
            return -1;
        }
        t->shape[i] = (int64_t)v;
        if (v && numel > UINT64_MAX / v) ovf = 1; else numel *= v;
    }
    for (int i = t->ndim; i < 8; i++) t->shape[i] = 0;
    if (!of || of->type != JSON_ARRAY || of->len != 2 || get_u64(of->items[0], begin) ||
        get_u64(of->items[1], end)) {
        seterr(err, errlen, "%s: tensor '%s': 'data_offsets' must be [begin, end] with "
               "non-negative integers; the file is corrupt — re-download it", fn, name);
        return -1;
    }
    if (*begin > *end) {
        seterr(err, errlen, "%s: tensor '%s': data_offsets [%llu,%llu) has begin > end; "
               "the file is corrupt — re-download it",
               fn, name, (unsigned long long)*begin, (unsigned long long)*end);
        return -1;
    }
    size_t es = DTYPES[d].size;
    if (ovf || (numel && numel > UINT64_MAX / es) || numel * es != *end - *begin) {
        char shp[160]; size_t o = 0;
        shp[0] = 0;
        for (int i = 0; i < t->ndim && o < sizeof shp - 24; i++)
            o += (size_t)snprintf(shp + o, sizeof shp - o, "%s%lld", i ? "," : "",
                                  (long long)t->shape[i]);
        seterr(err, errlen, "%s: tensor '%s': shape [%s] of %s needs %s%llu bytes but "
               "data_offsets [%llu,%llu) span %llu; the file is corrupt — re-download it",
               fn, name, shp, DTYPES[d].name,
               ovf || (numel && numel > UINT64_MAX / es) ? "more than " : "",
               ovf || (numel && numel > UINT64_MAX / es) ? (unsigned long long)UINT64_MAX
                                                         : (unsigned long long)(numel * es),
               (unsigned long long)*begin, (unsigned long long)*end,
               (unsigned long long)(*end - *begin));
        return -1;
    }
    if (*end > data_len) {
        seterr(err, errlen, "%s: tensor '%s': data_offsets [%llu,%llu) exceed the data section "
               "(%llu bytes); the file is truncated or corrupt — re-download it",
               fn, name, (unsigned long long)*begin, (unsigned long long)*end,
               (unsigned long long)data_len);
        return -1;
    }
    t->nbytes = *end - *begin;
    return 0;
}

static int add_parsed(StIndex *ix, int shard, const char *fn, const Json *root, uint64_t data_start,
                      uint64_t file_size, char *err, size_t errlen) {
    Priv *pv = ix->priv;
    uint64_t data_len = file_size - data_start;
    size_t n = root->len;
    Span *sp = malloc((n ? n : 1) * sizeof *sp);
    if (!sp) { seterr(err, errlen, "%s: out of memory", fn); return -1; }
    if (ix->n_tensors + n > pv->cap_tensors) {
        size_t nc = pv->cap_tensors ? pv->cap_tensors : 4096;
        while (nc < ix->n_tensors + n) nc *= 2;
        StTensor *nt = big_alloc(nc * sizeof *nt);
        if (!nt) { free(sp); seterr(err, errlen, "%s: out of memory", fn); return -1; }
        if (ix->n_tensors) memcpy(nt, ix->tensors, ix->n_tensors * sizeof *nt);
        free(ix->tensors);
        ix->tensors = nt; pv->cap_tensors = nc;
    }
    if (ix->n_tensors + n > UINT32_MAX - 1) {
        free(sp); seterr(err, errlen, "%s: too many tensors", fn); return -1;
    }
    if ((ix->n_tensors + n) * 2 > pv->mask + 1 && rehash(ix, ix->n_tensors + n, ix->n_tensors)) {
        free(sp); seterr(err, errlen, "%s: out of memory", fn); return -1;
    }
    size_t base = ix->n_tensors, m = 0;
    int rc = 0;
    uint32_t *tags = malloc((n ? n : 1) * sizeof *tags);
    if (!tags) { free(sp); seterr(err, errlen, "%s: out of memory", fn); return -1; }
    for (size_t i = 0; i < n; i++) tags[i] = name_tag(root->keys[i], strlen(root->keys[i]));
    for (size_t i = 0; i < n && !rc; i++) {
        const char *name = root->keys[i];
        if (i + AHEAD < n) PREFETCH(&pv->slots[tags[i + AHEAD] & pv->mask]);
        if (!strcmp(name, "__metadata__")) continue;          /* free-form; ignored */
        if (has_control(name)) {
            control_err(err, errlen, fn, "tensor name", name,
                        "the file is corrupt — re-download it");
            rc = -1; break;
        }
        StTensor *t = &ix->tensors[base + m];
        uint64_t b, e;
        if (parse_entry(fn, name, root->items[i], data_len, t, &b, &e, err, errlen)) {
            rc = -1; break;
        }
        size_t nl = strlen(name);
        t->name = pool_strdup(pv, name, nl);
        if (!t->name) { seterr(err, errlen, "%s: out of memory", fn); rc = -1; break; }
        t->shard = shard;
        t->offset = data_start + b;
        uint32_t tag = tags[i];
        size_t s = hash_slot(ix, name, tag);
        if (pv->slots[s].idx) {
            const StTensor *o = &ix->tensors[pv->slots[s].idx - 1];
            if (o->shard == shard)
                seterr(err, errlen, "%s: tensor '%s' is listed twice in the header; "
                       "the file is corrupt — re-download it", fn, name);
            else
                seterr(err, errlen, "%s: tensor '%s' is also in %s; a tensor must be stored "
                       "once — check the checkpoint files",
                       fn, name, base_name(ix->shards[o->shard].path));
            rc = -1; break;
        }
        pv->slots[s].idx = (uint32_t)(base + m + 1);
        pv->slots[s].tag = tag;
        ix->n_tensors = base + m + 1;             /* so hash_slot can compare against it */
        sp[m].begin = b; sp[m].end = e; sp[m].k = base + m;
        m++;
    }
    if (!rc) {
        qsort(sp, m, sizeof *sp, span_cmp);
        for (size_t i = 1; i < m; i++) {
            if (sp[i].begin < sp[i - 1].end) {
                seterr(err, errlen, "%s: tensors '%s' [%llu,%llu) and '%s' [%llu,%llu) overlap "
                       "in the data section; the file is corrupt — re-download it",
                       fn, ix->tensors[sp[i - 1].k].name, (unsigned long long)sp[i - 1].begin,
                       (unsigned long long)sp[i - 1].end, ix->tensors[sp[i].k].name,
                       (unsigned long long)sp[i].begin, (unsigned long long)sp[i].end);
                rc = -1; break;
            }
        }
    }
    free(sp); free(tags);
    if (rc) { ix->n_tensors = base; rehash(ix, base, base); }   /* roll back this file */
    return rc;
}

int st_add_file(StIndex *ix, const char *path, char *err, size_t errlen) {
    Priv *pv = ix->priv;
    const char *fn = path;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { seterr(err, errlen, "%s: cannot open: %s", fn, strerror(errno)); return -1; }
    struct stat stt;
    if (fstat(fd, &stt) || !S_ISREG(stt.st_mode)) {
        seterr(err, errlen, "%s: not a regular file", fn); close(fd); return -1;
    }
    uint64_t fsz = (uint64_t)stt.st_size;
    unsigned char lb[8];
    if (fsz < 8 || k3_pread_full(fd, lb, 8, 0) != 8) {
        seterr(err, errlen, "%s: file is %llu bytes, too short for the 8-byte header length; "
               "the file is truncated — re-download it", fn, (unsigned long long)fsz);
        close(fd); return -1;
    }
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | lb[i];
    if (hl < 2 || hl > ST_MAX_HEADER) {
        seterr(err, errlen, "%s: header length %llu is not sane (must be 2..%llu bytes); "
               "not a safetensors file or corrupt — re-download it",
               fn, (unsigned long long)hl, (unsigned long long)ST_MAX_HEADER);
        close(fd); return -1;
    }
    if (hl > fsz - 8) {
        seterr(err, errlen, "%s: header length %llu runs past the end of the file (%llu bytes); "
               "the file is truncated — re-download it",
               fn, (unsigned long long)hl, (unsigned long long)fsz);
        close(fd); return -1;
    }
    if (pv->hcap < hl) {
        free(pv->hbuf);
        pv->hcap = 0;
        pv->hbuf = big_alloc((size_t)hl * 2);
        if (pv->hbuf) pv->hcap = (size_t)hl * 2;
    }
    char *buf = pv->hbuf;
    if (!buf) {
        seterr(err, errlen, "%s: out of memory for a %llu-byte header", fn, (unsigned long long)hl);
        close(fd); return -1;
    }
    int64_t got = k3_pread_full(fd, buf, hl, 8);
    close(fd);
    if (got != (int64_t)hl) {
        seterr(err, errlen, "%s: reading the %llu-byte header failed: %s", fn,
               (unsigned long long)hl, got < 0 ? strerror(errno) : "short read (file truncated?)");
        return -1;
    }
    char jerr[200];
    Json *root = json_parse(buf, (size_t)hl, jerr, sizeof jerr);
    if (!root) {
        seterr(err, errlen, "%s: header JSON is malformed (%s); "
               "the file is corrupt — re-download it", fn, jerr);
        return -1;
    }
    if (root->type != JSON_OBJECT) {
        seterr(err, errlen, "%s: header JSON is %s %s, expected an object; "
               "the file is corrupt — re-download it",
               fn, root->type == JSON_ARRAY || root->type == JSON_OBJECT ? "an" : "a",
               json_type_name(root->type));
        json_free(root); return -1;
    }
    if ((size_t)ix->n_shards + 1 > pv->cap_shards) {
        size_t nc = pv->cap_shards ? pv->cap_shards * 2 : 16;
        StShard *ns = realloc(ix->shards, nc * sizeof *ns);
        if (!ns) { json_free(root); seterr(err, errlen, "%s: out of memory", fn); return -1; }
        ix->shards = ns; pv->cap_shards = nc;
    }
    StShard *s = &ix->shards[ix->n_shards];
    s->path = strdup(path);
    s->file_size = fsz;
    s->data_start = 8 + hl;
    s->fd = -1;
    if (!s->path) { json_free(root); seterr(err, errlen, "%s: out of memory", fn); return -1; }
    int rc = add_parsed(ix, ix->n_shards, fn, root, s->data_start, fsz, err, errlen);
    json_free(root);
    if (rc) { free(s->path); return -1; }
    ix->n_shards++;
    return 0;
}

/* Opens (once) and returns the shard's fd; checks the file did not shrink since open. */
int st_shard_fd(StIndex *ix, int shard, char *err, size_t errlen) {
    if (!ix || shard < 0 || shard >= ix->n_shards) {
        seterr(err, errlen, "invalid shard %d", shard); return -1;
    }
    Priv *pv = ix->priv;
    StShard *s = &ix->shards[shard];
    pthread_mutex_lock(&pv->mu);
    int fd = s->fd;
    if (fd < 0) {
        fd = open(s->path, O_RDONLY | O_CLOEXEC);
        struct stat stt;
        if (fd < 0) seterr(err, errlen, "%s: cannot open: %s", s->path, strerror(errno));
        else if (fstat(fd, &stt) || (uint64_t)stt.st_size < s->file_size) {
            seterr(err, errlen, "%s: file is now %llu bytes, was %llu when indexed; "
                   "it was truncated or replaced — re-download it",
                   s->path, (unsigned long long)stt.st_size, (unsigned long long)s->file_size);
            close(fd); fd = -1;
        } else s->fd = fd;
    }
    pthread_mutex_unlock(&pv->mu);
    return fd;
}

int st_pread(StIndex *ix, int shard, uint64_t off, void *dst, uint64_t n,
             char *err, size_t errlen) {
    if (!ix || shard < 0 || shard >= ix->n_shards) {
        seterr(err, errlen, "st_pread: invalid shard %d", shard); return -1;
    }
    const StShard *s = &ix->shards[shard];
    if (off > s->file_size || n > s->file_size - off) {
        seterr(err, errlen,
               "%s: read of %llu bytes at offset %llu is past the end of the file (%llu bytes)",
               s->path, (unsigned long long)n, (unsigned long long)off,
               (unsigned long long)s->file_size);
        return -1;
    }
    int fd = st_shard_fd(ix, shard, err, errlen);
    if (fd < 0) return -1;
    int64_t got = k3_pread_full(fd, dst, n, off);
    if (got < 0) {
        seterr(err, errlen, "%s: read of %llu bytes at offset %llu failed: %s", s->path,
               (unsigned long long)n, (unsigned long long)off, strerror(errno));
        return -1;
    }
    if ((uint64_t)got != n) {
        seterr(err, errlen, "%s: short read at offset %llu: got %llu of %llu bytes; "
               "the file was truncated after opening — re-download it",
               s->path, (unsigned long long)off, (unsigned long long)got, (unsigned long long)n);
        return -1;
    }
    return 0;
}

int st_read(StIndex *ix, const StTensor *t, void *dst, char *err, size_t errlen) {
    if (!t) { seterr(err, errlen, "st_read: no tensor"); return -1; }
    char e2[768];
    if (st_pread(ix, t->shard, t->offset, dst, t->nbytes, e2, sizeof e2)) {
        seterr(err, errlen, "tensor '%s': %s", t->name, e2);
        return -1;
    }
    return 0;
}

/* ---- st_open: index file or single file ---------------------------------------- */

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t o = a;
    if (a && dir[a - 1] != '/') p[o++] = '/';
    memcpy(p + o, name, b + 1);
    return p;
}

static int read_file(const char *path, char **out, size_t *len, uint64_t limit,
                     char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { seterr(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    struct stat stt;
    if (fstat(fd, &stt) || !S_ISREG(stt.st_mode)) {
        seterr(err, errlen, "%s: not a regular file", path); close(fd); return -1;
    }
    if ((uint64_t)stt.st_size > limit) {
        seterr(err, errlen, "%s: %llu bytes is larger than the %llu-byte limit", path,
               (unsigned long long)stt.st_size, (unsigned long long)limit);
        close(fd); return -1;
    }
    size_t n = (size_t)stt.st_size;
    char *b = big_alloc(n);
    if (!b) { seterr(err, errlen, "%s: out of memory", path); close(fd); return -1; }
    int64_t got = k3_pread_full(fd, b, n, 0);
    close(fd);
    if (got != (int64_t)n) {
        seterr(err, errlen, "%s: read failed (short read)", path); free(b); return -1;
    }
    *out = b; *len = n;
    return 0;
}

typedef struct { const char *file; const char *example; int id; int text; } ShardName;

/* Vision weights of the multimodal release: a text engine never reads them, so a
 * shard holding nothing else is not even opened (a text-only download may lack it). */
static int is_vision(const char *name) {
    return !strncmp(name, "vision_tower.", 13) || !strncmp(name, "mm_projector.", 13);
}

static int shardname_cmp(const void *a, const void *b) {
    return strcmp(((const ShardName *)a)->file, ((const ShardName *)b)->file);
}

static StIndex *open_index(const char *dir, const char *ipath, char *err, size_t errlen) {
    const char *in = "model.safetensors.index.json";
    char *text; size_t tl;
    if (read_file(ipath, &text, &tl, ST_MAX_INDEX, err, errlen)) return NULL;
    char jerr[200];
    Json *root = json_parse(text, tl, jerr, sizeof jerr);
    free(text);
    if (!root) { seterr(err, errlen, "%s: malformed JSON (%s)", ipath, jerr); return NULL; }
    StIndex *ix = NULL;
    ShardName *sn = NULL; size_t nsn = 0;
    uint32_t *fslot = NULL; size_t fmask = 0;
    int *map = NULL, *sidx = NULL; unsigned char *seen = NULL; uint32_t *wtag = NULL;
    const Json *wm = json_get(root, "weight_map");
    if (root->type != JSON_OBJECT || !wm || wm->type != JSON_OBJECT) {
        seterr(err, errlen, "%s: missing the \"weight_map\" object; "
               "the index is corrupt — re-download it", ipath);
        goto fail;
    }
    if (wm->len == 0) { seterr(err, errlen, "%s: \"weight_map\" is empty", ipath); goto fail; }
    /* distinct shard files, via a small hash on the file name */
    size_t fs = 256;
    while (fs < wm->len * 2 && fs < 1u << 20) fs <<= 1;
    fmask = fs - 1;
    fslot = calloc(fs, sizeof *fslot);
    map = malloc(wm->len * sizeof *map);
    sn = malloc(sizeof *sn * (wm->len < (fs >> 1) ? wm->len : (fs >> 1)));
    if (!fslot || !map || !sn) { seterr(err, errlen, "%s: out of memory", ipath); goto fail; }
    for (size_t i = 0; i < wm->len; i++) {
        const Json *v = wm->items[i];
        if (has_control(wm->keys[i]) || (v->type == JSON_STRING && has_control(v->str))) {
            int k = has_control(wm->keys[i]);
            control_err(err, errlen, ipath, k ? "weight_map key" : "weight_map value",
                        k ? wm->keys[i] : v->str, "the index is corrupt — re-download it");
            goto fail;
        }
        if (v->type != JSON_STRING) {
            seterr(err, errlen, "%s: weight_map['%s'] is a %s, expected a shard file name",
                   ipath, wm->keys[i], json_type_name(v->type));
            goto fail;
        }
        const char *f = v->str;
        if (!f[0] || strlen(f) != v->len || strchr(f, '/') || !strcmp(f, ".") ||
            !strcmp(f, "..")) {
            seterr(err, errlen, "%s: weight_map['%s'] = '%s' is not a plain file name "
                   "in the checkpoint directory", ipath, wm->keys[i], f);
            goto fail;
        }
        size_t h = (size_t)hash_name(f, v->len) & fmask;
        while (fslot[h] && strcmp(sn[fslot[h] - 1].file, f)) h = (h + 1) & fmask;
        if (!fslot[h]) {
            if (nsn >= (fs >> 1)) {
                seterr(err, errlen, "%s: too many distinct shard files", ipath); goto fail;
            }
            sn[nsn].file = f; sn[nsn].example = wm->keys[i]; sn[nsn].text = 0;
            fslot[h] = (uint32_t)++nsn;
        }
        map[i] = (int)fslot[h] - 1;
        if (!is_vision(wm->keys[i])) sn[map[i]].text = 1;
    }
    /* shard ids follow file-name order */
    for (size_t i = 0; i < nsn; i++) sn[i].id = (int)i;
    ShardName *sorted = malloc(nsn * sizeof *sorted);
    int *rank = malloc(nsn * sizeof *rank);
    if (!sorted || !rank) {
        free(sorted); free(rank); seterr(err, errlen, "%s: out of memory", ipath); goto fail;
    }
    memcpy(sorted, sn, nsn * sizeof *sorted);
    qsort(sorted, nsn, sizeof *sorted, shardname_cmp);
    for (size_t i = 0; i < nsn; i++) rank[sorted[i].id] = (int)i;
    for (size_t i = 0; i < wm->len; i++) map[i] = rank[map[i]];
    memcpy(sn, sorted, nsn * sizeof *sn);
    free(sorted); free(rank);

    ix = st_new();
    if (!ix) { seterr(err, errlen, "out of memory"); goto fail; }
    {   /* size the tables once from the weight_map */
        Priv *p0 = ix->priv;
        ix->tensors = big_alloc(wm->len * sizeof *ix->tensors);
        if (!ix->tensors || rehash(ix, wm->len, 0)) {
            seterr(err, errlen, "out of memory"); goto fail;
        }
        p0->cap_tensors = wm->len;
    }
    sidx = malloc(nsn * sizeof *sidx);
    if (!sidx) { seterr(err, errlen, "out of memory"); goto fail; }
    for (size_t i = 0; i < nsn; i++) {
        sidx[i] = -1;
        if (!sn[i].text) continue;                /* vision only: skipped */
        sidx[i] = ix->n_shards;
        char *p = path_join(dir, sn[i].file);
        if (!p) { seterr(err, errlen, "out of memory"); goto fail; }
        struct stat stt;
        if (stat(p, &stt)) {
            seterr(err, errlen, "%s: names shard '%s' (e.g. for tensor '%s') but %s is missing "
                   "(%s) — download it", ipath, sn[i].file, sn[i].example, p, strerror(errno));
            free(p); goto fail;
        }
        int rc = st_add_file(ix, p, err, errlen);
        free(p);
        if (rc) goto fail;
    }
    /* weight_map -> headers: every mapped tensor is in the named shard, once */
    seen = calloc(ix->n_tensors ? ix->n_tensors : 1, 1);
    if (!seen) { seterr(err, errlen, "out of memory"); goto fail; }
    wtag = malloc(wm->len * sizeof *wtag);
    if (!wtag) { seterr(err, errlen, "out of memory"); goto fail; }
    for (size_t i = 0; i < wm->len; i++) wtag[i] = name_tag(wm->keys[i], strlen(wm->keys[i]));
    Priv *pv = ix->priv;
    for (size_t i = 0; i < wm->len; i++) {
        const char *name = wm->keys[i];
        if (i + AHEAD < wm->len) PREFETCH(&pv->slots[wtag[i + AHEAD] & pv->mask]);
        if (sidx[map[i]] < 0) continue;
        uint32_t v = pv->slots[hash_slot(ix, name, wtag[i])].idx;
        const StTensor *t = v ? &ix->tensors[v - 1] : NULL;
        const char *want = sn[map[i]].file;
        if (!t) {
            seterr(err, errlen, "%s: %s maps tensor '%s' to it, but its header does not list "
                   "that tensor; the index and shards disagree — re-download them",
                   want, in, name);
            goto fail;
        }
        if (t->shard != sidx[map[i]]) {
            seterr(err, errlen, "%s: maps tensor '%s' to %s, but it is stored in %s; "
                   "the index and shards disagree — re-download them",
                   ipath, name, want, base_name(ix->shards[t->shard].path));
            goto fail;
        }
        size_t k = (size_t)(t - ix->tensors);
        if (seen[k]) {
            seterr(err, errlen, "%s: tensor '%s' is listed twice in weight_map", ipath, name);
            goto fail;
        }
        seen[k] = 1;
    }
    /* headers -> weight_map: no tensor the index does not know about */
    for (size_t k = 0; k < ix->n_tensors; k++) {
        if (!seen[k]) {
            seterr(err, errlen, "%s: tensor '%s' is not listed in %s's weight_map; "
                   "the index and shards disagree — re-download them",
                   base_name(ix->shards[ix->tensors[k].shard].path), ix->tensors[k].name, in);
            goto fail;
        }
    }
    free(seen); free(fslot); free(map); free(sn); free(wtag); free(sidx);
    json_free(root);
    return ix;
fail:
    free(seen); free(fslot); free(map); free(sn); free(wtag); free(sidx);
    json_free(root);
    st_close(ix);
    return NULL;
}

StIndex *st_open(const char *dir, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    char *ip = path_join(dir, "model.safetensors.index.json");
    char *sp = path_join(dir, "model.safetensors");
    StIndex *ix = NULL;
    struct stat stt;
    if (!ip || !sp) seterr(err, errlen, "out of memory");
    else if (stat(ip, &stt) == 0) ix = open_index(dir, ip, err, errlen);
    else if (stat(sp, &stt) == 0) {
        ix = st_new();
        if (!ix) seterr(err, errlen, "out of memory");
        else if (st_add_file(ix, sp, err, errlen)) { st_close(ix); ix = NULL; }
        else if (ix->n_tensors == 0) {
            seterr(err, errlen, "%s: holds no tensors", sp); st_close(ix); ix = NULL;
        }
    } else {
        seterr(err, errlen, "%s: neither model.safetensors.index.json nor model.safetensors "
               "found; pass the checkpoint directory", dir);
    }
    free(ip); free(sp);
    return ix;
}
