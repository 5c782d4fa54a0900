/* tok_cli.c — `k3 tokenize` and `k3 detokenize` (wired from main.c). */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include "tok.h"
#include "util.h"

static const char *USAGE =
    "Usage: k3 tokenize   [--tok DIR] [--special] FILE... | --text STR...\n"
    "                         one line of ids (1,2,3) per FILE or --text, in order\n"
    "       k3 detokenize [--tok DIR] --ids LIST   the decoded bytes to stdout\n"
    "  --tok DIR     tokenizer directory (tiktoken.model, tokenizer_config.json);\n"
    "                default $K3_TOK_FILES\n"
    "  --text STR    tokenize: STR itself, not a file (repeatable; mixes with FILEs)\n"
    "  --special     tokenize: special tokens in the text (e.g. [BOS]) become their ids\n"
    "  --ids LIST    detokenize: comma-separated ids, e.g. --ids 1008,10484\n"
    "  -h, --help    this text\n"
    "FILE - reads stdin.\n";

static int usage(const char *why) {
    fprintf(stderr, "k3: %s\n%s", why, USAGE);
    return 2;
}

/* usage(why) after freeing the argument lists */
static int usage_free(char **files, char *is_text, const char *why) {
    free(files); free(is_text);
    return usage(why);
}

int tok_cli(int argc, char **argv) {
    if (argc < 1) return usage("missing subcommand");
    int detok = !strcmp(argv[0], "detokenize");
    if (!detok && strcmp(argv[0], "tokenize"))
        return usage("subcommand must be tokenize or detokenize");
    const char *dir = getenv("K3_TOK_FILES"), *ids = NULL;
    int special = 0, nfiles = 0;
    for (int i = 1; i < argc; i++)        /* anywhere, even where a value was due */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout); return 0;
        }
    char **files = calloc((size_t)argc + 1, sizeof *files);
    char *is_text = calloc((size_t)argc + 1, 1);      /* files[f] is --text's string */
    if (!files || !is_text) {
        free(files); free(is_text); fprintf(stderr, "k3: out of memory\n"); return 1;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--text") && !detok) {
            if (++i >= argc) return usage_free(files, is_text, "--text needs a string");
            is_text[nfiles] = 1;
            files[nfiles++] = argv[i];
        } else if (!strcmp(argv[i], "--tok")) {
            if (++i >= argc) return usage_free(files, is_text, "--tok needs a directory");
            dir = argv[i];
        } else if (!strcmp(argv[i], "--special") && !detok) special = 1;
        else if (!strcmp(argv[i], "--ids") && detok) {
            if (++i >= argc)
                return usage_free(files, is_text, "--ids needs a comma-separated list");
            ids = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            char m[128]; snprintf(m, sizeof m, "unknown option %.60s", argv[i]);
            return usage_free(files, is_text, m);
        } else if (!detok) files[nfiles++] = argv[i];
        else return usage_free(files, is_text, "detokenize takes no FILE (use --ids)");
    }
    if (!dir || !*dir)
        return usage_free(files, is_text, "no tokenizer: pass --tok DIR or set K3_TOK_FILES");
    if (detok && !ids) return usage_free(files, is_text, "detokenize needs --ids LIST");
    if (!detok && !nfiles)
        return usage_free(files, is_text, "tokenize needs a FILE or --text STR");

    /* parse --ids before loading, so a typo is a usage error */
    int32_t *idv = NULL; size_t nid = 0;
    if (detok) {
        char perr[160];
        int *iv, ni;
        if (k3_parse_ids(ids, &iv, &ni, perr, sizeof perr))
            return usage_free(files, is_text, perr);
        idv = malloc(sizeof *idv * (size_t)(ni ? ni : 1));
        if (!idv) {
            free(iv); free(files); free(is_text); fprintf(stderr, "k3: out of memory\n");
            return 1;
        }
        for (int i = 0; i < ni; i++) idv[i] = iv[i];
        nid = (size_t)ni;
        free(iv);
    }
    char err[512];
    Tok *t = tok_load(dir, err, sizeof err);
    /* a missing or malformed tokenizer is a config error, exit 2 as in a run or a chat */
    if (!t) { fprintf(stderr, "k3: %s\n", err); free(idv); free(files); free(is_text); return 2; }
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
            int se = !is_text[f] && !std && stat(files[f], &sb) ? errno : 0;
            if (se == ENOENT || se == ENOTDIR) { /* often text meant as such */
                fprintf(stderr, "k3: tokenize: %s: no such file; to tokenize the text itself, "
                        "use --text\n", files[f]);
                rc = 2; break;
            }
            if (!se && !is_text[f] && !std && S_ISDIR(sb.st_mode)) {
                fprintf(stderr, "k3: tokenize: %s: is a directory; pass a text file\n", files[f]);
                rc = 2; break;
            }
            char *txt = is_text[f] ? NULL : k3_slurp(files[f], SIZE_MAX, &n, rerr, sizeof rerr);
            if (!is_text[f] && !txt) { fprintf(stderr, "k3: %s\n", rerr); rc = 1; break; }
            if (is_text[f]) n = strlen(files[f]);
            int32_t *v = tok_encode(t, is_text[f] ? files[f] : txt, n, special, &nids);
            free(txt);
            if (!v) { fprintf(stderr, "k3: %s: out of memory\n", files[f]); rc = 1; break; }
            for (size_t i = 0; i < nids; i++) printf(i ? ",%d" : "%d", v[i]);
            putchar('\n');
            free(v);
        }
    }
    if (fflush(stdout)) rc = 1;
done:
    tok_free(t); free(idv); free(files); free(is_text);
    return rc;
}
