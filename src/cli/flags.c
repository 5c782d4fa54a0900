/* flags.c — the memory flags of batch mode and chat, parsed in one place (cli.h). */
#include "cli.h"
#include "outfile.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *k3_tok_env(void) {
    const char *d = getenv("K3_TOK_FILES");
    return d && *d ? d : NULL;
}

int k3_usage_error(const char *help, const char *fmt, const char *arg) {
    fprintf(stderr, "k3: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '%s'.\n", help);
    return K3_ERR_USAGE;
}

static int takes_value(const char *a, int with_ctx) {
    static const char *const names[] = { "--trunk", "--trunk-gb", "--cache-gb", "--preset",
                                         "--dump-cache-trace", "--io-depth", "--piece-mb",
                                         "--piece-rows", "--expert-use", "--read-ahead" };
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
    else if (!strcmp(a, "--expert-use")) o->expert_use = v;
    else if (!strcmp(a, "--read-ahead")) {
        if (strcmp(v, "on") && strcmp(v, "off")) {
            snprintf(err, errlen, "--read-ahead: '%.100s' is not on or off", v);
            return -1;
        }
        o->read_ahead = !strcmp(v, "on");
    }
    else if (!strcmp(a, "--preset")) {
        if (k3_preset_apply(v, &o->trunk_gb, &o->cache_gb)) {
            snprintf(err, errlen, "--preset: unknown preset '%.100s' (minimum, laptop, "
                     "desktop, workstation, server, max, auto; see --list-presets)", v);
            return -1;
        }
    } else if (!strcmp(a, "--ctx")) {
        if (k3_parse_int_msg(a, v, 1, &o->ctx, err, errlen)) return -1;
    } else if (!strcmp(a, "--io-depth")) {
        if (k3_parse_int_msg(a, v, 1, &o->io_depth, err, errlen)) return -1;
        if (o->io_depth > 256) {
            snprintf(err, errlen, "--io-depth: %d reads in flight is more than 256", o->io_depth);
            return -1;
        }
    } else if (!strcmp(a, "--piece-rows")) {      /* tests: rows per streamed trunk piece */
        if (k3_parse_int_msg(a, v, 1, &o->piece_rows, err, errlen)) return -1;
    } else if (!strcmp(a, "--piece-mb")) {
        char *end;
        double g = strtod(v, &end);
        if (!*v || *end || !(g >= 0.004) || g > 4096) {
            snprintf(err, errlen, "--piece-mb: '%.100s' is not a size in MB (0.004 .. 4096)", v);
            return -1;
        }
        o->piece_mb = g;
    } else {
        char *end;
        errno = 0;
        double g = strtod(v, &end);
        const int overflow = errno == ERANGE && g > 1;      /* 1e999: a number, too big */
        if (!*v || *end || !(g >= 0) || (isinf(g) && !overflow)) {
            snprintf(err, errlen, "%s: '%.100s' is not a number of GB >= 0", a, v);
            return -1;
        }
        if (g > 1e9) {          /* a number all the same: "not a number" would mislead */
            snprintf(err, errlen, "%s %.100s: more than 1e9 GB; give the GB this machine may "
                     "use (e.g. %s 8)", a, v, a);
            return -1;
        }
        if (!strcmp(a, "--trunk-gb")) o->trunk_gb = g;
        else o->cache_gb = g;
    }
    return 1;
}

void k3_engine_flags_init(K3EngineFlags *f) {
    memset(f, 0, sizeof *f);
    f->kernels = "auto";
    k3_mem_opts_init(&f->mem);
    sampler_defaults(&f->sp);
}

int k3_spec_parse_flag(int argc, char **argv, int *i, int *spec, int *spec_k, char *err,
                       size_t errlen) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--spec") || !strcmp(a, "--no-spec")) { *spec = a[2] == 's'; return 1; }
    if (strcmp(a, "--spec-k")) return 0;
    if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; }
    (*i)++;
    if (k3_parse_int_msg(a, v, 1, spec_k, err, errlen)) return -1;
    if (*spec_k > 64) { snprintf(err, errlen, "--spec-k is at most 64"); return -1; }
    return 1;
}

int k3_engine_parse_flag(int argc, char **argv, int *i, K3EngineFlags *f, char *err,
                         size_t errlen) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int r = sampler_parse_flag(argc, argv, i, &f->sp, &f->seed, &f->seed_set, err, errlen);
    /* a penalty or bias alone keeps greedy decoding greedy (penalised) */
    if (r) { f->sampling |= r > 0 && !sampler_is_penalty_flag(a); return r; }
    if ((r = k3_mem_parse_flag(argc, argv, i, &f->mem, 1, err, errlen))) return r;
    int *num = !strcmp(a, "--threads") ? &f->threads :
               !strcmp(a, "--prefill-chunk") ? &f->chunk : NULL;
    const char **str = !strcmp(a, "--config") ? &f->config :
                       !strcmp(a, "--kernels") ? &f->kernels : NULL;
    if (!num && !str) return 0;
    if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; }
    (*i)++;
    if (str) *str = v;
    else if (k3_parse_int_msg(a, v, 1, num, err, errlen)) return -1;
    return 1;
}

K3EngineOpts k3_engine_flags_opts(const K3EngineFlags *f, const char *model_dir) {
    K3EngineOpts eo = { model_dir, f->config, f->kernels, f->threads, f->mem };
    return eo;
}

int k3_check_output(const char *flag, const char *path, int is_dir, char *err, size_t errlen) {
    struct stat sb;
    char sub[8400];
    if (!is_dir) {                      /* a file: outfile.h decides how it will be written */
        if (!k3_out_check(path, 0, sub, sizeof sub)) return 0;
        snprintf(err, errlen, "%s %s", flag, sub);
        return K3_ERR_USAGE;
    }
    int st = stat(path, &sb), e = errno;
    if (st || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s %.3000s: %s; give an existing folder (create it first)", flag,
                 path, st ? (e == ENOENT ? "no such folder" : strerror(e)) : "not a folder");
        return K3_ERR_USAGE;
    }
    char probe[4200];                   /* the folder must take new files */
    snprintf(probe, sizeof probe, "%.4000s/.k3-probe.%ld", path, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s %.3000s: cannot create files in %.3000s: %s", flag, path, path,
                 strerror(errno));
        return K3_ERR_USAGE;
    }
    close(fd);
    unlink(probe);
    return 0;
}

/* ---- --flag=value and unknown options ---- */

static const K3Flag *find_flag(const char *name, size_t len, const K3Flag *f, int n) {
    for (int i = 0; i < n; i++)
        if (strlen(f[i].name) == len && !strncmp(f[i].name, name, len)) return &f[i];
    return NULL;
}

int k3_args_expand(int argc, char **argv, const K3Flag *flags, int n, int *out_argc,
                   char ***out_argv, char *err, size_t errlen) {
    char **v = malloc(sizeof *v * (size_t)(2 * argc + 1));     /* at most one split per word */
    int m = 0;
    if (!v) { snprintf(err, errlen, "out of memory"); return K3_ERR_USAGE; }
    for (int i = 0; i < argc; i++) {
        char *a = argv[i], *eq = strchr(a, '=');
        const K3Flag *f = NULL;
        if (i > 0 && a[0] == '-' && a[1] == '-' && eq) f = find_flag(a, (size_t)(eq - a), flags, n);
        if (!f) {
            const K3Flag *g = i > 0 ? find_flag(a, strlen(a), flags, n) : NULL;
            v[m++] = a;
            if (g && g->takes_value && i + 1 < argc) v[m++] = argv[++i];   /* its value, as is */
            continue;
        }
        if (!f->takes_value) {
            snprintf(err, errlen, "%s takes no value (got '%.200s')", f->name, a);
            free(v);
            return K3_ERR_USAGE;
        }
        v[m++] = (char *)f->name;      /* the table's own string: lives as long as the process */
        v[m++] = eq + 1;
    }
    v[m] = NULL;
    *out_argc = m; *out_argv = v;
    /* The new argv lives as long as the process: held here, so that LeakSanitizer (make
     * test-asan) sees it reachable rather than leaked at exit. */
    static char ***kept;
    static int nkept;
    char ***k = realloc(kept, sizeof *k * (size_t)(nkept + 1));
    if (k) { kept = k; kept[nkept++] = v; }
    return 0;
}

/* Edit distance counting a swap of neighbours as one edit (optimal string alignment):
 * "--gne" is one edit from "--gen". Flags are short; longer strings are "far". */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b), d[64][64];
    if (la > 63 || lb > 63) return 99;
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int x = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < x) x = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < x) x = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < x)
                x = d[i - 2][j - 2] + 1;
            d[i][j] = x;
        }
    return d[la][lb];
}

/* llama.cpp's flags and what k3 calls them (NULL: the hint says it all) */
static const struct { const char *from, *to, *hint; } ALIASES[] = {
    { "--temp", "--temperature", NULL }, { "-n", "--gen", NULL }, { "--n-predict", "--gen", NULL },
    { "--predict", "--gen", NULL }, { "-p", "--prompt", NULL }, { "-f", "--prompt-file", NULL },
    { "--file", "--prompt-file", NULL }, { "-t", "--threads", NULL },
    { "-c", "--ctx", NULL }, { "--ctx-size", "--ctx", NULL }, { "-s", "--seed", NULL },
    { "-b", "--prefill-chunk", NULL }, { "--batch-size", "--prefill-chunk", NULL },
    { "-ub", "--prefill-chunk", NULL }, { "--ubatch-size", "--prefill-chunk", NULL },
    { "--top_k", "--top-k", NULL }, { "--top_p", "--top-p", NULL }, { "--min_p", "--min-p", NULL },
    { "-i", "--chat", NULL }, { "--interactive", "--chat", NULL }, { "-cnv", "--chat", NULL },
    { "--conversation", "--chat", NULL }, { "-sys", "--system", NULL },
    { "--system-prompt", "--system", NULL }, { "--log-disable", "--quiet", NULL },
    { "-m", NULL, "k3 takes the model directory as a plain argument: k3 MODEL_DIR ..." },
    { "--model", NULL, "k3 takes the model directory as a plain argument: k3 MODEL_DIR ..." },
    { "-ngl", NULL, "k3 runs on the CPU: there are no GPU layers to offload; drop it" },
    { "--n-gpu-layers", NULL, "k3 runs on the CPU: there are no GPU layers to offload; drop it" },
};

/* The name nearest word among n of a set (name(set, i)): the one that word is a prefix of,
 * when unique and word has min_prefix characters; else the closest within one edit or one
 * per four characters (a typo); NULL when none is near. */
static const char *nearest(const char *word, size_t min_prefix, const void *set, int n,
                           const char *(*name)(const void *set, int i)) {
    const size_t len = strlen(word);
    const char *prefix = NULL, *near = NULL;
    int nprefix = 0, bd = 99;
    for (int i = 0; i < n; i++)
        if (len >= min_prefix && !strncmp(name(set, i), word, len)) {
            prefix = name(set, i); nprefix++;
        }
    if (nprefix == 1) return prefix;
    for (int i = 0; i < n; i++) {
        const int d = edit_distance(word, name(set, i));
        if (d < bd) { bd = d; near = name(set, i); }
    }
    return near && (bd <= 1 || bd * 4 <= (int)len) ? near : NULL;
}
static const char *flag_name(const void *set, int i) { return ((const K3Flag *)set)[i].name; }
static const char *str_name(const void *set, int i) { return ((const char *const *)set)[i]; }

void k3_unknown_option(const char *arg, const K3Flag *flags, int n, char *msg, size_t len) {
    char name[128];
    const char *eq = strchr(arg, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - arg : (long)strlen(arg)), arg);
    const char *best = NULL;
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        if (!strcmp(name, ALIASES[i].from)) {
            if (ALIASES[i].hint) {
                snprintf(msg, len, "unknown option '%.200s'; %s", arg, ALIASES[i].hint);
                return;
            }
            if (find_flag(ALIASES[i].to, strlen(ALIASES[i].to), flags, n)) best = ALIASES[i].to;
        }
    if (!best) best = nearest(name, 4, flags, n, flag_name);
    if (best) snprintf(msg, len, "unknown option '%.200s'; did you mean %s?", arg, best);
    else snprintf(msg, len, "unknown option '%.200s'", arg);
}

const char *k3_nearest_name(const char *word, const char *const *names, int n) {
    return nearest(word, 3, names, n, str_name);
}

int k3_state_file_mode(const char *v, int *mode) {
    static const char *const modes[4] = { "off", "kda", "all", "auto" };   /* K3_STATES_* */
    for (int k = 0; k < 4; k++)
        if (!strcmp(v, modes[k])) { *mode = k == 3 ? -1 : k; return 0; }
    return -1;
}
