/* run_priv.h — what run.c (the one-shot command's flow and output) shares with
 * run_prompt.c (the prompt as ids, the chat template with --image, and the JSON mode's
 * constraint): the parsed flags and the images read for the prompt. */
#ifndef K3_RUN_PRIV_H
#define K3_RUN_PRIV_H
#include "cli.h"
#include "constrain.h"
#include "image_in.h"
#include "tok.h"

#define CHAT_TEXT_MAX ((size_t)16 << 20)        /* --system-file bytes */
#define K3_RUN_IMAGES 16                          /* --image files a run takes */

typedef struct {
    const char *model_dir, *tok_dir, *ids, *prompt, *prompt_file;
    const char *out, *dump_logits;
    int gen, recompute, quiet, reprobe;     /* --reprobe: the machine probed again */
    int spec, spec_k; const char *draft_ids, *draft_file;   /* --spec and its drafts */
    const char *draft_dir; int draft_block;   /* --draft DIR: a DSpark model drafts */
    const char *dump_draft;                   /* --dump-draft FILE: its blocks */
    int draft_fixed;                          /* --draft-block N given: not chosen */
    int tok_given;                  /* --tok on the command line: text out even with --ids */
    const char *stops[16]; int n_stops;     /* --stop STR: the text ends before it */
    int ignore_eos;                         /* --ignore-eos: eos is an id like any other */
    const char *system_file;                /* --system-file: the XTML chat template */
    const char *images[K3_RUN_IMAGES]; int n_images;   /* --image FILE, in order */
    int logprobs;                           /* --logprobs N: alternatives; -1 none */
    int json; const char *json_schema;      /* --json, --json-schema FILE: JSON mode */
    const char *grammar, *grammar_file;     /* --grammar TEXT, --grammar-file FILE */
    K3EngineFlags ef;           /* --config --kernels --threads --prefill-chunk, sampling, memory */
} Opts;

/* --image: the images' pixels, rows and where the rows go in the prompt */
typedef struct {
    K3ImageIn im[K3_RUN_IMAGES];
    K3EmbedSpan span[K3_RUN_IMAGES];
    K3Embed embed;
    int n;
} RunImages;

/* The prompt as ids (--ids, or --prompt/--prompt-file through the tokenizer and, with
 * --system-file or --image, the chat template; the images read into *ri). 0 or an exit code. */
int run_read_prompt(const Opts *o, const Tok *tok, RunImages *ri, int **prompt,
                    int *n_prompt);
/* --json, --json-schema, --grammar(-file): the constraint and the masked row's buffer. */
int run_json_mode(const Opts *o, JgSchema **g, GrGrammar **gr, float **mask, int V);

#endif
