/* flags.c — the memory flags of batch mode and chat, parsed in one place (cli.h). */
#include "cli.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (!takes_value(a, with_ctx)) return 0;
    if (!v) { snprintf(err, errlen, "%s needs a value", a); return -1; }
    (*i)++;
    if (!strcmp(a, "--trunk")) o->trunk_dir = v;
    else if (!strcmp(a, "--dump-cache-trace")) o->trace_dir = v;
    else if (!strcmp(a, "--preset")) {
        if (k3_preset_apply(v, &o->trunk_gb, &o->cache_gb)) {
            snprintf(err, errlen, "--preset: unknown preset '%.100s' (minimum, laptop, "
                     "desktop, workstation, server, max, auto; see --list-presets)", v);
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

int k3_check_output(const char *flag, const char *path, int is_dir, char *err, size_t errlen) {
    struct stat sb;
    char dir[4096];
    size_t n = strlen(path);
    if (!n || n >= sizeof dir - 64) {
        snprintf(err, errlen, "%s '%.200s': not a usable path", flag, path);
        return K3_ERR_USAGE;
    }
    if (is_dir) memcpy(dir, path, n + 1);
    else {
        if (path[n - 1] == '/' || (!stat(path, &sb) && S_ISDIR(sb.st_mode))) {
            snprintf(err, errlen, "%s %.3000s: is a directory; give a file name (e.g. "
                     "%.3000s%sNAME)", flag, path, path, path[n - 1] == '/' ? "" : "/");
            return K3_ERR_USAGE;
        }
        const char *sl = strrchr(path, '/');
        if (!sl) snprintf(dir, sizeof dir, ".");
        else if (sl == path) snprintf(dir, sizeof dir, "/");
        else snprintf(dir, sizeof dir, "%.*s", (int)(sl - path), path);
    }
    int st = stat(dir, &sb), e = errno;
    if (st || !S_ISDIR(sb.st_mode)) {
        const char *why = st ? (e == ENOENT ? "does not exist" : strerror(e)) : "is not a folder";
        if (is_dir)
            snprintf(err, errlen, "%s %.3000s: %s; give an existing folder (create it first)",
                     flag, path, st ? (e == ENOENT ? "no such folder" : strerror(e))
                                    : "not a folder");
        else
            snprintf(err, errlen, "%s %.3000s: the folder %.3000s %s; create it or pass another "
                     "path", flag, path, dir, why);
        return K3_ERR_USAGE;
    }
    if (!is_dir && !stat(path, &sb) && access(path, W_OK)) {
        snprintf(err, errlen, "%s %.3000s: %s", flag, path, strerror(errno));
        return K3_ERR_USAGE;
    }
    /* the folder must take new files (outputs are written to a temporary file, renamed) */
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.k3-probe.%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s %.3000s: cannot create files in %.3000s: %s", flag, path, dir,
                 strerror(errno));
        return K3_ERR_USAGE;
    }
    close(fd);
    unlink(probe);
    return 0;
}
