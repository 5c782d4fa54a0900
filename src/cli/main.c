/* main.c — k3's entry: picks the application from argv (a subcommand, --chat, --batch, or
 * one prompt) and returns its exit code. Each application lives in its own folder under
 * src/ (README "Layout"); what they share is here: flags.c, usage.c, sigbus.c. */
#include "cli.h"
#include "mem.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    k3_sigbus_install();
    static const struct { const char *name; int (*run)(int, char **); } SUB[] = {
        { "tokenize", tok_cli }, { "detokenize", tok_cli }, { "pack", k3_pack_main },
        { "bench-kernels", k3_bench_kernels }, { "bench", k3_bench_main },
        { "doctor", k3_doctor_main }, { "serve", k3_serve_main },
    };
    for (size_t k = 0; argc >= 2 && k < sizeof SUB / sizeof SUB[0]; k++)
        if (!strcmp(argv[1], SUB[k].name)) return SUB[k].run(argc - 1, argv + 1);
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
