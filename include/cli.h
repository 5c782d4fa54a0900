/* cli.h — the command line (src/cli): the only layer that turns errors into exit codes.
 * Every entry point takes argv from its subcommand on and returns the exit code. */
#ifndef K3_CLI_H
#define K3_CLI_H
#include <stddef.h>
#include "mem.h"

int k3_pack_main(int argc, char **argv);          /* pack.c: k3 pack */
int k3_bench_kernels(int argc, char **argv);      /* bench.c: k3 bench-kernels */
int tok_cli(int argc, char **argv);               /* tok_cli.c: k3 tokenize | detokenize */
int k3_doctor_main(int argc, char **argv);        /* doctor.c: k3 doctor */
/* sigbus.c: a shard truncated under a run (SIGBUS on its mapping) exits 1 naming it. */
void k3_sigbus_install(void);

/* flags.c: the memory flags shared by batch mode and chat (--trunk, --trunk-gb, --cache-gb,
 * --preset, --verbose, --dump-cache-trace, --verify-reads, and --ctx where the caller lets
 * it). argv[*i]
 * is one: consumes it (and its value) into o, returns 1; not one: 0; a bad value: -1
 * with a message in err. */
int k3_mem_parse_flag(int argc, char **argv, int *i, K3MemOpts *o, int with_ctx, char *err,
                      size_t errlen);
#endif
