/* test_grammar.c — GBNF grammars (include/grammar.h): parse errors (with line:column and
 * what was expected), whole / prefix / refused strings chosen to catch plausible slips
 * (repetition bounds off by one, negated classes, UTF-8 split across puts, nested and
 * empty alternatives, tail recursion depth), byte-by-byte equal to whole, and gr_mask
 * against feeding every token of the tiny tokenizer one by one (gr_mask_drafts too). */
#include "grammar.h"
#include "tok.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, \
                           __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

/* 2: a whole sentence; 1: a prefix only; 0: refused. */
static int judge(const GrGrammar *g, const char *s, size_t n) {
    GrState *st = gr_new(g), *b = gr_new(g);
    int r = gr_put(st, (const unsigned char *)s, n) ? 0 : gr_complete(st) ? 2 : 1;
    int rb = 2;                                      /* the same fed one byte at a time */
    for (size_t i = 0; i < n && rb; i++)
        if (gr_put(b, (const unsigned char *)s + i, 1)) rb = 0;
    if (rb) rb = gr_complete(b) ? 2 : 1;
    CHECK(r == rb, "whole %d, bytewise %d for '%s'", r, rb, s);
    gr_state_free(st); gr_state_free(b);
    return r;
}

static const struct { const char *g, *s; int want; } CASES[] = {
    { "root ::= \"ab\"", "ab", 2 }, { "root ::= \"ab\"", "a", 1 }, { "root ::= \"ab\"", "abc", 0 },
    { "root ::= \"ab\"", "", 1 }, { "root ::= \"\"", "", 2 }, { "root ::= \"\"", "x", 0 },
    { "root ::= [a-c]{2,3}", "a", 1 }, { "root ::= [a-c]{2,3}", "ab", 2 },
    { "root ::= [a-c]{2,3}", "abc", 2 }, { "root ::= [a-c]{2,3}", "abca", 0 },
    { "root ::= \"x\"{3}", "xx", 1 }, { "root ::= \"x\"{3}", "xxx", 2 },
    { "root ::= \"x\"{3}", "xxxx", 0 }, { "root ::= \"x\"{2,}", "xxxxxxx", 2 },
    { "root ::= \"x\"{2,}", "x", 1 }, { "root ::= \"x\"{,2} \"y\"", "xxy", 2 },
    { "root ::= \"x\"{,2} \"y\"", "xxxy", 0 }, { "root ::= \"x\"{0} \"y\"", "y", 2 },
    { "root ::= \"x\"{0} \"y\"", "xy", 0 }, { "root ::= \"ab\"+", "abab", 2 },
    { "root ::= \"ab\"+", "aba", 1 }, { "root ::= \"ab\"+", "", 1 },
    { "root ::= \"ab\"*", "", 2 }, { "root ::= \"ab\"?", "abab", 0 },
    { "root ::= [^a-c]+", "xyz", 2 }, { "root ::= [^a-c]+", "xbz", 0 },
    { "root ::= [^a-c]", "\xc3\xa9", 2 }, { "root ::= [^\\n]*", "a\nb", 0 },
    { "root ::= [\\]\\-x]+", "]-x", 2 }, { "root ::= [-a]+", "-a-", 2 },
    { "root ::= [a-]+", "a-", 2 },
    { "root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f\x98\x80", 2 },
    { "root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9f", 1 },
    { "root ::= \"\\x41\\u00e9\\U0001F600\"", "A\xc3\xa9\xf0\x9e", 0 },
    { "root ::= [\\u00e0-\\u00ff]", "\xc3\xa0", 2 },
    { "root ::= [\\u00e0-\\u00ff]", "\xc3\x9f", 0 },
    { "root ::= [\\u00e0-\\u00ff]", "\xc3", 1 }, { "root ::= [\\u00e0-\\u00ff]", "\xc4", 0 },
    { "root ::= .", "\xe2\x82\xac", 2 }, { "root ::= .", "\xc0\xaf", 0 },
    { "root ::= .", "\xed\xa0\x80", 0 }, { "root ::= .+", "\xf4\x90", 0 },
    { "root ::= \"é\" [à-ÿ]", "éà", 2 },
    { "root ::= a b\na ::= \"x\" | \"\"\nb ::= \"y\"", "y", 2 },
    { "root ::= a b\na ::= \"x\" | \"\"\nb ::= \"y\"", "xy", 2 },
    { "root ::= a b\na ::= \"x\" | \"\"\nb ::= \"y\"", "xx", 0 },
    { "root ::= (\"a\" | \"b\" (\"c\" | ))+ \"!\"", "abbc!", 2 },
    { "root ::= (\"a\" | \"b\" (\"c\" | ))+ \"!\"", "acb!", 0 },
    { "root ::= item (\",\" item)*\nitem ::= [0-9]+", "1,22,333", 2 },
    { "root ::= item (\",\" item)*\nitem ::= [0-9]+", "1,,2", 0 },
    { "root ::= p\np ::= \"(\" p \")\" | \"\"", "((()))", 2 },
    { "root ::= p\np ::= \"(\" p \")\" | \"\"", "(()", 1 },
    { "root ::= p\np ::= \"(\" p \")\" | \"\"", "())", 0 },
    { "root ::= l\nl ::= \"a\" l | \"b\"", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", 2 },
    { "root ::= (\"a\" | \"a\")* \"b\"", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", 2 },
    { "root ::= ( # comment\n  \"a\" |\n  \"b\" ) # end\n", "b", 2 },
    { "root ::=\n  \"a\" |\n  \"b\"", "a", 2 },
    { "root ::= \"a\"  \"b\"{1,2}  # x\n# only a comment\n", "abb", 2 },
    { "root ::= x\nx ::= y\ny ::= z\nz ::= \"q\"", "q", 2 },
    { "root ::= (\"ab\" \"c\"?){2}", "abcab", 2 },
    { "root ::= (\"ab\" \"c\"?){2}", "abcabcab", 0 },
    { "root ::= \"\"+ \"a\" \"\"{2,3} \"\"?", "a", 2 }, { "root ::= \"\"*", "", 2 },
    { "root ::= [a-z_-]+", "a_b-c", 2 }, { "root ::= \"\\\"\\\\\"", "\"\\", 2 },
};

static const struct { const char *g, *err; } BAD[] = {
    { "", "no rule named 'root'" },
    { "root ::= \"a\"\nroot ::= \"b\"", "2:1: rule 'root' is defined twice (first at 1:1)" },
    { "root ::= foo", "1:10: rule 'foo' is used but never defined" },
    { "root ::= (\"a\" | \"b\"", "1:20: expected ')' to close the group opened at 1:10" },
    { "root ::= \"abc", "1:10: unterminated string literal" },
    { "root ::= [abc", "1:14: expected ']' to close the class opened at 1:10" },
    { "root = \"a\"", "1:6: expected '::=' after the rule name 'root'" },
    { "root ::= \"a\"\n  \"b\"", "2:3: expected a rule name" },
    { "root ::= \"a\" )", "1:14: expected an item, '|' or the end of the line, found ')'" },
    { "root ::= * \"a\"", "1:10: '*' with nothing before it to repeat" },
    { "root ::= \"a\"{3,2}", "n below m" },
    { "root ::= \"a\"{1001}", "over the limit of 1000" },
    { "root ::= \"a\"{x}", "expected a count" },
    { "root ::= \"a\"{2", "expected '}'" },
    { "root ::= [z-a]", "1:12: the range ends below its start" },
    { "root ::= \"\\q\"", "1:11: unknown escape" },
    { "root ::= \"\\x4\"", "expected 2 hex digits" },
    { "root ::= \"\\uD800\"", "not a Unicode scalar value" },
    { "root ::= \"\xff\"", "invalid UTF-8" },
    { "root ::= a\na ::= a \"x\" | \"y\"", "rule 'a' (2:1) is left-recursive" },
    { "root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "left-recursive" },
    { "root ::= (\"\")*", "1:14: the repetition repeats something that can match empty" },
    { "root ::= (\"a\"?)+", "can match empty" },
    { "root ::= \"a\" []", "1:14: the class matches no character" },
    { "root ::= [^\\x00-\\U0010FFFF]", "the class matches no character" },
};

static void parse_cases(void) {
    char err[512];
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        GrGrammar *g = gr_parse(CASES[i].g, strlen(CASES[i].g), err, sizeof err);
        CHECK(g, "grammar %zu refused: %s", i, err);
        if (!g) continue;
        int got = judge(g, CASES[i].s, strlen(CASES[i].s));
        CHECK(got == CASES[i].want, "%s on '%s': %d, want %d", CASES[i].g, CASES[i].s, got,
              CASES[i].want);
        gr_free(g);
    }
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        err[0] = 0;
        GrGrammar *g = gr_parse(BAD[i].g, strlen(BAD[i].g), err, sizeof err);
        CHECK(!g && strstr(err, BAD[i].err), "'%s': want error with '%s', got '%s'",
              BAD[i].g, BAD[i].err, g ? "(accepted)" : err);
        gr_free(g);
    }
}

/* Limits: deep non-tail nesting stops at GR_MAX_DEPTH, never crashes; gr_done. */
static void limits(void) {
    char err[256];
    const char *t = "root ::= p\np ::= \"(\" p \")\" | \"\"";
    GrGrammar *g = gr_parse(t, strlen(t), err, sizeof err);
    GrState *s = gr_new(g);
    int i = 0;
    while (i < 4 * GR_MAX_DEPTH && !gr_put(s, (const unsigned char *)"(", 1)) i++;
    CHECK(i > 100 && i < 4 * GR_MAX_DEPTH, "depth limit at %d", i);
    gr_state_free(s); gr_free(g);
    t = "root ::= \"a\" \"b\"?";
    g = gr_parse(t, strlen(t), err, sizeof err);
    s = gr_new(g);
    gr_put(s, (const unsigned char *)"a", 1);
    CHECK(gr_complete(s) && !gr_done(s), "a: complete, not done");
    gr_put(s, (const unsigned char *)"b", 1);
    CHECK(gr_done(s), "ab: done");
    GrState *c = gr_new(g);
    gr_copy(c, s);
    CHECK(gr_done(c) && gr_put(c, (const unsigned char *)"b", 1), "copy");
    gr_state_free(s); gr_state_free(c); gr_free(g);
}

/* gr_mask equals feeding each token alone; gr_mask_drafts' rows equal step-by-step. */
static void masks(const Tok *t) {
    static const char *G[] = {
        "root ::= \"{\" ws \"\\\"k\\\"\" ws \":\" ws [0-9]{1,4} ws \"}\"\nws ::= [ \\n]{0,2}",
        "root ::= [^\\x00-\\x7f]{1,3} \".\"",
        "root ::= (\"the\" | \"a\") \" \" [a-z]+ (\" \" [a-z]+)* \".\"",
    };
    const int V = tok_vocab_size(t), nr = tok_n_ranks(t), end = nr;
    float *m = malloc(sizeof *m * (size_t)V * 4);
    char err[256];
    for (size_t gi = 0; gi < sizeof G / sizeof *G; gi++) {
        GrGrammar *g = gr_parse(G[gi], strlen(G[gi]), err, sizeof err);
        CHECK(g, "mask grammar %zu: %s", gi, err);
        if (!g) continue;
        GrState *s = gr_new(g), *w = gr_new(g);
        int path[3] = { -1, -1, -1 }, np = 0;
        for (int step = 0; step < 6; step++) {
            for (int i = 0; i < V; i++) m[i] = 0;
            int left = gr_mask(s, t, V, end, m), want = 0, first = -1;
            for (int id = 0; id < V; id++) {
                size_t n = 0;
                const char *b = id < nr ? tok_token_bytes(t, id, &n) : NULL;
                gr_copy(w, s);
                int ok = (b && n && !gr_put(w, (const unsigned char *)b, n)) ||
                         (id == end && gr_complete(s));
                want += ok;
                if (ok != (m[id] == 0)) {
                    CHECK(0, "grammar %zu step %d id %d: mask %g, feeding says %d", gi, step,
                          id, m[id], ok);
                    break;
                }
                if (ok && id != end && first < 0 && (id * 7 + step) % 3 == 0) first = id;
            }
            CHECK(left == want, "grammar %zu step %d: %d left, want %d", gi, step, left, want);
            if (first < 0) break;
            if (np < 3) path[np++] = first;
            size_t n;
            const char *b = tok_token_bytes(t, first, &n);
            gr_put(s, (const unsigned char *)b, n);
        }
        GrState *s0 = gr_new(g);                   /* drafts: the path taken above */
        for (int i = 0; i < V * 4; i++) m[i] = 0;
        int dead = gr_mask_drafts(s0, t, V, end, m, path, np);
        CHECK(dead == np + 1, "drafts: dead row %d", dead);
        float *row = malloc(sizeof *row * (size_t)V);
        for (int i = 0; i <= np; i++) {
            for (int j = 0; j < V; j++) row[j] = 0;
            gr_mask(s0, t, V, end, row);
            CHECK(!memcmp(row, m + (size_t)i * V, sizeof *row * (size_t)V), "draft row %d", i);
            size_t n;
            if (i < np) {
                const char *b = tok_token_bytes(t, path[i], &n);
                gr_put(s0, (const unsigned char *)b, n);
            }
        }
        free(row);
        gr_state_free(s0); gr_state_free(s); gr_state_free(w); gr_free(g);
    }
    free(m);
}

int main(void) {
    parse_cases();
    limits();
    char err[256];
    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);
    CHECK(t, "tests/tok/tiny: %s", err);
    if (t) masks(t);
    tok_free(t);
    printf("%s test_grammar: %d checks, %d failed\n", fails ? "FAIL" : "ok", checks, fails);
    return fails != 0;
}
