/* xtml_parse.c — the XTML completion parser (include/xtml.h, docs/TOKENIZER.md §6.5):
 * ids the model generated after the generation prompt -> channels, and with tools on the
 * tools channel -> tool calls. Driven by control ids only. */
#include "xtml.h"
#include "strbuf.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- completion parser ---- */

void xtml_parser_init(XtmlParser *p, const Tok *t, const XtmlIds *ids, int thinking) {
    memset(p, 0, sizeof *p);
    p->tok = t; p->ids = *ids; p->thinking = thinking;
    p->state = thinking ? XP_THINK : XP_RESPONSE;
    p->end_id = -1;
}

void xtml_parser_tools(XtmlParser *p) { p->tools = 1; }

void xtml_parser_free(XtmlParser *p) {
    free(p->think_ids); free(p->resp_ids);
    p->think_ids = p->resp_ids = NULL;
    for (int c = 0; c < p->n_calls; c++) {
        XtmlCall *k = &p->calls[c];
        for (int a = 0; a < k->n_args; a++) {
            free(k->args[a].key); free(k->args[a].type); free(k->args[a].ids);
        }
        free(k->args); free(k->name);
    }
    free(p->calls);
    p->calls = NULL; p->n_calls = 0;
}

static XtmlArg *cur_arg(XtmlParser *p) {
    XtmlCall *k = &p->calls[p->n_calls - 1];
    return &k->args[k->n_args - 1];
}

static int body_add(XtmlParser *p, const int32_t *ids, int n) {
    int32_t **v; size_t *len, *cap;
    if (p->state == XP_THINK) { v = &p->think_ids; len = &p->n_think; cap = &p->cap_think; }
    else if (p->state == XP_RESPONSE) { v = &p->resp_ids; len = &p->n_resp; cap = &p->cap_resp; }
    else if (p->state == XP_ARG || p->state == XP_JSON) {
        XtmlArg *a = cur_arg(p);
        v = &a->ids; len = &a->n; cap = &a->cap;
    } else return 0;
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

static int in_body(const XtmlParser *p) {
    return p->state == XP_THINK || p->state == XP_RESPONSE || p->state == XP_ARG ||
           p->state == XP_JSON;
}

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

/* A tag with attributes, as the renderer writes it: TAG( KEY="VALUE")*, the values
 * unescaped (&quot; &amp;). The marker's text goes into buf; up to 2 attributes. */
typedef struct { char *tag, *key[2], *val[2]; int n; } Tag;
static int parse_tag(const XtmlParser *p, char *buf, size_t cap, Tag *t) {
    size_t n = 0;
    for (int i = 1; i + 1 < p->npend; i++) {
        size_t l;
        const char *b = tok_token_bytes(p->tok, p->pend[i], &l);
        if (!b || n + l + 1 > cap) return -1;
        memcpy(buf + n, b, l);
        n += l;
    }
    buf[n] = 0;
    if (memchr(buf, 0, n)) return -1;
    memset(t, 0, sizeof *t);
    t->tag = buf;
    char *q = strchr(buf, ' ');
    while (q) {
        *q++ = 0;
        char *eq = strstr(q, "=\"");
        if (!eq || eq == q || t->n == 2) return -1;
        *eq = 0;
        if (strchr(q, ' ') || strchr(q, '"')) return -1;
        char *v = eq + 2, *end = strchr(v, '"'), *w = v;
        if (!end) return -1;
        for (char *r = v; r < end;) {
            if (!strncmp(r, "&quot;", 6)) { *w++ = '"'; r += 6; }
            else if (!strncmp(r, "&amp;", 5)) { *w++ = '&'; r += 5; }
            else *w++ = *r++;
        }
        t->key[t->n] = q; t->val[t->n++] = v;
        char *after = end + 1;
        *w = 0;
        if (*after && *after != ' ') return -1;
        q = *after ? after : NULL;
    }
    return *t->tag ? 0 : -1;
}
static const char *tag_attr(const Tag *t, const char *k) {
    for (int i = 0; i < t->n; i++) if (!strcmp(t->key[i], k)) return t->val[i];
    return NULL;
}

/* A marker of the tools channel: the next state, or -1 (an anomaly). */
static int tool_marker(XtmlParser *p, int open) {
    char buf[XTML_MAX_ATTR_MARKER * 8];
    Tag t;
    if (parse_tag(p, buf, sizeof buf, &t)) return -1;
    int st = p->state, bare = t.n == 0;
    if (open && st == XP_AFTER_RESPONSE && bare && !strcmp(t.tag, "tools")) return XP_TOOLS;
    if (!open && st == XP_TOOLS && bare && !strcmp(t.tag, "tools")) return XP_AFTER_TOOLS;
    if (!open && st == XP_AFTER_TOOLS && bare && !strcmp(t.tag, "message"))
        return XP_AFTER_MESSAGE;
    if (!open && st == XP_CALL && bare && !strcmp(t.tag, "call")) {
        p->calls[p->n_calls - 1].complete = 1;
        return XP_TOOLS;
    }
    if (!open && st == XP_ARG && bare && !strcmp(t.tag, "argument")) return XP_CALL;
    if (!open && st == XP_JSON && bare && !strcmp(t.tag, "json")) return XP_CALL;
    if (open && st == XP_TOOLS && !strcmp(t.tag, "call") && tag_attr(&t, "tool")) {
        if (p->n_calls == p->cap_calls) {
            int nc = p->cap_calls ? 2 * p->cap_calls : 4;
            XtmlCall *nv = realloc(p->calls, sizeof *nv * (size_t)nc);
            if (!nv) return -2;
            p->calls = nv; p->cap_calls = nc;
        }
        XtmlCall *k = &p->calls[p->n_calls];
        memset(k, 0, sizeof *k);
        if (!(k->name = strdup(tag_attr(&t, "tool")))) return -2;
        p->n_calls++;
        return XP_CALL;
    }
    int arg = !strcmp(t.tag, "argument") && tag_attr(&t, "key") && tag_attr(&t, "type");
    int json = !strcmp(t.tag, "json");
    if (open && st == XP_CALL && (arg || json)) {
        XtmlCall *k = &p->calls[p->n_calls - 1];
        if (k->n_args == k->cap_args) {
            int nc = k->cap_args ? 2 * k->cap_args : 4;
            XtmlArg *nv = realloc(k->args, sizeof *nv * (size_t)nc);
            if (!nv) return -2;
            k->args = nv; k->cap_args = nc;
        }
        XtmlArg *a = &k->args[k->n_args];
        memset(a, 0, sizeof *a);
        k->n_args++;
        if (arg && (!(a->key = strdup(tag_attr(&t, "key"))) ||
                    !(a->type = strdup(tag_attr(&t, "type")))))
            return -2;
        return arg ? XP_ARG : XP_JSON;
    }
    return -1;
}

/* A complete marker pend[0..npend) followed by SEP: a transition, or an anomaly. */
static int marker(XtmlParser *p, XtmlEvent *ev) {
    int open = p->pend[0] == p->ids.open, next = -1;
    if (p->tools && (p->state >= XP_TOOLS || (open && p->state == XP_AFTER_RESPONSE))) {
        next = tool_marker(p, open);
        if (next == -2) return -1;
    } else if (!open && p->state == XP_THINK && name_is(p, "think")) next = XP_BETWEEN;
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
        int most = p->state == XP_TOOLS || p->state == XP_CALL ? XTML_MAX_ATTR_MARKER
                                                                : XTML_MAX_MARKER;
        if (p->npend >= most && id != c->open && id != c->close && !is_end) {
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
    ev[ne].kind = p->state == XP_THINK ? XE_THINK : p->state == XP_RESPONSE ? XE_RESPONSE
                                                                          : XE_TOOL;
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

/* t as a JSON string literal, or as it is when as_is and it is JSON. */
static void str_json(Buf *s, const char *t, int as_is) {
    char jerr[64];
    if (as_is) {
        Json *j = json_parse(t, strlen(t), jerr, sizeof jerr);
        json_free(j);
        if (j) { buf_str(s, t); return; }
    }
    buf_json(s, t, strlen(t));
}

char *xtml_call_arguments(const XtmlParser *p, const XtmlCall *c) {
    for (int i = 0; i < c->n_args; i++)                 /* a json block: as written */
        if (!c->args[i].key) return body_text(p->tok, c->args[i].ids, c->args[i].n);
    Buf s = { 0 };
    buf_str(&s, "{");
    for (int i = 0; i < c->n_args; i++) {
        const XtmlArg *a = &c->args[i];
        char *v = body_text(p->tok, a->ids, a->n);
        if (!v) { s.oom = 1; break; }
        if (i) buf_str(&s, ", ");
        str_json(&s, a->key, 0);
        buf_str(&s, ": ");
        str_json(&s, v, strcmp(a->type, "string") != 0);
        free(v);
    }
    buf_str(&s, "}");
    if (s.oom) { free(s.b); return NULL; }
    return s.b;
}
