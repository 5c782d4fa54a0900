/* serve.c — k3 serve MODEL --tok DIR: an OpenAI-compatible HTTP server (docs/SERVE.md).
 * One engine, run by the main thread, serves the queued requests, up to --max-batch at
 * once with their decode steps shared (serve_step.c); every connection has its own thread
 * that reads requests (with deadlines), validates them, answers what needs no engine, and
 * waits while the engine thread writes the reply. */
#include "serve.h"
#include "comm.h"
#include "cli.h"
#include "draft_loop.h"
#include "roofline.h"
#include "statefile.h"
#include "util.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char SERVE_USAGE[] =
"Usage: k3 serve MODEL_DIR --tok DIR [options]   (docs/SERVE.md)\n"
"  --tok DIR              tokenizer directory (default $K3_TOK_FILES)\n"
"  --host H               address to bind (default 127.0.0.1; others warn without --api-key)\n"
"  --port N               TCP port (default 8080; 0 picks a free one, printed when ready)\n"
"  --api-key KEY          require Authorization: Bearer KEY (or x-api-key: KEY) on /v1/*,\n"
"                         /metrics, /tokenize and /detokenize\n"
"  --cors ORIGIN          browser clients: * (default: any origin, as llama-server), one\n"
"                         origin (http://localhost:3000), or off (no CORS headers)\n"
"  --state-cache-gb G     engine states kept to resume conversations (default 4; 0 = off)\n"
"  --state-dir DIR        also keep them in DIR (checksummed files, docs/SERVE.md): a restart\n"
"                         resumes the conversations\n"
"  --ctx N                context limit in positions (default max_position_embeddings)\n"
"  --max-tokens N         server-wide cap on each reply (default 4096)\n"
"  --max-conns N          open connections at most (default 64; more get 503)\n"
"  --max-queue N          requests waiting for the engine at most (default 64; more get 429)\n"
"  --timeout S            idle and slow-client timeout in seconds (default 30)\n"
"  --max-batch N          requests generating at once, their decode steps shared\n"
"                         (default: as many as the memory plan fits, at most its chunk;\n"
"                         printed at start)\n"
"  --state-file MODE      where the states of the requests in flight live: auto (default:\n"
"                         the plan decides), off (in memory), kda (KDA states in a state\n"
"                         file), all (the MLA caches too): the same bits (docs/BATCH.md)\n"
"  --state-file-dir DIR   the state file's folder (default $TMPDIR, else /tmp)\n"
"  --config PATH --threads N --kernels K   engine options as in batch mode\n"
"  --trunk DIR --trunk-gb G --cache-gb G --preset P --verbose   memory budgets as in batch\n"
"                         mode (k3 --help, docs/PERFORMANCE.md)\n"
"  --no-webui             no chat page at GET / (docs/SERVE.md, \"The chat page\")\n"
"  --image-dir DIR        requests may name image files inside DIR: image_url (chat) or\n"
"                         input_image (Responses) as an absolute path or file:// URL; anything\n"
"                         resolving outside DIR (.., symbolic links) is refused (docs/SERVE.md)\n"
"  --draft DIR            a DSpark draft model (docs/DRAFT.md): each request drafts a block\n"
"                         a step from its own context, verified exactly (the same replies);\n"
"                         usage.k3_draft and /metrics count the drafts and those accepted\n"
"  --draft-block N        verify N drafts a block (1..7; default: chosen each block)\n"
"Endpoints: POST /v1/chat/completions, POST /v1/completions, POST /v1/messages (and\n"
"/v1/messages/count_tokens: Anthropic's API), POST /v1/responses (OpenAI's Responses API),\n"
"GET /v1/models, GET /health, GET /metrics, POST /tokenize, POST /detokenize (OPTIONS: the\n"
"CORS preflight). Images (a model with a vision tower, docs/VISION.md): chat's image_url,\n"
"Messages' image and Responses' input_image parts, their bytes inline (data: / base64;\n"
"nothing is fetched; files only with --image-dir); the memory plan holds the tower and\n"
"each request's images (an image over what it admits: 400, naming the size that fits).\n"
"One line per request on stderr (method, path, status, tokens, TTFT, time). Prints\n"
"'k3: listening on http://HOST:PORT' on stderr when ready.\n";

static Server srv;
static volatile sig_atomic_t stopping;
static void on_stop(int sig) { (void)sig; stopping = 1; }

/* ---- one connection ---- */
typedef struct { int fd; } Conn;

static void count_error(int status) {
    int k = status == 400 ? 0 : status == 401 ? 1 : status == 404 ? 2 : status == 405 ? 3
          : status == 413 ? 4 : 5;
    pthread_mutex_lock(&srv.mu);
    srv.st.errors[k]++;
    pthread_mutex_unlock(&srv.mu);
}
static int fail(int fd, int status, const char *msg, int keep_alive) {
    count_error(status);
    return http_error(fd, status, msg, keep_alive);
}
int serve_fail(int fd, int status, const char *msg, int keep_alive) {
    return fail(fd, status, msg, keep_alive);
}

/* Reads more bytes into b (cap bytes) before the deadline. >0 bytes, 0 peer closed, -1
 * timeout, -2 error. */
static ssize_t read_some(int fd, char *b, size_t cap, double deadline) {
    for (;;) {
        int ms = (int)((deadline - k3_now()) * 1000);
        if (ms <= 0) return -1;
        struct pollfd p = { fd, POLLIN, 0 };
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -2;
        if (r == 0) return -1;
        ssize_t k = recv(fd, b, cap, 0);
        if (k < 0 && errno == EINTR) continue;
        return k < 0 ? -2 : k;
    }
}

/* Lingering close: a reply sent over unread request bytes (a refused 413 body, a 503 over
 * --max-conns sent before the request was read) is followed by a close that resets the
 * connection, which may discard the reply before the client reads it (curl saw the 503's
 * status without its JSON body). Send FIN, then drain what the client still sends (until
 * it closes, `seconds` and 64 MiB at most). */
static void linger_close(int fd, double seconds) {
    char sink[16384];
    shutdown(fd, SHUT_WR);
    const double until = k3_now() + seconds;
    for (size_t n = 0; n < ((size_t)64 << 20);) {
        ssize_t k = read_some(fd, sink, sizeof sink, until);
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
}

static void models(int fd, int ka) {
    Buf b = { 0 };
    buf_str(&b, "{\"object\": \"list\", \"data\": [{\"id\": ");
    buf_json(&b, srv.model_id, strlen(srv.model_id));
    buf_str(&b, ", \"object\": \"model\", \"created\": 0, \"owned_by\": \"k3\"}]}\n");
    http_respond(fd, 200, "application/json", b.b, b.n, ka);
    buf_free(&b);
}

static void metrics(int fd, int ka) {
    pthread_mutex_lock(&srv.mu);
    ServeStats t = srv.st;
    int q = srv.qlen, c = srv.conns, ready = srv.ready;
    pthread_mutex_unlock(&srv.mu);
    static const char *codes[6] = { "400", "401", "404", "405", "413", "other" };
    Buf b = { 0 };
#define CTR(name, help, v) buf_fmt(&b, "# HELP k3_" name " " help "\n# TYPE k3_" name \
                                   " counter\nk3_" name " %ld\n", (long)(v))
#define CTRF(name, help, v) buf_fmt(&b, "# HELP k3_" name " " help "\n# TYPE k3_" name \
                                    " counter\nk3_" name " %.6f\n", (double)(v))
#define GAU(name, help, fmt, v) buf_fmt(&b, "# HELP k3_" name " " help "\n# TYPE k3_" name \
                                        " gauge\nk3_" name " " fmt "\n", v)
    CTR("requests_total", "Generation requests run by the engine.", t.requests);
    buf_str(&b, "# HELP k3_request_errors_total Requests refused, by status.\n"
            "# TYPE k3_request_errors_total counter\n");
    for (int i = 0; i < 6; i++)
        buf_fmt(&b, "k3_request_errors_total{code=\"%s\"} %ld\n", codes[i], t.errors[i]);
    CTR("prompt_tokens_total", "Prompt tokens of all requests.", t.prompt_tokens);
    CTR("completion_tokens_total", "Tokens generated.", t.completion_tokens);
    CTR("prefill_tokens_total", "Prompt tokens actually prefilled.", t.prefilled);
    CTR("cached_tokens_total", "Prompt tokens resumed from a kept state.", t.cached);
    CTR("state_cache_hits_total", "Requests that resumed a kept state.", t.cache_hits);
    CTR("state_cache_misses_total", "Requests prefilled from scratch.", t.cache_misses);
    CTR("client_disconnects_total", "Requests cancelled by a client that went away.",
        t.disconnects);
    CTRF("prefill_seconds_total", "Seconds spent prefilling.", t.t_prefill);
    CTRF("decode_seconds_total", "Seconds spent generating.", t.t_decode);
    CTRF("prefill_flops_total", "FLOPs of the prefills done (the FLOP model, roofline.h).",
         t.prefill_flops);
    const double pg = t.t_prefill > 0 ? t.prefill_flops / t.t_prefill / 1e9 : 0.0;
    GAU("prefill_gflops", "Prefill FLOPs over prefill seconds, in GFLOP/s.", "%.3f", pg);
    GAU("prefill_peak_share", "prefill_gflops over machine_fma_gflops.", "%.4f",
        t.fma_gflops > 0 ? pg / t.fma_gflops : 0.0);
    GAU("machine_fma_gflops", "The machine's FMA peak at the engine's threads, GFLOP/s.",
        "%.3f", t.fma_gflops);
    GAU("machine_read_gbps", "The machine's memory read bandwidth, GB/s.", "%.3f",
        t.read_gbps);
    GAU("seconds_per_token", "Mean decode seconds per generated token.", "%.6f",
        t.completion_tokens ? t.t_decode / (double)t.completion_tokens : 0.0);
    CTR("batch_steps_total", "Engine steps (one k3_forward_seqs each: decode tokens and "
        "prompt chunks).", t.steps);
    CTR("batch_rows_total", "Sequences fed in those steps (rows / steps: the occupancy).",
        t.step_rows);
    CTR("batch_mixed_steps_total", "Steps that fed prompt ids beside decode tokens.",
        t.mixed_steps);
    GAU("batch_occupancy", "Mean sequences per step.", "%.4f",
        t.steps ? (double)t.step_rows / (double)t.steps : 0.0);
    GAU("batch_active", "Requests generating now.", "%ld", t.active);
    GAU("max_batch", "Requests that may generate at once (--max-batch).", "%d", srv.max_batch);
    GAU("kept_states", "Engine states kept for resuming.", "%ld", t.kept_n);
    GAU("kept_state_bytes", "Bytes of the kept states.", "%ld", t.kept_bytes);
    GAU("prefill_tokens_in_flight", "Prompt tokens of the prefill under way not yet in.",
        "%ld", t.pf_left);
    if (srv.dl) {
        CTR("draft_blocks_total", "Verify passes of --draft blocks.", t.draft_blocks);
        CTR("draft_proposed_total", "Drafts verified.", t.drafted);
        CTR("draft_accepted_total", "Drafts accepted (tokens without a step of their own).",
            t.accepted);
    }
    GAU("prefill_tokens_done", "Prompt tokens of the prefill under way already in.", "%ld",
        t.pf_done);
    GAU("queue_length", "Requests waiting for the engine.", "%d", q);
    GAU("connections", "Open connections.", "%d", c);
    GAU("ready", "1 when the model is loaded.", "%d", ready);
    GAU("peak_rss_bytes", "Peak resident set size.", "%llu", (unsigned long long)k3_peak_rss());
#undef CTR
#undef CTRF
#undef GAU
    http_respond(fd, 200, "text/plain; version=0.0.4", b.b, b.n, ka);
    buf_free(&b);
}

/* Queues a generation request and waits until the engine thread has answered it. */
static int generate(int fd, int kind, const char *body, size_t n, int ka) {
    char err[1024];
    Job *j = calloc(1, sizeof *j);
    if (!j) return fail(fd, 500, "out of memory", 0);
    const int bad = http_anthropic == 2 ? serve_resp_parse(body, n, &j->req, err, sizeof err)
                  : http_anthropic ? serve_anth_parse(body, n, 0, &j->req, err, sizeof err)
                  : serve_req_parse(body, n, kind, &j->req, err, sizeof err);
    if (bad) {
        serve_req_free(&j->req); free(j);
        return fail(fd, bad, err, ka);
    }
    j->fd = fd; j->keep_alive = ka;
    pthread_cond_init(&j->cv, NULL);
    pthread_mutex_lock(&srv.mu);
    int st = !srv.ready || srv.closed ? 503 : srv.qlen >= srv.max_queue ? 429 : 0;
    const int closed = srv.closed;
    if (!st) {
        j->id = ++srv.next_id;
        if (srv.qtail) srv.qtail->next = j; else srv.qhead = j;
        srv.qtail = j; srv.qlen++;
        pthread_cond_signal(&srv.qcv);
        while (!j->done) pthread_cond_wait(&j->cv, &srv.mu);
    }
    pthread_mutex_unlock(&srv.mu);
    int failed = j->failed;
    if (j->status) count_error(j->status);
    ServeLog *lg = serve_log_now();             /* the engine thread wrote the reply */
    if (!st) *lg = (ServeLog){ j->status ? j->status : 200, j->interrupted, j->n_prompt,
                               j->n_gen, j->t_first, failed && !j->status && !j->interrupted };
    lg->interrupted |= closed;
    pthread_cond_destroy(&j->cv);
    serve_req_free(&j->req); free(j);
    if (st == 503) return fail(fd, 503, closed ? "the server is stopping"
                                               : "the model is still loading; retry shortly", ka);
    if (st == 429) return fail(fd, 429, "too many requests are waiting for the engine", ka);
    return failed ? -1 : 0;
}

/* Routes one request; returns -1 when the connection must close. */
static int route(int fd, const HttpReq *h, const char *body, int ka) {
    char path[512];
    snprintf(path, sizeof path, "%s", h->path);
    char *q = strchr(path, '?');
    if (q) *q = 0;
    const int msgs = !strcmp(path, "/v1/messages"), count = !strcmp(path,
                                                                     "/v1/messages/count_tokens");
    const int resp = !strcmp(path, "/v1/responses");
    http_anthropic = resp ? 2 : msgs || count;   /* its errors in its API's shape */
    const int x = serve_extra_route(&srv, fd, h, path, body, ka);
    if (x != SERVE_PASS) return x;
    int get = !strcmp(h->method, "GET"), post = !strcmp(h->method, "POST");
    int web = srv.no_webui ? 0 : serve_web(fd, h->method, path, ka);   /* the chat page */
    if (web) return web < 0 ? -1 : 0;
    int kind = !strcmp(path, "/v1/chat/completions") || msgs || count || resp ? REQ_CHAT
             : !strcmp(path, "/v1/completions") ? REQ_COMPLETION : 0;
    int known = kind || !strcmp(path, "/v1/models") || !strcmp(path, "/health") ||
                !strcmp(path, "/metrics");
    if (!known) return fail(fd, 404, "unknown path; see docs/SERVE.md for the endpoints", ka);
    if (kind ? !post : !get)
        return fail(fd, 405, kind ? "use POST" : "use GET", ka);
    if (srv.api_key && strcmp(path, "/health")) {
        const char *a = h->auth;                 /* x-api-key: Anthropic's clients */
        if ((strncmp(a, "Bearer ", 7) || strcmp(a + 7, srv.api_key)) &&
            strcmp(h->xkey, srv.api_key))
            return fail(fd, 401, "missing or wrong API key (Authorization: Bearer KEY, or "
                        "x-api-key: KEY)", ka);
    }
    if (!strcmp(path, "/health")) {
        int ready;
        pthread_mutex_lock(&srv.mu); ready = srv.ready; pthread_mutex_unlock(&srv.mu);
        const char *b = ready ? "{\"status\": \"ok\"}\n" : "{\"status\": \"loading\"}\n";
        return http_respond(fd, ready ? 200 : 503, "application/json", b, strlen(b), ka);
    }
    if (!strcmp(path, "/v1/models")) { models(fd, ka); return 0; }
    if (!strcmp(path, "/metrics")) { metrics(fd, ka); return 0; }
    if (!h->has_length) return fail(fd, 400, "POST needs a Content-Length body", ka);
    if (count) return serve_anth_count(&srv, fd, body, h->content_length, ka);
    return generate(fd, kind, body, h->content_length, ka);
}

static void *conn_main(void *arg) {
    Conn *c = arg;
    int fd = c->fd;
    free(c);
    struct timeval tv = { srv.timeout_s, 0 };
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t cap = HTTP_MAX_HEADER + 1, have = 0;
    char *b = malloc(cap), err[256];
    for (int open = b != NULL; open;) {
        HttpReq h;
        memset(&h, 0, sizeof h);
        int r;
        double deadline = k3_now() + srv.timeout_s;    /* idle, then the whole head */
        while ((r = http_parse(b, have, HTTP_MAX_BODY, &h, err, sizeof err)) == 0) {
            ssize_t k = read_some(fd, b + have, HTTP_MAX_HEADER + 1 - have, deadline);
            if (k == -1 && have) fail(fd, 408, "timed out reading the request head", 0);
            if (k <= 0) { open = 0; break; }
            have += (size_t)k;
        }
        if (!open) break;
        if (r < 0) {                     /* (a 413 in the shape of the path's API) */
            double t0 = k3_now();
            http_anthropic = !strncmp(h.path, "/v1/responses", 13) ? 2
                           : !strncmp(h.path, "/v1/messages", 12);
            fail(fd, -r, err, 0);
            http_anthropic = 0;
            serve_log_request(NULL, t0);
            break;
        }
        if (h.expect_continue && h.content_length)
            http_send(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        size_t need = h.header_len + h.content_length;
        if (need + 1 > cap) {
            char *nb = realloc(b, need + 1);
            if (!nb) { fail(fd, 500, "out of memory", 0); break; }
            b = nb; cap = need + 1;
        }
        deadline = k3_now() + srv.timeout_s;
        while (have < need) {
            ssize_t k = read_some(fd, b + have, cap - have, deadline);
            if (k == -1) fail(fd, 408, "timed out reading the request body", 0);
            if (k <= 0) { open = 0; break; }
            have += (size_t)k;
        }
        if (!open) break;
        const double t0 = k3_now();
        pthread_mutex_lock(&srv.mu); srv.busy++; pthread_mutex_unlock(&srv.mu);
        const int rr = route(fd, &h, b + h.header_len, h.keep_alive);
        http_anthropic = 0;                           /* the next refusal is OpenAI's */
        serve_log_request(&h, t0);
        pthread_mutex_lock(&srv.mu);                  /* logged: the shutdown may end now */
        if (!--srv.busy) pthread_cond_broadcast(&srv.idle);
        pthread_mutex_unlock(&srv.mu);
        if (rr < 0 || !h.keep_alive) break;
        memmove(b, b + need, have - need);            /* a pipelined next request */
        have -= need;
        if (cap > 4 * (HTTP_MAX_HEADER + 1) && have <= HTTP_MAX_HEADER) {
            char *nb = realloc(b, HTTP_MAX_HEADER + 1);
            if (nb) { b = nb; cap = HTTP_MAX_HEADER + 1; }
        }
    }
    free(b);
    linger_close(fd, 2);                          /* a refused 413 may leave body unread */
    pthread_mutex_lock(&srv.mu);
    srv.conns--;
    pthread_mutex_unlock(&srv.mu);
    return NULL;
}

static void *accept_main(void *arg) {
    int lfd = *(int *)arg;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 << 10);
    while (!stopping) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            if (errno != EINTR && errno != ECONNABORTED) usleep(10000);   /* EMFILE: back off */
            continue;
        }
        pthread_mutex_lock(&srv.mu);
        int full = srv.conns >= srv.max_conns;
        if (!full) srv.conns++;
        pthread_mutex_unlock(&srv.mu);
        Conn *c = full ? NULL : malloc(sizeof *c);
        pthread_t t;
        if (c) {
            c->fd = fd;
            if (!pthread_create(&t, &at, conn_main, c)) continue;
            free(c);
            pthread_mutex_lock(&srv.mu); srv.conns--; pthread_mutex_unlock(&srv.mu);
        }
        struct timeval tv = { 1, 0 };
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        fail(fd, 503, "too many open connections; retry later", 0);
        linger_close(fd, 0.2);                    /* the accept loop waits, briefly */
    }
    return NULL;
}

/* ---- flags and setup ---- */
static int usage(const char *fmt, const char *a) {
    return k3_usage_error("k3 serve --help", fmt, a);
}

static int parse(int argc, char **argv, Server *s) {
    char err[256];
    s->host = "127.0.0.1"; s->port = 8080; s->kernels = "auto"; s->cache_gb = 4;
    s->max_tokens = 4096; s->max_conns = 64; s->max_queue = 64; s->timeout_s = 30;
    s->max_batch = 0;                              /* 0: what the memory plan fits */
    s->state_file = -1;                            /* the plan decides */
    k3_mem_opts_init(&s->mem);
    s->tok_dir = k3_tok_env();
    serve_cors_set("*", err, sizeof err);           /* as llama-server: any origin */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int mr = k3_mem_parse_flag(argc, argv, &i, &s->mem, 0, err, sizeof err);
        if (mr < 0) return usage("%s", err);
        if (mr) continue;
#define VAL() do { if (!v) return usage("%s needs a value", a); i++; } while (0)
#define INT(lo, dst) do { VAL(); if (k3_parse_int(a, v, lo, dst)) return K3_ERR_USAGE; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(SERVE_USAGE, stdout); return -1; }
        else if (!strcmp(a, "--tok")) { VAL(); s->tok_dir = v; }
        else if (!strcmp(a, "--host")) { VAL(); s->host = v; }
        else if (!strcmp(a, "--api-key")) { VAL(); s->api_key = v; }
        else if (!strcmp(a, "--cors")) {
            VAL();
            if (serve_cors_set(v, err, sizeof err)) return usage("%s", err);
        }
        else if (!strcmp(a, "--state-dir")) { VAL(); s->state_dir = v; }
        else if (!strcmp(a, "--image-dir")) {
            VAL();
            if (serve_image_dir_set(v, err, sizeof err)) return usage("%s", err);
        }
        else if (!strcmp(a, "--config")) { VAL(); s->config = v; }
        else if (!strcmp(a, "--kernels")) { VAL(); s->kernels = v; }
        else if (!strcmp(a, "--port")) {
            VAL();
            if (k3_parse_int(a, v, 0, &s->port)) return K3_ERR_USAGE;
            if (s->port > 65535) return usage("--port must be 0..65535 (got %s)", v);
        } else if (!strcmp(a, "--state-cache-gb")) {
            VAL();
            char *end;
            s->cache_gb = strtod(v, &end);
            if (!*v || *end || !(s->cache_gb >= 0) || s->cache_gb > 1e6)
                return usage("--state-cache-gb: '%s' is not a number of GB >= 0", v);
        } else if (!strcmp(a, "--ctx")) INT(1, &s->ctx);
        else if (!strcmp(a, "--max-tokens")) INT(1, &s->max_tokens);
        else if (!strcmp(a, "--max-conns")) INT(1, &s->max_conns);
        else if (!strcmp(a, "--max-queue")) INT(1, &s->max_queue);
        else if (!strcmp(a, "--timeout")) INT(1, &s->timeout_s);
        else if (!strcmp(a, "--threads")) INT(1, &s->threads);
        else if (!strcmp(a, "--max-batch")) INT(1, &s->max_batch);
        else if (!strcmp(a, "--state-file-dir")) { VAL(); s->state_file_dir = v; }
        else if (!strcmp(a, "--no-webui")) s->no_webui = 1;
        else if (!strcmp(a, "--draft")) { VAL(); s->draft_dir = v; }
        else if (!strcmp(a, "--draft-block")) {
            INT(1, &s->draft_block);
            if (s->draft_block > K3_DSPARK_MAX_N)
                return usage("--draft-block takes 1..7 rows (DSpark's block), got %s", v);
            s->draft_fixed = 1;
        }
        else if (!strcmp(a, "--state-file")) {
            VAL();
            if (k3_state_file_mode(v, &s->state_file))
                return usage("--state-file: '%s' is not auto, off, kda or all", v);
        }
        else if (a[0] == '-' && a[1]) return usage("unknown serve option '%s'", a);
        else if (!s->model_dir) s->model_dir = a;
        else return usage("unexpected argument '%s' (MODEL_DIR was already given)", a);
#undef INT
#undef VAL
    }
    if (!s->model_dir) return usage("%s", "missing MODEL_DIR");
    if (!s->tok_dir)
        return usage("%s", "serve needs a tokenizer: pass --tok DIR or set K3_TOK_FILES");
    if (s->draft_block && !s->draft_dir)
        return usage("%s", "--draft-block is about a --draft DIR");
    if (s->draft_dir && s->state_file > 0)    /* a rollback replays from the state's undo */
        return usage("%s", "--draft needs the states resident: drop --state-file or --draft");
    if (s->draft_dir) {
        if (!s->draft_block) s->draft_block = K3_DSPARK_MAX_N;
        s->state_file = 0;
    }
    if (s->state_dir && s->cache_gb <= 0)
        return usage("%s", "--state-dir keeps the kept states: it needs --state-cache-gb > 0");
    return 0;
}

/* A listening socket on host:port (IPv4 or IPv6 literal, or localhost). */
static int listen_on(Server *s, int *port_out, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    const char *h = !strcmp(s->host, "localhost") ? "127.0.0.1" : s->host;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET; a4->sin_port = htons((uint16_t)s->port); len = sizeof *a4;
    } else if (inet_pton(AF_INET6, h, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6; a6->sin6_port = htons((uint16_t)s->port); len = sizeof *a6;
    } else {
        snprintf(err, errlen, "--host '%s' is not an IPv4 or IPv6 address (or localhost)", s->host);
        return -2;
    }
    s->host_any = ss.ss_family == AF_INET ? a4->sin_addr.s_addr == htonl(INADDR_ANY)
                                          : IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) { snprintf(err, errlen, "socket: %s", strerror(errno)); return -1; }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 128)) {
        int e = errno;
        close(fd);
        if (e == EADDRNOTAVAIL) {         /* the value of --host is wrong here: usage, 2 */
            snprintf(err, errlen, "--host %s: %s: the address is not one of this machine's; "
                     "pick another --host (127.0.0.1, 0.0.0.0 for every interface, or an "
                     "address of this machine)", s->host, strerror(e));
            return -2;
        }
        snprintf(err, errlen, "cannot listen on %s port %d: %s (pick another --port%s)",
                 s->host, s->port, strerror(e), e == EADDRINUSE ? ": this one is taken" : "");
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *port_out = ntohs(ss.ss_family == AF_INET ? a4->sin_port : a6->sin6_port);
    return fd;
}

static int loopback(const char *h) {
    return !strcmp(h, "localhost") || !strncmp(h, "127.", 4) || !strcmp(h, "::1");
}

static int open_engine(Server *s, char *err, size_t errlen) {
    if (k3_kernels_select(s->kernels, err, errlen)) return K3_ERR_USAGE;
    if (s->threads) k3_threads_set(s->threads);
    K3EngineOpts eo = { s->model_dir, s->config, s->kernels, s->threads, s->mem };
    if (!s->ctx) {
        K3Config cfg;
        char cpath[4200];
        if (!s->config) snprintf(cpath, sizeof cpath, "%s/config.json", s->model_dir);
        int rc = k3_config_load(s->config ? s->config : cpath, &cfg, err, errlen);
        if (rc) return rc;
        s->ctx = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 32768;
    }
    eo.mem.ctx = s->ctx < 4096 ? s->ctx : 4096;
    /* every request in flight fits one step, with a row of logits each; without
     * --max-batch the plan lowers a chunk's worth of sequences to what fits */
    const int want = s->max_batch ? s->max_batch : K3_PREFILL_CHUNK;
    const int rows = s->draft_dir ? want * (s->draft_block + 1) : want;   /* verify rows */
    eo.mem.chunk = rows > K3_PREFILL_CHUNK ? rows : K3_PREFILL_CHUNK;
    eo.mem.logits_rows = rows; eo.mem.seqs = want;
    eo.mem.undo_T = s->draft_dir ? s->draft_block + 1 : 0;
    eo.mem.seqs_auto = !s->max_batch;
    eo.mem.state_file = s->state_file;
    eo.mem.state_dir = s->state_file_dir;
    /* --draft: its share in the plan, a context a slot (a bad folder: refused at open) */
    if (s->draft_dir && k3_dspark_plan_file(s->draft_dir, &eo.mem.draft, err, errlen))
        memset(&eo.mem.draft, 0, sizeof eo.mem.draft);
    eo.mem.quiet = !s->mem.verbose;
    /* a model with a tower: images may come; the tower and every sequence's images get what
     * the text model leaves (the tower runs one request at a time on the engine thread) */
    char verr[512];
    if (k3_comm_size() == 1 && !k3_vision_mem_plan(s->model_dir, K3_VISION_MAX_PATCHES,
                                                   K3_VISION_MAX_PATCHES, 0, &eo.mem.vision,
                                                   verr, sizeof verr))
        eo.mem.vision.fill = eo.mem.vision.per_seq = 1;
    else memset(&eo.mem.vision, 0, sizeof eo.mem.vision);
    int rc = k3_engine_open(&s->eng, &eo, err, errlen);
    if (rc) return rc;
    s->batch_auto = !s->max_batch;
    if (!s->max_batch) s->max_batch = k3_mem_seqs(s->eng.mem);         /* what the plan fits */
    if (s->max_batch > s->eng.rs.max_T) s->max_batch = s->eng.rs.max_T;   /* the plan's chunk */
    const K3SchedOpts so = { s->max_batch, -1, s->state_file_dir, eo.mem.ctx, 0 };
    if ((rc = k3_sched_open(&s->sch, &s->eng, &so, err, errlen))) return rc;
    k3_sched_mirror(s->sch);
    if (s->max_batch > k3_sched_slots(s->sch)) s->max_batch = k3_sched_slots(s->sch);
    if (s->max_batch > k3_sched_max_T(s->sch)) s->max_batch = k3_sched_max_T(s->sch);
    if (s->draft_dir && (rc = serve_draft_open(s, err, errlen))) {
        char e2[1024];
        snprintf(e2, sizeof e2, "--draft %.1000s", err);
        snprintf(err, errlen, "%s", e2);
        return rc;
    }
    if (k3_mem_state_mode(s->eng.mem) == K3_STATES_ALL && s->ctx > eo.mem.ctx)
        s->ctx = eo.mem.ctx;                /* the state file's records hold that many */
    if (tok_vocab_size(s->tok) > s->eng.m.cfg.vocab_size) {
        snprintf(err, errlen, "the tokenizer in %s has %d ids but the model only %d; use the "
                 "checkpoint's own tokenizer", s->tok_dir, tok_vocab_size(s->tok),
                 s->eng.m.cfg.vocab_size);
        return K3_ERR_USAGE;
    }
    return 0;
}

/* The server stops: the requests still queued are answered 503, later ones too, and every
 * request being answered gets its log line before the process ends (a connection thread
 * still sending is waited for up to --timeout, its send timeout). */
static void drain(Server *s) {
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    Job *q = s->qhead;
    s->qhead = s->qtail = NULL; s->qlen = 0;
    pthread_mutex_unlock(&s->mu);
    while (q) {
        Job *j = q;
        q = j->next;
        j->status = 503; j->interrupted = 1;
        http_error_api(j->fd, 503, "the server is stopping", 0, j->req.api);
        pthread_mutex_lock(&s->mu);
        j->done = 1;
        pthread_cond_signal(&j->cv);
        pthread_mutex_unlock(&s->mu);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += s->timeout_s + 1;
    pthread_mutex_lock(&s->mu);
    while (s->busy && pthread_cond_timedwait(&s->idle, &s->mu, &ts) == 0) {}
    pthread_mutex_unlock(&s->mu);
}

int k3_serve_main(int argc, char **argv) {
    Server *s = &srv;
    char err[4096];
    int rc = parse(argc, argv, s);
    if (rc) return rc < 0 ? 0 : rc;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    pthread_cond_init(&s->idle, NULL);
    const char *slash = strrchr(s->model_dir, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s",
             slash && slash[1] ? slash + 1 : s->model_dir);
    s->tok = tok_load(s->tok_dir, err, sizeof err);
    if (!s->tok) { fprintf(stderr, "k3: %s\n", err); return K3_ERR_USAGE; }
    if (xtml_ids(s->tok, &s->ids, err, sizeof err)) {
        fprintf(stderr, "k3: %s/%s\n", s->tok_dir, err); tok_free(s->tok); return K3_ERR_USAGE;
    }
    /* A test hook: every chat or completion reply is these ids (the text, XTML markup as
     * control tokens) instead of sampled ones, still fed through the engine, so the tool
     * call parser can be tested end to end on a random model (tests/sh/serve_tools.sh). */
    const char *tr = getenv("K3_SERVE_TEST_REPLY");
    if (tr && *tr) {
        s->test_reply = tok_encode(s->tok, tr, strlen(tr), 1, &s->n_test_reply);
        fprintf(stderr, "k3: serve: K3_SERVE_TEST_REPLY is set: every reply is its %zu ids "
                "(a test hook)\n", s->n_test_reply);
    }
    /* A test hook: every reply holds after N tokens (the engine waits) until its client goes
     * away or the server stops, so a test can stop a reply that cannot end by itself. */
    const char *th = getenv("K3_SERVE_TEST_HOLD");
    if (th && *th) {
        s->test_hold = atoi(th);
        fprintf(stderr, "k3: serve: K3_SERVE_TEST_HOLD is set: every reply holds after %d "
                "tokens until its client goes (a test hook)\n", s->test_hold);
    }
    signal(SIGPIPE, SIG_IGN);
    if (k3_comm_rank() > 0) {             /* a follower: no socket; rank 0 says when to end */
        signal(SIGINT, SIG_IGN); signal(SIGTERM, SIG_IGN);
        rc = open_engine(s, err, sizeof err);
        if (rc) { fprintf(stderr, "k3: %s\n", err); return rc; }
        return k3_sched_follow(s->sch);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int port = 0;
    static int lfd;
    lfd = listen_on(s, &port, err, sizeof err);
    if (lfd < 0) {
        fprintf(stderr, "k3: %s\n", err); tok_free(s->tok);
        return lfd == -2 ? K3_ERR_USAGE : K3_ERR_RUNTIME;
    }
    if (!loopback(s->host) && !s->api_key)
        fprintf(stderr, "k3: warning: serving on %s without --api-key: anyone who can reach "
                "this address can use the model\n", s->host);
    pthread_t at;
    if (pthread_create(&at, NULL, accept_main, &lfd)) {
        fprintf(stderr, "k3: cannot start the accept thread\n"); return K3_ERR_RUNTIME;
    }
    pthread_detach(at);
    double t0 = k3_now();
    rc = open_engine(s, err, sizeof err);
    if (rc) { fprintf(stderr, "k3: %s\n", err); k3_engine_close(&s->eng); tok_free(s->tok);
              return rc; }
    rc = serve_disk_load(s);
    if (rc) { k3_engine_close(&s->eng); tok_free(s->tok); return rc; }
    K3Machine mc;                              /* /metrics' peak and bandwidth (cached) */
    const int mc_ok = !k3_machine_get(&mc, 0);
    pthread_mutex_lock(&s->mu);
    if (mc_ok) { s->st.fma_gflops = mc.fma_gflops; s->st.read_gbps = mc.read_gbps; }
    s->ready = 1;
    pthread_mutex_unlock(&s->mu);
    fprintf(stderr, "k3: serving %s (%d layers, vocab %d, context %d; kernels %s; max batch "
            "%d%s; opened in %.2f s)\n", s->model_dir, s->eng.m.cfg.num_hidden_layers,
            s->eng.m.cfg.vocab_size, s->ctx, k3_kernels_name(), s->max_batch,
            s->batch_auto ? ", the memory plan's" : "", k3_now() - t0);
    /* 0.0.0.0 and :: are no address a browser can open: this machine's loopback is */
    const int v6 = strchr(s->host, ':') != NULL;
    char url[160], note[160] = "";
    snprintf(url, sizeof url, "http://%s%s%s:%d/", v6 ? "[" : "",
             s->host_any ? (v6 ? "::1" : "127.0.0.1") : s->host, v6 ? "]" : "", port);
    if (s->host_any)
        snprintf(note, sizeof note, "; --host %s listens on every interface (from another "
                 "machine, use this machine's address)", s->host);
    if (!s->no_webui) fprintf(stderr, "k3: chat page: open %s in a browser%s\n", url, note);
    fprintf(stderr, "k3: listening on http://%s%s%s:%d%s\n", v6 ? "[" : "", s->host,
            v6 ? "]" : "", port, s->host_any ? " (every interface)" : "");
    serve_engine_loop(s, &stopping);
    fprintf(stderr, "k3: serve: stopping\n");
    drain(s);
    const long failures = k3_engine_expert_failures(&s->eng);
    serve_cache_free(s);
    k3_sched_end(s->sch, failures ? K3_ERR_EXPERT : 0);   /* the other ranks end too */
    /* connection threads may still wait on the queue: leave the engine open, exit */
    return failures ? K3_ERR_EXPERT : 0;
}
