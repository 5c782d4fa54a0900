/* comm.h — how the ranks of one run talk: the transport behind a run split over N
 * processes (docs/DISTRIBUTED.md). The engine calls only this. Plain `make` links the
 * one-process transport (src/comm/solo.c: rank 0 of 1, no collective is ever needed);
 * `make mpi` links MPI's instead (src/comm/mpi/comm_mpi.c, bin/k3-mpi). Collectives only
 * move bytes: no floating-point reduction happens in the transport, so the bits of a
 * result never depend on N. Every rank runs the same command; rank 0 prints. */
#ifndef K3_COMM_H
#define K3_COMM_H
#include <stddef.h>
#include <stdint.h>

/* Starts the transport (MPI_Init); a follower (rank > 0) sends its stdout to /dev/null and
 * its stderr through a filter that names its rank. Returns 0, or exits with a message. */
int k3_comm_init(int *argc, char ***argv);
/* Ends it with the run's exit code: 0 finishes cleanly; any other code ends every rank
 * (a rank that failed alone must not leave the others waiting in a collective). */
void k3_comm_finalize(int rc);
int k3_comm_rank(void);
int k3_comm_size(void);
const char *k3_comm_name(void);              /* "solo" or "mpi" */

/* all = the concatenation, in rank order, of every rank's `mine` (counts[r] bytes from
 * rank r; counts is the same on every rank). mine may not overlap all. */
void k3_comm_allgatherv(const void *mine, void *all, const size_t *counts);
/* n bytes of rank 0's buf to every rank. */
void k3_comm_bcast(void *buf, size_t n);
/* Ends every rank now, with "k3: rank R: " and the message on stderr, exit code rc. */
void k3_comm_abort(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the collectives cost so far, on this rank: their count, the bytes this rank
 * received, and the seconds spent inside them (waiting for the slowest rank included). */
typedef struct { long collectives; double bytes, wait_s; } K3CommStats;
K3CommStats k3_comm_stats(void);
#endif
