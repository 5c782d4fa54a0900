/* stream_priv.h — the trunk stream's insides, shared by stream.c (the pieces and their
 * window) and pin.c (the pinned prefix, read once at open). */
#ifndef K3_STREAM_PRIV_H
#define K3_STREAM_PRIV_H
#include "internal.h"
#include "util.h"
#include "dio.h"
#include <pthread.h>

typedef struct {
    K3RowSource src;                          /* first: what k3_matmul calls */
    K3Stream *s;
    int L, mi;                                /* layer (-1: lm_head), index in the trunk */
    int type, rows, cols, whole;
    int file;                                 /* index in K3Stream.file (k3_trunk_file) */
    uint64_t row_bytes, sum;
    const char *name;
    int lo, hi, split;                        /* this rank's rows [lo, hi); split: N > 1 */
    int pin_rows;                             /* rows [lo, lo + pin_rows) at pin */
    const unsigned char *pin;
    uint32_t *pin_rel;                        /* coded, lo > 0: pinned rows' offsets */
    int first, npieces;                       /* its streamed pieces */
    K3Sum pin_sum;                            /* checksum state after the pinned rows */
    const uint32_t *ro;                       /* coded: the row offset table, else NULL */
} SMat;

typedef struct {
    int mat, r0, r1, file; uint64_t off, n;
    uint32_t *rel;                            /* coded: row offsets from the piece's start */
} SPiece;
typedef struct { long seq; uint64_t vpos, span, a0; int chunks, state, released, whole; } Rec;
enum { R_READING, R_READY, R_FAILED };

struct K3Stream {
    K3Model *m; K3Trunk *t; K3MemStats *st;
    K3DioFile *file; int nfile;               /* k3_trunk_fpath's files; those used open */
    SMat *mat; int nmat;
    SPiece *pc; int npc;
    int *first_of;                            /* [NL + 1]: first piece of layer L (NL: head) */
    SMat *head;
    K3Layer *ly;
    long held;                                /* the whole piece the layer holds, or -1 */
    unsigned char *pin; uint64_t pin_len;
    unsigned char *win; uint64_t W;           /* the ring of pieces */
    unsigned char *wbuf; int whole_busy;      /* the whole matrix a layer holds (kv_b) */
    int max_T, verify, nth;
    pthread_mutex_t mu; pthread_cond_t cv;
    pthread_t *th; int started, quit, waiting;
    Rec *rec; long RC;
    long iss, alloc, cons, tail;              /* next to issue / allocated / consume / free */
    long skip_to;                             /* pieces before it not yet read: not read (a
                                               * stopped forward's rest, drained unused) */
    uint64_t iss_off, head_v;
    int failed; char err[1000];
    long nreads;
    K3IoMeter *io;
    const int *experts_busy;                  /* expert reads queued or in flight */
};

/* Where rows [r0, r1) of sm lie in its file. */
void k3_stream_rows_at(const K3Stream *s, const SMat *sm, int r0, int r1, uint64_t *off,
                       uint64_t *n);
/* Reads the pinned rows of every matrix (s->mat[j].pin_rows) into s->pin and checks them,
 * with progress lines on stderr unless quiet; 0, or -1 with err set. */
int k3_stream_pin(K3Stream *s, int quiet, char *err, size_t errlen);
#endif
