/* test_xtml_tools.c — XTML tools (TOKENIZER_XTML.md §6.4-§6.5): the tool declaration,
 * tool_choice messages, assistant tool_calls, tool messages (index counted since the last
 * assistant, runs re-sorted by tool_call_id), string- and id-exact against goldens from an
 * independent JavaScript transcription encoded by tiktoken (tools/tok/gen_xtml_goldens.js);
 * Python's json.dumps text (xtml_pyjson); and the completion parser's tools channel: a
 * rendered tool call parses back to the same calls, which render back to the same ids. */
#include "xtml.h"
#include "tok.h"
#include "xtml_goldens.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

/* keys deliberately unsorted: the declaration deep-sorts them */
static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
    "\"Weather for a city, \\\"now\\\" & later.\", \"parameters\": {\"type\": \"object\", "
    "\"required\": [\"city\"], \"properties\": {\"days\": {\"type\": \"integer\", \"minimum\": 1},"
    " \"city\": {\"type\": \"string\"}}}}}, {\"type\": \"function\", \"function\": {\"name\": "
    "\"search\", \"parameters\": {\"properties\": {\"q\": {\"type\": \"string\"}}, \"type\": "
    "\"object\"}}}]";

static const XtmlToolCall CALLS1[] = {
    { "c1", "get_weather", "{\"city\": \"Paris\"}" },
    { "c2", "get_weather",
      "{\"city\":\"Rome\",\"days\":3,\"opts\":{\"u\":\"c\",\"x\":[1,2.5,true,null]}}" },
};
static const XtmlToolCall CALLS2[] = {
    { "c3", "search", "not json {" },
    { "c4", "get_weather", "" },
};
#define NMSG 9
static const XtmlMsg CHAT[NMSG] = {
    { "system", "You can call tools.", NULL, NULL, 0, 0, 0 },
    { "user", "Weather in Paris and Rome?", NULL, NULL, 0, 0, 0 },
    { "assistant", "", "Two calls.", NULL, 0, 0, 0 },
    { "tool", "Rome: 20C", NULL, NULL, 0, 0, 0 },        /* answers c2: sorted after c1 */
    { "tool", "Paris: 18C", NULL, NULL, 0, 0, 0 },
    { "assistant", "Searching.", NULL, NULL, 0, 0, 0 },
    { "tool", "found", NULL, NULL, 0, 0, 0 },            /* unknown id: the run stays */
    { "tool", "cloudy", NULL, NULL, 0, 0, 0 },           /* no id: named by position */
    { "user", "Thanks", NULL, NULL, 0, 0, 0 },
};
static XtmlMsgExt EXT[NMSG];
static void setup_ext(void) {
    memset(EXT, 0, sizeof EXT);
    EXT[1].name = "bob";
    EXT[2].calls = CALLS1; EXT[2].n_calls = 2;
    EXT[3].tool_call_id = "c2";
    EXT[4].tool_call_id = "c1";
    EXT[5].calls = CALLS2; EXT[5].n_calls = 2;
    EXT[6].tool_call_id = "zz";
}

static char *tools_json(void) {
    char err[128];
    Json *j = json_parse(TOOLS, strlen(TOOLS), err, sizeof err);
    CHECK(j != NULL, "TOOLS: %s", err);
    char *s = j ? xtml_pyjson(j, 1, 1) : NULL;
    json_free(j);
    return s;
}

static void check_case(const Tok *t, XtmlOpts o, const XtmlTools *tl, const char *want,
                       int want_nseg, const int *want_ids, size_t nwant, const char *name) {
    XtmlSegs s;
    char err[256];
    if (xtml_segments_tools(CHAT, NMSG, &o, tl, &s, err, sizeof err)) {
        CHECK(0, "%s: %s", name, err); return;
    }
    size_t len;
    char *got = xtml_segs_string(&s, NULL, &len);
    if (got && strcmp(got, want)) {
        size_t i = 0;
        while (got[i] && got[i] == want[i]) i++;
        CHECK(0, "%s: string differs at byte %zu:\n  got  ...%.80s\n  want ...%.80s", name, i,
              got + i, want + i);
    }
    CHECK(s.n == want_nseg, "%s: %d segments, want %d", name, s.n, want_nseg);
    free(got);
    xtml_segs_free(&s);
    if (!t) return;
    int32_t *ids; size_t k;
    CHECK(xtml_render_ids_tools(t, CHAT, NMSG, &o, tl, &ids, &k, err, sizeof err) == 0, "%s", err);
    size_t i = 0;
    while (i < k && i < nwant && ids[i] == want_ids[i]) i++;
    CHECK(k == nwant && i == k, "%s: %zu ids, want %zu; first difference at %zu", name, k,
          nwant, i);
    free(ids);
}

static void test_render(const Tok *t) {
    setup_ext();
    char *tj = tools_json();
    XtmlTools tl = { tj, XTC_REQUIRED, EXT };
    check_case(t, (XtmlOpts){ 1, "max", 1, 0 }, &tl, g_tools_think_required_str,
               g_tools_think_required_nseg, g_tools_think_required,
               sizeof g_tools_think_required / sizeof(int), "tools, thinking, required");
    tl.tool_choice = XTC_NONE;
    check_case(t, (XtmlOpts){ 0, NULL, 1, 0 }, &tl, g_tools_off_none_str, g_tools_off_none_nseg,
               g_tools_off_none, sizeof g_tools_off_none / sizeof(int), "tools, no think, none");
    /* no tools given: the REPL's rendering, unchanged */
    XtmlSegs a, b;
    char err[256];
    XtmlOpts o = { 1, "max", 1, 0 };
    XtmlMsg plain[2] = { CHAT[1], CHAT[8] };
    CHECK(xtml_segments(plain, 2, &o, &a, err, sizeof err) == 0 &&
          xtml_segments_tools(plain, 2, &o, NULL, &b, err, sizeof err) == 0 && a.n == b.n,
          "NULL tools renders as before");
    xtml_segs_free(&a); xtml_segs_free(&b);
    /* refusals: a tool message without a resolvable name, arguments that are not an object */
    XtmlMsg lone[2] = { CHAT[1], CHAT[3] };
    CHECK(xtml_segments_tools(lone, 2, &o, NULL, &a, err, sizeof err) == -1 &&
          strstr(err, "tool"), "tool message with no name: %s", err);
    XtmlToolCall arr[1] = { { "x", "search", "[1, 2]" } };
    XtmlMsgExt e2[2] = { { 0 }, { NULL, arr, 1, NULL, NULL } };
    XtmlMsg m2[2] = { CHAT[1], CHAT[2] };
    XtmlTools t2 = { NULL, XTC_AUTO, e2 };
    CHECK(xtml_segments_tools(m2, 2, &o, &t2, &a, err, sizeof err) == -1 &&
          strstr(err, "JSON object"), "array arguments refused: %s", err);
    free(tj);
    printf("ok tool declaration, tool_calls, tool messages (sorted, indexed, named), "
           "tool_choice: string%s exact against the goldens\n", t ? " and id" : "");
}

/* Python json.dumps text */
static void test_pyjson(void) {
    static const struct { const char *in, *compact, *spaced; } c[] = {
        { "1.0", "1.0", "1.0" }, { "1e2", "100.0", "100.0" }, { "1e16", "1e+16", "1e+16" },
        { "1.5e16", "1.5e+16", "1.5e+16" }, { "123456789012345.6", "123456789012345.6", NULL },
        { "0.0001", "0.0001", NULL }, { "0.00001", "1e-05", NULL }, { "-0.0", "-0.0", NULL },
        { "0.1", "0.1", NULL }, { "1e100", "1e+100", NULL }, { "5e-324", "5e-324", NULL },
        { "1.7976931348623157e308", "1.7976931348623157e+308", NULL }, { "-0", "0", NULL },
        { "12", "12", NULL }, { "-7", "-7", NULL }, { "2.5", "2.5", NULL },
        { "0.3333333333333333", "0.3333333333333333", NULL },
        { "9999999999999998.0", "9999999999999998.0", NULL },
        { "\"\\u00e9\\u0001\\n\\\"/\"", "\"\u00e9\\u0001\\n\\\"/\"", NULL },
        { "{\"b\": 1, \"a\": [true, null], \"b\": 2}", "{\"a\":[true,null],\"b\":2}",
          "{\"b\": 2, \"a\": [true, null]}" },
        { "{\"z\": {\"y\": 1, \"x\": 2}, \"\u00e9\": 0, \"A\": 0}",
          "{\"A\":0,\"z\":{\"x\":2,\"y\":1},\"\u00e9\":0}", NULL },
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char err[128];
        Json *j = json_parse(c[i].in, strlen(c[i].in), err, sizeof err);
        if (!j) { CHECK(0, "pyjson %zu: %s", i, err); continue; }
        char *a = xtml_pyjson(j, 1, 1), *b = xtml_pyjson(j, 0, 0);
        CHECK(a && !strcmp(a, c[i].compact), "pyjson(%s) compact sorted: %s, want %s", c[i].in,
              a, c[i].compact);
        if (c[i].spaced)
            CHECK(b && !strcmp(b, c[i].spaced), "pyjson(%s): %s, want %s", c[i].in, b,
                  c[i].spaced);
        free(a); free(b);
        json_free(j);
    }
    printf("ok xtml_pyjson: Python's float repr, integers, escapes, dict keys, sorting\n");
}

/* Renders CHAT[0..2] (the user turn, then the assistant with tool calls): the ids after
 * the generation prompt are the completion a model would write. */
static int32_t *completion(const Tok *t, const XtmlMsg *m, const XtmlMsgExt *x, int thinking,
                           size_t *n) {
    XtmlOpts o = { thinking, thinking ? "max" : NULL, 1, 0 };
    XtmlTools tl = { NULL, XTC_AUTO, x };
    int32_t *pre, *all; size_t np, na;
    char err[256];
    CHECK(xtml_render_ids_tools(t, m, 2, &o, &tl, &pre, &np, err, sizeof err) == 0, "%s", err);
    o.gen_prompt = 0;
    CHECK(xtml_render_ids_tools(t, m, 3, &o, &tl, &all, &na, err, sizeof err) == 0, "%s", err);
    CHECK(na > np && !memcmp(pre, all, 4 * np), "the generation prompt is a prefix");
    *n = na - np;
    memmove(all, all + np, 4 * *n);
    free(pre);
    return all;
}

static void test_parse(const Tok *t) {
    XtmlIds c;
    char err[256];
    CHECK(xtml_ids(t, &c, err, sizeof err) == 0, "%s", err);
    setup_ext();
    XtmlMsg m[3] = { CHAT[0], CHAT[1], CHAT[2] };
    XtmlMsgExt x[3] = { EXT[0], EXT[1], EXT[2] };
    static const char *const WANT[2] = { "{\"city\": \"Paris\"}",
        "{\"city\": \"Rome\", \"days\": 3, \"opts\": {\"u\": \"c\", \"x\": "
        "[1, 2.5, true, null]}}" };
    for (int think = 0; think < 2; think++)
        for (int tools_on = 0; tools_on < 2; tools_on++) {
            size_t n;
            int32_t *ids = completion(t, m, x, think, &n);
            XtmlParser p;
            xtml_parser_init(&p, t, &c, think);
            if (tools_on) xtml_parser_tools(&p);
            XtmlEvent ev[2];
            for (size_t i = 0; i < n; i++) CHECK(xtml_parser_put(&p, ids[i], ev) >= 0, "OOM");
            char *r = xtml_parser_reasoning(&p), *a = xtml_parser_content(&p);
            CHECK(p.state == XP_DONE && !strcmp(a, "") && !strcmp(r, think ? "Two calls." : ""),
                  "tools %d think %d: state %d", tools_on, think, p.state);
            if (!tools_on)
                CHECK(p.n_calls == 0 && p.anomalies > 0, "tools off: the channel is an anomaly");
            else {
                CHECK(p.n_calls == 2 && p.anomalies == 0, "calls %d anomalies %d", p.n_calls,
                      p.anomalies);
                XtmlToolCall back[2];
                char *args[2] = { NULL, NULL };
                for (int k = 0; k < p.n_calls && k < 2; k++) {
                    args[k] = xtml_call_arguments(&p, &p.calls[k]);
                    CHECK(p.calls[k].complete && !strcmp(p.calls[k].name, "get_weather") &&
                          args[k] && !strcmp(args[k], WANT[k]), "call %d: %s (%s)", k,
                          p.calls[k].name, args[k]);
                    back[k] = (XtmlToolCall){ "id", p.calls[k].name, args[k] };
                }
                /* what the client sends back renders to the very ids the model wrote */
                XtmlMsgExt xb[3] = { x[0], x[1], { NULL, back, 2, NULL, NULL } };
                size_t n2;
                int32_t *ids2 = completion(t, m, xb, think, &n2);
                CHECK(n2 == n && !memcmp(ids, ids2, 4 * n), "round trip: %zu ids, want %zu",
                      n2, n);
                free(ids2); free(args[0]); free(args[1]);
                /* every truncation: no crash, only completed calls complete */
                for (size_t cut = 1; cut < n; cut++) {
                    XtmlParser q;
                    xtml_parser_init(&q, t, &c, think);
                    xtml_parser_tools(&q);
                    for (size_t i = 0; i < cut; i++) xtml_parser_put(&q, ids[i], ev);
                    xtml_parser_finish(&q);
                    int done = 0;
                    for (int k = 0; k < q.n_calls; k++) done += q.calls[k].complete;
                    CHECK(q.anomalies == 0 && done <= 2 && q.state != XP_DONE,
                          "cut %zu: anomalies %d", cut, q.anomalies);
                    xtml_parser_free(&q);
                }
            }
            free(r); free(a); xtml_parser_free(&p); free(ids);
        }
    /* a json block and an argument outside a call */
    const char *js = "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"a&amp;b\" "
                     "index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>{oops<|close|>json"
                     "<|sep|><|close|>call<|sep|><|open|>argument key=\"k\" type=\"string\"<|sep|>"
                     "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";
    size_t n;
    int32_t *ids = tok_encode(t, js, strlen(js), 1, &n);
    XtmlParser p;
    xtml_parser_init(&p, t, &c, 0);
    xtml_parser_tools(&p);
    XtmlEvent ev[2];
    for (size_t i = 0; i < n; i++) xtml_parser_put(&p, ids[i], ev);
    char *a0 = p.n_calls ? xtml_call_arguments(&p, &p.calls[0]) : NULL;
    CHECK(p.n_calls == 1 && !strcmp(p.calls[0].name, "a&b") && a0 && !strcmp(a0, "{oops") &&
          p.anomalies == 1 && p.state == XP_DONE, "json block: %d calls, '%s', %d anomalies",
          p.n_calls, a0, p.anomalies);
    free(a0); xtml_parser_free(&p); free(ids);
    printf("ok parser tools channel: calls parse back (both thinking modes) and re-render to "
           "the same ids; truncations; json block; a stray argument is an anomaly\n");
}

int main(void) {
    test_pyjson();
    char err[512];
    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);
    CHECK(t != NULL, "tests/tok/tiny: %s", err);
    test_render(t);
    if (t) test_parse(t);
    tok_free(t);
    if (fails) { printf("FAIL: %d check(s)\n", fails); return 1; }
    return 0;
}
