/* ranks.c — the report of a run over N ranks (engine.h; docs/DISTRIBUTED.md): every rank's
 * peak RSS, trunk and expert bytes read and collectives, gathered once at the end (every
 * rank calls it at the same point), printed and written by rank 0. Nothing at N = 1. */
#include "engine.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { F_RSS, F_TRUNK, F_EXPERT, F_COLL, F_BYTES, F_WAIT, F_DCOLL, F_DBYTES, F_DWAIT, NF };

const double *k3_ranks_gather(const K3Engine *e, K3CommStats decode0, int *n) {
    static double *all;
    const int N = k3_comm_size();
    *n = 0;
    if (N == 1) return NULL;
    free(all);
    if (!(all = malloc(sizeof(double) * NF * N))) k3_comm_abort(1, "out of memory");
    const K3MemStats *ms = k3_mem_stats(e->mem);
    const K3CommStats c = k3_comm_stats();   /* before this gather: the run's own traffic */
    double mine[NF] = { (double)k3_peak_rss(),
                        ms ? (double)(ms->trunk_bytes + ms->trunk_load_bytes) : 0,
                        ms ? (double)ms->expert_bytes : 0, (double)c.collectives, c.bytes,
                        c.wait_s, (double)(c.collectives - decode0.collectives),
                        c.bytes - decode0.bytes, c.wait_s - decode0.wait_s };
    size_t counts[N];
    for (int k = 0; k < N; k++) counts[k] = sizeof mine;
    k3_comm_allgatherv(mine, all, counts);
    *n = N;
    return all;
}

void k3_ranks_print(const double *all, int n, int n_tokens, int n_decode, FILE *f) {
    if (n < 2) return;
    for (int k = 0; k < n; k++) {
        const double *v = all + (size_t)k * NF;
        fprintf(f, "k3: rank %d of %d: peak RSS %.3f GB, read trunk %.3f GB + experts %.3f GB"
                " (%.1f MB per token), %.0f collectives, %.1f MB received, %.3f s in them",
                k, n, v[F_RSS] / K3_GB, v[F_TRUNK] / K3_GB, v[F_EXPERT] / K3_GB,
                n_tokens ? (v[F_TRUNK] + v[F_EXPERT]) / 1e6 / n_tokens : 0.0, v[F_COLL],
                v[F_BYTES] / 1e6, v[F_WAIT]);
        if (n_decode > 0)
            fprintf(f, "; decode: %.0f collectives, %.3f MB, %.2f ms a token", v[F_DCOLL] /
                    n_decode, v[F_DBYTES] / 1e6 / n_decode, 1e3 * v[F_DWAIT] / n_decode);
        fputc('\n', f);
    }
}

void k3_ranks_json(const double *all, int n, int n_tokens, int n_decode, FILE *f) {
    if (n < 2) return;
    fprintf(f, "  \"ranks\": %d,\n  \"transport\": \"%s\",\n  \"transport_waits\": \"%s\",\n"
            "  \"per_rank\": [", n, k3_comm_name(), k3_comm_waits());
    const double nt = n_tokens > 0 ? n_tokens : 1;
    for (int k = 0; k < n; k++) {
        const double *v = all + (size_t)k * NF;
        fprintf(f, "%s\n    {\"rank\": %d, \"peak_rss_bytes\": %.0f, \"trunk_bytes_read\": %.0f, "
                "\"expert_bytes_read\": %.0f, \"bytes_read_per_token\": %.0f, "
                "\"collectives\": %.0f, \"comm_bytes\": %.0f, \"comm_wait_s\": %.6f, "
                "\"collectives_per_token\": %.2f, \"comm_bytes_per_token\": %.0f, "
                "\"comm_wait_s_per_token\": %.6f",
                k ? "," : "", k, v[F_RSS], v[F_TRUNK], v[F_EXPERT],
                (v[F_TRUNK] + v[F_EXPERT]) / nt, v[F_COLL], v[F_BYTES], v[F_WAIT],
                v[F_COLL] / nt, v[F_BYTES] / nt, v[F_WAIT] / nt);
        if (n_decode > 0)                     /* the decode's own, where there was one */
            fprintf(f, ", \"decode_collectives_per_token\": %.2f, "
                    "\"decode_comm_bytes_per_token\": %.0f, \"decode_comm_wait_s_per_token\": %.6f",
                    v[F_DCOLL] / n_decode, v[F_DBYTES] / n_decode, v[F_DWAIT] / n_decode);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n");
}
