/* vision_priv.h — the tower's state, shared by vision_load.c (config, tensors) and
 * vision.c (the forward). Not for other rooms: they use vision.h. */
#ifndef K3_VISION_PRIV_H
#define K3_VISION_PRIV_H
#include "kernels.h"
#include "vision.h"

typedef struct {
    float *norm0, *norm1;                     /* [D] fp32 (widened once) */
    K3Mat wqkv, wo, fc0, fc1;                 /* BF16 [3A][D], [D][A], [F][D], [D][F] */
} K3VisionBlock;

struct K3Vision {
    K3VisionConfig c;
    K3Mat pe;                                 /* patch embedding [D][3 p p] BF16 */
    float *pos;                               /* position grid [pos_h][pos_w][D] fp32 */
    K3VisionBlock *blocks;
    float *final_norm;                        /* [D] */
    K3Mat p0, p2;                             /* projector [4D][4D], [out][4D] BF16 */
    float *post_norm;                         /* [out] */
    void **bufs; int n_bufs;                  /* the BF16 matrices as read (freed at close) */
    size_t weight_bytes;
    /* progress lines on stderr (k3_vision_run when not quiet): work done of total */
    int progress;
    double t0, next, done, total;
};

/* Attention tiles (vision.c): queries and keys per tile. The key tile sets the order of the
 * online softmax's sums, so it is part of the result's definition; the query tile is not
 * (each query is its own vector lane; 256 gives test_vision's digest too). */
#define K3_VIS_BQ 128
#define K3_VIS_BK 256
#endif
