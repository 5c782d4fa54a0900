/* test_pool.c — the pool (pool.h) runs every task of every run exactly once, with workers
 * that spin between runs or sleep, across the spin-to-sleep edge (gaps around the spin
 * time), thread-count changes right after a run (workers still spinning), a run from inside
 * a task (inline) and two callers at once (one inline). A lost wake-up hangs a run: the
 * alarm turns that into a failure. */
#include "pool.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fails = 0;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

#define MAXT 96
typedef struct {
    atomic_int count[MAXT];
    atomic_int off_caller;          /* tasks run by a thread other than the caller */
    pthread_t caller;
    int spin;                       /* busy-work per task (iterations) */
    int nested;                     /* 1: task 0 runs an inner run of its own */
} Run;

static void inner_task(void *ctx, int i) { atomic_fetch_add((atomic_int *)ctx + i, 1); }

static void task(void *ctx, int i) {
    Run *r = ctx;
    volatile unsigned x = 0;
    for (int k = 0; k < r->spin; k++) x += (unsigned)k;
    if (r->nested && i == 0) {
        atomic_int inner[8];
        for (int k = 0; k < 8; k++) atomic_init(&inner[k], 0);
        k3_pool_run(inner_task, inner, 8);             /* the pool is busy: runs inline */
        for (int k = 0; k < 8; k++) CHECK(atomic_load(&inner[k]) == 1, "inner task %d", k);
    }
    if (!pthread_equal(pthread_self(), r->caller)) atomic_fetch_add(&r->off_caller, 1);
    atomic_fetch_add(&r->count[i], 1);
}

static unsigned rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

/* one run of n tasks; 0 when every task ran once */
static int one_run(Run *r, int n) {
    for (int i = 0; i < MAXT; i++) atomic_store(&r->count[i], 0);
    r->caller = pthread_self();
    k3_pool_run(task, r, n);
    int bad = 0;
    for (int i = 0; i < MAXT; i++) bad += atomic_load(&r->count[i]) != (i < n);
    return bad;
}

static void *second_caller(void *arg) {
    Run *r = arg;
    unsigned s = 777;
    int bad = 0;
    for (int k = 0; k < 300; k++) bad += one_run(r, 1 + (int)(rnd(&s) % 40)) != 0;
    return (void *)(long)bad;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "  FAIL test_pool: a run did not finish in 60 s (lost wake-up?)\n";
    ssize_t w = write(1, m, sizeof m - 1);
    (void)w;
    _exit(1);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(60);
    static Run r;
    unsigned s0 = 12345;
    const int spins[] = { 0, 40, 300 }, threads[] = { 2, 3, 4 };
    long offc = 0;
    for (int s = 0; s < 3; s++) {
        k3_pool_spin(spins[s]);
        for (int t = 0; t < 3; t++) {
            k3_threads_set(threads[t]);
            int bad = 0;
            for (int k = 0; k < 600; k++) {
                r.spin = (int)(rnd(&s0) % 3000);
                r.nested = k % 7 == 0;
                bad += one_run(&r, 1 + (int)(rnd(&s0) % MAXT)) != 0;
                /* gaps of 0-500 us: both sides of the spin time */
                if (k % 3 == 0) {
                    struct timespec g = { 0, (long)(rnd(&s0) % 500) * 1000 };
                    nanosleep(&g, NULL);
                }
                if (k % 97 == 0) k3_threads_set(threads[t]);  /* stop workers mid-spin */
            }
            CHECK(bad == 0, "spin %d us, %d threads: %d runs lost or repeated a task", spins[s],
                  threads[t], bad);
            offc += atomic_load(&r.off_caller);
            atomic_store(&r.off_caller, 0);
        }
    }
    CHECK(offc > 0, "no task ever ran on a worker");

    /* two callers at once: one gets the pool, the other runs inline; both exact */
    k3_pool_spin(300);
    k3_threads_set(2);
    static Run r2;
    pthread_t th;
    pthread_create(&th, NULL, second_caller, &r2);
    int bad = 0;
    for (int k = 0; k < 300; k++) bad += one_run(&r, 1 + (int)(rnd(&s0) % 40)) != 0;
    void *rv;
    pthread_join(th, &rv);
    CHECK(bad == 0 && rv == NULL, "two callers: %d and %ld runs wrong", bad, (long)rv);

    k3_pool_spin(-1);
    k3_pool_shutdown();
    printf("test_pool: %s\n", fails ? "FAILED" : "ok");
    return fails != 0;
}
