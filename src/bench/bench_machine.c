/* bench_machine.c — what `k3 bench` reports beside its rows: the machine (CPU, cores,
 * kernels, memory, cgroup, filesystem, O_DIRECT) and the limits measured in the same
 * run: memory read bandwidth (bench.c's stream read) and the disk's bandwidth with the
 * engine's own read pattern on the model's files (one expert's aligned window per read,
 * 4 readers as the expert I/O pool, O_DIRECT where the filesystem allows it). */
#include "bench_grid.h"
#include "cli.h"
#include "dio.h"
#include "k3.h"
#include "pool.h"
#include "roofline.h"
#include "sysmem.h"
#include "tensors.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define DISK_READERS 4                       /* the expert cache's I/O threads */
#define DISK_SECONDS 10.0                    /* no new reads after this */

/* Freed heap back to the system: a forked child starts with the parent's resident pages,
 * and wait4's peak RSS counts them (the index of a big checkpoint is ~100 MB). */
static void trim(void) {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

static uint64_t meminfo(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long v = 0;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    if (f) fclose(f);
    return (uint64_t)v * 1024;
}

void k3_cpu_model(char *out, size_t n) {      /* roofline.h */
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    out[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c || (strncmp(line, "model name", 10) && strncmp(line, "Hardware", 8))) continue;
        c += 1 + (c[1] == ' ');
        c[strcspn(c, "\n")] = 0;
        snprintf(out, n, "%s", c);
        break;
    }
    if (f) fclose(f);
    if (!out[0]) {
        struct utsname u;
        snprintf(out, n, "%s", uname(&u) ? "unknown" : u.machine);
    }
}

/* The type of the filesystem holding path: the longest mount point above it. */
static void fs_type(const char *path, char *out, size_t n) {
    char real[PATH_MAX], dev[512], mnt[PATH_MAX], type[64];
    FILE *f = fopen("/proc/self/mounts", "r");
    size_t best = 0;
    snprintf(out, n, "unknown");
    if (!realpath(path, real) || !f) { if (f) fclose(f); return; }
    while (fscanf(f, "%511s %4095s %63s %*[^\n]", dev, mnt, type) == 3) {
        size_t l = strlen(mnt);
        int above = !strncmp(real, mnt, l) && (real[l] == '/' || !real[l] || l == 1);
        if (above && l >= best) { best = l; snprintf(out, n, "%s", type); }
    }
    fclose(f);
}

void kb_machine_describe(KbMachine *m, const char *model) {
    char err[200];
    struct utsname u;
    k3_cpu_model(m->cpu, sizeof m->cpu);
    m->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (k3_kernels_select("auto", err, sizeof err)) snprintf(m->kernels, sizeof m->kernels, "?");
    else snprintf(m->kernels, sizeof m->kernels, "%s", k3_kernels_name());
    if (uname(&u)) snprintf(m->os, sizeof m->os, "unknown");
    else snprintf(m->os, sizeof m->os, "%s %s %s", u.sysname, u.release, u.machine);
    m->mem_total = meminfo("MemTotal");
    m->mem_avail = meminfo("MemAvailable");
    m->cg_avail = k3_cgroup_available(k3_rss_now(), m->cg_desc, sizeof m->cg_desc);
    fs_type(model, m->fs, sizeof m->fs);
}

/* O_DIRECT on this file: an aligned 4 KiB read at 0 (1 yes, 0 no). */
static int probe_direct(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC), ok = 0;
    void *buf = NULL;
    if (fd >= 0 && !posix_memalign(&buf, K3_DIO_ALIGN, K3_DIO_ALIGN))
        ok = pread(fd, buf, K3_DIO_ALIGN, 0) >= 0;
    if (fd >= 0) close(fd);
    free(buf);
    return ok;
}

int kb_model_facts(KbMachine *m, const char *model, char *err, size_t errlen) {
    char path[4200];
    K3Config c;
    snprintf(path, sizeof path, "%s/config.json", model);
    int rc = k3_config_load(path, &c, err, errlen);
    if (rc) return rc;
    m->vocab = c.vocab_size; m->bos = c.bos_token_id; m->eos = c.eos_token_id;
    m->pad = c.pad_token_id;
    StIndex *st = st_open(model, err, errlen);
    if (!st) return K3_ERR_USAGE;
    uint64_t trunk = 0;
    for (size_t i = 0; i < st->n_tensors; i++) {
        const char *name = st->tensors[i].name;
        int L = k3_tensor_layer(name);
        if (!k3_is_trunk_tensor(name) || strstr(name, "embed_tokens") || L >= c.num_hidden_layers)
            continue;                          /* embedding: one row a token; MTP layers unused */
        trunk += st->tensors[i].nbytes;
    }
    int moe = 0;
    for (int L = 0; L < c.num_hidden_layers; L++) moe += c.is_moe[L];
    m->touched = trunk + (uint64_t)moe * c.num_experts_per_token * k3_expert_bytes(&c);
    m->files = calloc((size_t)st->n_shards + 1, sizeof(char *));
    for (int i = 0; m->files && i < st->n_shards; i++)
        if ((m->files[m->n_files] = strdup(st->shards[i].path))) m->n_files++;
    m->odirect = st->n_shards ? probe_direct(st->shards[0].path) : -1;
    st_close(st);
    trim();
    return 0;
}

void kb_machine_free(KbMachine *m) {
    for (int i = 0; i < m->n_files; i++) free(m->files[i]);
    free(m->files);
    m->files = NULL; m->n_files = 0;
}

static void evict_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

void kb_evict(const KbMachine *m, const char *trunk, int drop_caches) {
    static int warned;
    for (int i = 0; i < m->n_files; i++) evict_file(m->files[i]);
    if (trunk) {
        char p[4200];
        snprintf(p, sizeof p, "%s/trunk.k3", trunk);
        evict_file(p);
    }
    if (!drop_caches) return;
    FILE *f = geteuid() == 0 ? (sync(), fopen("/proc/sys/vm/drop_caches", "w")) : NULL;
    int ok = f && fputs("3\n", f) >= 0;
    if (f && fclose(f)) ok = 0;
    if (!ok && !warned++)
        fprintf(stderr, "k3 bench: note: --drop-caches: cannot write /proc/sys/vm/drop_caches "
                "(%s); evicting the model's files only\n",
                geteuid() ? "not root" : strerror(errno));
}

double kb_mem_limit(const KbMachine *m, int threads) {
    if (threads <= 0) threads = m->cores;
    for (int i = 0; i < m->n_bw; i++) if (m->bw_threads[i] == threads) return m->bw_gbps[i];
    return 0;
}

void kb_measure_memory(KbMachine *m, const int *threads, int n, int quiet) {
    uint64_t avail = m->mem_avail ? m->mem_avail / 8 : (uint64_t)512 << 20;
    size_t bytes = avail > ((uint64_t)512 << 20) ? (size_t)512 << 20 : (size_t)avail;
    if (bytes < ((size_t)64 << 20)) bytes = (size_t)64 << 20;
    for (int i = 0; i < n && m->n_bw < KB_MAXBW; i++) {
        if (kb_mem_limit(m, threads[i]) > 0) continue;
        if (!quiet)
            fprintf(stderr, "k3 bench: memory read bandwidth, %d thread%s\n", threads[i],
                    threads[i] == 1 ? "" : "s");
        m->bw_threads[m->n_bw] = threads[i];
        m->bw_gbps[m->n_bw++] = k3_mem_read_bw(bytes, threads[i], 5);
    }
    k3_pool_shutdown();                        /* children fork from a one-thread parent */
}

/* The run's machine probe (roofline.h) for each kernels and thread count of the grid,
 * here: in a rep it would count in the rep's peak RSS (its 128 MiB read buffer). */
void kb_machine_cache(const char *const *kern, int nk, const int *threads, int nt) {
    char err[200];
    for (int k = 0; k < nk; k++) {
        if (k3_kernels_select(kern[k] ? kern[k] : "auto", err, sizeof err)) continue;
        for (int t = 0; t < nt; t++) {
            K3Machine mc;
            k3_threads_set(threads[t]);
            k3_machine_get(&mc, 0);
        }
    }
    k3_kernels_select("auto", err, sizeof err);
    k3_threads_set(0);
    k3_pool_shutdown();                        /* children fork from a one-thread parent */
    trim();
}

/* ---- the disk with the engine's pattern ---- */

typedef struct { uint32_t key; int shard; uint64_t lo, hi; } Win;

static int cmp_win(const void *a, const void *b) {
    const Win *x = a, *y = b;
    return x->key != y->key ? (x->key > y->key) - (x->key < y->key)
                            : (x->lo > y->lo) - (x->lo < y->lo);
}

/* The expert index in a routed expert's name ("...experts.12.w1..."), or -1. */
static int expert_of(const char *name) {
    const char *p = strstr(name, ".experts.");
    return p && p[9] >= '0' && p[9] <= '9' ? atoi(p + 9) : -1;
}

typedef struct {
    const Win *w; int n;
    K3DioFile *files;
    pthread_mutex_t mu; int next, failed;
    uint64_t moved, maxwin;
    double t0;
    char err[600];
} Disk;

static void *reader(void *arg) {
    Disk *d = arg;
    void *buf = NULL;
    if (posix_memalign(&buf, K3_DIO_ALIGN, k3_dio_room(d->maxwin))) return NULL;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        int i = d->failed || k3_now() - d->t0 > DISK_SECONDS ? d->n : d->next++;
        pthread_mutex_unlock(&d->mu);
        if (i >= d->n) break;
        const Win *w = &d->w[i];
        uint64_t moved = 0;
        char err[600];
        const unsigned char *p = k3_dio_read(&d->files[w->shard], buf, w->lo, w->hi - w->lo,
                                             &moved, err, sizeof err);
        pthread_mutex_lock(&d->mu);
        if (p) d->moved += moved;
        else if (!d->failed++) snprintf(d->err, sizeof d->err, "%s", err);
        pthread_mutex_unlock(&d->mu);
    }
    free(buf);
    return NULL;
}

/* The routed experts' windows, one per (layer, expert) in the shard it lives in. */
static Win *expert_windows(const StIndex *st, int *nw) {
    Win *w = malloc(sizeof(Win) * (st->n_tensors ? st->n_tensors : 1));
    int n = 0;
    for (size_t i = 0; w && i < st->n_tensors; i++) {
        const StTensor *t = &st->tensors[i];
        int L = k3_tensor_layer(t->name), e = expert_of(t->name);
        if (L < 0 || e < 0 || L > 4095 || e > 1048575) continue;
        w[n++] = (Win){ (uint32_t)L << 20 | (uint32_t)e, t->shard, t->offset,
                        t->offset + t->nbytes };
    }
    if (!w) { *nw = 0; return NULL; }
    qsort(w, (size_t)n, sizeof *w, cmp_win);
    int k = 0;
    for (int i = 0; i < n; i++) {                /* one window per expert, as the engine reads */
        if (k && w[k - 1].key == w[i].key && w[k - 1].shard == w[i].shard) {
            if (w[i].hi > w[k - 1].hi) w[k - 1].hi = w[i].hi;
        } else w[k++] = w[i];
    }
    *nw = k;
    return w;
}

void kb_measure_disk(KbMachine *m, const char *model, double gb, int quiet) {
    char err[4200];
    StIndex *st = st_open(model, err, sizeof err);
    int n = 0;
    Win *w = st ? expert_windows(st, &n) : NULL;
    if (!st || !n) { free(w); if (st) st_close(st); return; }
    uint64_t s = 0x2545F4914F6CDD1Dull, total = 0, maxwin = 0;
    for (int i = n - 1; i > 0; i--) {          /* a fixed shuffle: every run reads the same */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        int j = (int)(s % (uint64_t)(i + 1));
        Win t = w[i]; w[i] = w[j]; w[j] = t;
    }
    int take = 0;
    while (take < n && (take == 0 || total + (w[take].hi - w[take].lo) <= gb * 1e9)) {
        total += w[take].hi - w[take].lo;
        if (w[take].hi - w[take].lo > maxwin) maxwin = w[take].hi - w[take].lo;
        take++;
    }
    K3DioFile *files = calloc((size_t)st->n_shards, sizeof *files);
    int ok = files != NULL;
    for (int i = 0; ok && i < st->n_shards; i++) {
        evict_file(st->shards[i].path);        /* a buffered fallback must not hit the cache */
        ok = !k3_dio_open(&files[i], st->shards[i].path, "the disk limit", err, sizeof err);
    }
    if (!quiet && ok)
        fprintf(stderr, "k3 bench: disk bandwidth, %d expert windows (%.2f GB), %d readers\n",
                take, total / K3_GB, DISK_READERS);
    Disk d = { w, take, files, PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, maxwin, k3_now(), "" };
    pthread_t th[DISK_READERS];
    int started = 0;
    for (int i = 0; ok && i < DISK_READERS; i++)
        if (!pthread_create(&th[i], NULL, reader, &d)) started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    double secs = k3_now() - d.t0;
    if (ok && started && !d.failed && d.moved) {
        m->disk_mbps = d.moved / 1e6 / secs; m->disk_s = secs; m->disk_bytes = d.moved;
        m->disk_reads = d.next < take ? d.next : take; m->disk_window = maxwin;
        m->disk_readers = started;
        int direct = 1;
        for (int i = 0; i < st->n_shards; i++) direct &= files[i].direct && files[i].dfd >= 0;
        m->odirect = direct;
    } else if (!quiet)
        fprintf(stderr, "k3 bench: note: the disk limit was not measured (%s)\n",
                d.failed ? d.err : ok ? "no reader thread" : err);
    for (int i = 0; files && i < st->n_shards; i++) k3_dio_close(&files[i]);
    free(files); free(w);
    st_close(st);
    trim();
}
