/* grammar.h — GBNF grammars (llama.cpp's notation) for constrained sampling:
 * src/text/grammar_parse.c reads the text into rules, src/text/grammar.c recognises a
 * reply incrementally. The API runs parallel to json_gram.h's: a state fed the reply's
 * bytes says whether they are still a prefix of some sentence of the grammar and whether
 * they are one; gr_mask / gr_mask_drafts mask a logits row as jg_mask / jg_mask_drafts do.
 *
 * Notation (docs/SAMPLING.md "Grammars"): rules `name ::= alternatives` (names of letters,
 * digits, '-' and '_'); alternatives separated by '|', each a sequence of items; an item is
 * a "literal", a [class] or [^negated class] with ranges a-z, '.' (any code point), a rule
 * name or a (group), optionally followed by *, +, ?, {m}, {m,}, {m,n} or {,n}. Escapes in
 * literals and classes: \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH. '#' starts a
 * comment to the end of the line. A newline ends a rule except inside ( ) or after '|' or
 * '::='. The start rule is `root`. Terminals are Unicode code points: the bytes fed must be
 * UTF-8 (a code point may be split across tokens; invalid UTF-8 is refused).
 *
 * Refused with line:column and what was expected: syntax errors, a rule defined twice, an
 * undefined rule, no root, left recursion (a rule that can reach itself before matching a
 * code point, e.g. `a ::= a "x"`, or `("a"?)*`), a repetition bound over GR_MAX_REP, a
 * class that matches no character. A repetition of an empty literal (`""*`) is empty.
 *
 * Limits, so a pathological grammar cannot take the process down: a parse stack deeper than
 * GR_MAX_DEPTH (nesting of rules not in tail position) and more than GR_MAX_STACKS live
 * parses at once make the text refused (gr_put fails), never a crash or a stall. */
#ifndef K3_GRAMMAR_H
#define K3_GRAMMAR_H
#include <stddef.h>
#include <stdint.h>

#define GR_MAX_REP 1000           /* largest m or n in {m,n} */
#define GR_MAX_DEPTH 512          /* elements on one parse stack */
#define GR_MAX_STACKS 16384       /* distinct parse stacks alive after one code point */
#define GR_MAX_TEXT (1 << 20)     /* bytes of grammar text */

typedef struct GrGrammar GrGrammar;
typedef struct GrState GrState;
struct Tok;

/* Parses GBNF text[0..n) (n bytes, need not be NUL-terminated). NULL with err such as
 * "grammar 3:14: expected ')' to close the group opened at 3:5". */
GrGrammar *gr_parse(const char *text, size_t n, char *err, size_t errlen);
/* gr_parse of a whole file; the error names the file. */
GrGrammar *gr_parse_file(const char *path, char *err, size_t errlen);
void gr_free(GrGrammar *g);
/* Rules after parsing (repetitions and groups become rules of their own). */
int gr_n_rules(const GrGrammar *g);

/* A state at the start of the text; NULL only when out of memory. A state belongs to one
 * thread at a time; the grammar is read-only and may be shared. */
GrState *gr_new(const GrGrammar *g);
void gr_state_free(GrState *s);
void gr_init(GrState *s);                         /* back to the start */
/* dst := src (both from gr_new of the same grammar). 0, or -1 when out of memory. */
int gr_copy(GrState *dst, const GrState *src);
/* Feeds b[0..n): 0 while the bytes so far are a prefix of a sentence, -1 when they are
 * not (s is then undefined: feed a copy). */
int gr_put(GrState *s, const unsigned char *b, size_t n);
/* 1 when the bytes so far are a whole sentence (root matched, no partial code point). */
int gr_complete(const GrState *s);
/* 1 when nothing at all can follow (complete, and no parse wants more). */
int gr_done(const GrState *s);

/* Sets logits[id] = -inf for every id in [0, V) that may not come next: a text token
 * (id < tok_n_ranks) whose bytes would not keep a valid prefix, any reserved id but
 * end_id, and end_id until the text is complete. Returns the ids left. The vocabulary's
 * byte trie is built once per tokenizer and shared (thread-safe). */
int gr_mask(const GrState *s, const struct Tok *t, int V, int end_id, float *logits);
/* A verify pass's rows lg[0..k] (V each) masked as a step-by-step run would mask them:
 * row i with s advanced by draft[0..i). Past a draft token the grammar refuses, or the
 * end token, rows are left as they are. Returns the first row where no token is left,
 * or k + 1 (jg_mask_drafts' contract). */
int gr_mask_drafts(const GrState *s, const struct Tok *t, int V, int end_id, float *lg,
                   const int *draft, int k);
#endif
