/* bench_shapes.h — the weight shapes k3 bench-kernels times (bench.c): MXFP4, BF16 and coded
 * BF16C matrices of the model's sizes. The one list: tools/bench_matvec_ab.c times the same. */
#ifndef K3_BENCH_SHAPES_H
#define K3_BENCH_SHAPES_H
#include "kernels.h"

typedef struct { int type, rows, cols; const char *name; } KbShape;

static const KbShape kb_shapes[] = {
    { K3_W_MXFP4, 3072, 3584, "mxfp4 3072x3584" },
    { K3_W_MXFP4, 3584, 3072, "mxfp4 3584x3072" },
    { K3_W_BF16, 12288, 7168, "bf16 12288x7168" },
    { K3_W_BF16C, 12288, 7168, "bf16c 12288x7168" },
    { K3_W_BF16, 7168, 12288, "bf16 7168x12288" },
    { K3_W_BF16C, 7168, 12288, "bf16c 7168x12288" },
};
#define KB_NSHAPES ((int)(sizeof kb_shapes / sizeof kb_shapes[0]))
#endif
