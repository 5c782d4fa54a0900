/* serve_logprob.c — logprobs in k3 serve's replies (docs/SERVE.md): the entries recorded
 * per token (include/logprob.h: the log-softmax of the raw logits row the token was drawn
 * from, before temperature, penalties and bias) and their JSON, in OpenAI's chat shape
 * (choices[].logprobs.content[]: token, logprob, bytes, top_logprobs[]; with llama-server's
 * "id") and the legacy completions shape (tokens, token_logprobs, top_logprobs,
 * text_offset; k3 adds token_ids). Logprobs print with %.9g: they read back as the same
 * float32. */
#include "serve.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int serve_lp_push(ServeLp *l, const float *row, int V, int id, int top, int ch) {
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 64;
        K3Logprob *e = realloc(l->e, sizeof *e * c);
        if (e) l->e = e;
        signed char *k = realloc(l->ch, c);
        if (k) l->ch = k;
        if (!e || !k) return -1;
        l->cap = c;
    }
    K3Logprob *e = &l->e[l->n];
    if (row) k3_logprob_at(row, V, id, top, e);
    else memset(e, 0, sizeof *e), e->id = id;
    l->ch[l->n++] = (signed char)ch;
    return 0;
}

void serve_lp_free(ServeLp *l) { free(l->e); free(l->ch); memset(l, 0, sizeof *l); }

static void lp_num(Buf *b, float x) {
    if (x != x || x == -HUGE_VALF || x == HUGE_VALF) buf_str(b, "-9999.0");   /* OpenAI's floor */
    else buf_fmt(b, "%.9g", (double)x);
}

/* "token": ..., "bytes": [...] of id */
static void token(Buf *b, const Tok *t, int id, int with_bytes) {
    size_t n = 0;
    const char *s = tok_token_bytes(t, id, &n);
    if (!s) s = "", n = 0;
    buf_str(b, "\"token\": ");
    buf_json(b, s, n);
    if (!with_bytes) return;
    buf_str(b, ", \"bytes\": [");
    for (size_t i = 0; i < n; i++) buf_fmt(b, "%s%u", i ? ", " : "", (unsigned char)s[i]);
    buf_str(b, "]");
}

void serve_lp_chat(Buf *b, const Tok *t, const ServeLp *l, size_t from, size_t to, int ch) {
    buf_str(b, "{\"content\": [");
    int first = 1;
    for (size_t i = from; i < to && i < l->n; i++) {
        if (l->ch[i] != ch) continue;
        const K3Logprob *e = &l->e[i];
        buf_fmt(b, "%s{\"id\": %d, ", first ? "" : ", ", e->id);
        first = 0;
        token(b, t, e->id, 1);
        buf_str(b, ", \"logprob\": ");
        lp_num(b, e->logprob);
        buf_str(b, ", \"top_logprobs\": [");
        for (int k = 0; k < e->n_top; k++) {
            buf_fmt(b, "%s{\"id\": %d, ", k ? ", " : "", e->top[k]);
            token(b, t, e->top[k], 1);
            buf_str(b, ", \"logprob\": ");
            lp_num(b, e->top_logprob[k]);
            buf_str(b, "}");
        }
        buf_str(b, "]}");
    }
    buf_str(b, "], \"refusal\": null}");
}

/* The entries [from, to) of each list in turn (echo: the prompt's, then the reply's); an
 * entry of channel LP_NULL has no logprob (the prompt's first token). *off: the byte offset
 * of the next token in the prompt + reply text, advanced. */
void serve_lp_legacy(Buf *b, const Tok *t, const ServeLp *const *ls, const size_t *from,
                     const size_t *to, int nl, int top, size_t *off) {
    static const char *const field[] = { "tokens", "token_ids", "token_logprobs",
                                         "top_logprobs", "text_offset" };
    size_t o0 = *off;
    buf_str(b, "{");
    for (int f = 0; f < 5; f++) {
        buf_fmt(b, "%s\"%s\": [", f ? ", " : "", field[f]);
        int first = 1;
        *off = o0;
        for (int li = 0; li < nl; li++)
            for (size_t i = from[li]; i < to[li] && i < ls[li]->n; i++) {
                const K3Logprob *e = &ls[li]->e[i];
                const int null = ls[li]->ch[i] == LP_NULL;
                size_t len = 0;
                if (!tok_token_bytes(t, e->id, &len)) len = 0;
                if (!first) buf_str(b, ", ");
                first = 0;
                if (f == 0) { size_t n = 0; const char *s = tok_token_bytes(t, e->id, &n);
                              buf_json(b, s ? s : "", s ? n : 0); }
                else if (f == 1) buf_fmt(b, "%d", e->id);
                else if (f == 2 && null) buf_str(b, "null");
                else if (f == 2) lp_num(b, e->logprob);
                else if (f == 3 && null) buf_str(b, "null");
                else if (f == 3) {               /* {token: logprob}, a token once */
                    buf_str(b, "{");
                    int n = 0;
                    for (int k = 0; k < e->n_top && k < top; k++) {
                        size_t kl = 0, jl = 0;
                        const char *ks = tok_token_bytes(t, e->top[k], &kl);
                        int dup = 0;
                        for (int j = 0; j < k && !dup; j++) {
                            const char *js = tok_token_bytes(t, e->top[j], &jl);
                            char *a = json_quote(ks ? ks : "", ks ? kl : 0);
                            char *c = json_quote(js ? js : "", js ? jl : 0);
                            dup = a && c && !strcmp(a, c);
                            free(a); free(c);
                        }
                        if (dup) continue;
                        if (n++) buf_str(b, ", ");
                        buf_json(b, ks ? ks : "", ks ? kl : 0);
                        buf_str(b, ": ");
                        lp_num(b, e->top_logprob[k]);
                    }
                    buf_str(b, "}");
                } else buf_fmt(b, "%zu", *off);
                *off += len;
            }
        buf_str(b, "]");
    }
    buf_str(b, "}");
}
