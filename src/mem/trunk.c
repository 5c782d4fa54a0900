/* trunk.c — the packed trunk (`k3 pack`, pack.c): every non-routed text tensor in one
 * file, each layer contiguous at a 4096-aligned offset. The first N layers that fit
 * the trunk budget are read once and pinned; the rest cycle through a ring of slots
 * filled by a background reader thread (layer L+1 is read while layer L computes),
 * O_DIRECT where the filesystem allows it, buffered otherwise (and said so).
 * K3Layer matrices are rebound to point into the pinned buffers or the ring slots;
 * vectors stay the f32 copies model.c made. A failed trunk read exits 1.
 *
 * File: "K3TRUNK1", u64 LE index length, the text index, data from the next 4096
 * boundary. Index lines: "k3trunk 1", "fingerprint HEX", "file_size N", "layers N",
 * then "t LAYER OFFSET NBYTES DTYPE NDIM D0.. NAME" (LAYER -1 = global tensors). */
#include "mem.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { size_t field; uint64_t rel; } Bind;
typedef struct { unsigned char *buf; K3Layer ly; } RingSlot;

struct K3Trunk {
    char path[4300];
    int fd, dfd, NL;
    uint64_t *off, *len;                      /* per layer: blob offset and padded length */
    Bind **bind; int *nbind;
    unsigned char **pinned;                   /* [NL] pinned blob or NULL */
    int n_pinned, ring, S;
    int *slot_of; long last_seq[2];           /* streamed layer i -> slot; last sequence number placed in a slot */
    RingSlot *slots;
    pthread_t th; int started, quit;
    pthread_mutex_t mu; pthread_cond_t cv;
    long rel_seq, ready_seq, cons_seq, err_seq;
    char err[600];
    K3MemStats *st;
    long nreads, fault_n;
};

static uint64_t up4k(uint64_t x) { return (x + 4095) & ~(uint64_t)4095; }

/* K3Mat fields of a layer and their tensor names. kind: 0 any, 1 KDA, 2 MLA, 3 dense MLP, 4 MoE */
static const struct { size_t field; const char *suffix; int kind; } MATS[] = {
    { offsetof(K3Layer, q), "self_attn.q_proj.weight", 1 }, { offsetof(K3Layer, k), "self_attn.k_proj.weight", 1 },
    { offsetof(K3Layer, v), "self_attn.v_proj.weight", 1 }, { offsetof(K3Layer, f_a), "self_attn.f_a_proj.weight", 1 },
    { offsetof(K3Layer, f_b), "self_attn.f_b_proj.weight", 1 }, { offsetof(K3Layer, b), "self_attn.b_proj.weight", 1 },
    { offsetof(K3Layer, g), "self_attn.g_proj.weight", 0 }, { offsetof(K3Layer, o), "self_attn.o_proj.weight", 0 },
    { offsetof(K3Layer, q_a), "self_attn.q_a_proj.weight", 2 }, { offsetof(K3Layer, q_b), "self_attn.q_b_proj.weight", 2 },
    { offsetof(K3Layer, kv_a), "self_attn.kv_a_proj_with_mqa.weight", 2 }, { offsetof(K3Layer, kv_b), "self_attn.kv_b_proj.weight", 2 },
    { offsetof(K3Layer, gate), "mlp.gate_proj.weight", 3 }, { offsetof(K3Layer, up), "mlp.up_proj.weight", 3 },
    { offsetof(K3Layer, down), "mlp.down_proj.weight", 3 },
    { offsetof(K3Layer, gate), "block_sparse_moe.shared_experts.gate_proj.weight", 4 },
    { offsetof(K3Layer, up), "block_sparse_moe.shared_experts.up_proj.weight", 4 },
    { offsetof(K3Layer, down), "block_sparse_moe.shared_experts.down_proj.weight", 4 },
    { offsetof(K3Layer, router), "block_sparse_moe.gate.weight", 4 },
    { offsetof(K3Layer, lat_down), "block_sparse_moe.routed_expert_down_proj.weight", 4 },
    { offsetof(K3Layer, lat_up), "block_sparse_moe.routed_expert_up_proj.weight", 4 },
};
#define NMATS (sizeof MATS / sizeof MATS[0])

static int applies(int kind, const K3Layer *ly) {
    return kind == 0 || (kind == 1 && ly->is_kda) || (kind == 2 && !ly->is_kda) ||
           (kind == 3 && !ly->is_moe) || (kind == 4 && ly->is_moe);
}

uint64_t k3_trunk_layer_bytes(const K3Trunk *t, int L) { return t->len[L]; }

#define STALE "; re-run k3 pack MODEL_DIR TRUNK_DIR"

K3Trunk *k3_trunk_open(K3Model *m, const char *dir, char *err, size_t errlen) {
    K3Trunk *t = calloc(1, sizeof *t);
    char *ix = NULL;
    if (!t) { snprintf(err, errlen, "out of memory"); return NULL; }
    t->fd = t->dfd = -1; t->NL = m->cfg.num_hidden_layers;
    snprintf(t->path, sizeof t->path, "%s/trunk.k3", dir);
    t->off = calloc(t->NL, sizeof(uint64_t)); t->len = calloc(t->NL, sizeof(uint64_t));
    t->bind = calloc(t->NL, sizeof(Bind *)); t->nbind = calloc(t->NL, sizeof(int));
    t->pinned = calloc(t->NL, sizeof(unsigned char *));
    uint64_t *end = calloc(t->NL, sizeof(uint64_t));
    if (!t->off || !t->len || !t->bind || !t->nbind || !t->pinned || !end) { snprintf(err, errlen, "out of memory"); goto fail; }
    t->fd = open(t->path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0) { snprintf(err, errlen, "--trunk %s: cannot open %s: %s (create it with: k3 pack MODEL_DIR %s)", dir, t->path, strerror(errno), dir); goto fail; }
    unsigned char hdr[16];
    struct stat sb;
    if (fstat(t->fd, &sb) || k3_pread_full(t->fd, hdr, 16, 0) != 16 || memcmp(hdr, "K3TRUNK1", 8)) {
        snprintf(err, errlen, "%s: not a k3 trunk file (bad magic or too short)" STALE, t->path); goto fail;
    }
    uint64_t ilen = 0;
    for (int i = 0; i < 8; i++) ilen |= (uint64_t)hdr[8 + i] << (8 * i);
    if (ilen > (uint64_t)sb.st_size || ilen > (1u << 30)) { snprintf(err, errlen, "%s: index length %llu is past the end of the file; the trunk is truncated or corrupt" STALE, t->path, (unsigned long long)ilen); goto fail; }
    ix = malloc(ilen + 1);
    if (!ix || k3_pread_full(t->fd, ix, ilen, 16) != (int64_t)ilen) { snprintf(err, errlen, "%s: cannot read the index" STALE, t->path); goto fail; }
    ix[ilen] = 0;
    unsigned long long fp = 0, fsz = 0; int nl = -1, ver = 0;
    char *save = NULL;
    uint64_t want_fp = k3_model_fingerprint(m->dir, m->st);
    for (char *line = strtok_r(ix, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (sscanf(line, "k3trunk %d", &ver) == 1) continue;
        if (sscanf(line, "fingerprint %llx", &fp) == 1) {
            if (fp != want_fp) { snprintf(err, errlen, "%s was packed from a different checkpoint or config.json (fingerprint %016llx, %s has %016llx)" STALE, t->path, fp, m->dir, (unsigned long long)want_fp); goto fail; }
            continue;
        }
        if (sscanf(line, "file_size %llu", &fsz) == 1) {
            if (fsz != (unsigned long long)sb.st_size) { snprintf(err, errlen, "%s is %llu bytes, its index says %llu: the trunk is truncated or was modified" STALE, t->path, (unsigned long long)sb.st_size, fsz); goto fail; }
            continue;
        }
        if (sscanf(line, "layers %d", &nl) == 1) {
            if (nl != t->NL) { snprintf(err, errlen, "%s has %d layers, config.json %d" STALE, t->path, nl, t->NL); goto fail; }
            continue;
        }
        int L, nd, pos = 0; unsigned long long off, nb; char dt[16];
        if (sscanf(line, "t %d %llu %llu %15s %d%n", &L, &off, &nb, dt, &nd, &pos) != 5 || L < -1 || L >= t->NL || nd < 0 || nd > 8) {
            snprintf(err, errlen, "%s: malformed index line '%.80s'" STALE, t->path, line); goto fail;
        }
        const char *p = line + pos;
        for (int i = 0; i < nd; i++) { while (*p == ' ') p++; while (*p && *p != ' ') p++; }
        while (*p == ' ') p++;
        const StTensor *src = st_find(m->st, p);
        if (!src || src->nbytes != nb || strcmp(st_dtype_name(src->dtype), dt) || off + nb > fsz || !fp) {
            snprintf(err, errlen, "%s: tensor '%s' does not match the checkpoint (missing, resized, out of range or no fingerprint)" STALE, t->path, p); goto fail;
        }
        if (L < 0) continue;
        if (!end[L] || off < t->off[L]) t->off[L] = off;
        if (off + nb > end[L]) end[L] = off + nb;
        /* remember the offset of this tensor for binding below */
        const char *suf = strstr(p, "model.layers.");
        if (suf) { suf = strchr(suf + 13, '.'); if (suf) suf++; }
        for (size_t i = 0; suf && i < NMATS; i++)
            if (!strcmp(MATS[i].suffix, suf) && applies(MATS[i].kind, &m->layers[L])) {
                Bind *b = realloc(t->bind[L], sizeof(Bind) * (t->nbind[L] + 1));
                if (!b) { snprintf(err, errlen, "out of memory"); goto fail; }
                t->bind[L] = b;
                b[t->nbind[L]].field = MATS[i].field; b[t->nbind[L]].rel = off;   /* absolute for now */
                t->nbind[L]++;
                const K3Mat *M = (const K3Mat *)((const char *)&m->layers[L] + MATS[i].field);
                uint64_t want = (uint64_t)M->rows * M->cols * (M->type == K3_W_F32 ? 4 : 2);
                if (want != nb) { snprintf(err, errlen, "%s: tensor '%s' has %llu bytes, the model expects %llu" STALE, t->path, p, nb, (unsigned long long)want); goto fail; }
            }
    }
    if (!fp || !fsz || nl < 0) { snprintf(err, errlen, "%s: index lacks fingerprint/file_size/layers" STALE, t->path); goto fail; }
    for (int L = 0; L < t->NL; L++) {
        int need = 0;
        for (size_t i = 0; i < NMATS; i++) need += applies(MATS[i].kind, &m->layers[L]);
        if (t->nbind[L] != need || !end[L] || t->off[L] % 4096) { snprintf(err, errlen, "%s: layer %d is incomplete or misaligned in the trunk" STALE, t->path, L); goto fail; }
        t->len[L] = up4k(end[L] - t->off[L]);
        if (t->off[L] + t->len[L] > fsz) { snprintf(err, errlen, "%s: layer %d runs past the end of the file" STALE, t->path, L); goto fail; }
        for (int i = 0; i < t->nbind[L]; i++) t->bind[L][i].rel -= t->off[L];
    }
    free(ix); free(end);
    const char *f = getenv("K3_FAULT_TRUNK_READ");
    t->fault_n = f ? atol(f) : 0;
    return t;
fail:
    free(ix); free(end);
    k3_trunk_close(t);
    return NULL;
}

static int read_layer(K3Trunk *t, int L, unsigned char *buf, char *err, size_t errlen) {
    long nr = __atomic_add_fetch(&t->nreads, 1, __ATOMIC_SEQ_CST);
    if (nr == t->fault_n) { snprintf(err, errlen, "%s: injected failure of trunk read %ld (layer %d, K3_FAULT_TRUNK_READ)", t->path, nr, L); return -1; }
    int64_t got = -1;
    if (t->dfd >= 0) {
        got = k3_pread_full(t->dfd, buf, t->len[L], t->off[L]);
        if (got < 0 && errno == EINVAL) {
            fprintf(stderr, "k3: note: O_DIRECT reads fail on %s (EINVAL); the trunk uses buffered reads\n", t->path);
            close(t->dfd); t->dfd = -1;
        }
    }
    if (t->dfd < 0) got = k3_pread_full(t->fd, buf, t->len[L], t->off[L]);
    if (got < 0 || (uint64_t)got != t->len[L]) {
        snprintf(err, errlen, "%s: reading layer %d (%llu bytes at %llu): %s" STALE, t->path, L, (unsigned long long)t->len[L],
                 (unsigned long long)t->off[L], got < 0 ? strerror(errno) : "short read (the trunk is truncated)");
        return -1;
    }
    return 0;
}

static void rebind(const K3Trunk *t, int L, K3Layer *ly, const unsigned char *blob) {
    for (int i = 0; i < t->nbind[L]; i++) {
        K3Mat *M = (K3Mat *)((char *)ly + t->bind[L][i].field);
        M->w = blob + t->bind[L][i].rel;
    }
}

static void *reader(void *arg) {
    K3Trunk *t = arg;
    char err[600];
    pthread_mutex_lock(&t->mu);
    for (long k = 0;; k++) {
        const int i = (int)(k % t->S), sl = t->slot_of[i];
        while (!t->quit && t->last_seq[sl] >= t->rel_seq) pthread_cond_wait(&t->cv, &t->mu);   /* slot still in use */
        if (t->quit) break;
        t->last_seq[sl] = k;
        int L = t->n_pinned + i;
        pthread_mutex_unlock(&t->mu);
        double t0 = k3_now();
        int rc = read_layer(t, L, t->slots[sl].buf, err, sizeof err);
        double t1 = k3_now();
        pthread_mutex_lock(&t->mu);
        t->st->trunk_read_s += t1 - t0;
        if (rc) { if (t->err_seq < 0) { t->err_seq = k; snprintf(t->err, sizeof t->err, "%s", err); } }
        else { t->st->trunk_bytes += t->len[L]; t->st->trunk_reads++; }
        t->ready_seq = k + 1;
        pthread_cond_broadcast(&t->cv);
        if (rc) break;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

uint64_t k3_ring_layout(const uint64_t *len, int S, int *slot_of, uint64_t *slot_bytes) {
    uint64_t sb[2] = { 0, 0 }, best = 0, best_stall = 0;
    int bj = 0;
    if (S <= 0) { if (slot_bytes) slot_bytes[0] = slot_bytes[1] = 0; return 0; }
    if (S % 2 == 0 || S == 1) {
        for (int i = 0; i < S; i++) if (len[i] > sb[i % 2]) sb[i % 2] = len[i];
        for (int i = 0; slot_of && i < S; i++) slot_of[i] = i % 2;
    } else {
        /* layer (j + k) mod S takes slot k mod 2: layers j-1 and j share slot 0 */
        for (int j = 0; j < S; j++) {
            uint64_t m2[2] = { 0, 0 };
            for (int k = 0; k < S; k++) if (len[(j + k) % S] > m2[k % 2]) m2[k % 2] = len[(j + k) % S];
            if (j == 0 || m2[0] + m2[1] < best || (m2[0] + m2[1] == best && len[j] < best_stall)) {
                best = m2[0] + m2[1]; best_stall = len[j]; bj = j; sb[0] = m2[0]; sb[1] = m2[1];
            }
        }
        for (int k = 0; slot_of && k < S; k++) slot_of[(bj + k) % S] = k % 2;
    }
    if (slot_bytes) { slot_bytes[0] = sb[0]; slot_bytes[1] = sb[1]; }
    return sb[0] + sb[1];
}

int k3_trunk_start(K3Model *m, K3Trunk *t, int n_pinned, K3MemStats *st, char *err, size_t errlen) {
    t->st = st; t->n_pinned = n_pinned; t->S = t->NL - n_pinned; t->ring = t->S ? (t->S >= 2 ? 2 : 1) : 0;
    t->err_seq = -1; t->last_seq[0] = t->last_seq[1] = -1;
    t->dfd = open(t->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (t->dfd < 0) fprintf(stderr, "k3: note: O_DIRECT is not available for %s (%s); the trunk uses buffered reads\n", t->path, strerror(errno));
    for (int L = 0; L < n_pinned; L++) {
        if (posix_memalign((void **)&t->pinned[L], 4096, t->len[L])) { t->pinned[L] = NULL; snprintf(err, errlen, "out of memory pinning trunk layer %d", L); return K3_ERR_RUNTIME; }
        if (read_layer(t, L, t->pinned[L], err, errlen)) return K3_ERR_RUNTIME;
        st->trunk_load_bytes += t->len[L];
        rebind(t, L, &m->layers[L], t->pinned[L]);
    }
    if (!t->S) return 0;
    t->slots = calloc(t->ring, sizeof(RingSlot));
    t->slot_of = calloc(t->S, sizeof(int));
    if (!t->slots || !t->slot_of) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    uint64_t sb[2];
    k3_ring_layout(t->len + n_pinned, t->S, t->slot_of, sb);
    for (int r = 0; r < t->ring; r++) {
        uint64_t mx = sb[r];
        if (posix_memalign((void **)&t->slots[r].buf, 4096, mx)) { t->slots[r].buf = NULL; snprintf(err, errlen, "out of memory for the trunk ring (slot of %.3f GB)", mx / K3_GB); return K3_ERR_RUNTIME; }
    }
    pthread_mutex_init(&t->mu, NULL); pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->th, NULL, reader, t)) { snprintf(err, errlen, "cannot start the trunk reader thread"); return K3_ERR_RUNTIME; }
    t->started = 1;
    return 0;
}

const K3Layer *k3_trunk_acquire(K3Model *m, K3Trunk *t, int L, K3MemStats *st) {
    if (L < t->n_pinned) return &m->layers[L];
    pthread_mutex_lock(&t->mu);
    int want = t->n_pinned + (int)(t->cons_seq % t->S);
    if (L != want) {
        fprintf(stderr, "k3: internal error: trunk layer %d acquired out of order (expected %d)\n", L, want);
        exit(K3_ERR_RUNTIME);
    }
    double t0 = k3_now();
    while (t->ready_seq <= t->cons_seq) pthread_cond_wait(&t->cv, &t->mu);
    st->io_wait_s += k3_now() - t0;
    if (t->err_seq >= 0 && t->err_seq <= t->cons_seq) {
        fprintf(stderr, "k3: trunk read failed: %s\n", t->err);
        exit(K3_ERR_RUNTIME);
    }
    RingSlot *s = &t->slots[t->slot_of[t->cons_seq % t->S]];
    pthread_mutex_unlock(&t->mu);
    s->ly = m->layers[L];
    rebind(t, L, &s->ly, s->buf);
    return &s->ly;
}

void k3_trunk_release(K3Trunk *t, int L) {
    if (L < t->n_pinned) return;
    pthread_mutex_lock(&t->mu);
    t->cons_seq++;
    t->rel_seq = t->cons_seq;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void k3_trunk_describe(const K3Trunk *t, char *buf, size_t n) {
    snprintf(buf, n, "%s: %d layers pinned, %d streamed through a ring of %d slots (%s)", t->path, t->n_pinned, t->S, t->ring,
             t->dfd >= 0 ? "O_DIRECT" : "buffered");
}

void k3_trunk_close(K3Trunk *t) {
    if (!t) return;
    if (t->started) {
        pthread_mutex_lock(&t->mu); t->quit = 1; pthread_cond_broadcast(&t->cv); pthread_mutex_unlock(&t->mu);
        pthread_join(t->th, NULL);
        pthread_mutex_destroy(&t->mu); pthread_cond_destroy(&t->cv);
    }
    if (t->slots) for (int r = 0; r < t->ring; r++) free(t->slots[r].buf);
    if (t->pinned) for (int L = 0; L < t->NL; L++) free(t->pinned[L]);
    if (t->bind) for (int L = 0; L < t->NL; L++) free(t->bind[L]);
    if (t->fd >= 0) close(t->fd);
    if (t->dfd >= 0) close(t->dfd);
    free(t->slots); free(t->slot_of); free(t->pinned); free(t->bind); free(t->nbind); free(t->off); free(t->len);
    free(t);
}

/* ---- lm_head in row blocks ----
 * Small budgets do not keep the 2.35 GB lm_head resident: each forward reads it in
 * blocks of rows (O_DIRECT, aligned window) into one bounded buffer and multiplies
 * block by block. k3_matmul splits over output rows only, so every logit has the
 * bits of the resident product. */
struct K3Head {
    int shard, dfd, rows, cols, type, block;   /* block = rows per read */
    uint64_t off, row_bytes;
    unsigned char *buf; uint64_t buflen;
    float *tmp; int tmp_T;
};

static const StTensor *head_tensor(const K3Model *m) {
    const StTensor *t = st_find(m->st, "language_model.lm_head.weight");
    return t ? t : st_find(m->st, "lm_head.weight");
}

K3Head *k3_head_open(K3Model *m, uint64_t buf_bytes, char *err, size_t errlen) {
    const StTensor *t = head_tensor(m);
    K3Head *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (!t) { snprintf(err, errlen, "%s: no lm_head.weight tensor", m->dir); free(h); return NULL; }
    h->shard = t->shard; h->off = t->offset; h->rows = m->lm_head.rows; h->cols = m->lm_head.cols; h->type = m->lm_head.type;
    h->row_bytes = (uint64_t)h->cols * (h->type == K3_W_F32 ? 4 : 2);
    uint64_t rows = buf_bytes / h->row_bytes;
    const char *e = getenv("K3_LMHEAD_ROWS");
    if (e && atol(e) > 0) rows = (uint64_t)atol(e);
    if (rows < 1) rows = 1;
    if (rows > (uint64_t)h->rows) rows = (uint64_t)h->rows;
    h->block = (int)rows;
    h->buflen = up4k(rows * h->row_bytes) + 8192;
    if (posix_memalign((void **)&h->buf, 4096, h->buflen)) { h->buf = NULL; snprintf(err, errlen, "out of memory for the lm_head buffer"); free(h); return NULL; }
    h->dfd = open(m->st->shards[h->shard].path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    return h;
}

void k3_head_close(K3Head *h) {
    if (!h) return;
    if (h->dfd >= 0) close(h->dfd);
    free(h->buf); free(h->tmp); free(h);
}

int k3_head_matmul(K3Model *m, K3Head *h, float *Y, const float *X, int T, K3MemStats *st) {
    char err[300];
    for (int r0 = 0; r0 < h->rows; r0 += h->block) {
        const int nb = h->rows - r0 < h->block ? h->rows - r0 : h->block;
        const uint64_t start = h->off + (uint64_t)r0 * h->row_bytes, n = (uint64_t)nb * h->row_bytes;
        const unsigned char *data = NULL;
        double t0 = k3_now();
        if (h->dfd >= 0) {
            uint64_t a0 = start & ~(uint64_t)4095, len = up4k(start + n - a0);
            int64_t got = k3_pread_full(h->dfd, h->buf, len, a0);
            if (got < 0 && errno == EINVAL) { close(h->dfd); h->dfd = -1; }
            else if (got >= 0 && (uint64_t)got >= start + n - a0) {
                data = h->buf + (start - a0);
                if ((uintptr_t)data % 4) { memmove(h->buf, data, n); data = h->buf; }
                if (st) st->trunk_bytes += len, st->head_bytes += len;
            }
        }
        if (!data) {
            int fd = st_shard_fd(m->st, h->shard, err, sizeof err);
            if (fd < 0 || k3_pread_full(fd, h->buf, n, start) != (int64_t)n) {
                fprintf(stderr, "k3: reading lm_head rows %d..%d from %s failed: %s\n", r0, r0 + nb - 1,
                        m->st->shards[h->shard].path, fd < 0 ? err : strerror(errno));
                exit(K3_ERR_RUNTIME);
            }
            data = h->buf;
            if (st) st->trunk_bytes += n, st->head_bytes += n;
        }
        if (st) st->trunk_read_s += k3_now() - t0;
        K3Mat W = { h->type, nb, h->cols, data, NULL };
        if (T == 1) { k3_matmul(Y + r0, &W, X, 1); continue; }
        if (h->tmp_T < T) {
            free(h->tmp);
            h->tmp = malloc(sizeof(float) * (size_t)T * h->block);
            if (!h->tmp) { fprintf(stderr, "k3: out of memory (lm_head block of %d tokens)\n", T); exit(K3_ERR_RUNTIME); }
            h->tmp_T = T;
        }
        k3_matmul(h->tmp, &W, X, T);
        for (int t = 0; t < T; t++)
            memcpy(Y + (size_t)t * h->rows + r0, h->tmp + (size_t)t * nb, sizeof(float) * nb);
    }
    return 0;
}
