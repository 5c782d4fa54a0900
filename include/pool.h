/* pool.h — a small pthread pool for the kernels (no OpenMP).
 *
 * k3_pool_run(fn, ctx, n) calls fn(ctx, i) once for every i < n, spread over the
 * configured threads (the caller takes part), and returns when all are done. Work is
 * handed out dynamically; callers must make every task independent of which thread
 * runs it (k3_matmul splits over output rows/tokens only, so bits never depend on it).
 * After a run a worker spins up to K3_POOL_SPIN_US microseconds (default 300; 0: never)
 * for the next one, then sleeps on a condition variable; the caller spins as long for the
 * workers to finish before it sleeps. No spinning where threads outnumber the cores. If the
 * pool is busy (a run from another thread is in flight) or configured for one thread, the
 * tasks run inline on the calling thread.
 */
#ifndef K3_POOL_H
#define K3_POOL_H
#include <pthread.h>

typedef void (*k3_task_fn)(void *ctx, int task);

void k3_pool_run(k3_task_fn fn, void *ctx, int ntasks);

/* Threads used for kernels, caller included. n <= 0: the number of online cores.
 * Must not be called while a k3_pool_run is in flight. */
void k3_threads_set(int n);
int k3_threads(void);
/* The spin time in microseconds (tests); us < 0: back to K3_POOL_SPIN_US or the default.
 * Must not be called while a k3_pool_run is in flight. */
void k3_pool_spin(int us);
/* Joins the workers (they restart on the next run). Optional at exit. */
void k3_pool_shutdown(void);

/* How every background thread of k3 stops (this pool, the trunk readers, the expert I/O,
 * the state file's writer): *quit set under mu, every waiter on cv woken, n joined. */
void k3_threads_quit(pthread_mutex_t *mu, pthread_cond_t *cv, int *quit, pthread_t *th, int n);
#endif
