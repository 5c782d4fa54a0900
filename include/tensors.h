/* tensors.h — the one table of k3's tensor names (docs/MODEL.md §2): which K3Layer
 * matrix each released name binds to, its shape from the config, and which tensors
 * form the trunk. Used by the binding (model.c), `k3 pack` and the trunk reader. */
#ifndef K3_TENSORS_H
#define K3_TENSORS_H
#include <stddef.h>
#include "k3.h"

/* Which layers a name exists in. */
enum { K3_IN_ALL, K3_IN_KDA, K3_IN_MLA, K3_IN_MLA_GATED, K3_IN_DENSE, K3_IN_MOE };
/* Dimensions a shape is made of (k3_dim). */
enum { K3_D_HIDDEN, K3_D_KDA_C, K3_D_KDA_D, K3_D_KDA_HEADS, K3_D_Q_LORA, K3_D_Q_B, K3_D_KV_A,
       K3_D_KV_B, K3_D_KV_LORA, K3_D_MLA_V, K3_D_INTER, K3_D_SHARED, K3_D_EXPERTS,
       K3_D_LATENT };

typedef struct {
    size_t field;                             /* offsetof(K3Layer, matrix) */
    const char *suffix;                       /* after "model.layers.N." */
    int in;                                   /* K3_IN_* */
    int rows, cols;                           /* K3_D_* */
} K3MatName;

extern const K3MatName k3_layer_mats[];
extern const int k3_n_layer_mats;

int k3_dim(const K3Config *c, int d);
/* Does entry t exist in layer L? */
int k3_mat_in_layer(const K3MatName *t, const K3Config *c, int L);
/* The matrix field of layer ly that entry t binds. */
K3Mat *k3_mat_field(K3Layer *ly, const K3MatName *t);
/* The layer a released name belongs to ("...model.layers.N..."), or -1 (global). */
int k3_tensor_layer(const char *name);
/* Is this a trunk tensor: a text tensor other than a routed expert's? */
int k3_is_trunk_tensor(const char *name);
/* Index of the layer-matrix entry for layer L whose suffix ends name, or -1. */
int k3_mat_lookup(const K3Config *c, int L, const char *name);

/* Value checks on stored bytes (load, `k3 pack`, `k3 doctor --scan`): the element index
 * of the first Inf or NaN in BF16/F16/F32 data (other dtypes: none), and the byte index
 * of the first E8M0 scale 0xFF (NaN in OCP MX); -1 when there is none. */
int64_t k3_first_nonfinite(int dtype, const void *data, uint64_t nbytes);
int64_t k3_first_bad_scale(const void *data, uint64_t nbytes);
int k3_is_scale_tensor(const char *name);             /* an MXFP4 E8M0 ".weight_scale" */
#endif
