/* split.c — a matmul split by output rows over the ranks of a run (comm.h;
 * docs/DISTRIBUTED.md), in both builds (it calls only the transport); and the ranks'
 * agreement checks k3_comm_differs and k3_comm_least.
 *
 * Rank k computes rows [r0, r1) of Y for every token with the single-process kernel on a
 * view of those rows (a row's bits never depend on which rows are computed beside it: rows
 * are independent in every kernel, the threads already split them so), and one gather
 * moves the pieces to every rank. Shares are multiples of 16 rows. At N = 1 the share is
 * every row and nothing is gathered. A matrix whose rows arrive in pieces (W->src, the
 * streamed trunk) is streamed by each rank for its share only (src/mem/stream.c): its
 * view is those rows' count, and the source multiplies them. */
#include "comm.h"
#include <stdlib.h>
#include <string.h>

void k3_share_rows(int rows, int rank, int n, int *r0, int *r1) {
    const long units = (rows + 15) / 16;
    *r0 = (int)(16 * (units * rank / n));
    *r1 = (int)(16 * (units * (rank + 1) / n));
    if (*r0 > rows) *r0 = rows;
    if (*r1 > rows) *r1 = rows;
}

int k3_comm_differs(uint64_t v) {
    const int N = k3_comm_size();
    if (N == 1) return 0;
    uint64_t all[N];
    size_t counts[N];
    for (int k = 0; k < N; k++) counts[k] = sizeof v;
    k3_comm_allgatherv(&v, all, counts);
    for (int k = 1; k < N; k++)
        if (all[k] != all[0]) return k;
    return 0;
}

void k3_comm_least(int32_t *v, int n) {
    const int N = k3_comm_size();
    if (N == 1 || n < 1) return;
    int32_t all[(size_t)N * n];
    size_t counts[N];
    for (int k = 0; k < N; k++) counts[k] = sizeof(int32_t) * (size_t)n;
    k3_comm_allgatherv(v, all, counts);
    for (int k = 0; k < N; k++)
        for (int j = 0; j < n; j++) {
            const int32_t x = all[(size_t)k * n + j];
            if (x < v[j]) v[j] = x;
        }
}

/* Rows [r0, r1) of W as a matrix of their own (the same bytes, the same kernel). */
static K3Mat rows_view(const K3Mat *W, int r0, int r1) {
    K3Mat v = *W;
    const size_t c = (size_t)W->cols, r = (size_t)r0;
    v.rows = r1 - r0;
    if (W->src) return v;                     /* the source holds this rank's rows only */
    switch (W->type) {
    case K3_W_F32:   v.w = (const float *)W->w + r * c; break;
    case K3_W_BF16:  v.w = (const uint16_t *)W->w + r * c; break;
    case K3_W_MXFP4: v.w = (const uint8_t *)W->w + r * c / 2; v.scale = W->scale + r * c / 32;
                     break;
    case K3_W_BF16C: v.scale = W->scale + 4 * r; break;     /* the row offset table (u32) */
    }
    return v;
}

/* Grown on demand, kept for the run (N > 1 only). */
static void *grow(void **p, size_t *cap, size_t n) {
    if (n <= *cap) return *p;
    void *q = realloc(*p, n);
    if (!q) k3_comm_abort(1, "out of memory for a gather of %zu bytes", n);
    *p = q; *cap = n;
    return q;
}

void *k3_share_buf(int which, size_t bytes) {
    static void *p[3];
    static size_t cap[3];
    return grow(&p[which], &cap[which], bytes);
}

/* A matmul split by output rows over the ranks, the pieces gathered into Y. */
void k3_matmul_split(float *Y, const K3Mat *W, const float *X, int T) {
    const int N = k3_comm_size(), me = k3_comm_rank(), rows = W->rows;
    if (N == 1 || T <= 0) { k3_matmul(Y, W, X, T); return; }
    int r0, r1, lo[N], hi[N];
    size_t counts[N];
    for (int k = 0; k < N; k++) {
        k3_share_rows(rows, k, N, &lo[k], &hi[k]);
        counts[k] = sizeof(float) * (size_t)T * (hi[k] - lo[k]);
    }
    r0 = lo[me]; r1 = hi[me];
    float *mine = k3_share_buf(0, counts[me] + 1);
    if (r1 > r0) {
        const K3Mat v = rows_view(W, r0, r1);
        k3_matmul(mine, &v, X, T);
    }
    /* one token: the pieces in rank order are Y itself */
    float *all = T == 1 ? Y : k3_share_buf(1, sizeof(float) * (size_t)T * rows);
    k3_comm_allgatherv(mine, all, counts);
    if (T > 1)                                /* [rank][T][share] -> [T][rows] */
        for (size_t k = 0, off = 0; k < (size_t)N; off += (size_t)T * (hi[k] - lo[k]), k++)
            for (int t = 0; t < T; t++)
                memcpy(Y + (size_t)t * rows + lo[k],
                       all + off + (size_t)t * (hi[k] - lo[k]),
                       sizeof(float) * (size_t)(hi[k] - lo[k]));
}

/* Several matmuls, split as k3_matmul_split each, with one gather for all of them. */
void k3_matmul_split_many(const K3MatJob *o, int n, int T) {
    const int N = k3_comm_size(), me = k3_comm_rank();
    if (N == 1 || T <= 0) {                   /* one process: one by one */
        for (int j = 0; j < n; j++) k3_matmul_split(o[j].Y, o[j].W, o[j].X, T);
        return;
    }
    int lo[n][N], hi[n][N];
    size_t counts[N], at = 0, total = 0;
    memset(counts, 0, sizeof counts);
    for (int j = 0; j < n; j++)
        for (int k = 0; k < N; k++) {
            k3_share_rows(o[j].W->rows, k, N, &lo[j][k], &hi[j][k]);
            counts[k] += sizeof(float) * (size_t)T * (hi[j][k] - lo[j][k]);
        }
    float *mine = k3_share_buf(0, counts[me] + 1);
    for (int j = 0; j < n; j++) {             /* [job][T][share] */
        if (hi[j][me] > lo[j][me]) {
            const K3Mat v = rows_view(o[j].W, lo[j][me], hi[j][me]);
            k3_matmul(mine + at, &v, o[j].X, T);
        }
        at += (size_t)T * (hi[j][me] - lo[j][me]);
    }
    for (int k = 0; k < N; k++) total += counts[k];
    float *all = k3_share_buf(1, total + 1);
    k3_comm_allgatherv(mine, all, counts);
    size_t off = 0;                           /* [rank][job][T][share] -> each [T][rows] */
    for (int k = 0; k < N; k++)
        for (int j = 0; j < n; j++) {
            const size_t nr = (size_t)(hi[j][k] - lo[j][k]);
            for (int t = 0; t < T; t++)
                memcpy(o[j].Y + (size_t)t * o[j].W->rows + lo[j][k], all + off + t * nr,
                       sizeof(float) * nr);
            off += (size_t)T * nr;
        }
}

