/* xtml.c — XTML renderer and completion parser (include/xtml.h,
 * docs/TOKENIZER.md §6-§7). */
#include "xtml.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char EFFORT_BODY[] =
    "`thinking_effort` guides on how much to think in your thinking channel (not including "
    "the response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=%s`.";

int xtml_ids(const Tok *t, XtmlIds *ids, char *err, size_t errlen) {
    static const char *names[4] = { "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>" };
    int32_t *dst[4] = { &ids->open, &ids->close, &ids->sep, &ids->eom };
    for (int i = 0; i < 4; i++) {
        *dst[i] = tok_special_id(t, names[i]);
        if (*dst[i] < 0) {
            snprintf(err, errlen, "tokenizer_config.json: added_tokens_decoder has no %s; "
                     "the XTML chat format needs <|open|>, <|close|>, <|sep|> and <|end_of_msg|> "
                     "(use the checkpoint's own tokenizer files)", names[i]);
            return -1;
        }
    }
    ids->eos = tok_special_id(t, "[EOS]");
    return 0;
}

int xtml_effort_ok(const char *e) {
    return e && (!strcmp(e, "low") || !strcmp(e, "high") || !strcmp(e, "max"));
}

/* ---- segments ---- */

static int seg_add(XtmlSegs *s, const char *text, size_t len, int special) {
    if (special != 2 && len == 0) return 0;                 /* empty segments vanish */
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        XtmlSeg *nv = realloc(s->v, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        s->v = nv; s->cap = nc;
    }
    XtmlSeg *g = &s->v[s->n];
    memset(g, 0, sizeof *g);
    g->special = special;
    if (special != 2) {
        g->text = malloc(len + 1);
        if (!g->text) return -1;
        memcpy(g->text, text, len);
        g->text[len] = 0;
        g->len = len;
    }
    s->n++;
    return 0;
}
/* A segment of plain text (tokenized as text) or of markup (control tokens). */
static int add_text(XtmlSegs *s, const char *text) {
    return seg_add(s, text, strlen(text), 0);
}
static int add_markup(XtmlSegs *s, const char *markup) {
    return seg_add(s, markup, strlen(markup), 1);
}

static int attr(XtmlSegs *s, const char *key, const char *value) {
    size_t n = strlen(value), m = 0;
    char *esc = malloc(n * 6 + 1);
    if (!esc) return -1;
    for (size_t i = 0; i < n; i++) {
        if (value[i] == '&') { memcpy(esc + m, "&amp;", 5); m += 5; }
        else if (value[i] == '"') { memcpy(esc + m, "&quot;", 6); m += 6; }
        else esc[m++] = value[i];
    }
    char k[64];
    snprintf(k, sizeof k, " %s", key);
    int rc = add_text(s, k) || add_text(s, "=\"") || seg_add(s, esc, m, 0) ||
             add_text(s, "\"") ? -1 : 0;
    free(esc);
    return rc;
}

/* <|open|>TAG attrs<|sep|> */
static int open_el(XtmlSegs *s, const char *tag, const char *k1, const char *v1,
                   const char *k2, const char *v2) {
    if (add_markup(s, "<|open|>") || add_text(s, tag)) return -1;
    if (k1 && attr(s, k1, v1)) return -1;
    if (k2 && attr(s, k2, v2)) return -1;
    return add_markup(s, "<|sep|>");
}
static int close_el(XtmlSegs *s, const char *tag) {
    return add_markup(s, "<|close|>") || add_text(s, tag) || add_markup(s, "<|sep|>") ? -1 : 0;
}

/* Python str.strip() would leave nothing. */
static int blank(const char *s) {
    if (!s) return 1;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (cp == 0xFFFFFFFFu || !(tok_uflags(cp) & TOKU_PYSP)) return 0;
        i += (size_t)l;
    }
    return 1;
}

/* The closing markup of an assistant turn that stopped in `state`. */
static int close_from(XtmlSegs *s, int state) {
    switch (state) {
    case XP_THINK: if (close_el(s, "think")) return -1; /* fall through */
    case XP_BETWEEN:
        if (open_el(s, "response", NULL, NULL, NULL, NULL)) return -1; /* fall through */
    case XP_RESPONSE: if (close_el(s, "response")) return -1; /* fall through */
    case XP_AFTER_RESPONSE: if (close_el(s, "message")) return -1; /* fall through */
    default: return 0;
    }
}

static int assistant(XtmlSegs *s, const XtmlMsg *m, const XtmlOpts *o) {
    if (open_el(s, "message", "role", "assistant", NULL, NULL)) return -1;
    if (o->exact && m->gen_ids && m->gen_thinking == o->thinking) {
        if (open_el(s, o->thinking ? "think" : "response", NULL, NULL, NULL, NULL)) return -1;
        if (seg_add(s, NULL, 0, 2)) return -1;
        s->v[s->n - 1].ids = m->gen_ids;
        s->v[s->n - 1].n_ids = m->n_gen;
        if (close_from(s, o->thinking ? m->gen_state
                                      : (m->gen_state < XP_RESPONSE ? XP_RESPONSE : m->gen_state)))
            return -1;
    } else {
        if (o->thinking) {
            if (open_el(s, "think", NULL, NULL, NULL, NULL)) return -1;
            if (!blank(m->reasoning) && add_text(s, m->reasoning)) return -1;
            if (close_el(s, "think")) return -1;
        }
        if (open_el(s, "response", NULL, NULL, NULL, NULL)) return -1;
        if (m->content && add_text(s, m->content)) return -1;
        if (close_el(s, "response") || close_el(s, "message")) return -1;
    }
    return add_markup(s, "<|end_of_msg|>");
}

int xtml_segments(const XtmlMsg *msgs, int n, const XtmlOpts *o, XtmlSegs *out,
                  char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int rc = 0;
    if (o->thinking && o->effort) {
        if (!xtml_effort_ok(o->effort)) {
            snprintf(err, errlen, "thinking effort '%s' is not one of low, high, max", o->effort);
            return -1;
        }
        char body[sizeof EFFORT_BODY + 8];
        snprintf(body, sizeof body, EFFORT_BODY, o->effort);
        rc = open_el(out, "message", "role", "system", "type", "thinking-effort") ||
             add_text(out, body) || close_el(out, "message") ||
             add_markup(out, "<|end_of_msg|>");
    }
    for (int i = 0; i < n && !rc; i++) {
        const XtmlMsg *m = &msgs[i];
        if (!m->role || (strcmp(m->role, "system") && strcmp(m->role, "user") &&
                         strcmp(m->role, "assistant"))) {
            snprintf(err, errlen, "message %d: role '%s' is not system, user or assistant",
                     i, m->role ? m->role : "(none)");
            xtml_segs_free(out);
            return -1;
        }
        if (!strcmp(m->role, "assistant")) rc = assistant(out, m, o);
        else rc = open_el(out, "message", "role", m->role, NULL, NULL) ||
                  (m->content && add_text(out, m->content)) || close_el(out, "message") ||
                  add_markup(out, "<|end_of_msg|>");
    }
    if (!rc && o->gen_prompt)
        rc = open_el(out, "message", "role", "assistant", NULL, NULL) ||
             open_el(out, o->thinking ? "think" : "response", NULL, NULL, NULL, NULL);
    if (rc) {
        snprintf(err, errlen, "out of memory rendering the chat");
        xtml_segs_free(out); return -1;
    }
    return 0;
}

void xtml_segs_free(XtmlSegs *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i].text);
    free(s->v);
    memset(s, 0, sizeof *s);
}

char *xtml_segs_string(const XtmlSegs *s, const Tok *t, size_t *len) {
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (int i = 0; i < s->n; i++) {
        const XtmlSeg *g = &s->v[i];
        char *dec = NULL;
        const char *p = g->text;
        size_t l = g->len;
        if (g->special == 2) {
            dec = tok_decode(t, g->ids, (size_t)g->n_ids, &l, NULL); p = dec;
            if (!dec) { free(b); return NULL; }
        }
        if (n + l + 1 > cap) {
            while (n + l + 1 > cap) cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) { free(b); free(dec); return NULL; }
            b = nb;
        }
        memcpy(b + n, p, l);
        n += l;
        free(dec);
    }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

int xtml_segs_encode(const XtmlSegs *s, const Tok *t, int32_t **ids, size_t *nids) {
    size_t cap = 256, n = 0;
    int32_t *v = malloc(sizeof *v * cap);
    if (!v) return -1;
    for (int i = 0; i < s->n; i++) {
        const XtmlSeg *g = &s->v[i];
        size_t k = 0;
        int32_t *e = NULL;
        const int32_t *src;
        if (g->special == 2) { src = g->ids; k = (size_t)g->n_ids; }
        else {
            e = tok_encode(t, g->text, g->len, g->special, &k);
            if (!e) { free(v); return -1; }
            src = e;
        }
        if (n + k > cap) {
            while (n + k > cap) cap *= 2;
            int32_t *nv = realloc(v, sizeof *v * cap);
            if (!nv) { free(v); free(e); return -1; }
            v = nv;
        }
        if (k) memcpy(v + n, src, sizeof *v * k);
        n += k;
        free(e);
    }
    *ids = v; *nids = n;
    return 0;
}

int xtml_render_ids(const Tok *t, const XtmlMsg *msgs, int n, const XtmlOpts *o,
                    int32_t **ids, size_t *nids, char *err, size_t errlen) {
    XtmlSegs s;
    if (xtml_segments(msgs, n, o, &s, err, errlen)) return -1;
    int rc = xtml_segs_encode(&s, t, ids, nids);
    if (rc) snprintf(err, errlen, "out of memory encoding the chat");
    xtml_segs_free(&s);
    return rc;
}

/* ---- completion parser ---- */

void xtml_parser_init(XtmlParser *p, const Tok *t, const XtmlIds *ids, int thinking) {
    memset(p, 0, sizeof *p);
    p->tok = t; p->ids = *ids; p->thinking = thinking;
    p->state = thinking ? XP_THINK : XP_RESPONSE;
    p->end_id = -1;
}

void xtml_parser_free(XtmlParser *p) {
    free(p->think_ids); free(p->resp_ids);
    p->think_ids = p->resp_ids = NULL;
}

static int body_add(XtmlParser *p, const int32_t *ids, int n) {
    int32_t **v; size_t *len, *cap;
    if (p->state == XP_THINK) { v = &p->think_ids; len = &p->n_think; cap = &p->cap_think; }
    else if (p->state == XP_RESPONSE) { v = &p->resp_ids; len = &p->n_resp; cap = &p->cap_resp; }
    else return 0;
    if (*len + (size_t)n > *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        while (nc < *len + (size_t)n) nc *= 2;
        int32_t *nv = realloc(*v, sizeof *nv * nc);
        if (!nv) return -1;
        *v = nv; *cap = nc;
    }
    memcpy(*v + *len, ids, sizeof *ids * (size_t)n);
    *len += (size_t)n;
    return 0;
}

static int in_body(const XtmlParser *p) { return p->state == XP_THINK || p->state == XP_RESPONSE; }

/* Ids not taken as structure: kept as body text inside a body, dropped between. */
static int anomaly(XtmlParser *p, const int32_t *ids, int n, XtmlEvent *ev) {
    memmove(p->out, ids, sizeof *ids * (size_t)n);
    p->anomalies++;
    if (in_body(p) && body_add(p, p->out, n)) return -1;
    ev->kind = XE_ANOMALY; ev->ids = p->out; ev->n = n;
    return 1;
}

static int name_is(const XtmlParser *p, const char *name) {
    size_t want = strlen(name), got = 0;
    for (int i = 1; i + 1 < p->npend; i++) {        /* between OPEN|CLOSE and SEP */
        size_t l;
        const char *b = tok_token_bytes(p->tok, p->pend[i], &l);
        if (!b || got + l > want || memcmp(name + got, b, l)) return 0;
        got += l;
    }
    return got == want;
}

/* A complete marker pend[0..npend) followed by SEP: a transition, or an anomaly. */
static int marker(XtmlParser *p, XtmlEvent *ev) {
    int open = p->pend[0] == p->ids.open, next = -1;
    if (!open && p->state == XP_THINK && name_is(p, "think")) next = XP_BETWEEN;
    else if (open && p->state == XP_BETWEEN && name_is(p, "response")) next = XP_RESPONSE;
    else if (!open && p->state == XP_RESPONSE && name_is(p, "response")) next = XP_AFTER_RESPONSE;
    else if (!open && p->state == XP_AFTER_RESPONSE && name_is(p, "message"))
        next = XP_AFTER_MESSAGE;
    int n = p->npend;
    p->npend = 0;
    if (next < 0) return anomaly(p, p->pend, n, ev);
    p->state = next;
    ev->kind = XE_CHANNEL; ev->ids = NULL; ev->n = 0;
    return 1;
}

int xtml_parser_put(XtmlParser *p, int32_t id, XtmlEvent ev[2]) {
    int ne = 0, r;
    const XtmlIds *c = &p->ids;
    if (p->state == XP_DONE) return anomaly(p, &id, 1, ev);
    int is_end = id == c->eom || (c->eos >= 0 && id == c->eos);
    if (p->npend) {
        if (id == c->sep) {
            p->pend[p->npend++] = id;
            return marker(p, ev);
        }
        if (p->npend >= XTML_MAX_MARKER && id != c->open && id != c->close && !is_end) {
            p->pend[p->npend++] = id;               /* too long to be a marker */
            int n = p->npend;
            p->npend = 0;
            return anomaly(p, p->pend, n, ev);
        }
        if (id == c->open || id == c->close || is_end) {
            int n = p->npend;
            p->npend = 0;
            if ((r = anomaly(p, p->pend, n, &ev[ne])) < 0) return -1;
            ne += r;
        } else {
            p->pend[p->npend++] = id;
            return 0;
        }
    }
    if (is_end) {
        p->end_id = id;
        p->state = XP_DONE;
        ev[ne].kind = XE_END; ev[ne].ids = NULL; ev[ne].n = 0;
        return ne + 1;
    }
    if (id == c->open || id == c->close) { p->pend[0] = id; p->npend = 1; return ne; }
    if (id == c->sep || !in_body(p)) {
        if ((r = anomaly(p, &id, 1, &ev[ne])) < 0) return -1;
        return ne + r;
    }
    if (body_add(p, &id, 1)) return -1;
    p->out[0] = id;
    ev[ne].kind = p->state == XP_THINK ? XE_THINK : XE_RESPONSE;
    ev[ne].ids = p->out; ev[ne].n = 1;
    return ne + 1;
}

int xtml_parser_finish(XtmlParser *p) {
    int n = p->npend;
    p->npend = 0;
    return n;
}

/* Decoded body as valid UTF-8 text: ill-formed bytes become U+FFFD (as Python's
 * decode(errors="replace") in the reference tokenizer) and NUL bytes, which a C string
 * cannot hold, are dropped. The exact ids stay in the turn's record. */
static char *body_text(const Tok *t, const int32_t *ids, size_t n) {
    size_t len = 0, j = 0;
    char *s = tok_decode(t, ids, n, &len, NULL);
    if (!s) return NULL;
    char *o = malloc(len * 3 + 1);
    if (!o) { free(s); return NULL; }
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)s + i, len - i, &cp);
        if (cp == 0xFFFFFFFFu) { memcpy(o + j, "\xEF\xBF\xBD", 3); j += 3; }
        else if (cp != 0) { memcpy(o + j, s + i, (size_t)l); j += (size_t)l; }
        i += (size_t)l;
    }
    o[j] = 0;
    free(s);
    return o;
}
char *xtml_parser_reasoning(const XtmlParser *p) {
    return body_text(p->tok, p->think_ids, p->n_think);
}
char *xtml_parser_content(const XtmlParser *p) { return body_text(p->tok, p->resp_ids, p->n_resp); }
