/* chat.c — k3 MODEL_DIR --chat: flags, the REPL loop, multi-line input, commands.
 * See docs/CHAT.md. One turn is chat_gen.c, the history file chat_hist.c. */
#include "chat.h"
#include "lineedit.h"
#include "cli.h"
#include "comm.h"
#include "statefile.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char CHAT_USAGE[] =
"Usage: k3 MODEL_DIR --chat --tok DIR [options]\n"
"  --tok DIR              tokenizer directory (default $K3_TOK_FILES)\n"
"  --history FILE         JSONL history: loaded (validated) at start, rewritten after every turn\n"
"  --system TEXT          system message (must equal a loaded history's system message)\n"
"  --gen N                cap on each reply, in tokens (default 4096)\n"
"  --ctx N                context limit in positions (default max_position_embeddings)\n"
"  --prefill-chunk N      tokens per forward of a turn (default: the largest that fits)\n"
"  --no-think             thinking off: no effort message, no think channels\n"
"  --think-effort E       low | high | max (default max)\n"
"  --hide-thinking        do not print the think channel\n"
"  --canonical-history    re-render earlier replies from their text only (see docs/CHAT.md)\n"
"  --context-full P       stop (refuse the turn, default) | drop-oldest (drop the oldest\n"
"                         turns, keep the system message, re-prefill)\n"
"  --temperature X --top-k K --top-p P --min-p M --seed N --greedy\n"
"                         sampling (default temperature 1, top-p 0.95, a drawn seed)\n"
"  --no-color             no ANSI dim for the thinking text\n"
"  --no-spec              no speculative decoding (on by default: drafts from n-grams of\n"
"                         the conversation verified k+1 positions per forward; the same\n"
"                         replies, docs/BATCH.md); --spec-k N most drafts per pass (8)\n"
"  --grammar GBNF | --grammar-file FILE\n"
"                         every reply a sentence of the GBNF grammar (thinking off;\n"
"                         docs/SAMPLING.md)\n"
"  --draft-file PATH      also draft from this text (e.g. the file the answer copies)\n"
"  --draft DIR            draft with a DSpark model instead (docs/DRAFT.md; the same\n"
"                         replies); --draft-block N: N rows a block (1..7; default chosen)\n"
"  --save-state FILE      at exit, save the engine state (needs --history; see docs/CHAT.md)\n"
"  --load-state FILE      resume from a saved state instead of re-prefilling the history\n"
"  --config PATH --threads N --kernels K   engine options as in batch mode\n"
"  --trunk DIR --trunk-gb G --cache-gb G --preset P --verbose   memory budgets as in batch\n"
"                         mode (k3 --help, docs/PERFORMANCE.md); the plan covers --ctx\n"
"                         positions (4096 when --ctx is not given; the cache grows past it)\n";

static const char HELP[] =
"Type a message and press Enter. A line ending in \\ continues on the next line;\n"
"a line \"\"\" starts a block that ends at the next \"\"\" line. A message starting with\n"
"/ is a command; start it with // to send a literal /.\n"
"  /help                  this text\n"
"  /exit, /quit, Ctrl-D   leave (Ctrl-C twice at the prompt also leaves)\n"
"  /reset                 forget the conversation, keep the system message\n"
"  /system [TEXT]         show or set the system message\n"
"  /think on|off|low|high|max   thinking mode and effort\n"
"  /temp X                temperature (0 = greedy)\n"
"  /seed N                base seed of the sampler\n"
"  /gen N                 cap each reply at N tokens\n"
"  /stats                 tokens, speeds, peak RSS, reused positions\n"
"  /history               the lines typed in this session\n"
"  /save FILE, /load FILE write / read a JSONL history\n"
"  /save-state FILE       save the engine state (resume with --history H --load-state FILE)\n"
"  /image PATH            an image (PNG, JPEG, GIF) for your next message, through the\n"
"                         model's vision tower (repeatable: several images, in order)\n"
"Ctrl-C during a reply stops it; the partial reply is kept (marked truncated). Ctrl-C\n"
"during the prefill stops it too; the message is then not sent (Up recalls it).\n";

static void on_sigint(int sig) { (void)sig; chat_interrupted = 1; }

/* ---- input: own buffered reader on fd 0 (read() returns on SIGINT) ---- */
static char ibuf[65536];
static size_t ipos, ilen;

static int tty_in, le_on;                       /* stdin is a terminal; the line editor is in use */
static const char *cur_prompt = "> ";

/* 1 = a line in *out (malloc'd, no newline), 0 = EOF, -1 = interrupted. */
static int read_line(char **out) {
    if (le_on) return le_read(cur_prompt, out);
    size_t cap = 256, n = 0;
    char *s = malloc(cap);
    if (!s) return 0;
    for (;;) {
        if (ipos == ilen) {
            ssize_t r = read(0, ibuf, sizeof ibuf);
            if (r < 0 && errno == EINTR) {
                if (chat_interrupted) { free(s); return -1; }
                continue;
            }
            if (r <= 0) {
                if (n == 0) { free(s); return 0; }
                break;
            }
            ipos = 0; ilen = (size_t)r;
        }
        char c = ibuf[ipos++];
        if (c == '\n') break;
        if (n + 2 > cap) {
            if (cap >= CHAT_MAX_LINE) continue;            /* drop the excess of a huge line */
            char *ns = realloc(s, cap * 2);
            if (!ns) break;
            s = ns; cap *= 2;
        }
        s[n++] = c;
    }
    if (n && s[n - 1] == '\r') n--;
    s[n] = 0;
    *out = s;
    return 1;
}

static void prompt(const char *p) {
    cur_prompt = p;
    if (!le_on && tty_in) { fputs(p, stdout); fflush(stdout); }
}

/* Appends b to *a with a newline between. */
static char *join(char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *r = realloc(a, la + lb + 2);
    if (!r) return a;
    r[la] = '\n';
    memcpy(r + la + 1, b, lb + 1);
    return r;
}

/* One message: handles \ continuation and """ blocks. Same return codes as read_line. */
static int read_message(char **out) {
    char *line;
    prompt("> ");
    int r = read_line(&line);
    if (r <= 0) return r;
    if (!strcmp(line, "\"\"\"")) {
        char *acc = NULL, *l;
        for (;;) {
            prompt("... ");
            r = read_line(&l);
            if (r < 0) { free(acc); free(line); return -1; }
            if (r == 0 || !strcmp(l, "\"\"\"")) { if (r) free(l); break; }
            acc = acc ? join(acc, l) : strdup(l);
            free(l);
        }
        free(line);
        *out = acc ? acc : strdup("");
        return 1;
    }
    size_t n;
    while ((n = strlen(line)) && line[n - 1] == '\\') {
        line[n - 1] = 0;
        char *l;
        prompt("... ");
        r = read_line(&l);
        if (r < 0) { free(line); return -1; }
        if (r == 0) break;
        line = join(line, l);
        free(l);
    }
    *out = line;
    return 1;
}

/* ---- commands ---- */

/* Why the files this session must leave behind are not complete ("" = they are): the
 * history's last write failed, or the state could not be saved at exit. Exit 1 at the end. */
static char unsaved[1200];

static int save_history(Chat *c) {
    char err[512];
    if (!c->history) return 0;
    if (chat_hist_save(c->history, &c->log, err, sizeof err)) {
        fprintf(stderr, "k3: %s\n", err);
        snprintf(unsaved, sizeof unsaved, "the history was not written (%s); it lacks this "
                 "session's last turns", err);
        return -1;
    }
    unsaved[0] = 0;                              /* a later write made it whole again */
    return 0;
}

/* Typed text as valid UTF-8 (ill-formed bytes -> U+FFFD) so the JSONL history stays loadable. */
static char *utf8_clean(const char *s) {
    size_t n = strlen(s), j = 0;
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (cp == 0xFFFFFFFFu) { memcpy(o + j, "\xEF\xBF\xBD", 3); j += 3; }
        else { memcpy(o + j, s + i, (size_t)l); j += (size_t)l; }
        i += (size_t)l;
    }
    o[j] = 0;
    return o;
}

static int is_blank(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    return !*s;
}

typedef struct { char **v; int n, cap; } Lines;

/* ---- saved state (chat_state.c) ---- */

static int n_loaded;

static void state_save_cmd(Chat *c, const char *path) {
    char err[1024];
    if (!*path) { printf("usage: /save-state FILE\n"); return; }
    if (c->n_pend)                 /* the state holds the sent messages' images only */
        printf("k3: note: %d queued image%s (/image) not yet sent %s not in the state\n",
               c->n_pend, c->n_pend == 1 ? "" : "s", c->n_pend == 1 ? "is" : "are");
    double t0 = k3_now();
    if (chat_state_save(c, path, err, sizeof err)) printf("k3: %s\n", err);
    else
        printf("(saved the state: %d positions, %d messages, to %s in %.2f s)\n", c->st->pos,
               c->log.n, path, k3_now() - t0);
}

/* --load-state, once the model, the state and the history are ready. */
static int state_resume(Chat *c) {
    char err[1024];
    if (!c->load_state) return 0;
    double t0 = k3_now();
    int rc = chat_state_load(c, c->load_state, err, sizeof err);
    if (k3_sched_sync(c->sch, c->q)) {             /* the other ranks' state: these bytes */
        fprintf(stderr, "k3: out of memory\n");
        return K3_ERR_RUNTIME;
    }
    if (rc) { fprintf(stderr, "k3: %s\n", err); return rc; }
    if (c->draft && c->st->pos > 0 && k3_draft_pos(c->draft) == c->st->pos) {
        chat_draft_send_ctx(c);                    /* over N ranks: to the others */
        fprintf(stderr, "k3: --draft: the state's draft context restored (%d positions): "
                "replies are drafted at once\n", c->st->pos);
    } else if (c->draft) {     /* saved without it, by another draft or an older k3 */
        chat_draft_send(c, CHAT_DR_TRUNC, 0, 0, 0);
        k3_draft_truncate(c->draft, 0);
        fprintf(stderr, "k3: --draft: the loaded state has no draft context for this draft "
                "(saved without --draft, with another draft, or by an older k3), so replies "
                "are not drafted until the conversation is prefilled again (/reset)\n");
    }
    fprintf(stderr, "k3: state %s: %d positions restored in %.2f s (%d messages from %s); "
            "0 re-prefilled\n", c->load_state, c->st->pos, k3_now() - t0, c->log.n, c->history);
    n_loaded = 0;
    return 0;
}

/* --save-state, when the REPL ends normally. */
static void state_save_at_exit(Chat *c) {
    char err[1024];
    if (!c->save_state) return;
    if (c->n_pend)
        fprintf(stderr, "k3: --save-state: %d queued image%s (/image) never sent: not in the "
                "state\n", c->n_pend, c->n_pend == 1 ? "" : "s");
    double t0 = k3_now();
    if (chat_state_save(c, c->save_state, err, sizeof err)) {
        fprintf(stderr, "k3: %s\n", err);
        if (!unsaved[0])
            snprintf(unsaved, sizeof unsaved, "the state was not saved (%s)", err);
    } else
        fprintf(stderr, "k3: state saved to %s: %d positions in %.2f s\n", c->save_state,
                c->st->pos, k3_now() - t0);
}

/* Returns 1 to leave the REPL, 0 otherwise. */
static int command(Chat *c, char *text, const Lines *hist) {
    char *arg = text + 1;
    while (*arg && *arg != ' ' && *arg != '\t' && *arg != '\n') arg++;
    size_t nl = (size_t)(arg - text);
    while (*arg == ' ' || *arg == '\t') arg++;
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(nl < 31 ? nl : 31), text);
    char err[512];
    if (!strcmp(name, "/exit") || !strcmp(name, "/quit")) return 1;
    if (!strcmp(name, "/help")) fputs(HELP, stdout);
    else if (!strcmp(name, "/reset")) {
        ChatLog keep = { 0 };
        if (c->log.n && !strcmp(c->log.v[0].role, "system"))
            chat_log_add(&keep, "system", c->log.v[0].content, NULL);
        chat_log_free(&c->log); c->skip = 0;
        c->log = keep;
        chat_forget_state(c);
        save_history(c);
        printf("(conversation reset%s)\n", keep.n ? "; system message kept" : "");
    } else if (!strcmp(name, "/system")) {
        int has = c->log.n && !strcmp(c->log.v[0].role, "system");
        if (!*arg) { printf("system: %s\n", has ? c->log.v[0].content : "(none)"); return 0; }
        char *d = strdup(arg);
        if (!d) return 0;
        if (has) { free(c->log.v[0].content); c->log.v[0].content = d; }
        else {
            if (chat_log_add(&c->log, "system", d, NULL)) { free(d); return 0; }
            ChatMsg m = c->log.v[c->log.n - 1];
            memmove(c->log.v + 1, c->log.v, sizeof m * (size_t)(c->log.n - 1));
            c->log.v[0] = m;
            free(d);
        }
        save_history(c);
        if (c->nfed) c->reprefill_why = "the system message changed (/system)";
        printf("(system message set; the next turn re-prefills)\n");
    } else if (!strcmp(name, "/think")) {
        const int was = c->thinking;
        char effort[sizeof c->effort];
        memcpy(effort, c->effort, sizeof effort);
        if (!strcmp(arg, "on")) c->thinking = 1;
        else if (!strcmp(arg, "off")) c->thinking = 0;
        else if (xtml_effort_ok(arg)) {
            c->thinking = 1;
            snprintf(c->effort, sizeof c->effort, "%s", arg);
        }
        else if (*arg) { printf("usage: /think on|off|low|high|max\n"); return 0; }
        /* the mode and the effort are part of the rendered transcript */
        int changed = was != c->thinking || (c->thinking && strcmp(effort, c->effort));
        if (changed && c->nfed) {
            c->reprefill_why = c->thinking ? "the thinking mode changed (/think), which changes "
                                             "how the conversation renders"
                                           : "thinking is off now (/think), which changes how "
                                             "the conversation renders";
            printf("thinking: %s (the conversation renders differently now: the next turn "
                   "prefills it again)\n", c->thinking ? c->effort : "off");
        } else printf("thinking: %s\n", c->thinking ? c->effort : "off");
    } else if (!strcmp(name, "/temp")) {
        char *end;
        double t = strtod(arg, &end);
        if (!*arg || *end || !(t >= 0 && t <= 1e6)) {
            printf("usage: /temp X with X >= 0 (0 = greedy); now %g%s\n", c->sp.temperature,
                   c->sp.greedy ? " (greedy)" : "");
            return 0;
        }
        c->sp.temperature = t; c->sp.greedy = 0;
        if (t == 0) printf("temperature 0: greedy\n");
        else printf("temperature %g (seed %llu)\n", t, (unsigned long long)c->seed);
    } else if (!strcmp(name, "/seed")) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(arg, &end, 10);
        if (!*arg || *arg == '-' || *end || errno) {
            printf("usage: /seed N (unsigned); now %llu\n", (unsigned long long)c->seed);
            return 0;
        }
        c->seed = s;
        printf("seed %llu\n", s);
    } else if (!strcmp(name, "/gen")) {
        int g;
        char *end;
        long x = strtol(arg, &end, 10);
        if (!*arg || *end || x < 1 || x > (1L << 30)) {
            printf("usage: /gen N (tokens per reply, >= 1); now %d\n", c->gen);
            return 0;
        }
        g = (int)x;
        c->gen = g;
        printf("replies capped at %d tokens\n", g);
    } else if (!strcmp(name, "/stats")) chat_print_stats(c, stdout);
    else if (!strcmp(name, "/history")) {
        for (int i = 0; i < hist->n; i++) printf("%4d  %s\n", i + 1, hist->v[i]);
    } else if (!strcmp(name, "/save")) {
        if (!*arg) { printf("usage: /save FILE\n"); return 0; }
        if (chat_hist_save(arg, &c->log, err, sizeof err)) printf("k3: %s\n", err);
        else printf("(saved %d messages to %s)\n", c->log.n, arg);
    } else if (!strcmp(name, "/load")) {
        ChatLog l = { 0 };
        if (!*arg) { printf("usage: /load FILE\n"); return 0; }
        if (chat_hist_load(arg, 0, &l, err, sizeof err) ||
            chat_hist_check_ids(&l, tok_vocab_size(c->tok), arg, err, sizeof err)) {
            chat_log_free(&l);
            printf("k3: %s (nothing changed)\n", err);
            return 0;
        }
        chat_log_free(&c->log); c->skip = 0;
        c->log = l;
        save_history(c);
        if (c->nfed) c->reprefill_why = "another conversation was loaded (/load)";
        printf("(loaded %d messages from %s; the next turn prefills them)\n", l.n, arg);
    } else if (!strcmp(name, "/save-state")) state_save_cmd(c, arg);
    else if (!strcmp(name, "/image")) chat_image_add(c, arg);
    else printf("unknown command %s; /help lists them (start with // to send a literal /)\n", name);
    fflush(stdout);
    return 0;
}

/* ---- flags ---- */

static int usage(const char *fmt, const char *a) {
    fprintf(stderr, "k3: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n%s", CHAT_USAGE);
    return K3_ERR_USAGE;
}

static const K3Flag CHAT_FLAGS[] = {
    { "--chat", 0 }, { "--tok", 1 }, { "--history", 1 }, { "--save-state", 1 },
    { "--load-state", 1 }, { "--system", 1 }, { "--config", 1 }, { "--kernels", 1 },
    { "--gen", 1 }, { "--ctx", 1 }, { "--threads", 1 }, { "--think-effort", 1 },
    { "--thinking-effort", 1 }, { "--no-think", 0 }, { "--hide-thinking", 0 },
    { "--canonical-history", 0 }, { "--no-color", 0 }, { "--help", 0 },
    { "--prefill-chunk", 1 }, { "--context-full", 1 }, K3_FLAGS_SPEC,
    { "--draft-file", 1 }, { "--draft", 1 }, { "--draft-block", 1 }, K3_FLAGS_SAMPLER,
    { "--grammar", 1 }, { "--grammar-file", 1 },
    K3_FLAGS_MEM,
};
#define N_CHAT_FLAGS (int)(sizeof CHAT_FLAGS / sizeof CHAT_FLAGS[0])

static K3MemOpts memf;                       /* memory flags, shared with batch mode (flags.c) */
static int ctx_given, chunk_given;              /* chunk_given: --prefill-chunk N */

static int parse_flags(int argc, char **argv, Chat *c, const char **system, int *seed_set) {
    c->gen = 4096; c->thinking = 1; c->kernels = "auto"; c->spec = 1; c->spec_k = 8;
    snprintf(c->effort, sizeof c->effort, "max");
    sampler_defaults(&c->sp);
    k3_mem_opts_init(&memf);
    c->sp.top_p = 0.95;
    c->tok_dir = k3_tok_env();
    c->color = isatty(1) && !getenv("NO_COLOR");
    char err[320];
    if (k3_args_expand(argc, argv, CHAT_FLAGS, N_CHAT_FLAGS, &argc, &argv, err, sizeof err))
        return usage("%s", err);                              /* --flag=value, once */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = sampler_parse_flag(argc, argv, &i, &c->sp, &c->seed, seed_set, err, sizeof err);
        if (r < 0) return usage("%s", err);
        if (r) continue;
        int mr = k3_mem_parse_flag(argc, argv, &i, &memf, 0, err, sizeof err);
        if (!mr) mr = k3_spec_parse_flag(argc, argv, &i, &c->spec, &c->spec_k, err, sizeof err);
        if (mr < 0) return usage("%s", err);
        if (mr) continue;
#define VAL() do { if (!v) return usage("%s needs a value", a); i++; } while (0)
        if (!strcmp(a, "--chat")) continue;
        else if (!strcmp(a, "--tok")) { VAL(); c->tok_dir = v; }
        else if (!strcmp(a, "--history")) { VAL(); c->history = v; }
        else if (!strcmp(a, "--save-state")) { VAL(); c->save_state = v; }
        else if (!strcmp(a, "--load-state")) { VAL(); c->load_state = v; }
        else if (!strcmp(a, "--system")) { VAL(); *system = v; }
        else if (!strcmp(a, "--config")) { VAL(); c->config = v; }
        else if (!strcmp(a, "--kernels")) { VAL(); c->kernels = v; }
        else if (!strcmp(a, "--gen")) {
            VAL(); if (k3_parse_int(a, v, 1, &c->gen)) return K3_ERR_USAGE;
        } else if (!strcmp(a, "--ctx")) {
            VAL(); if (k3_parse_int(a, v, 1, &c->ctx)) return K3_ERR_USAGE;
            ctx_given = 1;
        } else if (!strcmp(a, "--prefill-chunk")) {  /* else the plan sizes each turn's */
            VAL(); if (k3_parse_int(a, v, 1, &chunk_given)) return K3_ERR_USAGE;
        } else if (!strcmp(a, "--threads")) {
            VAL(); if (k3_parse_int(a, v, 1, &c->threads)) return K3_ERR_USAGE;
        } else if (!strcmp(a, "--think-effort") || !strcmp(a, "--thinking-effort")) {
            VAL();
            if (!xtml_effort_ok(v))
                return usage("--think-effort must be low, high or max (got '%s')", v);
            snprintf(c->effort, sizeof c->effort, "%s", v);
        } else if (!strcmp(a, "--no-think")) c->thinking = 0;
        else if (!strcmp(a, "--hide-thinking")) c->hide_thinking = 1;
        else if (!strcmp(a, "--canonical-history")) c->canonical = 1;
        else if (!strcmp(a, "--no-color")) c->color = 0;
        else if (!strcmp(a, "--draft-file")) { VAL(); c->draft_file = v; }
        else if (!strcmp(a, "--grammar")) { VAL(); c->grammar = v; c->thinking = 0; }
        else if (!strcmp(a, "--grammar-file")) { VAL(); c->grammar_file = v; c->thinking = 0; }
        else if (!strcmp(a, "--draft")) { VAL(); c->draft_dir = v; }
        else if (!strcmp(a, "--draft-block")) {
            VAL(); if (k3_parse_int(a, v, 1, &c->draft_block)) return K3_ERR_USAGE;
            if (c->draft_block > K3_DSPARK_MAX_N)
                return usage("--draft-block takes 1..7 rows (DSpark's block), got %s", v);
            c->draft_fixed = 1;
        }
        else if (!strcmp(a, "--context-full")) {
            VAL();
            if (strcmp(v, "stop") && strcmp(v, "drop-oldest"))
                return usage("--context-full must be stop or drop-oldest (got '%s')", v);
            c->ctx_drop = !strcmp(v, "drop-oldest");
        }
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(CHAT_USAGE, stdout); exit(0); }
        else if (a[0] == '-' && a[1]) {
            k3_unknown_option(a, CHAT_FLAGS, N_CHAT_FLAGS, err, sizeof err);
            return usage("chat: %s", err);
        }
        else if (!c->model_dir) c->model_dir = a;
        else return usage("unexpected argument '%s' (MODEL_DIR was already given)", a);
#undef VAL
    }
    if (!c->model_dir) return usage("%s", "missing MODEL_DIR");
    if (!c->tok_dir)
        return usage("%s", "chat needs a tokenizer: pass --tok DIR or set K3_TOK_FILES");
    if (sampler_check(&c->sp, err, sizeof err)) return usage("%s", err);
    if (c->grammar && c->grammar_file) return usage("%s", "give --grammar or --grammar-file");
    if (c->grammar || c->grammar_file) {     /* refused before the model opens */
        char gerr[600];
        c->gr = c->grammar ? gr_parse(c->grammar, strlen(c->grammar), gerr, sizeof gerr)
                           : gr_parse_file(c->grammar_file, gerr, sizeof gerr);
        if (!c->gr) { fprintf(stderr, "k3: --grammar%s: %s\n", c->grammar ? "" : "-file", gerr);
                      return K3_ERR_USAGE; }
    }
    if (c->draft_dir && (!c->spec || c->draft_file))
        return usage("%s", "--draft verifies its blocks as speculation does: drop --no-spec "
                     "and --draft-file");
    if (c->draft_block && !c->draft_dir)
        return usage("%s", "--draft-block sets the rows of a --draft DIR block");
    if (!c->draft_block) c->draft_block = K3_DSPARK_MAX_N;
    if ((c->save_state || c->load_state) && !c->history)
        return usage("%s", "--save-state and --load-state need --history FILE "
                     "(the state resumes the conversation stored there)");
    /* outputs written after the first turn or at exit: checked before the model opens */
    const char *flag[3] = { "--history", "--save-state", "--dump-cache-trace" };
    const char *path[3] = { c->history, c->save_state, memf.trace_dir };
    char perr[8400];
    for (int i = 0; i < 3; i++)
        if (path[i] && k3_check_output(flag[i], path[i], i == 2, perr, sizeof perr)) {
            fprintf(stderr, "k3: %s\n", perr);
            return K3_ERR_USAGE;
        }
    return 0;
}

/* --draft-file: the text tokenized (as text, specials off) into c->ref. */
static int read_ref(Chat *c) {
    char err[4400];
    size_t len = 0, n = 0;
    char *txt = k3_slurp(c->draft_file, SIZE_MAX, &len, err, sizeof err);
    if (!txt) { fprintf(stderr, "k3: --draft-file %s\n", err); return K3_ERR_USAGE; }
    int32_t *ids = tok_encode(c->tok, txt, len, 0, &n);
    free(txt);
    c->ref = malloc(sizeof(int) * (n ? n : 1));
    if (!ids || !c->ref) { free(ids); fprintf(stderr, "k3: out of memory\n");
                              return K3_ERR_RUNTIME; }
    for (size_t i = 0; i < n; i++) c->ref[i] = ids[i];
    c->n_ref = (int)n;
    free(ids);
    return 0;
}

static int setup(Chat *c, const char *system) {
    char err[4096];
    if (k3_kernels_select(c->kernels, err, sizeof err)) {
        fprintf(stderr, "k3: %s\n", err);
        return K3_ERR_USAGE;
    }
    if (c->threads) k3_threads_set(c->threads);
    c->tok = tok_load(c->tok_dir, err, sizeof err);
    if (!c->tok) { fprintf(stderr, "k3: %s\n", err); return K3_ERR_USAGE; }
    if (xtml_ids(c->tok, &c->ids, err, sizeof err)) {
        fprintf(stderr, "k3: %s/%s\n", c->tok_dir, err);
        return K3_ERR_USAGE;
    }
    int rr = c->draft_file ? read_ref(c) : 0;
    if (rr) return rr;
    if (c->history) {
        int rc = chat_hist_load(c->history, 1, &c->log, err, sizeof err);
        if (!rc) rc = chat_hist_check_ids(&c->log, tok_vocab_size(c->tok), c->history, err,
                                          sizeof err);
        if (rc) {
            fprintf(stderr, "k3: %s\nk3: the file was left untouched; "
                    "fix it or pass another --history FILE\n", err);
            return rc;
        }
        n_loaded = c->log.n;
    }
    if (system) {
        int has = c->log.n && !strcmp(c->log.v[0].role, "system");
        if (has && strcmp(c->log.v[0].content, system)) {
            fprintf(stderr, "k3: --system differs from the system message stored in %s (line 1); "
                    "drop --system to continue that conversation, "
                    "or use another --history file\n", c->history);
            return K3_ERR_USAGE;
        }
        if (!has && c->log.n) {
            fprintf(stderr, "k3: %s has no system message, so --system cannot apply to it; "
                    "drop --system or use another --history file\n", c->history);
            return K3_ERR_USAGE;
        }
        if (!has && chat_log_add(&c->log, "system", system, NULL)) {
            fprintf(stderr, "k3: out of memory\n");
            return K3_ERR_RUNTIME;
        }
    }
    double t0 = k3_now();
    /* the same engine, plan and setup as batch mode; the plan is printed with --verbose */
    K3EngineOpts eo = { c->model_dir, c->config, c->kernels, c->threads, memf };
    int ctx = c->ctx;
    if (!ctx) {                              /* the model's trained context, read from config */
        K3Config cfg;
        char cpath[4200];
        if (!c->config) snprintf(cpath, sizeof cpath, "%s/config.json", c->model_dir);
        int rc = k3_config_load(c->config ? c->config : cpath, &cfg, err, sizeof err);
        if (rc) { fprintf(stderr, "k3: %s\n", err); return rc; }
        ctx = cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 32768;
    }
    const int pctx = ctx_given || ctx < 4096 ? ctx : 4096;
    /* each turn's new tokens in chunks the plan sizes: the largest that fits, up to ctx */
    eo.mem.ctx = pctx; eo.mem.chunk = chunk_given ? chunk_given : pctx;
    eo.mem.chunk_auto = !chunk_given;
    eo.mem.logits_rows = 1;
    if (c->spec) {                             /* a verify pass: k+1 positions, every row */
        const int k = c->draft_dir ? c->draft_block : c->spec_k;
        if (eo.mem.chunk < k + 1) eo.mem.chunk = k + 1;
        eo.mem.logits_rows = k + 1;
        eo.mem.undo_T = k + 1;
    }
    /* --draft: its share in the plan (a bad folder: zero here, refused by name at open) */
    if (c->draft_dir && k3_dspark_plan_file(c->draft_dir, &eo.mem.draft, err, sizeof err))
        memset(&eo.mem.draft, 0, sizeof eo.mem.draft);
    /* a checkpoint with a vision tower: images may come (/image); the tower gets what the
     * text model leaves, up to the largest image (no vision_config: nothing planned) */
    if (k3_comm_size() == 1 && !k3_vision_mem_plan(c->model_dir, K3_VISION_MAX_PATCHES,
                                                   K3_VISION_MAX_PATCHES, 0, &eo.mem.vision,
                                                   err, sizeof err))
        eo.mem.vision.fill = 1;
    else memset(&eo.mem.vision, 0, sizeof eo.mem.vision);
    eo.mem.quiet = !memf.verbose;
    int rc = k3_engine_open(&c->eng, &eo, err, sizeof err);
    if (rc) { fprintf(stderr, "k3: %s\n", err); return rc; }
    c->ctx = ctx;
    int V = c->eng.m.cfg.vocab_size;
    if (tok_vocab_size(c->tok) > V) {
        fprintf(stderr, "k3: the tokenizer in %s has %d ids but the model only %d; use the "
                "checkpoint's own tokenizer\n", c->tok_dir, tok_vocab_size(c->tok), V);
        return K3_ERR_USAGE;
    }
    const int mpe = c->eng.m.cfg.max_position_embeddings;
    if (ctx_given && mpe > 0 && c->ctx > mpe)
        fprintf(stderr, "k3: warning: --ctx %d is past the trained context "
                "(max_position_embeddings %d in %s); positions past %d are untested\n",
                c->ctx, mpe, c->eng.m.cfg.source, mpe);
    if (pctx < c->ctx && memf.verbose)
        fprintf(stderr, "k3: note: the memory plan covers %d positions of MLA cache; --ctx N "
                "plans for more\n", pctx);
    k3_spec_init(&c->spec_st, &c->eng.m, c->ref, c->n_ref, c->spec_k);
    /* marks need memory */
    const K3SchedOpts so = { 1, K3_STATES_RESIDENT, NULL, pctx, 0 };
    if ((rc = k3_sched_open(&c->sch, &c->eng, &so, err, sizeof err))) {
        fprintf(stderr, "k3: %s\n", err);
        return rc;
    }
    k3_sched_mirror(c->sch);                   /* over N ranks: only this one reads input */
    if (k3_sched_follower(c->sch)) {           /* chat_main follows rank 0 */
        if (c->draft_dir) {                    /* and replays its draft calls */
            rc = k3_draft_open(&c->draft, c->draft_dir, &c->eng, c->draft_block,
                               c->draft_fixed, c->spec_st.step_cost, 1, err, sizeof err);
            if (rc) { fprintf(stderr, "k3: --draft %s\n", err); return rc; }
            k3_draft_follow(c->draft, NULL);   /* the slot's state: rank 0's first record */
            k3_sched_on_user(c->sch, chat_draft_replay, c);
        }
        return 0;
    }
    c->q = k3_sched_join(c->sch, c);
    c->st = c->q ? c->q->st : NULL;
    c->logits = c->eng.rs.logits;              /* one sequence: its rows start there */
    if (!c->st) { fprintf(stderr, "k3: out of memory\n"); return K3_ERR_RUNTIME; }
    if (c->draft_dir) {                        /* its tap sees every forward from here */
        rc = k3_draft_open(&c->draft, c->draft_dir, &c->eng, c->draft_block, c->draft_fixed,
                           c->spec_st.step_cost, 0, err, sizeof err);
        if (rc) { fprintf(stderr, "k3: --draft %s\n", err); return rc; }
        k3_draft_follow(c->draft, c->st);
        chat_draft_send(c, CHAT_DR_FOLLOW, 0, 0, 0);   /* over N ranks: theirs too */
    }
    fprintf(stderr, "k3: chat on %s: %d layers, vocab %d, context %d; kernels %s; "
            "opened in %.2f s\n", c->model_dir, c->eng.m.cfg.num_hidden_layers, V, c->ctx,
            k3_kernels_name(), k3_now() - t0);
    return state_resume(c);
}

int chat_main(int argc, char **argv) {
    static Chat chat;
    Chat *c = &chat;
    const char *system = NULL;
    int seed_set = 0;
    int rc = parse_flags(argc, argv, c, &system, &seed_set);
    if (!rc) rc = setup(c, system);
    if (!rc && k3_sched_follower(c->sch)) rc = k3_sched_follow(c->sch);   /* rank > 0 */
    if (rc || k3_sched_follower(c->sch)) goto done;
    if (!seed_set) c->seed = k3_draw_seed();
    if (sampler_is_greedy(&c->sp)) fprintf(stderr, "k3: greedy decoding\n");
    else fprintf(stderr, "k3: sampling: temperature %g, top-p %g, top-k %d, min-p %g, seed %llu "
                 "(replay with --seed %llu)\n",
                 c->sp.temperature, c->sp.top_p, c->sp.top_k, c->sp.min_p,
                 (unsigned long long)c->seed, (unsigned long long)c->seed);
    if (n_loaded)
        fprintf(stderr, "k3: %d messages from %s; the first turn prefills them\n", n_loaded,
                c->history);
    tty_in = isatty(0);
    le_on = tty_in && le_init();
    if (tty_in) fprintf(stderr, "k3: type /help for commands, /exit or Ctrl-D to leave\n");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    Lines hist = { 0 };
    int ctrlc = 0;
    for (;;) {
        char *text = NULL;
        chat_interrupted = 0;
        int r = read_message(&text);
        if (r < 0) {
            if (!tty_in || ++ctrlc >= 2) { if (tty_in) fputc('\n', stdout); break; }
            printf("\n(Ctrl-C again to exit; /exit or Ctrl-D also leave)\n");
            continue;
        }
        if (r == 0) { if (tty_in) fputc('\n', stdout); break; }
        ctrlc = 0;
        char *clean = utf8_clean(text);
        if (clean) { free(text); text = clean; }
        if (is_blank(text)) { free(text); continue; }
        if (hist.n == hist.cap) {
            int nc = hist.cap ? hist.cap * 2 : 32;
            char **nv = realloc(hist.v, sizeof *nv * (size_t)nc);
            if (nv) { hist.v = nv; hist.cap = nc; }
        }
        if (hist.n < hist.cap) hist.v[hist.n++] = strdup(text);
        if (text[0] == '/' && text[1] != '/') {
            int quit = command(c, text, &hist);
            free(text);
            if (quit) break;
            continue;
        }
        int t = chat_turn(c, text[0] == '/' ? text + 1 : text);
        free(text);
        if (t < 0) { rc = K3_ERR_RUNTIME; break; }
        if (t == 0) save_history(c);
    }
    if (!rc) state_save_at_exit(c);
    for (int i = 0; i < hist.n; i++) free(hist.v[i]);
    free(hist.v);
    const long failures = k3_engine_expert_failures(&c->eng);
    if (!rc && failures) {
        fprintf(stderr, "k3: RUN INVALID: %ld routed expert load(s) failed; the replies are "
                "unsound\n", failures);
        rc = K3_ERR_EXPERT;
    }
    if ((!rc || rc == K3_ERR_EXPERT) && unsaved[0]) {   /* last: the line a script sees */
        fprintf(stderr, "k3: exit 1: %s\n", unsaved);
        rc = K3_ERR_RUNTIME;
    }
done:
    if (c->sch) k3_sched_end(c->sch, rc);     /* the other ranks end with this code */
    k3_sched_close(c->sch);                    /* and the state of its slot */
    k3_draft_close(c->draft);                  /* (its tap out of the engine) */
    for (int i = 0; i < c->n_pend; i++) k3_image_in_free(&c->pend[i]);
    free(c->pend); free(c->span);
    k3_image_ctx_close(&c->ictx);
    k3_engine_close(&c->eng);
    free(c->fed); free(c->ref); free(c->seen); free(c->dbuf);
    k3_cons_free(&c->cs); gr_free(c->gr); free(c->mask);
    chat_log_free(&c->log);
    tok_free(c->tok);
    return rc;
}
