/* bench_ranks.c — a rep of `k3 bench` over N ranks (k3-mpi under mpirun). A forked child
 * would not be in the job, so every rank runs the rep in this process, at the same point of
 * the same grid (every rank parses the same command): the one-prompt run or batch mode it
 * would have exec'd, its stdout to /dev/null and rank 0's stderr to the rep's file, as a
 * child's. Each rank's high-water mark is reset first (clear_refs), so the peak RSS of
 * every rank, gathered into rank 0's --out report, belongs to the rep. */
#include "bench_grid.h"
#include "cli.h"
#include "comm.h"
#include "k3.h"
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int kb_run_ranks(char **args, const char *out, const char *errf, volatile sig_atomic_t *stop,
                 KbRep *r, char *err, size_t en) {
    const int me = k3_comm_rank(), N = k3_comm_size();
    int argc = 0, batch = 0;
    for (; args[argc]; argc++) batch |= !strcmp(args[argc], "--batch");
    if (!me) unlink(out);
    fflush(stdout); fflush(stderr);
    const int o1 = dup(1), o2 = dup(2), nul = open("/dev/null", O_WRONLY);
    const int ef = me ? -1 : open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (nul >= 0) dup2(nul, 1);
    if (ef >= 0 || nul >= 0) dup2(ef >= 0 ? ef : nul, 2);
    const int cr = open("/proc/self/clear_refs", O_WRONLY);   /* VmHWM := the RSS now */
    if (cr >= 0) { if (write(cr, "5", 1) != 1) {} close(cr); }
    /* a signal waits for the rep's end (the ranks must stop at the same point); the run
     * installs its own handlers: bench's come back after it */
    sigset_t block, old;
    sigemptyset(&block); sigaddset(&block, SIGINT); sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction si, st;
    sigaction(SIGINT, NULL, &si); sigaction(SIGTERM, NULL, &st);
    int rc = batch ? k3_batch_main(argc, args) : k3_run_main(argc, args);
    sigaction(SIGINT, &si, NULL); sigaction(SIGTERM, &st, NULL);
    fflush(stdout); fflush(stderr);
    if (o1 >= 0) { dup2(o1, 1); close(o1); }
    if (o2 >= 0) { dup2(o2, 2); close(o2); }
    if (nul >= 0) close(nul);
    if (ef >= 0) close(ef);
    sigprocmask(SIG_SETMASK, &old, NULL);      /* a pending SIGINT: on_signal sets *stop */
    int mine[2] = { rc, *stop ? 1 : 0 }, all[2 * N];
    size_t counts[N];
    for (int k = 0; k < N; k++) counts[k] = sizeof mine;
    k3_comm_allgatherv(mine, all, counts);
    for (int k = 0; k < N; k++) {
        if (all[2 * k] != all[0])
            k3_comm_abort(1, "k3 bench: rank %d's rep ended with exit %d, rank 0's with %d "
                          "(%s)", k, all[2 * k], all[0], errf);
        if (all[2 * k + 1]) *stop = 1;         /* one rank interrupted: every rank stops */
    }
    memset(r, 0, sizeof *r);
    if (rc) {
        char line[580];
        kb_last_line(errf, line, sizeof line);
        snprintf(err, en, "exit %d%s%s", rc, line[0] ? ": " : "", line);
        return rc;
    }
    return me ? 0 : kb_read_report(out, r, err, en) ? K3_ERR_RUNTIME : 0;
}
