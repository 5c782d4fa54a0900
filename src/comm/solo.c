/* solo.c — the one-process transport (comm.h): rank 0 of 1. The split code never needs a
 * collective at N = 1, but the calls are defined (a copy, nothing) so that nothing above
 * the transport has a second code path. bin/k3 holds no MPI symbol (tests/sh/mpi.sh). */
#include "comm.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int k3_comm_init(int *argc, char ***argv) { (void)argc; (void)argv; return 0; }
void k3_comm_finalize(int rc) { (void)rc; }
int k3_comm_rank(void) { return 0; }
int k3_comm_size(void) { return 1; }
const char *k3_comm_name(void) { return "solo"; }
const char *k3_comm_waits(void) { return "none"; }
void k3_comm_allgatherv(const void *mine, void *all, const size_t *counts) {
    memcpy(all, mine, counts[0]);
}
void k3_comm_bcast(void *buf, size_t n) { (void)buf; (void)n; }
void k3_comm_bcast_idle(void *buf, size_t n) { (void)buf; (void)n; }
void k3_comm_abort(int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("k3: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(rc);
}
K3CommStats k3_comm_stats(void) { return (K3CommStats){ 0, 0, 0 }; }
