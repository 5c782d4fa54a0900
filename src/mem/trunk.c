/* trunk.c — where the trunk's matrices lie: in the packed trunk (`k3 pack`, cli/pack.c:
 * every non-routed text tensor in one file, each layer contiguous at a 4096-aligned
 * offset), or where the released shards have them (k3_trunk_shards: no pack step, no
 * checksums; each layer's dense tensors sit together in its shard). This file reads and
 * checks the index and says where each layer matrix's rows are (k3_trunk_rows) and in
 * which file (k3_trunk_file); stream.c pins a prefix and streams the rest in pieces.
 *
 * Every tensor carries an XXH64 checksum in the index: a pinned matrix is verified once
 * when it is read (a flipped byte is refused, naming the tensor, instead of running with
 * different logits), a streamed one on every pass with --verify-reads, and the whole
 * file by k3_trunk_check (`k3 doctor --trunk`).
 *
 * File: "K3TRUNK1", u64 LE index length, the text index, data from the next 4096
 * boundary. Index lines: "k3trunk 2" (first), "fingerprint HEX", "file_size N",
 * "layers N", then "t LAYER OFFSET NBYTES XXH64 DTYPE NDIM D0.. NAME" (LAYER -1 = global
 * tensors; XXH64 = 16 hex digits of the tensor's bytes). Format 1 had no checksums and
 * is refused with "re-run k3 pack". Format 3 (k3 pack --compress) adds a word after DTYPE:
 * "raw", or "bc2" for a BF16 layer matrix stored coded (codec.h; "bc1", an earlier lane
 * order, is refused with "re-run k3 pack --compress"): NBYTES and XXH64 are
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    size_t field; uint64_t rel; int tensor;   /* tensor: index in piece */
    int coded, rows;                          /* coded (codec.h): stored as K3_W_BF16C */
    uint32_t *rowoff;                         /* then its row offset table, read at open */
} Bind;
typedef struct { int layer; uint64_t off, n, sum; const char *name; int file; } Piece;

struct K3Trunk {
    K3Model *m;
    char path[4300];
    K3DioFile file;
    int fd, NL;
    uint64_t *off, *len;                      /* per layer: blob offset and padded length */
    Bind **bind; int *nbind;
    Piece *piece; int npiece;                 /* every tensor of the index, absolute offsets */
    int shards;                               /* 1: the shards themselves (no checksums) */
};

uint64_t k3_trunk_layer_bytes(const K3Trunk *t, int L) { return t->len[L]; }

#define STALE "; re-run k3 pack MODEL_DIR TRUNK_DIR"

/* Index text in a message, control and non-ASCII bytes as \xHH (a damaged index must not
 * write escape sequences to the terminal), at most max bytes of s. */
static const char *shown(const char *s, size_t max, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; s[i] && i < max && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        else out[o++] = (char)ch;
    }
    out[o] = 0;
    return out;
}

/* A coded matrix's row offset table (codec.h), read once at open and kept (4 bytes a row):
 * the stream finds any rows' bytes through it. Checked here: in order and inside the
 * tensor, so a piece's range is always inside the file. */
static int read_rowoff(K3Trunk *t, Bind *b, char *err, size_t errlen) {
    const Piece *pc = &t->piece[b->tensor];
    const size_t tb = k3_codec_table_bytes(b->rows);
    if (pc->n < tb || !(b->rowoff = malloc(tb))) {
        snprintf(err, errlen, "%s: coded tensor '%s' is smaller than its row offset table"
                 STALE, t->path, pc->name);
        return -1;
    }
    if (k3_pread_full(t->fd, b->rowoff, tb, pc->off) != (int64_t)tb) {
        snprintf(err, errlen, "%s: cannot read the row offsets of '%s'" STALE, t->path,
                 pc->name);
        return -1;
    }
    const uint32_t *ro = b->rowoff;
    int ok = ro[0] == 0 && ro[b->rows] == pc->n - tb;
    for (int r = 0; ok && r < b->rows; r++) ok = ro[r + 1] >= ro[r];
    if (!ok) {
        snprintf(err, errlen, "%s: coded tensor '%s' has a corrupt row offset table" STALE,
                 t->path, pc->name);
        return -1;
    }
    return 0;
}

K3Trunk *k3_trunk_open(K3Model *m, const char *dir, char *err, size_t errlen) {
    K3Trunk *t = calloc(1, sizeof *t);
    char *ix = NULL;
    if (!t) { snprintf(err, errlen, "out of memory"); return NULL; }
    t->m = m; t->fd = -1; t->NL = m->cfg.num_hidden_layers;
    snprintf(t->path, sizeof t->path, "%s/trunk.k3", dir);
    t->off = calloc(t->NL, sizeof(uint64_t)); t->len = calloc(t->NL, sizeof(uint64_t));
    t->bind = calloc(t->NL, sizeof(Bind *)); t->nbind = calloc(t->NL, sizeof(int));
    uint64_t *end = calloc(t->NL, sizeof(uint64_t));
    if (!t->off || !t->len || !t->bind || !t->nbind || !end) {
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
        if (ver == 3 && got == 6 && !strcmp(code, "bc1")) {
            snprintf(err, errlen, "%s: tensor coded bc1, the code of an earlier k3 (this one "
                     "reads bc2, docs/CODEC.md); re-run k3 pack MODEL_DIR TRUNK_DIR --compress",
                     t->path);
            goto fail;
        }
        if (ver == 3 && got == 6) coded = !strcmp(code, "bc2");
        if (got != 6 || (ver == 3 && !coded && strcmp(code, "raw")) ||
            L < -1 || L >= t->NL || nd < 0 || nd > 8) {
            char q[400];
            snprintf(err, errlen, "%s: malformed index line '%s'" STALE, t->path,
                     shown(line, 80, q, sizeof q));
            goto fail;
        }
        const char *p = line + pos;
        for (int i = 0; i < nd; i++) { while (*p == ' ') p++; while (*p && *p != ' ') p++; }
        while (*p == ' ') p++;
        const StTensor *src = st_find(m->st, p);
        /* off > fsz - nb, not off + nb > fsz: a huge offset wraps the sum into range */
        if (!src || (!coded && src->nbytes != nb) || strcmp(st_dtype_name(src->dtype), dt) ||
            nb > fsz || off > fsz - nb || !fp) {
            char q[1200];
            snprintf(err, errlen, "%s: tensor '%s' does not match the checkpoint "
                     "(missing, resized, out of range or no fingerprint)" STALE, t->path,
                     shown(p, 256, q, sizeof q));
            goto fail;
        }
        /* each tensor once, under its own layer: else a line could bind one tensor's
         * bytes (with their right checksum) to another matrix of the same size */
        int dup = 0;
        for (int i = 0; i < t->npiece && !dup; i++) dup = t->piece[i].name == src->name;
        if (dup || k3_tensor_layer(src->name) != L) {
            snprintf(err, errlen, "%s: tensor '%s' is %s" STALE, t->path, src->name,
                     dup ? "listed twice" : "listed under another layer");
            goto fail;
        }
        Piece *pc = realloc(t->piece, sizeof(Piece) * (t->npiece + 1));
        if (!pc) { snprintf(err, errlen, "out of memory"); goto fail; }
        t->piece = pc;
        pc[t->npiece++] = (Piece){ L, off, nb, sum, src->name, 0 };
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
            b[t->nbind[L]].field = k3_layer_mats[mi].field;
            b[t->nbind[L]].rel = off;                            /* absolute for now */
            b[t->nbind[L]].tensor = t->npiece - 1;
            b[t->nbind[L]].coded = coded;
            b[t->nbind[L]].rowoff = NULL;
            t->nbind[L]++;
            const K3Mat *M = k3_mat_field(&m->layers[L], &k3_layer_mats[mi]);
            b[t->nbind[L] - 1].rows = M->rows;
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
        for (int i = 0; i < t->nbind[L]; i++)
            if (t->bind[L][i].coded && read_rowoff(t, &t->bind[L][i], err, errlen)) goto fail;
    }
    free(ix); free(end);
    return t;
fail:
    free(ix); free(end);
    k3_trunk_close(t);
    return NULL;
}

/* The trunk where the shards hold it: every layer matrix at its tensor's offset in its
 * shard (st.h validated the headers: offsets inside the file, no overlap), no checksums
 * (--verify-reads and the pinned check need a pack). t->len[L]: the layer's trunk bytes. */
K3Trunk *k3_trunk_shards(K3Model *m, char *err, size_t errlen) {
    K3Trunk *t = calloc(1, sizeof *t);
    if (!t) { snprintf(err, errlen, "out of memory"); return NULL; }
    t->m = m; t->fd = -1; t->NL = m->cfg.num_hidden_layers; t->shards = 1;
    snprintf(t->path, sizeof t->path, "%s", m->dir);
    t->off = calloc(t->NL, sizeof(uint64_t)); t->len = calloc(t->NL, sizeof(uint64_t));
    t->bind = calloc(t->NL, sizeof(Bind *)); t->nbind = calloc(t->NL, sizeof(int));
    if (!t->off || !t->len || !t->bind || !t->nbind) goto oom;
    for (size_t k = 0; k < m->st->n_tensors; k++) {
        const StTensor *src = &m->st->tensors[k];
        const int L = k3_tensor_layer(src->name);
        if (!k3_is_trunk_tensor(src->name) || L < 0 || L >= t->NL) continue;
        t->len[L] += src->nbytes;
        const int mi = k3_mat_lookup(&m->cfg, L, src->name);
        if (mi < 0) continue;
        Piece *pc = realloc(t->piece, sizeof(Piece) * (t->npiece + 1));
        Bind *b = realloc(t->bind[L], sizeof(Bind) * (t->nbind[L] + 1));
        if (pc) t->piece = pc;
        if (b) t->bind[L] = b;
        if (!pc || !b) goto oom;
        pc[t->npiece] = (Piece){ L, src->offset, src->nbytes, 0, src->name, src->shard };
        const K3Mat *M = k3_mat_field(&m->layers[L], &k3_layer_mats[mi]);
        const uint64_t want = (uint64_t)M->rows * M->cols * (M->type == K3_W_F32 ? 4 : 2);
        if (want != src->nbytes) {            /* k3_model_open bound it: never expected */
            snprintf(err, errlen, "%s: tensor '%s' has %llu bytes, the model expects %llu",
                     m->st->shards[src->shard].path, src->name,
                     (unsigned long long)src->nbytes, (unsigned long long)want);
            k3_trunk_close(t);
            return NULL;
        }
        b[t->nbind[L]++] = (Bind){ k3_layer_mats[mi].field, 0, t->npiece++, 0, M->rows, NULL };
    }
    for (int L = 0; L < t->NL; L++) {
        int need = 0;
        for (int i = 0; i < k3_n_layer_mats; i++)
            need += k3_mat_in_layer(&k3_layer_mats[i], &m->cfg, L);
        if (t->nbind[L] != need) {
            snprintf(err, errlen, "%s: layer %d has %d of its %d trunk matrices in the shard "
                     "index", m->dir, L, t->nbind[L], need);
            k3_trunk_close(t);
            return NULL;
        }
    }
    return t;
oom:
    snprintf(err, errlen, "out of memory");
    k3_trunk_close(t);
    return NULL;
}

const char *k3_trunk_path(const K3Trunk *t) { return t->path; }
int k3_trunk_from_shards(const K3Trunk *t) { return t->shards; }
/* Files: the shards (from the shards), or trunk.k3 then the shards (a pack). */
int k3_trunk_nfiles(const K3Trunk *t) { return t->m->st->n_shards + !t->shards; }
int k3_trunk_shard_file(const K3Trunk *t, int shard) { return shard + !t->shards; }
const char *k3_trunk_fpath(const K3Trunk *t, int f) {
    return t->shards ? t->m->st->shards[f].path : f ? t->m->st->shards[f - 1].path : t->path;
}
int k3_trunk_file(const K3Trunk *t, int L, int i) { return t->piece[t->bind[L][i].tensor].file; }
const uint32_t *k3_trunk_rowoff(const K3Trunk *t, int L, int i) { return t->bind[L][i].rowoff; }
int k3_trunk_nmats(const K3Trunk *t, int L) { return t->nbind[L]; }

void k3_trunk_mat(const K3Trunk *t, int L, int i, size_t *field, uint64_t *sum,
                  const char **name) {
    const Piece *pc = &t->piece[t->bind[L][i].tensor];
    *field = t->bind[L][i].field; *sum = pc->sum; *name = pc->name;
}

void k3_trunk_bad_sum(const K3Trunk *t, int L, int i, uint64_t got, char *err, size_t errlen) {
    const Piece *pc = &t->piece[t->bind[L][i].tensor];
    snprintf(err, errlen, "%s: tensor '%s' (layer %d) does not match its checksum "
             "(index %016llx, read %016llx): the trunk is corrupt or was modified" STALE,
             t->path, pc->name, L, (unsigned long long)pc->sum, (unsigned long long)got);
}

/* The one place that knows how a matrix's rows lie in the file: plain BF16/F32 rows
 * back to back from the tensor's offset; coded rows after the offset table, where it
 * says (rows [r0, r1) are one range: codec.h). */
void k3_trunk_rows(const K3Trunk *t, int L, int i, int r0, int r1, uint64_t *off,
                   uint64_t *n) {
    const Piece *pc = &t->piece[t->bind[L][i].tensor];
    const uint32_t *ro = t->bind[L][i].rowoff;
    if (ro) {
        *off = pc->off + k3_codec_table_bytes(t->bind[L][i].rows) + ro[r0];
        *n = ro[r1] - ro[r0];
        return;
    }
    const K3Mat *M = (const K3Mat *)((const char *)&t->m->layers[L] + t->bind[L][i].field);
    const uint64_t rb = pc->n / (uint64_t)M->rows;
    *off = pc->off + (uint64_t)r0 * rb;
    *n = (uint64_t)(r1 - r0) * rb;
}

void k3_trunk_close(K3Trunk *t) {
    if (!t) return;
    if (t->bind)
        for (int L = 0; L < t->NL; L++) {
            for (int i = 0; i < t->nbind[L]; i++) free(t->bind[L][i].rowoff);
            free(t->bind[L]);
        }
    if (t->fd >= 0) close(t->fd);
    k3_dio_close(&t->file);
    free(t->bind); free(t->nbind); free(t->off); free(t->len); free(t->piece);
    free(t);
}

/* Reads every tensor of the trunk (layers and globals, 64 MB at a time) against its
 * checksum, for `k3 doctor`: every problem is reported, not just the first. */
int k3_trunk_check(K3Model *m, const char *dir, K3Report report, void *ctx, uint64_t *bytes,
                   int *tensors) {
    char err[6000];
    const uint64_t CH = 64u << 20;
    *bytes = 0; *tensors = 0;
    K3Trunk *t = k3_trunk_open(m, dir, err, sizeof err);
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
