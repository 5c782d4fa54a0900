/* bench_grid.c — `k3 bench`: every combination of the grid, each rep in its own child
 * process (this binary, /proc/self/exe, as a plain batch run with --out and --quiet; and
 * --compare BIN interleaved A B A B), so a peak RSS (wait4) belongs to one configuration
 * and a crash or a refusal stays in its row while the other rows go on. Under mpirun
 * (k3-mpi, N > 1) a rep runs in the process on every rank instead (bench_ranks.c). */
#include "bench_grid.h"
#include "cli.h"
#include "comm.h"
#include "json.h"
#include "tok.h"
#include "sysmem.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *USAGE =
"Usage: k3 bench MODEL_DIR [options]\n"
"Runs every combination of the grid, each rep in its own child process (this binary\n"
"as a plain batch run with --out and --quiet), and reports per row the median, min and\n"
"max over the reps beside the limits measured in the same run (docs/BENCH.md).\n"
"Under mpirun -np N bin/k3-mpi each rep runs on every rank, in the process.\n"
"\n"
"Grid (comma lists; every combination runs):\n"
"  --budget TG:CG[,...]  --trunk-gb TG --cache-gb CG (GB) per row\n"
"  --preset P[,...]      memory presets (k3 --list-presets); --budget and --preset\n"
"                        entries form one axis; neither: the child's default (auto)\n"
"  --threads N[,...]     worker threads (default: online cores)\n"
"  -p N[,...]            prompt tokens, 1..16384 (default 16): synthetic ids, or the\n"
"                        first N tokens of --prompt-file (default: all of them)\n"
"  -n N[,...]            generated tokens (default 16; s/token needs >= 2)\n"
"  --kernels K[,...]     auto | scalar | avx2 | avx512 | neon (default auto)\n"
"  --batch B[,...]       sequences decoded together, 1..256 (default 1): a row of B > 1\n"
"                        runs k3 MODEL_DIR --batch with B prompts of -p ids, -n each, and\n"
"                        its tok/s is the aggregate (all B sequences' tokens per second of\n"
"                        wall time, prefill included; s/token is its inverse)\n"
"\n"
"Model and prompt:\n"
"  --trunk DIR           the packed trunk (k3 pack) for every row\n"
"  --prompt-file PATH    prompt text, tokenized once here (needs a tokenizer)\n"
"  --tok DIR             tokenizer directory (default $K3_TOK_FILES)\n"
"\n"
"Reps:\n"
"  --reps N              reps per row, 1..100 (default 3)\n"
"  --cold                before each rep, evict the shard and trunk files from the page\n"
"                        cache (posix_fadvise DONTNEED); the default except --preset max\n"
"  --warm                keep the page cache between reps\n"
"  --drop-caches         with --cold, as root: also echo 3 > /proc/sys/vm/drop_caches\n"
"  --compare BIN         also run BIN on the same grid, rep by rep (A B A B ...), and\n"
"                        report B/A per row\n"
"\n"
"Limits and output:\n"
"  --disk-gb G           bytes the disk limit reads, in GB (default 2; 0 skips it)\n"
"  --no-limits           measure neither the memory nor the disk limit\n"
"  -o FMT                md | json | csv | jsonl | html (default md on a terminal, else\n"
"                        json; html: the figure of --plot above the table); --format FMT\n"
"  --plot FILE.svg       also draw the grid as an SVG figure: s/token and peak RSS\n"
"                        against the budgets (else tokens/s against what varied), the\n"
"                        measured limits as dashed lines (docs/BENCH.md)\n"
"  -q, --quiet           no progress on stderr\n"
"  -h, --help            this text\n"
"  --no-spec             rows without speculation (a one-prompt run drafts and verifies\n"
"                        by default, docs/SPEC.md; --spec: that default, said explicitly)\n"
"  --draft DIR           every row drafts with a DSpark model (docs/DRAFT.md); the rows\n"
"                        give its blocks, drafts verified and accepted (acc/block)\n"
"  --draft-block N       verify N drafts a block (1..7; default: chosen each block)\n"
"  -t N, -r N            llama-bench's names for --threads and --reps\n"
"llama-bench's -b is the prefill batch (k3's --prefill-chunk); --batch here is what\n"
"llama-batched-bench calls -npl.\n"
"\n"
"Exit codes: 0 every row ran; 1 a row failed (the row says why; the others still ran)\n"
"or Ctrl-C (the rows finished are printed); 2 usage; 4 a run was invalid (a routed\n"
"expert failed to load).\n";

#define MAXAX 64
#define MAXROWS 4096
#define MAXPROMPT 16384                     /* ids travel in one argv string (<= 128 KB) */

typedef struct { char *s[MAXAX]; int n; } List;
typedef struct { char *p[4 * MAXAX]; int n; } Owned;   /* copies freed at the end */

static char *own(Owned *o, char *s) {
    if (s && o->n < 4 * MAXAX) o->p[o->n++] = s;
    else if (s) { free(s); s = NULL; }
    return s;
}
typedef struct { const char *budget, *preset, *tg, *cg; double t, c; } Mem;

static volatile sig_atomic_t g_stop, g_child;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
    if (g_child > 0) kill((pid_t)g_child, SIGINT);
}

static int usage_error(const char *msg) {
    fprintf(stderr, "k3 bench: %s\nTry 'k3 bench --help'.\n", msg);
    return K3_ERR_USAGE;
}

/* "a,b,c" into l (the items point into a copy); an empty item is an error. */
static int split(Owned *ow, const char *flag, const char *v, List *l, char *err, size_t en) {
    char *s = own(ow, strdup(v)), *save = NULL;
    l->n = 0;
    if (!s) { snprintf(err, en, "out of memory"); return -1; }
    size_t len = strlen(s);
    if (!len || s[0] == ',' || s[len - 1] == ',' || strstr(s, ",,")) {
        snprintf(err, en, "%s: '%.100s' has an empty item", flag, v);
        return -1;
    }
    for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (l->n == MAXAX) { snprintf(err, en, "%s: more than %d items", flag, MAXAX); return -1; }
        l->s[l->n++] = t;
    }
    return 0;
}

static int parse_gb(const char *s, double *g) {
    char *end;
    *g = strtod(s, &end);
    return *s && !*end && *g >= 0 && *g <= 1e9 ? 0 : -1;
}

static int ints(const char *flag, const List *l, int lo, int hi, int *out, char *err, size_t en) {
    for (int i = 0; i < l->n; i++) {
        if (k3_parse_int_msg(flag, l->s[i], lo, &out[i], err, en)) return -1;
        if (out[i] > hi) {
            snprintf(err, en, "%s: %d is over the limit of %d", flag, out[i], hi);
            return -1;
        }
    }
    return 0;
}

typedef struct {
    KbOpts o;
    Mem mem[2 * MAXAX]; int n_mem;
    int thr[MAXAX], n_thr, np[MAXAX], n_np, ng[MAXAX], n_ng, bat[MAXAX], n_bat;
    const char *kern[MAXAX]; int n_kern;
    int p_given;
    Owned own;
} Args;

static int parse(int argc, char **argv, Args *A) {
    char err[400];
    List l;
    KbOpts *o = &A->o;
    memset(A, 0, sizeof *A);
    o->reps = 3; o->cold = -1; o->disk_gb = 2; o->fmt = isatty(1) ? KB_MD : KB_JSON;
    o->tok = k3_tok_env();
    A->thr[0] = 0; A->n_thr = 1; A->np[0] = 16; A->n_np = 1; A->ng[0] = 16; A->n_ng = 1;
    A->kern[0] = NULL; A->n_kern = 1; A->bat[0] = 1; A->n_bat = 1;
    for (int i = 1; i < argc; i++)        /* anywhere, even where a value was due */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout); return -1; }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t")) a = "--threads";                 /* llama-bench's spellings */
        else if (!strcmp(a, "-r")) a = "--reps";
        else if (!strcmp(a, "--format")) a = "-o";
        static const char *const VAL[] = { "--budget", "--preset", "--threads", "-p", "-n",
            "--kernels", "--trunk", "--prompt-file", "--tok", "--reps", "--compare",
            "--disk-gb", "-o", "--batch", "--plot", "--draft", "--draft-block" };
        int takes = 0;
        for (size_t k = 0; k < sizeof VAL / sizeof VAL[0]; k++) takes |= !strcmp(a, VAL[k]);
        if (takes && !v) {
            snprintf(err, sizeof err, "%s needs a value", a);
            return usage_error(err);
        }
        if (takes) i++;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(USAGE, stdout); return -1; }
        else if (!strcmp(a, "--batch")) {
            if (split(&A->own, a, v, &l, err, sizeof err) ||
                ints(a, &l, 1, 256, A->bat, err, sizeof err))
                return usage_error(err);
            A->n_bat = l.n;
            for (int k = 0; k < l.n; k++) o->batched |= A->bat[k] > 1;
        } else if (!strcmp(a, "--draft")) o->draft = v;
        else if (!strcmp(a, "--draft-block")) {
            int nb = 0;
            if (k3_parse_int_msg(a, v, 1, &nb, err, sizeof err)) return usage_error(err);
            if (nb > 7) return usage_error("--draft-block takes 1..7 rows (DSpark's block)");
            o->draft_block = v;
        } else if (!strcmp(a, "--spec")) o->no_spec = 0;
        else if (!strcmp(a, "--no-spec")) o->no_spec = 1;
        else if (!strcmp(a, "--budget") || !strcmp(a, "--preset")) {
            int is_b = a[2] == 'b';
            if (split(&A->own, a, v, &l, err, sizeof err)) return usage_error(err);
            for (int k = 0; k < l.n; k++) {
                if (A->n_mem == 2 * MAXAX) return usage_error("too many --budget/--preset entries");
                Mem *m = &A->mem[A->n_mem++];
                memset(m, 0, sizeof *m);
                if (!is_b) {
                    m->preset = l.s[k];
                    if (k3_preset_apply(l.s[k], &m->t, &m->c)) {
                        snprintf(err, sizeof err, "--preset: unknown preset '%.100s' (laptop, "
                                 "desktop, workstation, server, max, auto)", l.s[k]);
                        return usage_error(err);
                    }
                    continue;
                }
                char *colon = strchr(l.s[k], ':');
                m->budget = own(&A->own, strdup(l.s[k]));
                if (colon) *colon = 0;
                if (!m->budget || !colon || parse_gb(l.s[k], &m->t) || parse_gb(colon + 1, &m->c)) {
                    snprintf(err, sizeof err, "--budget: '%.100s' is not TG:CG (two numbers of "
                             "GB >= 0, e.g. 3.7:0.6)", m->budget ? m->budget : l.s[k]);
                    return usage_error(err);
                }
                m->tg = l.s[k]; m->cg = colon + 1;
            }
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-p") || !strcmp(a, "-n")) {
            const int t = !strcmp(a, "--threads"), p = !strcmp(a, "-p");
            int *dst = t ? A->thr : p ? A->np : A->ng;
            int *cnt = t ? &A->n_thr : p ? &A->n_np : &A->n_ng;
            if (split(&A->own, a, v, &l, err, sizeof err) ||
                ints(a, &l, t || p ? 1 : 0, p ? MAXPROMPT : 1 << 30, dst, err, sizeof err))
                return usage_error(err);
            *cnt = l.n;
            A->p_given |= p;
        } else if (!strcmp(a, "--kernels")) {
            static const char *const K[] = { "auto", "scalar", "avx2", "avx512", "neon" };
            if (split(&A->own, a, v, &l, err, sizeof err)) return usage_error(err);
            for (int k = 0; k < l.n; k++) {
                int ok = 0;
                for (int j = 0; j < 5; j++) ok |= !strcmp(l.s[k], K[j]);
                if (!ok) {
                    snprintf(err, sizeof err, "--kernels: unknown kernels '%.60s' (auto, "
                             "scalar, avx2, avx512, neon)", l.s[k]);
                    return usage_error(err);
                }
                A->kern[k] = l.s[k];
            }
            A->n_kern = l.n;
        } else if (!strcmp(a, "--trunk")) o->trunk = v;
        else if (!strcmp(a, "--prompt-file")) o->prompt_file = v;
        else if (!strcmp(a, "--tok")) o->tok = v;
        else if (!strcmp(a, "--compare")) o->compare = v;
        else if (!strcmp(a, "--reps")) {
            if (k3_parse_int_msg(a, v, 1, &o->reps, err, sizeof err)) return usage_error(err);
            if (o->reps > KB_MAXREP) return usage_error("--reps: at most 100");
        } else if (!strcmp(a, "--disk-gb")) {
            if (parse_gb(v, &o->disk_gb)) {
                snprintf(err, sizeof err, "--disk-gb: '%.100s' is not a number of GB >= 0", v);
                return usage_error(err);
            }
        } else if (!strcmp(a, "-o")) {
            static const char *const F[] = { "md", "json", "csv", "jsonl", "html" };
            int f = -1;
            for (int k = 0; k < 5; k++) if (!strcmp(v, F[k])) f = k;
            if (f < 0) {
                snprintf(err, sizeof err, "-o: unknown format '%.60s' (md, json, csv, jsonl, "
                         "html)", v);
                return usage_error(err);
            }
            o->fmt = f;
        } else if (!strcmp(a, "--plot")) o->plot = v;
        else if (!strcmp(a, "--cold")) o->cold = 1;
        else if (!strcmp(a, "--warm")) o->cold = 0;
        else if (!strcmp(a, "--drop-caches")) o->drop_caches = 1;
        else if (!strcmp(a, "--no-limits")) o->no_limits = 1;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o->quiet = 1;
        else if (a[0] == '-' && a[1]) {
            static const K3Flag F[] = { { "--budget", 1 }, { "--preset", 1 }, { "--threads", 1 },
                { "-p", 1 }, { "-n", 1 }, { "--kernels", 1 }, { "--trunk", 1 },
                { "--prompt-file", 1 }, { "--tok", 1 }, { "--reps", 1 }, { "--compare", 1 },
                { "--disk-gb", 1 }, { "-o", 1 }, { "--cold", 0 }, { "--warm", 0 },
                { "--drop-caches", 0 }, { "--no-limits", 0 }, { "--quiet", 0 },
                { "--spec", 0 }, { "--no-spec", 0 }, { "--help", 0 }, { "--batch", 1 },
                { "--plot", 1 }, { "--format", 1 }, { "--draft", 1 }, { "--draft-block", 1 } };
            k3_unknown_option(a, F, (int)(sizeof F / sizeof F[0]), err, sizeof err);
            return usage_error(err);
        } else if (!o->model) o->model = a;
        else {
            snprintf(err, sizeof err, "unexpected argument '%.100s' (MODEL_DIR was already "
                     "given)", a);
            return usage_error(err);
        }
    }
    if (!o->model) return usage_error("missing MODEL_DIR");
    if (o->plot && kb_plot_check(o->plot, err, sizeof err)) return usage_error(err);
    if (o->drop_caches && o->cold == 0) return usage_error("--drop-caches needs --cold");
    if (o->draft_block && !o->draft) return usage_error("--draft-block is about a --draft DIR");
    if (o->draft && o->no_spec)
        return usage_error("--draft verifies its blocks as --spec does: drop --no-spec");
    if (o->draft && k3_comm_size() > 1)
        return usage_error("--draft does not run over MPI ranks yet: run bin/k3 bench");
    if (o->prompt_file && !o->tok)
        return usage_error("--prompt-file needs a tokenizer: pass --tok DIR or set K3_TOK_FILES");
    if (!A->n_mem) {                           /* one row of the child's default: auto */
        memset(&A->mem[0], 0, sizeof A->mem[0]);
        A->mem[0].t = A->mem[0].c = K3_BUDGET_AUTO;
        A->n_mem = 1;
    }
    long rows = (long)A->n_mem * A->n_thr * A->n_np * A->n_ng * A->n_kern * A->n_bat;
    if (rows > MAXROWS) {
        snprintf(err, sizeof err, "the grid has %ld rows; at most %d", rows, MAXROWS);
        return usage_error(err);
    }
    return 0;
}

/* ---- the prompt ---- */

/* "id,id,..." for n tokens: the first n of the file's ids, or synthetic ids (inside the
 * vocabulary, never bos/eos/pad, so a row's length is what was asked). */
static char *prompt_ids(const KbMachine *m, const int32_t *fids, int n, int seq) {
    char *s = malloc((size_t)n * 12 + 1), *p = s;
    if (!s) return NULL;
    uint64_t h = 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull * (uint64_t)seq;  /* seq 0: as
                                                                                 * before */
    for (int i = 0; i < n; i++) {
        int id;
        if (fids) id = fids[i];
        else {
            h ^= h << 13; h ^= h >> 7; h ^= h << 17;
            id = (int)(h % (uint64_t)m->vocab);
            while (m->vocab > 4 && (id == m->bos || id == m->eos || id == m->pad))
                id = (id + 1) % m->vocab;
        }
        p += sprintf(p, i ? ",%d" : "%d", id);
    }
    return s;
}

static int32_t *read_prompt_file(const KbOpts *o, size_t *n) {
    char err[4200];
    Tok *t = tok_load(o->tok, err, sizeof err);
    if (!t) { fprintf(stderr, "k3 bench: %s\n", err); return NULL; }
    size_t len = 0;
    char *text = k3_slurp(o->prompt_file, (size_t)64 << 20, &len, err, sizeof err);
    int32_t *ids = text ? tok_encode(t, text, len, 0, n) : NULL;
    if (!text) fprintf(stderr, "k3 bench: --prompt-file %s\n", err);
    else if (!ids) fprintf(stderr, "k3 bench: out of memory tokenizing --prompt-file\n");
    free(text);
    tok_free(t);                               /* the parent stays small: see run_child */
    return ids;
}

/* ---- one rep in a child ---- */

static double num(const Json *o, const char *k, double def) {
    const Json *v = json_get(o, k);
    return v && v->type == JSON_NUMBER ? v->number : def;
}

void kb_last_line(const char *path, char *out, size_t n) {
    size_t len = 0;
    char *s = k3_read_file(path, &len);
    out[0] = 0;
    if (!s) return;
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ')) s[--len] = 0;
    size_t b = len;
    while (b && s[b - 1] != '\n') b--;
    snprintf(out, n, "%.560s", s + b);
    free(s);
}

/* The child's --out report into r; -1 with err when it is missing or not k3's. */
int kb_read_report(const char *path, KbRep *r, char *err, size_t en) {
    char perr[200];
    size_t len = 0;
    char *text = k3_read_file(path, &len);
    const int missing = !text;
    Json *j = text ? json_parse(text, len, perr, sizeof perr) : NULL;
    free(text);
    const Json *mode = j && j->type == JSON_OBJECT ? json_get(j, "mode") : NULL;
    const int batch = mode && mode->type == JSON_STRING && !strcmp(mode->str, "batch");
    if (!j || j->type != JSON_OBJECT || !json_get(j, batch ? "tokens_per_second"
                                                           : "seconds_per_token")) {
        snprintf(err, en, "exit 0 but its --out report is %s", missing ? "missing" : "not k3's");
        json_free(j);
        return -1;
    }
    r->spt = num(j, "seconds_per_token", 0);
    r->ptps = num(j, "prefill_tokens_per_second", 0);
    r->wall = batch ? num(j, "seconds", -1)
                    : num(j, "seconds_prefill", -1) + num(j, "seconds_decode", 0);
    r->io_share = num(j, "io_share", -1);
    r->hit = num(j, "expert_hit_rate", -1);
    r->plan = (uint64_t)num(j, "plan_bytes", 0);
    r->buffers = (uint64_t)num(j, "buffer_bytes", 0);
    r->n_generated = (int)num(j, "n_generated", 0);
    r->threads = (int)num(j, "threads", 0);
    for (int i = 0; i < KB_NROOF; i++) r->roof[i] = num(j, kb_roof_keys[i], -1);
    r->d_blocks = num(j, "draft_blocks", -1); r->d_proposed = num(j, "draft_proposed", -1);
    r->d_accepted = num(j, "draft_accepted", -1);
    const Json *k = json_get(j, "kernels"), *v = json_get(j, "version");
    snprintf(r->kernels, sizeof r->kernels, "%s", k && k->type == JSON_STRING ? k->str : "");
    snprintf(r->version, sizeof r->version, "%s", v && v->type == JSON_STRING ? v->str : "");
    const Json *it = json_get(j, "interrupted"), *ss = json_get(j, "stop"),
               *so = json_get(j, "stops");
    const int eos = so && so->type == JSON_OBJECT && num(so, "eos", 0) > 0;
    /* a one-prompt run's --out says why it stopped ("stop"; before issue 35 the string that
     * matched, or null); a batch's counts its eos */
    static const char *const why[] = { "eos", "length", "stop_string", "context",
                                       "interrupted" };
    const char *said = ss && ss->type == JSON_STRING ? "stop_string" : NULL;
    for (int i = 0; said && i < 5; i++) if (!strcmp(ss->str, why[i])) said = why[i];
    snprintf(r->stop, sizeof r->stop, "%s", it && it->type == JSON_BOOL && it->boolean ?
             "interrupted" : said ? said : eos ? "eos" : "length");
    const Json *st = json_get(j, "steps");
    double tb = 0, eb = 0, hb = 0, req = 0, hits = 0;
    int nd = 0;
    for (size_t i = 0; st && st->type == JSON_ARRAY && i < st->len; i++) {
        const Json *s = json_at(st, i);
        if (num(s, "step", 0) < 1) continue;  /* step 0 is the prefill */
        double h = num(s, "head_bytes", 0);
        tb += num(s, "trunk_bytes", 0) - h; hb += h; eb += num(s, "expert_bytes", 0);
        req += num(s, "experts_requested", 0); hits += num(s, "experts_already_resident", 0);
        nd++;
    }
    r->b_trunk = nd ? tb / nd : -1; r->b_exp = nd ? eb / nd : -1; r->b_head = nd ? hb / nd : -1;
    r->dhit = req > 0 ? hits / req : -1;
    if (batch) {                              /* the aggregate: every sequence's tokens */
        const double tps = num(j, "tokens_per_second", 0);
        r->spt = tps > 0 ? 1 / tps : 0;
        r->ptps = -1;                         /* batch mode times the run as a whole */
        r->b_trunk = num(j, "trunk_bytes_per_token", -1);    /* the run's, per token */
        r->b_exp = num(j, "expert_bytes_per_token", -1);
        r->b_head = num(j, "head_bytes_per_token", -1);
        r->dhit = r->hit;
    }
    const Json *pr = json_get(j, "per_rank");     /* over N ranks: every rank's */
    for (size_t i = 0; pr && pr->type == JSON_ARRAY && i < pr->len; i++) {
        const Json *p = json_at(pr, i);
        const int dec = json_get(p, "decode_collectives_per_token") != NULL;
        const double rss = num(p, "peak_rss_bytes", 0);
        const double c = num(p, dec ? "decode_collectives_per_token" : "collectives_per_token", 0);
        const double b = num(p, dec ? "decode_comm_bytes_per_token" : "comm_bytes_per_token", 0);
        const double w = num(p, dec ? "decode_comm_wait_s_per_token" : "comm_wait_s_per_token",
                             0);
        r->ranks = (int)pr->len;
        if (rss > (double)r->rss) r->rss = (uint64_t)rss;
        if (c > r->coll_pt) r->coll_pt = c;
        if (b > r->comm_pt) r->comm_pt = b;
        if (w > r->wait_pt) r->wait_pt = w;
    }
    json_free(j);
    return 0;
}

/* Runs args (argv[0] = bin; self: this binary) to completion: 0 with r filled, or how the
 * child ended (its exit code, 128 + the signal, or 1 without a report) with err. */
static int run_child(const char *bin, int self, char **args, const char *out, const char *errf,
                     KbRep *r, char *err, size_t en) {
    unlink(out);
    pid_t pid = fork();
    if (pid < 0) { snprintf(err, en, "fork: %s", strerror(errno)); return K3_ERR_RUNTIME; }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR), ef = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (nul >= 0) { dup2(nul, 0); dup2(nul, 1); }
        if (ef >= 0) dup2(ef, 2);
        signal(SIGINT, SIG_DFL);
        if (self) execv("/proc/self/exe", args);
        else if (strchr(bin, '/')) execv(bin, args);
        else execvp(bin, args);
        fprintf(stderr, "k3 bench: cannot run %s: %s\n", self ? "/proc/self/exe" : bin,
                strerror(errno));
        _exit(127);
    }
    g_child = pid;
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {}
    g_child = 0;
    char line[580];
    kb_last_line(errf, line, sizeof line);
    memset(r, 0, sizeof *r);
    r->rss = (uint64_t)ru.ru_maxrss * 1024;    /* the child's high-water mark, KiB on Linux */
    if (WIFSIGNALED(status)) {
        snprintf(err, en, "killed by signal %d (%s)%s%s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), line[0] ? ": " : "", line);
        return 128 + WTERMSIG(status);
    }
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (rc) { snprintf(err, en, "exit %d%s%s", rc, line[0] ? ": " : "", line); return rc; }
    uint64_t rss = r->rss;
    if (kb_read_report(out, r, err, en)) return K3_ERR_RUNTIME;
    r->rss = rss;
    return 0;
}

/* ---- the grid ---- */

typedef struct { char *v[32]; int n; char gen[16], thr[16], bs[16]; } Argv;

static void add(Argv *a, const char *s) { a->v[a->n++] = (char *)s; a->v[a->n] = NULL; }

static void child_args(Argv *a, const char *bin, const KbOpts *o, const KbConf *c,
                       const char *ids, const char *out) {
    a->n = 0;
    add(a, bin); add(a, o->model);
    if (c->batch > 1) {                       /* ids: the JSONL file of the B prompts */
        snprintf(a->bs, sizeof a->bs, "%d", c->batch);
        add(a, "--batch"); add(a, ids); add(a, "--batch-size"); add(a, a->bs);
    } else { add(a, "--ids"); add(a, ids); }
    snprintf(a->gen, sizeof a->gen, "%d", c->n_gen);
    add(a, "--gen"); add(a, a->gen);
    if (o->trunk) { add(a, "--trunk"); add(a, o->trunk); }
    if (c->budget) { add(a, "--trunk-gb"); add(a, c->tg); add(a, "--cache-gb"); add(a, c->cg); }
    else if (c->preset) { add(a, "--preset"); add(a, c->preset); }
    if (c->threads) {
        snprintf(a->thr, sizeof a->thr, "%d", c->threads);
        add(a, "--threads"); add(a, a->thr);
    }
    if (c->kernels) { add(a, "--kernels"); add(a, c->kernels); }
    if (o->no_spec) add(a, "--no-spec");
    if (o->draft) { add(a, "--draft"); add(a, o->draft); }
    if (o->draft_block) { add(a, "--draft-block"); add(a, o->draft_block); }
    add(a, "--out"); add(a, out); add(a, "--quiet");
}

static void conf_label(const KbConf *c, char *b, size_t n) {
    char t[40] = "", k[40] = "";
    if (c->threads) snprintf(t, sizeof t, " --threads %d", c->threads);
    if (c->kernels) snprintf(k, sizeof k, " --kernels %.20s", c->kernels);
    char bt[24] = "";
    if (c->batch > 1) snprintf(bt, sizeof bt, " --batch %d", c->batch);
    snprintf(b, n, "%s%.60s%s%s -p %d -n %d%s",
             c->budget ? "--budget " : c->preset ? "--preset " : "",
             c->budget ? c->budget : c->preset ? c->preset : "auto", t, k, c->n_prompt, c->n_gen,
             bt);
}

static void expand(const Args *A, KbRow *rows) {
    int n = 0;
    for (int m = 0; m < A->n_mem; m++)
        for (int t = 0; t < A->n_thr; t++)
            for (int k = 0; k < A->n_kern; k++)
                for (int p = 0; p < A->n_np; p++)
                    for (int g = 0; g < A->n_ng; g++)
                    for (int b = 0; b < A->n_bat; b++) {
                        KbConf *c = &rows[n++].c;
                        c->batch = A->bat[b];
                        const Mem *me = &A->mem[m];
                        c->budget = me->budget; c->preset = me->preset; c->tg = me->tg;
                        c->cg = me->cg; c->trunk_gb = me->t; c->cache_gb = me->c;
                        c->threads = A->thr[t]; c->kernels = A->kern[k];
                        c->n_prompt = A->np[p]; c->n_gen = A->ng[g];
                        c->cold = A->o.cold >= 0 ? A->o.cold
                                : !(c->preset && !strcmp(c->preset, "max"));
                    }
}

typedef struct { double t0, spent; int done, total, tty; } Progress;

static void progress(Progress *p, const KbOpts *o, int row, int nrows, int rep, char side,
                     const KbConf *c) {
    if (o->quiet) return;
    char lab[200], eta[48] = "";
    conf_label(c, lab, sizeof lab);
    if (p->done) {
        double s = p->spent / p->done * (p->total - p->done);
        int sec = (int)(s + 0.5);
        snprintf(eta, sizeof eta, ", ETA %d:%02d", sec / 60, sec % 60);
    }
    fprintf(stderr, "%sk3 bench: row %d/%d rep %d/%d%s%s (%s)%s%s", p->tty ? "\r\033[K" : "",
            row + 1, nrows, rep + 1, o->reps, o->compare ? " " : "",
            o->compare ? (side == 'A' ? "A" : "B") : "", lab, eta, p->tty ? "" : "\n");
}

/* One rep of one side: evict, run, record. */
static void run_rep(const Args *A, const KbMachine *M, KbRow *r, KbSide *s, int self,
                    const char *ids, const char *dir, Progress *pg) {
    const KbOpts *o = &A->o;
    char out[4200], errf[4200], err[800];
    snprintf(out, sizeof out, "%s/run.json", dir);
    snprintf(errf, sizeof errf, "%s/stderr.txt", dir);
    if (r->c.cold) kb_evict(M, o->trunk, o->drop_caches);
    Argv av;
    char jl[4200];
    snprintf(jl, sizeof jl, "%s/batch.jsonl", dir);
    child_args(&av, self ? "k3" : o->compare, o, &r->c, r->c.batch > 1 ? jl : ids, out);
    double t0 = k3_now();
    KbRep rep;
    int rc = M->ranks > 1 ? kb_run_ranks(av.v, out, errf, &g_stop, &rep, err, sizeof err)
                          : run_child(o->compare, self, av.v, out, errf, &rep, err, sizeof err);
    pg->spent += k3_now() - t0; pg->done++;
    if (g_stop) return;                        /* interrupted: the rep does not count */
    if (rc) { s->rc = rc; snprintf(s->error, sizeof s->error, "%s", err); return; }
    if (r->c.batch <= 1 && !strcmp(rep.stop, "length") && rep.n_generated < r->c.n_gen)
        snprintf(rep.stop, sizeof rep.stop, "eos");  /* fewer than -n and nothing else ended it */
    s->rep[s->n++] = rep;
}

static int remove_dir(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/run.json", dir); unlink(p);
    snprintf(p, sizeof p, "%s/run.json.tmp", dir); unlink(p);
    snprintf(p, sizeof p, "%s/stderr.txt", dir); unlink(p);
    snprintf(p, sizeof p, "%s/batch.jsonl", dir); unlink(p);
    return rmdir(dir);
}

static int check_files(const KbOpts *o) {
    struct stat sb;
    char p[4200];
    if (stat(o->model, &sb) || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "k3 bench: %s: not a model directory\n", o->model);
        return K3_ERR_USAGE;
    }
    snprintf(p, sizeof p, "%s/trunk.k3", o->trunk ? o->trunk : "");
    if (o->trunk && stat(p, &sb)) {
        fprintf(stderr, "k3 bench: --trunk %s: no trunk.k3 there (make it with k3 pack %s %s)\n",
                o->trunk, o->model, o->trunk);
        return K3_ERR_USAGE;
    }
    if (o->compare && strchr(o->compare, '/') && access(o->compare, X_OK)) {
        fprintf(stderr, "k3 bench: --compare %s: %s\n", o->compare, strerror(errno));
        return K3_ERR_USAGE;
    }
    return 0;
}

/* A --batch row's prompts: B lines of {"ids": [...], "gen": n}, distinct synthetic ids (or
 * the prompt file's first -p ids in every line). */
static int write_batch(const KbMachine *M, const int32_t *fids, const KbConf *c,
                       const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/batch.jsonl", dir);
    FILE *f = fopen(p, "w");
    int bad = !f;
    for (int s = 0; s < c->batch && !bad; s++) {
        char *ids = prompt_ids(M, fids, c->n_prompt, s);
        if (!ids) bad = 1;
        else fprintf(f, "{\"id\": \"%d\", \"ids\": [%s], \"gen\": %d}\n", s, ids, c->n_gen);
        free(ids);
    }
    if (f && fclose(f)) bad = 1;
    if (bad) fprintf(stderr, "k3 bench: cannot write %s: %s\n", p, strerror(errno));
    return bad;
}

static int run_grid(Args *A, KbMachine *M, KbRow *rows, int nrows, const int32_t *fids,
                    const char *dir) {
    const KbOpts *o = &A->o;
    Progress pg = { k3_now(), 0, 0, nrows * o->reps * (o->compare ? 2 : 1), isatty(2) };
    int finished = 0, worst = 0;
    M->parent_rss = k3_rss_now();              /* a child's peak RSS starts from this (fork) */
    kb_out_start(stdout, o, M);
    for (int i = 0; i < nrows && !g_stop; i++) {
        KbRow *r = &rows[i];
        char *ids = prompt_ids(M, fids, r->c.n_prompt, 0);
        r->a.rep = calloc((size_t)o->reps, sizeof(KbRep));
        r->b.rep = o->compare ? calloc((size_t)o->reps, sizeof(KbRep)) : NULL;
        if (!ids || !r->a.rep || (o->compare && !r->b.rep)) {
            fprintf(stderr, "k3 bench: out of memory\n"); free(ids); return K3_ERR_RUNTIME;
        }
        if (r->c.batch > 1 && write_batch(M, fids, &r->c, dir)) {
            free(ids); return K3_ERR_RUNTIME;
        }
        for (int j = 0; j < o->reps && !g_stop; j++)
            for (int side = 0; side < (o->compare ? 2 : 1) && !g_stop; side++) {
                KbSide *s = side ? &r->b : &r->a;
                if (s->rc) { pg.total--; continue; }   /* a failed side stops its reps */
                progress(&pg, o, i, nrows, j, side ? 'B' : 'A', &r->c);
                run_rep(A, M, r, s, !side, ids, dir, &pg);
            }
        free(ids);
        if (g_stop) break;
        for (int side = 0; side < 2; side++) {
            int rc = side ? r->b.rc : r->a.rc;
            if (rc == K3_ERR_EXPERT && !worst) worst = K3_ERR_EXPERT;
            else if (rc && rc != K3_ERR_EXPERT) worst = K3_ERR_RUNTIME;
        }
        if (pg.tty && !o->quiet) fprintf(stderr, "\r\033[K");
        kb_out_row(stdout, o, M, r, i);
        finished++;
    }
    if (pg.tty && !o->quiet) fprintf(stderr, "\r\033[K");
    kb_out_end(stdout, o, M, rows, finished);
    fflush(stdout);
    if (o->plot && finished && kb_plot_file(o, M, rows, finished)) worst = K3_ERR_RUNTIME;
    if (g_stop) {
        fprintf(stderr, "k3 bench: interrupted: %d of %d rows finished\n", finished, nrows);
        return K3_ERR_RUNTIME;
    }
    if (!o->quiet)
        fprintf(stderr, "k3 bench: %d rows x %d reps in %.1f s\n", nrows, o->reps,
                k3_now() - pg.t0);
    return worst;
}

int k3_bench_main(int argc, char **argv) {
    Args *A = calloc(1, sizeof *A);
    KbMachine *M = calloc(1, sizeof *M);
    KbRow *rows = NULL;
    int32_t *fids = NULL;
    size_t nf = 0;
    char err[4200], dir[4096] = "";
    int nrows = 0, rc = !A || !M ? K3_ERR_RUNTIME : parse(argc, argv, A);
    if (rc) goto done;
    const KbOpts *o = &A->o;
    if ((rc = check_files(o))) goto done;
    if ((rc = kb_model_facts(M, o->model, err, sizeof err))) {
        fprintf(stderr, "k3 bench: %s\n", err); goto done;
    }
    if (o->prompt_file) {
        if (!(fids = read_prompt_file(o, &nf))) { rc = K3_ERR_USAGE; goto done; }
        if (!A->p_given) {
            A->np[0] = nf < MAXPROMPT ? (int)nf : MAXPROMPT; A->n_np = 1;
        }
        for (int i = 0; i < A->n_np; i++)
            if (A->np[i] < 1 || (size_t)A->np[i] > nf) {
                fprintf(stderr, "k3 bench: -p %d: --prompt-file %s has %zu tokens\n", A->np[i],
                        o->prompt_file, nf);
                rc = K3_ERR_USAGE; goto done;
            }
        for (size_t i = 0; i < nf; i++)
            if (fids[i] >= M->vocab) {
                fprintf(stderr, "k3 bench: --prompt-file %s: id %d is outside the model's "
                        "vocabulary (%d)\n", o->prompt_file, fids[i], M->vocab);
                rc = K3_ERR_USAGE; goto done;
            }
    }
    if ((M->ranks = k3_comm_size()) > 1 && o->compare) {   /* a rep runs in the process */
        fprintf(stderr, "k3 bench: --compare runs another binary in a child; over %d ranks "
                "each rep runs in k3-mpi itself: compare in one process (bin/k3 bench)\n",
                M->ranks);
        rc = K3_ERR_USAGE; goto done;
    }
    nrows = A->n_mem * A->n_thr * A->n_kern * A->n_np * A->n_ng * A->n_bat;
    if (!(rows = calloc((size_t)nrows, sizeof *rows))) { rc = K3_ERR_RUNTIME; goto done; }
    expand(A, rows);
    kb_machine_describe(M, o->model);
    if (k3_comm_rank() > 0) A->o.no_limits = 1;   /* over N ranks rank 0 measures them */
    if (!o->no_limits) {                       /* before the rows: the parent is small again */
        int th[MAXAX];
        for (int i = 0; i < A->n_thr; i++) th[i] = A->thr[i] ? A->thr[i] : M->cores;
        kb_measure_memory(M, th, A->n_thr, o->quiet);
        if (o->disk_gb > 0) kb_measure_disk(M, o->model, o->disk_gb, o->quiet);
    }
    if (k3_comm_rank() == 0) kb_machine_cache(A->kern, A->n_kern, A->thr, A->n_thr);
    if (M->ranks > 1) {                        /* the limits are rank 0's: the others wait */
        char go = 1;
        k3_comm_bcast(&go, 1);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/k3bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "k3 bench: cannot create %s: %s\n", dir, strerror(errno));
        dir[0] = 0; rc = K3_ERR_RUNTIME; goto done;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;                 /* no SA_RESTART: wait4 returns, the loop ends */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = run_grid(A, M, rows, nrows, fids, dir);
done:
    if (dir[0]) remove_dir(dir);
    for (int i = 0; rows && i < nrows; i++) { free(rows[i].a.rep); free(rows[i].b.rep); }
    for (int i = 0; A && i < A->own.n; i++) free(A->own.p[i]);
    if (M) kb_machine_free(M);
    free(rows); free(fids); free(M); free(A);
    return rc < 0 ? 0 : rc;
}
