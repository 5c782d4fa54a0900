/* bench_grammar.c — how long gr_mask takes per step over a tokenizer's whole vocabulary.
 * For each GBNF file: a walk of STEPS tokens (each step masks a row, then takes the
 * allowed token with the lowest id whose bytes are longest among the first 64 allowed, so
 * the walk moves through the grammar), timing every gr_mask; prints the median and the
 * slowest step, and the trie build (the first mask) apart.
 *
 *   make && cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -pthread -o build/bench_grammar \
 *     tools/bench_grammar.c OBJS -lm      (OBJS: every .o under build/ but cli/main.o)
 *   build/bench_grammar TOK_DIR STEPS FILE.gbnf...
 * (docs/SAMPLING.md "Grammars" has the figures.) */
#include "grammar.h"
#include "tok.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: bench_grammar TOK_DIR STEPS FILE.gbnf...\n");
                    return 2; }
    char err[600];
    Tok *t = tok_load(argv[1], err, sizeof err);
    if (!t) { fprintf(stderr, "%s\n", err); return 2; }
    const int V = tok_vocab_size(t), nr = tok_n_ranks(t), steps = atoi(argv[2]);
    float *lg = malloc(sizeof *lg * (size_t)V);
    double *ts = malloc(sizeof *ts * (size_t)(steps + 1));
    double t0 = k3_now();
    {                                           /* the trie, built once per tokenizer */
        GrGrammar *g = gr_parse("root ::= \"a\"", 12, err, sizeof err);
        GrState *s = gr_new(g);
        gr_mask(s, t, V, nr, lg);
        gr_state_free(s); gr_free(g);
    }
    printf("vocabulary %d ids: trie built and first mask in %.1f ms\n", V,
           (k3_now() - t0) * 1e3);
    for (int a = 3; a < argc; a++) {
        GrGrammar *g = gr_parse_file(argv[a], err, sizeof err);
        if (!g) { fprintf(stderr, "%s\n", err); return 2; }
        GrState *s = gr_new(g);
        int n = 0, left_sum = 0;
        for (; n < steps; n++) {
            for (int i = 0; i < V; i++) lg[i] = 0;
            double c = k3_now();
            int left = gr_mask(s, t, V, nr, lg);
            ts[n] = k3_now() - c;
            left_sum += left;
            int pick = -1, seen = 0;
            size_t best = 0;
            for (int id = 0; id < nr && seen < 64; id++) {
                if (lg[id] != 0) continue;
                size_t m;
                tok_token_bytes(t, id, &m);
                seen++;
                if (m > best) { best = m; pick = id; }
            }
            if (pick < 0) { n++; break; }
            size_t m;
            const char *b = tok_token_bytes(t, pick, &m);
            if (gr_put(s, (const unsigned char *)b, m)) { n++; break; }
        }
        qsort(ts, (size_t)n, sizeof *ts, cmp_d);
        printf("%-40s %3d steps: median %7.2f ms, max %7.2f ms, %d ids allowed on average\n",
               argv[a], n, ts[n / 2] * 1e3, ts[n - 1] * 1e3, n ? left_sum / n : 0);
        gr_state_free(s); gr_free(g);
    }
    free(lg); free(ts);
    tok_free(t);
    return 0;
}
