/* resident.c — weights used in place from the shard mappings: the storage of tests and
 * tools, and the reference every other storage must agree with bit for bit. Layers are
 * the bound K3Layer structs; experts are multiplied straight out of the mappings (their
 * six tensors located by header offsets, never by arithmetic: pitfall 23); lm_head is one
 * product. */
#include "k3.h"
#include <stdio.h>
#include <stdlib.h>

typedef struct { K3Weights base; K3Model *m; } Resident;

static const K3Layer *acquire(K3Weights *w, int L, char *err, size_t errlen) {
    (void)err; (void)errlen;
    return &((Resident *)w)->m->layers[L];
}

static void release(K3Weights *w, int L) { (void)w; (void)L; }

static void prefetch(K3Weights *w, int L, const int *ids, int n) {
    (void)w; (void)L; (void)ids; (void)n;
}

static int expert(K3Weights *w, int L, int e, K3Expert *out) {
    K3Model *m = ((Resident *)w)->m;
    const StTensor *const *t = m->layers[L].experts + (size_t)e * 6;
    const void *part[6];
    char err[600];
    for (int j = 0; j < 6; j++)
        if (!(part[j] = k3_tensor_data(m, t[j], err, sizeof err))) {
            fprintf(stderr, "k3: expert %d of layer %d: %s\n", e, L, err);
            w->expert_failures++;
            return -1;
        }
    k3_expert_bind(&m->cfg, part, out);
    return 0;
}

static int lm_head(K3Weights *w, float *Y, const float *X, int T, char *err, size_t errlen) {
    (void)err; (void)errlen;
    k3_matmul_polled(Y, &((Resident *)w)->m->lm_head, X, T);   /* N ranks: split */
    return 0;
}

static void close_resident(K3Weights *w) { free(w); }

static const K3WeightsOps RESIDENT = { acquire, release, prefetch, expert, lm_head,
                                       close_resident, NULL, NULL };

K3Weights *k3_weights_resident(K3Model *m) {
    Resident *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->base.ops = &RESIDENT;
    r->m = m;
    return &r->base;
}
