/* spec.h — exact speculative decoding (src/engine/spec.c). A draft of k tokens (from a
 * reference the user gives, or from n-grams of the sequence so far) is verified in one
 * forward of k+1 positions: the last token and the draft. The model's token is drawn at
 * each position from the verified logits exactly as the plain run draws it (greedy, or
 * the sampler at that position); drafts are kept while they agree, then the model's own
 * token follows, and the state is rolled back to the kept positions (k3_state_rollback).
 * The ids are those of the plain run, whatever the draft. */
#ifndef K3_SPEC_H
#define K3_SPEC_H
#include "k3.h"
#include "sampler.h"

typedef struct {
    const int *ref; int n_ref;       /* reference ids (--draft-ids / --draft-file), or none */
    int kmax;                        /* most draft tokens per pass */
    double p[2];                     /* measured acceptance per drafted token (running), for
                                      * drafts from the aligned reference [0] and the rest [1] */
    int src;                         /* where the last draft came from */
    double step_cost;                /* cost of one more position, relative to a 1-token step */
    long drafted, accepted, passes;  /* passes: verify passes with a draft (k >= 1) */
    int idle;                        /* drafts found but not tried since the last probe */
    int gap;                         /* steps between probes: 16, doubled per failed pass */
    int kcap;                        /* widest pass now: 4, doubled / halved by outcome */
    int fails, cool;                 /* failed passes in a row; plain steps still to wait */
} K3Spec;

/* kmax <= 0: 8. The cost of a wider step is the model's: the routed experts one more
 * token may add (top-k per MoE layer) against the trunk bytes every step reads. */
void k3_spec_init(K3Spec *sp, const K3Model *m, const int *ref, int n_ref, int kmax);
/* The draft for the sequence seq[0..n) (n_prompt of them the prompt), the first found of:
 * the reference's continuation when the generated part is a prefix of it; what follows
 * the latest match of the sequence's last 3, 2 or 1 tokens in the reference; the
 * reference from the generated length on; what followed the latest earlier match of the
 * last 3, 2 or 1 tokens in the sequence itself (prompt lookup). At most the k the
 * measured acceptance and cost make worth it, at most kcap and `room`; none while a
 * cooldown after failed passes runs. Writes draft[0..k) and returns k (0: no draft, a
 * plain step). */
int k3_spec_draft(K3Spec *sp, const int *seq, int n, int n_prompt, int room, int *draft);
/* After a forward (on a k3_state_mark'ed s) of the last token then draft[0..k), with every
 * row's logits lg[k+1][vocab]: draws the model's token at positions gen_pos, gen_pos+1, ..
 * (sampler_sample_at; greedy samplers take the argmax) while it equals the draft, stopping
 * at eos; out[0..a] = the a accepted draft tokens then the model's own. Rolls s back to
 * the a+1 positions it keeps (the last token and the accepted draft) and returns a+1, or
 * -1 (out of memory). */
int k3_spec_accept(K3Spec *sp, const K3Model *m, K3State *s, Sampler *smp, long gen_pos,
                   const int *draft, int k, const float *lg, int *out);
#endif
