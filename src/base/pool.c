/* pool.c — pthread pool: workers sleep on a condition variable between runs; a run
 * publishes (fn, ctx, ntasks) under a generation counter, everyone (caller included)
 * takes task indices from an atomic counter, the caller waits for the workers. */
#include "pool.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    pthread_mutex_t busy;          /* held by the thread whose run is in flight */
    pthread_t *th;
    int nworkers;                  /* started workers (threads - 1) */
    int want;                      /* configured threads, 0 = not yet decided */
    unsigned gen;
    int quit;
    k3_task_fn fn;
    void *ctx;
    int ntasks;
    atomic_int next;
    int active;                    /* workers not yet finished with this generation */
} P = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
        PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0, NULL, NULL, 0, 0, 0 };

static void drain(k3_task_fn fn, void *ctx, int n) {
    for (;;) {
        int i = atomic_fetch_add_explicit(&P.next, 1, memory_order_relaxed);
        if (i >= n) break;
        fn(ctx, i);
    }
}

static void *worker(void *arg) {
    unsigned seen = (unsigned)(uintptr_t)arg;   /* the generation current at creation */
    pthread_mutex_lock(&P.mu);
    for (;;) {
        while (P.gen == seen && !P.quit) pthread_cond_wait(&P.wake, &P.mu);
        if (P.quit) break;
        seen = P.gen;
        k3_task_fn fn = P.fn; void *ctx = P.ctx; int n = P.ntasks;
        pthread_mutex_unlock(&P.mu);
        drain(fn, ctx, n);
        pthread_mutex_lock(&P.mu);
        if (--P.active == 0) pthread_cond_signal(&P.done);
    }
    pthread_mutex_unlock(&P.mu);
    return NULL;
}

static long online_all(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n;
}

static int online_cores(void) {
    long n = online_all();
    return n > 256 ? 256 : (int)n;
}

/* More threads than cores take turns on them: --threads 100000 (256 threads) ran ~50x
 * slower on 2 cores without a word. Said once a process, whichever mode set the count;
 * the caller holds P.busy. */
static void warn_oversubscribed(int n) {
    static int said;
    const long on = online_all();
    if (n <= on || said) return;
    said = 1;
    fprintf(stderr, "k3: warning: --threads %d is more than the %ld online core%s%s; more "
            "threads than cores run slower than --threads %d\n", n, on, on == 1 ? "" : "s",
            n > 256 ? " (capped at 256 threads)" : "", online_cores());
}

int k3_threads(void) {
    if (P.want <= 0) P.want = online_cores();
    return P.want;
}

void k3_threads_quit(pthread_mutex_t *mu, pthread_cond_t *cv, int *quit, pthread_t *th, int n) {
    pthread_mutex_lock(mu);
    *quit = 1;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void stop_workers(void) {        /* caller holds P.busy */
    if (!P.nworkers) return;
    k3_threads_quit(&P.mu, &P.wake, &P.quit, P.th, P.nworkers);
    free(P.th);
    P.th = NULL; P.nworkers = 0; P.quit = 0;
}

static void start_workers(void) {       /* caller holds P.busy */
    int n = k3_threads() - 1;
    if (n <= 0 || P.nworkers) return;
    P.th = calloc((size_t)n, sizeof *P.th);
    if (!P.th) return;                  /* no workers: runs stay inline */
    pthread_mutex_lock(&P.mu);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&P.th[i], NULL, worker, (void *)(uintptr_t)P.gen)) break;
        P.nworkers++;
    }
    pthread_mutex_unlock(&P.mu);
}

void k3_threads_set(int n) {
    pthread_mutex_lock(&P.busy);
    stop_workers();
    if (n > 0) warn_oversubscribed(n);
    P.want = n > 0 ? (n > 256 ? 256 : n) : online_cores();
    pthread_mutex_unlock(&P.busy);
}

void k3_pool_shutdown(void) {
    pthread_mutex_lock(&P.busy);
    stop_workers();
    pthread_mutex_unlock(&P.busy);
}

void k3_pool_run(k3_task_fn fn, void *ctx, int ntasks) {
    if (ntasks <= 0) return;
    if (ntasks == 1 || k3_threads() <= 1 || pthread_mutex_trylock(&P.busy)) {
        for (int i = 0; i < ntasks; i++) fn(ctx, i);
        return;
    }
    start_workers();
    if (!P.nworkers) {
        pthread_mutex_unlock(&P.busy);
        for (int i = 0; i < ntasks; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&P.mu);
    P.fn = fn; P.ctx = ctx; P.ntasks = ntasks;
    atomic_store(&P.next, 0);
    P.active = P.nworkers;
    P.gen++;
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    drain(fn, ctx, ntasks);
    pthread_mutex_lock(&P.mu);
    while (P.active > 0) pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&P.busy);
}
