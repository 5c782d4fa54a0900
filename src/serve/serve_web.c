/* serve_web.c — the chat page of k3 serve (docs/SERVE.md, "The chat page"): GET / and its
 * script and style, embedded in the binary at build time (src/serve/webui/), off with
 * --no-webui. The page talks to the public API only. Its Content-Security-Policy lets
 * scripts come from this server's own files alone (no inline script, no eval, no other
 * origin), so even text that reached the DOM as markup could not run. */
#include "serve.h"
#include "webui.h"
#include <stdio.h>
#include <string.h>

static const char CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

int serve_web(int fd, const char *method, const char *path, int keep_alive) {
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return 0;
    for (const WebAsset *a = k3_webui_assets; a->path; a++) {
        if (strcmp(a->path, path)) continue;
        char h[1024];
        int k = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: "
                         "%zu\r\nContent-Security-Policy: %s\r\nX-Content-Type-Options: nosniff"
                         "\r\nReferrer-Policy: no-referrer\r\nCache-Control: no-cache\r\n"
                         "Connection: %s\r\n\r\n", a->ctype, a->len, CSP,
                         keep_alive ? "keep-alive" : "close");
        http_last_status = 200;                   /* the request log's status */
        if (http_send(fd, h, (size_t)k) < 0) return -1;
        if (!strcmp(method, "GET") && http_send(fd, (const char *)a->data, a->len) < 0)
            return -1;
        return 1;
    }
    return 0;
}
