/* sched_priv.h — the scheduler's insides, shared by scheduler.c and the mirror that replays
 * its calls on the other ranks (follow.c; scheduler.h "the mirror"). */
#ifndef K3_SCHED_PRIV_H
#define K3_SCHED_PRIV_H
#include "scheduler.h"
#include <stdint.h>

struct K3Sched {
    K3Engine *e;
    int n_slots, mode, report;
    int max_T, rows_max;          /* a step's tokens and logits rows (the plan's) */
    K3SchedSeq *seq;              /* [n_slots] */
    int *busy;                    /* [n_slots] */
    K3SchedSeq **fed;             /* [n_slots]: the last step's, in row order */
    K3Seq *fs;                    /* [n_slots]: the step's shares */
    struct K3StateFile *sf;
    long joined;
    K3SchedStats st;
    int pf_done;                  /* prompt tokens fed since none was waiting (progress) */
    int lead, follow, ended;      /* the mirror: rank 0 sends, the others replay */
    struct FollowMap *map;        /* a follower's: the lead's state addresses to its own */
    K3SchedUserFn on_user;        /* a follower's handler of the client's records */
    void *user_ctx;
};

/* The records: what the lead did, replayed by a follower. */
enum { OP_JOIN = 1, OP_LEAVE, OP_STEP, OP_LOAD, OP_TAKE, OP_COPY, OP_FREE, OP_RESET,
       OP_ROLLBACK, OP_SYNC, OP_SHARE, OP_END, OP_EMBED, OP_USER };
/* On the lead, a record to every follower: op on slot (or -1) with a, the key of a state
 * (its address here) and n payload bytes; nothing elsewhere. */
void k3_follow_send(K3Sched *s, int op, int slot, int a, const void *key, const void *p,
                    size_t n);
/* The step's record (its shares s->fs[0..m), their slots from s->fed). */
void k3_follow_send_step(K3Sched *s, int m);
K3SchedSeq *k3_sched_join_slot(K3Sched *s, int i, void *user);
#endif
