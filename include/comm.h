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
#include "kernels.h"

/* Starts the transport (MPI_Init); a follower (rank > 0) sends its stdout to /dev/null and
 * its stderr through a filter that names its rank. Returns 0, or exits with a message. */
int k3_comm_init(int *argc, char ***argv);
/* Ends it with the run's exit code: 0 finishes cleanly; any other code ends every rank
 * (a rank that failed alone must not leave the others waiting in a collective). */
void k3_comm_finalize(int rc);
int k3_comm_rank(void);
int k3_comm_size(void);
const char *k3_comm_name(void);              /* "solo" or "mpi" */
/* How a rank waits in a collective: "yield" (gives its core away while it polls: MPI's
 * default here), "spin" (the user asked for --mca mpi_yield_when_idle 0), "none" (solo). */
const char *k3_comm_waits(void);

/* all = the concatenation, in rank order, of every rank's `mine` (counts[r] bytes from
 * rank r; counts is the same on every rank). mine may not overlap all. */
void k3_comm_allgatherv(const void *mine, void *all, const size_t *counts);
/* The lowest rank whose v differs from rank 0's, or 0 when every rank agrees (one 8-byte
 * gather: how ranks check that they run the same checkpoint, split and steps). */
int k3_comm_differs(uint64_t v);
/* v[j] = the least of every rank's v[j], j < n (one gather; unchanged at N = 1): what every
 * rank can do when each planned from its own memory (a chunk, slots: the steps must agree). */
void k3_comm_least(int32_t *v, int n);
/* n bytes of rank 0's buf to every rank. */
void k3_comm_bcast(void *buf, size_t n);
/* The same, for a wait that may last (a follower waiting for rank 0's next record while a
 * server is idle): after about a millisecond the waiting rank sleeps between looks
 * instead of polling its core. Every rank calls this one for that broadcast. */
void k3_comm_bcast_idle(void *buf, size_t n);
/* Ends every rank now, with "k3: rank R: " and the message on stderr, exit code rc. */
void k3_comm_abort(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Matmuls split over the ranks (src/comm/split.c): rank k computes its rows [r0, r1)
 * (k3_share_rows: multiples of 16) with the single-process kernel and one gather moves the
 * pieces, so every rank ends with all of Y, each element computed whole by one rank.
 * k3_matmul_split_many: several (no X_j another's Y), in the order given, one gather.
 * k3_share_buf: a gather buffer (which: 0..2), grown to bytes and kept. */
void k3_share_rows(int rows, int rank, int n, int *r0, int *r1);
void k3_matmul_split(float *Y, const K3Mat *W, const float *X, int T);
typedef struct { float *Y; const K3Mat *W; const float *X; } K3MatJob;
void k3_matmul_split_many(const K3MatJob *o, int n, int T);
void *k3_share_buf(int which, size_t bytes);

/* What the collectives cost so far, on this rank: their count, the bytes this rank
 * received, and the seconds spent inside them (waiting for the slowest rank included). */
typedef struct { long collectives; double bytes, wait_s; } K3CommStats;
K3CommStats k3_comm_stats(void);
#endif
