/* cli.h — the command line (src/cli): the only layer that turns errors into exit codes.
 * Every entry point takes argv from its subcommand on and returns the exit code. */
#ifndef K3_CLI_H
#define K3_CLI_H
#include <stddef.h>
#include "mem.h"

int k3_pack_main(int argc, char **argv);          /* pack.c: k3 pack */
int k3_bench_kernels(int argc, char **argv);      /* bench.c: k3 bench-kernels */
int k3_bench_main(int argc, char **argv);         /* bench_grid.c: k3 bench */
/* bench.c: stream-read bandwidth in GB/s of a fresh `bytes` buffer with `threads`
 * threads, the median of `runs` (<= 16) reads. */
double k3_mem_read_bw(size_t bytes, int threads, int runs);
int tok_cli(int argc, char **argv);
int k3_serve_main(int argc, char **argv);         /* serve.c: k3 serve (docs/SERVE.md) */               /* tok_cli.c: k3 tokenize | detokenize */

/* flags.c: the memory flags shared by batch mode and chat (--trunk, --trunk-gb, --cache-gb,
 * --preset, --verbose, --dump-cache-trace, and --ctx where the caller lets it). argv[*i]
 * is one: consumes it (and its value) into o, returns 1; not one: 0; a bad value: -1
 * with a message in err. */
int k3_mem_parse_flag(int argc, char **argv, int *i, K3MemOpts *o, int with_ctx, char *err,
                      size_t errlen);
#endif
