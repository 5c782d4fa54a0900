/* trunk.c — the packed trunk (`k3 pack`, cli/pack.c): every non-routed text tensor in
 * one file, each layer contiguous at a 4096-aligned offset. The first N layers that fit
 * the trunk budget are read once and pinned; the rest cycle through a ring of slots
 * filled by a background reader thread (layer L+1 is read while layer L computes),
 * through dio.h (O_DIRECT where the filesystem allows it). K3Layer matrices are
 * rebound to point into the pinned buffers or the ring slots (the tensor table of
 * tensors.h says which); vectors stay the f32 copies model.c made. A failed trunk read
 * fails the forward pass that needed the layer, with the reason.
 *
 * Every tensor carries an XXH64 checksum in the index: a pinned layer is verified once
 * when it is read (a flipped byte is refused, naming the tensor, instead of running with
 * different logits), a streamed one on every read with --verify-reads, and the whole
 * file by k3_trunk_check (`k3 doctor --trunk`).
 *
 * File: "K3TRUNK1", u64 LE index length, the text index, data from the next 4096
 * boundary. Index lines: "k3trunk 2" (first), "fingerprint HEX", "file_size N",
 * "layers N", then "t LAYER OFFSET NBYTES XXH64 DTYPE NDIM D0.. NAME" (LAYER -1 = global
 * tensors; XXH64 = 16 hex digits of the tensor's bytes). Format 1 had no checksums and
 * is refused with "re-run k3 pack". Format 3 (k3 pack --compress) adds a word after DTYPE:
 * "raw", or "bc1" for a BF16 layer matrix stored coded (codec.h): NBYTES and XXH64 are
 * then those of the stored bytes, the matrix is bound as K3_W_BF16C and stays coded in
 * RAM (pinned or in the ring), its structure checked each time its bytes are read. */
#include "internal.h"
#include "codec.h"
#include "dio.h"
#include "fault.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { size_t field; uint64_t rel, n; int coded, piece; } Bind;  /* coded: codec.h */
typedef struct { int layer; uint64_t off, n, sum; const char *name; } Piece;   /* one tensor */
typedef struct { unsigned char *buf; K3Layer ly; } RingSlot;

struct K3Trunk {
    K3Model *m;
    char path[4300];
    K3DioFile file;
    int fd, NL;
    uint64_t *off, *len;                      /* per layer: blob offset and padded length */
    Bind **bind; int *nbind;
    Piece *piece; int npiece;                 /* every tensor of the index, absolute offsets */
    int verify_reads;                         /* --verify-reads: check streamed layers too */
    unsigned char **pinned;                   /* [NL] pinned blob or NULL */
    int n_pinned, ring, n_streamed;
    int *slot_of;                             /* streamed layer i -> ring slot */
    long last_seq[2];                         /* last sequence number placed in each slot */
    RingSlot *slots;
    pthread_t th; int started, quit;
    pthread_mutex_t mu; pthread_cond_t cv;
    long rel_seq, ready_seq, cons_seq, err_seq;
    char err[600];
    K3MemStats *st;
    long nreads;
};

uint64_t k3_trunk_layer_bytes(const K3Trunk *t, int L) { return t->len[L]; }

#define STALE "; re-run k3 pack MODEL_DIR TRUNK_DIR"

K3Trunk *k3_trunk_open(K3Model *m, const char *dir, int verify_reads, char *err,
                       size_t errlen) {
    K3Trunk *t = calloc(1, sizeof *t);
    char *ix = NULL;
    if (!t) { snprintf(err, errlen, "out of memory"); return NULL; }
    t->m = m; t->fd = -1; t->NL = m->cfg.num_hidden_layers; t->verify_reads = verify_reads;
    snprintf(t->path, sizeof t->path, "%s/trunk.k3", dir);
    t->off = calloc(t->NL, sizeof(uint64_t)); t->len = calloc(t->NL, sizeof(uint64_t));
    t->bind = calloc(t->NL, sizeof(Bind *)); t->nbind = calloc(t->NL, sizeof(int));
    t->pinned = calloc(t->NL, sizeof(unsigned char *));
    uint64_t *end = calloc(t->NL, sizeof(uint64_t));
    if (!t->off || !t->len || !t->bind || !t->nbind || !t->pinned || !end) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    t->fd = open(t->path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0) {
        snprintf(err, errlen, "--trunk %s: cannot open %s: %s "
                 "(create it with: k3 pack MODEL_DIR %s)", dir, t->path, strerror(errno), dir);
        goto fail;
    }
    unsigned char hdr[16];
    struct stat sb;
    if (fstat(t->fd, &sb) || k3_pread_full(t->fd, hdr, 16, 0) != 16 ||
        memcmp(hdr, "K3TRUNK1", 8)) {
        snprintf(err, errlen, "%s: not a k3 trunk file (bad magic or too short)" STALE, t->path);
        goto fail;
    }
    uint64_t ilen = 0;
    for (int i = 0; i < 8; i++) ilen |= (uint64_t)hdr[8 + i] << (8 * i);
    if (ilen > (uint64_t)sb.st_size || ilen > (1u << 30)) {
        snprintf(err, errlen, "%s: index length %llu is past the end of the file; "
                 "the trunk is truncated or corrupt" STALE, t->path, (unsigned long long)ilen);
        goto fail;
    }
    ix = malloc(ilen + 1);
    if (!ix || k3_pread_full(t->fd, ix, ilen, 16) != (int64_t)ilen) {
        snprintf(err, errlen, "%s: cannot read the index" STALE, t->path);
        goto fail;
    }
    ix[ilen] = 0;
    unsigned long long fp = 0, fsz = 0; int nl = -1, ver = 0;
    char *save = NULL;
    uint64_t want_fp = m->identity;
    char *line = strtok_r(ix, "\n", &save);
    if (!line || sscanf(line, "k3trunk %d", &ver) != 1 || (ver != 2 && ver != 3)) {
        snprintf(err, errlen, "%s is trunk format %d; this k3 reads format 2 (per-tensor "
                 "checksums) or 3 (coded, k3 pack --compress)" STALE, t->path, line ? ver : 0);
        goto fail;
    }
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (sscanf(line, "fingerprint %llx", &fp) == 1) {
            if (fp != want_fp) {
                snprintf(err, errlen, "%s was packed from a different checkpoint or config.json "
                         "(fingerprint %016llx, %s has %016llx)" STALE, t->path, fp, m->dir,
                         (unsigned long long)want_fp);
                goto fail;
            }
            continue;
        }
        if (sscanf(line, "file_size %llu", &fsz) == 1) {
            if (fsz != (unsigned long long)sb.st_size) {
                snprintf(err, errlen, "%s is %llu bytes, its index says %llu: "
                         "the trunk is truncated or was modified" STALE, t->path,
                         (unsigned long long)sb.st_size, fsz);
                goto fail;
            }
            continue;
        }
        if (sscanf(line, "layers %d", &nl) == 1) {
            if (nl != t->NL) {
                snprintf(err, errlen, "%s has %d layers, config.json %d" STALE, t->path, nl,
                         t->NL);
                goto fail;
            }
            continue;
        }
        int L, nd, pos = 0, coded = 0; unsigned long long off, nb, sum; char dt[16], code[8];
        int got = ver == 2
            ? sscanf(line, "t %d %llu %llu %llx %15s %d%n", &L, &off, &nb, &sum, dt, &nd, &pos)
            : sscanf(line, "t %d %llu %llu %llx %15s %7s %d%n", &L, &off, &nb, &sum, dt, code,
                     &nd, &pos) - 1;
        if (ver == 3 && got == 6) coded = !strcmp(code, "bc1");
        if (got != 6 || (ver == 3 && !coded && strcmp(code, "raw")) ||
            L < -1 || L >= t->NL || nd < 0 || nd > 8) {
            snprintf(err, errlen, "%s: malformed index line '%.80s'" STALE, t->path, line);
            goto fail;
        }
        const char *p = line + pos;
        for (int i = 0; i < nd; i++) { while (*p == ' ') p++; while (*p && *p != ' ') p++; }
        while (*p == ' ') p++;
        const StTensor *src = st_find(m->st, p);
        if (!src || (!coded && src->nbytes != nb) || strcmp(st_dtype_name(src->dtype), dt) ||
            off + nb > fsz || !fp) {
            snprintf(err, errlen, "%s: tensor '%s' does not match the checkpoint "
                     "(missing, resized, out of range or no fingerprint)" STALE, t->path, p);
            goto fail;
        }
        Piece *pc = realloc(t->piece, sizeof(Piece) * (t->npiece + 1));
        if (!pc) { snprintf(err, errlen, "out of memory"); goto fail; }
        t->piece = pc;
        pc[t->npiece++] = (Piece){ L, off, nb, sum, src->name };
        int mi = L < 0 ? -1 : k3_mat_lookup(&m->cfg, L, p);
        if (coded && (mi < 0 || k3_layer_mats[mi].field == offsetof(K3Layer, kv_b))) {
            snprintf(err, errlen, "%s: tensor '%s' is coded, but only BF16 layer matrices "
                     "multiplied by k3_matmul may be (not kv_b, read by rows)" STALE, t->path, p);
            goto fail;
        }
        if (L < 0) continue;
        if (!end[L] || off < t->off[L]) t->off[L] = off;
        if (off + nb > end[L]) end[L] = off + nb;
        /* remember the offset of this tensor for binding below */
        if (mi >= 0) {
            Bind *b = realloc(t->bind[L], sizeof(Bind) * (t->nbind[L] + 1));
            if (!b) { snprintf(err, errlen, "out of memory"); goto fail; }
            t->bind[L] = b;
            /* rel: absolute for now */
            b[t->nbind[L]] = (Bind){ k3_layer_mats[mi].field, off, nb, coded, t->npiece - 1 };
            t->nbind[L]++;
            const K3Mat *M = k3_mat_field(&m->layers[L], &k3_layer_mats[mi]);
            uint64_t want = (uint64_t)M->rows * M->cols * (M->type == K3_W_F32 ? 4 : 2);
            if (want != (coded ? src->nbytes : nb) || (coded && M->type != K3_W_BF16)) {
                snprintf(err, errlen,
                         "%s: tensor '%s' has %llu bytes, the model expects %llu" STALE,
                         t->path, p, nb, (unsigned long long)want);
                goto fail;
            }
        }
    }
    if (!fp || !fsz || nl < 0) {
        snprintf(err, errlen, "%s: index lacks fingerprint/file_size/layers" STALE, t->path);
        goto fail;
    }
    for (int L = 0; L < t->NL; L++) {
        int need = 0;
        for (int i = 0; i < k3_n_layer_mats; i++)
            need += k3_mat_in_layer(&k3_layer_mats[i], &m->cfg, L);
        if (t->nbind[L] != need || !end[L] || t->off[L] % 4096) {
            snprintf(err, errlen, "%s: layer %d is incomplete or misaligned in the trunk" STALE,
                     t->path, L);
            goto fail;
        }
        t->len[L] = k3_up4k(end[L] - t->off[L]);
        if (t->off[L] + t->len[L] > fsz) {
            snprintf(err, errlen, "%s: layer %d runs past the end of the file" STALE, t->path, L);
            goto fail;
        }
        for (int i = 0; i < t->nbind[L]; i++) t->bind[L][i].rel -= t->off[L];
    }
    free(ix); free(end);
    return t;
fail:
    free(ix); free(end);
    k3_trunk_close(t);
    return NULL;
}

/* Every tensor of layer L in its blob against the index's checksum. */
static int verify_layer(const K3Trunk *t, int L, const unsigned char *blob, char *err,
                        size_t errlen) {
    for (int i = 0; i < t->npiece; i++) {
        const Piece *pc = &t->piece[i];
        if (pc->layer != L) continue;
        uint64_t got = k3_sum64(blob + (pc->off - t->off[L]), pc->n);
        if (got != pc->sum) {
            snprintf(err, errlen, "%s: tensor '%s' (layer %d) does not match its checksum "
                     "(index %016llx, read %016llx): the trunk is corrupt or was modified"
                     STALE, t->path, pc->name, L, (unsigned long long)pc->sum,
                     (unsigned long long)got);
            return -1;
        }
    }
    return 0;
}

/* The structure of every coded tensor of layer L (codec.h), each time its bytes arrive:
 * the kernels then never read outside them (full: also the escape counts, when the
 * layer is checksummed too: pinned, or --verify-reads). */
static int check_coded(const K3Trunk *t, int L, const unsigned char *blob, int full, char *err,
                       size_t errlen) {
    for (int i = 0; i < t->nbind[L]; i++) {
        const Bind *b = &t->bind[L][i];
        if (!b->coded) continue;
        const K3Mat *M = (const K3Mat *)((const char *)&t->m->layers[L] + b->field);
        char why[300];
        if (k3_codec_check(blob + b->rel, b->n, M->rows, M->cols, full, why, sizeof why)) {
            snprintf(err, errlen, "%s: coded tensor '%s' (layer %d) is corrupt: %s" STALE,
                     t->path, t->piece[b->piece].name, L, why);
            return -1;
        }
    }
    return 0;
}

static int read_layer(K3Trunk *t, int L, unsigned char *buf, int verify, char *err,
                      size_t errlen) {
    long nr = __atomic_add_fetch(&t->nreads, 1, __ATOMIC_SEQ_CST);
    if (nr == k3_faults()->trunk_read) {
        snprintf(err, errlen,
                 "%s: injected failure of trunk read %ld (layer %d, K3_FAULT_TRUNK_READ)",
                 t->path, nr, L);
        return -1;
    }
    char why[500];
    const unsigned char *d = k3_dio_read(&t->file, buf, t->off[L], t->len[L], NULL, why,
                                         sizeof why);
    if (!d) { snprintf(err, errlen, "layer %d: %s" STALE, L, why); return -1; }
    /* offsets and lengths are 4096-aligned: d == buf */
    if (verify && verify_layer(t, L, buf, err, errlen)) return -1;
    return check_coded(t, L, buf, verify, err, errlen);     /* full with the checksum */
}

static void rebind(const K3Trunk *t, int L, K3Layer *ly, const unsigned char *blob) {
    for (int i = 0; i < t->nbind[L]; i++) {
        K3Mat *M = (K3Mat *)((char *)ly + t->bind[L][i].field);
        if (t->bind[L][i].coded) k3_codec_bind(M, blob + t->bind[L][i].rel);
        else M->w = blob + t->bind[L][i].rel;
    }
}

static void *reader(void *arg) {
    K3Trunk *t = arg;
    char err[600];
    pthread_mutex_lock(&t->mu);
    for (long k = 0;; k++) {
        const int i = (int)(k % t->n_streamed), sl = t->slot_of[i];
        while (!t->quit && t->last_seq[sl] >= t->rel_seq)   /* slot still in use */
            pthread_cond_wait(&t->cv, &t->mu);
        if (t->quit) break;
        t->last_seq[sl] = k;
        int L = t->n_pinned + i;
        pthread_mutex_unlock(&t->mu);
        double t0 = k3_now();
        int rc = read_layer(t, L, t->slots[sl].buf, t->verify_reads, err, sizeof err);
        double t1 = k3_now();
        pthread_mutex_lock(&t->mu);
        t->st->trunk_read_s += t1 - t0;
        if (rc) {
            if (t->err_seq < 0) { t->err_seq = k; snprintf(t->err, sizeof t->err, "%s", err); }
        } else { t->st->trunk_bytes += t->len[L]; t->st->trunk_reads++; }
        t->ready_seq = k + 1;
        pthread_cond_broadcast(&t->cv);
        if (rc) break;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

uint64_t k3_ring_layout(const uint64_t *len, int n, int *slot_of, uint64_t *slot_bytes) {
    uint64_t sb[2] = { 0, 0 }, best = 0, best_stall = 0;
    int bj = 0;
    if (n <= 0) { if (slot_bytes) slot_bytes[0] = slot_bytes[1] = 0; return 0; }
    if (n % 2 == 0 || n == 1) {
        for (int i = 0; i < n; i++) if (len[i] > sb[i % 2]) sb[i % 2] = len[i];
        for (int i = 0; slot_of && i < n; i++) slot_of[i] = i % 2;
    } else {
        /* layer (j + k) mod n takes slot k mod 2: layers j-1 and j share slot 0 */
        for (int j = 0; j < n; j++) {
            uint64_t m2[2] = { 0, 0 };
            for (int k = 0; k < n; k++)
                if (len[(j + k) % n] > m2[k % 2]) m2[k % 2] = len[(j + k) % n];
            if (j == 0 || m2[0] + m2[1] < best ||
                (m2[0] + m2[1] == best && len[j] < best_stall)) {
                best = m2[0] + m2[1]; best_stall = len[j]; bj = j; sb[0] = m2[0]; sb[1] = m2[1];
            }
        }
        for (int k = 0; slot_of && k < n; k++) slot_of[(bj + k) % n] = k % 2;
    }
    if (slot_bytes) { slot_bytes[0] = sb[0]; slot_bytes[1] = sb[1]; }
    return sb[0] + sb[1];
}

int k3_trunk_start(K3Trunk *t, int n_pinned, K3MemStats *st, char *err, size_t errlen) {
    K3Model *m = t->m;
    t->st = st; t->n_pinned = n_pinned; t->n_streamed = t->NL - n_pinned;
    t->ring = t->n_streamed ? (t->n_streamed >= 2 ? 2 : 1) : 0;
    t->err_seq = -1; t->last_seq[0] = t->last_seq[1] = -1;
    if (k3_dio_open(&t->file, t->path, "trunk reads", err, errlen)) return K3_ERR_RUNTIME;
    for (int L = 0; L < n_pinned; L++) {
        if (posix_memalign((void **)&t->pinned[L], 4096, t->len[L])) {
            t->pinned[L] = NULL;
            snprintf(err, errlen, "out of memory pinning trunk layer %d", L);
            return K3_ERR_RUNTIME;
        }
        if (read_layer(t, L, t->pinned[L], 1, err, errlen)) return K3_ERR_RUNTIME;
        st->trunk_load_bytes += t->len[L];
        rebind(t, L, &m->layers[L], t->pinned[L]);
    }
    if (!t->n_streamed) return 0;
    t->slots = calloc(t->ring, sizeof(RingSlot));
    t->slot_of = calloc(t->n_streamed, sizeof(int));
    if (!t->slots || !t->slot_of) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    uint64_t sb[2];
    k3_ring_layout(t->len + n_pinned, t->n_streamed, t->slot_of, sb);
    for (int r = 0; r < t->ring; r++) {
        uint64_t mx = sb[r];
        if (posix_memalign((void **)&t->slots[r].buf, 4096, mx)) {
            t->slots[r].buf = NULL;
            snprintf(err, errlen, "out of memory for the trunk ring (slot of %.3f GB)",
                     mx / K3_GB);
            return K3_ERR_RUNTIME;
        }
    }
    pthread_mutex_init(&t->mu, NULL); pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->th, NULL, reader, t)) {
        snprintf(err, errlen, "cannot start the trunk reader thread");
        return K3_ERR_RUNTIME;
    }
    t->started = 1;
    return 0;
}

const K3Layer *k3_trunk_acquire(K3Trunk *t, int L, K3MemStats *st, char *err, size_t errlen) {
    if (L < t->n_pinned) return &t->m->layers[L];
    pthread_mutex_lock(&t->mu);
    int want = t->n_pinned + (int)(t->cons_seq % t->n_streamed);
    if (L != want) {
        pthread_mutex_unlock(&t->mu);
        snprintf(err, errlen, "internal error: trunk layer %d acquired out of order (expected %d)",
                 L, want);
        return NULL;
    }
    double t0 = k3_now();
    while (t->ready_seq <= t->cons_seq) pthread_cond_wait(&t->cv, &t->mu);
    st->io_wait_s += k3_now() - t0;
    if (t->err_seq >= 0 && t->err_seq <= t->cons_seq) {
        snprintf(err, errlen, "trunk read failed: %s", t->err);
        pthread_mutex_unlock(&t->mu);
        return NULL;
    }
    RingSlot *s = &t->slots[t->slot_of[t->cons_seq % t->n_streamed]];
    pthread_mutex_unlock(&t->mu);
    s->ly = t->m->layers[L];
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
    snprintf(buf, n, "%s: %d layers pinned, %d streamed through a ring of %d slots (%s)", t->path,
             t->n_pinned, t->n_streamed, t->ring, t->file.direct ? "O_DIRECT" : "buffered");
}

void k3_trunk_close(K3Trunk *t) {
    if (!t) return;
    if (t->started) {
        pthread_mutex_lock(&t->mu);
        t->quit = 1;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->th, NULL);
        pthread_mutex_destroy(&t->mu); pthread_cond_destroy(&t->cv);
    }
    if (t->slots) for (int r = 0; r < t->ring; r++) free(t->slots[r].buf);
    if (t->pinned) for (int L = 0; L < t->NL; L++) free(t->pinned[L]);
    if (t->bind) for (int L = 0; L < t->NL; L++) free(t->bind[L]);
    if (t->fd >= 0) close(t->fd);
    k3_dio_close(&t->file);
    free(t->slots); free(t->slot_of); free(t->pinned); free(t->bind); free(t->nbind);
    free(t->off); free(t->len); free(t->piece);
    free(t);
}


/* Reads every tensor of the trunk (layers and globals, 64 MB at a time) against its
 * checksum, for `k3 doctor`: every problem is reported, not just the first. */
int k3_trunk_check(K3Model *m, const char *dir, K3Report report, void *ctx, uint64_t *bytes,
                   int *tensors) {
    char err[6000];
    const uint64_t CH = 64u << 20;
    *bytes = 0; *tensors = 0;
    K3Trunk *t = k3_trunk_open(m, dir, 0, err, sizeof err);
    if (!t) { report(ctx, err); return 1; }
    unsigned char *buf = NULL;
    int bad = 0;
    int opened = !k3_dio_open(&t->file, t->path, "trunk check reads", err, sizeof err);
    if (!opened || posix_memalign((void **)&buf, K3_DIO_ALIGN, k3_dio_room(CH))) {
        report(ctx, opened ? "out of memory for the trunk check" : err);
        k3_trunk_close(t);
        return 1;
    }
    for (int i = 0; i < t->npiece; i++) {
        const Piece *pc = &t->piece[i];
        K3Sum sum;
        k3_sum_init(&sum);
        int ok = 1;
        for (uint64_t o = 0; ok && o < pc->n; o += CH) {
            const uint64_t n = pc->n - o < CH ? pc->n - o : CH;
            const unsigned char *d = k3_dio_read(&t->file, buf, pc->off + o, n, NULL, err,
                                                 sizeof err);
            if (!d) { report(ctx, err); ok = 0; bad++; break; }
            k3_sum_add(&sum, d, n);
        }
        if (!ok) continue;
        uint64_t got = k3_sum_end(&sum);
        if (got != pc->sum) {
            char where[32] = "global";
            if (pc->layer >= 0) snprintf(where, sizeof where, "layer %d", pc->layer);
            snprintf(err, sizeof err, "%s: tensor '%s' (%s) does not match its checksum "
                     "(index %016llx, read %016llx): the trunk is corrupt or was modified"
                     STALE, t->path, pc->name, where, (unsigned long long)pc->sum,
                     (unsigned long long)got);
            report(ctx, err);
            bad++;
        }
        *bytes += pc->n; (*tensors)++;
    }
    free(buf);
    k3_trunk_close(t);
    return bad;
}
