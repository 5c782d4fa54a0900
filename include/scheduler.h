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
#endif
