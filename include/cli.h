/* cli.h — the command line (src/cli and the applications beside it): the only layer that
 * turns errors into exit codes.
 * Every entry point takes argv from its subcommand on and returns the exit code. */
#ifndef K3_CLI_H
#define K3_CLI_H
#include <stddef.h>
#include "engine.h"
#include "mem.h"
#include "sampler.h"

/* The applications, one folder each under src/ (README "Layout"): main.c dispatches. */
int k3_pack_main(int argc, char **argv);          /* pack/: k3 pack */
int k3_bench_kernels(int argc, char **argv);      /* bench/bench.c: k3 bench-kernels */
int k3_bench_main(int argc, char **argv);         /* bench/bench_grid.c: k3 bench */
int tok_cli(int argc, char **argv);               /* tokenize/: k3 tokenize | detokenize */
int k3_doctor_main(int argc, char **argv);        /* doctor/: k3 doctor */
int k3_serve_main(int argc, char **argv);         /* serve/: k3 serve (docs/SERVE.md) */
int k3_image_main(int argc, char **argv);         /* image/image_cli.c: k3 image */
int k3_batch_main(int argc, char **argv);         /* batch/: k3 MODEL_DIR --batch FILE */
/* chat/: k3 MODEL_DIR --chat; argv as given to k3 ("--chat" ignored among the rest). */
int chat_main(int argc, char **argv);
/* run/: k3 MODEL_DIR (--ids | --prompt | --prompt-file): one prompt completed. */
int k3_run_main(int argc, char **argv);
/* usage.c: k3 --help. */
extern const char *const k3_usage;
/* sigbus.c: a shard truncated under a run (SIGBUS on its mapping) exits 1 naming it. */
void k3_sigbus_install(void);

/* flags.c: the default of --tok, $K3_TOK_FILES; NULL when it is unset or empty. */
const char *k3_tok_env(void);
/* flags.c: a usage error: "k3: " and fmt (with arg), then "Try 'HELP'." on stderr.
 * Returns K3_ERR_USAGE. */
int k3_usage_error(const char *help, const char *fmt, const char *arg);

/* flags.c: the memory flags shared by batch mode and chat (--trunk, --trunk-gb, --cache-gb,
 * --preset, --verbose, --dump-cache-trace, --verify-reads, --io-depth, --piece-mb, the
 * test flag --piece-rows, and --ctx where the caller lets it). argv[*i]
 * is one: consumes it (and its value) into o, returns 1; not one: 0; a bad value: -1
 * with a message in err. */
int k3_mem_parse_flag(int argc, char **argv, int *i, K3MemOpts *o, int with_ctx, char *err,
                      size_t errlen);
/* The engine flags a single run and batch mode share (flags.c): --config, --kernels,
 * --threads, --prefill-chunk, the sampling flags and the memory flags with --ctx. */
typedef struct {
    const char *config, *kernels;             /* config NULL: MODEL_DIR/config.json */
    int threads, chunk;                       /* 0: online cores / the plan's chunk */
    K3MemOpts mem;
    SamplerParams sp; uint64_t seed;
    int sampling;                             /* a sampling flag was given */
    int seed_set;                             /* --seed was given (else a run draws one) */
} K3EngineFlags;
void k3_engine_flags_init(K3EngineFlags *f);
/* As k3_mem_parse_flag: 1 consumed, 0 not one of them, -1 a bad value (err). */
int k3_engine_parse_flag(int argc, char **argv, int *i, K3EngineFlags *f, char *err,
                         size_t errlen);
/* --spec, --no-spec (*spec 1 / 0) and --spec-k N (1..64), shared by one prompt, batch
 * mode and chat; returns as k3_mem_parse_flag. */
int k3_spec_parse_flag(int argc, char **argv, int *i, int *spec, int *spec_k, char *err,
                       size_t errlen);
#define K3_FLAGS_SPEC { "--spec", 0 }, { "--no-spec", 0 }, { "--spec-k", 1 }
/* The options to open the engine with (the caller sets mem.chunk, mem.ctx and the rest). */
K3EngineOpts k3_engine_flags_opts(const K3EngineFlags *f, const char *model_dir);

/* A flag a mode knows: its name and whether it takes a value. Each mode's table lists every
 * flag it parses (K3_FLAGS_SAMPLER and K3_FLAGS_MEM: the shared parsers' flags), so that
 * --flag=value and the "did you mean" suggestions follow the parsers. */
typedef struct { const char *name; int takes_value; } K3Flag;
#define K3_FLAGS_SAMPLER { "--temperature", 1 }, { "--top-k", 1 }, { "--top-p", 1 }, \
                         { "--min-p", 1 }, { "--seed", 1 }, { "--greedy", 0 }
#define K3_FLAGS_MEM { "--trunk", 1 }, { "--trunk-gb", 1 }, { "--cache-gb", 1 }, \
                     { "--preset", 1 }, { "--dump-cache-trace", 1 }, { "--verbose", 0 }, \
                     { "--io-depth", 1 }, { "--piece-mb", 1 }, { "--piece-rows", 1 }
#define K3_FLAGS_ENGINE { "--config", 1 }, { "--kernels", 1 }, { "--threads", 1 }, \
                        { "--prefill-chunk", 1 }, { "--ctx", 1 }, K3_FLAGS_SAMPLER, K3_FLAGS_MEM
/* argv with each "--flag=value" of a value flag split into "--flag" "value" (a value given
 * as its own word is never split), into a new argv kept for the life of the process.
 * 0, or 2 with the message in err ("--greedy takes no value"; out of memory). */
int k3_args_expand(int argc, char **argv, const K3Flag *flags, int n, int *out_argc,
                   char ***out_argv, char *err, size_t errlen);
/* "unknown option 'ARG'" with a hint: llama.cpp's spelling of a k3 flag (--temp, -n, -p,
 * -c ...), a unique prefix, or the nearest known flag by edit distance. */
void k3_unknown_option(const char *arg, const K3Flag *flags, int n, char *msg, size_t len);
/* The one of names[0..n) that word is a typo of (a unique prefix of 3 or more characters,
 * or near enough by edit distance, as flags are), or NULL. */
const char *k3_nearest_name(const char *word, const char *const *names, int n);
/* --state-file MODE (batch mode, serve): off, kda, all (K3_STATES_*) or auto (-1: the plan
 * decides) into *mode; 0, or -1 when v is none of them. */
int k3_state_file_mode(const char *v, int *mode);
/* An output path of FLAG, checked before the model is opened: not a directory, its folder
 * exists and takes new files (is_dir: the path is the folder, as --dump-cache-trace).
 * 0, or 2 with "FLAG PATH: why; fix" in err. */
int k3_check_output(const char *flag, const char *path, int is_dir, char *err, size_t errlen);
#endif
