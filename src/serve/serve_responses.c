/* serve_responses.c — POST /v1/responses (OpenAI's Responses API, docs/SERVE.md): the body
 * validated with the API's own field names, then written as the equivalent
 * /v1/chat/completions body (serve_req.c), so a response renders to the very ids of its
 * chat twin and runs on the chat path. instructions -> a system message; input items:
 * messages -> messages, function_call / reasoning -> the assistant message's tool_calls /
 * reasoning_content, function_call_output -> a "tool" message; reasoning.effort ->
 * reasoning_effort. With store true a response's conversation (as chat messages) is kept
 * in memory, bounded, for a later previous_response_id. Replies: serve_responses_out.c. */
#include "serve.h"
#include "serve_gen.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 400; } while (0)

static const char *const TOP_KEYS[] = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "max_output_tokens", "temperature", "top_p", "reasoning", "stream", "store",
    "previous_response_id", "metadata", "user", "text", "truncation", "service_tier",
    "include", "background", NULL };

/* Responses' refusal also covers the fields it knows but k3 does not support */
static int only(const Json *o, const char *const *keys, const char *what, char *err,
                size_t errlen) {
    const char *k = serve_unknown_key(o, keys);
    if (k) BAD("%s: unknown or unsupported field '%.60s'", what, k);
    return 0;
}

static int given(const Json *j) { return j && j->type != JSON_NULL; }

/* ---- the kept conversations (store: true) ---- */
#define KEEP_MAX 64                        /* responses kept, the oldest dropped first */
#define KEEP_BYTES (64u << 20)             /* and their messages' bytes in all */
static struct { uint64_t id; char *msgs; size_t n; } kept[KEEP_MAX];
static int n_kept;
static size_t kept_bytes;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

void serve_resp_keep(uint64_t id, char *msgs) {
    const size_t n = strlen(msgs);
    pthread_mutex_lock(&kept_mu);
    while (n_kept && (n_kept == KEEP_MAX || kept_bytes + n > KEEP_BYTES)) {
        kept_bytes -= kept[0].n;
        free(kept[0].msgs);
        memmove(kept, kept + 1, (size_t)--n_kept * sizeof kept[0]);
    }
    if (n <= KEEP_BYTES) {
        kept[n_kept].id = id; kept[n_kept].msgs = msgs; kept[n_kept].n = n;
        n_kept++; kept_bytes += n;
    } else free(msgs);
    pthread_mutex_unlock(&kept_mu);
}

/* A copy of the kept messages of response id, or NULL. */
static char *kept_msgs(uint64_t id) {
    char *m = NULL;
    pthread_mutex_lock(&kept_mu);
    for (int i = 0; i < n_kept && !m; i++)
        if (kept[i].id == id && (m = malloc(kept[i].n + 1))) memcpy(m, kept[i].msgs, kept[i].n + 1);
    pthread_mutex_unlock(&kept_mu);
    return m;
}

/* ---- input ---- */

/* The assistant message being gathered from consecutive assistant-side items. */
typedef struct { Buf text, think, calls; int nt, nth, nc, open; } Asst;

static void asst_flush(Buf *o, Asst *a, int *first) {
    if (!a->open) return;
    buf_str(o, *first ? "{\"role\": \"assistant\", \"content\": "
                      : ", {\"role\": \"assistant\", \"content\": ");
    *first = 0;
    if (a->nt) { buf_str(o, "["); buf_add(o, a->text.b, a->text.n); buf_str(o, "]"); }
    else buf_str(o, "null");
    if (a->nth) { buf_str(o, ", \"reasoning_content\": "); buf_json(o, a->think.b, a->think.n); }
    if (a->nc) { buf_str(o, ", \"tool_calls\": ["); buf_add(o, a->calls.b, a->calls.n);
                 buf_str(o, "]"); }
    buf_str(o, "}");
    if (a->text.oom || a->think.oom || a->calls.oom) o->oom = 1;
    buf_free(&a->text); buf_free(&a->think); buf_free(&a->calls);
    memset(a, 0, sizeof *a);
}

/* Content parts (input_text / output_text; input_image where n_img is given: a user
 * message's) as chat parts into o. */
static int parts(Buf *o, int *np, const Json *c, const char *w, int *n_img, char *err,
                 size_t errlen) {
    /* parsed: the openai client's stream helper adds it to the items it hands back */
    static const char *const KEYS[] = { "type", "text", "annotations", "logprobs", "parsed",
                                        NULL };
    for (size_t k = 0; k < c->len; k++) {
        const Json *p = c->items[k], *t = json_get(p, "text");
        const char *ty = serve_type_of(p);
        if (p->type != JSON_OBJECT || !ty) BAD("%s.content[%zu] must be a content part", w, k);
        char w2[96];
        snprintf(w2, sizeof w2, "%s.content[%zu]", w, k);
        if (!strcmp(ty, "input_image")) {
            if (!n_img) BAD("%s: images are taken in user messages only", w2);
            if (serve_resp_image(o, np, p, w2, n_img, err, errlen)) return 400;
            continue;
        }
        if (strcmp(ty, "input_text") && strcmp(ty, "output_text"))
            BAD("%s: type '%.40s' is not supported (k3 takes input_text, output_text and, "
                "in a user message, input_image)", w2, ty);
        if (only(p, KEYS, w2, err, errlen)) return 400;
        if (!serve_str_ok(t)) BAD("%s.text must be a string", w2);
        buf_str(o, (*np)++ ? ", {\"type\": \"text\", \"text\": " : "{\"type\": \"text\", "
                "\"text\": ");
        buf_json(o, t->str, t->len);
        buf_str(o, "}");
    }
    return 0;
}

static int message(Buf *o, Asst *a, int *first, const Json *x, const char *w, int *n_img,
                   char *err, size_t errlen) {
    static const char *const KEYS[] = { "type", "role", "content", "id", "status", NULL };
    const Json *ro = json_get(x, "role"), *c = json_get(x, "content");
    if (only(x, KEYS, w, err, errlen)) return 400;
    const char *r = serve_str_ok(ro) ? ro->str : "";
    const int asst = !strcmp(r, "assistant");
    if (!asst && strcmp(r, "user") && strcmp(r, "system") && strcmp(r, "developer"))
        BAD("%s.role must be user, assistant, system or developer", w);
    if (!serve_str_ok(c) && (!c || c->type != JSON_ARRAY))
        BAD("%s.content must be a string or an array of content parts", w);
    if (asst) {
        a->open = 1;
        if (serve_str_ok(c)) {
            buf_str(&a->text, a->nt++ ? ", {\"type\": \"text\", \"text\": "
                                      : "{\"type\": \"text\", \"text\": ");
            buf_json(&a->text, c->str, c->len);
            buf_str(&a->text, "}");
            return 0;
        }
        return parts(&a->text, &a->nt, c, w, NULL, err, errlen);
    }
    asst_flush(o, a, first);
    buf_str(o, *first ? "{\"role\": " : ", {\"role\": ");
    *first = 0;
    buf_json(o, r, strlen(r));
    buf_str(o, ", \"content\": ");
    if (serve_str_ok(c)) buf_json(o, c->str, c->len);
    else {
        int np = 0;
        buf_str(o, "[");
        if (parts(o, &np, c, w, strcmp(r, "user") ? NULL : n_img, err, errlen)) return 400;
        buf_str(o, "]");
        if (!np) BAD("%s.content must not be empty", w);
    }
    buf_str(o, "}");
    return 0;
}

static int item(Buf *o, Asst *a, int *first, const Json *x, const char *w, int *n_img,
                char *err, size_t errlen) {
    static const char *const FC_KEYS[] = { "type", "call_id", "name", "arguments", "id",
                                           "status", "parsed_arguments", NULL };
    static const char *const FO_KEYS[] = { "type", "call_id", "output", "id", "status", NULL };
    static const char *const RS_KEYS[] = { "type", "id", "summary", "content",
                                           "encrypted_content", "status", NULL };
    if (x->type != JSON_OBJECT) BAD("%s must be an object", w);
    const char *ty = serve_type_of(x);
    if (!ty || !strcmp(ty, "message")) return message(o, a, first, x, w, n_img, err, errlen);
    if (!strcmp(ty, "function_call")) {
        const Json *id = json_get(x, "call_id"), *nm = json_get(x, "name"),
                   *ar = json_get(x, "arguments");
        if (only(x, FC_KEYS, w, err, errlen)) return 400;
        if (!serve_str_ok(id) || !serve_str_ok(nm) || !serve_str_ok(ar))
            BAD("%s: a function_call needs \"call_id\", \"name\" and \"arguments\" strings", w);
        a->open = 1;
        buf_str(&a->calls, a->nc++ ? ", {\"id\": " : "{\"id\": ");
        buf_json(&a->calls, id->str, id->len);
        buf_str(&a->calls, ", \"type\": \"function\", \"function\": {\"name\": ");
        buf_json(&a->calls, nm->str, nm->len);
        buf_str(&a->calls, ", \"arguments\": ");
        buf_json(&a->calls, ar->str, ar->len);
        buf_str(&a->calls, "}}");
        return 0;
    }
    if (!strcmp(ty, "reasoning")) {
        if (only(x, RS_KEYS, w, err, errlen)) return 400;
        const char *const arr[2] = { "summary", "content" };
        for (int s = 0; s < 2; s++) {
            const Json *l = json_get(x, arr[s]);
            if (!given(l)) continue;
            if (l->type != JSON_ARRAY) BAD("%s.%s must be an array", w, arr[s]);
            for (size_t k = 0; k < l->len; k++) {
                const Json *t = json_get(l->items[k], "text");
                if (l->items[k]->type != JSON_OBJECT || !serve_str_ok(t))
                    BAD("%s.%s[%zu] must be {\"type\": ..., \"text\": STRING}", w, arr[s], k);
                if (s == 1 || !given(json_get(x, "content"))) {   /* the full text if given */
                    buf_add(&a->think, t->str, t->len);
                    a->nth++;
                }
            }
        }
        a->open |= a->nth > 0;            /* (encrypted_content alone: nothing k3 can read) */
        return 0;
    }
    if (!strcmp(ty, "function_call_output")) {
        const Json *id = json_get(x, "call_id"), *out = json_get(x, "output");
        if (only(x, FO_KEYS, w, err, errlen)) return 400;
        if (!serve_str_ok(id)) BAD("%s.call_id must be a string", w);
        asst_flush(o, a, first);
        buf_str(o, *first ? "{\"role\": \"tool\", \"tool_call_id\": "
                          : ", {\"role\": \"tool\", \"tool_call_id\": ");
        *first = 0;
        buf_json(o, id->str, id->len);
        buf_str(o, ", \"content\": ");
        if (serve_str_ok(out)) buf_json(o, out->str, out->len);
        else if (out && out->type == JSON_ARRAY) {
            int np = 0;
            buf_str(o, "[");
            if (parts(o, &np, out, w, NULL, err, errlen)) return 400;
            buf_str(o, "]");
        } else BAD("%s.output must be a string or an array of input_text parts", w);
        buf_str(o, "}");
        return 0;
    }
    BAD("%s: item type '%.40s' is not supported (k3 takes message, function_call, "
        "function_call_output and reasoning items)", w, ty);
}

/* input into o: the chat messages (comma-separated, no brackets). */
static int input(Buf *o, const Json *d, int first, char *err, size_t errlen) {
    const Json *in = json_get(d, "input");
    if (!given(in)) BAD("'input' is required");
    if (serve_str_ok(in)) {
        buf_str(o, first ? "{\"role\": \"user\", \"content\": "
                         : ", {\"role\": \"user\", \"content\": ");
        buf_json(o, in->str, in->len);
        buf_str(o, "}");
        return 0;
    }
    if (in->type != JSON_ARRAY || !in->len)
        BAD("'input' must be a string or a non-empty array of items");
    if (in->len > 100000) BAD("'input' has over 100000 items");
    Asst a = { 0 };
    int n_img = 0;
    for (size_t i = 0; i < in->len; i++) {
        char w[48];
        snprintf(w, sizeof w, "input[%zu]", i);
        if (item(o, &a, &first, in->items[i], w, &n_img, err, errlen)) {
            buf_free(&a.text); buf_free(&a.think); buf_free(&a.calls);
            return 400;
        }
    }
    asst_flush(o, &a, &first);
    return 0;
}

/* tools (functions only), tool_choice, parallel_tool_calls. */
static int tools(Buf *o, const Json *d, char *err, size_t errlen) {
    static const char *const T_KEYS[] = { "type", "name", "description", "parameters",
                                          "strict", NULL };
    const Json *t = json_get(d, "tools"), *c = json_get(d, "tool_choice"), *j;
    int n = 0;
    if (given(t)) {
        if (t->type != JSON_ARRAY) BAD("'tools' must be an array");
        n = (int)t->len;
        if (n) buf_str(o, ", \"tools\": [");
        for (int i = 0; i < n; i++) {
            const Json *x = t->items[i], *nm = json_get(x, "name"), *p = json_get(x, "parameters");
            const char *ty = serve_type_of(x);
            char w[32];
            snprintf(w, sizeof w, "tools[%d]", i);
            if (x->type != JSON_OBJECT || !ty) BAD("%s must be an object with a \"type\"", w);
            if (strcmp(ty, "function"))
                BAD("%s: type '%.40s': built-in tools are not supported (k3 takes \"type\": "
                    "\"function\" tools)", w, ty);
            if (only(x, T_KEYS, w, err, errlen)) return 400;
            if (!serve_str_ok(nm)) BAD("%s.name must be a string", w);
            if (given(p) && p->type != JSON_OBJECT)
                BAD("%s.parameters must be a JSON Schema object", w);
            if ((j = json_get(x, "strict")) && j->type != JSON_BOOL && j->type != JSON_NULL)
                BAD("%s.strict must be true or false", w);
            buf_str(o, i ? ", {\"type\": \"function\", \"function\": {\"name\": "
                         : "{\"type\": \"function\", \"function\": {\"name\": ");
            buf_json(o, nm->str, nm->len);
            if (given(j = json_get(x, "description"))) {
                if (!serve_str_ok(j)) BAD("%s.description must be a string", w);
                buf_str(o, ", \"description\": ");
                buf_json(o, j->str, j->len);
            }
            if (given(p)) {
                char *sc = xtml_pyjson(p, 0, 0);
                if (!sc) BAD("out of memory");
                buf_str(o, ", \"parameters\": ");
                buf_str(o, sc);
                free(sc);
            }
            if ((j = json_get(x, "strict")) && j->type == JSON_BOOL && j->boolean)
                buf_str(o, ", \"strict\": true");   /* enforced only when asked (SERVE.md) */
            buf_str(o, "}}");
        }
        if (n) buf_str(o, "]");
    }
    if ((j = json_get(d, "parallel_tool_calls")) && j->type != JSON_NULL) {
        if (j->type != JSON_BOOL) BAD("'parallel_tool_calls' must be true or false");
        if (!j->boolean) buf_str(o, ", \"parallel_tool_calls\": false");
    }
    if (!given(c)) return 0;
    if (serve_str_ok(c)) {
        if (strcmp(c->str, "auto") && strcmp(c->str, "none") && strcmp(c->str, "required"))
            BAD("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
                "\"function\", \"name\": NAME}");
        if (!strcmp(c->str, "required") && !n) BAD("tool_choice \"required\" needs 'tools'");
        buf_fmt(o, ", \"tool_choice\": \"%s\"", c->str);
        return 0;
    }
    static const char *const C_KEYS[] = { "type", "name", NULL };
    const char *ty = serve_type_of(c);
    const Json *nm = json_get(c, "name");
    if (c->type != JSON_OBJECT || !ty || strcmp(ty, "function"))
        BAD("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
            "\"name\": NAME} (built-in tools are not supported)");
    if (only(c, C_KEYS, "tool_choice", err, errlen)) return 400;
    if (!serve_str_ok(nm)) BAD("tool_choice {\"type\": \"function\"} needs a \"name\" string");
    if (!n) BAD("tool_choice {\"type\": \"function\"} needs 'tools'");
    buf_str(o, ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": ");
    buf_json(o, nm->str, nm->len);
    buf_str(o, "}}");
    return 0;
}

static int scalars(Buf *o, const Json *d, ServeResp *x, char *err, size_t errlen) {
    const Json *j;
    if ((j = json_get(d, "model")) && !serve_str_ok(j)) BAD("'model' must be a string");
    buf_str(o, "\"model\": \"k3\"");
    if (serve_number(o, d, "max_output_tokens", "max_tokens", 1, 1 << 30, 1, err, errlen) ||
        serve_number(o, d, "temperature", "temperature", 0, 2, 0, err, errlen) ||
        serve_number(o, d, "top_p", "top_p", 0, 1, 0, err, errlen))
        return 400;
    if ((j = json_get(d, "top_p")) && j->type == JSON_NUMBER && j->number == 0)
        BAD("'top_p' must be in (0, 1]");
    const char *const bools[3] = { "stream", "store", "background" };
    for (int i = 0; i < 3; i++)
        if ((j = json_get(d, bools[i])) && j->type != JSON_NULL && j->type != JSON_BOOL)
            BAD("'%s' must be true or false", bools[i]);
    if ((j = json_get(d, "background")) && j->type == JSON_BOOL && j->boolean)
        BAD("'background': true is not supported (k3 answers in the request)");
    if ((j = json_get(d, "stream")) && j->type == JSON_BOOL && j->boolean)
        buf_str(o, ", \"stream\": true");
    x->store = (j = json_get(d, "store")) && j->type == JSON_BOOL && j->boolean;
    if ((j = json_get(d, "metadata")) && j->type != JSON_OBJECT && j->type != JSON_NULL)
        BAD("'metadata' must be an object");
    if ((j = json_get(d, "user")) && !serve_str_ok(j) && j->type != JSON_NULL)
        BAD("'user' must be a string");
    if ((j = json_get(d, "service_tier")) && !serve_str_ok(j) && j->type != JSON_NULL)
        BAD("'service_tier' must be a string");
    if ((j = json_get(d, "include")) && j->type != JSON_ARRAY && j->type != JSON_NULL)
        BAD("'include' must be an array");
    if ((j = json_get(d, "truncation")) && j->type != JSON_NULL &&
        (!serve_str_ok(j) || strcmp(j->str, "disabled")))
        BAD("'truncation' must be \"disabled\" (k3 does not drop input to fit)");
    if (given(j = json_get(d, "text"))) {
        static const char *const KEYS[] = { "format", "verbosity", NULL };
        const Json *f = json_get(j, "format");
        if (j->type != JSON_OBJECT) BAD("'text' must be an object");
        if (only(j, KEYS, "text", err, errlen)) return 400;
        if (given(f) && (!serve_type_of(f) || strcmp(serve_type_of(f), "text")))
            BAD("text.format: only {\"type\": \"text\"} is supported");
    }
    if (given(j = json_get(d, "reasoning"))) {
        static const char *const KEYS[] = { "effort", "summary", "generate_summary", NULL };
        const Json *e = json_get(j, "effort");
        if (j->type != JSON_OBJECT) BAD("'reasoning' must be an object {\"effort\": ...}");
        if (only(j, KEYS, "reasoning", err, errlen)) return 400;
        if (given(e)) {
            if (!serve_str_ok(e) || !serve_effort(e->str))
                BAD("reasoning.effort must be none, minimal, low, medium, high, xhigh or max");
            buf_str(o, ", \"reasoning_effort\": ");
            buf_json(o, e->str, e->len);
        }
    }
    return 0;
}

int serve_resp_parse(const char *body, size_t n, ServeReq *r, char *err, size_t errlen) {
    char jerr[256];
    memset(r, 0, sizeof *r);
    Json *d = json_parse(body, n, jerr, sizeof jerr);
    if (!d) BAD("the body is not valid JSON: %s", jerr);
    Buf o = { 0 }, msgs = { 0 };
    ServeResp x = { 0 };
    int rc = 400, first = 1;
    const Json *j;
    if (d->type != JSON_OBJECT) { snprintf(err, errlen, "the body must be a JSON object");
                                  goto out; }
    if (only(d, TOP_KEYS, "the request", err, errlen)) goto out;
    buf_str(&o, "{");
    if (scalars(&o, d, &x, err, errlen) || tools(&o, d, err, errlen)) goto out;
    if (given(j = json_get(d, "previous_response_id"))) {
        unsigned long long id = 0;
        char tail;
        if (!serve_str_ok(j) || sscanf(j->str, "resp_%llu%c", &id, &tail) != 1) {
            snprintf(err, errlen, "'previous_response_id' must be a response id \"resp_N\"");
            goto out;
        }
        char *m = kept_msgs(id);
        if (!m) {
            snprintf(err, errlen, "previous_response_id '%.60s' not found: k3 keeps a response "
                     "(in memory, the latest %d) only when it was made with \"store\": true",
                     j->str, KEEP_MAX);
            rc = 404;
            goto out;
        }
        buf_str(&msgs, m);
        free(m);
        first = 0;
        x.prev = id;
    }
    if (input(&msgs, d, first, err, errlen)) goto out;
    buf_str(&o, ", \"messages\": [");
    if (given(j = json_get(d, "instructions"))) {
        if (!serve_str_ok(j)) {
            snprintf(err, errlen, "'instructions' must be a string");
            goto out;
        }
        buf_str(&o, "{\"role\": \"system\", \"content\": ");
        buf_json(&o, j->str, j->len);
        buf_str(&o, "}, ");
    }
    buf_add(&o, msgs.b, msgs.n);
    buf_str(&o, "]}");
    if (o.oom || msgs.oom) { snprintf(err, errlen, "out of memory"); goto out; }
    rc = serve_req_parse(o.b, o.n, REQ_CHAT, r, err, errlen);
    r->api = 2;
    if (!rc) {
        r->resp = x;
        if (x.store) { r->resp.hist = msgs.b; msgs.b = NULL; }
    }
out:
    buf_free(&o); buf_free(&msgs);
    json_free(d);
    return rc;
}
