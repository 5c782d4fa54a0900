/* serve_anthropic_out.c — a /v1/messages reply in Anthropic's shapes (docs/SERVE.md,
 * "The Anthropic Messages API"): the message object with its content blocks (thinking,
 * text, tool_use), or the stream of events message_start, content_block_start / _delta /
 * _stop per block, message_delta, message_stop, with pings. The text is the chat path's
 * (serve_gen.c calls here instead of writing OpenAI's chunks), so the deltas concatenate
 * to what the plain reply holds. Each hook hands a /v1/responses request (api 2) to
 * serve_responses_out.c. */
#include "serve_gen.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One event: "event: NAME\ndata: JSON\n\n" in one chunk. */
static void event(Gen *g, const char *name, Buf *d) {
    if (g->gone) { buf_free(d); return; }
    Buf b = { 0 };
    buf_fmt(&b, "event: %s\ndata: ", name);
    buf_add(&b, d->b ? d->b : "", d->n);
    buf_str(&b, "\n\n");
    if (b.oom || d->oom || http_chunk(g->j->fd, b.b, b.n)) g->gone = 1;
    buf_free(&b); buf_free(d);
}

/* Anthropic's usage: input_tokens leaves out the prompt ids resumed from a kept state
 * (cache_read_input_tokens); the two sum to the prompt. */
static void usage(Buf *b, long in, long out, long cached) {
    buf_fmt(b, "\"usage\": {\"input_tokens\": %ld, \"output_tokens\": %ld, "
            "\"cache_creation_input_tokens\": 0, \"cache_read_input_tokens\": %ld}",
            in - cached, out, cached);
}

static void message_head(Buf *b, const Gen *g) {
    buf_fmt(b, "{\"id\": \"msg_%llu\", \"type\": \"message\", \"role\": \"assistant\", "
            "\"model\": ", (unsigned long long)g->j->id);
    buf_json(b, g->s->model_id, strlen(g->s->model_id));
}

void serve_anth_head(Gen *g) {
    if (g->j->req.api == 2) { serve_resp_head(g); return; }
    Job *j = g->j;
    if (g->a_head) {                     /* a ping at most every 5 s while the prompt goes in */
        if (k3_now() - g->a_ping < 5) return;
        Buf d = { 0 };
        buf_str(&d, "{\"type\": \"ping\"}");
        event(g, "ping", &d);
        g->a_ping = k3_now();
        return;
    }
    g->a_head = 1; g->a_open = -1; g->a_ping = k3_now();
    if (!j->head_sent++ && http_chunked_head(j->fd, "text/event-stream", j->keep_alive))
        g->gone = 1;
    Buf d = { 0 };
    buf_str(&d, "{\"type\": \"message_start\", \"message\": ");
    message_head(&d, g);
    buf_str(&d, ", \"content\": [], \"stop_reason\": null, \"stop_sequence\": null, ");
    usage(&d, (long)g->nprompt, 0, (long)g->reuse);
    buf_str(&d, "}}");
    event(g, "message_start", &d);
    buf_str(&d, "{\"type\": \"ping\"}");
    event(g, "ping", &d);
}

/* Ends the open text or thinking block (a thinking block's signature: empty, k3 signs
 * nothing). */
static void close_block(Gen *g) {
    if (g->a_open < 0) return;
    Buf d = { 0 };
    if (g->a_open == 0) {
        buf_fmt(&d, "{\"type\": \"content_block_delta\", \"index\": %d, \"delta\": "
                "{\"type\": \"signature_delta\", \"signature\": \"\"}}", g->a_block);
        event(g, "content_block_delta", &d);
    }
    buf_fmt(&d, "{\"type\": \"content_block_stop\", \"index\": %d}", g->a_block);
    event(g, "content_block_stop", &d);
    g->a_block++; g->a_open = -1;
}

static void open_block(Gen *g, int ch) {
    if (g->a_open == ch) return;
    close_block(g);
    Buf d = { 0 };
    buf_fmt(&d, "{\"type\": \"content_block_start\", \"index\": %d, \"content_block\": %s}",
            g->a_block, ch ? "{\"type\": \"text\", \"text\": \"\"}"
                           : "{\"type\": \"thinking\", \"thinking\": \"\", \"signature\": \"\"}");
    event(g, "content_block_start", &d);
    g->a_open = ch;
}

void serve_anth_delta(Gen *g, int ch, const char *text, size_t n) {
    if (g->j->req.api == 2) { serve_resp_delta(g, ch, text, n); return; }
    if (!n) return;
    open_block(g, ch);
    Buf d = { 0 };
    buf_fmt(&d, "{\"type\": \"content_block_delta\", \"index\": %d, \"delta\": {\"type\": "
            "\"%s\", \"%s\": ", g->a_block, ch ? "text_delta" : "thinking_delta",
            ch ? "text" : "thinking");
    buf_json(&d, text, n);
    buf_str(&d, "}}");
    event(g, "content_block_delta", &d);
}

/* Call k's input: its arguments' JSON object text, or (a json block the model wrote that
 * is no object) {"_k3_raw": TEXT}. malloc'd, NULL when out of memory. */
static char *call_input(const Gen *g, int k) {
    char *a = xtml_call_arguments(g->p, &g->p->calls[k]), jerr[64];
    if (!a) return NULL;
    Json *j = json_parse(a, strlen(a), jerr, sizeof jerr);
    const int obj = j && j->type == JSON_OBJECT;
    json_free(j);
    if (obj) return a;
    Buf b = { 0 };
    buf_str(&b, "{\"_k3_raw\": ");
    buf_json(&b, a, strlen(a));
    buf_str(&b, "}");
    free(a);
    if (b.oom) { buf_free(&b); return NULL; }
    return b.b;
}

static void tool_block(Buf *b, const Gen *g, int k, const char *input) {
    buf_fmt(b, "{\"type\": \"tool_use\", \"id\": \"toolu_%llu_%d\", \"name\": ",
            (unsigned long long)g->j->id, k);
    buf_json(b, g->p->calls[k].name, strlen(g->p->calls[k].name));
    buf_fmt(b, ", \"input\": %s}", input);
}

int serve_anth_tools(Gen *g, int from) {
    if (g->j->req.api == 2) return serve_resp_tools(g, from);
    int n = 0;
    for (int k = from; g->p && k < g->p->n_calls && g->p->calls[k].complete; k++, n++) {
        char *in = call_input(g, k);
        if (!in) { g->gone = 1; return n; }
        close_block(g);
        Buf d = { 0 };
        buf_fmt(&d, "{\"type\": \"content_block_start\", \"index\": %d, \"content_block\": ",
                g->a_block);
        tool_block(&d, g, k, "{}");
        buf_str(&d, "}");
        event(g, "content_block_start", &d);
        buf_fmt(&d, "{\"type\": \"content_block_delta\", \"index\": %d, \"delta\": {\"type\": "
                "\"input_json_delta\", \"partial_json\": ", g->a_block);
        buf_json(&d, in, strlen(in));
        buf_str(&d, "}}");
        event(g, "content_block_delta", &d);
        buf_fmt(&d, "{\"type\": \"content_block_stop\", \"index\": %d}", g->a_block);
        event(g, "content_block_stop", &d);
        g->a_block++;
        free(in);
    }
    return n;
}

/* stop_reason and stop_sequence: the stop string that ended the text (the first of the
 * request's at the offset where the text was cut, as serve_gen.c's find_stop picks it). */
static void stop_json(Buf *b, const Gen *g, const char *finish) {
    const ServeReq *r = &g->j->req;
    const char *why = !strcmp(finish, "tool_calls") ? "tool_use"
                    : g->why == K3STOP_STRING ? "stop_sequence"
                    : g->why == K3STOP_LENGTH || g->why == K3STOP_CONTEXT ? "max_tokens"
                    : "end_turn";
    buf_fmt(b, "\"stop_reason\": \"%s\", \"stop_sequence\": ", why);
    int seq = -1;
    size_t n = 0;
    char *t = g->why == K3STOP_STRING ? chan_text(g->s->tok, g->xp.resp_ids, g->xp.n_resp, 0, &n)
                                      : NULL;
    for (int i = 0; t && i < r->n_stop && seq < 0; i++)
        if (g->len[1] + r->stop_len[i] <= n && !memcmp(t + g->len[1], r->stop[i], r->stop_len[i]))
            seq = i;
    free(t);
    if (seq >= 0) buf_json(b, r->stop[seq], r->stop_len[seq]);
    else buf_str(b, "null");
}

static const char *const K3STOP_NAME[] = { "length", "eos", "stop_string", "context",
                                           "interrupted" };

void serve_anth_reply(Gen *g, const char *finish) {
    if (g->j->req.api == 2) { serve_resp_reply(g, finish); return; }
    Job *j = g->j;
    Buf d = { 0 };
    if (j->req.stream) {
        if (!g->a_block && g->a_open < 0) open_block(g, 1);   /* no block: an empty text */
        close_block(g);
        buf_str(&d, "{\"type\": \"message_delta\", \"delta\": {");
        stop_json(&d, g, finish);
        buf_fmt(&d, "}, \"usage\": {\"output_tokens\": %d}, \"k3_stop\": \"%s\"}", g->ngen,
                K3STOP_NAME[g->why]);
        event(g, "message_delta", &d);
        buf_str(&d, "{\"type\": \"message_stop\"}");
        event(g, "message_stop", &d);
        return;
    }
    /* the content blocks and stop fields; serve_anth_end wraps them */
    int nb = 0;
    buf_str(&d, "\"content\": [");
    if (g->thinking && g->len[0]) {
        buf_str(&d, "{\"type\": \"thinking\", \"thinking\": ");
        buf_json(&d, g->text[0], g->len[0]);
        buf_str(&d, ", \"signature\": \"\"}");
        nb++;
    }
    const int nc = g->p ? g->p->n_calls : 0;
    int calls = 0;
    for (int k = 0; k < nc; k++) calls += g->p->calls[k].complete;
    if (g->len[1] || (!nb && !calls)) {
        buf_str(&d, nb++ ? ", {\"type\": \"text\", \"text\": " : "{\"type\": \"text\", \"text\": ");
        buf_json(&d, g->text[1] ? g->text[1] : "", g->len[1]);
        buf_str(&d, "}");
    }
    for (int k = 0; k < nc && g->p->calls[k].complete; k++) {
        char *in = call_input(g, k);
        if (!in) { d.oom = 1; break; }
        if (nb++) buf_str(&d, ", ");
        tool_block(&d, g, k, in);
        free(in);
    }
    buf_str(&d, "], ");
    stop_json(&d, g, finish);
    buf_fmt(&d, ", \"k3_stop\": \"%s\"", K3STOP_NAME[g->why]);
    if (d.oom) { buf_free(&d); snprintf(j->err, sizeof j->err, "out of memory"); return; }
    j->choice[g->choice] = d.b;
}

void serve_anth_fail(Gen *g) {
    if (g->j->req.api == 2) { serve_resp_fail(g); return; }
    Buf d = { 0 };
    buf_str(&d, "{\"type\": \"error\", \"error\": {\"type\": \"api_error\", \"message\": ");
    buf_json(&d, g->err, strlen(g->err));
    buf_str(&d, "}}");
    event(g, "error", &d);
    if (!g->gone && http_chunk_end(g->j->fd)) g->gone = 1;
}

void serve_anth_end(Gen *g, long prompt, long gen, long cached) {
    if (g->j->req.api == 2) { serve_resp_end(g, prompt, gen, cached); return; }
    Job *j = g->j;
    if (j->req.stream) {
        if (!g->gone && http_chunk_end(j->fd)) g->gone = 1;
        return;
    }
    Buf b = { 0 };
    message_head(&b, g);
    buf_str(&b, ", ");
    buf_str(&b, j->choice[0] ? j->choice[0] : "\"content\": []");
    buf_str(&b, ", ");
    usage(&b, prompt, gen, cached);
    buf_str(&b, "}\n");
    if (b.oom) http_error_api(j->fd, 500, "out of memory writing the reply", 0, 1);
    else if (http_respond(j->fd, 200, "application/json", b.b, b.n, j->keep_alive))
        g->gone = 1;
    buf_free(&b);
}
