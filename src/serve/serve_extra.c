/* serve_extra.c — what browser clients and llama-server users reach for beside the
 * OpenAI endpoints: CORS (--cors: the preflight answered, Access-Control-Allow-Origin on
 * every response), one log line per request on stderr, and POST /tokenize and
 * /detokenize in llama-server's shapes (docs/SERVE.md). */
#include "serve.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread ServeLog rlog;               /* the request this connection thread serves */
static char cors_hdr[320];                   /* the CORS header lines, "" when off */
static const char *cors_origin = "*";

int serve_cors_set(const char *v, char *err, size_t errlen) {
    if (!strcmp(v, "off")) { cors_origin = NULL; http_extra_headers = ""; return 0; }
    size_t n = strlen(v);
    int ok = !strcmp(v, "*") || ((!strncmp(v, "http://", 7) || !strncmp(v, "https://", 8)) &&
                                 n < 200 && v[n - 1] != '/');
    for (size_t i = 0; ok && i < n; i++)
        if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f || v[i] == ',') ok = 0;
    if (!ok) {
        snprintf(err, errlen, "--cors: '%.100s' is not *, off or one origin such as "
                 "http://localhost:3000 (scheme://host[:port], no path)", v);
        return -1;
    }
    cors_origin = v;
    snprintf(cors_hdr, sizeof cors_hdr, "Access-Control-Allow-Origin: %s\r\n%s", v,
             strcmp(v, "*") ? "Vary: Origin\r\n" : "");
    http_extra_headers = cors_hdr;
    return 0;
}

ServeLog *serve_log_now(void) { return &rlog; }

void serve_log_request(const HttpReq *h, double t0) {
    const double now = k3_now();
    char ttft[32] = "-";
    if (rlog.t_first > 0) snprintf(ttft, sizeof ttft, "%.3fs", rlog.t_first - t0);
    char path[80];                           /* the path as sent: printable ASCII only */
    size_t k = 0;
    for (const char *p = h ? h->path : "-"; *p && k < sizeof path - 4; p++)
        path[k++] = *p > 0x20 && *p < 0x7f ? *p : '?';
    if (h && strlen(h->path) > k) { memcpy(path + k, "...", 3); k += 3; }
    path[k] = 0;
    fprintf(stderr, "k3: request %s %s %d prompt=%ld gen=%ld ttft=%s total=%.3fs%s%s\n",
            h ? h->method : "-", path, rlog.status ? rlog.status : http_last_status,
            rlog.prompt, rlog.gen, ttft, now - t0, rlog.gone ? " (stream cut)" : "",
            rlog.interrupted ? " (interrupted)" : "");
    memset(&rlog, 0, sizeof rlog);
    http_last_status = 0;
}

/* the preflight: 204, no body (no Content-Length on a 204, RFC 9110 §8.6) */
static int preflight(int fd, int ka) {
    char b[640];
    int k = snprintf(b, sizeof b, "HTTP/1.1 204 No Content\r\n%sAccess-Control-Allow-Methods: "
                     "GET, POST, OPTIONS\r\nAccess-Control-Allow-Headers: Authorization, "
                     "Content-Type\r\nAccess-Control-Max-Age: 86400\r\nConnection: %s\r\n\r\n",
                     cors_hdr, ka ? "keep-alive" : "close");
    http_last_status = 204;
    return http_send(fd, b, (size_t)k);
}

/* whether p[0..n) is well-formed UTF-8 (no overlongs, surrogates, or past U+10FFFF) */
static int utf8_ok(const char *p, size_t n) {
    const unsigned char *u = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i], l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3
                             : (c >> 3) == 30 ? 4 : 0;
        if (!l || i + l > n) return 0;
        unsigned cp = l == 1 ? c : c & (0x7f >> l);
        for (unsigned k = 1; k < l; k++) {
            if ((u[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (u[i + k] & 0x3f);
        }
        static const unsigned lo[5] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < lo[l] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
        i += l;
    }
    return 1;
}

/* a boolean member of d, or def; -1 when it is there and not a boolean */
static int flag(const Json *d, const char *key, int def) {
    const Json *v = json_get(d, key);
    if (!v || v->type == JSON_NULL) return def;
    return v->type == JSON_BOOL ? v->boolean : -1;
}

static int tokenize(Server *s, int fd, const Json *d, int ka) {
    const Json *c = json_get(d, "content");
    const int add = flag(d, "add_special", 0), special = flag(d, "parse_special", 1),
              pieces = flag(d, "with_pieces", 0);
    if (!c || c->type != JSON_STRING)
        return serve_fail(fd, 400, "\"content\" must be a string", ka);
    if (add < 0 || special < 0 || pieces < 0)
        return serve_fail(fd, 400, "add_special, parse_special and with_pieces must be "
                          "booleans", ka);
    size_t n = 0;
    int32_t *ids = tok_encode(s->tok, c->str, c->len, special, &n);
    if (!ids) return serve_fail(fd, 500, "out of memory", 0);
    const int bos = add ? tok_special_id(s->tok, "[BOS]") : -1;
    Buf b = { 0 };
    buf_str(&b, "{\"tokens\": [");
    for (size_t i = 0; i < n + (bos >= 0); i++) {
        const int id = bos >= 0 ? (i ? ids[i - 1] : bos) : ids[i];
        if (i) buf_str(&b, ", ");
        if (!pieces) { buf_fmt(&b, "%d", id); continue; }
        size_t len;
        const char *p = tok_token_bytes(s->tok, id, &len);
        buf_fmt(&b, "{\"id\": %d, \"piece\": ", id);
        if (utf8_ok(p, len)) buf_json(&b, p, len);
        else {                               /* part of a character: its bytes */
            buf_str(&b, "[");
            for (size_t k = 0; k < len; k++)
                buf_fmt(&b, "%s%u", k ? ", " : "", (unsigned char)p[k]);
            buf_str(&b, "]");
        }
        buf_str(&b, "}");
    }
    buf_str(&b, "]}\n");
    free(ids);
    rlog.prompt = (long)n;
    int rc = b.oom ? serve_fail(fd, 500, "out of memory", 0)
                   : http_respond(fd, 200, "application/json", b.b, b.n, ka);
    buf_free(&b);
    return rc;
}

static int detokenize(Server *s, int fd, const Json *d, int ka) {
    const Json *t = json_get(d, "tokens");
    if (!t || t->type != JSON_ARRAY)
        return serve_fail(fd, 400, "\"tokens\" must be an array of token ids", ka);
    const int V = tok_vocab_size(s->tok);
    int32_t *ids = malloc(sizeof *ids * (t->len ? t->len : 1));
    if (!ids) return serve_fail(fd, 500, "out of memory", 0);
    for (size_t i = 0; i < t->len; i++) {
        const Json *x = t->items[i];
        if (x->type != JSON_NUMBER || !x->is_integer || x->number < 0 || x->number >= V) {
            char m[160];
            snprintf(m, sizeof m, "tokens[%zu] is not a token id: ids are integers 0..%d",
                     i, V - 1);
            free(ids);
            return serve_fail(fd, 400, m, ka);
        }
        ids[i] = (int32_t)x->number;
    }
    size_t len = 0;
    char *text = tok_decode(s->tok, ids, t->len, &len, NULL);
    free(ids);
    if (!text) return serve_fail(fd, 500, "out of memory", 0);
    Buf b = { 0 };
    buf_str(&b, "{\"content\": ");
    buf_json(&b, text, len);                 /* ill-formed bytes become U+FFFD */
    buf_str(&b, "}\n");
    free(text);
    rlog.gen = (long)t->len;
    int rc = b.oom ? serve_fail(fd, 500, "out of memory", 0)
                   : http_respond(fd, 200, "application/json", b.b, b.n, ka);
    buf_free(&b);
    return rc;
}

int serve_extra_route(Server *s, int fd, const HttpReq *h, const char *path, const char *body,
                      int ka) {
    if (!strcmp(h->method, "OPTIONS") && cors_origin) return preflight(fd, ka);
    const int tk = !strcmp(path, "/tokenize"), dt = !strcmp(path, "/detokenize");
    if (!tk && !dt) return SERVE_PASS;
    if (strcmp(h->method, "POST")) return serve_fail(fd, 405, "use POST", ka);
    if (s->api_key) {
        const char *a = h->auth;
        if (strncmp(a, "Bearer ", 7) || strcmp(a + 7, s->api_key))
            return serve_fail(fd, 401, "missing or wrong API key (Authorization: Bearer KEY)",
                              ka);
    }
    if (!h->has_length) return serve_fail(fd, 400, "POST needs a Content-Length body", ka);
    char err[256];
    Json *d = json_parse(body, h->content_length, err, sizeof err);
    if (!d) {
        char m[320];
        snprintf(m, sizeof m, "the body is not JSON: %s", err);
        return serve_fail(fd, 400, m, ka);
    }
    int rc = d->type != JSON_OBJECT ? serve_fail(fd, 400, "the body must be a JSON object", ka)
           : tk ? tokenize(s, fd, d, ka) : detokenize(s, fd, d, ka);
    json_free(d);
    return rc;
}
