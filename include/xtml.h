/* xtml.h — K3's XTML chat format (docs/TOKENIZER.md §6-§7): the
 * renderer (messages -> segments -> ids) and the completion parser (ids -> channels).
 *
 * Rendering follows encoding_k3.build_chat_segments for text-only chat:
 *   [effort message if thinking and effort] + messages + [generation prompt]
 * Each segment is BPE'd on its own: markup (<|open|> <|sep|> <|close|> <|end_of_msg|>)
 * with special tokens on, text with special tokens off; an attribute is four text
 * segments (" key", "=\"", escaped value, "\""); empty segments are skipped; no BOS.
 * Special ids come from the tokenizer (its added_tokens_decoder names), never from
 * constants, so a small test vocabulary works the same.
 *
 * The parser is driven by control ids only. It starts inside the think channel (or the
 * response channel with thinking off) and follows
 *   REASONING <|close|>think<|sep|> <|open|>response<|sep|> ANSWER
 *   <|close|>response<|sep|> <|close|>message<|sep|> END
 * A marker that is not the expected next one is an anomaly: inside a body its ids stay
 * body text (counted, never treated as structure); between channels they are dropped
 * (counted). END is <|end_of_msg|> or [EOS], wherever it comes. */
#ifndef K3_XTML_H
#define K3_XTML_H
#include <stddef.h>
#include <stdint.h>
#include "json.h"
#include "tok.h"

typedef struct {
    int32_t open, close, sep, eom, eos;   /* eos is -1 when the vocabulary has no [EOS] */
} XtmlIds;
/* Looks the control ids up by name; -1 with a message if one is missing. */
int xtml_ids(const Tok *t, XtmlIds *ids, char *err, size_t errlen);

/* Parser end states (also where a recorded assistant turn stopped). */
enum { XP_THINK, XP_BETWEEN, XP_RESPONSE, XP_AFTER_RESPONSE, XP_AFTER_MESSAGE, XP_DONE,
       /* the tools channel (xtml_parser_tools): between calls, inside a call between its
        * arguments, inside an argument or a json block, after <|close|>tools<|sep|> */
       XP_TOOLS, XP_CALL, XP_ARG, XP_JSON, XP_AFTER_TOOLS };

typedef struct {
    const char *role;          /* "system" | "user" | "assistant" */
    const char *content;       /* may be NULL = "" */
    const char *reasoning;     /* assistant only; NULL or whitespace-only = none */
    /* Optional token-exact record of an assistant turn generated in this session: the
     * ids the model produced after the generation prompt (stop id excluded), the
     * thinking mode it was generated in and the parser state it ended in. Used instead
     * of the text when XtmlOpts.exact and thinking matches (see docs/CHAT.md). */
    const int32_t *gen_ids;
    int n_gen, gen_thinking, gen_state;
} XtmlMsg;

/* One entry of an assistant's tool_calls, as a client sends it back. */
typedef struct {
    const char *id;            /* tool_calls[].id, NULL when absent */
    const char *name;          /* function.name */
    const char *arguments;     /* function.arguments: a JSON object's text; NULL or blank:
                                  no arguments; text that is not JSON: a json block */
} XtmlToolCall;

/* What a message has beyond XtmlMsg (the server's requests; the REPL has none of it). */
typedef struct {
    const char *name;          /* name="" attribute of a user, system or assistant message */
    const XtmlToolCall *calls; int n_calls;   /* an assistant's tool_calls */
    const char *tool;          /* role "tool": the tool's name (NULL: the answered call's) */
    const char *tool_call_id;  /* role "tool": the id of the call it answers (or NULL) */
} XtmlMsgExt;

enum { XTC_AUTO, XTC_NONE, XTC_REQUIRED };   /* tool_choice: auto renders no message */

/* Tools (§6.4): the tool-declare message first, the tool_choice message after the
 * messages, tool_calls in assistant turns, role "tool" messages (index counted since the
 * last assistant message, runs re-sorted into call order by tool_call_id). */
typedef struct {
    const char *tools;         /* tool-declare JSON (xtml_pyjson(tools, 1, 1)); NULL: none */
    int tool_choice;           /* XTC_* */
    const XtmlMsgExt *ext;     /* one per message, or NULL */
} XtmlTools;

typedef struct {
    int thinking;              /* 1: effort message + think channels */
    const char *effort;        /* "low" | "high" | "max" | NULL (no effort message) */
    int gen_prompt;            /* append the generation prompt */
    int exact;                 /* use XtmlMsg.gen_ids records when present */
} XtmlOpts;

typedef struct {
    char *text; size_t len;    /* text or markup */
    int special;               /* 1 markup (specials on), 0 text, 2 pre-encoded ids */
    const int32_t *ids; int n_ids;
} XtmlSeg;
typedef struct { XtmlSeg *v; int n, cap; } XtmlSegs;

/* JSON text as Python's json.dumps(j, ensure_ascii=False) writes it: compact (separators
 * "," ":") or not (", " ": "), keys deep-sorted or in document order. malloc'd; NULL when
 * out of memory. (xtml_json.c) */
char *xtml_pyjson(const Json *j, int compact, int sort);

/* 1 when effort is one of low, high, max. */
int xtml_effort_ok(const char *effort);
/* Builds the segment list. Returns 0, or -1 (bad role/effort, out of memory) with err. */
int xtml_segments(const XtmlMsg *msgs, int n, const XtmlOpts *o, XtmlSegs *out,
                  char *err, size_t errlen);
/* The same with tools (t may be NULL); -1 also for a tool message whose tool has no name
 * or tool-call arguments that are JSON but not an object. */
int xtml_segments_tools(const XtmlMsg *msgs, int n, const XtmlOpts *o, const XtmlTools *t,
                        XtmlSegs *out, char *err, size_t errlen);
void xtml_segs_free(XtmlSegs *s);
/* Concatenated string (pre-encoded ids decoded through t). malloc'd, NUL-terminated. */
char *xtml_segs_string(const XtmlSegs *s, const Tok *t, size_t *len);
/* Encodes segment by segment. malloc'd ids in *ids, count in *n; -1 when out of memory. */
int xtml_segs_encode(const XtmlSegs *s, const Tok *t, int32_t **ids, size_t *n);
/* Both steps at once. */
int xtml_render_ids(const Tok *t, const XtmlMsg *msgs, int n, const XtmlOpts *o,
                    int32_t **ids, size_t *nids, char *err, size_t errlen);
int xtml_render_ids_tools(const Tok *t, const XtmlMsg *msgs, int n, const XtmlOpts *o,
                          const XtmlTools *tl, int32_t **ids, size_t *nids, char *err,
                          size_t errlen);

/* ---- completion parser ---- */
enum { XE_THINK = 1, XE_RESPONSE, XE_CHANNEL, XE_ANOMALY, XE_END, XE_TOOL };
typedef struct {
    int kind;                  /* XE_THINK/XE_RESPONSE: body ids; XE_CHANNEL: state changed;
                                  XE_ANOMALY: ids not taken as structure; XE_END */
    const int32_t *ids; int n;
} XtmlEvent;

#define XTML_MAX_MARKER 16     /* name ids after OPEN/CLOSE before giving up on a marker */
#define XTML_MAX_ATTR_MARKER 512   /* the same for a call or argument marker (attributes) */

/* A tool call the model wrote: <|open|>call tool="NAME" index="I"<|sep|> then per argument
 * <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|> (or one
 * <|open|>json type="object"<|sep|>RAW<|close|>json<|sep|>), <|close|>call<|sep|>. */
typedef struct {
    char *key, *type;          /* key NULL: a json block */
    int32_t *ids; size_t n, cap;   /* the value's body ids */
} XtmlArg;
typedef struct {
    char *name;
    int complete;              /* its <|close|>call<|sep|> came */
    XtmlArg *args; int n_args, cap_args;
} XtmlCall;

typedef struct {
    const Tok *tok;
    XtmlIds ids;
    int state, thinking, tools;
    int32_t pend[XTML_MAX_ATTR_MARKER + 2]; int npend;   /* pending marker ids */
    int32_t out[XTML_MAX_ATTR_MARKER + 2];                /* event payload */
    int anomalies, end_id;
    /* what the turn says, as ids per channel (body ids, anomalies included) */
    int32_t *think_ids, *resp_ids; size_t n_think, n_resp, cap_think, cap_resp;
    XtmlCall *calls; int n_calls, cap_calls;             /* with tools on */
} XtmlParser;

void xtml_parser_init(XtmlParser *p, const Tok *t, const XtmlIds *ids, int thinking);
/* Feeds one id; fills up to 2 events (returns how many, -1 when out of memory). */
int xtml_parser_put(XtmlParser *p, int32_t id, XtmlEvent ev[2]);
/* End of a truncated turn: a pending partial marker is dropped (returns its length). */
int xtml_parser_finish(XtmlParser *p);
void xtml_parser_free(XtmlParser *p);
/* Decoded bodies (malloc'd, NUL-terminated). */
char *xtml_parser_reasoning(const XtmlParser *p);
char *xtml_parser_content(const XtmlParser *p);
/* Also parse the tools channel after the response (the REPL does not: there the tools
 * channel stays an anomaly). Call after xtml_parser_init. */
void xtml_parser_tools(XtmlParser *p);
/* A call's arguments as the JSON object text a client gets in function.arguments:
 * {"K": VALUE, ...} in the model's order, a string argument quoted, another type's
 * text as written when it is JSON (else quoted); a json block's text as written.
 * malloc'd; NULL when out of memory. */
char *xtml_call_arguments(const XtmlParser *p, const XtmlCall *c);
#endif
