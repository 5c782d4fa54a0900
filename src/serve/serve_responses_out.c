/* serve_responses_out.c — a /v1/responses reply in OpenAI's Responses shapes (docs/SERVE.md,
 * "The OpenAI Responses API"): the response object with its output items (reasoning,
 * message, function_call), or the stream of typed events (response.created, .in_progress,
 * output_item.added / .done around each item, its content part's and text's deltas,
 * response.completed with the whole response), each with a sequence_number. The text is
 * the chat path's (serve_gen.c calls here through serve_anthropic_out.c's hooks), so the
 * deltas concatenate to what the plain reply holds. */
#include "serve_gen.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void event(Gen *g, const char *type, Buf *d) {
    if (g->gone) { buf_free(d); return; }
    Buf b = { 0 };
    buf_fmt(&b, "event: %s\ndata: {\"type\": \"%s\", \"sequence_number\": %d", type, type,
            g->r_seq++);
    if (d->n) buf_str(&b, ", ");
    buf_add(&b, d->b ? d->b : "", d->n);
    buf_str(&b, "}\n\n");
    if (b.oom || d->oom || http_chunk(g->j->fd, b.b, b.n)) g->gone = 1;
    buf_free(&b); buf_free(d);
}

static const char *const K3STOP_NAME[] = { "length", "eos", "stop_string", "context",
                                           "interrupted" };

static unsigned long long jid(const Gen *g) { return (unsigned long long)g->j->id; }

static int incomplete(const Gen *g) { return g->why == K3STOP_LENGTH || g->why == K3STOP_CONTEXT; }

/* The response object: status, its output (or []) and usage (when prompt >= 0). */
static void response(Buf *b, const Gen *g, const char *status, const char *output, long prompt,
                     long gen, long cached) {
    const ServeReq *r = &g->j->req;
    buf_fmt(b, "{\"id\": \"resp_%llu\", \"object\": \"response\", \"created_at\": %ld, "
            "\"status\": \"%s\", \"error\": null, \"incomplete_details\": ", jid(g), g->created,
            status);
    if (!strcmp(status, "incomplete")) buf_str(b, "{\"reason\": \"max_output_tokens\"}");
    else buf_str(b, "null");
    if (prompt >= 0) buf_fmt(b, ", \"k3_stop\": \"%s\"", K3STOP_NAME[g->why]);   /* why, finer */
    buf_str(b, ", \"model\": ");
    buf_json(b, g->s->model_id, strlen(g->s->model_id));
    buf_fmt(b, ", \"output\": [%s], \"parallel_tool_calls\": true, \"previous_response_id\": ",
            output ? output : "");
    if (r->resp.prev) buf_fmt(b, "\"resp_%llu\"", (unsigned long long)r->resp.prev);
    else buf_str(b, "null");
    buf_fmt(b, ", \"store\": %s, \"metadata\": {}, \"usage\": ", r->resp.store ? "true" : "false");
    if (prompt < 0) buf_str(b, "null");
    else buf_fmt(b, "{\"input_tokens\": %ld, \"input_tokens_details\": {\"cached_tokens\": %ld}, "
                 "\"output_tokens\": %ld, \"output_tokens_details\": {\"reasoning_tokens\": "
                 "%zu}, \"total_tokens\": %ld}", prompt, cached, gen,
                 g->thinking ? g->xp.n_think : 0, prompt + gen);
    buf_str(b, "}");
}

static void head(Gen *g) {
    Job *j = g->j;
    if (g->a_head) return;
    g->a_head = 1; g->a_open = -1;
    if (!j->head_sent++ && http_chunked_head(j->fd, "text/event-stream", j->keep_alive))
        g->gone = 1;
    const char *const ev[2] = { "response.created", "response.in_progress" };
    for (int i = 0; i < 2; i++) {
        Buf d = { 0 };
        buf_str(&d, "\"response\": ");
        response(&d, g, "in_progress", NULL, -1, 0, 0);
        event(g, ev[i], &d);
    }
}

/* Item k's ids: rs_N (reasoning), msg_N (the message), fc_N_K (call K). */
static void item_id(Buf *b, const Gen *g, int ch) {
    buf_fmt(b, "\"item_id\": \"%s_%llu\", \"output_index\": %d", ch ? "msg" : "rs", jid(g),
            g->a_block);
}

static void reasoning_item(Buf *b, const Gen *g, const char *t, size_t n, int done) {
    buf_fmt(b, "{\"id\": \"rs_%llu\", \"type\": \"reasoning\", \"summary\": [", jid(g));
    if (done) {
        buf_str(b, "{\"type\": \"summary_text\", \"text\": ");
        buf_json(b, t ? t : "", n);
        buf_str(b, "}");
    }
    buf_str(b, "]}");
}

static void message_item(Buf *b, const Gen *g, const char *t, size_t n, int done) {
    buf_fmt(b, "{\"id\": \"msg_%llu\", \"type\": \"message\", \"status\": \"%s\", \"role\": "
            "\"assistant\", \"content\": [", jid(g), done ? "completed" : "in_progress");
    if (done) {
        buf_str(b, "{\"type\": \"output_text\", \"text\": ");
        buf_json(b, t ? t : "", n);
        buf_str(b, ", \"annotations\": []}");
    }
    buf_str(b, "]}");
}

static void part(Buf *b, int ch, const char *t, size_t n) {
    buf_str(b, ch ? "{\"type\": \"output_text\", \"text\": " : "{\"type\": \"summary_text\", "
            "\"text\": ");
    buf_json(b, t ? t : "", n);
    buf_str(b, ch ? ", \"annotations\": []}" : "}");
}

static void close_item(Gen *g) {
    const int ch = g->a_open;
    if (ch < 0) return;
    const char *t = g->r_acc.b;
    const size_t n = g->r_acc.n;
    Buf d = { 0 };
    item_id(&d, g, ch);
    buf_str(&d, ch ? ", \"content_index\": 0, \"text\": " : ", \"summary_index\": 0, \"text\": ");
    buf_json(&d, t ? t : "", n);
    event(g, ch ? "response.output_text.done" : "response.reasoning_summary_text.done", &d);
    item_id(&d, g, ch);
    buf_str(&d, ch ? ", \"content_index\": 0, \"part\": " : ", \"summary_index\": 0, \"part\": ");
    part(&d, ch, t, n);
    event(g, ch ? "response.content_part.done" : "response.reasoning_summary_part.done", &d);
    buf_fmt(&d, "\"output_index\": %d, \"item\": ", g->a_block);
    (ch ? message_item : reasoning_item)(&d, g, t, n, 1);
    event(g, "response.output_item.done", &d);
    buf_free(&g->r_acc);
    g->a_block++; g->a_open = -1;
}

static void open_item(Gen *g, int ch) {
    if (g->a_open == ch) return;
    close_item(g);
    Buf d = { 0 };
    buf_fmt(&d, "\"output_index\": %d, \"item\": ", g->a_block);
    (ch ? message_item : reasoning_item)(&d, g, NULL, 0, 0);
    event(g, "response.output_item.added", &d);
    item_id(&d, g, ch);
    buf_str(&d, ch ? ", \"content_index\": 0, \"part\": " : ", \"summary_index\": 0, \"part\": ");
    part(&d, ch, NULL, 0);
    event(g, ch ? "response.content_part.added" : "response.reasoning_summary_part.added", &d);
    g->a_open = ch;
}

void serve_resp_head(Gen *g) { head(g); }

void serve_resp_delta(Gen *g, int ch, const char *text, size_t n) {
    if (!n) return;
    open_item(g, ch);
    buf_add(&g->r_acc, text, n);
    Buf d = { 0 };
    item_id(&d, g, ch);
    buf_str(&d, ch ? ", \"content_index\": 0, \"delta\": " : ", \"summary_index\": 0, \"delta\": ");
    buf_json(&d, text, n);
    if (ch) buf_str(&d, ", \"logprobs\": []");
    event(g, ch ? "response.output_text.delta" : "response.reasoning_summary_text.delta", &d);
}

static void call_item(Buf *b, const Gen *g, int k, const char *args, int done) {
    buf_fmt(b, "{\"id\": \"fc_%llu_%d\", \"type\": \"function_call\", \"status\": \"%s\", "
            "\"call_id\": \"call_%llu_%d\", \"name\": ", jid(g), k,
            done ? "completed" : "in_progress", jid(g), k);
    buf_json(b, g->p->calls[k].name, strlen(g->p->calls[k].name));
    buf_str(b, ", \"arguments\": ");
    buf_json(b, args, strlen(args));
    buf_str(b, "}");
}

int serve_resp_tools(Gen *g, int from) {
    int n = 0;
    for (int k = from; g->p && k < g->p->n_calls && g->p->calls[k].complete; k++, n++) {
        char *a = xtml_call_arguments(g->p, &g->p->calls[k]);
        if (!a) { g->gone = 1; return n; }
        close_item(g);
        Buf d = { 0 };
        buf_fmt(&d, "\"output_index\": %d, \"item\": ", g->a_block);
        call_item(&d, g, k, "", 0);
        event(g, "response.output_item.added", &d);
        buf_fmt(&d, "\"item_id\": \"fc_%llu_%d\", \"output_index\": %d, \"delta\": ", jid(g), k,
                g->a_block);
        buf_json(&d, a, strlen(a));
        event(g, "response.function_call_arguments.delta", &d);
        buf_fmt(&d, "\"item_id\": \"fc_%llu_%d\", \"output_index\": %d, \"name\": ", jid(g), k,
                g->a_block);
        buf_json(&d, g->p->calls[k].name, strlen(g->p->calls[k].name));
        buf_str(&d, ", \"arguments\": ");
        buf_json(&d, a, strlen(a));
        event(g, "response.function_call_arguments.done", &d);
        buf_fmt(&d, "\"output_index\": %d, \"item\": ", g->a_block);
        call_item(&d, g, k, a, 1);
        event(g, "response.output_item.done", &d);
        g->a_block++;
        free(a);
    }
    return n;
}

/* The conversation so far as chat messages (the request's, then the reply), kept for a
 * later previous_response_id. */
static void keep(Gen *g) {
    const ServeReq *r = &g->j->req;
    Buf b = { 0 };
    int nc = 0;
    for (int k = 0; g->p && k < g->p->n_calls; k++) nc += g->p->calls[k].complete;
    buf_str(&b, r->resp.hist);
    buf_str(&b, ", {\"role\": \"assistant\", \"content\": ");
    if (nc && !g->len[1]) buf_str(&b, "null");
    else buf_json(&b, g->text[1] ? g->text[1] : "", g->len[1]);
    if (g->thinking && g->len[0]) {
        buf_str(&b, ", \"reasoning_content\": ");
        buf_json(&b, g->text[0], g->len[0]);
    }
    if (nc) { buf_str(&b, ", \"tool_calls\": "); serve_tool_calls_json(&b, g->p, g->j->id, 0, 0); }
    buf_str(&b, "}");
    if (b.oom) { buf_free(&b); return; }
    serve_resp_keep(g->j->id, b.b);
}

void serve_resp_reply(Gen *g, const char *finish) {
    (void)finish;
    Job *j = g->j;
    Buf d = { 0 };
    int nb = 0, calls = 0;
    const int nc = g->p ? g->p->n_calls : 0;
    for (int k = 0; k < nc; k++) calls += g->p->calls[k].complete;
    if (j->req.stream) {                  /* no text and no call: an empty message, as below */
        if (!g->sent[1] && !calls) open_item(g, 1);
        close_item(g);
    }
    if (g->thinking && g->len[0]) { reasoning_item(&d, g, g->text[0], g->len[0], 1); nb++; }
    if (g->len[1] || !calls) {
        if (nb++) buf_str(&d, ", ");
        message_item(&d, g, g->text[1], g->len[1], 1);
    }
    for (int k = 0; k < nc && g->p->calls[k].complete; k++) {
        char *a = xtml_call_arguments(g->p, &g->p->calls[k]);
        if (!a) { d.oom = 1; break; }
        if (nb++) buf_str(&d, ", ");
        call_item(&d, g, k, a, 1);
        free(a);
    }
    if (d.oom) { buf_free(&d); snprintf(j->err, sizeof j->err, "out of memory"); return; }
    j->choice[g->choice] = d.b;
    if (j->req.resp.store && j->req.resp.hist) keep(g);
}

void serve_resp_fail(Gen *g) {
    Buf d = { 0 };
    buf_str(&d, "\"code\": \"server_error\", \"message\": ");
    buf_json(&d, g->err, strlen(g->err));
    buf_str(&d, ", \"param\": null");
    event(g, "error", &d);
    if (!g->gone && http_chunk_end(g->j->fd)) g->gone = 1;
}

void serve_resp_end(Gen *g, long prompt, long gen, long cached) {
    Job *j = g->j;
    const char *st = incomplete(g) ? "incomplete" : "completed";
    Buf b = { 0 };
    if (j->req.stream) buf_str(&b, "\"response\": ");
    response(&b, g, st, j->choice[0], prompt, gen, cached);
    if (j->req.stream) {
        event(g, incomplete(g) ? "response.incomplete" : "response.completed", &b);
        if (!g->gone && http_chunk_end(j->fd)) g->gone = 1;
        return;
    }
    buf_str(&b, "\n");
    if (b.oom) http_error_api(j->fd, 500, "out of memory writing the reply", 0, 2);
    else if (http_respond(j->fd, 200, "application/json", b.b, b.n, j->keep_alive))
        g->gone = 1;
    buf_free(&b);
}
