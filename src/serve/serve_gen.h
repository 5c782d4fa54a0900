/* serve_gen.h — one request of k3 serve (struct Gen), shared by serve_gen.c, the file
 * that writes its reply (serve_gen_out.c) and those that write it in another API's shapes
 * (serve_anthropic_out.c). */
#ifndef K3_SERVE_GEN_H
#define K3_SERVE_GEN_H
#include "serve.h"
#include "spec.h"
#include "constrain.h"

struct Gen {
    Server *s; Job *j;
    int choice;                           /* its index in the job's n */
    int waiting;                          /* for choice 0's prompt state (give_prompt) */
    const char *obj;                      /* "chat.completion" | "text_completion" */
    char id[48]; long created;
    int thinking;
    size_t sent[2];                       /* bytes of reasoning / content streamed */
    char *text[2]; size_t len[2];         /* final reasoning / content */
    int stopped;                          /* a stop string was found */
    int gone;                             /* the client went away */
    size_t maxstop;
    const XtmlParser *p;                  /* chat: the reply's parser (tool calls) */
    int calls_sent;                       /* tool calls streamed */
    int settled;                          /* the response channel closed (and was streamed) */
    /* the generation */
    K3SchedSeq *q;                        /* its slot in the engine's scheduler */
    int32_t *fed; size_t n, capfed, nprompt, reuse;   /* ids the state holds */
    float *logits;                        /* [vocab]: the row the next token is drawn from */
    K3State *pst; float *plogits;         /* the prompt's end, kept at the end (or NULL) */
    Sampler smp;
    XtmlParser xp;
    int32_t *out; size_t nout, capout;    /* ids of a raw completion */
    int cap, ngen, ended, hit, fail, fed_id;
    size_t pf;                            /* prompt ids in the state (nprompt: all in, and a
                                           * stream's head went out) */
    ServeLp lp, plp;                      /* logprobs: the reply's tokens, echo's prompt */
    K3Cons cs; float *mask;               /* JSON mode / grammar: the reply, the masked row;
                                           * strict tools: a call's arguments */
    int32_t force[32]; int n_force, i_force;   /* strict tools: markup the server writes */
    int calls_seen, in_args;              /* calls looked at; cs on the arguments */
    const JgSchema *arm;                  /* the schema cs takes once the opening is out */
    size_t ntest;                         /* K3_SERVE_TEST_REPLY ids given */
    size_t lp_off;                        /* completions: text_offset of the next token */
    const ServePrompt *pr;                /* completions: its prompt (choice / n) */
    int why;                              /* why it ended (K3STOP_*), for "k3_stop" */
    char err[1024];
    /* /v1/messages (serve_anthropic_out.c) */
    int a_head;                           /* message_start sent */
    int a_block, a_open;                  /* blocks begun; the open one's channel (-1 none,
                                           * 0 thinking, 1 text) */
    double a_ping;                        /* when the last ping went out */
    /* /v1/responses (serve_responses_out.c; a_head, a_block (output_index), a_open too) */
    int r_seq;                            /* the next event's sequence_number */
    Buf r_acc;                            /* the open item's text so far (its .done) */
    /* --draft (serve_draft.c) */
    struct K3DraftLoop *dl;               /* its slot's draft context, NULL: no drafts */
    int dv[8], k;                         /* fed: the anchor then k drafts (0: plain) */
    int pend[8], n_pend, i_pend;          /* tokens a verify drew: accepted drafts, then
                                           * the model's own */
    float *prow;                          /* their rows [8][vocab] (logprobs) */
    K3Spec sp;                            /* drafted, accepted, passes */
    const struct Kept *from;              /* the kept state resumed (serve_draft_begin) */
    KeptDraft pdraft;                     /* the prompt's end: the draft's context */
    /* images (serve_gen.c): read, their rows, and where the rows go in the prompt */
    K3ImageIn *img; int n_img;
    K3EmbedSpan *span; K3Embed emb;
};

/* Why a reply ended, finer than finish_reason (docs/SERVE.md): length is max_tokens (or
 * --max-tokens), context the context limit (--ctx), interrupted the server stopping. */
enum { K3STOP_LENGTH, K3STOP_EOS, K3STOP_STRING, K3STOP_CONTEXT, K3STOP_INTERRUPTED };

/* The channel's text as the REPL's parser gives it (xtml.c body_text): ill-formed bytes
 * -> U+FFFD, NUL dropped. stable: leave out an open UTF-8 tail (more ids may complete it).
 * (serve_chan.c) */
char *chan_text(const Tok *t, const int32_t *ids, size_t n, int stable, size_t *len);

/* ---- serve_gen_out.c: the reply in OpenAI's shapes (the others handed on) ---- */
/* After a token: checks stop strings on the answer and streams what is settled. final:
 * the whole text (the turn ended), kept in g->text. Returns 1 when a stop string ended it. */
int serve_gen_update(Gen *g, int ch, const int32_t *ids, size_t n, int final);
/* Streams the tool calls completed since the last delta. */
void serve_gen_tool_deltas(Gen *g);
/* The tool calls complete so far. */
int serve_gen_calls_done(const Gen *g);
/* An error reply from the engine thread; the connection thread counts it. */
void serve_gen_job_error(Job *j, int status, const char *msg, int keep_alive);
/* g's choice of the reply: streamed, its rest and finish chunk; else its JSON in the job. */
void serve_gen_reply(Gen *g, const char *finish);
/* After the job's last choice: the usage chunk and [DONE], or the whole reply. */
void serve_gen_reply_end(Gen *g, long prompt, long gen, long cached);
/* A stream's head and its first (empty) chunk, once the prompt is in. */
void serve_gen_stream_head(Gen *g);

/* ---- serve_anthropic_out.c: a /v1/messages reply (ServeReq.api) ---- */
/* The stream's head, message_start and a ping (once); later calls: a ping every 5 s. */
void serve_anth_head(Gen *g);
/* Streams text[0..n) of channel ch (0 thinking, 1 text) into its content block. */
void serve_anth_delta(Gen *g, int ch, const char *text, size_t n);
/* Streams the completed tool calls from `from` on as tool_use blocks; returns how many. */
int serve_anth_tools(Gen *g, int from);
/* The end of g's reply: streamed, the open block's stop, message_delta and message_stop;
 * else the message's JSON, kept in the job for serve_anth_end. finish: OpenAI's. */
void serve_anth_reply(Gen *g, const char *finish);
/* A stream under way failed (g->err): an error event (api_error) ends it. */
void serve_anth_fail(Gen *g);
/* After the last choice: the stream's end, or the whole message with its usage. */
void serve_anth_end(Gen *g, long prompt, long gen, long cached);

/* ---- serve_responses_out.c: a /v1/responses reply (ServeReq.api 2), the same roles ---- */
void serve_resp_head(Gen *g);
void serve_resp_delta(Gen *g, int ch, const char *text, size_t n);
int serve_resp_tools(Gen *g, int from);
void serve_resp_reply(Gen *g, const char *finish);
void serve_resp_fail(Gen *g);
void serve_resp_end(Gen *g, long prompt, long gen, long cached);
#endif
