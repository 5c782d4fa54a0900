/* experts.c — routed experts are read on use, never held as a whole model. With a
 * memory setup (mem.h) they come from the expert cache (expert_cache.c: preads into
 * fixed slots by an I/O pool); without one (unit tests, tools) they are multiplied
 * straight out of the shard mappings. Either way the six tensors of an expert are
 * located by their header offsets, never by arithmetic (pitfall 23). */
#include "k3.h"
#include "mem.h"

int k3_expert_get(K3Model *m, int L, int e, K3Expert *out) {
    K3Mem *x = k3_mem(m);
    if (x && x->cache) return k3_ecache_get(m, x->cache, L, e, out);
    const K3Config *c = &m->cfg;
    const StTensor *const *t = m->layers[L].experts + (size_t)e * 6;
    const int I = c->moe_intermediate_size, LAT = c->routed_expert_hidden_size;
    K3Mat *w[3] = { &out->w1, &out->w2, &out->w3 };
    const int rows[3] = { I, LAT, I }, cols[3] = { LAT, I, LAT };
    for (int j = 0; j < 3; j++) {
        const void *p = k3_tensor_data(m, t[2 * j]), *s = k3_tensor_data(m, t[2 * j + 1]);
        if (!p || !s) { m->expert_failures++; return -1; }
        w[j]->type = K3_W_MXFP4; w[j]->rows = rows[j]; w[j]->cols = cols[j];
        w[j]->w = p; w[j]->scale = s;
    }
    return 0;
}
