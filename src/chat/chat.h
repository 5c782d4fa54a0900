/* chat.h — the interactive XTML chat (k3 MODEL_DIR --chat --tok DIR ...); see docs/CHAT.md.
 * chat.c: flags, REPL, commands; chat_gen.c: one turn (render, prefix reuse, prefill,
 * sampling, streamed output); chat_hist.c: JSONL history (validate, atomic write). */
#ifndef K3_CHAT_H
#define K3_CHAT_H
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "draft_loop.h"
#include "engine.h"
#include "image_in.h"
#include "scheduler.h"
#include "sampler.h"
#include "spec.h"
#include "tok.h"
#include "xtml.h"
#include "constrain.h"

/* chat_main (cli.h) returns the process exit code: 0 ok, 1 runtime failure, 2
 * usage/config/history error, 4 finished but a routed expert failed to load. */

/* ---- internals shared by chat*.c ---- */

#define CHAT_MAX_LINE ((size_t)16 << 20)        /* history line / message bytes */
#define CHAT_MAX_FILE ((size_t)256 << 20)       /* history file bytes */
#define CHAT_MAX_MSGS 1000000

typedef struct {
    char *role, *content, *reasoning;           /* reasoning: assistant only, may be NULL */
    int32_t *gen_ids; int n_gen, gen_thinking, gen_state;   /* exact record (this session) */
    K3ImageIn *img; int n_img;                  /* a user message's images (/image), in order
                                                 * of its content's placeholders */
} ChatMsg;

typedef struct {
    ChatMsg *v; int n, cap;
} ChatLog;

typedef struct {
    /* options */
    const char *model_dir, *config, *tok_dir, *history, *kernels;
    const char *save_state, *load_state;        /* chat_state.c */
    int threads, gen, ctx, thinking, hide_thinking, canonical, color;
    int spec, spec_k;                           /* speculation: on unless --no-spec */
    const char *draft_file;                     /* --draft-file: a reference to draft from */
    const char *draft_dir;                      /* --draft DIR: DSpark drafts (draft_loop.h) */
    int draft_block, draft_fixed;               /* --draft-block N (fixed), else chosen */
    char effort[8];
    SamplerParams sp;
    uint64_t seed;
    /* engine */
    K3Engine eng;                               /* model, storage, run state */
    K3Sched *sch;                               /* the engine's scheduler: a batch of one */
    K3SchedSeq *q;                              /* its one slot */
    K3State *st;                                /* q's state (NULL: none yet) */
    Tok *tok;
    XtmlIds ids;
    float *logits;                              /* eng.rs.logits (spec_k + 1 rows) */
    K3Spec spec_st;                             /* drafts and acceptance, the whole session */
    K3DraftLoop *draft;                         /* --draft DIR: its context follows st */
    K3DraftStats draft0;                        /* its counts when the last turn began */
    int *ref, n_ref;                            /* --draft-file, tokenized */
    int *seen; size_t nseen;                    /* ids of the conversations this session
                                                 * dropped (/reset, re-prefills): drafts */
    int *dbuf; size_t capd;                     /* seen, then fed: what a draft looks in */
    /* conversation and what the state holds */
    ChatLog log;
    int32_t *fed; size_t nfed, capfed;
    /* stats */
    long tot_prefill, tot_reused, tot_gen, reprefills, turns;
    long last_reused, last_prefill, last_gen;
    long last_passes, last_accepted;            /* verify passes, accepted drafts (last turn) */
    double t_prefill, t_decode, last_tp, last_td;
    const char *reprefill_why;                  /* why the next turn prefills again, or NULL */
    int ctx_drop;                               /* --context-full drop-oldest */
    const char *grammar, *grammar_file;         /* --grammar TEXT, --grammar-file FILE */
    GrGrammar *gr; K3Cons cs; float *mask;      /* each reply under the grammar */
    int skip;                                   /* oldest non-system messages not rendered
                                                 * (dropped to fit the context) */
    /* images: /image queues them for the next message (chat_gen.c renders them) */
    K3ImageIn *pend; int n_pend;
    K3ImageCtx ictx;                            /* the vision tower, opened on first use */
    K3EmbedSpan *span; K3Embed embed;           /* the rendered images' rows (chat_render) */
} Chat;

/* chat_hist.c */
void chat_msg_free(ChatMsg *m);
void chat_log_free(ChatLog *l);
int chat_log_add(ChatLog *l, const char *role, const char *content, const char *reasoning);
/* Loads and validates FILE into l (empty when the file does not exist and missing_ok).
 * Returns 0, or 2 with "FILE line N: what; fix" in err (l untouched). */
int chat_hist_load(const char *path, int missing_ok, ChatLog *l, char *err, size_t errlen);
/* 2 with "FILE line N: ..." when a k3_gen record holds an id >= vocab, else 0. */
int chat_hist_check_ids(const ChatLog *l, int vocab, const char *path, char *err,
                        size_t errlen);
/* Writes l atomically (PATH.tmp, fsync, rename). 0, or -1 with err. */
int chat_hist_save(const char *path, const ChatLog *l, char *err, size_t errlen);

/* chat_gen.c */
extern volatile sig_atomic_t chat_interrupted;   /* set by SIGINT */
/* Adds a user message and generates the reply (streamed to stdout). Returns 0 (reply
 * added, possibly truncated), 1 when the turn was refused or dropped (context full,
 * Ctrl-C during the prefill, an empty reply: the user message is removed), or -1 on a
 * runtime failure (message printed). */
int chat_turn(Chat *c, const char *user_text);
void chat_forget_state(Chat *c);                 /* reset the KDA/MLA state */
/* --draft over N ranks (chat_gen.c): the draft's calls that reach collectives (its forward's
 * lm_head rows, rank 0's choices) or move its context, made by every rank in the same
 * order: rank 0 sends each as the scheduler's client record, the others replay it. */
enum { CHAT_DR_FOLLOW = 1, CHAT_DR_BLOCK, CHAT_DR_KEEP, CHAT_DR_TRUNC, CHAT_DR_RESTORE };
void chat_draft_send(Chat *c, int op, int a, int b, int d);
void chat_draft_send_ctx(Chat *c);                /* the restored context, whole */
void chat_draft_replay(void *ctx, K3State *st, const void *p, size_t n);
void chat_print_stats(const Chat *c, FILE *f);
/* The transcript (all of c->log, exact records unless --canonical-history, generation
 * prompt) as ids; 0, or -1 with a message printed. The rendered messages' images take their
 * places; c->embed then says where their rows go. */
int chat_render(Chat *c, int32_t **ids, size_t *n);
/* /image PATH: the image decoded and queued for the next message; 0, or -1 (printed). */
int chat_image_add(Chat *c, const char *path);
int chat_has_images(const Chat *c);              /* any message holds an image */

/* chat_state.c: --save-state / --load-state (docs/CHAT.md "Saved state").
 * save: 0, or -1 with err (nothing written over FILE). load: 0 (the state, the fed ids and
 * the exact records of the history's replies restored), or with err and the chat as it was:
 * 1 (I/O; a corrupt, truncated or foreign file: another format version, checkpoint,
 * history or tokenizer) / 2 (this run's flags contradict it: thinking, --canonical-history,
 * --ctx; a missing path or not a regular file). */
int chat_state_save(Chat *c, const char *path, char *err, size_t errlen);
int chat_state_load(Chat *c, const char *path, char *err, size_t errlen);
/* The reader over a file's n bytes in memory, name standing for its path (the fuzzer). */
int chat_state_load_bytes(Chat *c, const char *name, const void *data, size_t n, char *err,
                          size_t errlen);
#endif
