/* expert_cache.c — routed experts streamed from the shards into a cache of fixed
 * slots (--cache-gb), read by a pthread I/O pool with several reads in flight.
 *
 * Each expert is one coalesced pread when its six tensors are back to back in the
 * file (checked from the header offsets, never computed, docs/MODEL.md §4), O_DIRECT
 * where the filesystem allows it (aligned window around the expert), buffered
 * otherwise (dio.h). k3_ecache_prefetch() queues a chunk's whole expert union (as many as
 * the slots allow, then a sliding window as experts are consumed), so prefill reads
 * each (layer, expert) at most once per chunk; the queue is served in file-offset
 * order. A failed or short read is retried once, then counted in the weights'
 * expert_failures (the run is reported invalid). Eviction: policy.c. */
#include "internal.h"
#include "dio.h"
#include "fault.h"
#include "pool.h"
#include "sysmem.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { SL_EMPTY, SL_FLIGHT, SL_READY, SL_FAILED };

typedef struct { int shard, contig; uint64_t off, n; uint64_t t_off[6], t_n[6], rel[6]; } ELoc;
typedef struct {
    int key, state, pin, protect, fresh;
    int guess;                               /* read on a guess, not yet asked for */
    unsigned char *buf; const unsigned char *data;
} Slot;

struct K3ECache {
    K3Model *m;
    K3ECacheSink out;                        /* where the counters and the trace go */
    int NL, E, nslots, nth, quit, pinned;
    ELoc *loc; int *key_slot;
    Slot *slot; unsigned char *arena; size_t arena_len; uint64_t slot_bytes;
    K3Policy pol;
    pthread_mutex_t mu; pthread_cond_t cv_job, cv_done;
    int *queue, qn;
    pthread_t *th;
    K3DioFile *file; int *file_open;         /* per shard, opened on first read */
    int *pend, npend, pend_next, nprotect;
    uint64_t nreads;
    long nprefetch;                          /* for K3_FAULT_SHRINK_AT */
    int busy;                                /* reads queued or in flight (atomic) */
};

const int *k3_ecache_busy(const K3ECache *c) { return &c->busy; }

/* The index beside the slots (locations, slot map, the policy's history, the pending
 * list): it counts inside --cache-gb. */
uint64_t k3_ecache_index_bytes(const K3Config *c) {
    const uint64_t nk = (uint64_t)c->num_hidden_layers * c->num_experts;
    return nk * (sizeof(ELoc) + sizeof(int) + sizeof(uint32_t) + sizeof(uint64_t)) +
           (uint64_t)c->num_experts * sizeof(int);
}

uint64_t k3_ecache_slot_bytes(const K3Config *c) {
    return k3_dio_room(k3_expert_bytes(c));  /* room for the O_DIRECT alignment window */
}

/* The shard's file, opened on first use. Called with the lock held. */
static K3DioFile *shard_file(K3ECache *c, int shard, char *err, size_t errlen) {
    if (!c->file_open[shard]) {
        if (k3_dio_open(&c->file[shard], c->m->st->shards[shard].path, "expert reads", err, errlen))
            return NULL;
        c->file_open[shard] = 1;
    }
    return &c->file[shard];
}

/* One attempt at reading expert l into slot s. Returns bytes transferred or -1. */
static int64_t read_once(K3DioFile *f, Slot *s, const ELoc *l, char *err, size_t errlen) {
    if (l->contig) {
        uint64_t moved = 0;
        s->data = k3_dio_read(f, s->buf, l->off, l->n, &moved, err, errlen);
        return s->data ? (int64_t)moved : -1;
    }
    for (int j = 0; j < 6; j++)                /* scattered tensors: one read each */
        if (k3_dio_pread(f, s->buf + l->rel[j], l->t_off[j], l->t_n[j], err, errlen)) return -1;
    s->data = s->buf;
    return (int64_t)l->n;
}

static void *worker(void *arg) {
    K3ECache *c = arg;
    char err[600];
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && c->qn == 0) pthread_cond_wait(&c->cv_job, &c->mu);
        if (c->quit) break;
        int si = c->queue[0];
        memmove(c->queue, c->queue + 1, sizeof(int) * --c->qn);
        Slot *s = &c->slot[si];
        const ELoc *l = &c->loc[s->key];
        uint64_t nr = ++c->nreads;
        K3DioFile *f = shard_file(c, l->shard, err, sizeof err);
        pthread_mutex_unlock(&c->mu);

        if (c->out.io) k3_io_begin(c->out.io);
        double t0 = k3_now();
        int64_t got = -1;
        const K3Faults *fault = k3_faults();
        for (int attempt = 0; attempt < 2 && got < 0 && f; attempt++) {
            if ((long)nr == fault->expert_read ||
                ((long)nr == fault->expert_read_once && !attempt)) {
                snprintf(err, sizeof err,
                         "%s: injected failure of expert read %llu (K3_FAULT_EXPERT_READ)",
                         c->m->st->shards[l->shard].path, (unsigned long long)nr);
                got = -1;
            } else got = read_once(f, s, l, err, sizeof err);
            if (got < 0 && attempt == 0) {
                fprintf(stderr, "k3: %s; retrying once\n", err);
                pthread_mutex_lock(&c->mu);
                c->out.st->expert_retries++;
                pthread_mutex_unlock(&c->mu);
            }
        }
        double t1 = k3_now();
        if (c->out.io) k3_io_end(c->out.io);
        pthread_mutex_lock(&c->mu);
        c->out.st->expert_read_s += t1 - t0;
        if (__atomic_sub_fetch(&c->busy, 1, __ATOMIC_SEQ_CST) == 0 && c->out.idle)
            c->out.idle(c->out.idle_ctx);       /* the trunk readers may go on */
        if (got >= 0) {
            s->state = SL_READY;
            c->out.st->expert_bytes += (uint64_t)got;
            c->out.st->expert_reads++;
        } else {
            s->state = SL_FAILED;
            c->out.st->expert_failed++;
            fprintf(stderr, "k3: %s; expert counted as failed\n", err);
        }
        pthread_cond_broadcast(&c->cv_done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- slot management (lock held) ---- */

static int take_slot(K3ECache *c) {
    size_t cand_key[64]; int cand_slot[64], n = 0, best = -1;
    for (int i = 0; i < c->nslots; i++) {
        Slot *s = &c->slot[i];
        if (s->state == SL_EMPTY) return i;
        if (s->state != SL_READY || s->pin || s->protect) continue;
        cand_key[n] = (size_t)s->key; cand_slot[n] = i; n++;
        if (n == 64) {                        /* fold: keep the best so far as a candidate */
            int v = k3_policy_victim(&c->pol, cand_key, n);
            cand_key[0] = cand_key[v]; cand_slot[0] = cand_slot[v]; n = 1;
        }
    }
    if (n) best = cand_slot[k3_policy_victim(&c->pol, cand_key, n)];
    if (best >= 0) {
        Slot *s = &c->slot[best];
        if (s->guess) { c->out.st->guess_wasted++; s->guess = 0; }
        c->key_slot[s->key] = -1; s->state = SL_EMPTY;
    }
    return best;
}

static void issue(K3ECache *c, int si, int key) {
    Slot *s = &c->slot[si];
    s->key = key; s->state = SL_FLIGHT; s->fresh = 1;
    c->key_slot[key] = si;
    const ELoc *l = &c->loc[key];
    int pos = c->qn;                          /* sorted by (shard, offset): served in file order */
    while (pos > 0) {
        const ELoc *p = &c->loc[c->slot[c->queue[pos - 1]].key];
        if (p->shard < l->shard || (p->shard == l->shard && p->off <= l->off)) break;
        c->queue[pos] = c->queue[pos - 1]; pos--;
    }
    c->queue[pos] = si; c->qn++;
    __atomic_add_fetch(&c->busy, 1, __ATOMIC_SEQ_CST);
    pthread_cond_signal(&c->cv_job);
}

static void top_up(K3ECache *c) {
    const int W = c->nslots - 1;
    while (c->nprotect < W && c->pend_next < c->npend) {
        int key = c->pend[c->pend_next], si = c->key_slot[key];
        if (si >= 0) {
            Slot *s = &c->slot[si];
            if (!s->pin && !s->protect) { s->protect = 1; c->nprotect++; }
            c->pend_next++;
            continue;
        }
        if ((si = take_slot(c)) < 0) break;
        issue(c, si, key);
        c->slot[si].protect = 1; c->nprotect++;
        c->pend_next++;
    }
}

static void unpin(K3ECache *c) {
    if (c->pinned >= 0) c->slot[c->pinned].pin = 0;
    c->pinned = -1;
}

/* K3_FAULT_SHRINK_AT (fault.h): a shard truncated or removed under the run, at a
 * deterministic point, for the tests of what the run then does. */
static void fault_shrink(K3ECache *c) {
    const K3Faults *f = k3_faults();
    if (!f->shrink_at || ++c->nprefetch != f->shrink_at) return;
    const int k = f->shrink_shard > 0 ? (int)f->shrink_shard - 1 : 0;
    if (k >= c->m->st->n_shards) return;
    const StShard *sh = &c->m->st->shards[k];
    int rc = f->shrink_unlink ? unlink(sh->path) : truncate(sh->path, (off_t)sh->data_start);
    fprintf(stderr, "k3: K3_FAULT_SHRINK_AT=%ld: %s %s%s\n", f->shrink_at,
            f->shrink_unlink ? "removed" : "truncated to its header:", sh->path,
            rc ? " (failed)" : "");
}

void k3_ecache_prefetch(K3ECache *c, int L, const int *ids, int n) {
    fault_shrink(c);
    pthread_mutex_lock(&c->mu);
    unpin(c);
    for (int i = 0; i < c->nslots; i++) c->slot[i].protect = 0;
    c->nprotect = 0;
    c->npend = c->pend_next = 0;
    for (int i = 0; i < n && i < c->E; i++) c->pend[c->npend++] = L * c->E + ids[i];
    top_up(c);
    pthread_mutex_unlock(&c->mu);
}

/* Reads on a guess (decode's next layer, --read-ahead): each one not in a slot gets one
 * the policy gives up (never the window's, never the pinned one) and a read queued after
 * what is queued in file order, so the layer computing now is served first. Only where a
 * slot is free or evictable beyond the window; a guess never waits. */
void k3_ecache_guess(K3ECache *c, int L, const int *ids, int n) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < n; i++) {
        const int key = L * c->E + ids[i];
        if (c->key_slot[key] >= 0) continue;
        const int si = take_slot(c);
        if (si < 0) break;
        issue(c, si, key);
        c->slot[si].guess = 1;
        c->out.st->guess_reads++;
        c->out.st->guess_bytes += c->loc[key].n;
    }
    pthread_mutex_unlock(&c->mu);
}

int k3_ecache_get(K3ECache *c, int L, int e, K3Expert *out) {
    const int key = L * c->E + e;
    pthread_mutex_lock(&c->mu);
    unpin(c);
    c->out.st->expert_req++;
    int si = c->key_slot[key], hit = 0;
    if (si >= 0 && c->slot[si].state == SL_READY && !c->slot[si].fresh) hit = 1;
    if (si < 0) {
        si = take_slot(c);
        if (si < 0) {                         /* every slot protected: give up the window */
            for (int i = 0; i < c->nslots; i++) c->slot[i].protect = 0;
            c->nprotect = 0;
            si = take_slot(c);
        }
        while (si < 0) { pthread_cond_wait(&c->cv_done, &c->mu); si = take_slot(c); }
        issue(c, si, key);
    }
    Slot *s = &c->slot[si];
    if (s->guess) { c->out.st->guess_used++; s->guess = 0; }
    s->pin = 1; c->pinned = si;
    if (s->protect) { s->protect = 0; c->nprotect--; }
    top_up(c);
    if (s->state == SL_FLIGHT) {
        double t0 = k3_now();
        while (s->state == SL_FLIGHT) pthread_cond_wait(&c->cv_done, &c->mu);
        c->out.st->io_wait_s += k3_now() - t0;
    }
    s->fresh = 0;
    if (hit) c->out.st->expert_hits++;
    if (*c->out.trace) fprintf(*c->out.trace, "%d %d %d %d\n", *c->out.step, L, e, hit);
    k3_policy_touch(&c->pol, (size_t)key);
    if (s->state == SL_FAILED) {
        s->state = SL_EMPTY; s->pin = 0; c->pinned = -1; c->key_slot[key] = -1;
        (*c->out.failures)++;
        pthread_mutex_unlock(&c->mu);
        return -1;
    }
    const unsigned char *d = s->data;
    const ELoc *l = &c->loc[key];
    pthread_mutex_unlock(&c->mu);
    const void *part[6];
    for (int j = 0; j < 6; j++) part[j] = d + l->rel[j];
    k3_expert_bind(&c->m->cfg, part, out);
    return 0;
}

/* ---- setup ---- */
/* The slots' pages faulted in at load, on the kernels' threads (a slot a task, as far as an
 * expert reaches: the alignment room after it stays untouched, as the reads leave it), as
 * the pinned trunk's are: else the cache's first fill pays the kernel's page zeroing inside
 * the prompt, in the I/O threads beside the compute (~10% of a CPU through the pinned
 * 1,024-token prefill on a Zen 5 VM). */
typedef struct { unsigned char *a; size_t stride, n; } Touch;
static void touch_task(void *ctx, int i) {
    const Touch *t = ctx;
    volatile unsigned char *b = t->a + (size_t)i * t->stride;
    for (size_t p = 0; p < t->n; p += 4096) b[p] = 0;
}

K3ECache *k3_ecache_new(K3Model *m, int nslots, int qdepth, K3ECacheSink out, char *err,
                        size_t errlen) {
    const K3Config *cf = &m->cfg;
    K3ECache *c = calloc(1, sizeof *c);
    if (!c) { snprintf(err, errlen, "out of memory"); return NULL; }
    c->m = m; c->out = out; c->NL = cf->num_hidden_layers; c->E = cf->num_experts;
    c->nslots = nslots; c->pinned = -1;
    size_t nk = (size_t)c->NL * c->E;
    c->loc = calloc(nk, sizeof(ELoc)); c->key_slot = malloc(nk * sizeof(int));
    c->slot = calloc(nslots, sizeof(Slot)); c->queue = malloc(sizeof(int) * nslots);
    c->pend = malloc(sizeof(int) * c->E);
    c->file = calloc(m->st->n_shards, sizeof(K3DioFile));
    c->file_open = calloc(m->st->n_shards, sizeof(int));
    if (!c->loc || !c->key_slot || !c->slot || !c->queue || !c->pend || !c->file ||
        !c->file_open || k3_policy_init(&c->pol, nk, nslots)) {
        snprintf(err, errlen, "out of memory (expert cache index)");
        k3_ecache_free(c);
        return NULL;
    }
    for (size_t k = 0; k < nk; k++) c->key_slot[k] = -1;
    c->slot_bytes = k3_ecache_slot_bytes(cf);
    for (int L = 0; L < c->NL; L++) {
        if (!m->layers[L].is_moe || !m->layers[L].experts) continue;
        for (int e = 0; e < c->E; e++) {
            const StTensor *const *t = m->layers[L].experts + (size_t)e * 6;
            ELoc *l = &c->loc[(size_t)L * c->E + e];
            l->shard = t[0]->shard; l->off = t[0]->offset; l->contig = 1;
            uint64_t sum = 0;
            for (int j = 0; j < 6; j++) {
                l->t_off[j] = t[j]->offset; l->t_n[j] = t[j]->nbytes;
                if (j && (t[j]->shard != t[0]->shard ||
                          t[j]->offset != t[j - 1]->offset + t[j - 1]->nbytes))
                    l->contig = 0;
                sum += t[j]->nbytes;
            }
            l->n = sum;
            for (int j = 0, acc = 0; j < 6; acc += (int)t[j]->nbytes, j++)
                l->rel[j] = l->contig ? t[j]->offset - t[0]->offset : (uint64_t)acc;
            if (sum + 4096 > c->slot_bytes) {
                snprintf(err, errlen, "expert %d of layer %d is %llu bytes, more than a cache slot",
                         e, L, (unsigned long long)sum);
                k3_ecache_free(c);
                return NULL;
            }
        }
    }
    c->arena_len = (size_t)nslots * c->slot_bytes;
    if (!(c->arena = k3_alloc_huge(c->arena_len))) {
        snprintf(err, errlen, "cannot reserve the expert cache (%d slots, %.3f GB): out of memory "
                 "(lower --cache-gb)", nslots, c->arena_len / K3_GB);
        k3_ecache_free(c);
        return NULL;
    }
    for (int i = 0; i < nslots; i++) c->slot[i].buf = c->arena + (size_t)i * c->slot_bytes;
    Touch touch = { c->arena, c->slot_bytes, k3_expert_bytes(cf) };
    k3_pool_run(touch_task, &touch, nslots);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_job, NULL); pthread_cond_init(&c->cv_done, NULL);
    c->nth = qdepth;
    c->th = calloc(qdepth, sizeof(pthread_t));
    for (int i = 0; c->th && i < qdepth; i++)
        if (pthread_create(&c->th[i], NULL, worker, c)) { c->nth = i; break; }
    if (!c->th || c->nth == 0) {
        snprintf(err, errlen, "cannot start the expert I/O threads");
        k3_ecache_free(c);
        return NULL;
    }
    return c;
}

void k3_ecache_free(K3ECache *c) {
    if (!c) return;
    if (c->th) {
        k3_threads_quit(&c->mu, &c->cv_job, &c->quit, c->th, c->nth);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv_job); pthread_cond_destroy(&c->cv_done);
    }
    if (c->file && c->file_open)
        for (int i = 0; i < c->m->st->n_shards; i++)
            if (c->file_open[i]) k3_dio_close(&c->file[i]);
    free(c->arena);
    k3_policy_free(&c->pol);
    free(c->th); free(c->loc); free(c->key_slot); free(c->slot); free(c->queue); free(c->pend);
    free(c->file); free(c->file_open);
    free(c);
}

void k3_ecache_describe(const K3ECache *c, char *buf, size_t n) {
    char size[32];
    snprintf(buf, n, "%d slots x %s, %d I/O threads, policy lfu-aged", c->nslots,
             k3_size_text(c->slot_bytes, size, sizeof size), c->nth);
}
