/* main.c — k3's entry: picks the application from argv (a subcommand, --chat, --batch, or
 * one prompt) and returns its exit code, after llama.cpp's short flags are rewritten into
 * k3's long ones. Each application lives in its own folder under src/ (README "Layout");
 * what they share is here: flags.c, usage.c, sigbus.c. */
#include "cli.h"
#include "comm.h"
#include "k3.h"
#include "mem.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int dispatch(int argc, char **argv);

static const struct { const char *name; int (*run)(int, char **); } SUB[] = {
    { "tokenize", tok_cli }, { "detokenize", tok_cli }, { "pack", k3_pack_main },
    { "bench-kernels", k3_bench_kernels }, { "bench", k3_bench_main },
    { "doctor", k3_doctor_main }, { "serve", k3_serve_main }, { "image", k3_image_main },
};
enum { NSUB = sizeof SUB / sizeof SUB[0] };

/* llama.cpp's short flags, as k3's long ones (-m: the MODEL_DIR argument). Rewritten here
 * once, so that every mode sees the long name; one without that flag refuses it by name. */
static const struct { const char *from, *to; } SHORT[] = {
    { "-m", NULL }, { "-p", "--prompt" }, { "-n", "--gen" }, { "-c", "--ctx" },
    { "-t", "--threads" }, { "-s", "--seed" }, { "-f", "--prompt-file" },
};
/* The long flags of every mode that take no value. The word after any other long flag is
 * its value, never rewritten (--stop -n stops at "-n"); a flag missing here only leaves
 * the alias after it to be refused by name, never a value silently changed. */
static const K3Flag NOVALUE[] = {
    K3_FLAGS_ENGINE, K3_FLAGS_SPEC, { "--recompute", 0 }, { "--incremental", 0 },
    { "--quiet", 0 }, { "--chat", 0 }, { "--help", 0 }, { "--version", 0 },
    { "--list-presets", 0 }, { "--ignore-eos", 0 }, { "--json", 0 }, { "--verify-reads", 0 },
    { "--no-think", 0 }, { "--hide-thinking", 0 }, { "--canonical-history", 0 },
    { "--no-color", 0 }, { "--no-webui", 0 }, { "--scan", 0 }, { "--no-bench", 0 },
    { "--compress", 0 }, { "--verify", 0 }, { "--special", 0 }, { "--no-prefill", 0 },
    { "--reprobe", 0 },
};

static int takes_value(const char *a) {
    if (strncmp(a, "--", 2) || strchr(a, '=')) return 0;
    for (size_t k = 0; k < sizeof NOVALUE / sizeof NOVALUE[0]; k++)
        if (!strcmp(a, NOVALUE[k].name)) return NOVALUE[k].takes_value;
    return 1;
}

/* argv with the short flags rewritten into av (room for argc + 2 words); k3 bench keeps
 * its own -p/-n (prompt and generated lengths, as llama-bench). Returns the new argc. */
static int short_flags(int argc, char **argv, char **av) {
    const int bench = argc >= 2 && !strcmp(argv[1], "bench");
    const size_t nshort = sizeof SHORT / sizeof SHORT[0];
    int m = 0;
    av[m++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t k = 0;
        while (!bench && k < nshort && strcmp(a, SHORT[k].from)) k++;
        if (k == nshort || bench) {
            av[m++] = argv[i];
            if (!bench && takes_value(a) && i + 1 < argc) av[m++] = argv[++i];  /* as is */
            continue;
        }
        if (SHORT[k].to) av[m++] = (char *)SHORT[k].to;      /* last: "--gen needs a value" */
        else if (i + 1 == argc) av[m++] = argv[i];               /* a bare -m: refused */
        if (i + 1 < argc) av[m++] = argv[++i];
    }
    av[m] = NULL;
    return m;
}

static int is_flag(const char *a, const char *flag) {        /* FLAG or FLAG=VALUE */
    const size_t n = strlen(flag);
    return !strncmp(a, flag, n) && (!a[n] || a[n] == '=');
}

/* `k3 MODEL_DIR --tok DIR` with no prompt (nor a mode, a subcommand or --help) is the chat,
 * as llama-cli starts a conversation: "--chat" added to av (room for one more word).
 * Without --tok the one prompt's parser says to give a prompt or --tok. Returns argc. */
static int chat_default(int argc, char **av) {
    int sub = 0, tok = 0, other = argc < 2;
    for (size_t k = 0; argc >= 2 && k < NSUB; k++) sub |= !strcmp(av[1], SUB[k].name);
    for (int i = 1; i < argc; i++) {
        const char *a = av[i];
        tok |= is_flag(a, "--tok");
        other |= is_flag(a, "--ids") || is_flag(a, "--prompt") || is_flag(a, "--prompt-file") ||
                 is_flag(a, "--chat") || is_flag(a, "--batch") || !strcmp(a, "--help") ||
                 !strcmp(a, "-h") || !strcmp(a, "--version") || !strcmp(a, "--list-presets");
    }
    if (tok && !sub && !other) av[argc++] = "--chat";
    av[argc] = NULL;
    return argc;
}

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
    char *hv[argc + 2];                 /* lives as long as the run: main's own frame */
    argc = chat_default(short_flags(argc, argv, hv), hv);
    argv = hv;
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
