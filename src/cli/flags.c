/* flags.c — the memory flags of batch mode and chat, parsed in one place (cli.h). */
#include "cli.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int takes_value(const char *a, int with_ctx) {
    static const char *const names[] = { "--trunk", "--trunk-gb", "--cache-gb", "--preset",
                                         "--dump-cache-trace" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(a, names[i])) return 1;
    return with_ctx && !strcmp(a, "--ctx");
}

int k3_mem_parse_flag(int argc, char **argv, int *i, K3MemOpts *o, int with_ctx, char *err,
                      size_t errlen) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--verbose")) { o->verbose = 1; return 1; }
    if (!strcmp(a, "--verify-reads")) { o->verify_reads = 1; return 1; }
    if (!takes_value(a, with_ctx)) return 0;
    if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; }
    (*i)++;
    if (!strcmp(a, "--trunk")) o->trunk_dir = v;
    else if (!strcmp(a, "--dump-cache-trace")) o->trace_dir = v;
    else if (!strcmp(a, "--preset")) {
        if (k3_preset_apply(v, &o->trunk_gb, &o->cache_gb)) {
            snprintf(err, errlen, "--preset: unknown preset '%.100s' (laptop, desktop, "
                     "workstation, server, max, auto; see --list-presets)", v);
            return -1;
        }
    } else if (!strcmp(a, "--ctx")) {
        if (k3_parse_int_msg(a, v, 1, &o->ctx, err, errlen)) return -1;
    } else {
        char *end;
        double g = strtod(v, &end);
        if (!*v || *end || !(g >= 0) || g > 1e9) {
            snprintf(err, errlen, "%s: '%.100s' is not a number of GB >= 0", a, v);
            return -1;
        }
        if (!strcmp(a, "--trunk-gb")) o->trunk_gb = g;
        else o->cache_gb = g;
    }
    return 1;
}
