/* batch.h — k3 MODEL_DIR --batch FILE: prompts from JSON Lines, completed together
 * (src/batch/batch.c, the line parser in batch_jsonl.c). */
#ifndef K3_BATCH_H
#define K3_BATCH_H
#include <stddef.h>
#include <stdint.h>
#include "json_gram.h"
#include "grammar.h"
#include "sampler.h"

/* One prompt line: {"id": ..., "ids": [..]} or {"id": ..., "prompt": "text"}, optional
 * "gen", "temperature", "top_p", "top_k", "min_p", "seed", the penalties, "logit_bias",
 * "response_format". */
typedef struct {
    int line;                 /* 1-based line number in the file */
    char *id;                 /* the id as JSON text (a string literal or an integer) */
    int *ids, n_ids;          /* "ids", or NULL */
    char *prompt;             /* "prompt" (UTF-8, may hold \0: prompt_len), or NULL */
    size_t prompt_len;
    int gen;                  /* "gen", or -1: the --gen default */
    SamplerParams sp;         /* the command line's, with the line's fields over them */
    uint64_t seed;
    int sampling;             /* a sampling field (or flag) was given: sample, else greedy */
    JgSchema *jg;             /* "response_format": JSON mode (json_gram.h), NULL: none */
    GrGrammar *gr;            /* "grammar": GBNF text (grammar.h), NULL: none */
} BatchLine;

/* Parses line number `line` (text[0..n), no newline) over the defaults sp/seed/sampling.
 * 0, or 2 with "line N: what, and the fix" in err (echoed text is escaped). */
int batch_parse_line(const char *text, size_t n, int line, const SamplerParams *sp,
                     uint64_t seed, int sampling, BatchLine *out, char *err, size_t errlen);
void batch_line_free(BatchLine *l);
/* Every line of buf[0..n) (blank lines skipped): 0 with *out[*n_out], or 2 with the first
 * bad line's message in err (nothing kept). */
int batch_parse_all(const char *buf, size_t n, const SamplerParams *sp, uint64_t seed,
                    int sampling, BatchLine **out, int *n_out, char *err, size_t errlen);
void batch_lines_free(BatchLine *v, int n);
/* Every line of buf[0..n) (blank lines skipped): the good ones in *out[*n_out], each bad
 * one counted in *n_bad and its message ("line N: ...") given to bad(ctx, msg). 0, or 1
 * out of memory. */
int batch_parse_each(const char *buf, size_t n, const SamplerParams *sp, uint64_t seed,
                     int sampling, BatchLine **out, int *n_out, int *n_bad,
                     void (*bad)(void *ctx, const char *msg), void *ctx);
#define BATCH_NO_LINES "no prompt lines (one JSON object per line: {\"id\": 1, \"ids\": " \
                       "[1, 2, 3]} or {\"id\": \"a\", \"prompt\": \"text\"})"
/* The line of buf[0..n) at *p (its \r\n's \r dropped): its text and *len, *blank when it
 * holds only spaces and tabs, *p past its \n; NULL when no whole line is there (a last one
 * without \n is whole when last). */
const char *batch_next_line(const char *buf, size_t n, size_t *p, int last, size_t *len,
                            int *blank);

#endif
