/* dspark_priv.h — the draft's state, shared by its loader (dspark_load.c) and its forward
 * (dspark.c). */
#ifndef K3_DSPARK_PRIV_H
#define K3_DSPARK_PRIV_H
#include "dspark.h"

typedef struct {
    float *in_norm, *post_norm, *q_a_norm, *kv_a_norm;   /* widened to f32 */
    K3Mat q_a, q_b, kv_a, kv_b, o, gate, up, down;        /* BF16, in the mapping */
} K3DSparkLayer;

struct K3DSpark {
    K3DSparkConfig c;
    K3Engine *e;                              /* the target: embedding, lm_head, pool */
    char dir[4096];
    StIndex *st;
    void *map; size_t map_len;                /* model.safetensors, read-only */
    size_t weight_bytes;                      /* the tensors it reads, norms' copies too */
    K3DSparkLayer *layers;
    void *copies[96]; int n_copies;           /* matrices misaligned in the file, copied */
    K3Mat ctx_proj, w1, w2, conf_w;
    float *ctx_norm, *final_norm, conf_b;
    /* RoPE: inv_freq [rope/2], magnitude, and the softmax scale */
    float *inv_freq, mag, scale;
    /* tap rows of the last forward [tap_rows][n_taps * hidden], cap = engine's max_T */
    K3Tap tap;
    int tap_slot[K3_MAX_LAYERS];              /* target layer -> tap index, -1 */
    float *taps; int tap_rows, tap_cap;
    /* context cache: per layer lat [cap][kv_lora], kpe [cap][rope]; P positions */
    float **lat, **kpe;
    int P, cap;
    float *ingest;                            /* K3_ROW_BLOCK rows of c_p and kv_a */
    float *blk; size_t blk_len;               /* one block's buffers */
    uint64_t identity;                        /* k3_dspark_identity */
    /* streamed (k3_mem_draft_streamed): the file is read, never its mapping touched (the
     * mapping only gives each tensor's offset): the matrices' rows through this source a
     * piece at a time into buf, kv_b a layer at a time into kvb, w1's rows one at a time;
     * tmp: a piece's products for T > 1; rd_err: a failed read (errno), reported after */
    int streamed, fd, rd_err;
    size_t piece;                             /* K3_DSPARK_PIECE (K3_TEST_DRAFT_PIECE: tests) */
    K3RowSource rsrc;
    float *tmp; size_t tmp_rows;
    void *buf, *kvb; size_t buf_len;
    float gate;                               /* k3_dspark_set_gate */
};

/* Streamed: k3_matmul's source for the matrices (rsrc); tmp holds K3_DSPARK_TMP floats. */
#define K3_DSPARK_TMP 65536
void k3_dspark_piece_matmul(const K3RowSource *s, float *Y, const K3Mat *W, const float *X,
                            int T);
/* The context cache for n positions (at open: the engine's context, so it never grows). */
int k3_dspark_reserve(K3DSpark *d, int n, char *err, size_t errlen);
/* Streamed: n bytes of the file at the tensor bytes p points to in the mapping, into dst
 * (a failure: dst zeroed, d->rd_err set); the bytes p itself when not streamed. */
const void *k3_dspark_read(K3DSpark *d, void *dst, const void *p, size_t n);

/* dspark.c: RoPE on x[rope] at pos (interleaved pairs); the tables from the config. */
void k3_dspark_rope(const K3DSpark *d, float *x, int pos);
void k3_dspark_rope_init(K3DSpark *d);
#endif
