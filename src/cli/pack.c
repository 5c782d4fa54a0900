/* pack.c — `k3 pack MODEL_DIR TRUNK_DIR [--verify]`: rewrites every non-routed-expert
 * text tensor into TRUNK_DIR/trunk.k3, each layer contiguous from a 4096-aligned
 * offset (tensors 64-aligned inside), global tensors last, with a text index, an XXH64
 * checksum per tensor and a fingerprint of the source (config.json bytes, shard names
 * and sizes) so a stale, foreign or corrupted trunk is refused. BF16/F32 values are
 * checked finite on the way. Written to trunk.k3.tmp and renamed at the end, so an
 * interrupted or failed pack (disk full) leaves no trunk behind. --verify re-reads every
 * byte of the result and compares it with the shards and the checksums. Format: see
 * trunk.c. */
#include "cli.h"
#include "fault.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct { const StTensor *t; int layer; uint64_t off, sum; } PackedTensor;   /* sum: XXH64 */

static int cmp_pt(const void *a, const void *b) {
    const PackedTensor *x = a, *y = b;
    int lx = x->layer < 0 ? 1 << 30 : x->layer, ly = y->layer < 0 ? 1 << 30 : y->layer;
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static size_t format_index(char *buf, size_t cap, const PackedTensor *pt, size_t n, uint64_t fp,
                           uint64_t fsize, int NL) {
    size_t o = 0;
#define PUT(...) do { int w_ = snprintf(buf ? buf + o : NULL, buf ? cap - o : 0, __VA_ARGS__); \
                      o += (size_t)w_; } while (0)
    PUT("k3trunk 2\nfingerprint %016llx\nfile_size %020llu\nlayers %d\n", (unsigned long long)fp,
        (unsigned long long)fsize, NL);
    for (size_t i = 0; i < n; i++) {        /* fixed widths: the sums are filled in last */
        const StTensor *t = pt[i].t;
        PUT("t %d %020llu %020llu %016llx %s %d", pt[i].layer, (unsigned long long)pt[i].off,
            (unsigned long long)t->nbytes, (unsigned long long)pt[i].sum,
            st_dtype_name(t->dtype), t->ndim);
        for (int d = 0; d < t->ndim; d++) PUT(" %lld", (long long)t->shape[d]);
        PUT(" %s\n", t->name);
    }
#undef PUT
    return o;
}

static long nwrites;                        /* for K3_FAULT_PACK_WRITE */

static int pwrite_all(int fd, const void *p, size_t n, uint64_t off) {
    size_t done = 0;
    if (++nwrites == k3_faults()->pack_write) { errno = ENOSPC; return -1; }
    while (done < n) {
        ssize_t w = pwrite(fd, (const char *)p + done, n - done, (off_t)(off + done));
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        done += (size_t)w;
    }
    return 0;
}

/* Copies one tensor in pieces of ch bytes, checking its values are finite (a NaN packed
 * into the trunk would run as NaN logits) and summing it for the index. */
static int copy_tensor(StIndex *st, PackedTensor *p, int fd, unsigned char *buf, size_t ch,
                       const char *tmp) {
    const StTensor *t = p->t;
    const size_t es = st_dtype_size(t->dtype);
    char err[4096];
    K3Sum sum;
    k3_sum_init(&sum);
    for (uint64_t o = 0; o < t->nbytes; o += ch) {
        size_t len = t->nbytes - o < ch ? (size_t)(t->nbytes - o) : ch;
        if (st_pread(st, t->shard, t->offset + o, buf, len, err, sizeof err)) {
            fprintf(stderr, "k3 pack: %s\n", err);
            return K3_ERR_RUNTIME;
        }
        int64_t bad = k3_first_nonfinite(t->dtype, buf, len);
        if (bad >= 0) {
            fprintf(stderr, "k3 pack: tensor '%s' in %s holds a non-finite value (NaN or Inf) "
                    "at element %llu: the checkpoint is corrupt — re-download that shard "
                    "(k3 doctor MODEL_DIR --scan lists every bad tensor); nothing was packed\n",
                    t->name, st->shards[t->shard].path,
                    (unsigned long long)(o / es + (uint64_t)bad));
            return K3_ERR_RUNTIME;
        }
        k3_sum_add(&sum, buf, len);
        if (pwrite_all(fd, buf, len, p->off + o)) {
            fprintf(stderr, "k3 pack: writing %s: %s\n", tmp, strerror(errno));
            return K3_ERR_RUNTIME;
        }
    }
    p->sum = k3_sum_end(&sum);
    return 0;
}

/* Re-reads one packed tensor: 0 when it equals the shard's bytes and its checksum, 1 when
 * it differs (said on stderr), -1 when a read fails. */
static int verify_tensor(StIndex *st, const PackedTensor *p, int fd, unsigned char *buf,
                         unsigned char *buf2, size_t ch) {
    const StTensor *t = p->t;
    char err[4096];
    K3Sum sum;
    k3_sum_init(&sum);
    int bad = 0;
    for (uint64_t o = 0; o < t->nbytes; o += ch) {
        size_t len = t->nbytes - o < ch ? (size_t)(t->nbytes - o) : ch;
        if (st_pread(st, t->shard, t->offset + o, buf, len, err, sizeof err) ||
            k3_pread_full(fd, buf2, len, p->off + o) != (int64_t)len) {
            fprintf(stderr, "k3 pack: --verify: read failed for %s\n", t->name);
            return -1;
        }
        if (!bad && memcmp(buf, buf2, len)) {
            fprintf(stderr, "k3 pack: --verify: %s differs at byte %llu\n", t->name,
                    (unsigned long long)o);
            bad = 1;
        }
        k3_sum_add(&sum, buf2, len);
    }
    if (!bad && k3_sum_end(&sum) != p->sum) {
        fprintf(stderr, "k3 pack: --verify: %s does not match its checksum in the index\n",
                t->name);
        bad = 1;
    }
    return bad;
}

static const char *USAGE =
    "Usage: k3 pack MODEL_DIR TRUNK_DIR [--verify] [--quiet]\n"
    "Packs every text tensor but the routed experts into TRUNK_DIR/trunk.k3, each layer\n"
    "contiguous, for --trunk streaming (written to trunk.k3.tmp, renamed when complete).\n"
    "  --verify     re-read every byte of the result and compare it with the shards\n"
    "  --quiet      no progress or summary lines on stderr\n"
    "  -h, --help   this text\n";

int k3_pack_main(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    int verify = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verify")) verify = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout); return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "k3 pack: unknown option '%s'\n%s", argv[i], USAGE);
            return K3_ERR_USAGE;
        } else if (!model) model = argv[i];
        else if (!out) out = argv[i];
        else {
            fprintf(stderr, "k3 pack: unexpected argument '%s'\n", argv[i]);
            return K3_ERR_USAGE;
        }
    }
    if (!model || !out) {
        fprintf(stderr, "k3 pack: missing %s\n%s", model ? "TRUNK_DIR" : "MODEL_DIR", USAGE);
        return K3_ERR_USAGE;
    }
    char err[4096];
    StIndex *st = st_open(model, err, sizeof err);
    if (!st) { fprintf(stderr, "k3 pack: %s\n", err); return K3_ERR_RUNTIME; }
    char cfgp[4200];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", model);
    K3Config cfg;                              /* its bytes are part of the trunk's identity */
    int crc = k3_config_load(cfgp, &cfg, err, sizeof err);
    if (crc) { fprintf(stderr, "k3 pack: %s\n", err); st_close(st); return crc; }
    PackedTensor *pt = malloc(sizeof(PackedTensor) * (st->n_tensors ? st->n_tensors : 1));
    size_t n = 0;
    int NL = 0;
    for (size_t i = 0; pt && i < st->n_tensors; i++)
        if (k3_is_trunk_tensor(st->tensors[i].name)) {
            pt[n].t = &st->tensors[i]; pt[n].layer = k3_tensor_layer(st->tensors[i].name);
            if (pt[n].layer + 1 > NL) NL = pt[n].layer + 1;
            n++;
        }
    if (!pt || !n) {
        fprintf(stderr, "k3 pack: %s: no trunk tensors found\n", model); free(pt); st_close(st);
        return K3_ERR_RUNTIME;
    }
    qsort(pt, n, sizeof(PackedTensor), cmp_pt);
    uint64_t fp = k3_checkpoint_identity(cfg.hash, st);
    size_t ilen = format_index(NULL, 0, pt, n, fp, 0, NL);
    uint64_t off = (16 + ilen + 4095) & ~(uint64_t)4095, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || pt[i].layer != pt[i - 1].layer) off = (off + 4095) & ~(uint64_t)4095;
        else off = (off + 63) & ~(uint64_t)63;
        pt[i].off = off; off += pt[i].t->nbytes; total += pt[i].t->nbytes;
    }
    uint64_t fsize = (off + 4095) & ~(uint64_t)4095;
    char *ix = malloc(ilen + 1);
    format_index(ix, ilen + 1, pt, n, fp, fsize, NL);
    mkdir(out, 0755);
    char path[4300], tmp[4320];
    snprintf(path, sizeof path, "%s/trunk.k3", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "k3 pack: cannot create %s: %s\n", tmp, strerror(errno));
        free(ix); free(pt); st_close(st);
        return K3_ERR_RUNTIME;
    }
    unsigned char hdr[16];
    memcpy(hdr, "K3TRUNK1", 8);
    for (int i = 0; i < 8; i++) hdr[8 + i] = (unsigned char)((uint64_t)ilen >> (8 * i));
    const size_t CH = 64u << 20;
    unsigned char *buf = malloc(CH), *buf2 = verify ? malloc(CH) : NULL;
    int rc = 0;
    double t0 = k3_now();
    if (!buf || (verify && !buf2) || pwrite_all(fd, hdr, 16, 0) || pwrite_all(fd, ix, ilen, 16) ||
        ftruncate(fd, (off_t)fsize)) {
        fprintf(stderr, "k3 pack: writing %s: %s\n", tmp, strerror(errno)); rc = K3_ERR_RUNTIME;
    }
    uint64_t done = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        rc = copy_tensor(st, &pt[i], fd, buf, CH, tmp);
        done += pt[i].t->nbytes;
        if (!quiet && (i + 1 == n || pt[i + 1].layer != pt[i].layer)) {
            double dt = k3_now() - t0;
            fprintf(stderr, "k3 pack: %s %d done: %.3f of %.3f GB (%.0f MB/s)\n",
                    pt[i].layer < 0 ? "globals" : "layer", pt[i].layer < 0 ? NL : pt[i].layer,
                    done / K3_GB, total / K3_GB, dt > 0 ? done / 1e6 / dt : 0.0);
        }
    }
    if (!rc) {                                 /* the index again, now with the checksums */
        format_index(ix, ilen + 1, pt, n, fp, fsize, NL);
        if (pwrite_all(fd, ix, ilen, 16)) {
            fprintf(stderr, "k3 pack: writing %s: %s\n", tmp, strerror(errno));
            rc = K3_ERR_RUNTIME;
        }
    }
    if (!rc && fsync(fd)) {
        fprintf(stderr, "k3 pack: fsync %s: %s\n", tmp, strerror(errno)); rc = K3_ERR_RUNTIME;
    }
    if (!rc && verify) {
        uint64_t bad = 0;
        for (size_t i = 0; !rc && i < n; i++) {
            int v = verify_tensor(st, &pt[i], fd, buf, buf2, CH);
            if (v < 0) rc = K3_ERR_RUNTIME;
            bad += (uint64_t)v;
        }
        if (bad) rc = K3_ERR_RUNTIME;
        else if (!rc && !quiet)
            fprintf(stderr, "k3 pack: --verify: all %zu tensors (%.3f GB) re-read, identical to "
                    "the shards and to their checksums\n", n, total / K3_GB);
    }
    close(fd);
    if (!rc && rename(tmp, path)) {
        fprintf(stderr, "k3 pack: rename %s: %s\n", tmp, strerror(errno)); rc = K3_ERR_RUNTIME;
    }
    if (rc) unlink(tmp);
    else if (!quiet)
        fprintf(stderr, "k3 pack: wrote %s: %zu tensors, %d layers, %.3f GB in %.1f s\n",
                path, n, NL, fsize / K3_GB, k3_now() - t0);
    free(buf); free(buf2); free(ix); free(pt); st_close(st);
    return rc;
}
