/* grammar_ir.h — the parsed form of a GBNF grammar (include/grammar.h), shared by the
 * parser (grammar_parse.c) and the recogniser (grammar.c). Every alternative of every rule
 * is a run of elements ending in GE_END, all in one array, so a parse position is one
 * index; a rule is a list of alternative starts. Groups and repetitions are rules too. */
#ifndef K3_GRAMMAR_IR_H
#define K3_GRAMMAR_IR_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Out of memory while parsing or matching a grammar: exit 1 with a message (the text or
 * state sizes are bounded, so this is the machine, not the input). */
static inline void *gr_oom(void *p) {
    if (!p) { fputs("k3: out of memory in the grammar engine\n", stderr); exit(1); }
    return p;
}
#define xmalloc(n) gr_oom(malloc(n))
#define xcalloc(n, m) gr_oom(calloc(n, m))
#define xrealloc(p, n) gr_oom(realloc(p, n))

enum { GE_END, GE_CP, GE_SET, GE_ANY, GE_REF };

typedef struct { uint32_t type, arg; } GrElem;    /* arg: code point, set or rule index */

typedef struct {
    int first, n;                  /* ranges rng[first .. first + n), sorted and merged */
    int neg;                       /* [^...] */
} GrSet;

typedef struct {
    int alt0, nalt;                /* alternative starts alt[alt0 .. alt0 + nalt) */
    int line, col;                 /* where it is defined (a group / repetition: written) */
    int kind;                      /* 0 named, 1 group, 2 repetition */
    char *name;                    /* named rules only */
} GrRule;

struct GrGrammar {
    GrElem *el; int nel;
    int *alt; int nalt;
    GrRule *rule; int nrule;
    uint32_t *rng; int nrng;       /* pairs lo, hi */
    GrSet *set; int nset;
    int root;
};

/* 1 when code point c is matched by terminal element e. */
int gr_elem_match(const struct GrGrammar *g, const GrElem *e, uint32_t c);
/* 1 when some code point in [lo, hi] (no surrogates) is matched by terminal e. */
int gr_elem_range(const struct GrGrammar *g, const GrElem *e, uint32_t lo, uint32_t hi);
#endif
