/* doctor_bench.c — what this machine's disk and memory deliver, measured the way the
 * engine reads (doctor.h): the disk with expert-sized O_DIRECT windows (dio.h) from 4
 * threads on the model's own files, bounded in bytes and seconds; memory with the BF16
 * matvec kernel on every core. Figures for an estimate, not a benchmark. */
#include "doctor.h"
#include "dio.h"
#include "kernels.h"
#include "util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int shard; uint64_t off, n; } Win;

typedef struct {
    K3DioFile *files; int nfiles;
    const Win *win; size_t nwin;
    uint64_t max_bytes, bytes, reads; double t0, max_s;
    uint64_t room;
    pthread_mutex_t mu;
    int failed; char err[600];
} Bench;

static void *reader(void *arg) {
    Bench *b = arg;
    unsigned char *buf = NULL;
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&buf;   /* per-thread stream */
    if (posix_memalign((void **)&buf, K3_DIO_ALIGN, b->room)) return NULL;
    for (;;) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        const Win *w = &b->win[x % b->nwin];
        char err[600];
        uint64_t moved = 0;
        const int ok = k3_dio_read(&b->files[w->shard], buf, w->off, w->n, &moved, err,
                                   sizeof err) != NULL;
        pthread_mutex_lock(&b->mu);
        if (!ok && !b->failed) { b->failed = 1; snprintf(b->err, sizeof b->err, "%s", err); }
        b->bytes += moved; b->reads++;
        const int stop = b->failed || b->bytes >= b->max_bytes || k3_now() - b->t0 >= b->max_s;
        pthread_mutex_unlock(&b->mu);
        if (stop) break;
    }
    free(buf);
    return NULL;
}

static int push(Win **w, size_t *k, size_t *cap, Win x) {
    if (*k == *cap) {
        Win *nw = realloc(*w, (*cap *= 2) * sizeof *nw);
        if (!nw) return -1;
        *w = nw;
    }
    (*w)[(*k)++] = x;
    return 0;
}

/* The windows: every routed expert of m (one coalesced read each, as the cache does), or
 * 1 MB pieces of the shards when there are none. */
static Win *windows(const K3Model *m, const DocShard *sh, int nsh, size_t *n, int *experts) {
    size_t cap = 1024, k = 0;
    Win *w = malloc(cap * sizeof *w);
    int oom = !w;
    for (int L = 0; !oom && m && L < m->cfg.num_hidden_layers; L++) {
        const K3Layer *ly = &m->layers[L];
        if (!ly->is_moe || !ly->experts) continue;
        for (int e = 0; !oom && e < m->cfg.num_experts; e++) {
            const StTensor *t = ly->experts[(size_t)e * 6];
            oom = push(&w, &k, &cap, (Win){ t->shard, t->offset, k3_expert_bytes(&m->cfg) });
        }
    }
    *experts = k > 0;
    for (int s = 0; !oom && !k && s < nsh; s++)
        for (uint64_t o = 0; !oom && o + (1u << 20) <= sh[s].size; o += 1u << 20)
            oom = push(&w, &k, &cap, (Win){ s, o, 1u << 20 });
    if (oom) { free(w); w = NULL; k = 0; }
    *n = k;
    return w;
}

int doc_disk_bench(const K3Model *m, const DocShard *sh, int nsh, uint64_t max_bytes,
                   double max_s, DocDisk *out, char *err, size_t errlen) {
    Bench b;
    memset(&b, 0, sizeof b);
    memset(out, 0, sizeof *out);
    int experts = 0;
    Win *w = windows(m, sh, nsh, &b.nwin, &experts);
    if (!w || !b.nwin) {
        free(w);
        snprintf(err, errlen, "no file of the model is large enough to measure");
        return -1;
    }
    b.win = w;
    b.nfiles = experts ? m->st->n_shards : nsh;
    b.files = calloc(b.nfiles, sizeof(K3DioFile));
    if (!b.files) { free(w); snprintf(err, errlen, "out of memory"); return -1; }
    int rc = 0;
    for (int i = 0; i < b.nfiles && !rc; i++)
        rc = k3_dio_open(&b.files[i], experts ? m->st->shards[i].path : sh[i].path,
                         "doctor reads", err, errlen);
    uint64_t all = 0;
    for (size_t i = 0; i < b.nwin; i++) all += w[i].n;
    b.max_bytes = all * 4 < max_bytes ? all * 4 : max_bytes;   /* tiny models: 4 passes */
    b.max_s = max_s;
    b.room = k3_dio_room(w[0].n);
    pthread_mutex_init(&b.mu, NULL);
    pthread_t th[4];
    int nth = 0;
    b.t0 = k3_now();
    for (int i = 0; !rc && i < 4; i++) if (!pthread_create(&th[nth], NULL, reader, &b)) nth++;
    for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
    const double dt = k3_now() - b.t0;
    pthread_mutex_destroy(&b.mu);
    if (!rc && (b.failed || !nth)) {
        snprintf(err, errlen, "%s", nth ? b.err : "cannot start the reader threads");
        rc = -1;
    }
    out->direct = 1;
    for (int i = 0; i < b.nfiles; i++) {
        if (b.files[i].path[0] && !b.files[i].direct) out->direct = 0;
        k3_dio_close(&b.files[i]);
    }
    out->bytes = b.bytes; out->window = w[0].n; out->threads = nth; out->seconds = dt;
    out->mb_s = !rc && dt > 0 ? b.bytes / 1e6 / dt : 0;
    free(b.files); free(w);
    return rc ? -1 : 0;
}

/* Memory as the decode sees it: the engine's own BF16 matvec (k3_matmul, every core)
 * over a matrix of the given size, best of 3; bytes of weights per second. */
double doc_mem_bench(uint64_t bytes) {
    const int cols = 8192, rows = (int)(bytes / 2 / cols);
    if (rows < 64) return 0;
    uint16_t *w = malloc((size_t)rows * cols * 2);
    float *x = malloc(sizeof(float) * cols), *y = malloc(sizeof(float) * rows);
    double best = 0;
    if (w && x && y) {
        for (size_t i = 0; i < (size_t)rows * cols; i++) w[i] = 0x3c00 + (uint16_t)(i & 0xff);
        for (int i = 0; i < cols; i++) x[i] = 1.0f / (float)(i + 1);
        const K3Mat W = { K3_W_BF16, rows, cols, w, NULL, NULL };
        for (int run = 0; run < 3; run++) {
            double t0 = k3_now();
            k3_matmul(y, &W, x, 1);
            double dt = k3_now() - t0;
            if (dt > 0 && (double)rows * cols * 2 / dt / 1e9 > best)
                best = (double)rows * cols * 2 / dt / 1e9;
        }
    }
    free(w); free(x); free(y);
    return best;
}

double doc_sum_bench(uint64_t bytes) {
    unsigned char *p = malloc(bytes);
    if (!p || bytes < 4096) { free(p); return 0; }
    for (uint64_t i = 0; i < bytes; i++) p[i] = (unsigned char)(i * 131 + (i >> 11));
    double best = 0;
    volatile uint64_t sink = 0;
    for (int run = 0; run < 3; run++) {
        double t0 = k3_now();
        sink ^= k3_sum64(p, bytes);
        double dt = k3_now() - t0;
        if (dt > 0 && bytes / dt / 1e9 > best) best = bytes / dt / 1e9;
    }
    (void)sink;
    free(p);
    return best;
}
