/* batch_priv.h — the state of one k3 --batch run, shared by batch.c (the run),
 * batch_report.c (--out), batch_lines.c (each line's prompt ids, checked; the streamed
 * input) and the draft model's part (--draft DIR, in batch.c). */
#ifndef K3_BATCH_PRIV_H
#define K3_BATCH_PRIV_H
#include "batch.h"
#include "draft_loop.h"
#include "engine.h"
#include "cli.h"
#include "constrain.h"
#include "scheduler.h"
#include "spec.h"
#include "tok.h"

typedef struct {
    const char *model_dir, *tok_dir, *file, *out, *dump;
    int gen, batch_size, quiet, spec, spec_k, state_file;
    const char *state_dir;
    const char *draft_dir; int draft_block, draft_fixed;   /* --draft DIR, --draft-block */
    K3EngineFlags ef;                  /* engine, sampling and memory flags (flags.c) */
} BOpts;

/* One sequence in flight. seq holds the prompt, then what was generated; the scheduler's
 * q feeds it: the prompt, then each sampled token (with its drafts). */
typedef struct Batch Batch;
typedef struct {
    Batch *b;
    int li;                            /* its line (index into lines), -1: free */
    K3SchedSeq *q;
    int *seq, n_prompt, n, fed, n_gen, gen;
    Sampler smp;
    double t0, t_first;
    float *dump;                       /* [n_prompt][V] when dumping */
    K3Spec spec;                       /* --spec: this sequence's drafts and acceptance */
    int k;                             /* drafts in the step just run (0: a plain step) */
    K3Cons cs; float *mask;            /* JSON mode or a grammar: the text, the masked row */
    K3DraftLoop *dl;                   /* --draft: its context (one a slot), else NULL */
    const float *taps;                 /* its rows of the last step's taps */
} Slot;

/* FILE read as lines arrive (stdin, a pipe). */
typedef struct {
    int fd, eof, line;
    char *buf; size_t n, cap;
    int bad;                           /* lines refused (answered with an error line) */
} Stream;

struct Batch {
    const BOpts *o;
    K3Engine e;
    K3Sched *sch;
    Tok *tok;
    BatchLine *lines; int n_lines, cap_lines;
    int **prompts, *n_prompts;         /* each line's prompt ids */
    Slot *slot; int n_slots;
    int next, done, ctx;
    long n_generated;
    int n_eos;                         /* sequences that ended at eos (the rest: length) */
    long drafted, accepted, passes;    /* --spec, over every finished sequence */
    double t_run;
    Stream *in;                        /* NULL: the whole file was read and checked first */
    const double *ranks; int n_ranks;  /* over N ranks: k3_ranks_gather's (else 0) */
    K3ImageCtx ictx;                   /* "images": the vision tower, opened on first use */
    int eom;                           /* <|end_of_msg|>: where an "images" line's reply ends */
    K3DraftLoop **dl;                  /* --draft: one loop a slot (dl[0] holds the tap) */
    K3DraftStats ds;                   /* their totals at the end */
    char derr[1024];                   /* a draft's failure inside a step */
};

/* The tokens line i may generate: its "gen", else --gen. */
static inline int line_gen(const Batch *b, int i) {
    return b->lines[i].gen >= 0 ? b->lines[i].gen : b->o->gen;
}


/* The whole file is checked before anything runs: every bad line is named (the first
 * BAD_SHOWN of them), so one round of fixes is enough. */
#define BAD_SHOWN 20
typedef struct { const char *file; int n; } Bad;

/* batch_lines.c: line i's prompt ids into b->prompts[i] (tokenized; an "images" line
 * through the chat template). 0, or an exit code with the reason in err. */
int batch_ids_of(Batch *b, int i, char *err, size_t errlen);
/* Line i against the model of vocabulary V (ids, context, logit_bias, tokenizer). */
int batch_prompt_check(Batch *b, int i, int V, char *err, size_t errlen);
/* Line i's images against the memory plan (batch_lines.c): 0, or 2 with err. */
int batch_admit_images(Batch *b, int i, char *err, size_t errlen);
/* A bad line named on stderr (ctx a Bad: the first BAD_SHOWN are shown, all counted). */
void batch_bad_line(void *ctx, const char *msg);
/* Every line against config.json's vocabulary, each bad one to batch_bad_line. */
void batch_check_lines(Batch *b, Bad *bad);
/* What has arrived on the streamed FILE, line by line (waiting for it when wait). */
int batch_stream_read(Batch *b, int wait, char *err, size_t errlen);

/* --out FILE: the run report (JSON). 0, or -1 (said on stderr). */
int batch_write_report(const Batch *b, const char *path);
#endif
