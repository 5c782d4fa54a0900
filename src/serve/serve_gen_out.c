/* serve_gen_out.c — the bytes of one request's reply in OpenAI's shapes: a stream's head,
 * its deltas (cut at the stop strings, settled UTF-8 only) and its finish chunk, or the
 * whole JSON reply with its usage; the other APIs' shapes are handed to
 * serve_anthropic_out.c. Apart from serve_gen.c, which runs the request on the engine. */
#include "serve.h"
#include "serve_gen.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const K3STOP[] = { "length", "eos", "stop_string", "context", "interrupted" };

static void chunk_head(Gen *g, Buf *b) {
    buf_fmt(b, "data: {\"id\": \"%s\", \"object\": \"%s%s\", \"created\": %ld, \"model\": ",
            g->id, g->obj, g->j->req.kind == REQ_CHAT ? ".chunk" : "", g->created);
    buf_json(b, g->s->model_id, strlen(g->s->model_id));
}

static void send_sse(Gen *g, Buf *b) {
    if (g->gone) return;
    if (b->oom || http_chunk(g->j->fd, b->b, b->n)) g->gone = 1;
}

/* A stream chunk's ", "logprobs": ..." : the reply's entries not streamed yet. */
static void lp_stream(Gen *g, Buf *b) {
    const ServeReq *r = &g->j->req;
    if (!r->logprobs || g->lp.sent >= g->lp.n) return;
    buf_str(b, ", \"logprobs\": ");
    if (r->kind == REQ_CHAT) serve_lp_chat(b, g->s->tok, &g->lp, g->lp.sent, g->lp.n, 1);
    else {
        const ServeLp *ls[1] = { &g->lp };
        serve_lp_legacy(b, g->s->tok, ls, &g->lp.sent, &g->lp.n, 1, r->top_logprobs,
                        &g->lp_off);
    }
    g->lp.sent = g->lp.n;
}

/* Streams text[sent..upto) of channel ch (0 reasoning, 1 content). */
static void delta(Gen *g, int ch, const char *text, size_t upto) {
    if (upto <= g->sent[ch]) return;
    if (g->j->req.api) { serve_anth_delta(g, ch, text + g->sent[ch], upto - g->sent[ch]);
                         g->sent[ch] = upto; return; }
    Buf b = { 0 };
    chunk_head(g, &b);
    if (g->j->req.kind == REQ_CHAT) {
        buf_fmt(&b, ", \"choices\": [{\"index\": %d, \"delta\": {", g->choice);
        buf_str(&b, ch ? "\"content\": " : "\"reasoning_content\": ");
        buf_json(&b, text + g->sent[ch], upto - g->sent[ch]);
        buf_str(&b, "}");
        if (ch) lp_stream(g, &b);
        buf_str(&b, ", \"finish_reason\": null}]}\n\n");
    } else {
        buf_fmt(&b, ", \"choices\": [{\"index\": %d, \"text\": ", g->choice);
        buf_json(&b, text + g->sent[ch], upto - g->sent[ch]);
        lp_stream(g, &b);
        buf_str(&b, ", \"finish_reason\": null}]}\n\n");
    }
    send_sse(g, &b);
    buf_free(&b);
    g->sent[ch] = upto;
}

/* Streams the tool calls completed since the last delta. */
void serve_gen_tool_deltas(Gen *g) {
    const XtmlParser *p = g->p;
    if (!g->j->req.stream || !p || g->calls_sent >= p->n_calls ||
        !p->calls[g->calls_sent].complete)
        return;
    if (g->j->req.api) { g->calls_sent += serve_anth_tools(g, g->calls_sent); return; }
    Buf b = { 0 };
    chunk_head(g, &b);
    buf_fmt(&b, ", \"choices\": [{\"index\": %d, \"delta\": {\"tool_calls\": ", g->choice);
    g->calls_sent += serve_tool_calls_json(&b, p, g->j->id, g->calls_sent, 1);
    buf_str(&b, "}, \"finish_reason\": null}]}\n\n");
    send_sse(g, &b);
    buf_free(&b);
}
int serve_gen_calls_done(const Gen *g) {
    int n = 0;
    for (int k = 0; g->p && k < g->p->n_calls; k++) n += g->p->calls[k].complete;
    return n;
}

/* Earliest stop string in t[0..n): its offset, or n. */
static size_t find_stop(const ServeReq *r, const char *t, size_t n) {
    size_t best = n;
    for (int i = 0; i < r->n_stop; i++) {
        const char *p = memmem(t, n, r->stop[i], r->stop_len[i]);
        if (p && (size_t)(p - t) < best) best = (size_t)(p - t);
    }
    return best;
}

/* After a token: checks stop strings on the answer and streams what is settled. final:
 * the whole text (the turn ended), kept in g->text. Returns 1 when a stop string ended it. */
int serve_gen_update(Gen *g, int ch, const int32_t *ids, size_t n, int final) {
    const ServeReq *r = &g->j->req;
    int check = ch == 1 && r->n_stop;
    if (!final && !r->stream && !check) return 0;
    size_t len;
    char *t = chan_text(g->s->tok, ids, n, !final, &len);
    if (!t) { g->gone = 1; return 0; }
    int hit = 0;
    size_t upto = len;
    if (check) {
        size_t at = find_stop(r, t, len);
        if (at < len) { len = upto = at; t[at] = 0; hit = 1; }
        else if (!final) upto = len > g->maxstop - 1 ? len - (g->maxstop - 1) : 0;
    }
    while (upto > g->sent[ch] && upto < len && ((unsigned char)t[upto] & 0xC0) == 0x80) upto--;
    if (r->stream) delta(g, ch, t, upto < g->sent[ch] ? g->sent[ch] : upto);
    if (final || hit) {
        free(g->text[ch]); g->text[ch] = t; g->len[ch] = len;
    } else free(t);
    return hit;
}

/* An error reply from the engine thread; the connection thread counts it. */
void serve_gen_job_error(Job *j, int status, const char *msg, int keep_alive) {
    j->status = status;
    http_error_api(j->fd, status, msg, keep_alive, j->req.api);
}

static void usage_json(Buf *b, const Job *j, int draft, long prompt, long gen, long cached) {
    buf_fmt(b, "\"usage\": {\"prompt_tokens\": %ld, \"completion_tokens\": %ld, "
            "\"total_tokens\": %ld, \"prompt_tokens_details\": {\"cached_tokens\": %ld}",
            prompt, gen, prompt + gen, cached);
    if (draft)                          /* --draft: the reply's drafts verified, and kept */
        buf_fmt(b, ", \"k3_draft\": {\"drafted\": %ld, \"accepted\": %ld}", j->drafted,
                j->accepted);
    buf_str(b, "}");
}

/* g's choice of the reply: streamed, what is left of it and its finish chunk; else its
 * JSON kept in the job for serve_gen_reply_end. */
void serve_gen_reply(Gen *g, const char *finish) {
    const ServeReq *r = &g->j->req;
    Buf b = { 0 };
    const char *e = "";
    if (r->stream) {
        for (int ch = 0; ch < 2; ch++) if (g->text[ch]) delta(g, ch, g->text[ch], g->len[ch]);
        serve_gen_tool_deltas(g);
        if (r->api) { serve_anth_reply(g, finish); return; }
        chunk_head(g, &b);
        buf_fmt(&b, r->kind == REQ_CHAT ? ", \"choices\": [{\"index\": %d, \"delta\": {}"
                                        : ", \"choices\": [{\"index\": %d, \"text\": \"\"",
                g->choice);
        lp_stream(g, &b);                 /* the entries whose text was held back or cut */
        buf_fmt(&b, ", \"finish_reason\": \"%s\", \"k3_stop\": \"%s\"}]}\n\n", finish,
                K3STOP[g->why]);
        send_sse(g, &b);
        buf_free(&b);
        return;
    }
    if (r->api) { serve_anth_reply(g, finish); return; }
    if (r->kind == REQ_CHAT) {
        buf_fmt(&b, "{\"index\": %d, \"message\": {\"role\": \"assistant\", \"content\": ",
                g->choice);
        int nc = serve_gen_calls_done(g);
        if (nc && !g->len[1]) buf_str(&b, "null");     /* OpenAI's form for calls only */
        else buf_json(&b, g->text[1] ? g->text[1] : e, g->len[1]);
        if (g->thinking) {
            buf_str(&b, ", \"reasoning_content\": ");
            buf_json(&b, g->text[0] ? g->text[0] : e, g->len[0]);
        }
        if (nc) {
            buf_str(&b, ", \"tool_calls\": ");
            serve_tool_calls_json(&b, g->p, g->j->id, 0, 0);
        }
        buf_str(&b, "}");
        if (r->logprobs) {
            buf_str(&b, ", \"logprobs\": ");
            serve_lp_chat(&b, g->s->tok, &g->lp, 0, g->lp.n, 1);
        }
    } else {
        buf_fmt(&b, "{\"index\": %d, \"text\": ", g->choice);
        char *t = g->text[1] ? g->text[1] : (char *)e;
        size_t n = g->len[1];
        char *both = NULL;
        const ServePrompt *pr = g->pr;
        if (r->echo && (both = malloc(pr->len + n + 1))) {   /* the prompt, then it */
            memcpy(both, pr->text, pr->len); memcpy(both + pr->len, t, n);
            t = both; n += pr->len;
        } else if (r->echo) b.oom = 1;
        buf_json(&b, t, n);
        free(both);
        if (r->logprobs) {
            const ServeLp *ls[2] = { &g->plp, &g->lp };
            const size_t from[2] = { 0, 0 }, to[2] = { g->plp.n, g->lp.n };
            size_t off = r->echo ? 0 : g->pr->len;
            buf_str(&b, ", \"logprobs\": ");
            serve_lp_legacy(&b, g->s->tok, ls + !r->echo, from + !r->echo, to + !r->echo,
                            2 - !r->echo, r->top_logprobs, &off);
        }
    }
    buf_fmt(&b, ", \"finish_reason\": \"%s\", \"k3_stop\": \"%s\"}", finish, K3STOP[g->why]);
    if (b.oom) { buf_free(&b); snprintf(g->j->err, sizeof g->j->err, "out of memory"); return; }
    g->j->choice[g->choice] = b.b;
}

/* After the job's last choice: the usage chunk and [DONE], or the whole reply. */
void serve_gen_reply_end(Gen *g, long prompt, long gen, long cached) {
    Job *j = g->j;
    const ServeReq *r = &j->req;
    if (r->api) { serve_anth_end(g, prompt, gen, cached); return; }
    Buf b = { 0 };
    if (r->stream) {
        if (r->include_usage) {
            chunk_head(g, &b);
            buf_str(&b, ", \"choices\": [], ");
            usage_json(&b, j, g->s->dl != NULL, prompt, gen, cached);
            buf_str(&b, "}\n\n");
        }
        buf_str(&b, "data: [DONE]\n\n");
        send_sse(g, &b);
        if (!g->gone && http_chunk_end(j->fd)) g->gone = 1;
        buf_free(&b);
        return;
    }
    buf_fmt(&b, "{\"id\": \"%s\", \"object\": \"%s\", \"created\": %ld, \"model\": ", g->id,
            g->obj, g->created);
    buf_json(&b, g->s->model_id, strlen(g->s->model_id));
    buf_str(&b, ", \"choices\": [");
    for (int i = 0; i < serve_req_choices(r); i++) {
        if (i) buf_str(&b, ", ");
        buf_str(&b, j->choice[i] ? j->choice[i] : "null");
    }
    buf_str(&b, "], ");
    usage_json(&b, j, g->s->dl != NULL, prompt, gen, cached);
    buf_str(&b, "}\n");
    if (b.oom) serve_gen_job_error(j, 500, "out of memory writing the reply", 0);
    else if (http_respond(j->fd, 200, "application/json", b.b, b.n, j->keep_alive))
        g->gone = 1;
    buf_free(&b);
}

/* A stream's head and its first (empty) chunk, once the prompt is in: the first byte
 * still means "prefilled" (tools/bench_serve.sh times the server's share by it). */
void serve_gen_stream_head(Gen *g) {
    const ServeReq *r = &g->j->req;
    if (!r->stream) return;
    if (r->api) { serve_anth_head(g); return; }
    if (!g->j->head_sent++ && http_chunked_head(g->j->fd, "text/event-stream",
                                                 g->j->keep_alive))
        g->gone = 1;
    Buf b = { 0 };
    chunk_head(g, &b);
    if (r->kind == REQ_CHAT)
        buf_fmt(&b, ", \"choices\": [{\"index\": %d, \"delta\": {\"role\": \"assistant\", "
                "\"content\": \"\"}, \"finish_reason\": null}]}\n\n", g->choice);
    else {
        buf_fmt(&b, ", \"choices\": [{\"index\": %d, \"text\": ", g->choice);
        buf_json(&b, g->pr->text, r->echo ? g->pr->len : 0);     /* echo: the prompt */
        if (r->echo && r->logprobs) {
            const ServeLp *ls[1] = { &g->plp };
            const size_t from = 0, to = g->plp.n;
            buf_str(&b, ", \"logprobs\": ");
            serve_lp_legacy(&b, g->s->tok, ls, &from, &to, 1, r->top_logprobs, &g->lp_off);
        }
        buf_str(&b, ", \"finish_reason\": null}]}\n\n");
    }
    send_sse(g, &b);
    buf_free(&b);
}
