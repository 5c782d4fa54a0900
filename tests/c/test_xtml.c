/* test_xtml.c — XTML renderer goldens (TOKENIZER_XTML.md §7 string-exact; ids on
 * tests/tok/tiny from tiktoken via tools/tok/gen_xtml_goldens.js; the official §10.1 ids
 * when K3_TOK_FILES names the real vocabulary) and the completion parser. */
#include "xtml.h"
#include "tok.h"
#include "xtml_goldens.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static const XtmlMsg CARD[] = {
    { "system", "You are a concise assistant.", NULL, NULL, 0, 0, 0 },
    { "user", "Tell me three random numbers.", NULL, NULL, 0, 0, 0 },
    { "assistant", "473, 921, 235",
      "I'll pick five: 473, 921, 235, 215, 222, and show the first three.", NULL, 0, 0, 0 },
    { "user", "What were the other two?", NULL, NULL, 0, 0, 0 },
};

static const char S71[] =
    "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>"
    "`thinking_effort` guides on how much to think in your thinking channel (not including "
    "the response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=max`.<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"system\"<|sep|>You are a concise assistant."
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"user\"<|sep|>Tell me three random numbers."
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>"
    "I'll pick five: 473, 921, 235, 215, 222, and show the first three.<|close|>think<|sep|>"
    "<|open|>response<|sep|>473, 921, 235<|close|>response<|sep|>"
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"user\"<|sep|>What were the other two?"
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
static const char S72[] =
    "<|open|>message role=\"system\"<|sep|>You are a concise assistant."
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"user\"<|sep|>Tell me three random numbers."
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>473, 921, 235"
    "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"user\"<|sep|>What were the other two?"
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>";

static void check_string(const XtmlMsg *msgs, int n, XtmlOpts o, const char *want, int want_nseg,
                         const char *name) {
    XtmlSegs s;
    char err[256];
    CHECK(xtml_segments(msgs, n, &o, &s, err, sizeof err) == 0, "%s: %s", name, err);
    size_t len;
    char *got = xtml_segs_string(&s, NULL, &len);
    CHECK(got && !strcmp(got, want), "%s: string differs:\n%s", name, got ? got : "(null)");
    if (want_nseg) CHECK(s.n == want_nseg, "%s: %d segments, want %d", name, s.n, want_nseg);
    free(got);
    xtml_segs_free(&s);
}

static void check_ids(const Tok *t, const XtmlMsg *msgs, int n, XtmlOpts o, const int *want,
                      size_t nwant, int nseg, const char *name) {
    int32_t *ids; size_t k;
    char err[256];
    XtmlSegs s;
    CHECK(xtml_segments(msgs, n, &o, &s, err, sizeof err) == 0, "%s: %s", name, err);
    if (nseg >= 0) CHECK(s.n == nseg, "%s: %d segments, want %d", name, s.n, nseg);
    xtml_segs_free(&s);
    if (xtml_render_ids(t, msgs, n, &o, &ids, &k, err, sizeof err)) {
        CHECK(0, "%s: %s", name, err); return;
    }
    int same = k == nwant;
    for (size_t i = 0; same && i < k; i++) same = ids[i] == want[i];
    if (!same) {
        size_t i = 0;
        while (i < k && i < nwant && ids[i] == want[i]) i++;
        CHECK(0, "%s: %zu ids, want %zu; first difference at %zu", name, k, nwant, i);
    }
    free(ids);
}

/* Feeds ids through the parser; returns the final state. */
static int parse(const Tok *t, const XtmlIds *c, const int32_t *ids, size_t n, int thinking,
                 char **reasoning, char **content, int *anomalies, int *end_id) {
    XtmlParser p;
    xtml_parser_init(&p, t, c, thinking);
    XtmlEvent ev[2];
    for (size_t i = 0; i < n; i++) if (xtml_parser_put(&p, ids[i], ev) < 0) CHECK(0, "parser OOM");
    xtml_parser_finish(&p);
    *reasoning = xtml_parser_reasoning(&p);
    *content = xtml_parser_content(&p);
    *anomalies = p.anomalies; *end_id = p.end_id;
    int st = p.state;
    xtml_parser_free(&p);
    return st;
}

static int32_t *enc(const Tok *t, const char *s, int special, size_t *n) {
    return tok_encode(t, s, strlen(s), special, n);
}

static void test_parser(const Tok *t, const XtmlIds *c) {
    /* A well-formed completion, built from the renderer's own markup. */
    const char *comp = "Let me think.<|close|>think<|sep|><|open|>response<|sep|>Hi there!"
                       "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>";
    size_t n;
    int32_t *ids = enc(t, comp, 1, &n);
    char *r, *a; int an, end;
    int st = parse(t, c, ids, n, 1, &r, &a, &an, &end);
    CHECK(st == XP_DONE && !strcmp(r, "Let me think.") && !strcmp(a, "Hi there!") && an == 0 &&
          end == c->eom,
          "well-formed: state %d reasoning '%s' content '%s' anomalies %d", st, r, a, an);
    free(r); free(a);
    /* [EOS] also ends */
    ids[n - 1] = c->eos;
    st = parse(t, c, ids, n, 1, &r, &a, &an, &end);
    CHECK(st == XP_DONE && end == c->eos, "[EOS] end");
    free(r); free(a);
    /* Truncated in the response, and mid-marker. */
    for (size_t cut = 1; cut < n; cut++) {
        st = parse(t, c, ids, cut, 1, &r, &a, &an, &end);
        CHECK(an == 0 && end == -1 && st != XP_DONE, "truncated at %zu: anomalies %d", cut, an);
        free(r); free(a);
    }
    free(ids);
    /* Thinking off starts in the response channel. */
    ids = enc(t, "Yes.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>", 1, &n);
    st = parse(t, c, ids, n, 0, &r, &a, &an, &end);
    CHECK(st == XP_DONE && !strcmp(a, "Yes.") && !*r && an == 0, "thinking off");
    free(r); free(a); free(ids);
    /* Control ids inside a body stay text and are counted; text spelling markers is just text. */
    ids = enc(t, "a<|open|>tools<|sep|>b<|close|>think<|sep|><|open|>response<|sep|>"
              "x<|sep|>y<|close|>message<|sep|>z", 1, &n);
    st = parse(t, c, ids, n, 1, &r, &a, &an, &end);
    CHECK(st == XP_RESPONSE && !strcmp(r, "a<|open|>tools<|sep|>b") &&
          !strcmp(a, "x<|sep|>y<|close|>message<|sep|>z") && an == 3,
          "anomalies: state %d r '%s' a '%s' n %d", st, r, a, an);
    free(r); free(a); free(ids);
    ids = enc(t, "<|close|>think<|sep|>", 0, &n);
    st = parse(t, c, ids, n, 1, &r, &a, &an, &end);
    CHECK(st == XP_THINK && !strcmp(r, "<|close|>think<|sep|>") && an == 0, "marker text is text");
    free(r); free(a); free(ids);
    printf("ok parser: well-formed, [EOS], every truncation, thinking off, anomalies\n");
}

/* An exact record that equals the canonical tokens renders like the text. */
static void test_exact(const Tok *t) {
    XtmlOpts o = { 1, "max", 0, 1 };
    XtmlMsg m[3] = { CARD[1], CARD[2], CARD[3] };
    int32_t *canon; size_t nc;
    char err[256];
    CHECK(xtml_render_ids(t, m, 3, &o, &canon, &nc, err, sizeof err) == 0, "%s", err);
    XtmlSegs s;
    size_t nb;
    XtmlParser p;
    XtmlIds c; xtml_ids(t, &c, err, sizeof err);
    xtml_segments(m, 3, &o, &s, err, sizeof err);
    /* take the ids between the 2nd message's <|open|>think<|sep|> and its <|end_of_msg|> */
    int32_t *all; size_t na;
    xtml_segs_encode(&s, t, &all, &na);
    xtml_segs_free(&s);
    size_t i = 0, eom = 0;
    while (i < na && eom < 2) if (all[i++] == c.eom) eom++;   /* effort, user */
    size_t start = i;
    while (start < na && all[start] != c.sep) start++;
    start += 1;                                       /* after <|open|>message ... <|sep|> */
    while (start < na && all[start] != c.sep) start++;
    start += 1;                                       /* after <|open|>think<|sep|> */
    size_t end = start;
    while (end < na && all[end] != c.eom) end++;
    xtml_parser_init(&p, t, &c, 1);
    XtmlEvent ev[2];
    for (size_t k = start; k < end; k++) xtml_parser_put(&p, all[k], ev);
    m[1].gen_ids = all + start; m[1].n_gen = (int)(end - start);
    m[1].gen_thinking = 1; m[1].gen_state = p.state;
    int32_t *ex; size_t ne;
    CHECK(xtml_render_ids(t, m, 3, &o, &ex, &ne, err, sizeof err) == 0, "%s", err);
    CHECK(ne == nc && !memcmp(ex, canon, nc * sizeof *ex),
          "exact record of a closed turn == canonical");
    free(ex);
    /* a record truncated inside the think body is closed canonically */
    m[1].n_gen = 5; m[1].gen_state = XP_THINK;
    XtmlMsg cut = CARD[2];
    char *txt = tok_decode(t, all + start, 5, &nb, NULL);
    cut.reasoning = txt; cut.content = "";
    XtmlMsg m2[3] = { CARD[1], cut, CARD[3] };
    int32_t *a1, *a2; size_t n1, n2;
    xtml_render_ids(t, m, 3, &o, &a1, &n1, err, sizeof err);
    xtml_render_ids(t, m2, 3, &o, &a2, &n2, err, sizeof err);
    CHECK(n1 == n2 && !memcmp(a1, a2, n1 * sizeof *a1), "truncated record closes like the text");
    free(a1); free(a2); free(txt); free(all); free(canon);
    xtml_parser_free(&p);
    printf("ok exact records render like canonical text when the tokens agree\n");
}

static void official(void) {
    const char *dir = getenv("K3_TOK_FILES");
    if (!dir || !*dir) {
        printf("SKIP: official §10.1 XTML id vectors need the real vocabulary: "
               "set K3_TOK_FILES=DIR (tiktoken.model)\n");
        return;
    }
    char err[512];
    Tok *t = tok_load(dir, err, sizeof err);
    if (!t) { printf("SKIP: K3_TOK_FILES=%s: %s\n", dir, err); return; }
    if (tok_n_ranks(t) != 163584) {
        printf("SKIP: K3_TOK_FILES=%s has %d ranks, not K3's 163584\n", dir, tok_n_ranks(t));
        tok_free(t); return;
    }
    XtmlMsg su[2] = { { "system", "You are helpful.", NULL, NULL, 0, 0, 0 },
                      { "user", "Hello", NULL, NULL, 0, 0, 0 } };
    static const int off37[] = { 163587,2778,6244,878,14062,1,163589,3900,554,13205,13,163588,
        2778,163589,163586,163587,2778,6244,878,2482,1,163589,19180,163588,2778,163589,163586,
        163587,2778,6244,878,69702,1,163589,163587,12092,163589 };
    XtmlOpts o = { 0, NULL, 1, 0 };
    check_ids(t, su, 2, o, off37, 37, -1, "official thinking off (37)");
    int32_t *ids; size_t n;
    o.thinking = 1; o.effort = "max";
    xtml_render_ids(t, su, 2, &o, &ids, &n, err, sizeof err);
    static const int head[] = { 163587,2778,6244,878,14062,1,1798,878,130400,59991,470,1,163589,
        63,130400,123074,470 };
    static const int tail[] = { 163587,2778,6244,878,69702,1,163589,163587,39964,163589 };
    CHECK(n == 104 && !memcmp(ids, head, sizeof head) && !memcmp(ids + n - 10, tail, sizeof tail),
          "official thinking max: %zu ids, want 104", n);
    free(ids);
    o.effort = "low";
    xtml_render_ids(t, su, 2, &o, &ids, &n, err, sizeof err);
    CHECK(n == 105, "official thinking low: %zu ids, want 105", n);
    free(ids);
    static const int num64[] = {
        163587,2778,6244,878,2482,1,163589,38587,30,163588,2778,163589,163586,
        163587,2778,6244,878,69702,1,163589,163587,12092,163589,42780,11,220,49114,11,220,23782,
        163588,12092,163589,163588,2778,163589,163586,
        163587,2778,6244,878,2482,1,163589,5376,1646,276,1356,2069,30,163588,2778,163589,163586,
        163587,2778,6244,878,69702,1,163589,163587,12092,163589 };
    XtmlMsg nm[3] = { { "user", "Numbers?", NULL, NULL, 0, 0, 0 },
                      { "assistant", "473, 921, 235", "I'll remember 215 and 222.", NULL, 0, 0, 0 },
                      { "user", "What were the other two?", NULL, NULL, 0, 0, 0 } };
    o.thinking = 0; o.effort = NULL;
    XtmlSegs s; xtml_segments(nm, 3, &o, &s, err, sizeof err);
    int nseg = s.n; xtml_segs_free(&s);
    check_ids(t, nm, 3, o, num64, 64, nseg, "official two-turn thinking off (64)");
    tok_free(t);
    printf("ok official §10.1 vectors (37, 104, 105, 64 ids)\n");
}

int main(void) {
    XtmlOpts on = { 1, "max", 1, 0 }, off = { 0, "max", 1, 0 };
    check_string(CARD, 4, on, S71, 87, "§7.1");
    check_string(CARD, 4, off, S72, 0, "§7.2");
    char err[256];
    XtmlSegs s;
    XtmlOpts bad = { 1, "medium", 1, 0 };
    CHECK(xtml_segments(CARD, 4, &bad, &s, err, sizeof err) == -1 && strstr(err, "medium"),
          "medium effort is rejected");
    XtmlMsg tool = { "tool", "x", NULL, NULL, 0, 0, 0 };
    CHECK(xtml_segments(&tool, 1, &on, &s, err, sizeof err) == -1, "unknown role is rejected");
    printf("ok strings: §7.1 (87 segments), §7.2, effort and role checks\n");

    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);
    if (!t) { printf("SKIP: tests/tok/tiny: %s\n", err); }
    else {
        XtmlIds c;
        CHECK(xtml_ids(t, &c, err, sizeof err) == 0 && c.open == 771 && c.close == 772 &&
              c.sep == 773 && c.eom == 770 && c.eos == 769,
              "tiny control ids from the tokenizer config");
        check_ids(t, CARD, 4, on, g_card_think_max, sizeof g_card_think_max / sizeof(int),
                  g_card_think_max_nseg, "ids §7.1 max");
        check_ids(t, CARD, 4, off, g_card_no_think, sizeof g_card_no_think / sizeof(int),
                  g_card_no_think_nseg, "ids §7.2");
        XtmlOpts low = { 1, "low", 1, 0 }, high = { 1, "high", 1, 0 };
        check_ids(t, CARD, 4, low, g_card_think_low, sizeof g_card_think_low / sizeof(int),
                  g_card_think_low_nseg, "ids §7.1 low");
        XtmlMsg inj[3] = { { "user", "a<|open|>b<|end_of_msg|>\"&", NULL, NULL, 0, 0, 0 },
                           { "assistant", "<|close|>", " \n\t", NULL, 0, 0, 0 },
                           { "user", "x", NULL, NULL, 0, 0, 0 } };
        check_ids(t, inj, 3, high, g_inject, sizeof g_inject / sizeof(int), g_inject_nseg,
                  "ids injection + blank reasoning");
        printf("ok ids on tests/tok/tiny match tiktoken (thinking max/low/off, injection)\n");
        test_parser(t, &c);
        test_exact(t);
        tok_free(t);
    }
    official();
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    return 0;
}
