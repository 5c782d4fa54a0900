/* constrain.c — JSON mode or a grammar behind one face (include/constrain.h). */
#include "constrain.h"

int k3_cons_init(K3Cons *c, const JgSchema *jg, const GrGrammar *gr) {
    if (jg && jg_grammar(jg)) { gr = jg_grammar(jg); jg = NULL; }   /* a schema's grammar */
    gr_state_free(c->gs);                     /* a state is tied to its grammar */
    c->gs = NULL;
    c->jg = jg; c->gr = gr;
    if (jg) jg_init(&c->js, jg);
    if (!gr) return 0;
    return (c->gs = gr_new(gr)) ? 0 : -1;
}

void k3_cons_free(K3Cons *c) {
    gr_state_free(c->gs);
    c->gs = NULL; c->gr = NULL; c->jg = NULL;
}

const char *k3_cons_name(const K3Cons *c) { return c->gr ? "grammar" : "JSON mode"; }

int k3_cons_mask(K3Cons *c, const struct Tok *t, int V, int end_id, float *logits) {
    return c->gr ? gr_mask(c->gs, t, V, end_id, logits) : jg_mask(&c->js, t, V, end_id, logits);
}

int k3_cons_put(K3Cons *c, const unsigned char *b, size_t n) {
    return c->gr ? gr_put(c->gs, b, n) : jg_put(&c->js, b, n);
}

int k3_cons_complete(const K3Cons *c) {
    return c->gr ? gr_complete(c->gs) : jg_complete(&c->js);
}

int k3_cons_mask_drafts(K3Cons *c, const struct Tok *t, int V, int end_id, float *lg,
                        const int *draft, int k) {
    return c->gr ? gr_mask_drafts(c->gs, t, V, end_id, lg, draft, k)
                 : jg_mask_drafts(&c->js, t, V, end_id, lg, draft, k);
}
