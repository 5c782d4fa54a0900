/* doctor.c — `k3 doctor MODEL_DIR [--trunk DIR] [--scan] [--json] [--no-bench]`: before a
 * long run, checks the machine (cores, kernel path, memory and cgroup limit, the model
 * folder's filesystem and O_DIRECT, the disk and memory bandwidth the engine will see)
 * and the checkpoint (index, every shard present and complete, headers, config against
 * tensors, the packed trunk's fingerprint and checksums; --scan: every value finite and
 * every E8M0 scale sane), then recommends a preset with an estimated s/token. Every
 * problem is named (not just the first): exit 0 healthy, 1 problems, 2 usage.
 * docs/DOCTOR.md. */
#include "cli.h"
#include "doctor.h"
#include "dio.h"
#include "dspark.h"
#include "fault.h"
#include "json.h"
#include "pool.h"
#include "sysmem.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define MAX_SHOWN 50                          /* bad tensors listed before "and N more" */

typedef struct {
    int json;
    char **prob; int nprob;
    DocShard *sh; int nsh;
    int cores; char kernels[32], fs[64], cgdesc[300]; uint64_t avail, cg; int odirect;
    char thp[32], defrag[32];                 /* transparent huge pages: the kernel's */
    DocDisk disk; double mem_gbs, sum_gbs;
    int nshards, ntensors; uint64_t bytes;
    int named, present;                       /* shard files the index names; on disk */
    char **unread; int nunread, unread_present;   /* those with vision tensors only */
    char missing[600];                        /* the missing ones k3 reads, by name */
    int model_ok, trunk_tensors, scan_tensors, scan_bad; uint64_t trunk_bytes, scan_bytes;
    const char *rec; double rec_s; int rec_stream;
    const char *draft; int draft_ok, draft_rec_pinned;   /* --draft DIR: checked, pinned */
    K3DraftPlan dp; K3PresetCost draft_rec;   /* its plan; the recommended preset with it */
} Doc;

static void say(const Doc *d, const char *fmt, ...) {
    if (d->json) return;
    va_list ap; va_start(ap, fmt); vprintf(fmt, ap); va_end(ap);
}

static void problem(Doc *d, const char *fmt, ...) {
    char buf[6000];
    va_list ap; va_start(ap, fmt); vsnprintf(buf, sizeof buf, fmt, ap); va_end(ap);
    char **p = realloc(d->prob, sizeof(char *) * (d->nprob + 1));
    if (p && (p[d->nprob] = strdup(buf))) { d->prob = p; d->nprob++; }
    else if (p) d->prob = p;
    say(d, "  PROBLEM: %s\n", buf);
    fprintf(stderr, "k3: doctor: %s\n", buf);
}

static void report_cb(void *ctx, const char *msg) { problem(ctx, "%s", msg); }

/* ---- the machine ---- */

static const char *fs_name(long t) {
    static const struct { long magic; const char *name; } FS[] = {
        { 0xEF53, "ext2/3/4" }, { 0x58465342, "xfs" }, { 0x9123683E, "btrfs" },
        { 0x01021994, "tmpfs" }, { 0x2FC12FC1, "zfs" }, { 0x6969, "nfs" },
        { 0x794c7630, "overlayfs" }, { 0x65735546, "fuse" }, { 0x01021997, "9p" },
        { 0xFF534D42, "cifs" }, { 0x5346544e, "ntfs" }, { 0x4d44, "vfat" },
        { 0xF2F52010, "f2fs" }, { 0x858458f6, "ramfs" }, { 0x73717368, "squashfs" },
    };
    for (size_t i = 0; i < sizeof FS / sizeof FS[0]; i++)
        if ((unsigned long)FS[i].magic == (unsigned long)t) return FS[i].name;
    return NULL;
}

/* 1: an aligned O_DIRECT read of path works; 0: refused; -1: path unreadable. */
static int odirect_works(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return errno == EINVAL ? 0 : -1;
    void *b = NULL;
    int ok = !posix_memalign(&b, K3_DIO_ALIGN, K3_DIO_ALIGN) &&
             pread(fd, b, K3_DIO_ALIGN, 0) >= 0;
    int e = errno;
    free(b); close(fd);
    return ok ? 1 : e == EINVAL ? 0 : -1;
}

static void machine(Doc *d, const char *dir, const K3Model *m, int bench) {
    char err[600];
    d->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    k3_threads_set(0);
    if (k3_kernels_select("auto", err, sizeof err)) snprintf(d->kernels, 32, "none");
    else snprintf(d->kernels, sizeof d->kernels, "%s", k3_kernels_name());
    d->avail = k3_mem_available();
    d->cg = k3_cgroup_available(k3_rss_now(), d->cgdesc, sizeof d->cgdesc);
    if (k3_faults()->mem_available_set) d->avail = k3_faults()->mem_available;
    say(d, "machine\n  cores          %d online; kernels %s\n", d->cores, d->kernels);
    say(d, "  memory         MemAvailable %.3f GB", d->avail / K3_GB);
    if (d->cg) say(d, "; %s limit less its other processes %.3f GB", d->cgdesc, d->cg / K3_GB);
    say(d, "%s\n", d->cg ? "" : "; no cgroup limit");
    k3_thp_mode("enabled", d->thp, sizeof d->thp);
    k3_thp_mode("defrag", d->defrag, sizeof d->defrag);
    const int thp = !strcmp(d->thp, "always") || !strcmp(d->thp, "madvise");
    say(d, "  huge pages     transparent %s, defrag %s: %s\n", d->thp, d->defrag, thp ?
        "the expert cache and a pinned trunk fill 2 MB at a time" : !strcmp(d->thp, "none") ?
        "this kernel has none; the expert cache and a pinned trunk fault in every 4 KB page" :
        "the expert cache and a pinned trunk fault in every 4 KB page; echo madvise > "
        "/sys/kernel/mm/transparent_hugepage/enabled makes their first fill faster");
    struct statfs sf;
    const int have = !statfs(dir, &sf);
    const char *fs = have ? fs_name((long)sf.f_type) : "unknown";
    if (fs) snprintf(d->fs, sizeof d->fs, "%s", fs);
    else snprintf(d->fs, sizeof d->fs, "type 0x%lx", (unsigned long)sf.f_type);
    d->odirect = d->nsh ? odirect_works(d->sh[0].path) : -1;
    say(d, "  filesystem     %s at %s; O_DIRECT %s\n", d->fs, dir,
        d->odirect == 1 ? "works (the engine reads experts and streamed layers around the "
                          "page cache)" :
        d->odirect == 0 ? "refused: reads go through the page cache (works, but a cold "
                          "cache makes streaming slower and memory figures noisier)" :
                          "not tested (no readable shard)");
    if (!bench) { say(d, "  bandwidth      not measured (--no-bench)\n"); return; }
    if (doc_disk_bench(m, d->sh, d->nsh, 256u << 20, 3.0, &d->disk, err, sizeof err))
        say(d, "  disk read      not measured: %s\n", err);
    else
        say(d, "  disk read      %.0f MB/s (%s, %d threads, %.1f KB windows like the expert "
            "cache, %.0f MB in %.2f s)\n", d->disk.mb_s, d->disk.direct ? "O_DIRECT" :
            "buffered: partly the page cache", d->disk.threads, d->disk.window / 1e3,
            d->disk.bytes / 1e6, d->disk.seconds);
    uint64_t mb = 256u << 20;
    if (d->avail && mb > d->avail / 8) mb = d->avail / 8;
    d->mem_gbs = doc_mem_bench(mb);
    say(d, "  memory read    %.1f GB/s (the BF16 matvec on %d threads, %.0f MB of weights)\n",
        d->mem_gbs, k3_threads(), mb / 1e6);
    d->sum_gbs = doc_sum_bench(mb / 4);
    say(d, "  checksum       %.1f GB/s (one thread: what verifying a pinned layer, or with "
        "--verify-reads every streamed one, costs per byte)\n", d->sum_gbs);
}

/* ---- the checkpoint ---- */

/* A shard the index names for vision tensors only: k3 never reads it, so a missing one
 * is named but is no problem. */
static void add_unread(Doc *d, const char *dir, const char *file) {
    char **u = realloc(d->unread, sizeof(char *) * (d->nunread + 1));
    if (!u) return;
    d->unread = u;
    size_t n = strlen(dir) + strlen(file) + 2;
    if (!(u[d->nunread] = malloc(n))) return;
    snprintf(u[d->nunread++], n, "%s/%s", dir, file);
}

static int cmp_pair(const void *a, const void *b) {
    return strcmp(((const char *const *)a)[0], ((const char *const *)b)[0]);
}

static void add_shard(Doc *d, const char *dir, const char *file) {
    DocShard *s = realloc(d->sh, sizeof(DocShard) * (d->nsh + 1));
    if (!s) return;
    d->sh = s;
    size_t n = strlen(dir) + strlen(file) + 2;
    if (!(s[d->nsh].path = malloc(n))) return;
    snprintf(s[d->nsh].path, n, "%s/%s", dir, file);
    s[d->nsh++].size = 0;
}

/* The shard files the index names for text tensors (vision-only ones are not read). */
static int list_shards(Doc *d, const char *dir) {
    char ip[4200], err[600];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    struct stat sb;
    if (stat(ip, &sb)) {
        snprintf(ip, sizeof ip, "%s/model.safetensors", dir);
        if (stat(ip, &sb)) {
            problem(d, "%s: neither model.safetensors.index.json nor model.safetensors "
                    "found; pass the checkpoint directory", dir);
            return -1;
        }
        add_shard(d, dir, "model.safetensors");
        d->named = 1;
        return 0;
    }
    size_t len = 0;
    char *text = k3_slurp(ip, (size_t)1 << 30, &len, err, sizeof err);
    Json *root = text ? json_parse(text, len, err, sizeof err) : NULL;
    free(text);
    const Json *wm = root ? json_get(root, "weight_map") : NULL;
    if (!wm || wm->type != JSON_OBJECT) {
        problem(d, "%s: %s", ip, root ? "no \"weight_map\" object: the index is corrupt — "
                "re-download it" : err);
        json_free(root);
        return -1;
    }
    /* pairs (file, "t" for a text tensor k3 reads, else "v"), sorted by file */
    const char **pr = malloc(sizeof(char *) * 2 * (wm->len + 1));
    size_t n = 0;
    for (size_t i = 0; pr && i < wm->len; i++)
        if (wm->items[i]->type == JSON_STRING) {
            pr[2 * n] = wm->items[i]->str;
            pr[2 * n++ + 1] = strncmp(wm->keys[i], "vision_tower.", 13) &&
                              strncmp(wm->keys[i], "mm_projector.", 13) ? "t" : "v";
        }
    if (pr) qsort(pr, n, 2 * sizeof(char *), cmp_pair);
    for (size_t i = 0, j; pr && i < n; i = j) {
        int text = 0;
        for (j = i; j < n && !strcmp(pr[2 * j], pr[2 * i]); j++) text |= pr[2 * j + 1][0] == 't';
        d->named++;
        if (text) add_shard(d, dir, pr[2 * i]);
        else add_unread(d, dir, pr[2 * i]);
    }
    free(pr);
    json_free(root);
    return 0;
}

/* Every shard present, with a sane header and every tensor inside the file. */
static int check_shards(Doc *d, const char *dir) {
    if (list_shards(d, dir)) return -1;
    int bad = 0;
    for (int i = 0; i < d->nsh; i++) {
        struct stat sb;
        if (stat(d->sh[i].path, &sb)) {
            problem(d, "%s is missing (%s): the index names it for tensors k3 reads — "
                    "download it", d->sh[i].path, strerror(errno));
            const size_t l = strlen(d->missing);
            const char *base = strrchr(d->sh[i].path, '/');
            snprintf(d->missing + l, sizeof d->missing - l, "%s%s", l ? ", " : "",
                     base ? base + 1 : d->sh[i].path);
            bad++;
            continue;
        }
        d->present++;
        d->sh[i].size = (uint64_t)sb.st_size;
        char err[6000];
        StIndex *one = st_new();
        if (!one || st_add_file(one, d->sh[i].path, err, sizeof err)) {
            problem(d, "%s", one ? err : "out of memory");
            bad++;
        } else {
            d->nshards++;
            d->ntensors += (int)one->n_tensors;
            d->bytes += d->sh[i].size;
        }
        if (one) st_close(one);
    }
    for (int i = 0; i < d->nunread; i++) {
        struct stat sb;
        if (!stat(d->unread[i], &sb)) d->unread_present++;
    }
    d->present += d->unread_present;
    return bad ? -1 : 0;
}

/* The shards line: how many the index names, how many are here, and which missing ones
 * matter (those holding tensors k3 reads) and which do not (vision tensors only). */
static void shards_line(const Doc *d, int shards_ok) {
    say(d, "  shards         %d named by the index, %s", d->named,
        d->present == d->named ? "all present" : "");
    if (d->present != d->named) say(d, "%d present", d->present);
    if (shards_ok)
        say(d, ": %d with the tensors k3 reads (complete, %d tensors, %.3f GB; headers sane)",
            d->nshards, d->ntensors, d->bytes / K3_GB);
    else say(d, "; missing, with tensors k3 reads: %s (above)", d->missing[0] ? d->missing :
             "none, but a shard is damaged");
    if (d->nunread)
        say(d, "%s %d with vision tensors only (k3 does not read them)", shards_ok ? "," : ";",
            d->nunread);
    for (int i = 0, first = 1; i < d->nunread; i++) {
        struct stat sb;
        if (!stat(d->unread[i], &sb)) continue;
        const char *base = strrchr(d->unread[i], '/');
        say(d, "%s%s", first ? ", of which missing (nothing to do): " : ", ",
            base ? base + 1 : d->unread[i]);
        first = 0;
    }
    say(d, "\n");
}

/* --scan: every tensor read back; floats finite, E8M0 scales not 0xFF. */
static void scan(Doc *d, K3Model *m) {
    const uint64_t CH = 64u << 20;
    unsigned char *buf = NULL;
    K3DioFile *f = calloc(m->st->n_shards, sizeof *f);
    char err[6000];
    if (!f || posix_memalign((void **)&buf, K3_DIO_ALIGN, k3_dio_room(CH))) {
        problem(d, "out of memory for --scan");
        free(f);
        return;
    }
    double t0 = k3_now(), last = t0;
    for (size_t i = 0; i < m->st->n_tensors; i++) {
        const StTensor *t = &m->st->tensors[i];
        const int scale = t->dtype == ST_U8 && k3_is_scale_tensor(t->name);
        const size_t es = st_dtype_size(t->dtype);
        if (!f[t->shard].path[0] &&
            k3_dio_open(&f[t->shard], m->st->shards[t->shard].path, "--scan reads", err,
                        sizeof err)) {
            problem(d, "%s", err);
            break;
        }
        int64_t bad = -1;
        for (uint64_t o = 0; bad < 0 && o < t->nbytes; o += CH) {
            const uint64_t n = t->nbytes - o < CH ? t->nbytes - o : CH;
            const unsigned char *p = k3_dio_read(&f[t->shard], buf, t->offset + o, n, NULL,
                                                 err, sizeof err);
            if (!p) { problem(d, "%s", err); bad = -2; break; }
            int64_t b = scale ? k3_first_bad_scale(p, n) : k3_first_nonfinite(t->dtype, p, n);
            if (b >= 0) bad = (int64_t)(o / (scale ? 1 : es)) + b;
        }
        d->scan_tensors++; d->scan_bytes += t->nbytes;
        if (bad >= 0 && ++d->scan_bad <= MAX_SHOWN)
            problem(d, "tensor '%s' in %s: %s at element %lld — the shard is corrupt, "
                    "re-download it", t->name, m->st->shards[t->shard].path,
                    scale ? "E8M0 scale 0xFF (NaN)" : "a non-finite value (NaN or Inf)",
                    (long long)bad);
        if (k3_now() - last > 10) {
            last = k3_now();
            fprintf(stderr, "k3: doctor --scan: %zu of %zu tensors (%.1f GB, %.0f MB/s)\n",
                    i + 1, m->st->n_tensors, d->scan_bytes / K3_GB,
                    d->scan_bytes / 1e6 / (last - t0));
        }
    }
    if (d->scan_bad > MAX_SHOWN)
        problem(d, "... and %d more bad tensors", d->scan_bad - MAX_SHOWN);
    for (int i = 0; i < m->st->n_shards; i++) k3_dio_close(&f[i]);
    free(f); free(buf);
    say(d, "  scan           %d tensors, %.3f GB read: %s\n", d->scan_tensors,
        d->scan_bytes / K3_GB, d->scan_bad ? "bad values (above)" :
        "every value finite, every E8M0 scale sane");
}

static void checkpoint(Doc *d, K3Model *m, const char *trunk, int do_scan, int shards_ok) {
    say(d, "checkpoint\n");
    if (d->named) shards_line(d, shards_ok);
    if (!d->model_ok) {
        say(d, "  config         not checked against the tensors: %s\n",
            shards_ok ? "the model does not open (above)" : "fix the shards first");
        return;
    }
    say(d, "  config         %d layers, hidden %d, %d experts (top %d), vocab %d: every "
        "tensor present, shapes and dtypes as config.json says, small vectors finite\n",
        m->cfg.num_hidden_layers, m->cfg.hidden_size, m->cfg.num_experts,
        m->cfg.num_experts_per_token, m->cfg.vocab_size);
    if (trunk) {
        int before = d->nprob;
        k3_trunk_check(m, trunk, report_cb, d, &d->trunk_bytes, &d->trunk_tensors);
        if (d->nprob == before)
            say(d, "  trunk          %s/trunk.k3: format, fingerprint and layout match; all %d "
                "tensors (%.3f GB) match their checksums\n", trunk, d->trunk_tensors,
                d->trunk_bytes / K3_GB);
    } else say(d, "  trunk          not checked (--trunk DIR checks a packed trunk)\n");
    if (do_scan) scan(d, m);
    else say(d, "  scan           not run (--scan reads every byte: finite values, sane "
             "E8M0 scales)\n");
}

/* ---- --draft DIR: the DSpark draft against this model ---- */

static void draft_check(Doc *d, K3Model *m, const char *dir) {
    say(d, "draft %s\n", dir);
    if (!d->model_ok) {
        problem(d, "--draft %s: not checked, the model does not open (above)", dir);
        return;
    }
    K3Engine e;                               /* what the loader reads of an engine */
    memset(&e, 0, sizeof e);
    e.m = *m;
    e.rs.max_T = 1;
    K3DSpark *ds = NULL;
    char err[8192];
    if (k3_dspark_open(&ds, dir, &e, 1, err, sizeof err)) {
        for (char *l = err, *nl; l && *l; l = nl) {   /* one problem a line */
            if ((nl = strchr(l, '\n'))) *nl++ = 0;
            problem(d, "--draft %s", l);
        }
        return;
    }
    const K3DSparkConfig *k = k3_dspark_config(ds);
    char taps[128] = "", a[32], b[32];
    for (int i = 0, o = 0; i < k->n_taps && o < (int)sizeof taps - 8; i++)
        o += snprintf(taps + o, sizeof taps - o, "%s%d", i ? "," : "", k->taps[i]);
    say(d, "  config         %d layers, hidden %d, %d heads, vocab %d, taps after layers %s, "
        "RoPE %s, max positions %d: every key checked against %s\n", k->layers, k->hidden,
        k->heads, k->vocab, taps, k->yarn ? "yarn" : "default", k->max_pos, m->cfg.source);
    say(d, "  tensors        all %d by name, BF16 and shape; embed_tokens.weight (%s) is never "
        "read: the model's embedding and lm_head [%d, %d] are borrowed\n", 8 + 12 * k->layers,
        k3_size_text((uint64_t)k->vocab * k->hidden * 2, a, sizeof a), k->vocab, k->hidden);
    k3_dspark_plan_of(k, &d->dp);
    d->draft_ok = 1;
    say(d, "  memory         %s of weights (pinned, or streamed in pieces once a block); %s of "
        "context a position\n", k3_size_text(d->dp.weights, a, sizeof a),
        k3_size_text(d->dp.pos_bytes, b, sizeof b));
    k3_dspark_close(ds);
}

/* The presets with the draft: its plan (weights or window, context, the verify pass's undo
 * log for a block of 7), pinned or streamed, and what a block reads from disk. */
static void draft_presets(Doc *d, const K3Model *m, uint64_t avail) {
    const int rows = K3_DSPARK_MAX_N + 1;
    say(d, "  with --draft   %-12s %9s %5s %9s %9s %13s\n", "preset", "plan GB", "fits", "draft",
        "undo GB", "block MB");
    K3PresetCost pc;
    const char *name;
    for (int i = 0; (name = k3_preset_cost_draft(m, i, 4096, &d->dp, rows, &pc)); i++) {
        const int fits = !avail || pc.total <= 0.9 * avail;
        say(d, "                 %-12s %9.3f %5s %9s %9.3f %13.1f\n", name, pc.total / K3_GB,
            fits ? "yes" : "no", pc.draft_pinned ? "pinned" : "streamed", pc.undo / K3_GB,
            pc.block_read / 1e6);
        if (d->rec && !strcmp(name, d->rec)) {
            d->draft_rec = pc;
            d->draft_rec_pinned = pc.draft_pinned;
        }
    }
    say(d, "  (block MB: the trunk, the draft and the experts of %d rows the cache misses, "
        "read from disk by one draft block and its verify pass)\n", rows);
}

/* ---- the recommendation ---- */

static void recommend(Doc *d, const K3Model *m) {
    const uint64_t avail = d->cg && (!d->avail || d->cg < d->avail) ? d->cg : d->avail;
    const double disk = d->disk.mb_s * 1e6, mem = d->mem_gbs * 1e9;
    say(d, "recommendation (decode, --ctx 4096; the s/token is an estimate: bytes streamed "
        "per token / disk read + bytes read from memory / memory read, uniform routing)\n");
    say(d, "  %-12s %9s %5s %8s %9s %13s %11s\n", "preset", "plan GB", "fits", "pinned",
        "slots", "streamed MB", "est. s/tok");
    K3PresetCost pc;
    const char *name;
    for (int i = 0; (name = k3_preset_cost(m, i, 4096, &pc)); i++) {
        const int fits = !avail || pc.total <= 0.9 * avail;
        const double s = disk > 0 && mem > 0 ? pc.streamed / disk + pc.resident / mem : 0;
        char est[32] = "-";
        if (s > 0) snprintf(est, sizeof est, "%.3g", s);
        say(d, "  %-12s %9.3f %5s %5d/%-2d %9d %13.1f %11s\n", name, pc.total / K3_GB,
            fits ? "yes" : "no", pc.n_pinned, m->cfg.num_hidden_layers, pc.nslots,
            pc.streamed / 1e6, est);
        if (fits) {
            d->rec = name; d->rec_s = s;
            d->rec_stream = pc.n_pinned < m->cfg.num_hidden_layers || pc.head_stream;
        }
    }
    if (!d->rec) {
        problem(d, "not even --preset laptop fits the %.3f GB available: k3 would refuse to "
                "run (free memory, or raise the cgroup limit)", avail / K3_GB);
        return;
    }
    /* the trunk streams from the shards with no pack; a pack only adds checksums and,
     * coded, fewer bytes a token */
    say(d, "  recommended: --preset %s%s", d->rec, d->rec_stream ? " (the trunk streams from "
        "the shards, no pack needed; k3 pack MODEL_DIR TRUNK_DIR --compress, then --trunk "
        "TRUNK_DIR, streams fewer bytes with checksums)" : "");
    if (d->rec_s > 0) say(d, ", about %.3g s/token (an estimate)\n", d->rec_s);
    else say(d, " (no s/token estimate without the bandwidth measurements)\n");
    if (d->draft_ok) draft_presets(d, m, avail);
}

/* ---- output ---- */

static void json_str(const char *key, const char *v, int last) {
    char *q = json_quote(v, strlen(v));
    printf("  \"%s\": %s%s\n", key, q ? q : "null", last ? "" : ",");
    free(q);
}

static void print_json(const Doc *d, const char *dir) {
    printf("{\n");
    json_str("model_dir", dir, 0);
    printf("  \"cores\": %d,\n  \"kernels\": \"%s\",\n", d->cores, d->kernels);
    printf("  \"mem_available_bytes\": %llu,\n", (unsigned long long)d->avail);
    if (d->cg) printf("  \"cgroup_available_bytes\": %llu,\n", (unsigned long long)d->cg);
    else printf("  \"cgroup_available_bytes\": null,\n");       /* no cgroup limit */
    json_str("filesystem", d->fs, 0);
    printf("  \"o_direct\": %s,\n", d->odirect < 0 ? "null" : d->odirect ? "true" : "false");
    json_str("transparent_hugepage", d->thp, 0);
    json_str("transparent_hugepage_defrag", d->defrag, 0);
    if (d->disk.mb_s > 0)                      /* null: not measured */
        printf("  \"disk_read_mb_s\": %.1f,\n  \"disk_read_o_direct\": %s,\n", d->disk.mb_s,
               d->disk.direct ? "true" : "false");
    else printf("  \"disk_read_mb_s\": null,\n  \"disk_read_o_direct\": null,\n");
    if (d->mem_gbs > 0) printf("  \"memory_read_gb_s\": %.2f,\n", d->mem_gbs);
    else printf("  \"memory_read_gb_s\": null,\n");
    if (d->sum_gbs > 0) printf("  \"checksum_gb_s\": %.2f,\n", d->sum_gbs);
    else printf("  \"checksum_gb_s\": null,\n");
    printf("  \"shards\": %d,\n  \"tensors\": %d,\n  \"bytes\": %llu,\n", d->nshards,
           d->ntensors, (unsigned long long)d->bytes);
    printf("  \"shards_named\": %d,\n  \"shards_present\": %d,\n  \"shards_vision_only\": %d,\n",
           d->named, d->present, d->nunread);
    printf("  \"trunk_tensors_checked\": %d,\n  \"tensors_scanned\": %d,\n", d->trunk_tensors,
           d->scan_tensors);
    if (d->rec) json_str("recommended_preset", d->rec, 0);
    if (d->draft) {
        json_str("draft_dir", d->draft, 0);
        printf("  \"draft_ok\": %s,\n", d->draft_ok ? "true" : "false");
    }
    if (d->draft_ok)
        printf("  \"draft_weights_bytes\": %llu,\n  \"draft_context_bytes_per_position\": "
               "%llu,\n  \"draft_pinned_at_recommended\": %s,\n  \"draft_plan_bytes\": %llu,\n"
               "  \"draft_block_disk_bytes\": %llu,\n", (unsigned long long)d->dp.weights,
               (unsigned long long)d->dp.pos_bytes, d->draft_rec_pinned ? "true" : "false",
               (unsigned long long)d->draft_rec.total,
               (unsigned long long)d->draft_rec.block_read);
    if (d->rec_s > 0) printf("  \"estimated_seconds_per_token\": %.6g,\n", d->rec_s);
    else printf("  \"estimated_seconds_per_token\": null,\n");
    printf("  \"problems\": [");
    for (int i = 0; i < d->nprob; i++) {
        char *q = json_quote(d->prob[i], strlen(d->prob[i]));
        printf("%s\n    %s", i ? "," : "", q ? q : "null");
        free(q);
    }
    printf("%s],\n  \"healthy\": %s\n}\n", d->nprob ? "\n  " : "", d->nprob ? "false" : "true");
}

static const char *USAGE =
    "Usage: k3 doctor MODEL_DIR [--trunk DIR] [--draft DIR] [--scan] [--json] [--no-bench]\n"
    "Checks this machine and a checkpoint before a long run, and recommends a preset with\n"
    "an estimated s/token (docs/DOCTOR.md). Every problem found is named.\n"
    "  --trunk DIR   also check the packed trunk DIR/trunk.k3: format, fingerprint, every\n"
    "                tensor's checksum\n"
    "  --draft DIR   also check a DSpark draft model against MODEL_DIR (config key by key,\n"
    "                tensors by name and shape) and give its memory on every preset\n"
    "  --scan        read every tensor: values finite, E8M0 scales sane (reads the whole\n"
    "                checkpoint: minutes per 100 GB)\n"
    "  --json        the report as JSON on stdout\n"
    "  --no-bench    skip the disk and memory measurements (a few seconds)\n"
    "  -h, --help    this text\n"
    "Exit: 0 healthy, 1 problems found (each on stderr and in the report), 2 usage.\n";

int k3_doctor_main(int argc, char **argv) {
    const char *dir = NULL, *trunk = NULL;
    int do_scan = 0, bench = 1;
    Doc d;
    memset(&d, 0, sizeof d);
    for (int i = 1; i < argc; i++)        /* anywhere, even where a value was due */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout); return 0; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return 0; }
        else if (!strcmp(a, "--scan")) do_scan = 1;
        else if (!strcmp(a, "--json")) d.json = 1;
        else if (!strcmp(a, "--no-bench")) bench = 0;
        else if (!strcmp(a, "--trunk") || !strcmp(a, "--draft")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "k3: doctor: %s needs a value\n%s", a, USAGE);
                return K3_ERR_USAGE;
            }
            if (a[2] == 't') trunk = argv[++i];
            else d.draft = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "k3: doctor: unknown option '%s'\n%s", a, USAGE);
            return K3_ERR_USAGE;
        } else if (!dir) dir = a;
        else {
            fprintf(stderr, "k3: doctor: unexpected argument '%s' (MODEL_DIR was already "
                    "given)\n", a);
            return K3_ERR_USAGE;
        }
    }
    if (!dir) {
        fprintf(stderr, "k3: doctor: missing MODEL_DIR\n%s", USAGE);
        return K3_ERR_USAGE;
    }
    say(&d, "k3 doctor %s\n", dir);
    say(&d, "checkpoint files\n");
    const int shards_ok = !check_shards(&d, dir);
    K3Model m;
    memset(&m, 0, sizeof m);
    char err[6000];
    if (shards_ok) {
        int rc = k3_model_open(&m, dir, NULL, err, sizeof err);
        if (rc) problem(&d, "%s", err);
        else d.model_ok = 1;
    }
    if (!d.nprob && d.present == d.named) say(&d, "  every file present\n");
    else if (!d.nprob)                        /* the vision-only shards are not read */
        say(&d, "  every file k3 reads present (%d of the %d named are missing; see shards)\n",
            d.named - d.present, d.named);
    machine(&d, dir, d.model_ok ? &m : NULL, bench);
    checkpoint(&d, &m, trunk, do_scan, shards_ok);
    if (d.draft) draft_check(&d, &m, d.draft);
    if (d.model_ok) recommend(&d, &m);
    if (d.json) print_json(&d, dir);
    else if (!d.nprob) printf("k3 doctor: healthy\n");
    else {
        printf("k3 doctor: %d problem%s:\n", d.nprob, d.nprob > 1 ? "s" : "");
        for (int i = 0; i < d.nprob; i++) printf("  %d. %s\n", i + 1, d.prob[i]);
    }
    const int rc = d.nprob ? K3_ERR_RUNTIME : 0;
    k3_model_close(&m);
    for (int i = 0; i < d.nprob; i++) free(d.prob[i]);
    for (int i = 0; i < d.nsh; i++) free(d.sh[i].path);
    for (int i = 0; i < d.nunread; i++) free(d.unread[i]);
    free(d.unread);
    free(d.prob); free(d.sh);
    return rc;
}
