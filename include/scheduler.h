/* scheduler.h — the one step scheduler (src/engine/scheduler.c): batch mode, the server and
 * the chat REPL (a batch of one) feed their sequences through it. It owns the slots (one state
 * each, in memory or paged through a state file where the plan says they do not fit),
 * and each step it feeds every decoding sequence its token (and drafts) whole, then gives
 * the room left in the plan's chunk to the prompts still going in, in the order they
 * joined, in one k3_forward_seqs: each trunk piece and selected expert is read once for
 * all of them. Every sequence gets the bits of its solo forward (any split of a prompt
 * gives the same bits); the client samples from the rows and says what comes next. */
#ifndef K3_SCHEDULER_H
#define K3_SCHEDULER_H
#include <stddef.h>
#include "k3.h"

typedef struct K3SchedSeq K3SchedSeq;
struct K3SchedSeq {
    /* the client's: what to feed next */
    const int *ids; int n;        /* ids not yet fed: a prompt's tail, or a decode step */
    int decode;                   /* fed whole in one step, before any prompt: a token and
                                   * its drafts (a verify pass is one forward) */
    int all_logits;               /* every fed row's logits (dumps, verify passes) */
    /* decode only, may be NULL: called when the step has room past ids[0..n) for up to
     * `room` drafts; appends them after ids (the client's buffer), marks the state for
     * the verify pass, sets all_logits; returns how many (0 none), or -1 (out of memory) */
    int (*draft)(K3SchedSeq *q, int room);
    void *user;
    /* the scheduler's */
    K3State *st;                  /* the slot's state */
    int slot;
    int T;                        /* ids the last step fed (0: none) */
    float *logits;                /* their rows ([T][vocab] with all_logits, else the last
                                   * one's), the caller's until the next step */
    long order;                   /* join order: prompts take the room in it */
};

typedef struct {
    int seqs;                     /* slots: the most sequences in flight */
    int state_mode;               /* K3_STATES_* (statefile.h); -1: the plan's */
    const char *state_dir;        /* the state file's folder (NULL: $TMPDIR, else /tmp) */
    int ctx;                      /* positions a state in the state file holds */
    int report;                   /* each step into the memory report (k3_mem_step): 1,
                                   * and a line on stderr: 2; 0 none (a server's steps) */
} K3SchedOpts;

typedef struct {
    long steps, rows, mixed;      /* steps, sequences fed in them, steps mixing prompts
                                   * and decode tokens */
    long prompt_tokens, decode_tokens;
    double t_prefill, t_decode;   /* each step's time shared by its tokens' kinds */
} K3SchedStats;

typedef struct K3Sched K3Sched;
/* Slots for o->seqs sequences over the open engine e (which must outlive it); the state
 * file when the mode asks for one (e->pager is set). 0, or 1 with the reason in err. */
int k3_sched_open(K3Sched **out, K3Engine *e, const K3SchedOpts *o, char *err, size_t errlen);
void k3_sched_close(K3Sched *s);
/* A free slot with its state reset, n = 0; NULL when every slot is taken. */
K3SchedSeq *k3_sched_join(K3Sched *s, void *user);
void k3_sched_leave(K3Sched *s, K3SchedSeq *q);
int k3_sched_active(const K3Sched *s);
int k3_sched_slots(const K3Sched *s);
/* The most ids one step feeds: the plan's chunk (k3_sched_mirror: every rank's least). */
int k3_sched_max_T(const K3Sched *s);
/* One step over the sequences with ids to feed. *fed[0..*n_fed): those it fed, in row
 * order, each with T and logits set (ids, n advanced past what went in). 0 (also when
 * there was nothing to feed: *n_fed = 0), or the k3_forward_seqs code with err:
 * K3_INTERRUPTED leaves the fed sequences' states to reset. */
int k3_sched_step(K3Sched *s, K3SchedSeq ***fed, int *n_fed, char *err, size_t errlen);
/* One sequence alone (chat): ids[0..n) fed in steps of the plan's chunk; q->logits the
 * last step's rows. As k3_sched_step; the engine's interrupt is seen between steps too. */
int k3_sched_feed(K3Sched *s, K3SchedSeq *q, const int *ids, int n, int all_logits,
                  char *err, size_t errlen);
/* q's state becomes a copy of src (a resident state: a kept conversation); 0 or -1 (out
 * of memory, the state file failed: err). */
int k3_sched_load(K3Sched *s, K3SchedSeq *q, const K3State *src, char *err, size_t errlen);
/* A resident state equal to q's (handed over when q's slot holds it in memory: the slot
 * gets a new one at the next join); NULL with err. */
K3State *k3_sched_take(K3Sched *s, K3SchedSeq *q, char *err, size_t errlen);
/* A resident copy of q's state; NULL with err. */
K3State *k3_sched_copy(K3Sched *s, const K3SchedSeq *q, char *err, size_t errlen);
const K3SchedStats *k3_sched_stats(const K3Sched *s);
/* The state file (statefile.h), NULL when the states are resident. */
struct K3StateFile *k3_sched_statefile(const K3Sched *s);

/* ---- the mirror (src/engine/follow.c; docs/DISTRIBUTED.md) ----
 * A scheduler given k3_sched_mirror over N > 1 ranks: rank 0 (the lead) runs the client,
 * and every call above that changes a state, and each of the calls below, goes to the
 * other ranks (the followers) as a record (k3_comm_bcast: a fixed header, then its
 * payload) before or after it runs here; a step's record carries what it feeds (each
 * sequence's slot, ids with drafts, all_logits, whether its state is marked). A follower
 * runs k3_sched_follow, replaying them on its own engine, so every rank calls the same
 * collectives in the same order. States the client holds outside the slots go by their
 * address on rank 0. At N = 1 (or without k3_sched_mirror) nothing is sent: these are the
 * state operations themselves. */
/* Right after k3_sched_open, on every rank (chat, serve: only rank 0 runs the client):
 * the ranks agree on the slots, the step's tokens and rows (each the least of every
 * rank's plan; k3_sched_slots says how many). */
void k3_sched_mirror(K3Sched *s);
int k3_sched_follower(const K3Sched *s);   /* 1 on a follower: call k3_sched_follow */
/* Replays the lead's records until it ends; returns the lead's exit code. */
int k3_sched_follow(K3Sched *s);
/* The lead's client ended with rc (the followers return it); once, then no more records.
 * k3_sched_close ends with 0 when the client did not. */
void k3_sched_end(K3Sched *s, int rc);
void k3_sched_reset(K3Sched *s, K3SchedSeq *q);              /* k3_state_reset of q's */
int k3_sched_rollback(K3Sched *s, K3SchedSeq *q, int keep);  /* k3_state_rollback of q's */
/* q's state was rolled back to keep here (k3_spec_accept): the followers do the same. */
void k3_sched_rolled_back(K3Sched *s, K3SchedSeq *q, int keep);
/* q's state was written here whole (a saved chat state loaded): its bytes to the
 * followers. 0, or -1 (a state in a state file; out of memory). */
int k3_sched_sync(K3Sched *s, K3SchedSeq *q);
/* st, a resident state the client made (read from disk), to the followers. */
void k3_sched_share(K3Sched *s, const K3State *st);
/* Frees a state k3_sched_take / k3_sched_copy / k3_sched_share gave the client. */
void k3_sched_free(K3Sched *s, K3State *st);
/* q's state takes the rows e (an image's, K3Embed; NULL or none: every position embeds its
 * id) at the positions its next steps feed; the followers get a copy of the spans that end
 * past the state's position now (the rows the coming steps can reach), so a follower's
 * forward embeds the lead's rows: the tower runs on the lead only. e stays the caller's. */
void k3_sched_embed(K3Sched *s, K3SchedSeq *q, const K3Embed *e);
/* The client's own record about q's slot (chat --draft: the draft's calls that reach
 * collectives): p[0..n) to every follower, whose handler gets it with that slot's state,
 * in order with the scheduler's records. Nothing at N = 1. */
typedef void (*K3SchedUserFn)(void *ctx, K3State *st, const void *p, size_t n);
void k3_sched_user(K3Sched *s, const K3SchedSeq *q, const void *p, size_t n);
void k3_sched_on_user(K3Sched *s, K3SchedUserFn fn, void *ctx);   /* a follower's handler */
#endif
