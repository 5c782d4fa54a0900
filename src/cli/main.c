/* main.c — k3's entry: picks the application from argv (a subcommand, --chat, --batch, or
 * one prompt) and returns its exit code. Each application lives in its own folder under
 * src/ (README "Layout"); what they share is here: flags.c, usage.c, sigbus.c. */
#include "cli.h"
#include "comm.h"
#include "k3.h"
#include "mem.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int dispatch(int argc, char **argv);

/* Over N ranks (bin/k3-mpi, comm.h) every rank runs the same command, so every rank takes
 * the same steps (checked each step); rank 0 prints and writes the files, the followers run
 * quiet (their stderr, errors only, comes out named by rank). One prompt and --batch run so.
 * --chat and serve read input rank 0 alone has: there rank 0 runs the client and the
 * others replay its scheduler's records (scheduler.h "the mirror"). bench runs each rep
 * in the process on every rank (src/bench/bench_ranks.c). pack and doctor are one-machine
 * tools: refused. */
static int k3_argv_has(int argc, char **argv, const char *flag) {
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], flag)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    k3_comm_init(&argc, &argv);
    int rc;
    if (k3_comm_size() > 1 && argc >= 2 && (!strcmp(argv[1], "pack") ||
        !strcmp(argv[1], "doctor"))) {
        if (k3_comm_rank() == 0)
            fprintf(stderr, "k3: over %d ranks k3-mpi runs one prompt, --batch, --chat, serve "
                    "or bench; run %s in one process (mpirun -np 1, or bin/k3)\n",
                    k3_comm_size(), argv[1]);
        rc = K3_ERR_USAGE;
    } else if (k3_comm_rank() > 0 && (k3_argv_has(argc, argv, "--chat") ||
               (argc >= 2 && !strcmp(argv[1], "serve"))))
        rc = dispatch(argc, argv);               /* a follower of rank 0's client */
    else if (k3_comm_rank() > 0) {               /* a follower: rank 0's command, quiet */
        char *av[argc + 2];
        for (int i = 0; i < argc; i++) av[i] = argv[i];
        av[argc] = "--quiet"; av[argc + 1] = NULL;
        rc = dispatch(argc + 1, av);
    } else
        rc = dispatch(argc, argv);
    k3_comm_finalize(rc);
    return rc;
}

static int dispatch(int argc, char **argv) {
    k3_sigbus_install();
    static const struct { const char *name; int (*run)(int, char **); } SUB[] = {
        { "tokenize", tok_cli }, { "detokenize", tok_cli }, { "pack", k3_pack_main },
        { "bench-kernels", k3_bench_kernels }, { "bench", k3_bench_main },
        { "doctor", k3_doctor_main }, { "serve", k3_serve_main },
    };
    enum { NSUB = sizeof SUB / sizeof SUB[0] };
    for (size_t k = 0; argc >= 2 && k < NSUB; k++)
        if (!strcmp(argv[1], SUB[k].name)) return SUB[k].run(argc - 1, argv + 1);
    struct stat sb;                 /* not a path but near a command's name: a typo of it */
    if (argc >= 2 && argv[1][0] != '-' && stat(argv[1], &sb) && errno == ENOENT) {
        const char *names[NSUB];
        for (int k = 0; k < NSUB; k++) names[k] = SUB[k].name;
        const char *near = k3_nearest_name(argv[1], names, NSUB);
        if (near) {
            fprintf(stderr, "k3: '%s' is neither a command nor a path; did you mean k3 %s? "
                    "(k3 MODEL_DIR ... takes an existing checkpoint folder; see k3 --help)\n",
                    argv[1], near);
            return K3_ERR_USAGE;
        }
    }
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], "--chat")) return chat_main(argc, argv);
    for (int i = 1; i < argc; i++)                    /* --batch FILE: src/batch */
        if (!strcmp(argv[i], "--batch") || !strncmp(argv[i], "--batch=", 8))
            return k3_batch_main(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(k3_usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) { printf("k3 %s\n", K3_VERSION); return 0; }
        if (!strcmp(argv[i], "--list-presets")) { k3_presets_print(stdout); return 0; }
    }
    return k3_run_main(argc, argv);                   /* one prompt: src/run */
}
