/* test_fuzz_grammar.c — GBNF grammars (src/text/grammar_parse.c, grammar.c) under fuzzing.
 * An input is grammar text, a NUL byte, then a reply. The grammar parses or is refused with
 * a message "grammar L:C: ..." (or "grammar: ...") that echoes no raw control byte; the
 * reply is fed byte by byte, and after every accepted prefix:
 *   - the prefix has a way on: gr_complete, or some byte is accepted (a mask is never
 *     empty, the sampler never stuck);
 *   - feeding it in one piece or byte by byte gives the same answer; a copy agrees.
 * The built-in loop mutates seed grammars (bytes and GBNF tokens), writes replies by a
 * random walk over the accepted bytes (so deep states are reached) and, with the tiny
 * tokenizer, checks gr_mask keeps exactly the tokens that feeding accepts. Runs in a few
 * seconds; `test_fuzz_grammar SECONDS` runs longer (`make fuzz` without libFuzzer).
 *
 * Built with -DK3_LIBFUZZER it is the libFuzzer target grammar. */
#include "grammar.h"
#include "tok.h"
#include "fuzz_gram.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The grammar, or a refusal with a clean message (no raw control byte, not even '\n'). */
static void *grammar_of(const unsigned char *d, size_t n) {
    char err[512] = "";
    GrGrammar *g = gr_parse((const char *)d, n, err, sizeof err);
    if (!g) {
        int raw = 0;
        for (const char *p = err; *p; p++) raw |= (unsigned char)*p < 0x20;
        if (!err[0] || raw || strncmp(err, "grammar", 7))
            fg_fail("a refusal without a clean message", err, strlen(err));
    }
    return g;
}

static const FgLang GR = { grammar_of, fg_gr_free, FG_GR_STATES, 0 };

#ifdef K3_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { fg_one(&GR, d, n); return 0; }
#else
#define N(a) (sizeof a / sizeof *a)

static const char *const SEEDS[] = {
    "root ::= \"a\" | \"b\" root",
    "root ::= \"[\" num (\",\" num){0,3} \"]\"\nnum ::= \"-\"? [1-9] [0-9]{0,2} | \"0\"",
    "root ::= obj\nobj ::= \"{\" (pair (\",\" pair)*)? \"}\"\npair ::= str \":\" val\n"
    "val ::= obj | str | [0-9]+ | \"true\"\nstr ::= \"\\\"\" [^\"\\\\\\n]{0,4} \"\\\"\"",
    "root ::= ( # c\n  [a-z]+ \" \" |\n  \"\\u00e9\"{2,} )* \"!\"",
    "root ::= .{1,3} [^\\x00-\\x7f]? \"\\U0001F600\"",
    "root ::= a b c\na ::= \"x\" | \"\"\nb ::= (\"y\" | ){1,3}\nc ::= \"!\"?",
    "root ::= p\np ::= \"(\" p \")\" p | \"\"",
    "root ::= [\\]\\-a-c]{,3} (\"q\" | [^q])?",
};
static const char *const TOKENS[] = { "::=", "|", "(", ")", "*", "+", "?", "{2}", "{1,}",
    "{0,3}", "{,2}", "\"", "[", "]", "[^", "-", ".", "\\", "\\x4", "\\u00e9", "\\U0010FFFF",
    "\n", " ", "#", "root", "a", "root ::= ", "\xc3\xa9", "\xff", "\xed\xa0\x80", "{999}" };

static void mutate(unsigned char *b, size_t *n, size_t cap) {
    size_t at = *n ? fg_rnd() % (*n + 1) : 0;
    switch (fg_rnd() % 4) {
    case 0: if (*n) { b[fg_rnd() % *n] = (unsigned char)fg_rnd(); } break;
    case 1: if (*n) {                                     /* delete a run */
        size_t k = 1 + fg_rnd() % 4;
        if (at + k > *n) k = *n - at;
        memmove(b + at, b + at + k, *n - at - k);
        *n -= k;
    } break;
    default: {                                            /* insert a token */
        const char *t = TOKENS[fg_rnd() % N(TOKENS)];
        size_t k = strlen(t);
        if (*n + k > cap) return;
        memmove(b + at + k, b + at, *n - at);
        memcpy(b + at, t, k);
        *n += k;
    }
    }
}

/* At a walk's step: gr_mask keeps exactly the tokens that feeding accepts. */
static void check_mask(void *ctx, const void *sv, void *wv, const unsigned char *out,
                       size_t n) {
    const Tok *t = ctx;
    const GrState *s = sv;
    GrState *w = wv;
    static float lg[1 << 12];
    int V = tok_vocab_size(t) < (1 << 12) ? tok_vocab_size(t) : 1 << 12;
    int nr = tok_n_ranks(t), left = 0;
    for (int i = 0; i < V; i++) lg[i] = 0;
    int got = gr_mask(s, t, V, nr, lg);
    for (int id = 0; id < V; id++) {
        size_t m = 0;
        const char *b = id < nr ? tok_token_bytes(t, id, &m) : NULL;
        gr_copy(w, s);
        int ok = (b && m && !gr_put(w, (const unsigned char *)b, m)) ||
                 (id == nr && gr_complete(s));
        if (ok != (lg[id] == 0)) fg_fail("gr_mask disagrees with feeding", (char *)out, n);
        left += ok;
    }
    if (got != left || !got) fg_fail("gr_mask's count, or an empty mask", (char *)out, n);
}

enum { DOC_CAP = 1 << 10 };
static void mutate_doc(unsigned char *b, size_t *n) { mutate(b, n, DOC_CAP); }

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0;
    char err[512];
    Tok *t = tok_load("tests/tok/tiny", err, sizeof err);      /* NULL: no mask checks */
    static unsigned char buf[1 << 13], doc[DOC_CAP];
    long iters = 0, parsed = 0, complete = 0;
    clock_t end = clock() + (clock_t)(secs * CLOCKS_PER_SEC);
    while (iters < 1500 || clock() < end) {
        const char *s = SEEDS[fg_rnd() % N(SEEDS)];
        size_t n = strlen(s);
        memcpy(buf, s, n);
        for (int m = (int)(fg_rnd() % 4); m > 0; m--) mutate(buf, &n, sizeof buf / 2);
        iters++;
        GrGrammar *g = grammar_of(buf, n);
        if (!g) continue;
        parsed++;
        FgWalk how = { 4, 0, iters % 16 == 0 && t ? check_mask : NULL, t };
        size_t dn;
        complete += fg_round(&GR, g, &how, doc, 200, &dn, mutate_doc);
        gr_free(g);
        memcpy(buf + n, "", 1);                   /* the libFuzzer form: grammar NUL reply */
        if (n + 1 + dn > sizeof buf) continue;
        memcpy(buf + n + 1, doc, dn);
        fg_one(&GR, buf, n + 1 + dn);
    }
    tok_free(t);
    printf("test_fuzz_grammar: %ld grammars (%ld parsed), %ld complete walks, no prefix "
           "without a way on%s\n", iters, parsed, complete,
           t ? ", masks equal feeding" : "");
    return 0;
}
#endif
