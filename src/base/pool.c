/* pool.c — pthread pool: a run publishes (fn, ctx, ntasks) under a generation counter,
 * everyone (caller included) takes task indices from an atomic counter, the caller waits
 * for the workers. Between runs a worker spins a short while on the counter before it
 * sleeps on a condition variable, and the caller spins as long for the workers to finish:
 * on a VM, waking a sleeping thread cost ~40 us (futex and an interrupt to a halted vCPU),
 * more than a small matvec takes (docs/PERFORMANCE.md, "A pool that spins before it
 * sleeps"). */
#include "pool.h"
#include "util.h"
#include <pthread.h>
#include <sched.h>
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
    atomic_uint gen;               /* written under mu, read while spinning */
    int quit;                      /* under mu */
    k3_task_fn fn;
    void *ctx;
    int ntasks;
    atomic_int next;
    atomic_int active;             /* workers not yet finished with this generation */
    int sleepers;                  /* workers waiting on wake (under mu) */
    double spin_s;                 /* set while no worker runs (start_workers) */
    int spin_us;                   /* k3_pool_spin's; -1: K3_POOL_SPIN_US or SPIN_US */
} P = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
        .done = PTHREAD_COND_INITIALIZER, .busy = PTHREAD_MUTEX_INITIALIZER, .spin_us = -1 };

/* 300 us: decode on the full-width slice 0.95x the time of no spinning (PERFORMANCE.md) */
#define SPIN_US 300

static inline void cpu_relax(void) {   /* a spin-wait hint: frees the core's other thread */
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* 1 once the spin time from t0 is over. Every 64 turns (~1 us) the clock is read and the
 * core offered to any other runnable thread (sched_yield): spinning threads of two busy
 * processes on the same cores otherwise hold them from each other for whole time slices. */
static int spin_over(double t0, int k) {
    if ((k & 63) != 63) return 0;
    if (k3_now() - t0 >= P.spin_s) return 1;
    sched_yield();
    return 0;
}

/* A worker: spins for the run after generation seen; 1 when it came in time. (A quit comes
 * between runs, under mu: seen after the spin.) */
static int spin_for_run(unsigned seen) {
    double t0 = k3_now();
    for (int k = 0; !spin_over(t0, k); k++, cpu_relax())
        if (atomic_load_explicit(&P.gen, memory_order_acquire) != seen) return 1;
    return 0;
}

/* The caller: spins until the workers are done with the run, at most the spin time */
static void spin_for_workers(void) {
    double t0 = k3_now();
    for (int k = 0; atomic_load(&P.active) > 0 && !spin_over(t0, k); k++) cpu_relax();
}

static void drain(k3_task_fn fn, void *ctx, int n) {
    for (;;) {
        int i = atomic_fetch_add_explicit(&P.next, 1, memory_order_relaxed);
        if (i >= n) break;
        fn(ctx, i);
    }
}

static void *worker(void *arg) {
    unsigned seen = (unsigned)(uintptr_t)arg;   /* the generation current at creation */
    for (;;) {
        if (!P.spin_s || !spin_for_run(seen)) {
            pthread_mutex_lock(&P.mu);
            P.sleepers++;
            while (P.gen == seen && !P.quit) pthread_cond_wait(&P.wake, &P.mu);
            P.sleepers--;
            int quit = P.quit;
            pthread_mutex_unlock(&P.mu);
            if (quit) break;
        }
        /* the caller published fn, ctx, ntasks before the generation (release) */
        seen = atomic_load_explicit(&P.gen, memory_order_acquire);
        drain(P.fn, P.ctx, P.ntasks);
        if (atomic_fetch_sub(&P.active, 1) == 1) {  /* the caller may be asleep on done */
            pthread_mutex_lock(&P.mu);
            pthread_cond_signal(&P.done);
            pthread_mutex_unlock(&P.mu);
        }
    }
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

/* k3_pool_spin's time, else K3_POOL_SPIN_US, else SPIN_US where the cores hold the threads */
static double spin_s(void) {
    long us = P.spin_us;
    const char *e = getenv("K3_POOL_SPIN_US");
    if (us < 0 && e && *e >= '0' && *e <= '9') us = strtol(e, NULL, 10);
    if (us < 0) us = k3_threads() > online_all() ? 0 : SPIN_US;
    return (us > 100000 ? 100000 : us) * 1e-6;
}

static void start_workers(void) {       /* caller holds P.busy */
    int n = k3_threads() - 1;
    if (n <= 0 || P.nworkers) return;
    P.spin_s = spin_s();
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

void k3_pool_spin(int us) {
    pthread_mutex_lock(&P.busy);
    stop_workers();
    P.spin_us = us < 0 ? -1 : us;
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
    atomic_store(&P.active, P.nworkers);
    atomic_fetch_add_explicit(&P.gen, 1, memory_order_release);
    if (P.sleepers) pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    drain(fn, ctx, ntasks);
    if (P.spin_s) spin_for_workers();
    pthread_mutex_lock(&P.mu);
    while (atomic_load(&P.active) > 0) pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&P.busy);
}
