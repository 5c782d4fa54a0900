/* tok_cli.c — `k3 tokenize` and `k3 detokenize` (wired from main.c). */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include "tok.h"
#include "util.h"

static const char *USAGE =
    "Usage: k3 tokenize   [--tok DIR] [--special] FILE...  one line of ids (1,2,3) per FILE\n"
    "       k3 detokenize [--tok DIR] --ids LIST           the decoded bytes to stdout\n"
    "  --tok DIR     tokenizer directory (tiktoken.model, tokenizer_config.json);\n"
    "                default $K3_TOK_FILES\n"
    "  --special     tokenize: special tokens in the text (e.g. [BOS]) become their ids\n"
    "  --ids LIST    detokenize: comma-separated ids, e.g. --ids 1008,10484\n"
    "  -h, --help    this text\n"
    "FILE - reads stdin.\n";

static int usage(const char *why) {
    fprintf(stderr, "k3: %s\n%s", why, USAGE);
    return 2;
}

int tok_cli(int argc, char **argv) {
    if (argc < 1) return usage("missing subcommand");
    int detok = !strcmp(argv[0], "detokenize");
    if (!detok && strcmp(argv[0], "tokenize"))
        return usage("subcommand must be tokenize or detokenize");
    const char *dir = getenv("K3_TOK_FILES"), *ids = NULL;
    int special = 0, nfiles = 0;
    char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) { fprintf(stderr, "k3: out of memory\n"); return 1; }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            free(files); fputs(USAGE, stdout); return 0;
        }
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
    if (!dir || !*dir) {
        free(files); return usage("no tokenizer: pass --tok DIR or set K3_TOK_FILES");
    }
    if (detok && !ids) { free(files); return usage("detokenize needs --ids LIST"); }
    if (!detok && !nfiles) { free(files); return usage("tokenize needs at least one FILE"); }

    /* parse --ids before loading, so a typo is a usage error */
    int32_t *idv = NULL; size_t nid = 0;
    if (detok) {
        char perr[160];
        int *iv, ni;
        if (k3_parse_ids(ids, &iv, &ni, perr, sizeof perr)) { free(files); return usage(perr); }
        idv = malloc(sizeof *idv * (size_t)(ni ? ni : 1));
        if (!idv) { free(iv); free(files); fprintf(stderr, "k3: out of memory\n"); return 1; }
        for (int i = 0; i < ni; i++) idv[i] = iv[i];
        nid = (size_t)ni;
        free(iv);
    }
    char err[512];
    Tok *t = tok_load(dir, err, sizeof err);
    /* a missing or malformed tokenizer is a config error, exit 2 as in a run or a chat */
    if (!t) { fprintf(stderr, "k3: %s\n", err); free(idv); free(files); return 2; }
    int rc = 0;
    if (detok) {
        for (size_t i = 0; i < nid; i++)
            if (idv[i] >= tok_vocab_size(t)) {
                fprintf(stderr, "k3: --ids: id %d is out of range (vocabulary size %d)\n",
                        idv[i], tok_vocab_size(t));
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
            struct stat sb;                      /* a path that is not there: usage, 2 */
            int std = !strcmp(files[f], "-");    /* "-": stdin, read by k3_slurp */
            int se = !std && stat(files[f], &sb) ? errno : 0;
            if (se == ENOENT || se == ENOTDIR || (!se && !std && S_ISDIR(sb.st_mode))) {
                fprintf(stderr, "k3: %s: %s; pass a text file\n", files[f],
                        se ? strerror(se) : "is a directory");
                rc = 2; break;
            }
            char *txt = k3_slurp(files[f], SIZE_MAX, &n, rerr, sizeof rerr);
            if (!txt) { fprintf(stderr, "k3: %s\n", rerr); rc = 1; break; }
            int32_t *v = tok_encode(t, txt, n, special, &nids);
            free(txt);
            if (!v) { fprintf(stderr, "k3: %s: out of memory\n", files[f]); rc = 1; break; }
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
