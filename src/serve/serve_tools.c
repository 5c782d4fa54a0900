/* serve_tools.c — k3 serve's tools: `tools` and `tool_choice` validated into the XTML
 * tool declaration (docs/SERVE.md "Tools"), assistant `tool_calls` and `tool` messages of
 * a request, and the model's parsed calls written as OpenAI `tool_calls`. */
#include "serve.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 400; } while (0)

/* OpenAI's rule for a function name: 1-64 of a-z A-Z 0-9 _ - */
static int name_ok(const Json *n) {
    if (!n || n->type != JSON_STRING || n->len == 0 || n->len > 64) return 0;
    for (size_t i = 0; i < n->len; i++) {
        char c = n->str[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Function f (tools[i]) has strict: true: its parameters compiled once for the request
 * (none: any object), or a 400 naming the tool and the keyword that cannot be enforced. */
static int strict_add(ServeReq *r, const Json *f, int i, char *err, size_t errlen) {
    const Json *p = json_get(f, "parameters");
    const char *name = json_get(f, "name")->str;
    char e[512];
    JgSchema *jg = p ? jg_compile(p, e, sizeof e) : jg_any_object();
    if (!jg && !p) BAD("out of memory");
    if (!jg) BAD("tools[%d] '%s' is strict, but its parameters cannot be enforced: %s", i, name,
                 e);
    const char **nv = realloc(r->strict_name, (size_t)(r->n_strict + 1) * sizeof *nv);
    if (nv) r->strict_name = nv;
    JgSchema **jv = nv ? realloc(r->strict_jg, (size_t)(r->n_strict + 1) * sizeof *jv) : NULL;
    if (!jv) { jg_free(jg); BAD("out of memory"); }
    r->strict_jg = jv;
    r->strict_name[r->n_strict] = name; r->strict_jg[r->n_strict++] = jg;
    return 0;
}

const JgSchema *serve_strict_schema(const ServeReq *r, const char *name) {
    for (int i = 0; name && i < r->n_strict; i++)
        if (!strcmp(r->strict_name[i], name)) return r->strict_jg[i];
    return NULL;
}

void serve_req_tools_free(ServeReq *r) {
    for (int i = 0; i < r->n_strict; i++) jg_free(r->strict_jg[i]);
    free(r->strict_jg); free(r->strict_name);
    r->strict_jg = NULL; r->strict_name = NULL; r->n_strict = 0;
}

int serve_req_tools(ServeReq *r, const Json *d, char *err, size_t errlen) {
    static const char *const TOOL_KEYS[] = { "type", "function", NULL };
    static const char *const FN_KEYS[] = { "name", "description", "parameters", "strict", NULL };
    const Json *t = json_get(d, "tools"), *c = json_get(d, "tool_choice"), *j;
    int n = 0;
    if (t && t->type != JSON_NULL) {
        if (t->type != JSON_ARRAY) BAD("'tools' must be an array");
        if (t->len > 256) BAD("'tools' has over 256 entries");
        n = (int)t->len;
        for (int i = 0; i < n; i++) {
            const Json *o = t->items[i], *f = json_get(o, "function");
            char what[48];
            snprintf(what, sizeof what, "tools[%d]", i);
            if (o->type != JSON_OBJECT) BAD("tools[%d] must be an object", i);
            if (serve_only_keys(o, TOOL_KEYS, what, err, errlen)) return 400;
            if (!(j = json_get(o, "type")) || j->type != JSON_STRING || strcmp(j->str, "function"))
                BAD("tools[%d].type must be \"function\"", i);
            if (!f || f->type != JSON_OBJECT) BAD("tools[%d].function must be an object", i);
            snprintf(what, sizeof what, "tools[%d].function", i);
            if (serve_only_keys(f, FN_KEYS, what, err, errlen)) return 400;
            if (!name_ok(json_get(f, "name")))
                BAD("tools[%d].function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -", i);
            for (int k = 0; k < i; k++)
                if (!strcmp(json_get(json_get(t->items[k], "function"), "name")->str,
                            json_get(f, "name")->str))
                    BAD("tools[%d]: a second function named '%s'", i, json_get(f, "name")->str);
            if ((j = json_get(f, "description")) && j->type != JSON_STRING)
                BAD("tools[%d].function.description must be a string", i);
            if ((j = json_get(f, "parameters")) && j->type != JSON_OBJECT)
                BAD("tools[%d].function.parameters must be a JSON Schema object", i);
            if ((j = json_get(f, "strict")) && j->type != JSON_BOOL && j->type != JSON_NULL)
                BAD("tools[%d].function.strict must be true or false", i);
            if (j && j->type == JSON_BOOL && j->boolean && strict_add(r, f, i, err, errlen))
                return 400;
        }
    }
    if ((j = json_get(d, "parallel_tool_calls")) && j->type != JSON_BOOL && j->type != JSON_NULL)
        BAD("'parallel_tool_calls' must be true or false");
    r->tool_choice = XTC_AUTO;
    const Json *only = NULL;                        /* a named function */
    if (c && c->type == JSON_STRING) {
        if (!strcmp(c->str, "none")) r->tool_choice = XTC_NONE;
        else if (!strcmp(c->str, "required")) r->tool_choice = XTC_REQUIRED;
        else if (strcmp(c->str, "auto"))
            BAD("'tool_choice' must be auto, none, required or {\"type\": \"function\", "
                "\"function\": {\"name\": NAME}}");
    } else if (c && c->type == JSON_OBJECT) {
        static const char *const TC_KEYS[] = { "type", "function", NULL };
        static const char *const TCF_KEYS[] = { "name", NULL };
        const Json *f = json_get(c, "function");
        if (serve_only_keys(c, TC_KEYS, "tool_choice", err, errlen)) return 400;
        if (!(j = json_get(c, "type")) || j->type != JSON_STRING || strcmp(j->str, "function") ||
            !f || f->type != JSON_OBJECT || !json_get(f, "name") ||
            json_get(f, "name")->type != JSON_STRING)
            BAD("'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": NAME}}");
        if (serve_only_keys(f, TCF_KEYS, "tool_choice.function", err, errlen)) return 400;
        for (int i = 0; i < n && !only; i++)
            if (!strcmp(json_get(json_get(t->items[i], "function"), "name")->str,
                        json_get(f, "name")->str))
                only = t->items[i];
        if (!only) BAD("tool_choice names '%.64s', which is not among the tools",
                       json_get(f, "name")->str);
        r->tool_choice = XTC_REQUIRED;
    } else if (c && c->type != JSON_NULL) BAD("'tool_choice' must be a string or an object");
    if (!n) {
        if (r->tool_choice == XTC_REQUIRED) BAD("'tool_choice' \"required\" needs 'tools'");
        r->tool_choice = XTC_AUTO;                  /* nothing to call: nothing to say */
        return 0;
    }
    /* the declaration: every tool, or (a named tool_choice) that one */
    char *one = only ? xtml_pyjson(only, 1, 1) : NULL;
    if (one) {
        r->tools_json = malloc(strlen(one) + 3);
        if (r->tools_json) sprintf(r->tools_json, "[%s]", one);
        free(one);
    } else if (!only) r->tools_json = xtml_pyjson(t, 1, 1);
    if (!r->tools_json) BAD("out of memory");
    r->parse_tools = r->tool_choice != XTC_NONE;
    return 0;
}

/* messages[i].tool_calls of an assistant message into r->ext[i]. */
int serve_req_tool_calls(ServeReq *r, int i, const Json *tc, char *err, size_t errlen) {
    static const char *const TC_KEYS[] = { "id", "type", "function", NULL };
    static const char *const FN_KEYS[] = { "name", "arguments", NULL };
    if (!tc || tc->type == JSON_NULL) return 0;
    if (tc->type != JSON_ARRAY) BAD("messages[%d].tool_calls must be an array", i);
    if (tc->len == 0) return 0;
    if (tc->len > 256) BAD("messages[%d].tool_calls has over 256 entries", i);
    XtmlToolCall *v = calloc(tc->len, sizeof *v);
    if (!v) BAD("out of memory");
    r->ext[i].calls = v; r->ext[i].n_calls = (int)tc->len;
    for (size_t k = 0; k < tc->len; k++) {
        const Json *o = tc->items[k], *f = json_get(o, "function"), *j;
        char what[64];
        snprintf(what, sizeof what, "messages[%d].tool_calls[%zu]", i, k);
        if (o->type != JSON_OBJECT) BAD("%s must be an object", what);
        if (serve_only_keys(o, TC_KEYS, what, err, errlen)) return 400;
        if ((j = json_get(o, "id")) && j->type != JSON_NULL) {
            if (j->type != JSON_STRING || strlen(j->str) != j->len) BAD("%s.id must be a string",
                                                                        what);
            v[k].id = j->str;
        }
        if ((j = json_get(o, "type")) && (j->type != JSON_STRING || strcmp(j->str, "function")))
            BAD("%s.type must be \"function\"", what);
        if (!f || f->type != JSON_OBJECT) BAD("%s.function must be an object", what);
        snprintf(what, sizeof what, "messages[%d].tool_calls[%zu].function", i, k);
        if (serve_only_keys(f, FN_KEYS, what, err, errlen)) return 400;
        if (!name_ok(json_get(f, "name")))
            BAD("%s.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -", what);
        v[k].name = json_get(f, "name")->str;
        if ((j = json_get(f, "arguments")) && j->type != JSON_NULL) {
            if (j->type != JSON_STRING || strlen(j->str) != j->len)
                BAD("%s.arguments must be a string (the arguments' JSON text)", what);
            v[k].arguments = j->str;
        }
    }
    return 0;
}

/* The parsed calls that completed, as OpenAI tool_calls entries from call `from` on:
 * [{"index": K, "id", "type": "function", "function": {"name", "arguments"}}, ...]
 * (index only in a stream's delta). Returns how many were written. */
int serve_tool_calls_json(Buf *b, const XtmlParser *p, uint64_t job, int from, int delta) {
    int n = 0;
    buf_str(b, "[");
    for (int k = from; k < p->n_calls && p->calls[k].complete; k++) {
        char *a = xtml_call_arguments(p, &p->calls[k]);
        if (!a) { b->oom = 1; break; }
        if (n) buf_str(b, ", ");
        if (delta) buf_fmt(b, "{\"index\": %d, ", k);
        else buf_str(b, "{");
        buf_fmt(b, "\"id\": \"call_%llu_%d\", \"type\": \"function\", \"function\": {\"name\": ",
                (unsigned long long)job, k);
        buf_json(b, p->calls[k].name, strlen(p->calls[k].name));
        buf_str(b, ", \"arguments\": ");
        buf_json(b, a, strlen(a));
        buf_str(b, "}}");
        free(a);
        n++;
    }
    buf_str(b, "]");
    return n;
}
