/* xtml.c — XTML renderer (include/xtml.h; the completion parser is xtml_parse.c,
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

/* <|open|>TAG KEY="VALUE"...<|sep|>: kv holds n key, value pairs; a NULL key is skipped. */
static int open_kv(XtmlSegs *s, const char *tag, const char *const *kv, int n) {
    if (add_markup(s, "<|open|>") || add_text(s, tag)) return -1;
    for (int i = 0; i < n; i++)
        if (kv[2 * i] && attr(s, kv[2 * i], kv[2 * i + 1])) return -1;
    return add_markup(s, "<|sep|>");
}
static int open_el(XtmlSegs *s, const char *tag, const char *k1, const char *v1,
                   const char *k2, const char *v2) {
    const char *kv[4] = { k1, v1, k2, v2 };
    return open_kv(s, tag, kv, 2);
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

/* Nonempty: Python's `if message.get("name")`. */
static const char *opt(const char *v) { return v && *v ? v : NULL; }

/* <|open|>tools<|sep|> with one call element per tool call (§6.4): an argument element
 * per key of the arguments object, or a json block for arguments that are not JSON. */
static int tool_calls(XtmlSegs *s, const XtmlMsgExt *m, int mi, char *err, size_t errlen) {
    if (open_el(s, "tools", NULL, NULL, NULL, NULL)) return -1;
    for (int c = 0; c < m->n_calls; c++) {
        const XtmlToolCall *tc = &m->calls[c];
        char idx[16];
        snprintf(idx, sizeof idx, "%d", c + 1);
        if (!tc->name) {
            snprintf(err, errlen, "message %d: tool_calls[%d] has no function name", mi, c);
            return -2;
        }
        if (open_el(s, "call", "tool", tc->name, "index", idx)) return -1;
        const char *a = tc->arguments;
        char jerr[128];
        Json *j = blank(a) ? NULL : json_parse(a, strlen(a), jerr, sizeof jerr);
        if (!blank(a) && !j) {                          /* kept as written */
            if (open_el(s, "json", "type", "object", NULL, NULL) || add_text(s, a) ||
                close_el(s, "json"))
                return -1;
        } else if (j && j->type != JSON_OBJECT) {
            json_free(j);
            snprintf(err, errlen, "message %d: tool_calls[%d].function.arguments must be a JSON "
                     "object", mi, c);
            return -2;
        } else if (j) {
            int rc = 0;
            for (size_t k = 0; k < j->len && !rc; k++) {
                size_t first = 0;
                while (strcmp(j->keys[first], j->keys[k])) first++;
                if (first < k) continue;                /* a dict: first place, last value */
                const Json *v = json_get(j, j->keys[k]);
                static const char *const TY[] = { "null", "boolean", "number", "string",
                                                  "array", "object" };
                char *txt = v->type == JSON_STRING ? NULL : xtml_pyjson(v, 0, 0);
                if (v->type != JSON_STRING && !txt) { rc = -1; break; }
                rc = open_el(s, "argument", "key", j->keys[k], "type", TY[v->type]) ||
                     seg_add(s, txt ? txt : v->str, txt ? strlen(txt) : v->len, 0) ||
                     close_el(s, "argument") ? -1 : 0;
                free(txt);
            }
            json_free(j);
            if (rc) return -1;
        }
        if (close_el(s, "call")) return -1;
    }
    return close_el(s, "tools");
}

static int assistant(XtmlSegs *s, const XtmlMsg *m, const XtmlMsgExt *x, const XtmlOpts *o,
                     int mi, char *err, size_t errlen) {
    if (open_el(s, "message", "role", "assistant", opt(x->name) ? "name" : NULL, x->name))
        return -1;
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
        if (close_el(s, "response")) return -1;
        if (x->n_calls) {
            int rc = tool_calls(s, x, mi, err, errlen);
            if (rc) return rc;
        }
        if (close_el(s, "message")) return -1;
    }
    return add_markup(s, "<|end_of_msg|>");
}

/* <|open|>message role="system" type="TYPE"<|sep|>BODY<|close|>message<|sep|><|end_of_msg|> */
static int internal(XtmlSegs *s, const char *type, const char *body) {
    return open_el(s, "message", "role", "system", "type", type) || add_text(s, body) ||
           close_el(s, "message") || add_markup(s, "<|end_of_msg|>") ? -1 : 0;
}

/* The order tool messages are rendered in: each run of consecutive tool messages is put
 * into the call order of the last assistant's tool_calls by tool_call_id (its first call
 * with that id), stable, when every message of the run names a call; else it stays as
 * given. byname[i]: the matched call's name (it wins over the message's own). */
static void tool_order(const XtmlMsg *msgs, const XtmlMsgExt *x, int n, int *ord,
                       const char **byname) {
    const XtmlMsgExt *last = NULL;
    for (int i = 0; i < n; i++) { ord[i] = i; byname[i] = NULL; }
    int *pos = malloc(sizeof *pos * (size_t)(n + 1));
    if (!pos) return;                               /* as given */
    for (int i = 0; i < n;) {
        if (strcmp(msgs[i].role, "tool")) {
            if (!strcmp(msgs[i].role, "assistant")) last = &x[i];
            i++; continue;
        }
        int j = i, all = 1;
        for (; j < n && !strcmp(msgs[j].role, "tool"); j++) {
            pos[j] = -1;
            for (int c = 0; last && x[j].tool_call_id && c < last->n_calls && pos[j] < 0; c++)
                if (last->calls[c].id && !strcmp(last->calls[c].id, x[j].tool_call_id))
                    pos[j] = c;
            all &= pos[j] >= 0;
        }
        if (all) {
            for (int a = i + 1; a < j; a++) {           /* insertion sort: stable */
                int v = ord[a], b = a;
                while (b > i && pos[ord[b - 1]] > pos[v]) { ord[b] = ord[b - 1]; b--; }
                ord[b] = v;
            }
            for (int a = i; a < j; a++) byname[a] = last->calls[pos[a]].name;
        }
        i = j;
    }
    free(pos);
}

int xtml_segments(const XtmlMsg *msgs, int n, const XtmlOpts *o, XtmlSegs *out,
                  char *err, size_t errlen) {
    return xtml_segments_tools(msgs, n, o, NULL, out, err, errlen);
}

int xtml_segments_tools(const XtmlMsg *msgs, int n, const XtmlOpts *o, const XtmlTools *t,
                        XtmlSegs *out, char *err, size_t errlen) {
    static const XtmlMsgExt NONE;
    static const XtmlTools NO_TOOLS;
    if (!t) t = &NO_TOOLS;
    memset(out, 0, sizeof *out);
    int rc = 0;
    if (o->thinking && o->effort && !xtml_effort_ok(o->effort)) {
        snprintf(err, errlen, "thinking effort '%s' is not one of low, high, max", o->effort);
        return -1;
    }
    if (t->tools) {
        static const char HEAD[] = "# Tools\nHere are the available tools, described in "
                                   "JSONSchema.\n\n```json\n";
        size_t l = strlen(t->tools);
        char *body = malloc(sizeof HEAD + l + 8);
        if (!body) rc = -1;
        else {
            snprintf(body, sizeof HEAD + l + 8, "%s%s\n```", HEAD, t->tools);
            rc = internal(out, "tool-declare", body);
            free(body);
        }
    }
    if (!rc && o->thinking && o->effort) {
        char body[sizeof EFFORT_BODY + 8];
        snprintf(body, sizeof body, EFFORT_BODY, o->effort);
        rc = open_el(out, "message", "role", "system", "type", "thinking-effort") ||
             add_text(out, body) || close_el(out, "message") ||
             add_markup(out, "<|end_of_msg|>");
    }
    for (int i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (!r || (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") &&
                   strcmp(r, "tool"))) {
            snprintf(err, errlen, "message %d: role '%s' is not system, user, assistant or tool",
                     i, r ? r : "(none)");
            xtml_segs_free(out);
            return -1;
        }
    }
    int *ord = malloc(sizeof *ord * (size_t)(n + 1));
    const char **byname = malloc(sizeof *byname * (size_t)(n + 1));
    if (!ord || !byname) rc = -1;
    else if (t->ext) tool_order(msgs, t->ext, n, ord, byname);
    else for (int i = 0; i < n; i++) { ord[i] = i; byname[i] = NULL; }
    const XtmlMsgExt *last = NULL;                  /* the last assistant message */
    int tool_index = 0;
    for (int k = 0; k < n && !rc; k++) {
        const XtmlMsg *m = &msgs[ord[k]];
        const XtmlMsgExt *x = t->ext ? &t->ext[ord[k]] : &NONE;
        if (!strcmp(m->role, "assistant")) {
            rc = assistant(out, m, x, o, ord[k], err, errlen);
            last = x; tool_index = 0;
        } else if (!strcmp(m->role, "tool")) {
            /* index counts tool messages since the last assistant message; the name is the
             * matched call's, else the message's, else the call at that position */
            const char *name = byname[k] ? byname[k] : x->tool;
            tool_index++;
            if (!name && last && tool_index <= last->n_calls)
                name = last->calls[tool_index - 1].name;
            if (!name) {
                snprintf(err, errlen, "message %d: a tool message needs its tool's name: a "
                         "tool_call_id of the last assistant message's tool_calls, or name",
                         ord[k]);
                rc = -2; break;
            }
            char idx[16];
            snprintf(idx, sizeof idx, "%d", tool_index);
            const char *kv[6] = { "role", "tool", "tool", name, "index", idx };
            rc = open_kv(out, "message", kv, 3) || (m->content && add_text(out, m->content)) ||
                 close_el(out, "message") || add_markup(out, "<|end_of_msg|>") ? -1 : 0;
        } else
            rc = open_el(out, "message", "role", m->role, opt(x->name) ? "name" : NULL,
                         x->name) ||
                 (m->content && add_text(out, m->content)) || close_el(out, "message") ||
                 add_markup(out, "<|end_of_msg|>");
    }
    free(ord); free(byname);
    if (rc == -2) { xtml_segs_free(out); return -1; }
    if (!rc && t->tool_choice == XTC_REQUIRED)
        rc = internal(out, "tool-choice", "The system is invoked with `tool_choice=required`.\n"
                      "You MUST call tools in the next message.");
    else if (!rc && t->tool_choice == XTC_NONE)
        rc = internal(out, "tool-choice", "The system is invoked with `tool_choice=none`.\n"
                      "You MUST NOT call any tools in the next message.");
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
    return xtml_render_ids_tools(t, msgs, n, o, NULL, ids, nids, err, errlen);
}

int xtml_render_ids_tools(const Tok *t, const XtmlMsg *msgs, int n, const XtmlOpts *o,
                          const XtmlTools *tl, int32_t **ids, size_t *nids, char *err,
                          size_t errlen) {
    XtmlSegs s;
    if (xtml_segments_tools(msgs, n, o, tl, &s, err, errlen)) return -1;
    int rc = xtml_segs_encode(&s, t, ids, nids);
    if (rc) snprintf(err, errlen, "out of memory encoding the chat");
    xtml_segs_free(&s);
    return rc;
}

