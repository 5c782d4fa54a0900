/* constrain.h — constrained sampling's one face for the one-shot command, batch and the
 * server: JSON mode (json_gram.h) or a GBNF grammar (grammar.h), whichever the request
 * gave (never both: the callers refuse that). Masking and feeding follow json_gram.h's
 * contract (docs/SAMPLING.md). A K3Cons starts zeroed; k3_cons_init may be called again
 * on the same one (a batch slot, a server slot) and k3_cons_free ends it. */
#ifndef K3_CONSTRAIN_H
#define K3_CONSTRAIN_H
#include "json_gram.h"
#include "grammar.h"

typedef struct {
    const JgSchema *jg; JgState js;       /* JSON mode */
    const GrGrammar *gr; GrState *gs;     /* a grammar */
} K3Cons;

/* Starts c on jg or gr (both NULL: off). 0, or -1 when out of memory. */
int k3_cons_init(K3Cons *c, const JgSchema *jg, const GrGrammar *gr);
void k3_cons_free(K3Cons *c);
static inline int k3_cons_on(const K3Cons *c) { return c->jg || c->gr; }
/* "JSON mode" or "grammar": the messages' subject. */
const char *k3_cons_name(const K3Cons *c);
int k3_cons_mask(K3Cons *c, const struct Tok *t, int V, int end_id, float *logits);
int k3_cons_put(K3Cons *c, const unsigned char *b, size_t n);
int k3_cons_complete(const K3Cons *c);
int k3_cons_mask_drafts(K3Cons *c, const struct Tok *t, int V, int end_id, float *lg,
                        const int *draft, int k);
#endif
