/* doctor.h — the parts of `k3 doctor` (doctor.c: the checks and the report;
 * doctor_bench.c: the disk and memory measurements). */
#ifndef K3_CLI_DOCTOR_H
#define K3_CLI_DOCTOR_H
#include <stdint.h>
#include "k3.h"

typedef struct { char *path; uint64_t size; } DocShard;

typedef struct {
    double mb_s;                  /* disk read MB/s (1e6 bytes), 0 = not measured */
    int direct;                   /* the reads went through O_DIRECT */
    uint64_t bytes, window;       /* bytes read, bytes per read */
    int threads;
    double seconds;
} DocDisk;

/* Reads windows like the expert cache does (O_DIRECT, expert-sized, 4 threads) from the
 * model's own files for at most max_bytes or max_s: the experts of m when m has them
 * (m may be NULL), else 1 MB windows over the shards. 0, or -1 with the reason in err. */
int doc_disk_bench(const K3Model *m, const DocShard *sh, int nsh, uint64_t max_bytes,
                   double max_s, DocDisk *out, char *err, size_t errlen);
/* GB/s of weights the BF16 matvec kernel reads from memory (a matrix of the given size,
 * every core): what a resident byte costs a decoded token. */
double doc_mem_bench(uint64_t bytes);
/* The trunk checksum (k3_sum64) in GB/s on one thread: what pinning and --verify-reads
 * add per byte. */
double doc_sum_bench(uint64_t bytes);
#endif
