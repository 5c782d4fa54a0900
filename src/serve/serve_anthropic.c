/* serve_anthropic.c — POST /v1/messages (Anthropic's Messages API, docs/SERVE.md): the
 * body validated field by field, with Anthropic's names in every refusal, then written as
 * the equivalent /v1/chat/completions body and validated as one (serve_req.c), so a
 * Messages request renders to the very ids of its chat twin and runs on the chat path.
 * system -> a system message; a user turn's tool_result blocks -> "tool" messages before
 * its text; an assistant's thinking / text / tool_use blocks -> reasoning_content, content
 * and tool_calls; tools' input_schema -> parameters; tool_choice auto/any/tool/none ->
 * auto/required/{function}/none; thinking enabled/disabled -> K3's thinking on/off. Also
 * POST /v1/messages/count_tokens. The replies' shapes: serve_anthropic_out.c. */
#include "serve.h"
#include "serve_gen.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 400; } while (0)

/* Top-level fields: the rest is refused (as Anthropic refuses extra inputs). metadata and
 * service_tier are accepted and ignored. */
static const char *const TOP_KEYS[] = {
    "model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p",
    "top_k", "thinking", "stream", "metadata", "tools", "tool_choice", "service_tier", NULL };


/* A text block b (named w in refusals) appended to o as a chat text part, *n the parts
 * written so far ({"type": "text", "text"}; cache_control and citations ignored). */
static int text_part(Buf *o, int *n, const Json *b, const char *w, char *err, size_t errlen) {
    static const char *const KEYS[] = { "type", "text", "cache_control", "citations", NULL };
    const Json *t = json_get(b, "text");
    if (serve_only_keys(b, KEYS, w, err, errlen)) return 400;
    if (!serve_str_ok(t)) BAD("%s.text must be a string", w);
    buf_str(o, (*n)++ ? ", {\"type\": \"text\", \"text\": " : "{\"type\": \"text\", \"text\": ");
    buf_json(o, t->str, t->len);
    buf_str(o, "}");
    return 0;
}

/* Block k of messages[i].content: its "type", w its name in refusals; NULL (err set) when
 * it is not a content block with a "type". */
static const char *block_type(const Json *b, int i, size_t k, char *w, size_t wn, char *err,
                              size_t errlen) {
    const char *ty = serve_type_of(b);
    snprintf(w, wn, "messages[%d].content[%zu]", i, k);
    if (b->type != JSON_OBJECT || !ty) {
        snprintf(err, errlen, "%s must be a content block with a \"type\"", w);
        return NULL;
    }
    return ty;
}

/* Text: a string, or an array of text blocks ({"type": "text", "text"}; cache_control and
 * citations ignored), written as the chat request's content (a string or its text parts,
 * which the chat path joins as they are). */
static int text_content(Buf *o, const Json *c, const char *what, char *err, size_t errlen) {
    if (serve_str_ok(c)) { buf_json(o, c->str, c->len); return 0; }
    if (!c || c->type != JSON_ARRAY)
        BAD("%s must be a string or an array of text blocks (no NUL characters)", what);
    buf_str(o, "[");
    int n = 0;
    for (size_t k = 0; k < c->len; k++) {
        const Json *b = c->items[k];
        char w[96];
        snprintf(w, sizeof w, "%s[%zu]", what, k);
        const char *ty = serve_type_of(b);
        if (b->type != JSON_OBJECT || !ty || strcmp(ty, "text"))
            BAD("%s must be a text block {\"type\": \"text\", \"text\": STRING}%s", w,
                ty && !strcmp(ty, "image") ? " (images go in a user message's own blocks, "
                "not in 'system' or a tool_result)" : "");
        if (text_part(o, &n, b, w, err, errlen)) return 400;
    }
    buf_str(o, "]");
    return 0;
}

/* A user turn's blocks: its tool_result blocks as "tool" messages, then its text and image
 * blocks, in their order, as one user message. */
static int user_blocks(Buf *o, const Json *c, int i, int *first, int *n_img, char *err,
                       size_t errlen) {
    static const char *const TR_KEYS[] = { "type", "tool_use_id", "content", "is_error",
                                           "cache_control", NULL };
    Buf um = { 0 };                       /* the user message's parts */
    int np = 0, rc = 400;
    for (size_t k = 0; k < c->len; k++) {
        const Json *b = c->items[k], *j;
        char w[64];
        const char *ty = block_type(b, i, k, w, sizeof w, err, errlen);
        if (!ty) goto out;
        if (!strcmp(ty, "text")) {
            if (text_part(&um, &np, b, w, err, errlen)) goto out;
            continue;
        }
        if (!strcmp(ty, "image")) {
            if (serve_anth_image(&um, &np, b, w, n_img, err, errlen)) goto out;
            continue;
        }
        if (strcmp(ty, "tool_result")) {
            snprintf(err, errlen, "%s: a user message takes text, image and tool_result blocks, "
                     "not '%.40s'%s", w, ty, strcmp(ty, "document") ? "" : " (k3 reads no "
                     "documents: send the text)");
            goto out;
        }
        if (serve_only_keys(b, TR_KEYS, w, err, errlen)) goto out;
        if (!serve_str_ok(j = json_get(b, "tool_use_id"))) {
            snprintf(err, errlen, "%s.tool_use_id must be a string", w); goto out;
        }
        const Json *ie = json_get(b, "is_error");
        if (ie && ie->type != JSON_BOOL && ie->type != JSON_NULL) {
            snprintf(err, errlen, "%s.is_error must be true or false", w); goto out;
        }
        buf_str(o, *first ? "{\"role\": \"tool\", \"tool_call_id\": "
                          : ", {\"role\": \"tool\", \"tool_call_id\": ");
        *first = 0;
        buf_json(o, j->str, j->len);
        buf_str(o, ", \"content\": ");
        char w2[80];
        snprintf(w2, sizeof w2, "%s.content", w);
        const Json *tc = json_get(b, "content");
        if (!tc || tc->type == JSON_NULL) buf_str(o, "\"\"");
        else if (text_content(o, tc, w2, err, errlen)) goto out;
        buf_str(o, "}");
    }
    rc = 0;
    if (!np) goto out;
    buf_str(o, *first ? "{\"role\": \"user\", \"content\": [" : ", {\"role\": \"user\", "
            "\"content\": [");
    *first = 0;
    buf_add(o, um.b, um.n);
    buf_str(o, "]}");
    if (um.oom) o->oom = 1;
out:
    buf_free(&um);
    return rc;
}

/* An assistant turn's blocks: text -> content, thinking -> reasoning_content (joined),
 * tool_use -> tool_calls; redacted_thinking is dropped (k3 cannot read it). */
static int assistant_blocks(Buf *o, const Json *c, int i, char *err, size_t errlen) {
    static const char *const TU_KEYS[] = { "type", "id", "name", "input", "cache_control", NULL };
    static const char *const TH_KEYS[] = { "type", "thinking", "signature", NULL };
    static const char *const RT_KEYS[] = { "type", "data", NULL };
    Buf text = { 0 }, think = { 0 }, calls = { 0 };
    int nt = 0, nth = 0, nc = 0, rc = 400;
    for (size_t k = 0; k < c->len; k++) {
        const Json *b = c->items[k], *j;
        char w[64];
        const char *ty = block_type(b, i, k, w, sizeof w, err, errlen);
        if (!ty) goto out;
        if (!strcmp(ty, "text")) {
            if (text_part(&text, &nt, b, w, err, errlen)) goto out;
        } else if (!strcmp(ty, "thinking")) {
            if (serve_only_keys(b, TH_KEYS, w, err, errlen)) goto out;
            if (!serve_str_ok(j = json_get(b, "thinking"))) {
                snprintf(err, errlen, "%s.thinking must be a string", w); goto out;
            }
            buf_add(&think, j->str, j->len);
            nth++;
        } else if (!strcmp(ty, "redacted_thinking")) {
            if (serve_only_keys(b, RT_KEYS, w, err, errlen)) goto out;
        } else if (!strcmp(ty, "tool_use")) {
            const Json *id = json_get(b, "id"), *nm = json_get(b, "name"),
                       *in = json_get(b, "input");
            if (serve_only_keys(b, TU_KEYS, w, err, errlen)) goto out;
            if (!serve_str_ok(id) || !serve_str_ok(nm) || !in || in->type != JSON_OBJECT) {
                snprintf(err, errlen, "%s: a tool_use block needs \"id\" and \"name\" strings "
                         "and an \"input\" object", w);
                goto out;
            }
            char *a = xtml_pyjson(in, 0, 0);
            if (!a) { snprintf(err, errlen, "out of memory"); goto out; }
            buf_str(&calls, nc++ ? ", {\"id\": " : "{\"id\": ");
            buf_json(&calls, id->str, id->len);
            buf_str(&calls, ", \"type\": \"function\", \"function\": {\"name\": ");
            buf_json(&calls, nm->str, nm->len);
            buf_str(&calls, ", \"arguments\": ");
            buf_json(&calls, a, strlen(a));
            buf_str(&calls, "}}");
            free(a);
        } else {
            snprintf(err, errlen, "%s: an assistant message takes text, thinking, "
                     "redacted_thinking and tool_use blocks, not '%.40s'", w, ty);
            goto out;
        }
    }
    buf_str(o, "{\"role\": \"assistant\", \"content\": ");
    if (nt) { buf_str(o, "["); buf_add(o, text.b, text.n); buf_str(o, "]"); }
    else buf_str(o, "null");
    if (nth) { buf_str(o, ", \"reasoning_content\": "); buf_json(o, think.b, think.n); }
    if (nc) { buf_str(o, ", \"tool_calls\": ["); buf_add(o, calls.b, calls.n); buf_str(o, "]"); }
    buf_str(o, "}");
    rc = text.oom || think.oom || calls.oom ? (snprintf(err, errlen, "out of memory"), 400) : 0;
out:
    buf_free(&text); buf_free(&think); buf_free(&calls);
    return rc;
}

static int messages(Buf *o, const Json *d, char *err, size_t errlen) {
    static const char *const M_KEYS[] = { "role", "content", NULL };
    const Json *m = json_get(d, "messages"), *s = json_get(d, "system");
    if (!m) BAD("'messages' is required");
    if (m->type != JSON_ARRAY || !m->len) BAD("'messages' must be a non-empty array");
    if (m->len > 100000) BAD("'messages' has over 100000 entries");
    int first = 1, n_img = 0;
    buf_str(o, ", \"messages\": [");
    if (s && s->type != JSON_NULL) {
        buf_str(o, "{\"role\": \"system\", \"content\": ");
        if (text_content(o, s, "'system'", err, errlen)) return 400;
        buf_str(o, "}");
        first = 0;
    }
    for (size_t i = 0; i < m->len; i++) {
        const Json *x = m->items[i], *ro = json_get(x, "role"), *c = json_get(x, "content");
        char w[48];
        snprintf(w, sizeof w, "messages[%zu]", i);
        if (x->type != JSON_OBJECT) BAD("%s must be an object", w);
        if (serve_only_keys(x, M_KEYS, w, err, errlen)) return 400;
        const int user = serve_str_ok(ro) && !strcmp(ro->str, "user");
        if (!user && !(serve_str_ok(ro) && !strcmp(ro->str, "assistant")))
            BAD("%s.role must be \"user\" or \"assistant\" (the system prompt is the top-level "
                "'system')", w);
        if (!user && i + 1 == m->len)
            BAD("%s: a final assistant message (prefilling the reply) is not supported", w);
        if (serve_str_ok(c)) {
            buf_str(o, first ? "{\"role\": " : ", {\"role\": ");
            buf_json(o, ro->str, ro->len);
            buf_str(o, ", \"content\": ");
            buf_json(o, c->str, c->len);
            buf_str(o, "}");
        } else if (!c || c->type != JSON_ARRAY) {
            BAD("%s.content must be a string or an array of content blocks", w);
        } else if (!c->len) {
            BAD("%s.content must not be empty", w);
        } else if (user) {
            if (user_blocks(o, c, (int)i, &first, &n_img, err, errlen)) return 400;
        } else {
            if (!first) buf_str(o, ", ");
            if (assistant_blocks(o, c, (int)i, err, errlen)) return 400;
        }
        first = 0;
    }
    buf_str(o, "]");
    return 0;
}

/* tools (custom tools only) and tool_choice. */
static int tools(Buf *o, const Json *d, char *err, size_t errlen) {
    static const char *const T_KEYS[] = { "name", "description", "input_schema", "type",
                                          "cache_control", "strict", NULL };
    static const char *const C_KEYS[] = { "type", "name", "disable_parallel_tool_use", NULL };
    const Json *t = json_get(d, "tools"), *c = json_get(d, "tool_choice"), *j;
    const int n = t && t->type == JSON_ARRAY ? (int)t->len : 0;
    if (t && t->type != JSON_NULL) {
        if (t->type != JSON_ARRAY) BAD("'tools' must be an array");
        buf_str(o, ", \"tools\": [");
        for (int i = 0; i < n; i++) {
            const Json *x = t->items[i], *nm = json_get(x, "name"),
                       *s = json_get(x, "input_schema");
            char w[32];
            snprintf(w, sizeof w, "tools[%d]", i);
            if (x->type != JSON_OBJECT) BAD("%s must be an object", w);
            const char *ty = serve_type_of(x);
            if ((j = json_get(x, "type")) && j->type != JSON_NULL && (!ty || strcmp(ty, "custom")))
                BAD("%s: type '%.40s': Anthropic's server tools are not supported (a client "
                    "tool has no type or \"custom\")", w, ty ? ty : "?");
            if (serve_only_keys(x, T_KEYS, w, err, errlen)) return 400;
            if (!serve_str_ok(nm)) BAD("%s.name must be a string", w);
            if (!s || s->type != JSON_OBJECT)
                BAD("%s.input_schema must be a JSON Schema object", w);
            buf_str(o, i ? ", {\"type\": \"function\", \"function\": {\"name\": "
                         : "{\"type\": \"function\", \"function\": {\"name\": ");
            buf_json(o, nm->str, nm->len);
            if ((j = json_get(x, "description")) && j->type != JSON_NULL) {
                if (!serve_str_ok(j)) BAD("%s.description must be a string", w);
                buf_str(o, ", \"description\": ");
                buf_json(o, j->str, j->len);
            }
            char *sc = xtml_pyjson(s, 0, 0);
            if (!sc) BAD("out of memory");
            buf_str(o, ", \"parameters\": ");
            buf_str(o, sc);
            free(sc);
            if ((j = json_get(x, "strict")) && j->type != JSON_BOOL && j->type != JSON_NULL)
                BAD("%s.strict must be true or false", w);
            if (j && j->type == JSON_BOOL && j->boolean)     /* input enforced (serve_gen.c) */
                buf_str(o, ", \"strict\": true");
            buf_str(o, "}}");
        }
        buf_str(o, "]");
    }
    if (!c || c->type == JSON_NULL) return 0;
    const char *ty = serve_type_of(c);
    if (c->type != JSON_OBJECT || !ty)
        BAD("'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
    if (serve_only_keys(c, C_KEYS, "tool_choice", err, errlen)) return 400;
    const Json *nm = json_get(c, "name"), *dp = json_get(c, "disable_parallel_tool_use");
    if (dp && dp->type != JSON_BOOL && dp->type != JSON_NULL)
        BAD("tool_choice.disable_parallel_tool_use must be true or false");
    if (nm && strcmp(ty, "tool")) BAD("tool_choice.name goes with \"type\": \"tool\" only");
    if (!strcmp(ty, "any") || !strcmp(ty, "tool")) {
        if (!n) BAD("tool_choice \"%s\" needs 'tools'", ty);
        if (!strcmp(ty, "tool")) {
            if (!serve_str_ok(nm)) BAD("tool_choice {\"type\": \"tool\"} needs a \"name\" string");
            buf_str(o, ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": ");
            buf_json(o, nm->str, nm->len);
            buf_str(o, "}}");
        } else buf_str(o, ", \"tool_choice\": \"required\"");
    } else if (!strcmp(ty, "auto") || !strcmp(ty, "none")) {
        buf_fmt(o, ", \"tool_choice\": \"%s\"", ty);
    } else BAD("tool_choice.type must be auto, any, tool or none (got '%.40s')", ty);
    if (dp && dp->type == JSON_BOOL && dp->boolean) buf_str(o, ", \"parallel_tool_calls\": false");
    return 0;
}

/* Everything but messages, tools and tool_choice. */
static int scalars(Buf *o, const Json *d, int count, char *err, size_t errlen) {
    const Json *j;
    if ((j = json_get(d, "model")) && !serve_str_ok(j)) BAD("'model' must be a string");
    if (j) { buf_str(o, "\"model\": "); buf_json(o, j->str, j->len); }
    else buf_str(o, "\"model\": \"k3\"");
    if (!count && !json_get(d, "max_tokens")) BAD("'max_tokens' is required");
    if (serve_number(o, d, "max_tokens", "max_tokens", 1, 1 << 30, 1, err, errlen) ||
        serve_number(o, d, "temperature", "temperature", 0, 1, 0, err, errlen) ||
        serve_number(o, d, "top_p", "top_p", 0, 1, 0, err, errlen) ||
        serve_number(o, d, "top_k", "top_k", 0, 1 << 30, 1, err, errlen))
        return 400;
    if ((j = json_get(d, "top_p")) && j->type == JSON_NUMBER && j->number == 0)
        BAD("'top_p' must be in (0, 1]");
    if ((j = json_get(d, "stream")) && j->type != JSON_NULL) {
        if (j->type != JSON_BOOL) BAD("'stream' must be true or false");
        if (j->boolean && !count) buf_str(o, ", \"stream\": true");
    }
    if ((j = json_get(d, "stop_sequences")) && j->type != JSON_NULL) {
        if (j->type != JSON_ARRAY) BAD("'stop_sequences' must be an array of strings");
        if (j->len > REQ_MAX_STOP) BAD("'stop_sequences' has more than %d entries (k3's limit)",
                                       REQ_MAX_STOP);
        if (j->len && !count) buf_str(o, ", \"stop\": [");
        for (size_t i = 0; i < j->len; i++) {
            const Json *s = j->items[i];
            if (!serve_str_ok(s) || !s->len || s->len > 256)
                BAD("stop_sequences[%zu] must be a string of 1 to 256 bytes", i);
            if (count) continue;
            if (i) buf_str(o, ", ");
            buf_json(o, s->str, s->len);
        }
        if (j->len && !count) buf_str(o, "]");
    }
    if ((j = json_get(d, "metadata")) && j->type != JSON_OBJECT && j->type != JSON_NULL)
        BAD("'metadata' must be an object");
    if ((j = json_get(d, "service_tier")) && !serve_str_ok(j) && j->type != JSON_NULL)
        BAD("'service_tier' must be a string");
    if ((j = json_get(d, "thinking")) && j->type != JSON_NULL) {
        static const char *const KEYS[] = { "type", "budget_tokens", NULL };
        const char *ty = serve_type_of(j);
        if (j->type != JSON_OBJECT || !ty)
            BAD("'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N} or "
                "{\"type\": \"disabled\"}");
        if (serve_only_keys(j, KEYS, "thinking", err, errlen)) return 400;
        const Json *bt = json_get(j, "budget_tokens");
        if (bt && bt->type != JSON_NULL && (bt->type != JSON_NUMBER || !bt->is_integer ||
                                            bt->integer < 1))
            BAD("thinking.budget_tokens must be a positive integer");
        const int on = !strcmp(ty, "enabled") || !strcmp(ty, "adaptive");
        if (!on && strcmp(ty, "disabled"))
            BAD("thinking.type must be enabled, adaptive or disabled (got '%.40s')", ty);
        buf_fmt(o, ", \"chat_template_kwargs\": {\"thinking\": %s}", on ? "true" : "false");
    }
    return 0;
}

int serve_anth_parse(const char *body, size_t n, int count, ServeReq *r, char *err,
                     size_t errlen) {
    char jerr[256];
    memset(r, 0, sizeof *r);
    Json *d = json_parse(body, n, jerr, sizeof jerr);
    if (!d) BAD("the body is not valid JSON: %s", jerr);
    Buf o = { 0 };
    int rc = 400;
    if (d->type != JSON_OBJECT) { snprintf(err, errlen, "the body must be a JSON object");
                                  goto out; }
    if (serve_only_keys(d, TOP_KEYS, "the request", err, errlen)) goto out;
    buf_str(&o, "{");
    if (scalars(&o, d, count, err, errlen) || tools(&o, d, err, errlen) ||
        messages(&o, d, err, errlen))
        goto out;
    buf_str(&o, "}");
    if (o.oom) { snprintf(err, errlen, "out of memory"); goto out; }
    rc = serve_req_parse(o.b, o.n, REQ_CHAT, r, err, errlen);
    r->api = 1;
out:
    buf_free(&o);
    json_free(d);
    return rc;
}

/* (serve.h) */
int serve_anth_count(Server *s, int fd, const char *body, size_t n, int ka) {
    ServeReq r;
    char err[512];
    if (serve_anth_parse(body, n, 1, &r, err, sizeof err)) {
        serve_req_free(&r);
        return serve_fail(fd, 400, err, ka);
    }
    XtmlOpts xo = { r.thinking, r.effort, 1, 0 };
    XtmlTools tl = { r.tools_json, r.tool_choice, r.ext };
    int32_t *ids = NULL;
    size_t nids = 0;
    K3ImageIn *im = r.n_img ? calloc((size_t)r.n_img, sizeof *im) : NULL;
    int bad = r.n_img && !im ? (snprintf(err, sizeof err, "out of memory"), 500) : 0;
    for (int k = 0; !bad && k < r.n_img; k++) {       /* an image's ids: its rows' count */
        char name[48];
        snprintf(name, sizeof name, "image %d", k + 1);
        if (k3_image_in(r.img[k], r.img_n[k], name, s->tok, &im[k], err, sizeof err))
            bad = strstr(err, "out of memory") ? 500 : 400;
    }
    if (!bad && !r.n_img)
        bad = xtml_render_ids_tools(s->tok, r.msgs, r.n_msgs, &xo, &tl, &ids, &nids, err,
                                    sizeof err) ? 500 : 0;
    else if (!bad) {
        XtmlSegs sg = { NULL, 0, 0 };
        bad = xtml_segments_tools(r.msgs, r.n_msgs, &xo, &tl, &sg, err, sizeof err) ||
              k3_image_segs(&sg, im, r.n_img, err, sizeof err) ? 500 : 0;
        if (!bad && xtml_segs_encode(&sg, s->tok, &ids, &nids))
            bad = (snprintf(err, sizeof err, "out of memory encoding the chat"), 500);
        xtml_segs_free(&sg);
    }
    for (int k = 0; im && k < r.n_img; k++) k3_image_in_free(&im[k]);
    free(im);
    serve_req_free(&r);
    free(ids);
    if (bad) return serve_fail(fd, bad, err, bad == 400 ? ka : 0);
    serve_log_now()->prompt = (long)nids;
    char b[64];
    const int k = snprintf(b, sizeof b, "{\"input_tokens\": %zu}\n", nids);
    return http_respond(fd, 200, "application/json", b, (size_t)k, ka);
}
