/* statefile.c — sequences' states in a file that streams with their layers (statefile.h).
 *
 * The file holds one record per (paged layer, sequence), layer-major, each 4096-aligned so
 * that O_DIRECT works where the filesystem has it: a KDA record is the state S then the
 * conv windows; an MLA record is the latent cache [ctx][kv_lora] then k_pe [ctx][rope],
 * each part padded. In memory there are K3_STATEFILE_NBUF layer buffers of every
 * sequence's record: paged layer k uses buffer k % NBUF. One I/O thread runs the jobs in
 * the order they were queued: a step queues the reads of its first NBUF-1 paged layers,
 * and each release(k) queues the write-back of k and the read of k + NBUF - 1 into the
 * buffer whose write-back was queued just before, so the disk works while the layers
 * compute and no job touches the buffer a layer is computing in. Only the sequences of
 * the step are moved: a KDA record whole (zeros instead of a read when it was reset), an
 * MLA record's rows below the position read and the step's new rows written (widened to
 * whole 4096-byte blocks: the read covers the block a write starts in, and bytes past the
 * new rows are rewritten before they are read). The first failure stops every later job
 * and is reported by the next acquire or end: a failed write is never read back. */
#include "statefile.h"
#include "dio.h"
#include "fault.h"
#include "pool.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NBUF = K3_STATEFILE_NBUF, QCAP = 4 * NBUF };

typedef struct { int write, k; } Job;

struct K3StateFile {
    K3Pager base;
    const K3Config *c;
    int fd, direct, mode, n, ctx;
    char dir[4096];
    int npl, *pl, *pl_of;                     /* paged layers in order; layer -> index or -1 */
    uint64_t kda_rec, mla_cb, mla_rec, region;
    uint64_t *off;                            /* [npl]: file offset of layer k's records */
    unsigned char *buf[NBUF];                 /* [n][region] each */
    /* the step */
    K3State **part; int *ppos, *pT, npart;
    int next;                                 /* the next paged layer to read */
    long *ticket;                             /* [npl]: the job count once k's read is done */
    /* the I/O thread */
    pthread_t th; int th_up, quit;
    pthread_mutex_t mu; pthread_cond_t wake, idle;
    Job q[QCAP]; long queued, done;
    int failed; char why[1400];
    long nth_read, nth_write;                 /* for K3_FAULT_STATE_READ / _WRITE */
    K3StateFileStats st;
};

static uint64_t kda_bytes(const K3Config *c) {
    const uint64_t NH = c->kda_num_heads, D = c->kda_head_dim;
    return (NH * D * D + 3 * NH * D * (c->short_conv_kernel_size - 1)) * 4;
}

void k3_statefile_size(const K3Config *c, int mode, int n, int ctx, K3StateFileSize *z) {
    memset(z, 0, sizeof *z);
    if (mode <= K3_STATES_RESIDENT) return;
    const uint64_t kr = k3_up4k(kda_bytes(c)), cb = k3_up4k((uint64_t)ctx * c->kv_lora_rank * 4);
    const uint64_t mr = cb + k3_up4k((uint64_t)ctx * c->qk_rope_head_dim * 4);
    int nk = 0, nm = 0;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        if (c->is_kda[L]) nk++;
        else nm += mode == K3_STATES_ALL;
    }
    z->record = nm && mr > kr ? mr : kr;
    z->layers = nk + nm;
    z->file = (uint64_t)n * (nk * kr + nm * mr);
    z->buffers = (uint64_t)NBUF * n * z->record;
    z->kda_step = 2 * (uint64_t)n * nk * kr;
    z->mla_step = (uint64_t)n * nm * (mr + 2 * 4096);   /* rows below read, new rows written */
}

/* ---- the bytes ---- */

static int fault(long *nth, long at) { return at > 0 && ++*nth == at; }

/* Moves n bytes (4096-multiples, aligned buffer) at off; on an O_DIRECT refusal (EINVAL)
 * falls back to the page cache once. 0, or -1 with errno (EIO for a short transfer). */
static int move(K3StateFile *f, int write, unsigned char *p, uint64_t off, uint64_t n) {
    const K3Faults *fl = k3_faults();
    if (write ? fault(&f->nth_write, fl->state_write) : fault(&f->nth_read, fl->state_read)) {
        errno = write ? ENOSPC : EIO;
        return -1;
    }
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = write ? pwrite(f->fd, p + got, n - got, (off_t)(off + got))
                          : pread(f->fd, p + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EINVAL && f->direct) {
            f->direct = 0;
            if (fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) & ~O_DIRECT) == 0) continue;
        }
        if (r < 0) return -1;
        if (r == 0) { errno = write ? ENOSPC : EIO; return -1; }
        got += (uint64_t)r;
    }
    if (write) f->st.written += n; else f->st.read += n;
    return 0;
}

static uint64_t down4k(uint64_t x) { return x & ~(uint64_t)4095; }

/* Job j over the step's sequences; on failure the reason in why. */
static int run_job(K3StateFile *f, const Job *j, char *why, size_t n) {
    const int k = j->k, L = f->pl[k], kda = f->c->is_kda[L];
    const uint64_t rec = kda ? f->kda_rec : f->mla_rec;
    const uint64_t R4 = (uint64_t)f->c->kv_lora_rank * 4, P4 = (uint64_t)f->c->qk_rope_head_dim * 4;
    for (int i = 0; i < f->npart; i++) {
        K3State *s = f->part[i];
        const int slot = s->file_slot - 1;
        unsigned char *reg = f->buf[k % NBUF] + (uint64_t)slot * f->region;
        const uint64_t off = f->off[k] + (uint64_t)slot * rec;
        int rc = 0;
        if (kda && !j->write && s->fresh) memset(reg, 0, f->kda_rec);
        else if (kda) rc = move(f, j->write, reg, off, f->kda_rec);
        else {                                 /* the latent rows, then the k_pe rows */
            const uint64_t pos = (uint64_t)f->ppos[i], end = pos + (uint64_t)f->pT[i];
            const uint64_t part[2] = { 0, f->mla_cb }, w[2] = { R4, P4 };
            for (int h = 0; !rc && h < 2; h++) {
                const uint64_t a = j->write ? down4k(pos * w[h]) : 0;
                const uint64_t b = k3_up4k((j->write ? end : pos) * w[h]);
                if (b > a) rc = move(f, j->write, reg + part[h] + a, off + part[h] + a, b - a);
            }
        }
        if (rc) {
            snprintf(why, n, "%s layer %d's %s of sequence slot %d (its record: %llu bytes at "
                     "offset %llu): %s", j->write ? "writing" : "reading", L, kda ? "KDA state" :
                     "MLA cache", slot, (unsigned long long)rec, (unsigned long long)off,
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void *worker(void *arg) {
    K3StateFile *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->done == f->queued && !f->quit) pthread_cond_wait(&f->wake, &f->mu);
        if (f->done == f->queued) break;
        const Job j = f->q[f->done % QCAP];
        const int skip = f->failed;
        pthread_mutex_unlock(&f->mu);
        char why[1200] = "";
        const double t0 = k3_now();
        const int rc = skip ? 0 : run_job(f, &j, why, sizeof why);
        pthread_mutex_lock(&f->mu);
        f->st.io_s += k3_now() - t0;
        if (rc && !f->failed) {
            f->failed = 1;
            snprintf(f->why, sizeof f->why, "state file in %.200s: %.900s (%s, or pass "
                     "--state-file-dir DIR on another disk)", f->dir, why, j.write ?
                     "free space there" : "check that disk");
        }
        f->done++;
        pthread_cond_broadcast(&f->idle);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Queues a job; returns the job count once it is done. */
static long push(K3StateFile *f, int write, int k) {
    pthread_mutex_lock(&f->mu);
    while (f->queued - f->done >= QCAP) pthread_cond_wait(&f->idle, &f->mu);
    f->q[f->queued % QCAP] = (Job){ write, k };
    const long t = ++f->queued;
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->mu);
    return t;
}

/* Waits until the job count reaches t; 1 with err when a job has failed. */
static int wait_for(K3StateFile *f, long t, char *err, size_t errlen) {
    const double t0 = k3_now();
    pthread_mutex_lock(&f->mu);
    while (f->done < t) pthread_cond_wait(&f->idle, &f->mu);
    const int failed = f->failed;
    if (failed) snprintf(err, errlen, "%s", f->why);
    pthread_mutex_unlock(&f->mu);
    f->st.wait_s += k3_now() - t0;
    return failed ? K3_ERR_RUNTIME : 0;
}

/* ---- the pager ---- */

static K3StateFile *of(K3Pager *p) { return (K3StateFile *)p; }

static int begin(K3Pager *p, const K3Seq *seq, int n, char *err, size_t errlen) {
    K3StateFile *f = of(p);
    int rc = wait_for(f, f->queued, err, errlen);     /* an earlier step's last jobs */
    if (rc) return rc;
    if (n > f->n) {
        snprintf(err, errlen, "a step of %d sequences over a state file of %d", n, f->n);
        return K3_ERR_RUNTIME;
    }
    for (int i = 0; i < n; i++) {
        K3State *s = seq[i].s;
        if (s->file_slot < 1 || s->file_slot > f->n || s->in_file != (f->mode == K3_STATES_ALL ?
                K3_STATE_KDA_FILE | K3_STATE_MLA_FILE : K3_STATE_KDA_FILE)) {
            snprintf(err, errlen, "a sequence without a record in the state file");
            return K3_ERR_RUNTIME;
        }
        if (f->mode == K3_STATES_ALL && s->pos + seq[i].T > f->ctx) {
            snprintf(err, errlen, "sequence at %d positions is past the state file's context "
                     "%d (--ctx)", s->pos + seq[i].T, f->ctx);
            return K3_ERR_RUNTIME;
        }
        f->part[i] = s; f->ppos[i] = s->pos; f->pT[i] = seq[i].T;
    }
    f->npart = n;
    for (f->next = 0; f->next < NBUF - 1 && f->next < f->npl; f->next++)
        f->ticket[f->next] = push(f, 0, f->next);
    return 0;
}

static int acquire(K3Pager *p, int L, char *err, size_t errlen) {
    K3StateFile *f = of(p);
    const int k = f->pl_of[L];
    if (k < 0) return 0;
    int rc = wait_for(f, f->ticket[k], err, errlen);
    if (rc) return rc;
    const uint64_t sb = (uint64_t)f->c->kda_num_heads * f->c->kda_head_dim * f->c->kda_head_dim;
    for (int i = 0; i < f->npart; i++) {
        K3State *s = f->part[i];
        unsigned char *reg = f->buf[k % NBUF] + (uint64_t)(s->file_slot - 1) * f->region;
        if (f->c->is_kda[L]) {
            s->kda_S[L] = (float *)reg;
            s->kda_conv[L] = (float *)reg + sb;
        } else {
            s->mla_c[L] = (float *)reg;
            s->mla_pe[L] = (float *)(reg + f->mla_cb);
        }
    }
    return 0;
}

static void release(K3Pager *p, int L) {
    K3StateFile *f = of(p);
    const int k = f->pl_of[L];
    if (k < 0) return;
    for (int i = 0; i < f->npart; i++) {         /* the bytes are the buffer's until read again */
        K3State *s = f->part[i];
        if (f->c->is_kda[L]) s->kda_S[L] = s->kda_conv[L] = NULL;
        else s->mla_c[L] = s->mla_pe[L] = NULL;
    }
    push(f, 1, k);
    if (f->next < f->npl) { f->ticket[f->next] = push(f, 0, f->next); f->next++; }
}

static int end(K3Pager *p, char *err, size_t errlen) {
    K3StateFile *f = of(p);
    int rc = wait_for(f, f->queued, err, errlen);
    if (!rc)
        for (int i = 0; i < f->npart; i++) f->part[i]->fresh = 0;   /* its records are written */
    return rc;
}


/* ---- a state in or out between steps (a kept conversation: k3_sched_load / _take) ---- */

/* Moves one slot's records of every paged layer between the file and the resident layers
 * of r (r's pointers, r's pos): put writes r's bytes as slot's, get reads them into r. */
static int copy_slot(K3StateFile *f, int put, int slot, K3State *r, int fresh, char *err,
                     size_t errlen) {
    int rc = wait_for(f, f->queued, err, errlen);        /* the last step's writes are in */
    if (rc) return rc;
    if (f->mode == K3_STATES_ALL && r->pos > f->ctx) {
        snprintf(err, errlen, "a state of %d positions is past the state file's context %d "
                 "(--ctx)", r->pos, f->ctx);
        return K3_ERR_RUNTIME;
    }
    unsigned char *b = NULL;
    if (posix_memalign((void **)&b, K3_DIO_ALIGN, (size_t)f->region)) {
        snprintf(err, errlen, "out of memory");
        return K3_ERR_RUNTIME;
    }
    const K3Config *c = f->c;
    const uint64_t sb = (uint64_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim * 4;
    const uint64_t cv = f->kda_rec ? kda_bytes(c) - sb : 0;
    const uint64_t w[2] = { (uint64_t)c->kv_lora_rank * 4, (uint64_t)c->qk_rope_head_dim * 4 };
    for (int k = 0; !rc && k < f->npl; k++) {
        const int L = f->pl[k], kda = c->is_kda[L];
        const uint64_t off = f->off[k] + (uint64_t)slot * (kda ? f->kda_rec : f->mla_rec);
        if (kda) {
            memset(b, 0, f->kda_rec);
            if (put) { memcpy(b, r->kda_S[L], sb); memcpy(b + sb, r->kda_conv[L], cv); }
            if (put || !fresh) rc = move(f, put, b, off, f->kda_rec);
            if (!rc && !put) { memcpy(r->kda_S[L], b, sb); memcpy(r->kda_conv[L], b + sb, cv); }
            continue;
        }
        float *part[2] = { r->mla_c[L], r->mla_pe[L] };
        const uint64_t at[2] = { 0, f->mla_cb };
        for (int h = 0; !rc && h < 2; h++) {
            const uint64_t n = (uint64_t)r->pos * w[h], n4 = k3_up4k(n);
            if (!n) continue;
            memset(b, 0, n4);
            if (put) memcpy(b, part[h], n);
            rc = move(f, put, b, off + at[h], n4);
            if (!rc && !put) memcpy(part[h], b, n);
        }
    }
    if (rc) snprintf(err, errlen, "state file in %.200s: %s sequence slot %d: %s (free space "
                     "there, or pass --state-file-dir DIR on another disk)", f->dir,
                     put ? "writing" : "reading", slot, strerror(errno));
    free(b);
    return rc ? K3_ERR_RUNTIME : 0;
}

int k3_statefile_put(K3StateFile *f, K3State *dst, const K3State *src, char *err,
                     size_t errlen) {
    int rc = copy_slot(f, 1, dst->file_slot - 1, (K3State *)src, 0, err, errlen);
    if (!rc) { dst->pos = src->pos; dst->fresh = 0; }
    return rc;
}

int k3_statefile_get(K3StateFile *f, const K3State *src, K3State *dst, char *err,
                     size_t errlen) {
    const int pos = dst->pos;
    dst->pos = src->pos;
    int rc = copy_slot(f, 0, src->file_slot - 1, dst, src->fresh, err, errlen);
    if (rc) dst->pos = pos;
    return rc;
}

static const K3PagerOps OPS = { begin, acquire, release, end };

/* ---- open and close ---- */

K3StateFile *k3_statefile_open(const K3Config *c, int mode, int n, int ctx, const char *dir,
                               char *err, size_t errlen) {
    K3StateFile *f = calloc(1, sizeof *f);
    if (!f) { snprintf(err, errlen, "out of memory"); return NULL; }
    f->base.ops = &OPS; f->c = c; f->fd = -1; f->mode = mode; f->n = n; f->ctx = ctx;
    if (!dir || !*dir) dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    K3StateFileSize z;
    k3_statefile_size(c, mode, n, ctx, &z);
    f->kda_rec = k3_up4k(kda_bytes(c));
    f->mla_cb = k3_up4k((uint64_t)ctx * c->kv_lora_rank * 4);
    f->mla_rec = f->mla_cb + k3_up4k((uint64_t)ctx * c->qk_rope_head_dim * 4);
    f->region = z.record;
    const int NL = c->num_hidden_layers;
    f->pl = calloc((size_t)NL, sizeof(int)); f->pl_of = calloc((size_t)NL, sizeof(int));
    f->off = calloc((size_t)NL, sizeof(uint64_t)); f->ticket = calloc((size_t)NL, sizeof(long));
    f->part = calloc((size_t)n, sizeof(K3State *));
    f->ppos = calloc((size_t)n, sizeof(int)); f->pT = calloc((size_t)n, sizeof(int));
    int ok = f->pl && f->pl_of && f->off && f->ticket && f->part && f->ppos && f->pT;
    uint64_t at = 0;
    for (int L = 0; ok && L < NL; L++) {
        f->pl_of[L] = -1;
        if (!c->is_kda[L] && mode != K3_STATES_ALL) continue;
        f->pl_of[L] = f->npl; f->pl[f->npl] = L; f->off[f->npl++] = at;
        at += (uint64_t)n * (c->is_kda[L] ? f->kda_rec : f->mla_rec);
    }
    for (int b = 0; ok && b < NBUF; b++)
        if (posix_memalign((void **)&f->buf[b], K3_DIO_ALIGN, (size_t)n * f->region)) {
            f->buf[b] = NULL; ok = 0;
        }
    if (!ok) {
        snprintf(err, errlen, "out of memory for the state file's buffers (%.3f GB)",
                 z.buffers / 1e9);
        k3_statefile_close(f);
        return NULL;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/k3-states-XXXXXX", f->dir);
    f->fd = mkstemp(path);
    if (f->fd < 0) {
        snprintf(err, errlen, "--state-file-dir %s: cannot create the state file there: %s "
                 "(give a writable directory: --state-file-dir DIR, or TMPDIR)", f->dir,
                 strerror(errno));
        k3_statefile_close(f);
        return NULL;
    }
    unlink(path);                              /* gone at exit, however the run ends */
    f->direct = fcntl(f->fd, F_SETFL, fcntl(f->fd, F_GETFL) | O_DIRECT) == 0;
    int fe = at ? posix_fallocate(f->fd, 0, (off_t)at) : 0;   /* a full disk fails here */
    if (fe && fe != EOPNOTSUPP && fe != ENOSYS && fe != EINVAL) {
        snprintf(err, errlen, "--state-file-dir %s: the state file needs %.3f GB there: %s "
                 "(free space, or give another directory: --state-file-dir DIR)", f->dir,
                 at / 1e9, strerror(fe));
        k3_statefile_close(f);
        return NULL;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->wake, NULL); pthread_cond_init(&f->idle, NULL);
    if (pthread_create(&f->th, NULL, worker, f)) {
        snprintf(err, errlen, "cannot start the state file's I/O thread");
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->wake); pthread_cond_destroy(&f->idle);
        k3_statefile_close(f);
        return NULL;
    }
    f->th_up = 1;
    return f;
}

void k3_statefile_close(K3StateFile *f) {
    if (!f) return;
    if (f->th_up) {
        k3_threads_quit(&f->mu, &f->wake, &f->quit, &f->th, 1);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->wake); pthread_cond_destroy(&f->idle);
    }
    if (f->fd >= 0) close(f->fd);
    for (int b = 0; b < NBUF; b++) free(f->buf[b]);
    free(f->pl); free(f->pl_of); free(f->off); free(f->ticket);
    free(f->part); free(f->ppos); free(f->pT);
    free(f);
}

K3Pager *k3_statefile_pager(K3StateFile *f) { return &f->base; }
void k3_statefile_attach(K3StateFile *f, K3State *s, int slot) {
    (void)f;
    s->file_slot = slot + 1;
    s->fresh = 1;
}
const K3StateFileStats *k3_statefile_stats(const K3StateFile *f) {
    ((K3StateFile *)f)->st.direct = f->direct;
    return &f->st;
}
const char *k3_statefile_dir(const K3StateFile *f) { return f->dir; }
