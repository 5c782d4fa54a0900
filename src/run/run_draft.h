/* run_draft.h — one prompt with a DSpark draft model (--draft DIR, include/dspark.h): the
 * draft's context follows the target's committed positions, every step drafts a block from
 * the anchor (the token just emitted), and spec.h's exact verify keeps what the target
 * agrees with, so the ids and logits are those of the run without a draft. */
#ifndef K3_RUN_DRAFT_H
#define K3_RUN_DRAFT_H
#include "dspark.h"

typedef struct RunDraft RunDraft;
typedef struct {
    long blocks;              /* draft forwards */
    long proposed, accepted;  /* drafts verified, and kept */
    long rows;                /* rows the verify passes fed (the anchor and the drafts) */
    double seconds;           /* in the draft: blocks and context ingestion */
} RunDraftStats;

/* Opens the draft and installs its tap in e (which must outlive it); block: rows per draft
 * (1..7); fixed: every block verifies them all (--draft-block), else each block verifies
 * the drafts the confidence head and the cost make worth it (kappa: one more verified
 * position's cost over a step, spec.h's step_cost), none for a while where drafts do not
 * pay. Until run_draft_prefilled, every forward's rows are committed positions (the
 * prompt) and go into the draft's context as each forward ends. */
int run_draft_open(RunDraft **out, const char *dir, K3Engine *e, int block, int fixed,
                   double kappa, int quiet, char *err, size_t errlen);
/* After the prompt's prefill: its positions are all in the draft's context. */
int run_draft_prefilled(RunDraft *r, char *err, size_t errlen);
/* The drafts to verify after anchor (the token at the draft's next position), at most room:
 * writes draft[0..k) and returns k (0: a plain step), or -1 with err. gen_pos: the index
 * of the next generated token (the test hook's offset). */
int run_draft_block(RunDraft *r, int anchor, long gen_pos, int room, int *draft, char *err,
                    size_t errlen);
/* After a forward of the anchor and k drafts of which the target kept n_keep positions (the
 * anchor and the accepted drafts): those rows' taps go into the context. */
int run_draft_keep(RunDraft *r, int k, int n_keep, char *err, size_t errlen);
const RunDraftStats *run_draft_stats(const RunDraft *r);
void run_draft_close(RunDraft *r);
#endif
