/* pack.c — `k3 pack MODEL_DIR TRUNK_DIR [--compress] [--verify]`: rewrites every
 * non-routed-expert text tensor into TRUNK_DIR/trunk.k3, each layer contiguous from a
 * 4096-aligned offset (tensors 64-aligned inside), global tensors last, with a text index, an XXH64
 * checksum per tensor and a fingerprint of the source (config.json bytes, shard names
 * and sizes) so a stale, foreign or corrupted trunk is refused. BF16/F32 values are
 * checked finite on the way. Written to a temporary file beside trunk.k3 and renamed at
 * the end, so an interrupted or failed pack (disk full) leaves no trunk behind. --verify
 * re-reads every byte of the result and compares it with the shards and the checksums.
 * --compress writes format 3: BF16 layer matrices coded losslessly (codec.h, docs/CODEC.md) where
 * that saves at least 5%, everything else raw; the checksums cover the stored bytes, and
 * --verify decodes every coded tensor back to the shard's bits. Format: see trunk.c. */
#include "cli.h"
#include "codec.h"
#include "fault.h"
#include "outfile.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* sum: XXH64 of the nb stored bytes; coded: stored as K3_W_BF16C (format 3) */
typedef struct { const StTensor *t; int layer; uint64_t off, sum, nb; int codable, coded; }
    PackedTensor;

static int cmp_pt(const void *a, const void *b) {
    const PackedTensor *x = a, *y = b;
    int lx = x->layer < 0 ? 1 << 30 : x->layer, ly = y->layer < 0 ? 1 << 30 : y->layer;
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static size_t format_index(char *buf, size_t cap, const PackedTensor *pt, size_t n, uint64_t fp,
                           uint64_t fsize, int NL, int ver) {
    size_t o = 0;
#define PUT(...) do { int w_ = snprintf(buf ? buf + o : NULL, buf ? cap - o : 0, __VA_ARGS__); \
                      o += (size_t)w_; } while (0)
    PUT("k3trunk %d\nfingerprint %016llx\nfile_size %020llu\nlayers %d\n", ver,
        (unsigned long long)fp, (unsigned long long)fsize, NL);
    for (size_t i = 0; i < n; i++) {        /* fixed widths: the sums are filled in last */
        const StTensor *t = pt[i].t;
        PUT("t %d %020llu %020llu %016llx %s", pt[i].layer, (unsigned long long)pt[i].off,
            (unsigned long long)pt[i].nb, (unsigned long long)pt[i].sum, st_dtype_name(t->dtype));
        if (ver == 3) PUT(" %s", pt[i].coded ? "bc2" : "raw");   /* fixed width: see above */
        PUT(" %d", t->ndim);
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

/* ---- --compress (format 3) */
/* BF16 layer matrices that only k3_matmul reads (kv_b is read row by row, mla.c). */
static int codable(const K3Config *cfg, const StTensor *t, int layer) {
    if (layer < 0 || t->dtype != ST_BF16 || t->ndim != 2 || t->shape[0] < 1 ||
        t->shape[1] < 1 || t->shape[0] > (1 << 28) || t->shape[1] > (1 << 28))
        return 0;
    int mi = k3_mat_lookup(cfg, layer, t->name);
    return mi >= 0 && k3_layer_mats[mi].field != offsetof(K3Layer, kv_b);
}

/* The whole tensor from its shard into dst, checked finite as copy_tensor does. */
static int read_whole(StIndex *st, const StTensor *t, unsigned char *dst, size_t ch) {
    char err[4096];
    for (uint64_t o = 0; o < t->nbytes; o += ch) {
        size_t len = t->nbytes - o < ch ? (size_t)(t->nbytes - o) : ch;
        if (st_pread(st, t->shard, t->offset + o, dst + o, len, err, sizeof err)) {
            fprintf(stderr, "k3 pack: %s\n", err);
            return K3_ERR_RUNTIME;
        }
        int64_t bad = k3_first_nonfinite(t->dtype, dst + o, len);
        if (bad >= 0) {
            fprintf(stderr, "k3 pack: tensor '%s' in %s holds a non-finite value (NaN or Inf) "
                    "at element %llu: the checkpoint is corrupt — re-download that shard "
                    "(k3 doctor MODEL_DIR --scan lists every bad tensor); nothing was packed\n",
                    t->name, st->shards[t->shard].path, (unsigned long long)(o / 2 + bad));
            return K3_ERR_RUNTIME;
        }
    }
    return 0;
}

/* Codes one BF16 matrix; stores it coded when that saves >= 5%, else raw. */
static int code_tensor(StIndex *st, PackedTensor *p, int fd, size_t ch, const char *tmp) {
    const StTensor *t = p->t;
    int rows = (int)t->shape[0], cols = (int)t->shape[1];
    unsigned char *raw = malloc(t->nbytes), *c = malloc(k3_codec_bound(rows, cols));
    int rc = !raw || !c ? K3_ERR_RUNTIME : read_whole(st, t, raw, ch);
    if (!raw || !c) fprintf(stderr, "k3 pack: out of memory coding '%s'\n", t->name);
    size_t sz = rc ? 0 : k3_codec_encode(c, (const uint16_t *)raw, rows, cols, NULL);
    p->coded = sz && sz < 0.95 * (double)t->nbytes;
    p->nb = p->coded ? sz : t->nbytes;
    const unsigned char *out = p->coded ? c : raw;
    if (!rc) {
        p->sum = k3_sum64(out, p->nb);
        if (pwrite_all(fd, out, p->nb, p->off)) {
            fprintf(stderr, "k3 pack: writing %s: %s\n", tmp, strerror(errno));
            rc = K3_ERR_RUNTIME;
        }
    }
    free(raw); free(c);
    return rc;
}

/* --verify of a coded tensor: its stored bytes against the checksum and the structure
 * check, then decoded row by row against the shard. 0 equal, 1 differs, -1 read error. */
static int verify_coded(StIndex *st, const PackedTensor *p, int fd, size_t ch) {
    const StTensor *t = p->t;
    int rows = (int)t->shape[0], cols = (int)t->shape[1], bad = 0;
    unsigned char *raw = malloc(t->nbytes), *c = NULL;
    uint16_t *row = malloc(sizeof(uint16_t) * (size_t)cols);
    char why[300];
    if (posix_memalign((void **)&c, 64, p->nb)) c = NULL;
    if (!raw || !c || !row || read_whole(st, t, raw, ch) ||
        k3_pread_full(fd, c, p->nb, p->off) != (int64_t)p->nb) {
        fprintf(stderr, "k3 pack: --verify: read failed for %s\n", t->name);
        free(raw); free(c); free(row);
        return -1;
    }
    if (k3_sum64(c, p->nb) != p->sum) {
        fprintf(stderr, "k3 pack: --verify: %s does not match its checksum in the index\n",
                t->name);
        bad = 1;
    } else if (k3_codec_check(c, p->nb, rows, cols, 1, why, sizeof why)) {
        fprintf(stderr, "k3 pack: --verify: coded %s is malformed: %s\n", t->name, why);
        bad = 1;
    } else {
        K3Mat M = { K3_W_BF16C, rows, cols, NULL, NULL, NULL };
        k3_codec_bind(&M, c);
        for (int r = 0; r < rows && !bad; r++) {
            k3_codec_decode_row(row, &M, r);
            if (memcmp(row, raw + (size_t)r * cols * 2, (size_t)cols * 2)) {
                fprintf(stderr, "k3 pack: --verify: coded %s decodes differently at row %d\n",
                        t->name, r);
                bad = 1;
            }
        }
    }
    free(raw); free(c); free(row);
    return bad;
}

/* Ratio per tensor kind (the name after "model.layers.N.", globals by name). */
typedef struct { char kind[96]; uint64_t raw, stored; int n, coded; } Kind;
static void print_ratios(const PackedTensor *pt, size_t n, uint64_t plain_fsize,
                         uint64_t fsize) {
    Kind *k = calloc(n, sizeof *k);
    size_t nk = 0;
    uint64_t raw = 0, stored = 0;
    if (!k) return;
    for (size_t i = 0; i < n; i++) {
        const char *nm = pt[i].t->name, *d = strstr(nm, "layers.");
        if (d && pt[i].layer >= 0) { d = strchr(d + 7, '.'); nm = d ? d + 1 : nm; }
        size_t j = 0;
        while (j < nk && strcmp(k[j].kind, nm)) j++;
        if (j == nk) snprintf(k[nk++].kind, sizeof k->kind, "%s", nm);
        k[j].raw += pt[i].t->nbytes; k[j].stored += pt[i].nb; k[j].n++; k[j].coded += pt[i].coded;
        raw += pt[i].t->nbytes; stored += pt[i].nb;
    }
    for (size_t j = 0; j < nk; j++)
        fprintf(stderr, "k3 pack: %-52s %4d tensors, %4d coded, %10.3f -> %10.3f MB  %.4f\n",
                k[j].kind, k[j].n, k[j].coded, k[j].raw / 1e6, k[j].stored / 1e6,
                k[j].raw ? (double)k[j].stored / k[j].raw : 1.0);
    fprintf(stderr, "k3 pack: coded trunk: tensors %.3f -> %.3f GB (%.4f), file %.3f -> %.3f GB "
            "(%.4f of the plain trunk)\n", raw / K3_GB, stored / K3_GB,
            raw ? (double)stored / raw : 1.0, plain_fsize / K3_GB, fsize / K3_GB,
            (double)fsize / plain_fsize);
    free(k);
}

static const char *USAGE =
    "Usage: k3 pack MODEL_DIR TRUNK_DIR [--compress] [--verify] [--quiet]\n"
    "Packs every text tensor but the routed experts into TRUNK_DIR/trunk.k3, each layer\n"
    "contiguous, for --trunk streaming (written beside it, renamed when complete).\n"
    "  --compress   code BF16 layer matrices losslessly (trunk format 3, docs/CODEC.md)\n"
    "  --verify     re-read every byte of the result and compare it with the shards\n"
    "  --quiet      no progress or summary lines on stderr\n"
    "  -h, --help   this text\n";

int k3_pack_main(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    int verify = 0, quiet = 0, compress = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verify")) verify = 1;
        else if (!strcmp(argv[i], "--compress")) compress = 1;
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
    struct stat sb;                  /* a path on the command line that is not there: 2 */
    int se = stat(model, &sb) ? errno : 0;
    if (se || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "k3 pack: MODEL_DIR %s: %s; pass the checkpoint directory\n", model,
                se ? (se == ENOENT ? "no such folder" : strerror(se)) : "not a folder");
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
    if (mkdir(out, 0755) && errno == ENOENT) {    /* TRUNK_DIR is made, not its parent */
        fprintf(stderr, "k3 pack: TRUNK_DIR %s: its parent folder does not exist; create it "
                "or pass another path\n", out);
        st_close(st); return K3_ERR_USAGE;
    }
    if (k3_check_output("TRUNK_DIR", out, 1, err, sizeof err)) {
        fprintf(stderr, "k3 pack: %s\n", err); st_close(st); return K3_ERR_USAGE;
    }
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
    const int ver = compress ? 3 : 2;
    for (size_t i = 0; i < n; i++) {
        pt[i].nb = pt[i].t->nbytes; pt[i].coded = 0;
        pt[i].codable = compress && codable(&cfg, pt[i].t, pt[i].layer);
    }
    size_t ilen = format_index(NULL, 0, pt, n, fp, 0, NL, ver);
    /* the plain layout (format 3 places tensors the same way, as their stored sizes come) */
    uint64_t off = (16 + ilen + 4095) & ~(uint64_t)4095, total = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || pt[i].layer != pt[i - 1].layer) off = (off + 4095) & ~(uint64_t)4095;
        else off = (off + 63) & ~(uint64_t)63;
        pt[i].off = off; off += pt[i].t->nbytes; total += pt[i].t->nbytes;
    }
    uint64_t fsize = (off + 4095) & ~(uint64_t)4095, plain_fsize = fsize;
    char *ix = malloc(ilen + 1);
    format_index(ix, ilen + 1, pt, n, fp, fsize, NL, ver);
    char path[4300], oerr[4400];
    snprintf(path, sizeof path, "%s/trunk.k3", out);
    K3Out of;                     /* outfile.h: a temporary beside trunk.k3, renamed at the end */
    if (k3_out_open(&of, path, 0, 0644, oerr, sizeof oerr)) {
        fprintf(stderr, "k3 pack: %s\n", oerr);
        free(ix); free(pt); st_close(st);
        return K3_ERR_RUNTIME;
    }
    const int fd = of.fd;
    const char *tmp = of.tmp ? of.tmp : path;
    unsigned char hdr[16];
    memcpy(hdr, "K3TRUNK1", 8);
    for (int i = 0; i < 8; i++) hdr[8 + i] = (unsigned char)((uint64_t)ilen >> (8 * i));
    const size_t CH = 64u << 20;
    unsigned char *buf = malloc(CH), *buf2 = verify ? malloc(CH) : NULL;
    int rc = 0;
    double t0 = k3_now();
    if (!buf || (verify && !buf2) || pwrite_all(fd, hdr, 16, 0) || pwrite_all(fd, ix, ilen, 16) ||
        (!compress && ftruncate(fd, (off_t)fsize))) {
        fprintf(stderr, "k3 pack: writing %s: %s\n", tmp, strerror(errno)); rc = K3_ERR_RUNTIME;
    }
    uint64_t done = 0, end = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        if (compress && i) pt[i].off = pt[i].layer != pt[i - 1].layer
            ? (end + 4095) & ~(uint64_t)4095 : (end + 63) & ~(uint64_t)63;
        rc = pt[i].codable ? code_tensor(st, &pt[i], fd, CH, tmp)
                           : copy_tensor(st, &pt[i], fd, buf, CH, tmp);
        end = pt[i].off + pt[i].nb;
        done += pt[i].t->nbytes;
        if (!quiet && (i + 1 == n || pt[i + 1].layer != pt[i].layer)) {
            double dt = k3_now() - t0;
            fprintf(stderr, "k3 pack: %s %d done: %.3f of %.3f GB (%.0f MB/s)\n",
                    pt[i].layer < 0 ? "globals" : "layer", pt[i].layer < 0 ? NL : pt[i].layer,
                    done / K3_GB, total / K3_GB, dt > 0 ? done / 1e6 / dt : 0.0);
        }
    }
    if (!rc && compress) {
        fsize = (end + 4095) & ~(uint64_t)4095;
        if (ftruncate(fd, (off_t)fsize)) {
            fprintf(stderr, "k3 pack: writing %s: %s\n", tmp, strerror(errno));
            rc = K3_ERR_RUNTIME;
        }
    }
    if (!rc) {                                 /* the index again, now with the checksums */
        format_index(ix, ilen + 1, pt, n, fp, fsize, NL, ver);
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
            int v = pt[i].coded ? verify_coded(st, &pt[i], fd, CH)
                                : verify_tensor(st, &pt[i], fd, buf, buf2, CH);
            if (v < 0) rc = K3_ERR_RUNTIME;
            bad += (uint64_t)v;
        }
        if (bad) rc = K3_ERR_RUNTIME;
        else if (!rc && !quiet)
            fprintf(stderr, "k3 pack: --verify: all %zu tensors (%.3f GB) re-read, identical to "
                    "the shards%s and to their checksums\n", n, total / K3_GB,
                    compress ? " (coded ones decoded bit for bit)" : "");
    }
    if (!rc && k3_out_commit(&of, oerr, sizeof oerr)) {
        fprintf(stderr, "k3 pack: %s\n", oerr); rc = K3_ERR_RUNTIME;
    }
    if (rc) k3_out_abort(&of);
    else if (!quiet && compress) print_ratios(pt, n, plain_fsize, fsize);
    if (!rc && !quiet)
        fprintf(stderr, "k3 pack: wrote %s: %zu tensors, %d layers, %.3f GB in %.1f s\n",
                path, n, NL, fsize / K3_GB, k3_now() - t0);
    free(buf); free(buf2); free(ix); free(pt); st_close(st);
    return rc;
}
