/* tok_cli.c — `k3 tokenize` and `k3 detokenize` (wired from main.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tok.h"
#include "util.h"

static int usage(const char *why) {
    fprintf(stderr,
            "error: %s\n"
            "usage: k3 tokenize   --tok DIR [--special] FILE...   (one line of comma-separated ids per FILE)\n"
            "       k3 detokenize --tok DIR --ids 1,2,3            (decoded bytes to stdout)\n"
            "DIR holds tiktoken.model and tokenizer_config.json; --tok defaults to $K3_TOK_FILES.\n",
            why);
    return 2;
}

int tok_cli(int argc, char **argv) {
    if (argc < 1) return usage("missing subcommand");
    int detok = !strcmp(argv[0], "detokenize");
    if (!detok && strcmp(argv[0], "tokenize")) return usage("subcommand must be tokenize or detokenize");
    const char *dir = getenv("K3_TOK_FILES"), *ids = NULL;
    int special = 0, nfiles = 0;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) { fprintf(stderr, "error: out of memory\n"); return 1; }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tok")) {
            if (++i >= argc) { free(files); return usage("--tok needs a directory"); }
            dir = argv[i];
        } else if (!strcmp(argv[i], "--special") && !detok) special = 1;
        else if (!strcmp(argv[i], "--ids") && detok) {
            if (++i >= argc) { free(files); return usage("--ids needs a comma-separated list"); }
            ids = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            char m[128]; snprintf(m, sizeof m, "unknown option %.60s", argv[i]);
            free(files); return usage(m);
        } else if (!detok) files[nfiles++] = argv[i];
        else { free(files); return usage("detokenize takes no FILE (use --ids)"); }
    }
    if (!dir || !*dir) { free(files); return usage("no tokenizer: pass --tok DIR or set K3_TOK_FILES"); }
    if (detok && !ids) { free(files); return usage("detokenize needs --ids LIST"); }
    if (!detok && !nfiles) { free(files); return usage("tokenize needs at least one FILE"); }

    /* parse --ids before loading, so a typo is a usage error */
    int32_t *idv = NULL; size_t nid = 0;
    if (detok) {
        idv = malloc((strlen(ids) / 2 + 2) * sizeof *idv);
        if (!idv) { free(files); fprintf(stderr, "error: out of memory\n"); return 1; }
        const char *p = ids;
        while (*p) {
            char *e; errno = 0;
            long v = strtol(p, &e, 10);
            if (e == p || errno || v < 0 || v > 0x7FFFFFFF || (*e && *e != ',')) {
                free(idv); free(files);
                return usage("--ids must be comma-separated non-negative integers, e.g. --ids 1008,10484");
            }
            idv[nid++] = (int32_t)v;
            p = *e ? e + 1 : e;
        }
    }
    char err[512];
    Tok *t = tok_load(dir, err, sizeof err);
    if (!t) { fprintf(stderr, "error: %s\n", err); free(idv); free(files); return 1; }
    int rc = 0;
    if (detok) {
        for (size_t i = 0; i < nid; i++)
            if (idv[i] >= tok_vocab_size(t)) {
                fprintf(stderr, "error: --ids: id %d is out of range (vocabulary size %d)\n", idv[i], tok_vocab_size(t));
                rc = 2;
                goto done;
            }
        size_t len;
        char *out = tok_decode(t, idv, nid, &len, NULL);
        if (!out || fwrite(out, 1, len, stdout) != len) rc = 1;
        free(out);
    } else {
        for (int f = 0; f < nfiles && !rc; f++) {
            size_t n, nids;
            char rerr[512];
            char *txt = k3_slurp(files[f], SIZE_MAX, &n, rerr, sizeof rerr);
            if (!txt) { fprintf(stderr, "error: %s\n", rerr); rc = 1; break; }
            int32_t *v = tok_encode(t, txt, n, special, &nids);
            free(txt);
            if (!v) { fprintf(stderr, "error: %s: out of memory\n", files[f]); rc = 1; break; }
            for (size_t i = 0; i < nids; i++) printf(i ? ",%d" : "%d", v[i]);
            putchar('\n');
            free(v);
        }
    }
    if (fflush(stdout)) rc = 1;
done:
    tok_free(t); free(idv); free(files);
    return rc;
}
