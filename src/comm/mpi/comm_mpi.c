/* comm_mpi.c — the MPI transport (comm.h), linked only by `make mpi` (bin/k3-mpi; plain
 * `make` builds src/comm/solo.c instead: this file sits one folder deeper than SRC's
 * wildcard). Every collective is MPI_COMM_WORLD's; bytes only (MPI_BYTE), never a
 * reduction. A follower's stdout goes to /dev/null and its stderr through a thread that
 * starts each line with "[rank R] ", so a message from any rank names it. A rank that
 * ends any other way than k3_comm_finalize(0) (an error, exit(), a crash's atexit) calls
 * MPI_Abort, which ends every rank: no rank is left waiting in a collective. A rank that
 * waits yields its core (mpi_yield_when_idle). */
#include "comm.h"
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank, g_size = 1, g_done;
static int g_stderr = -1;                     /* a follower: the real stderr; fd 2 is the pipe */
static pthread_t g_filter;
static K3CommStats g_st;

static void *filter(void *arg) {
    const int fd = (int)(intptr_t)arg;
    char buf[4096], line[4200];
    size_t n = 0;
    ssize_t r;
    int bol = 1;
    while ((r = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < r; i++) {
            if (bol) n = (size_t)snprintf(line, sizeof line, "[rank %d] ", g_rank), bol = 0;
            line[n++] = buf[i];
            if (buf[i] == '\n' || n >= sizeof line - 1) {
                if (write(g_stderr, line, n) < 0) {}
                n = 0; bol = buf[i] == '\n';
            }
        }
    if (n && write(g_stderr, line, n) < 0) {}
    close(fd);
    return NULL;
}

/* A follower's stderr, drained: what it wrote is out before the rank ends. */
static void drain(void) {
    if (g_stderr < 0) return;
    fflush(stderr);
    dup2(g_stderr, 2);                        /* closes the pipe's last write end */
    pthread_join(g_filter, NULL);
    g_stderr = -1;
}

static void at_exit(void) {
    if (g_done) return;
    drain();
    fprintf(stderr, "k3: rank %d of %d ended before the run finished; ending every rank\n",
            g_rank, g_size);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int k3_comm_init(int *argc, char ***argv) {
    /* A rank waiting in a collective yields the core instead of spinning on it (Open MPI
     * spins unless it sees more ranks than cores): the rank's own I/O threads and, on a
     * shared host, the other ranks need it. On a 2-vCPU VM, np 2 against one process:
     * spinning 1.00x-3.19x its s/token, yielding 1.06x-1.23x (docs/DISTRIBUTED.md). A
     * value given by the user (--mca mpi_yield_when_idle 0, the environment) is kept. */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    /* No Open MPI handler on a crash (SIGSEGV, SIGABRT...): its backtrace allocates, and a
     * rank that crashed inside malloc then hung in it instead of dying; a plain signal
     * death is what mpirun notices, ending every rank and naming this one. */
    setenv("OMPI_MCA_opal_signal", "", 0);
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    atexit(at_exit);
    if (g_rank == 0) return 0;
    int null = open("/dev/null", O_WRONLY), p[2];
    if (null >= 0) { dup2(null, 1); close(null); }
    if (pipe(p) == 0 && (g_stderr = dup(2)) >= 0) {
        dup2(p[1], 2);
        close(p[1]);
        if (pthread_create(&g_filter, NULL, filter, (void *)(intptr_t)p[0])) {
            dup2(g_stderr, 2);
            g_stderr = -1;
        }
    }
    return 0;
}

void k3_comm_finalize(int rc) {
    fflush(stdout);
    if (rc) {
        drain();
        g_done = 1;
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    drain();
    g_done = 1;
    MPI_Finalize();
}

int k3_comm_rank(void) { return g_rank; }
int k3_comm_size(void) { return g_size; }
const char *k3_comm_name(void) { return "mpi"; }
const char *k3_comm_waits(void) {            /* what MPI_Init read (the value we set) */
    const char *v = getenv("OMPI_MCA_mpi_yield_when_idle");
    return v && v[0] && strchr("1tTyY", v[0]) ? "yield" : "spin";
}

void k3_comm_allgatherv(const void *mine, void *all, const size_t *counts) {
    int cnt[g_size], displ[g_size];
    size_t off = 0;
    for (int r = 0; r < g_size; r++) {
        if (counts[r] > INT_MAX || off > INT_MAX)
            k3_comm_abort(1, "a gather of %zu bytes is past MPI's int counts", off + counts[r]);
        cnt[r] = (int)counts[r]; displ[r] = (int)off; off += counts[r];
    }
    const double t0 = MPI_Wtime();
    MPI_Allgatherv(mine, cnt[g_rank], MPI_BYTE, all, cnt, displ, MPI_BYTE, MPI_COMM_WORLD);
    g_st.wait_s += MPI_Wtime() - t0;
    g_st.collectives++;
    g_st.bytes += (double)(off - counts[g_rank]);
}

void k3_comm_bcast(void *buf, size_t n) {
    if (n > INT_MAX) k3_comm_abort(1, "a broadcast of %zu bytes is past MPI's int counts", n);
    const double t0 = MPI_Wtime();
    MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    g_st.wait_s += MPI_Wtime() - t0;
    g_st.collectives++;
    if (g_rank) g_st.bytes += (double)n;
}

void k3_comm_bcast_idle(void *buf, size_t n) {
    if (n > INT_MAX) k3_comm_abort(1, "a broadcast of %zu bytes is past MPI's int counts", n);
    const double t0 = MPI_Wtime();
    MPI_Request rq;
    MPI_Ibcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &rq);
    for (int done = 0;;) {
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done) break;
        const double w = MPI_Wtime() - t0;  /* a step's record comes at once: look often */
        if (w < 1e-3) { sched_yield(); continue; }
        struct timespec ts = { 0, w < 0.1 ? 100000L : 1000000L };   /* 0.1 ms, then 1 ms */
        nanosleep(&ts, NULL);
    }
    g_st.wait_s += MPI_Wtime() - t0;
    g_st.collectives++;
    if (g_rank) g_st.bytes += (double)n;
}

void k3_comm_abort(int rc, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    drain();
    fprintf(stderr, "k3: rank %d of %d: %s\n", g_rank, g_size, msg);
    fflush(stderr);
    g_done = 1;
    MPI_Abort(MPI_COMM_WORLD, rc);
    exit(rc);
}

K3CommStats k3_comm_stats(void) { return g_st; }
