/* serve_http.c — the HTTP/1.1 of k3 serve, on plain sockets: the request head parsed
 * from a buffer (so it can be fuzzed), responses with Content-Length or chunked bodies,
 * OpenAI-style JSON errors. */
#include "serve.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- request head ---- */
static int ieq(const char *a, size_t n, const char *b) {
    if (strlen(b) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return 0;
    }
    return 1;
}
/* RFC 9110 tchar */
static int tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}
/* 1 when the comma-separated value v[0..n) lists token tok. */
static int lists(const char *v, size_t n, const char *tok) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t a = i;
        while (i < n && v[i] != ',') i++;
        size_t b = i;
        while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) b--;
        if (b > a && ieq(v + a, b - a, tok)) return 1;
    }
    return 0;
}

#define FAIL(st, ...) do { snprintf(err, errlen, __VA_ARGS__); return -(st); } while (0)

int http_parse(const char *buf, size_t n, size_t max_body, HttpReq *r, char *err,
               size_t errlen) {
    /* the end of the head: CRLF CRLF (a bare LF is refused below) */
    size_t end = 0;
    for (size_t i = 3; i < n && i < HTTP_MAX_HEADER; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
            end = i + 1; break;
        }
    if (!end) {
        if (n >= HTTP_MAX_HEADER) FAIL(431, "request head over %d bytes", HTTP_MAX_HEADER);
        for (size_t i = 0; i < n; i++)
            if (buf[i] == 0) FAIL(400, "NUL byte in the request head");
        return 0;
    }
    memset(r, 0, sizeof *r);
    r->header_len = end;
    /* request line: METHOD SP TARGET SP HTTP/1.x CRLF */
    const char *p = buf, *e = buf + end;
    const char *sp1 = p;
    while (sp1 < e && tchar((unsigned char)*sp1)) sp1++;
    if (sp1 == p || sp1 >= e || *sp1 != ' ' || (size_t)(sp1 - p) >= sizeof r->method)
        FAIL(400, "malformed request line (method)");
    memcpy(r->method, p, (size_t)(sp1 - p));
    const char *t = sp1 + 1, *sp2 = t;
    while (sp2 < e && *sp2 != ' ' && *sp2 != '\r' && (unsigned char)*sp2 > 0x20 &&
           (unsigned char)*sp2 < 0x7f)
        sp2++;
    if (sp2 == t || sp2 >= e || *sp2 != ' ') FAIL(400, "malformed request line (target)");
    if ((size_t)(sp2 - t) >= sizeof r->path) FAIL(400, "request target too long");
    if (*t != '/') FAIL(400, "request target must be an absolute path");
    memcpy(r->path, t, (size_t)(sp2 - t));
    const char *v = sp2 + 1;
    if (e - v < 10 || memcmp(v, "HTTP/1.", 7) || v[8] != '\r' || v[9] != '\n') {
        if (e - v >= 5 && !memcmp(v, "HTTP/", 5) && (e - v < 10 || memcmp(v, "HTTP/1.", 7)))
            FAIL(505, "only HTTP/1.0 and HTTP/1.1 are served");
        FAIL(400, "malformed request line (version)");
    }
    if (v[7] != '0' && v[7] != '1') FAIL(505, "only HTTP/1.0 and HTTP/1.1 are served");
    r->minor = v[7] - '0';
    r->keep_alive = r->minor == 1;
    /* headers */
    p = v + 10;
    int host = 0, te = 0;
    while (p < e - 2) {
        const char *le = p;
        while (le < e && *le != '\r') le++;
        if (le + 1 >= e || le[1] != '\n') FAIL(400, "header line without CRLF");
        const char *colon = p;
        while (colon < le && tchar((unsigned char)*colon)) colon++;
        if (colon == p || colon >= le || *colon != ':') FAIL(400, "malformed header line");
        const char *val = colon + 1, *ve = le;
        while (val < ve && (*val == ' ' || *val == '\t')) val++;
        while (ve > val && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        for (const char *q = val; q < ve; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t') FAIL(400, "control byte in a header");
        size_t kl = (size_t)(colon - p), vl = (size_t)(ve - val);
        if (ieq(p, kl, "content-length")) {
            if (r->has_length) FAIL(400, "more than one Content-Length");
            if (!vl || vl > 15) FAIL(400, "bad Content-Length");
            size_t x = 0;
            for (size_t i = 0; i < vl; i++) {
                if (val[i] < '0' || val[i] > '9') FAIL(400, "bad Content-Length");
                x = x * 10 + (size_t)(val[i] - '0');
            }
            r->content_length = x; r->has_length = 1;
        } else if (ieq(p, kl, "transfer-encoding")) te = 1;
        else if (ieq(p, kl, "connection")) {
            if (lists(val, vl, "close")) r->keep_alive = 0;
            else if (lists(val, vl, "keep-alive")) r->keep_alive = 1;
        } else if (ieq(p, kl, "expect")) {
            if (ieq(val, vl, "100-continue")) r->expect_continue = 1;
            else FAIL(400, "unsupported Expect header");    /* 417 in spirit */
        } else if (ieq(p, kl, "authorization")) {
            if (vl >= sizeof r->auth) FAIL(400, "Authorization header too long");
            memcpy(r->auth, val, vl); r->auth[vl] = 0;
        } else if (ieq(p, kl, "x-api-key")) {             /* Anthropic's clients */
            if (vl >= sizeof r->xkey) FAIL(400, "x-api-key header too long");
            memcpy(r->xkey, val, vl); r->xkey[vl] = 0;
        } else if (ieq(p, kl, "host")) host++;
        p = le + 2;
    }
    if (r->minor == 1 && host != 1) FAIL(400, "HTTP/1.1 needs exactly one Host header");
    if (te) FAIL(501, "Transfer-Encoding request bodies are not supported; send Content-Length");
    if (r->content_length > max_body)
        FAIL(413, "request body of %zu bytes is over the limit of %zu", r->content_length,
             max_body);
    return (int)end;
}

const char *http_reason(int s) {
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* ---- responses ---- */
const char *http_extra_headers = "";
__thread int http_last_status;

int http_send(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k; n -= (size_t)k;
    }
    return 0;
}

int http_respond(int fd, int status, const char *ctype, const char *body, size_t n,
                 int keep_alive) {
    char h[1024];
    int k = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: %s\r\n%s%s\r\n", status, http_reason(status), ctype, n,
                     keep_alive ? "keep-alive" : "close",
                     status == 401 ? "WWW-Authenticate: Bearer\r\n" : "", http_extra_headers);
    http_last_status = status;
    if (http_send(fd, h, (size_t)k)) return -1;
    return http_send(fd, body, n);
}

static const char *err_type(int s) {
    switch (s) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 500: case 503: return "server_error";
    default: return "invalid_request_error";
    }
}

__thread int http_anthropic;

/* Anthropic's error types (its Messages API docs, "Errors"). */
static const char *anth_type(int s) {
    switch (s) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    default: return s < 500 ? "invalid_request_error" : "api_error";
    }
}

int http_error(int fd, int status, const char *msg, int keep_alive) {
    Buf b = { 0 };
    if (http_anthropic == 1) {
        buf_fmt(&b, "{\"type\": \"error\", \"error\": {\"type\": \"%s\", \"message\": ",
                anth_type(status));
        buf_json(&b, msg, strlen(msg));
        buf_str(&b, "}}\n");
        int rc = b.oom ? -1 : http_respond(fd, status, "application/json", b.b, b.n, keep_alive);
        buf_free(&b);
        return rc;
    }
    buf_str(&b, "{\"error\": {\"message\": ");
    buf_json(&b, msg, strlen(msg));
    if (http_anthropic == 2)                   /* the Responses API's: param and code */
        buf_fmt(&b, ", \"type\": \"%s\", \"param\": null, \"code\": null}}\n",
                err_type(status));
    else buf_fmt(&b, ", \"type\": \"%s\", \"code\": %d}}\n", err_type(status), status);
    int rc = b.oom ? -1 : http_respond(fd, status, "application/json", b.b, b.n, keep_alive);
    buf_free(&b);
    return rc;
}

int http_error_api(int fd, int status, const char *msg, int keep_alive, int anthropic) {
    const int was = http_anthropic;
    http_anthropic = anthropic;
    const int rc = http_error(fd, status, msg, keep_alive);
    http_anthropic = was;
    return rc;
}

int http_chunked_head(int fd, const char *ctype, int keep_alive) {
    char h[1024];
    int k = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nCache-Control: no-cache"
                     "\r\nTransfer-Encoding: chunked\r\nConnection: %s\r\n%s\r\n", ctype,
                     keep_alive ? "keep-alive" : "close", http_extra_headers);
    http_last_status = 200;
    return http_send(fd, h, (size_t)k);
}

int http_chunk(int fd, const char *b, size_t n) {
    char h[32];
    if (!n) return 0;                          /* an empty chunk would end the body */
    int k = snprintf(h, sizeof h, "%zx\r\n", n);
    return http_send(fd, h, (size_t)k) || http_send(fd, b, n) || http_send(fd, "\r\n", 2) ? -1
                                                                                       : 0;
}

int http_chunk_end(int fd) { return http_send(fd, "0\r\n\r\n", 5); }

int http_peer_gone(int fd) {
    struct pollfd p = { fd, POLLIN, 0 };
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLNVAL)) return 1;
    char c;
    ssize_t k = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}
