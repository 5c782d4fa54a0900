/* serve.h — k3 serve internals (src/serve/serve*.c; docs/SERVE.md).
 * serve_http.c: HTTP/1.1 request parsing on a buffer, socket reads with deadlines,
 * responses and chunked bodies. serve_req.c: the request JSON validated into a ServeReq.
 * serve_gen.c: one request on the engine thread: kept states, prefix reuse, generation,
 * replies. serve_step.c: the engine loop, every request in flight in one step.
 * serve_disk.c: --state-dir files. serve_tools.c: tools and tool calls.
 * serve.c: flags, listener, connection threads, routing, the queue, metrics. */
#ifndef K3_SERVE_H
#define K3_SERVE_H
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "engine.h"
#include "image_in.h"
#include "json.h"
#include "json_gram.h"
#include "grammar.h"
#include "logprob.h"
#include "strbuf.h"
#include "scheduler.h"
#include "sampler.h"
#include "xtml.h"

/* ---- serve_http.c ---- */
#define HTTP_MAX_HEADER 16384                /* request line + headers */
#define HTTP_MAX_BODY ((size_t)4 << 20)      /* Content-Length above: 413 */

typedef struct {
    char method[16], path[512];
    int minor;                               /* HTTP/1.minor */
    size_t content_length; int has_length;
    int keep_alive, expect_continue;
    char auth[512];                          /* Authorization value, "" when absent */
    char xkey[512];                          /* x-api-key value (Anthropic's), "" when absent */
    size_t header_len;                       /* bytes up to and including CRLF CRLF */
} HttpReq;

/* Parses the request head in buf[0..n). Returns header_len (> 0) when complete, 0 when
 * more bytes are needed, or -STATUS (400, 413, 431, 501, 505) with the reason in err. */
int http_parse(const char *buf, size_t n, size_t max_body, HttpReq *r, char *err,
               size_t errlen);
const char *http_reason(int status);
/* send() all of b (MSG_NOSIGNAL); 0, or -1 when the client is gone. */
int http_send(int fd, const char *b, size_t n);
/* A whole response with Content-Length. */
int http_respond(int fd, int status, const char *ctype, const char *body, size_t n,
                 int keep_alive);
/* OpenAI-style {"error": {"message","type","code"}} (http_anthropic 2, /v1/responses: with
 * "param" and "code" null); while this thread's http_anthropic is 1
 * (a /v1/messages request), Anthropic's {"type": "error", "error": {"type","message"}}. */
int http_error(int fd, int status, const char *msg, int keep_alive);
extern __thread int http_anthropic;
/* http_error in the shape of a request's API (ServeReq.api), whatever this thread's flag
 * (the engine thread answers requests of both APIs). */
int http_error_api(int fd, int status, const char *msg, int keep_alive, int anthropic);
/* Chunked body: the head (Transfer-Encoding: chunked), then chunks, then the end. */
int http_chunked_head(int fd, const char *ctype, int keep_alive);
int http_chunk(int fd, const char *b, size_t n);
int http_chunk_end(int fd);
/* 1 when the peer has closed its side (or the socket failed), 0 otherwise; never blocks. */
int http_peer_gone(int fd);

/* Header lines added to every response (CORS, serve_extra.c), "" by default; the status of
 * the last response this thread sent (the request log). */
extern const char *http_extra_headers;
extern __thread int http_last_status;

/* ---- serve_web.c: the chat page (--no-webui: off) ---- */
/* Answers GET (or HEAD) of one of the page's files: 1 done, 0 not a page path, -1 gone. */
int serve_web(int fd, const char *method, const char *path, int keep_alive);

/* ---- serve_req.c ---- */
enum { REQ_CHAT = 1, REQ_COMPLETION = 2 };
#define K3_MAX_N 16                          /* n, the choices per prompt */
#define K3_MAX_CHOICES 64                    /* choices of a request: prompts x n */
#define REQ_MAX_STOP 4

/* One prompt of /v1/completions: a string, or token ids (checked against the vocabulary
 * once the engine takes the request). */
typedef struct {
    const char *text; size_t len;            /* the string (points into the body), or NULL */
    int32_t *ids; size_t n_ids;              /* its token ids (owned; a string's are made
                                              * when the engine takes the request) */
    char *dec;                               /* echo of token ids: their text (owned) */
} ServePrompt;

/* /v1/responses: what its conversation keeping needs (serve_responses*.c). */
typedef struct {
    int store;                               /* keep the conversation for a later turn */
    uint64_t prev;                           /* previous_response_id's number, 0: none */
    char *hist;                              /* store: the chat messages before the reply */
} ServeResp;

typedef struct {
    int kind;
    Json *doc;                               /* msgs and prompt point into it */
    XtmlMsg *msgs; int n_msgs;
    char **parts;  int n_parts;              /* joined content arrays (owned) */
    ServePrompt *prompts; int n_prompts;     /* REQ_COMPLETION: 1..K3_MAX_CHOICES (owned) */
    int thinking; char effort[8];
    SamplerParams sp; uint64_t seed; int seed_set;
    int max_tokens;                          /* 0: the server's cap */
    int no_tokens;                           /* completions' max_tokens 0 (prompt scoring) */
    int logprobs, top_logprobs, echo;        /* serve_logprob.c */
    int n_choices;                           /* n: choices per prompt, 1..K3_MAX_N */
    JgSchema *jg;                            /* response_format JSON mode, NULL: none */
    GrGrammar *gr;                           /* 'grammar': GBNF (grammar.h), NULL: none */
    const char *stop[REQ_MAX_STOP]; size_t stop_len[REQ_MAX_STOP]; int n_stop;
    int stream, include_usage;
    /* tools (serve_tools.c) */
    XtmlMsgExt *ext;                         /* one per message: names, tool_calls (owned) */
    char *tools_json;                        /* the tool declaration's JSON, NULL: none */
    int tool_choice;                         /* XTC_* */
    int parse_tools;                         /* the reply's tools channel becomes tool_calls */
    int n_strict;                            /* tools with strict: true: their names (into */
    const char **strict_name;                /* doc) and compiled parameters, which a call's */
    JgSchema **strict_jg;                    /* arguments then follow (serve_gen.c) */
    int api;                                 /* 1: /v1/messages, Anthropic's shapes
                                              * (serve_anthropic*.c); 2: /v1/responses
                                              * (serve_responses*.c); 0: OpenAI's chat */
    ServeResp resp;                          /* /v1/responses: store, previous_response_id */
    uint8_t **img; size_t *img_n; int n_img; /* image_url data: URLs' bytes, in order (owned);
                                              * the user content holds their placeholders */
} ServeReq;

/* The checks every API's request validation shares (serve_req.c): a string without NUL
 * bytes (the renderer takes C strings; NULL: not one); an object's "type" string, else
 * NULL; the first key of o not in keys (NULL-ended), else NULL; and that check as a 400
 * "WHAT: unknown field 'KEY'" in err. */
int serve_str_ok(const Json *j);
const char *serve_type_of(const Json *o);
const char *serve_unknown_key(const Json *o, const char *const *keys);
int serve_only_keys(const Json *o, const char *const *keys, const char *what, char *err,
                    size_t errlen);
/* A number field d.key checked (lo..hi inclusive, an integer if asked) and copied to o as
 * ', "AS": N'; absent or null: nothing. 0, or 400 with err. */
int serve_number(Buf *o, const Json *d, const char *key, const char *as, double lo, double hi,
                 int integer, char *err, size_t errlen);
/* Validates body[0..n) as a kind request. 0, or 400 with the message in err. */
int serve_req_parse(const char *body, size_t n, int kind, ServeReq *r, char *err,
                    size_t errlen);
void serve_req_free(ServeReq *r);
/* Once the engine takes a completion request: every prompt as ids (a string tokenized with
 * special tokens on; ids checked against t's vocabulary, an echo's text decoded from them),
 * each with room for a reply in ctx positions. 0, or the status (400, 500) with err. */
int serve_req_prompt_ids(ServeReq *r, const Tok *t, int ctx, char *err, size_t errlen);
/* The choices of a request: its prompts (1 for chat) times n; choice i is prompt i / n. */
int serve_req_choices(const ServeReq *r);
/* The thinking effort for an OpenAI reasoning_effort value: "low" | "high" | "max", ""
 * for thinking off, NULL when v is not a known value. */
const char *serve_effort(const char *v);

/* ---- serve_anthropic.c: /v1/messages ---- */
/* Validates an Anthropic Messages body into r: translated into the equivalent chat
 * request (the same prompt ids), r->api set. count: /v1/messages/count_tokens (no
 * max_tokens needed). 0, or 400 with err. */
int serve_anth_parse(const char *body, size_t n, int count, ServeReq *r, char *err,
                     size_t errlen);

/* ---- serve_image.c: an image block of /v1/messages or part of /v1/responses ---- */
#define SERVE_MAX_IMAGES 16                  /* images in one request */
/* Checks Anthropic's image block b (named w in refusals: its base64 decoded, its
 * media_type the bytes' format, url/file sources refused) or a Responses input_image part
 * p, and appends the chat image_url part to o (*np parts there, counted); *n_img counts
 * the request's images. 0, or 400 with err. */
int serve_anth_image(Buf *o, int *np, const Json *b, const char *w, int *n_img, char *err,
                     size_t errlen);
int serve_resp_image(Buf *o, int *np, const Json *p, const char *w, int *n_img, char *err,
                     size_t errlen);

/* ---- serve_image_file.c: an image URL's bytes (docs/SERVE.md "Images") ---- */
/* --image-dir DIR: requests may then name image files inside DIR (realpath'd here; NULL:
 * none again). 0, or -1 with err when DIR is not a folder. serve_image_dir: DIR resolved,
 * NULL when unset. */
int serve_image_dir_set(const char *dir, char *err, size_t errlen);
const char *serve_image_dir(void);
/* Image URL u[0..n) (NUL-ended, no NUL inside) as bytes: a data: URL's, or with
 * --image-dir a file's, named by an absolute path or a file:// URL (*is_file set), read
 * only when it is a regular file inside DIR within K3_IMAGE_MAX_BYTES; an http(s) URL is
 * refused (nothing is fetched). *out malloc'd. 0, or -1 with the reason in err. */
int serve_image_src(const char *u, size_t n, uint8_t **out, size_t *outn, int *is_file,
                    char *err, size_t errlen);

/* ---- serve_responses.c: /v1/responses ---- */
/* Validates an OpenAI Responses body into r: translated into the equivalent chat request,
 * r->api 2. 0, or 400 (404: an unknown previous_response_id) with err. */
int serve_resp_parse(const char *body, size_t n, ServeReq *r, char *err, size_t errlen);
/* Keeps response id's conversation msgs (chat messages, comma-separated; taken, freed
 * later) for a previous_response_id; the oldest are dropped past the bound. */
void serve_resp_keep(uint64_t id, char *msgs);

/* ---- serve_tools.c ---- */
/* `tools`, `tool_choice`, `parallel_tool_calls` of body d into r. 0, or 400 with err. */
int serve_req_tools(ServeReq *r, const Json *d, char *err, size_t errlen);
/* The compiled parameters of strict tool `name`, NULL when it is not one. */
const JgSchema *serve_strict_schema(const ServeReq *r, const char *name);
void serve_req_tools_free(ServeReq *r);
/* messages[i].tool_calls into r->ext[i]. 0, or 400 with err. */
int serve_req_tool_calls(ServeReq *r, int i, const Json *tc, char *err, size_t errlen);
/* The completed calls from `from` on as a JSON array of OpenAI tool_calls (with "index"
 * when delta); returns how many. */
int serve_tool_calls_json(Buf *b, const XtmlParser *p, uint64_t job, int from, int delta);

/* ---- serve_logprob.c: logprobs of the raw logits in the replies ---- */
#define LP_NULL 2                            /* an entry without a logprob (echo's first) */
typedef struct {
    K3Logprob *e; signed char *ch;           /* per token: its entry and channel (chat: 0
                                              * reasoning, 1 content, -1 neither) */
    size_t n, cap;
    size_t sent;                             /* entries a stream carried already */
} ServeLp;
/* Appends id's entry from row[0..V) with top alternatives (row NULL: no logprob). 0/-1. */
int serve_lp_push(ServeLp *l, const float *row, int V, int id, int top, int ch);
void serve_lp_free(ServeLp *l);
/* {"content": [...], "refusal": null} of the entries [from, to) of channel ch. */
void serve_lp_chat(Buf *b, const Tok *t, const ServeLp *l, size_t from, size_t to, int ch);
/* The legacy {"tokens", "token_ids", "token_logprobs", "top_logprobs", "text_offset"} of
 * entries [from[i], to[i]) of each list ls[0..nl); *off the text offset, advanced. */
void serve_lp_legacy(Buf *b, const Tok *t, const ServeLp *const *ls, const size_t *from,
                     const size_t *to, int nl, int top, size_t *off);

/* ---- serve_gen.c: one request; serve_step.c: the engine loop over them ---- */
/* --draft: a kept state's draft context (serve_draft.c), so a resumed request drafts at
 * once: per draft layer its latents [P][kv_lora] then k_pe [P][rope] (chat_state.c's
 * trailer layout), n floats, id the draft's identity; rows NULL: none. */
typedef struct { float *rows; size_t n; uint64_t id; } KeptDraft;

typedef struct Server Server;
typedef struct Gen Gen;
typedef struct Job {
    ServeReq req;
    int fd, keep_alive;
    int done, failed, status;                /* set by the engine thread (status: an error) */
    uint64_t id;
    long n_prompt, n_gen; double t_first;    /* for the request log (serve_gen.c) */
    /* its choices (n): one Gen each, choice 0 prefills for all (serve_gen.c) */
    Gen *gen[K3_MAX_CHOICES];
    int started, left;                       /* Gens begun, not yet ended */
    int head_sent, cut, gone;
    int interrupted;                         /* the server stopped it (the request log) */
    unsigned char lead_over[K3_MAX_CHOICES]; /* by prompt: its first choice has ended */
    uint64_t seed0; long created, cached;
    long drafted, accepted;                  /* --draft: its choices' drafts, kept */
    char *choice[K3_MAX_CHOICES];            /* the finished choices' JSON (not streamed) */
    char err[1024];                          /* a choice failed: the 500's message */
    pthread_cond_t cv;
    struct Job *next;
} Job;

/* Starts choice `choice` of job j: renders its prompt, resumes the longest kept prefix (the
 * rest is left to serve_gen_prefill; choices after the first wait for the first's prompt
 * state instead), sends the stream's head. NULL on an error: the job is answered when it
 * was its first choice (else the error is the job's reply when its last choice ends). */
Gen *serve_gen_begin(Server *s, Job *j, int choice);
/* Whether g still has prompt ids to feed (then serve_gen_prefill, not serve_gen_token). */
int serve_gen_prefilling(const Gen *g);
/* Before a step while g's prompt goes in (its scheduler slot takes the rest of it in the
 * room the steps leave): 0, or -1 when its client went away (then end it). */
int serve_gen_prefill(Gen *g);
/* One token of g: sampled from its logits row and handled (streamed, stop strings, tool
 * calls). 1 when it must be fed (its slot holds it for the next step); 0 when g is over. */
int serve_gen_token(Server *s, Gen *g);
/* After the step: g's share of it was T ids and row is the logits of the last (of all
 * of them for a verify pass; --draft: taps, its rows of the step's taps). */
void serve_gen_fed(Gen *g, int T, const float *row, const float *taps);
/* ---- serve_draft.c: --draft DIR, per request inside the steps (docs/DRAFT.md) ---- */
/* The loops for the scheduler's slots (s->dl). 0, or the exit code with err. */
int serve_draft_open(Server *s, char *err, size_t errlen);
/* g starts from position 0 in slot q: its draft context follows its state (else none). */
void serve_draft_begin(Gen *g);
/* g's token id is fed next: as the anchor of a block when the step has room. */
void serve_draft_feed(Gen *g, int id);
/* After the step: a prompt's rows, a plain step's or a verify's (the tokens it drew wait
 * in g's pending list). 1 when it was a verify pass (g->logits holds the first token's
 * row), 0 otherwise, -1 with g->err. */
int serve_draft_fed(Gen *g, int T, const float *row, const float *taps, int prefill);
/* The next token a verify pass drew (its row into g->logits), or -1: none left. */
int serve_draft_next(Gen *g);
/* Kept states: g's draft context for positions [0, P) copied ({0}: it holds fewer); the
 * server's draft's shape and identity (0 without --draft). */
KeptDraft serve_draft_copy(const Gen *g, size_t P);
int serve_draft_shape(const Server *s, int *layers, int *kv_lora, int *rope, uint64_t *id);
/* Ends g: its choice of the reply (or an error: fail_err, NULL when none), its kept
 * states, the metrics; frees g. 1 when it was its job's last choice (the job is answered). */
int serve_gen_end(Server *s, Gen *g, const char *fail_err);
Job *serve_gen_job(const Gen *g);
/* The server stops while g is under way: its reply ends as "interrupted" (k3_stop). */
void serve_gen_stopping(Gen *g);
/* The engine loop: takes queued jobs (up to --max-batch in flight) and runs their decode
 * steps together until *stop. */
void serve_engine_loop(Server *s, volatile sig_atomic_t *stop);
/* Frees every kept state (their --state-dir files stay for the next start). */
void serve_cache_free(Server *s);
/* Keeps st with fed[0..n) and logits (the last position's row, or NULL; all owned from now
 * on), its --state-dir file named file. */
void serve_keep_file(Server *s, void *st, int32_t *fed, size_t n, float *logits,
                     const char *file, KeptDraft *d);

/* ---- serve_disk.c: --state-dir ---- */
/* Writes the state holding fed[0..nfed) (and logits, the row of its last position, or
 * NULL) as FILE.state; file gets the name ("" when not written, with the reason on
 * stderr). 0 or -1. */
int serve_disk_save(Server *s, const int32_t *fed, size_t nfed, void *st, const float *logits,
                    const KeptDraft *d, char file[64]);
void serve_disk_forget(Server *s, const char *file);
/* Loads every state in --state-dir into the kept states. 0, or 2 (no such directory). */
int serve_disk_load(Server *s);

/* ---- serve_extra.c: CORS, the request log, /tokenize and /detokenize ---- */
typedef struct {
    int status;                              /* 0: the last response this thread sent */
    int interrupted;                         /* the server stopped while it was under way */
    long prompt, gen;                        /* tokens */
    double t_first;                          /* when the first token was sampled, or 0 */
    int gone;                                /* the client went away */
} ServeLog;
#define SERVE_PASS 1000                      /* serve_extra_route: not a path of its own */
/* --cors V: "*" (the default), "off", or one origin. 0, or -1 with err. */
int serve_cors_set(const char *v, char *err, size_t errlen);
/* OPTIONS (the CORS preflight), POST /tokenize, /detokenize: answered, returning what
 * route returns; SERVE_PASS for any other request. */
int serve_extra_route(Server *s, int fd, const HttpReq *h, const char *path, const char *body,
                      int ka);
ServeLog *serve_log_now(void);               /* this thread's request, for the log line */
/* One line on stderr for the request h (NULL: one that did not parse) begun at t0. */
void serve_log_request(const HttpReq *h, double t0);
int serve_fail(int fd, int status, const char *msg, int keep_alive);   /* serve.c */
/* POST /v1/messages/count_tokens (serve_anthropic.c): {"input_tokens": N}, the ids of the
 * request's rendered prompt. */
int serve_anth_count(Server *s, int fd, const char *body, size_t n, int ka);

/* Metrics, updated under Server.mu. */
typedef struct {
    long requests, errors[6];                /* errors by class: 400 401 404 405 413 other */
    long prompt_tokens, completion_tokens, prefilled, cached;
    long cache_hits, cache_misses, disconnects;
    long steps, step_rows, active;           /* steps, sequences in them, in flight */
    long mixed_steps;                        /* steps with prompt ids beside decode tokens */
    long kept_n, kept_bytes;                 /* copied from the engine thread after each job */
    double t_prefill, t_decode;
    double prefill_flops;                    /* the FLOP model's (roofline.h), prefills done */
    double fma_gflops, read_gbps;            /* the machine (roofline.h), 0: unknown */
    long pf_left, pf_done;                   /* the prefill under way: prompt tokens to go,
                                              * done (serve_step.c, every 0.1 s of a step) */
    long draft_blocks, drafted, accepted;    /* --draft: verify passes, drafts, kept */
} ServeStats;

typedef struct Kept {
    int32_t *fed; size_t nfed;
    KeptDraft draft;                         /* --draft: its context for nfed positions */
    void *st;                                /* K3State */
    float *logits;                           /* [vocab]: the last position's row, or NULL */
    size_t bytes;
    uint64_t used;                           /* LRU clock */
    char file[64];                           /* --state-dir file name, "" when not saved */
    struct Kept *next;
} Kept;

struct Server {
    /* options */
    const char *model_dir, *config, *tok_dir, *host, *api_key, *state_dir, *kernels;
    const char *cors;                        /* --cors: "*", "off" or an origin */
    int port, threads, ctx, max_tokens, max_conns, max_queue, timeout_s, max_batch;
    int batch_auto;                          /* max_batch is the plan's (no --max-batch) */
    int no_webui;                            /* --no-webui: no chat page at GET / */
    int host_any;                            /* --host is 0.0.0.0 or :: (every interface) */
    double cache_gb;
    K3MemOpts mem;
    /* engine (the engine thread only, once ready) */
    K3Engine eng;
    K3Sched *sch;                            /* the slots of the requests in flight */
    int state_file;                          /* --state-file: K3_STATES_*, -1 auto */
    const char *state_file_dir;
    Tok *tok;
    XtmlIds ids;
    char model_id[256];
    Kept *kept; size_t kept_bytes; uint64_t clock;
    int32_t *test_reply; size_t n_test_reply;   /* K3_SERVE_TEST_REPLY (tests only) */
    int test_hold;                           /* K3_SERVE_TEST_HOLD (tests only), 0: off */
    const char *draft_dir;                   /* --draft DIR: a DSpark model drafts */
    int draft_block, draft_fixed;            /* --draft-block N (fixed), else 7 chosen */
    struct K3DraftLoop **dl;                 /* one loop a scheduler slot, dl[0] the tap */
    volatile sig_atomic_t *stop;             /* set when the server is stopping */
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t qcv;
    Job *qhead, *qtail;
    int qlen, conns, ready;
    int busy;                                /* requests being answered, not yet logged */
    int closed;                              /* stopping: no request is queued any more */
    pthread_cond_t idle;                     /* busy fell to 0 */
    ServeStats st;
    uint64_t next_id;
};
#endif
