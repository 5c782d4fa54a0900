/* head.c — lm_head in row blocks. Small budgets do not keep the lm_head (2.35 GB on the
 * real K3) resident: each forward reads it in blocks of rows (dio.h: O_DIRECT window)
 * into one bounded buffer and multiplies block by block. k3_matmul splits over output
 * rows only, so every logit has the bits of the resident product. Every buffer is
 * allocated at open for the largest chunk the engine runs. */
#include "internal.h"
#include "dio.h"
#include "fault.h"
#include "util.h"
#include <stdlib.h>
#include <string.h>

struct K3Head {
    K3DioFile file;
    int rows, cols, type, block, max_T;        /* block = rows per read */
    uint64_t off, row_bytes;
    unsigned char *buf; uint64_t buflen;
    float *tmp;                                /* [max_T][block] for multi-row logits */
};

static const StTensor *head_tensor(const K3Model *m) {
    const StTensor *t = st_find(m->st, "language_model.lm_head.weight");
    return t ? t : st_find(m->st, "lm_head.weight");
}

K3Head *k3_head_open(K3Model *m, uint64_t buf_bytes, int max_T, char *err, size_t errlen) {
    const StTensor *t = head_tensor(m);
    K3Head *h = calloc(1, sizeof *h);
    if (!h) { snprintf(err, errlen, "out of memory"); return NULL; }
    if (!t) {
        snprintf(err, errlen, "%s: no lm_head.weight tensor", m->dir);
        free(h);
        return NULL;
    }
    h->off = t->offset; h->rows = m->lm_head.rows; h->cols = m->lm_head.cols;
    h->type = m->lm_head.type; h->max_T = max_T > 0 ? max_T : 1;
    h->row_bytes = (uint64_t)h->cols * (h->type == K3_W_F32 ? 4 : 2);
    uint64_t rows = buf_bytes / h->row_bytes;
    if (k3_faults()->lmhead_rows > 0) rows = (uint64_t)k3_faults()->lmhead_rows;
    if (rows < 1) rows = 1;
    if (rows > (uint64_t)h->rows) rows = (uint64_t)h->rows;
    h->block = (int)rows;
    h->buflen = k3_dio_room(rows * h->row_bytes) + K3_DIO_ALIGN;
    if (posix_memalign((void **)&h->buf, K3_DIO_ALIGN, h->buflen)) h->buf = NULL;
    if (h->max_T > 1) h->tmp = malloc(sizeof(float) * (size_t)h->max_T * h->block);
    if (!h->buf || (h->max_T > 1 && !h->tmp)) {
        snprintf(err, errlen, "out of memory for the lm_head buffer");
        k3_head_close(h);
        return NULL;
    }
    if (k3_dio_open(&h->file, m->st->shards[t->shard].path, "lm_head reads", err, errlen)) {
        k3_head_close(h);
        return NULL;
    }
    return h;
}

void k3_head_close(K3Head *h) {
    if (!h) return;
    k3_dio_close(&h->file);
    free(h->buf); free(h->tmp); free(h);
}

int k3_head_matmul(K3Head *h, float *Y, const float *X, int T, K3MemStats *st, char *err,
                   size_t errlen) {
    if (T > h->max_T) {
        snprintf(err, errlen, "lm_head: %d rows of logits asked, the plan has %d", T, h->max_T);
        return -1;
    }
    for (int r0 = 0; r0 < h->rows; r0 += h->block) {
        const int nb = h->rows - r0 < h->block ? h->rows - r0 : h->block;
        const uint64_t start = h->off + (uint64_t)r0 * h->row_bytes;
        const uint64_t n = (uint64_t)nb * h->row_bytes;
        uint64_t moved = 0;
        char why[600];
        double t0 = k3_now();
        const unsigned char *data = k3_dio_read(&h->file, h->buf, start, n, &moved, why,
                                                sizeof why);
        if (!data) {
            snprintf(err, errlen, "reading lm_head rows %d..%d: %s", r0, r0 + nb - 1, why);
            return -1;
        }
        if ((uintptr_t)data % 4) { memmove(h->buf, data, n); data = h->buf; }
        st->trunk_bytes += moved; st->head_bytes += moved;
        st->trunk_read_s += k3_now() - t0;
        K3Mat W = { h->type, nb, h->cols, data, NULL };
        if (T == 1) { k3_matmul(Y + r0, &W, X, 1); continue; }
        k3_matmul(h->tmp, &W, X, T);
        for (int t = 0; t < T; t++)
            memcpy(Y + (size_t)t * h->rows + r0, h->tmp + (size_t)t * nb, sizeof(float) * nb);
    }
    return 0;
}
