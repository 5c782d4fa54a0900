/* weights.h — what the forward pass asks of storage, and nothing more.
 *
 * The forward pass (src/forward) never includes the memory system: it asks this
 * interface for a layer's tensors, for the routed experts a chunk selected, and for
 * the output head. Two implementations exist: resident from the shard mappings
 * (src/model/resident.c: tests and tools) and the memory system (src/mem: pinned
 * trunk, streamed pieces, expert cache, streamed lm_head). New storage (a coded
 * trunk, per-piece streaming, another sequence's state) is a new implementation,
 * not new hooks. Every implementation hands the kernels the same bytes, so the bits
 * never depend on where the weights live. */
#ifndef K3_WEIGHTS_H
#define K3_WEIGHTS_H
#include <stddef.h>
#include "kernels.h"

typedef struct K3Layer K3Layer;
typedef struct K3Weights K3Weights;

/* One routed expert, ready to multiply: gate w1, down w2, up w3 (MXFP4). */
typedef struct { K3Mat w1, w2, w3; } K3Expert;

typedef struct {
    /* Layer L's tensors. Layers are acquired in order and each acquire is followed by
     * a release of the same layer. NULL with the reason in err (an I/O failure). */
    const K3Layer *(*acquire)(K3Weights *w, int L, char *err, size_t errlen);
    void (*release)(K3Weights *w, int L);
    /* The union of experts a chunk selected in layer L, in increasing id (the compute
     * order): storage may get all their reads in flight before the first get. */
    void (*prefetch)(K3Weights *w, int L, const int *ids, int n);
    /* Expert e of layer L. 0, or -1 when it could not be read: the failure is counted
     * in expert_failures and the run is reported invalid (exit 4). */
    int (*expert)(K3Weights *w, int L, int e, K3Expert *out);
    /* Y[T][vocab] = lm_head X[T][hidden]; 0, or -1 with the reason in err. */
    int (*lm_head)(K3Weights *w, float *Y, const float *X, int T, char *err, size_t errlen);
    void (*close)(K3Weights *w);
    /* May be NULL. Layer L's tensors where they are in memory whatever layer is acquired
     * (the trunk in the shard mappings), else NULL: a read-only look ahead. */
    const K3Layer *(*peek)(K3Weights *w, int L);
    /* May be NULL. Experts of layer L a guess says the next step will ask for: storage
     * may start reading them behind what it reads now (forward/readahead.c). */
    void (*guess)(K3Weights *w, int L, const int *ids, int n);
} K3WeightsOps;

struct K3Weights {
    const K3WeightsOps *ops;
    long expert_failures;                      /* experts that could not be read */
};
#endif
