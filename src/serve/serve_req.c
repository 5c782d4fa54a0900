/* serve_req.c — a /v1/chat/completions or /v1/completions body validated into a
 * ServeReq: every field's type and range checked, unknown fields refused (a typo must not
 * silently change the reply), each refusal a message naming the field. No engine here, so
 * the validator is fuzzed on its own (tests/c/test_fuzz_http.c). */
#include "serve.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return 400; } while (0)

/* Fields accepted and ignored, or accepted only at their neutral value (checked below). */
static const char *const CHAT_KEYS[] = {
    "model", "messages", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens",
    "max_completion_tokens", "stop", "stream", "stream_options", "reasoning_effort",
    "chat_template_kwargs", "n", "user", "presence_penalty", "frequency_penalty", "logprobs",
    "response_format", "metadata", "store", "tools", "tool_choice", "parallel_tool_calls",
    "top_logprobs", "logit_bias", "repetition_penalty", "repeat_penalty", "repeat_last_n",
    "grammar", NULL };
static const char *const COMPL_KEYS[] = {
    "model", "prompt", "temperature", "top_p", "top_k", "min_p", "seed", "max_tokens", "stop",
    "stream", "stream_options", "n", "user", "presence_penalty", "frequency_penalty",
    "logprobs", "echo", "response_format",
    "logit_bias", "repetition_penalty", "repeat_penalty", "repeat_last_n", "grammar", NULL };

static int known(const char *const *keys, const char *k) {
    for (int i = 0; keys[i]; i++) if (!strcmp(keys[i], k)) return 1;
    return 0;
}

static int num(const Json *j, const char *name, double lo, double hi, double *out, char *err,
               size_t errlen) {
    if (!j || j->type == JSON_NULL) return 0;
    if (j->type != JSON_NUMBER) BAD("'%s' must be a number, not %s", name, json_type_name(j->type));
    if (!(j->number >= lo && j->number <= hi)) BAD("'%s' must be in [%g, %g]", name, lo, hi);
    *out = j->number;
    return 0;
}
static int integer(const Json *j, const char *name, int64_t lo, int64_t hi, int64_t *out,
                   char *err, size_t errlen) {
    if (!j || j->type == JSON_NULL) return 0;
    if (j->type != JSON_NUMBER || !j->is_integer) BAD("'%s' must be an integer", name);
    if (j->integer < lo || j->integer > hi)
        BAD("'%s' must be in [%lld, %lld]", name, (long long)lo, (long long)hi);
    *out = j->integer;
    return 0;
}
static int boolean(const Json *j, const char *name, int *out, char *err, size_t errlen) {
    if (!j || j->type == JSON_NULL) return 0;
    if (j->type != JSON_BOOL) BAD("'%s' must be true or false", name);
    *out = j->boolean;
    return 0;
}
int serve_str_ok(const Json *j) {
    return j && j->type == JSON_STRING && strlen(j->str) == j->len;
}

const char *serve_type_of(const Json *o) {
    const Json *t = json_get(o, "type");
    return t && t->type == JSON_STRING ? t->str : NULL;
}

const char *serve_unknown_key(const Json *o, const char *const *keys) {
    for (size_t i = 0; i < o->len; i++) {
        int k = 0;
        while (keys[k] && strcmp(keys[k], o->keys[i])) k++;
        if (!keys[k]) return o->keys[i];
    }
    return NULL;
}

int serve_only_keys(const Json *o, const char *const *keys, const char *what, char *err,
                    size_t errlen) {
    const char *k = serve_unknown_key(o, keys);
    if (k) BAD("%s: unknown field '%.60s'", what, k);
    return 0;
}

int serve_number(Buf *o, const Json *d, const char *key, const char *as, double lo, double hi,
                 int integer, char *err, size_t errlen) {
    const Json *j = json_get(d, key);
    if (!j || j->type == JSON_NULL) return 0;
    if (j->type != JSON_NUMBER || (integer && !j->is_integer))
        BAD("'%s' must be %s", key, integer ? "an integer" : "a number");
    if (!(j->number >= lo && j->number <= hi)) BAD("'%s' must be in [%g, %g]", key, lo, hi);
    if (integer) buf_fmt(o, ", \"%s\": %lld", as, (long long)j->integer);
    else buf_fmt(o, ", \"%s\": %.17g", as, j->number);
    return 0;
}

/* An image_url part: {"type": "image_url", "image_url": {"url": DATA_URL[, "detail": ...]}}
 * (the url also as a plain string), its bytes kept in r (decoded when the engine takes the
 * request). http(s) URLs are refused: the server does not fetch; a path or file:// URL is
 * read only with --image-dir (serve_image_file.c). */
static int image_part(ServeReq *r, const Json *p, int i, size_t k, char *err, size_t errlen) {
    static const char *const PART[] = { "type", "image_url", NULL },
                             *URL[] = { "url", "detail", NULL };
    char what[64];
    snprintf(what, sizeof what, "messages[%d].content[%zu]", i, k);
    if (serve_only_keys(p, PART, what, err, errlen)) return -1;
    const Json *u = json_get(p, "image_url");
    if (u && u->type == JSON_OBJECT) {
        snprintf(what, sizeof what, "messages[%d].content[%zu].image_url", i, k);
        if (serve_only_keys(u, URL, what, err, errlen)) return -1;
        const Json *d = json_get(u, "detail");
        if (d && d->type != JSON_STRING && d->type != JSON_NULL)
            BAD("%s.detail must be a string (K3 has no detail setting: it is ignored)", what);
        u = json_get(u, "url");
    }
    if (!u || !serve_str_ok(u))
        BAD("messages[%d].content[%zu].image_url.url must be a string: a data: URL "
            "(data:image/png;base64,...)", i, k);
    if (r->n_img >= SERVE_MAX_IMAGES)
        BAD("messages[%d].content[%zu]: more than %d images in a request", i, k,
            SERVE_MAX_IMAGES);
    uint8_t *bytes;
    size_t n;
    int file;
    char why[512];
    if (serve_image_src(u->str, u->len, &bytes, &n, &file, why, sizeof why))
        BAD("messages[%d].content[%zu].image_url.url: %s", i, k, why);
    uint8_t **v = realloc(r->img, sizeof *v * (size_t)(r->n_img + 1));
    if (v) r->img = v;
    size_t *vn = v ? realloc(r->img_n, sizeof *vn * (size_t)(r->n_img + 1)) : NULL;
    if (vn) r->img_n = vn;
    if (!v || !vn) { free(bytes); BAD("out of memory"); }
    r->img[r->n_img] = bytes;
    r->img_n[r->n_img++] = n;
    return 0;
}

/* A message's content: a string, or an array of {"type":"text","text":...} and image_url
 * parts (each image's place a placeholder, K3_VISION.md §5.2). */
static int content(ServeReq *r, const Json *c, int i, const char **out, char *err,
                   size_t errlen) {
    if (!c || c->type == JSON_NULL) { *out = NULL; return 0; }
    if (c->type == JSON_STRING) {
        if (!serve_str_ok(c)) BAD("messages[%d].content contains a NUL character", i);
        *out = c->str; return 0;
    }
    if (c->type != JSON_ARRAY) BAD("messages[%d].content must be a string or an array", i);
    Buf b = { 0 };
    buf_add(&b, "", 0);
    for (size_t k = 0; k < c->len; k++) {
        const Json *p = c->items[k], *ty = json_get(p, "type"), *tx = json_get(p, "text");
        const char *t = p->type == JSON_OBJECT ? serve_type_of(p) : NULL;
        if (t && !strcmp(t, "image_url")) {
            if (image_part(r, p, i, k, err, errlen)) { buf_free(&b); return 400; }
            buf_add(&b, K3_IMAGE_PLACEHOLDER, strlen(K3_IMAGE_PLACEHOLDER));
            continue;
        }
        if (t && (!strcmp(t, "image") || !strcmp(t, "input_image"))) {
            buf_free(&b);
            BAD("messages[%d].content[%zu]: an image goes in a part {\"type\": \"image_url\", "
                "\"image_url\": {\"url\": \"data:image/png;base64,...\"}}", i, k);
        }
        if (p->type != JSON_OBJECT || !ty || ty->type != JSON_STRING || strcmp(ty->str, "text") ||
            !tx || !serve_str_ok(tx)) {
            buf_free(&b);
            BAD("messages[%d].content[%zu] must be {\"type\": \"text\", \"text\": STRING} "
                "(k3 serves text only)", i, k);
        }
        buf_add(&b, tx->str, tx->len);
    }
    char **np = realloc(r->parts, sizeof *np * (size_t)(r->n_parts + 1));
    if (b.oom || !np) { buf_free(&b); BAD("out of memory"); }
    r->parts = np;
    r->parts[r->n_parts++] = b.b;
    *out = b.b;
    return 0;
}

static int messages(ServeReq *r, const Json *m, char *err, size_t errlen) {
    if (!m) BAD("'messages' is required");
    if (m->type != JSON_ARRAY) BAD("'messages' must be an array");
    if (m->len == 0) BAD("'messages' must not be empty");
    if (m->len > 100000) BAD("'messages' has over 100000 entries");
    r->msgs = calloc(m->len, sizeof *r->msgs);
    r->ext = calloc(m->len, sizeof *r->ext);
    if (!r->msgs || !r->ext) BAD("out of memory");
    r->n_msgs = (int)m->len;
    for (int i = 0; i < r->n_msgs; i++) {
        const Json *o = m->items[i];
        if (o->type != JSON_OBJECT) BAD("messages[%d] must be an object", i);
        const Json *role = json_get(o, "role");
        if (!role || role->type != JSON_STRING) BAD("messages[%d].role must be a string", i);
        const char *ro = role->str;
        if (!strcmp(ro, "function"))
            BAD("messages[%d]: role 'function' (the deprecated function calling) is not "
                "supported; use tool_calls and 'tool' messages", i);
        if (!strcmp(ro, "developer")) ro = "system";
        int tool = !strcmp(ro, "tool"), asst = !strcmp(ro, "assistant");
        if (strcmp(ro, "system") && strcmp(ro, "user") && !asst && !tool)
            BAD("messages[%d].role '%.40s' is not system, developer, user, assistant or tool",
                i, ro);
        for (size_t k = 0; k < o->len; k++) {
            const char *key = o->keys[k];
            int ok = !strcmp(key, "role") || !strcmp(key, "content") || !strcmp(key, "name") ||
                     (asst && (!strcmp(key, "reasoning_content") || !strcmp(key, "refusal") ||
                               !strcmp(key, "tool_calls"))) ||
                     (tool && !strcmp(key, "tool_call_id"));
            if (!ok) BAD("messages[%d]: unknown field '%.60s' for a %s message", i, key, ro);
        }
        const Json *c = json_get(o, "content");
        if (!c && !asst) BAD("messages[%d].content is required", i);
        r->msgs[i].role = ro;
        if (serve_req_tool_calls(r, i, json_get(o, "tool_calls"), err, errlen)) return 400;
        const Json *id = json_get(o, "tool_call_id");
        if (id && id->type != JSON_NULL) {
            if (!serve_str_ok(id)) BAD("messages[%d].tool_call_id must be a string", i);
            r->ext[i].tool_call_id = id->str;
        }
        const int img0 = r->n_img;
        if (content(r, c, i, &r->msgs[i].content, err, errlen)) return 400;
        if (r->n_img > img0 && strcmp(ro, "user"))
            BAD("messages[%d]: images are taken in user messages only (the %s message has %d)",
                i, ro, r->n_img - img0);
        const Json *rc = json_get(o, "reasoning_content");
        if (rc && rc->type != JSON_NULL) {
            if (strcmp(ro, "assistant"))
                BAD("messages[%d]: reasoning_content on a %s message", i, ro);
            if (!serve_str_ok(rc)) BAD("messages[%d].reasoning_content must be a string", i);
            r->msgs[i].reasoning = rc->str;
        }
        const Json *nm = json_get(o, "name");
        if (nm && nm->type != JSON_STRING && nm->type != JSON_NULL)
            BAD("messages[%d].name must be a string", i);
        if (nm && nm->type == JSON_STRING) {
            if (!serve_str_ok(nm)) BAD("messages[%d].name contains a NUL character", i);
            if (tool) r->ext[i].tool = nm->str;
            else r->ext[i].name = nm->str;
        }
    }
    /* what the renderer alone can refuse: a tool message whose tool has no name,
     * tool-call arguments that are JSON but not an object */
    XtmlOpts xo = { r->thinking, r->effort, 1, 0 };
    XtmlTools tl = { r->tools_json, r->tool_choice, r->ext };
    XtmlSegs segs;
    char rerr[256];
    if (xtml_segments_tools(r->msgs, r->n_msgs, &xo, &tl, &segs, rerr, sizeof rerr))
        BAD("messages: %s", rerr);
    xtml_segs_free(&segs);
    return 0;
}

static int stops(ServeReq *r, const Json *s, char *err, size_t errlen) {
    if (!s || s->type == JSON_NULL) return 0;
    const Json *one[1] = { s };
    const Json *const *v = one;
    size_t n = 1;
    if (s->type == JSON_ARRAY) { v = (const Json *const *)s->items; n = s->len; }
    if (n > REQ_MAX_STOP) BAD("'stop' has more than %d entries", REQ_MAX_STOP);
    for (size_t i = 0; i < n; i++) {
        if (v[i]->type != JSON_STRING || !serve_str_ok(v[i]))
            BAD("'stop' must be a string or an array of strings");
        if (v[i]->len == 0) BAD("'stop' strings must not be empty");
        if (v[i]->len > 256) BAD("'stop' strings are limited to 256 bytes");
        r->stop[r->n_stop] = v[i]->str;
        r->stop_len[r->n_stop++] = v[i]->len;
    }
    return 0;
}

/* logprobs, top_logprobs (chat: a boolean and 0..20; completions: logprobs an integer
 * 0..20, the alternatives), echo (completions). */
static int logprobs(ServeReq *r, const Json *d, char *err, size_t errlen) {
    const Json *lp = json_get(d, "logprobs"), *tl = json_get(d, "top_logprobs");
    int64_t k = 0;
    if (r->kind == REQ_CHAT) {
        if (boolean(lp, "logprobs", &r->logprobs, err, errlen)) return 400;
        if (integer(tl, "top_logprobs", 0, K3_MAX_TOP_LOGPROBS, &k, err, errlen)) return 400;
        if (tl && tl->type != JSON_NULL && !r->logprobs)
            BAD("'top_logprobs' needs \"logprobs\": true");
        r->top_logprobs = (int)k;
        return 0;
    }
    if (lp && lp->type == JSON_BOOL) BAD("'logprobs' of /v1/completions is an integer (the "
                                         "alternatives per token, 0..%d)", K3_MAX_TOP_LOGPROBS);
    if (integer(lp, "logprobs", 0, K3_MAX_TOP_LOGPROBS, &k, err, errlen)) return 400;
    r->logprobs = lp && lp->type != JSON_NULL;
    r->top_logprobs = (int)k;
    return boolean(json_get(d, "echo"), "echo", &r->echo, err, errlen);
}

/* response_format: text, json_object or json_schema (json_gram.h); grammar: GBNF text
 * (grammar.h). Either turns thinking off (the reply is what they constrain). */
static int response_format(ServeReq *r, const Json *d, char *err, size_t errlen) {
    const Json *j = json_get(d, "response_format"), *gm = json_get(d, "grammar");
    if (j && jg_response_format(j, &r->jg, err, errlen)) return 400;
    if (gm && gm->type != JSON_NULL) {
        char e[400];
        if (gm->type != JSON_STRING) BAD("'grammar' must be a string of GBNF text");
        if (!(r->gr = gr_parse(gm->str, gm->len, e, sizeof e))) BAD("'grammar': %s", e);
        if (r->jg) BAD("give 'response_format' JSON mode or 'grammar', not both");
    }
    if (r->jg || r->gr) r->thinking = 0;
    return 0;
}

/* A token-id prompt: a non-empty array of integers (the vocabulary's range is checked when
 * the engine takes the request). name: how the refusal names it. */
static int id_prompt(ServePrompt *q, const Json *a, const char *name, char *err, size_t errlen) {
    if (a->len == 0) BAD("'%s' must not be empty (a prompt of token ids needs one at least)", name);
    if (!(q->ids = malloc(sizeof *q->ids * a->len))) BAD("out of memory");
    for (size_t i = 0; i < a->len; i++) {
        const Json *x = a->items[i];
        if (x->type != JSON_NUMBER || !x->is_integer || x->integer < 0 || x->integer > INT32_MAX)
            BAD("'%s[%zu]' is not a token id (a non-negative integer)", name, i);
        q->ids[i] = (int32_t)x->integer;
    }
    q->n_ids = a->len;
    return 0;
}

/* prompt: a string, a list of strings, a list of token ids, or a list of token-id lists (as
 * OpenAI takes them); a list gives one prompt per entry. */
static int prompts(ServeReq *r, const Json *p, char *err, size_t errlen) {
    if (!p) BAD("'prompt' is required");
    const int list = p->type == JSON_ARRAY && p->len && p->items[0]->type != JSON_NUMBER;
    const size_t n = list ? p->len : 1;
    if (p->type == JSON_ARRAY && !p->len) BAD("'prompt' must not be an empty list");
    if (n * (size_t)r->n_choices > K3_MAX_CHOICES)
        BAD("'prompt' has %zu prompts and 'n' is %d: over the %d choices a request may have",
            n, r->n_choices, K3_MAX_CHOICES);
    if (!(r->prompts = calloc(n, sizeof *r->prompts))) BAD("out of memory");
    r->n_prompts = (int)n;
    for (size_t i = 0; i < n; i++) {
        const Json *x = list ? p->items[i] : p;
        ServePrompt *q = &r->prompts[i];
        char name[32];
        snprintf(name, sizeof name, list ? "prompt[%zu]" : "prompt", i);
        if (x->type == JSON_ARRAY) {
            if (id_prompt(q, x, name, err, errlen)) return 400;
            continue;
        }
        if (!serve_str_ok(x))
            BAD("'%s' must be a string or a list of token ids%s", name, list ? "" : " (or a list "
                "of either)");
        if (x->len == 0) BAD("'%s' must not be empty", name);
        q->text = x->str; q->len = x->len;
    }
    return 0;
}

/* (serve.h) */
int serve_req_prompt_ids(ServeReq *r, const Tok *t, int ctx, char *err, size_t errlen) {
    const int V = tok_vocab_size(t), many = r->n_prompts > 1;
    for (int i = 0; i < r->n_prompts; i++) {
        ServePrompt *q = &r->prompts[i];
        char name[32];
        snprintf(name, sizeof name, many ? "prompt[%d]" : "prompt", i);
        if (q->text && !(q->ids = tok_encode(t, q->text, q->len, 1, &q->n_ids)))
            return snprintf(err, errlen, "out of memory tokenizing the prompt"), 500;
        for (size_t k = 0; !q->text && k < q->n_ids; k++)
            if (q->ids[k] >= V)
                return snprintf(err, errlen, "'%s[%zu]' is %d, not a token id of this model's "
                                "tokenizer (0..%d)", name, k, q->ids[k], V - 1), 400;
        if (!q->text && r->echo) {            /* the text echo gives back */
            if (!(q->dec = tok_decode(t, q->ids, q->n_ids, &q->len, NULL)))
                return snprintf(err, errlen, "out of memory"), 500;
            q->text = q->dec;
        }
        if ((long)q->n_ids + 1 > ctx)
            return snprintf(err, errlen, "'%s' is %zu tokens; with the reply it needs more than "
                            "the context of %d positions (k3 serve --ctx)", name, q->n_ids,
                            ctx), 400;
    }
    return 0;
}

int serve_req_choices(const ServeReq *r) {
    return (r->kind == REQ_COMPLETION ? r->n_prompts : 1) * r->n_choices;
}

static int neutral(const Json *d, char *err, size_t errlen) {
    const Json *j;
    if ((j = json_get(d, "model")) && j->type != JSON_STRING) BAD("'model' must be a string");
    if ((j = json_get(d, "user")) && j->type != JSON_STRING && j->type != JSON_NULL)
        BAD("'user' must be a string");
    return 0;
}

/* OpenAI's reasoning_effort values onto K3's thinking efforts. The encoder accepts only
 * low, high and max (TOKENIZER_XTML.md §6.4: "medium" is rejected although the effort
 * body names it), so a value between two levels goes to the next one up: a client asking
 * for medium gets at least medium. "none" is the encoder's thinking=False. */
const char *serve_effort(const char *v) {
    static const char *const map[][2] = {
        { "none", "" }, { "minimal", "low" }, { "low", "low" }, { "medium", "high" },
        { "high", "high" }, { "xhigh", "max" }, { "max", "max" } };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(v, map[i][0])) return map[i][1];
    return NULL;
}

int serve_req_parse(const char *body, size_t n, int kind, ServeReq *r, char *err,
                    size_t errlen) {
    char jerr[256];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->thinking = 1;
    snprintf(r->effort, sizeof r->effort, "max");
    sampler_defaults(&r->sp);
    r->doc = json_parse(body, n, jerr, sizeof jerr);
    if (!r->doc) BAD("the body is not valid JSON: %s", jerr);
    const Json *d = r->doc;
    if (d->type != JSON_OBJECT) BAD("the body must be a JSON object");
    const char *const *keys = kind == REQ_CHAT ? CHAT_KEYS : COMPL_KEYS;
    for (size_t i = 0; i < d->len; i++)
        if (!known(keys, d->keys[i])) BAD("unknown field '%.60s'", d->keys[i]);
    if (neutral(d, err, errlen) || logprobs(r, d, err, errlen)) return 400;
    int64_t nc = 1;
    if (integer(json_get(d, "n"), "n", 1, K3_MAX_N, &nc, err, errlen)) return 400;
    r->n_choices = (int)nc;
    if (nc > 1 && r->echo) BAD("'n' above 1 with 'echo' is not supported");
    for (size_t i = 0; i < d->len; i++)           /* penalties and bias: penalty_json.c */
        if (penalty_json_field(d->keys[i], d->items[i], &r->sp, err, errlen) < 0) return 400;
    double x;
    int64_t k;
    x = 1;
    if (num(json_get(d, "temperature"), "temperature", 0, 100, &x, err, errlen)) return 400;
    r->sp.temperature = x;
    if (x == 0) r->sp.greedy = 1;
    x = 1;
    if (num(json_get(d, "top_p"), "top_p", 0, 1, &x, err, errlen)) return 400;
    if (x == 0) BAD("'top_p' must be in (0, 1]");
    r->sp.top_p = x;
    x = 0;
    if (num(json_get(d, "min_p"), "min_p", 0, 0.999999, &x, err, errlen)) return 400;
    r->sp.min_p = x;
    k = 0;
    if (integer(json_get(d, "top_k"), "top_k", -1, 1 << 30, &k, err, errlen)) return 400;
    r->sp.top_k = (int)(k < 0 ? 0 : k);
    const Json *sd = json_get(d, "seed");
    if (sd && sd->type != JSON_NULL) {
        if (sd->type != JSON_NUMBER || !sd->is_integer) BAD("'seed' must be an integer");
        r->seed = (uint64_t)sd->integer; r->seed_set = 1;
    }
    k = -1;                                       /* completions: 0 scores the prompt */
    if (integer(json_get(d, "max_tokens"), "max_tokens", kind == REQ_COMPLETION ? 0 : 1,
                1 << 30, &k, err, errlen))
        return 400;
    r->no_tokens = k == 0;
    if (k < 0) k = 0;
    if (kind == REQ_CHAT &&
        integer(json_get(d, "max_completion_tokens"), "max_completion_tokens", 1, 1 << 30, &k,
                err, errlen))
        return 400;
    r->max_tokens = (int)k;
    if (stops(r, json_get(d, "stop"), err, errlen)) return 400;
    if (boolean(json_get(d, "stream"), "stream", &r->stream, err, errlen)) return 400;
    const Json *so = json_get(d, "stream_options");
    if (so && so->type != JSON_NULL) {
        if (so->type != JSON_OBJECT) BAD("'stream_options' must be an object");
        for (size_t i = 0; i < so->len; i++)
            if (strcmp(so->keys[i], "include_usage"))
                BAD("stream_options: unknown field '%.60s'", so->keys[i]);
        if (boolean(json_get(so, "include_usage"), "stream_options.include_usage",
                    &r->include_usage, err, errlen))
            return 400;
        if (!r->stream) BAD("'stream_options' is only allowed with \"stream\": true");
    }
    if (kind == REQ_COMPLETION) {
        if (prompts(r, json_get(d, "prompt"), err, errlen)) return 400;
        return response_format(r, d, err, errlen);
    }
    const Json *re = json_get(d, "reasoning_effort");
    if (re && re->type != JSON_NULL) {
        if (re->type != JSON_STRING) BAD("'reasoning_effort' must be a string");
        const char *e = serve_effort(re->str);
        if (!e)
            BAD("'reasoning_effort' must be none, minimal, low, medium, high, xhigh or max "
                "(got '%.20s')", re->str);
        if (!*e) r->thinking = 0;
        else snprintf(r->effort, sizeof r->effort, "%s", e);
    }
    const Json *kw = json_get(d, "chat_template_kwargs");
    if (kw && kw->type != JSON_NULL) {
        if (kw->type != JSON_OBJECT) BAD("'chat_template_kwargs' must be an object");
        for (size_t i = 0; i < kw->len; i++) {
            const char *key = kw->keys[i];
            if (strcmp(key, "thinking") && strcmp(key, "enable_thinking"))
                BAD("chat_template_kwargs: unknown field '%.60s' (thinking is the one known)", key);
            int t = 1;
            if (boolean(kw->items[i], "chat_template_kwargs.thinking", &t, err, errlen))
                return 400;
            if (!t) r->thinking = 0;
        }
    }
    if (response_format(r, d, err, errlen) ||
        serve_req_tools(r, d, err, errlen))
        return 400;
    if ((r->jg || r->gr) && r->tools_json)
        BAD("%s and 'tools' together are not supported", r->jg ? "'response_format' JSON mode"
            : "'grammar'");
    return messages(r, json_get(d, "messages"), err, errlen);
}

void serve_req_free(ServeReq *r) {
    free(r->resp.hist);
    for (int i = 0; r->ext && i < r->n_msgs; i++) free((void *)r->ext[i].calls);
    free(r->ext);
    free(r->tools_json);
    serve_req_tools_free(r);
    jg_free(r->jg); gr_free(r->gr);
    for (int i = 0; i < r->n_parts; i++) free(r->parts[i]);
    free(r->parts);
    for (int i = 0; i < r->n_img; i++) free(r->img[i]);
    free(r->img); free(r->img_n);
    free(r->msgs);
    for (int i = 0; i < r->n_prompts; i++) { free(r->prompts[i].ids); free(r->prompts[i].dec); }
    free(r->prompts);
    json_free(r->doc);
    memset(r, 0, sizeof *r);
}
