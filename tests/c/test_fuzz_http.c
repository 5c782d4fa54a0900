/* test_fuzz_http.c — k3 serve's HTTP request-head parser (http_parse) and request-JSON
 * validators (serve_req_parse; serve_anth_parse, /v1/messages; serve_resp_parse,
 * /v1/responses): fixed cases with their
 * expected status, then deterministic mutation fuzzing (the pattern of
 * test_fuzz_parsers.c): thousands of mutated heads and bodies must never crash (ASan/UBSan
 * for the full effect), every refusal must carry a message, and every result must be one
 * of the documented statuses. Runs in seconds. */
#include "serve/serve.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("  FAIL: "); printf(__VA_ARGS__); printf("\n"); \
                                       fails++; } } while (0)

static int head(const char *s, HttpReq *r) {
    char err[256] = "";
    int rc = http_parse(s, strlen(s), HTTP_MAX_BODY, r, err, sizeof err);
    if (rc < 0) CHECK(err[0], "refusal without a message for %.40s", s);
    return rc;
}

static void fixed_heads(void) {
    HttpReq r;
    const char *ok = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
                     "Authorization: Bearer k\r\n\r\n{\"a\": 1}";
    int n = head(ok, &r);
    CHECK(n == (int)(strstr(ok, "\r\n\r\n") - ok) + 4, "complete head length %d", n);
    CHECK(!strcmp(r.method, "POST") && !strcmp(r.path, "/v1/chat/completions"), "line");
    CHECK(r.has_length && r.content_length == 12 && r.keep_alive, "length / keep-alive");
    CHECK(!strcmp(r.auth, "Bearer k"), "auth '%s'", r.auth);
    CHECK(head("GET / HTTP/1.1\r\nHost: x\r\n", &r) == 0, "incomplete head needs more");
    CHECK(head("GET / HTTP/1.0\r\n\r\n", &r) > 0 && !r.keep_alive, "1.0 closes by default");
    CHECK(head("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r) > 0 &&
          !r.keep_alive, "Connection: close");
    static const struct { const char *s; int st; } bad[] = {
        { "GARBAGE\r\n\r\n", 400 },
        { "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
        { "GET x HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
        { "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505 },
        { "GET / HTTP/1.9\r\nHost: x\r\n\r\n", 505 },
        { "GET / FTP/1.1\r\nHost: x\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\n\r\n", 400 },                              /* no Host */
        { "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", 400 },
        { "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n", 413 },
        { "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 501 },
        { "POST / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 400 },
        { "GET / HTTP/1.1\r\nHost: x\r\nX: a\x01z\r\n\r\n", 400 },
        { "GET / HTTP/1.1\nHost: x\r\n\r\n", 400 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = head(bad[i].s, &r);
        CHECK(rc == -bad[i].st, "case %zu: got %d, want %d", i, rc, -bad[i].st);
    }
    char *big = malloc(HTTP_MAX_HEADER + 64);
    memset(big, 'a', HTTP_MAX_HEADER + 63);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    big[HTTP_MAX_HEADER + 63] = 0;
    CHECK(head(big, &r) == -431, "oversized head is 431");
    free(big);
}

static int body(const char *s, int kind) {
    char err[512] = "";
    ServeReq q;
    int rc = serve_req_parse(s, strlen(s), kind, &q, err, sizeof err);
    if (rc) CHECK(err[0] && rc == 400, "refusal %d without a message for %.60s", rc, s);
    serve_req_free(&q);
    return rc;
}

/* A request with every tool piece: declaration, named tool_choice, a call, its answer. */
#define TOOL_BODY \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"w?\", \"name\": \"bob\"}, " \
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", " \
    "\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": " \
    "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", " \
    "\"content\": \"18C\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": " \
    "\"get_weather\", \"parameters\": {\"type\": \"object\"}}}, {\"type\": \"function\", " \
    "\"function\": {\"name\": \"search\"}}], \"tool_choice\": {\"type\": \"function\", " \
    "\"function\": {\"name\": \"search\"}}, \"parallel_tool_calls\": false}"

/* An Anthropic Messages request with every piece: system blocks, a tool_use sent back with
 * its tool_result, thinking, tools, a named tool_choice. */
#define ANTH_BODY \
    "{\"model\": \"m\", \"max_tokens\": 9, \"system\": [{\"type\": \"text\", \"text\": " \
    "\"S\"}], \"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": " \
    "\"assistant\", \"content\": [{\"type\": \"thinking\", \"thinking\": \"t\", " \
    "\"signature\": \"\"}, {\"type\": \"tool_use\", \"id\": \"u1\", \"name\": \"get_weather\", " \
    "\"input\": {\"city\": \"Paris\"}}]}, {\"role\": \"user\", \"content\": [{\"type\": " \
    "\"tool_result\", \"tool_use_id\": \"u1\", \"content\": [{\"type\": \"text\", " \
    "\"text\": \"18C\"}]}, {\"type\": \"text\", \"text\": \"more\"}]}], \"tools\": " \
    "[{\"name\": \"get_weather\", \"input_schema\": {\"type\": \"object\"}}, {\"name\": " \
    "\"search\", \"input_schema\": {}}], \"tool_choice\": {\"type\": \"tool\", \"name\": " \
    "\"search\"}, \"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 1024}, " \
    "\"stop_sequences\": [\"x\"], \"temperature\": 0.5, \"stream\": true}"

/* A Responses request with every input item kind (serve_responses.c). */
#define RESP_BODY "{\"model\": \"m\", \"instructions\": \"S\", \"input\": [{\"role\": " \
    "\"user\", \"content\": [{\"type\": \"input_text\", \"text\": \"a\"}]}, {\"type\": " \
    "\"reasoning\", \"summary\": [{\"type\": \"summary_text\", \"text\": \"t\"}]}, " \
    "{\"type\": \"function_call\", \"call_id\": \"c1\", \"name\": \"f\", \"arguments\": " \
    "\"{}\"}, {\"type\": \"function_call_output\", \"call_id\": \"c1\", \"output\": " \
    "\"18C\"}, {\"type\": \"message\", \"role\": \"developer\", \"content\": \"more\"}], " \
    "\"tools\": [{\"type\": \"function\", \"name\": \"f\", \"parameters\": " \
    "{\"type\": \"object\"}}], \"tool_choice\": \"required\", \"max_output_tokens\": 9, " \
    "\"reasoning\": {\"effort\": \"low\"}, \"temperature\": 0.5, \"stream\": true, " \
    "\"store\": true}"

/* An image each way the three APIs take one (serve_image.c): Anthropic's base64 source
 * (8 PNG signature bytes: the media_type check reads the magic only) beside a text block,
 * and Responses' input_image with its detail. */
#define ANTH_IMG_BODY "{\"max_tokens\": 9, \"messages\": [{\"role\": \"user\", " \
    "\"content\": [{\"type\": \"image\", \"source\": {\"type\": \"base64\", " \
    "\"media_type\": \"image/png\", \"data\": \"iVBORw0KGgo=\"}, \"cache_control\": " \
    "{\"type\": \"ephemeral\"}}, {\"type\": \"text\", \"text\": \"w?\"}]}]}"
#define RESP_IMG_BODY "{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": " \
    "\"input_text\", \"text\": \"w?\"}, {\"type\": \"input_image\", \"image_url\": " \
    "\"data:image/gif;base64,R0lGODlh\", \"detail\": \"low\"}]}], \"store\": true}"

/* The image fields: accepted as the chat request's image_url part (the bytes decoded, a
 * placeholder where the image goes), every misuse refused with the API's field name. */
static void image_bodies(void) {
    char err[512];
    ServeReq q;
    CHECK(serve_anth_parse(ANTH_IMG_BODY, strlen(ANTH_IMG_BODY), 0, &q, err, sizeof err) == 0,
          "anthropic image: %s", err);
    CHECK(q.n_img == 1 && q.img_n[0] == 8 && !memcmp(q.img[0], "\x89PNG", 4) && q.n_msgs == 1 &&
          !strcmp(q.msgs[0].content, K3_IMAGE_PLACEHOLDER "w?"), "anthropic image translated");
    serve_req_free(&q);
    CHECK(serve_resp_parse(RESP_IMG_BODY, strlen(RESP_IMG_BODY), &q, err, sizeof err) == 0,
          "responses image: %s", err);
    CHECK(q.n_img == 1 && q.img_n[0] == 6 && !memcmp(q.img[0], "GIF89a", 6) &&
          !strcmp(q.msgs[0].content, "w?" K3_IMAGE_PLACEHOLDER) && q.resp.hist &&
          strstr(q.resp.hist, "data:image/gif;base64,R0lGODlh"), "responses image translated");
    serve_req_free(&q);
    static const struct { int api; const char *part, *want; } bad[] = {
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": "
             "\"image/jpeg\", \"data\": \"iVBORw0KGgo=\"}}", "is image/jpeg but the data is" },
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": "
             "\"image/png\", \"data\": \"iVBO*w==\"}}", "content[0].source.data: base64" },
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": "
             "\"text/plain\", \"data\": \"aGk=\"}}", "source.media_type must be" },
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": "
             "\"image/png\", \"data\": \"\"}}", "non-empty base64" },
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"url\", \"url\": "
             "\"https://x/a.png\"}}", "does not fetch" },
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"file\", \"file_id\": \"f\"}}",
          "no Files API" },
        { 1, "{\"type\": \"image\", \"source\": \"x\"}", ".source must be" },
        { 1, "{\"type\": \"image\", \"source\": {\"type\": \"base64\", \"media_type\": "
             "\"image/png\", \"data\": \"iVBORw0KGgo=\", \"x\": 1}}", "unknown field 'x'" },
        { 2, "{\"type\": \"input_image\", \"image_url\": \"https://x/a.png\"}", "not fetch" },
        { 2, "{\"type\": \"input_image\", \"file_id\": \"file-1\"}", "no Files API" },
        { 2, "{\"type\": \"input_image\", \"image_url\": \"data:image/png;base64,@\"}",
          "input[0].content[0].image_url: base64" },
        { 2, "{\"type\": \"input_image\"}", "image_url must be a string" },
        { 2, "{\"type\": \"input_image\", \"image_url\": \"data:image/png;base64,iVBORw0KGgo=\", "
             "\"detail\": 1}", "detail must be a string" },
        { 2, "{\"type\": \"input_file\", \"file_id\": \"f\"}", "not supported" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char b[512];
        if (bad[i].api == 1)
            snprintf(b, sizeof b, "{\"max_tokens\": 9, \"messages\": [{\"role\": \"user\", "
                     "\"content\": [%s]}]}", bad[i].part);
        else
            snprintf(b, sizeof b, "{\"input\": [{\"role\": \"user\", \"content\": [%s]}]}",
                     bad[i].part);
        err[0] = 0;
        int rc = bad[i].api == 1 ? serve_anth_parse(b, strlen(b), 0, &q, err, sizeof err)
                                 : serve_resp_parse(b, strlen(b), &q, err, sizeof err);
        CHECK(rc == 400 && strstr(err, bad[i].want), "image case %zu: %d '%s' (want '%s')", i,
              rc, err, bad[i].want);
        serve_req_free(&q);
    }
    /* an image where the API takes none: an assistant turn, a tool result, a system prompt */
    static const char *const nowhere[] = {
        "{\"input\": [{\"role\": \"assistant\", \"content\": [{\"type\": \"input_image\", "
        "\"image_url\": \"data:image/png;base64,iVBORw0KGgo=\"}]}]}",
        "{\"input\": [{\"type\": \"function_call_output\", \"call_id\": \"c\", \"output\": "
        "[{\"type\": \"input_image\", \"image_url\": \"data:image/png;base64,iVBORw0KGgo=\"}]}]}",
        "{\"max_tokens\": 9, \"system\": [{\"type\": \"image\", \"source\": {}}], "
        "\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}",
        "{\"max_tokens\": 9, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
        "\"tool_result\", \"tool_use_id\": \"u\", \"content\": [{\"type\": \"image\"}]}]}]}",
    };
    for (size_t i = 0; i < sizeof nowhere / sizeof *nowhere; i++) {
        const char *b = nowhere[i];
        err[0] = 0;
        int rc = b[2] == 'i' ? serve_resp_parse(b, strlen(b), &q, err, sizeof err)
                             : serve_anth_parse(b, strlen(b), 0, &q, err, sizeof err);
        CHECK(rc == 400 && (strstr(err, "user message") || strstr(err, "images go")),
              "image nowhere %zu: %d '%s'", i, rc, err);
        serve_req_free(&q);
    }
}

static void fixed_bodies(void) {
    char err[512];
    ServeReq q;
    const char *ok = "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"S\"},"
        "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
        "{\"type\": \"text\", \"text\": \"b\"}]}, {\"role\": \"assistant\", \"content\": \"c\","
        " \"reasoning_content\": \"r\"}], \"temperature\": 0, \"max_tokens\": 7, \"seed\": 3,"
        " \"stop\": [\"x\", \"yz\"], \"stream\": true,"
        " \"stream_options\": {\"include_usage\": true},"
        " \"reasoning_effort\": \"low\"}";
    CHECK(serve_anth_parse(ANTH_BODY, strlen(ANTH_BODY), 0, &q, err, sizeof err) == 0,
          "anthropic: %s", err);
    CHECK(q.api && q.n_msgs == 5 && !strcmp(q.msgs[0].role, "system") &&
          !strcmp(q.msgs[2].reasoning, "t") && q.ext[2].n_calls == 1 &&
          !strcmp(q.msgs[3].role, "tool") && !strcmp(q.msgs[3].content, "18C") &&
          !strcmp(q.msgs[4].content, "more") && q.tool_choice == XTC_REQUIRED && q.stream &&
          q.n_stop == 1 && q.max_tokens == 9 && q.thinking, "anthropic translated");
    serve_req_free(&q);
    CHECK(serve_anth_parse("{\"messages\": []}", 16, 0, &q, err, sizeof err) == 400 && err[0],
          "anthropic refusal");
    serve_req_free(&q);
    CHECK(serve_resp_parse(RESP_BODY, strlen(RESP_BODY), &q, err, sizeof err) == 0,
          "responses: %s", err);
    CHECK(q.api == 2 && q.n_msgs == 5 && !strcmp(q.msgs[0].role, "system") &&
          !strcmp(q.msgs[2].reasoning, "t") && q.ext[2].n_calls == 1 &&
          !strcmp(q.msgs[3].role, "tool") && !strcmp(q.msgs[3].content, "18C") &&
          !strcmp(q.msgs[4].role, "system") && q.tool_choice == XTC_REQUIRED && q.stream &&
          q.max_tokens == 9 && q.resp.store && q.resp.hist, "responses translated");
    serve_req_free(&q);
    CHECK(serve_resp_parse("{\"input\": []}", 13, &q, err, sizeof err) == 400 && err[0],
          "responses refusal");
    serve_req_free(&q);
    const char *prev = "{\"input\": \"a\", \"previous_response_id\": \"resp_7\"}";
    CHECK(serve_resp_parse(prev, strlen(prev), &q, err, sizeof err) == 404 &&
          strstr(err, "resp_7"), "responses 404");
    serve_req_free(&q);
    CHECK(serve_req_parse(ok, strlen(ok), REQ_CHAT, &q, err, sizeof err) == 0, "ok: %s", err);
    CHECK(q.n_msgs == 3 && !strcmp(q.msgs[1].content, "ab") && !strcmp(q.msgs[2].reasoning, "r"),
          "messages");
    CHECK(q.sp.greedy && q.max_tokens == 7 && q.seed_set && q.seed == 3 && q.n_stop == 2 &&
          q.stream && q.include_usage && !strcmp(q.effort, "low") && q.thinking, "fields");
    serve_req_free(&q);
    const char *off = "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], "
                      "\"chat_template_kwargs\": {\"thinking\": false}}";
    CHECK(serve_req_parse(off, strlen(off), REQ_CHAT, &q, err, sizeof err) == 0 && !q.thinking,
          "thinking off");
    serve_req_free(&q);
    CHECK(serve_req_parse(TOOL_BODY, strlen(TOOL_BODY), REQ_CHAT, &q, err, sizeof err) == 0,
          "tools: %s", err);
    CHECK(q.n_msgs == 3 && q.ext && q.ext[1].n_calls == 1 &&
          !strcmp(q.ext[1].calls[0].name, "get_weather") &&
          !strcmp(q.ext[1].calls[0].arguments, "{\"city\": \"Paris\"}") &&
          !strcmp(q.ext[2].tool_call_id, "c1") && !strcmp(q.ext[0].name, "bob") &&
          q.tool_choice == XTC_REQUIRED && q.parse_tools && q.tools_json &&
          !strcmp(q.tools_json, "[{\"function\":{\"name\":\"search\"},\"type\":\"function\"}]"),
          "tool fields (declaration %s)", q.tools_json ? q.tools_json : "(none)");
    serve_req_free(&q);
    /* reasoning_effort: every OpenAI value onto an effort the encoder accepts */
    static const struct { const char *v, *effort; int thinking; } eff[] = {
        { "none", "max", 0 }, { "minimal", "low", 1 }, { "low", "low", 1 },
        { "medium", "high", 1 }, { "high", "high", 1 }, { "xhigh", "max", 1 }, { "max", "max", 1 },
    };
    for (size_t i = 0; i < sizeof eff / sizeof *eff; i++) {
        char b[160];
        snprintf(b, sizeof b, "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], "
                 "\"reasoning_effort\": \"%s\"}", eff[i].v);
        int rc = serve_req_parse(b, strlen(b), REQ_CHAT, &q, err, sizeof err);
        CHECK(rc == 0 && q.thinking == eff[i].thinking && !strcmp(q.effort, eff[i].effort) &&
              (!q.thinking || xtml_effort_ok(q.effort)),
              "reasoning_effort %s: rc %d thinking %d effort %s", eff[i].v, rc, q.thinking,
              q.effort);
        serve_req_free(&q);
    }
    CHECK(!serve_effort("Medium") && !serve_effort("") && !serve_effort("maximum"),
          "unknown reasoning_effort values are refused");
    static const char *bad[] = {
        "{", "[]", "\"s\"", "", "{}", "{\"messages\": 1}", "{\"messages\": []}",
        "{\"messages\": [1]}", "{\"messages\": [{\"content\": \"a\"}]}",
        "{\"messages\": [{\"role\": \"robot\", \"content\": \"a\"}]}",
        "{\"messages\": [{\"role\": \"user\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000b\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\", \"x\": 1}]}",
        "{\"messages\": [{\"role\": \"tool\", \"content\": \"a\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"foo\": 1}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"temperature\": -1}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"top_p\": 0}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"max_tokens\": 0}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"stop\": [1]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"n\": 17}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"tools\": [{}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"reasoning_effort\": \"x\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"stream_options\": {}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(body(bad[i], REQ_CHAT) == 400, "chat case %zu accepted: %s", i, bad[i]);
    CHECK(body("{\"prompt\": \"a\", \"max_tokens\": 3}", REQ_COMPLETION) == 0, "completion ok");
    CHECK(body("{\"prompt\": 3}", REQ_COMPLETION) == 400, "prompt type");
    CHECK(body("{\"prompt\": \"a\", \"messages\": []}", REQ_COMPLETION) == 400, "unknown field");
}

/* ---- mutation fuzzing ---- */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static const char *TOKENS[] = { "\"tools\"", "\"tool_calls\"", "\"tool\"", "\"function\"",
    "\"tool_choice\"", "\"required\"", "\"arguments\"", "\"tool_call_id\"", "\"name\"",
    "\r\n", "\r\n\r\n", ":", " ", "\n", "Content-Length: ",
    "Host: x\r\n", "Transfer-Encoding: chunked\r\n", "Connection: close\r\n", "HTTP/1.1",
    "99999999999999999999", "0", "\x00", "\xff", "{", "}", "[", "]", ",", "\"", "\\u0000",
    "\\ud800", "null", "true", "1e999", "-1", "\"messages\"", "\"role\"", "\"user\"",
    "\"content\"", "\"stop\"", "\"stream\"", "\"temperature\"", "\"max_tokens\"",
    "\"stream_options\"", "\"chat_template_kwargs\"", "\"thinking\"", "\"type\"", "\"text\"",
    "\"image\"", "\"source\"", "\"base64\"", "\"media_type\"", "\"image/png\"", "\"data\"",
    "\"url\"", "\"file\"", "\"input_image\"", "\"image_url\"", "\"detail\"", "\"file_id\"",
    "\"data:image/png;base64,iVBORw0KGgo=\"", "iVBORw0KGgo=", "R0lGODlh", "/9j/", "=" };
#define NTOK (sizeof TOKENS / sizeof *TOKENS)

static void mutate(unsigned char *s, size_t *n, size_t cap) {
    size_t pos = *n ? rnd() % *n : 0;
    switch (rnd() % 5) {
    case 0: if (*n) s[pos] ^= (unsigned char)(1u << (rnd() % 8)); break;
    case 1: if (*n) s[pos] = (unsigned char)rnd(); break;
    case 2:
        if (*n) {
            size_t l = 1 + rnd() % 8; if (pos + l > *n) l = *n - pos;
            memmove(s + pos, s + pos + l, *n - pos - l); *n -= l;
        }
        break;
    case 3: {
        const char *t = TOKENS[rnd() % NTOK];
        size_t l = strlen(t) ? strlen(t) : 1;
        if (*n + l < cap) {
            memmove(s + pos + l, s + pos, *n - pos); memcpy(s + pos, t, l); *n += l;
        }
    } break;
    default: if (*n) *n = rnd() % *n; break;
    }
}

/* Image files (serve_image_file.c, --image-dir): refused without the flag; with it a path or
 * file:// URL inside the folder gives the file's bytes (Responses: as a data: URL whose
 * base64, padded each way, decodes to them), every escape refused naming the rule. The
 * folder (made here, in /tmp) stays set for fuzz()'s file:// seed; *dir gets its name. */
static char img_dir[64];
static void wfile(const char *name, const char *b, size_t n) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", img_dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n, "write %s", p);
    if (f) fclose(f);
}
static int chat_img(const char *url, ServeReq *q, char *err, size_t errlen) {
    char b[512];
    snprintf(b, sizeof b, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
             "\"image_url\", \"image_url\": {\"url\": \"%s\"}}]}]}", url);
    err[0] = 0;
    return serve_req_parse(b, strlen(b), REQ_CHAT, q, err, errlen);
}
static void image_files(void) {
    static const char PNG[] = "\x89PNG\r\n\x1a\n\x01\x02";
    char err[1024], u[256], p[128];
    ServeReq q;
    snprintf(img_dir, sizeof img_dir, "/tmp/k3_imgdir_XXXXXX");
    if (!mkdtemp(img_dir)) { CHECK(0, "mkdtemp"); img_dir[0] = 0; return; }
    wfile("a.png", PNG, 8); wfile("b9.png", PNG, 9); wfile("c10.png", PNG, 10);
    snprintf(p, sizeof p, "%s/sub", img_dir); mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/root", img_dir);
    CHECK(symlink("/", p) == 0, "symlink %s", p);          /* a link out of the folder */
    serve_image_dir_set(NULL, err, sizeof err);
    snprintf(u, sizeof u, "%s/a.png", img_dir);
    CHECK(chat_img(u, &q, err, sizeof err) == 400 && strstr(err, "--image-dir DIR"),
          "a path without --image-dir: '%s'", err);
    serve_req_free(&q);
    CHECK(serve_image_dir_set(u, err, sizeof err) && strstr(err, "is not a folder"),
          "--image-dir a file: '%s'", err);
    CHECK(!serve_image_dir_set(img_dir, err, sizeof err) && serve_image_dir(), "set: %s", err);
    for (int k = 0; k < 3; k++) {                /* a path, a file:// URL, one with escapes */
        snprintf(u, sizeof u, "%s%s/%s", k ? "file://" : "", img_dir,
                 k == 2 ? "sub/../a%2Epng" : "a.png");
        CHECK(chat_img(u, &q, err, sizeof err) == 0 && q.n_img == 1 && q.img_n[0] == 8 &&
              !memcmp(q.img[0], PNG, 8), "%s: '%s'", u, err);
        serve_req_free(&q);
    }
    static const char *const NAME[] = { "a.png", "b9.png", "c10.png" };
    for (int k = 0; k < 3; k++) {
        char b[512];
        snprintf(b, sizeof b, "{\"input\": [{\"role\": \"user\", \"content\": [{\"type\": "
                 "\"input_image\", \"image_url\": \"%s/%s\"}]}], \"store\": true}", img_dir,
                 NAME[k]);
        CHECK(serve_resp_parse(b, strlen(b), &q, err, sizeof err) == 0 && q.n_img == 1 &&
              q.img_n[0] == (size_t)(8 + k) && !memcmp(q.img[0], PNG, 8 + (size_t)k) &&
              q.resp.hist && strstr(q.resp.hist, k ? "data:image/png;base64,iVBORw0KGgo" :
                                      "data:image/png;base64,iVBORw0KGgo=\""),
              "responses %s: '%s'", NAME[k], err);
        serve_req_free(&q);
    }
    static const struct { const char *pre, *path, *want; } bad[] = {
        { "", "/../a.png", "is outside --image-dir" },
        { "", "/sub/../../a.png", "is outside --image-dir" },
        { "", "/root/etc", "leads outside --image-dir" },
        { "", "/sub", "not a regular file (a folder)" },
        { "", "/nope.png", "no such file in --image-dir" },
        { "file://", "/a%2", "bad %-escape" },
        { "file://", "/a%00", "%00" },
        { "file://", "/a.png?x", "query or fragment" },
        { "file://host", "/a.png", "names a host" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(u, sizeof u, "%s%s%s", bad[i].pre, img_dir, bad[i].path);
        CHECK(chat_img(u, &q, err, sizeof err) == 400 && strstr(err, bad[i].want),
              "file case %zu: '%s' (want '%s')", i, err, bad[i].want);
        serve_req_free(&q);
    }
    CHECK(chat_img("a.png", &q, err, sizeof err) == 400 && strstr(err, "absolute path"),
          "a relative path: '%s'", err);
    serve_req_free(&q);
}
static void image_files_done(void) {
    static const char *const F[] = { "a.png", "b9.png", "c10.png", "root", NULL };
    char p[128], err[256];
    if (!img_dir[0]) return;
    for (int k = 0; F[k]; k++) { snprintf(p, sizeof p, "%s/%s", img_dir, F[k]); unlink(p); }
    snprintf(p, sizeof p, "%s/sub", img_dir); rmdir(p);
    rmdir(img_dir);
    serve_image_dir_set(NULL, err, sizeof err);
}

static void fuzz(int iters) {
    static const char *seeds_h[] = {
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n",
        "GET /health HTTP/1.0\r\nConnection: keep-alive\r\nAuthorization: Bearer k\r\n\r\n" };
    const char *seeds_b[] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", "
        "\"image_url\": {\"url\": \"data:image/png;base64,iVBORw0KGgo=\"}}, {\"type\": "
        "\"text\", \"text\": \"a\"}]}, {\"role\": \"assistant\", "
        "\"content\": [{\"type\": \"text\", \"text\": \"b\"}], \"reasoning_content\": \"r\"}], "
        "\"temperature\": 0.5, \"stop\": [\"x\"], \"stream\": true, \"stream_options\": "
        "{\"include_usage\": true}, \"chat_template_kwargs\": {\"thinking\": false}}",
        "{\"prompt\": \"abc\", \"max_tokens\": 3, \"top_k\": 4, \"seed\": 1, \"stop\": \"q\", "
        "\"grammar\": \"root ::= [a-c]{1,3} (\\\"x\\\" root)? # c\\n\"}",
        TOOL_BODY,
        "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"logprobs\": true, "
        "\"top_logprobs\": 2, \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
        "{\"schema\": {\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [1, \"b\"]}, "
        "\"l\": {\"items\": {\"type\": \"string\", \"maxLength\": 2}}}, \"required\": [\"a\"], "
        "\"additionalProperties\": false}}}}", ANTH_BODY, RESP_BODY, ANTH_IMG_BODY,
        RESP_IMG_BODY, NULL };
    char file_seed[256];                       /* an image file (image_files()'s folder) */
    snprintf(file_seed, sizeof file_seed, "{\"messages\": [{\"role\": \"user\", \"content\": "
             "[{\"type\": \"image_url\", \"image_url\": \"file://%s/sub/../a%%2Epng\"}]}]}",
             img_dir);
    seeds_b[8] = file_seed;
    size_t cap = 4096;
    unsigned char *s = malloc(cap);
    long accepted = 0, refused = 0;
    for (int it = 0; it < iters; it++) {
        int which = it % 11;
        const char *seed = which < 2 ? seeds_h[which] : seeds_b[which - 2];
        size_t n = strlen(seed);
        memcpy(s, seed, n);
        int m = 1 + (int)(rnd() % 6);
        for (int k = 0; k < m; k++) mutate(s, &n, cap);
        char err[512] = "";
        if (which < 2) {
            HttpReq r;
            int rc = http_parse((const char *)s, n, HTTP_MAX_BODY, &r, err, sizeof err);
            if (rc > 0) { accepted++; CHECK((size_t)rc <= n && r.method[0], "head length"); }
            else if (rc < 0) {
                refused++;
                CHECK(err[0], "head refusal without a message");
                CHECK(rc == -400 || rc == -413 || rc == -431 || rc == -501 || rc == -505,
                      "head status %d", -rc);
            }
        } else {
            ServeReq q;
            const char *t = (const char *)s;
            const int resp = which == 7 || which == 9, anth = which == 6 || which == 8;
            int rc = resp ? serve_resp_parse(t, n, &q, err, sizeof err)
                     : anth ? serve_anth_parse(t, n, it % 2, &q, err, sizeof err)
                     : serve_req_parse((const char *)s, n, which == 3 ? REQ_COMPLETION : REQ_CHAT,
                                       &q, err, sizeof err);
            if (rc) {
                refused++;
                CHECK((rc == 400 || (rc == 404 && resp)) && err[0],
                      "body refusal %d without message", rc);
            }
            else {
                accepted++;
                for (int i = 0; i < q.n_msgs; i++) CHECK(q.msgs[i].role != NULL, "role");
            }
            serve_req_free(&q);
        }
        if (fails > 10) break;
    }
    free(s);
    printf("fuzz: %d inputs, %ld accepted, %ld refused\n", iters, accepted, refused);
}

#ifdef K3_LIBFUZZER
/* libFuzzer targets: http_head (the request head, byte mutations from the seeds) and
 * serve_req (the request body as a chat and as a completion request, with the structural
 * JSON mutations of fuzz_json.h); the same checks as the built-in fuzzer, fatal. */
#include "fuzz_json.h"
static void must(int ok, const char *what) {
    if (!ok) { printf("FAIL %s\n", what); fflush(stdout); abort(); }
}
static const char *SEEDS[] = {
#ifdef FUZZ_TARGET_http_head
    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
    "Authorization: Bearer k\r\nConnection: keep-alive\r\n\r\n{\"a\": 1}",
    "GET /health HTTP/1.0\r\nConnection: keep-alive\r\nAuthorization: Bearer k\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    "Expect: 100-continue\r\n\r\n",
#elif defined FUZZ_TARGET_serve_req
    "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"S\"}, "
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, "
    "{\"type\": \"image_url\", \"image_url\": \"data:image/gif;base64,R0lGODlh\"}]}, "
    "{\"role\": \"assistant\", \"content\": \"c\", \"reasoning_content\": \"r\"}], "
    "\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 4, \"max_tokens\": 7, \"seed\": 3, "
    "\"stop\": [\"x\", \"yz\"], \"stream\": true, \"stream_options\": "
    "{\"include_usage\": true}, \"reasoning_effort\": \"low\", "
    "\"chat_template_kwargs\": {\"thinking\": false}}",
    "{\"prompt\": \"abc\", \"max_tokens\": 3, \"top_k\": 4, \"seed\": 1, \"stop\": \"q\", "
    "\"grammar\": \"root ::= [a-c]{1,3} (\\\"x\\\" root)? # c\\n\"}",
    "{\"prompt\": \"a\", \"max_tokens\": 0, \"echo\": true, \"logprobs\": 2, "
    "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": "
    "{\"type\": \"object\", \"properties\": {\"a\": {\"enum\": [1, \"b\"]}}, "
    "\"required\": [\"a\"], \"additionalProperties\": false}}}}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}], \"logprobs\": true, "
    "\"top_logprobs\": 3, \"response_format\": {\"type\": \"json_object\"}}",
    ANTH_BODY, RESP_BODY, ANTH_IMG_BODY, RESP_IMG_BODY,
    "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", "
    "\"image_url\": {\"url\": \"file://localhost/tmp/k3/../a%2Epng\"}}]}]}",
#else
#error "define FUZZ_TARGET_http_head or FUZZ_TARGET_serve_req"
#endif
};
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    fj_seeds = SEEDS; fj_nseeds = sizeof SEEDS / sizeof *SEEDS;
#ifdef FUZZ_TARGET_http_head
    fj_kind = FJ_RAW;
#else
    fj_kind = FJ_DOC;
#endif
    return 0;
}
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char err[512] = "";
#ifdef FUZZ_TARGET_http_head
    HttpReq r;
    int rc = http_parse((const char *)d, n, HTTP_MAX_BODY, &r, err, sizeof err);
    if (rc > 0) must((size_t)rc <= n && r.method[0] && r.path[0] == '/', "head accepted");
    else if (rc < 0)
        must(err[0] && (rc == -400 || rc == -413 || rc == -431 || rc == -501 || rc == -505),
             "head refusal: a documented status with a message");
#else
    for (int kind = 0; kind < 4; kind++) {          /* chat, completion, Anthropic's, Responses */
        ServeReq q;
        err[0] = 0;
        int rc = kind == 3 ? serve_resp_parse((const char *)d, n, &q, err, sizeof err)
               : kind == 2 ? serve_anth_parse((const char *)d, n, 0, &q, err, sizeof err)
                           : serve_req_parse((const char *)d, n, kind ? REQ_COMPLETION : REQ_CHAT,
                                             &q, err, sizeof err);
        if (rc) must((rc == 400 || (rc == 404 && kind == 3)) && err[0],
                     "body refusal: 400 (404: previous_response_id) with a message");
        else
            for (int i = 0; i < q.n_msgs; i++)
                must(q.msgs[i].role != NULL, "a message without a role");   /* content: NULL = "" */
        serve_req_free(&q);
    }
#endif
    return 0;
}
#else
int main(int argc, char **argv) {
    fixed_heads();
    fixed_bodies();
    image_bodies();
    image_files();
    fuzz(argc > 1 ? atoi(argv[1]) : 40000);
    image_files_done();
    if (fails) { printf("FAIL: %d check(s)\n", fails); return 1; }
    printf("ok http_parse, serve_req_parse, serve_anth_parse and serve_resp_parse\n");
    return 0;
}
#endif
