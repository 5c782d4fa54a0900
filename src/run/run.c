/* run.c — k3 MODEL_DIR (--ids | --prompt | --prompt-file): one prompt completed, the
 * generated ids or text streamed to stdout, the plan, progress and the report on stderr
 * (and --out JSON). The engine (k3.h) knows nothing of flags; this file knows nothing of
 * the math. */
#include "run_priv.h"
#include "engine.h"
#include "config.h"
#include "cli.h"
#include "spec.h"
#include "sampler.h"
#include "json.h"
#include "constrain.h"
#include "outfile.h"
#include "roofline.h"
#include "draft_loop.h"
#include "image_in.h"
#include "logprob.h"
#include "tok.h"
#include "util.h"
#include "xtml.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every flag parse_args knows (--chat, --help, --version, --list-presets are taken by
 * main first, listed for the suggestions). */
static const K3Flag BATCH_FLAGS[] = {
    { "--ids", 1 }, { "--prompt", 1 }, { "--prompt-file", 1 }, { "--tok", 1 }, { "--out", 1 },
    { "--dump-logits", 1 }, { "--gen", 1 }, { "--recompute", 0 }, { "--incremental", 0 },
    { "--quiet", 0 }, { "--reprobe", 0 }, { "--chat", 0 }, { "--help", 0 }, { "--version", 0 },
    { "--list-presets", 0 }, { "--batch", 1 }, K3_FLAGS_SPEC,
    { "--draft-ids", 1 }, { "--draft-file", 1 }, { "--stop", 1 }, { "--ignore-eos", 0 },
    { "--draft", 1 }, { "--draft-block", 1 }, { "--dump-draft", 1 },
    { "--system-file", 1 }, { "--image", 1 }, { "--logprobs", 1 }, { "--json", 0 },
    { "--json-schema", 1 }, { "--grammar", 1 }, { "--grammar-file", 1 }, K3_FLAGS_ENGINE,
};
#define N_BATCH_FLAGS (int)(sizeof BATCH_FLAGS / sizeof BATCH_FLAGS[0])

static int usage_error(const char *fmt, const char *arg) {
    return k3_usage_error("k3 --help", fmt, arg);
}

static int parse_args(int argc, char **argv, Opts *o) {
    memset(o, 0, sizeof *o);
    o->gen = 16; o->spec = -1; o->logprobs = -1;
    k3_engine_flags_init(&o->ef);
    o->tok_dir = k3_tok_env();
    char xerr[320];
    if (k3_args_expand(argc, argv, BATCH_FLAGS, N_BATCH_FLAGS, &argc, &argv, xerr, sizeof xerr))
        return usage_error("%s", xerr);                       /* --flag=value, once */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL() do { if (!v) return usage_error("%s needs a value", a); i++; } while (0)
        char serr[256];
        int er = k3_engine_parse_flag(argc, argv, &i, &o->ef, serr, sizeof serr);
        if (!er) er = k3_spec_parse_flag(argc, argv, &i, &o->spec, &o->spec_k, serr, sizeof serr);
        if (er < 0) return usage_error("%s", serr);
        if (er) continue;
        if (!strcmp(a, "--ids")) { VAL(); o->ids = v; }
        else if (!strcmp(a, "--prompt")) { VAL(); o->prompt = v; }
        else if (!strcmp(a, "--prompt-file")) { VAL(); o->prompt_file = v; }
        else if (!strcmp(a, "--tok")) { VAL(); o->tok_dir = v; o->tok_given = 1; }
        else if (!strcmp(a, "--out")) { VAL(); o->out = v; }
        else if (!strcmp(a, "--dump-logits")) { VAL(); o->dump_logits = v; }
        else if (!strcmp(a, "--gen")) {
            VAL(); if (k3_parse_int(a, v, 0, &o->gen)) return K3_ERR_USAGE;
        } else if (!strcmp(a, "--recompute")) o->recompute = 1;
        else if (!strcmp(a, "--incremental")) o->recompute = 0;
        else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (!strcmp(a, "--reprobe")) o->reprobe = 1;
        else if (!strcmp(a, "--draft-ids")) { VAL(); o->draft_ids = v; }
        else if (!strcmp(a, "--draft-file")) { VAL(); o->draft_file = v; }
        else if (!strcmp(a, "--draft")) { VAL(); o->draft_dir = v; }
        else if (!strcmp(a, "--dump-draft")) { VAL(); o->dump_draft = v; }
        else if (!strcmp(a, "--draft-block")) {
            VAL();
            if (k3_parse_int(a, v, 1, &o->draft_block)) return K3_ERR_USAGE;
            o->draft_fixed = 1;
            if (o->draft_block > K3_DSPARK_MAX_N)
                return usage_error("--draft-block takes 1..7 rows (DSpark's block), got %s", v);
        }
        else if (!strcmp(a, "--stop")) {
            VAL();
            if (!*v) return usage_error("%s", "--stop needs a non-empty string");
            if (o->n_stops == 16) return usage_error("%s", "at most 16 --stop strings");
            o->stops[o->n_stops++] = v;
        } else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "--system-file")) { VAL(); o->system_file = v; }
        else if (!strcmp(a, "--image")) {
            VAL();
            if (o->n_images == K3_RUN_IMAGES) return usage_error("%s", "at most 16 --image files");
            o->images[o->n_images++] = v;
        }
        else if (!strcmp(a, "--logprobs")) {
            VAL();
            if (k3_parse_int(a, v, 0, &o->logprobs)) return K3_ERR_USAGE;
            if (o->logprobs > K3_MAX_TOP_LOGPROBS)
                return usage_error("--logprobs takes 0..20 alternatives, got %s", v);
        } else if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--json-schema")) { VAL(); o->json_schema = v; }
        else if (!strcmp(a, "--grammar")) { VAL(); o->grammar = v; }
        else if (!strcmp(a, "--grammar-file")) { VAL(); o->grammar_file = v; }
        else if (a[0] == '-' && a[1]) {
            k3_unknown_option(a, BATCH_FLAGS, N_BATCH_FLAGS, xerr, sizeof xerr);
            return usage_error("%s", xerr);
        }
        else if (!o->model_dir) o->model_dir = a;
        else return usage_error("unexpected argument '%s' (MODEL_DIR was already given)", a);
#undef VAL
    }
    if (!o->model_dir) return usage_error("%s", "missing MODEL_DIR");
    int n_in = !!o->ids + !!o->prompt + !!o->prompt_file;
    if (!n_in)                                  /* with --tok, main.c starts the chat */
        return usage_error("%s", "no prompt: give --prompt TEXT (-p), --prompt-file PATH (-f) "
                           "or --ids LIST; or --tok DIR to chat");
    if (n_in != 1) return usage_error("%s", "give exactly one of --ids, --prompt, --prompt-file");
    char serr[256];
    if (sampler_check(&o->ef.sp, serr, sizeof serr)) return usage_error("%s", serr);
    if (o->spec == 1 && o->recompute) return usage_error("%s", "--spec needs --incremental");
    if (!o->spec && (o->draft_ids || o->draft_file))
        return usage_error("%s", "--draft-ids and --draft-file draft for --spec: drop --no-spec");
    const char *nospec = o->logprobs >= 0 ? "--logprobs" : NULL;   /* each step's own row */
    if (o->draft_dir && (o->draft_ids || o->draft_file || o->recompute || !o->spec))
        return usage_error("%s", "--draft verifies its blocks as --spec does: drop --draft-ids, "
                           "--draft-file, --recompute and --no-spec");
    if ((o->draft_block || o->dump_draft) && !o->draft_dir)
        return usage_error("%s", "--draft-block and --dump-draft are about a --draft DIR");
    if (!o->draft_block) o->draft_block = K3_DSPARK_MAX_N;
    if (nospec && (o->spec == 1 || o->draft_ids || o->draft_file || o->draft_dir))
        return usage_error("%s does not speculate: drop --spec and the drafts", nospec);
    if (nospec) o->spec = 0;
    const int gram = !!o->grammar + !!o->grammar_file;
    if (gram + (o->json || o->json_schema) > 1)
        return usage_error("%s", "give one of --json, --json-schema, --grammar, --grammar-file "
                           "(the output follows one constraint)");
    if ((o->json || o->json_schema || gram) && (!o->tok_dir || o->ignore_eos))
        return usage_error("%s", "--json, --json-schema and --grammar need --tok (the tokens' "
                           "bytes) and the end token (no --ignore-eos)");
    if (o->spec < 0) o->spec = !o->recompute;       /* speculation is the default */
    if (o->draft_file && !o->tok_dir)
        return usage_error("%s", "--draft-file needs a tokenizer: pass --tok DIR");
    if (o->spec && !o->spec_k) o->spec_k = 8;
    if (o->system_file && o->ids)
        return usage_error("%s", "--system-file renders the chat template around the text of "
                           "--prompt or --prompt-file; it does not apply to --ids");
    if (o->n_images && (o->ids || !o->tok_dir))
        return usage_error("%s", "--image goes with --prompt or --prompt-file and a tokenizer "
                           "(--tok DIR): the images and the text are rendered in the chat "
                           "template");
    if (o->n_stops && !o->tok_dir)
        return usage_error("%s", "--stop matches the generated text: pass --tok DIR");
    if (!o->ids && !o->tok_dir)
        return usage_error("%s", "--prompt/--prompt-file need a tokenizer: "
                           "pass --tok DIR or set K3_TOK_FILES");
    return 0;
}

/* ---- output ---- */

typedef struct {
    FILE *f; int first;
    Tok *tok; TokStream ts;
    const Opts *o;
    char *hold; size_t nhold, cap;   /* text that may begin a --stop string: not shown yet */
    int stopped;                     /* 1 + the index of the --stop string that matched */
} Emitter;

/* Text to stdout, held back while it could be the start of a --stop string; a match
 * ends the text before it. -1: out of memory. */
static int out_text(Emitter *e, const char *b, size_t n) {
    if (!e->o->n_stops) { fwrite(b, 1, n, e->f); return 0; }
    if (e->stopped) return 0;
    if (e->nhold + n + 1 > e->cap) {
        size_t nc = (e->nhold + n + 1) * 2;
        char *h = realloc(e->hold, nc);
        if (!h) return -1;
        e->hold = h; e->cap = nc;
    }
    memcpy(e->hold + e->nhold, b, n);
    e->nhold += n;
    size_t cut = e->nhold, keep = 0;
    for (int i = 0; i < e->o->n_stops; i++) {
        const char *s = e->o->stops[i];
        const size_t ls = strlen(s);
        for (size_t p = 0; p + ls <= e->nhold && p < cut; p++)
            if (!memcmp(e->hold + p, s, ls)) { cut = p; e->stopped = i + 1; break; }
        for (size_t k = ls - 1; k > keep; k--)      /* a suffix that begins s */
            if (k <= e->nhold && !memcmp(e->hold + e->nhold - k, s, k)) { keep = k; break; }
    }
    if (e->stopped) { fwrite(e->hold, 1, cut, e->f); e->nhold = 0; return 0; }
    fwrite(e->hold, 1, e->nhold - keep, e->f);
    memmove(e->hold, e->hold + e->nhold - keep, keep);
    e->nhold = keep;
    return 0;
}

static int emit(Emitter *e, int id) {
    int rc = 0;
    if (e->tok) {
        const char *b; size_t n;
        if (tok_stream_put(&e->ts, e->tok, id, &b, &n) == 0) rc = out_text(e, b, n);
    } else {
        fprintf(e->f, e->first ? "%d" : ",%d", id);
    }
    e->first = 0;
    fflush(e->f);
    return rc;
}

static void emit_end(Emitter *e) {
    if (e->tok) {
        const char *b; size_t n;
        tok_stream_flush(&e->ts, &b, &n);
        if (out_text(e, b, n)) fprintf(stderr, "k3: out of memory\n");
        if (!e->stopped && e->nhold) fwrite(e->hold, 1, e->nhold, e->f);   /* no match: all */
    }
    fputc('\n', e->f);
    fflush(e->f);
}

static void json_ids(FILE *f, const char *key, const int *ids, int n) {
    fprintf(f, "  \"%s\": [", key);
    for (int i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", ids[i]);
    fprintf(f, "],\n");
}

typedef struct {
    const int *prompt; int n_prompt;
    const int *gen; int n_gen;
    double t_prefill, t_decode;
    uint64_t peak_rss;
    long expert_failures;
    const K3Spec *spec;                        /* NULL without --spec */
    const K3Logprob *lp; int top;              /* --logprobs: one per generated token */
    int interrupted;                           /* Ctrl-C stopped the prefill or generation */
    const char *stop;                          /* the --stop string that ended it, or NULL */
    const char *why;                           /* eos, length, stop_string, context, interrupted */
    int sampled; uint64_t seed;                /* the sampler's seed (drawn without --seed) */
    const double *ranks; int n_ranks;          /* over N ranks: k3_ranks_gather's (else 0) */
    const K3DraftStats *draft;                 /* --draft DIR, else NULL */
    const K3Roofline *roof;                    /* against the machine, else NULL */
} Report;

/* Ctrl-C: the generation stops after the token in hand and the report is still written;
 * a second Ctrl-C kills (k3_sigint_once). */
static volatile sig_atomic_t g_interrupted;
static void on_interrupt(int sig) { (void)sig; g_interrupted = 1; }

static int write_json(const char *path, const Opts *o, const K3Engine *e, const Report *r) {
    char err[4400] = "out of memory";
    K3Out out;
    FILE *f = k3_out_open(&out, path, 0, 0666, err, sizeof err) ? NULL : k3_out_stdio(&out);
    if (!f) {
        if (out.name) k3_out_abort(&out);
        fprintf(stderr, "k3: --out %s\n", err);
        return -1;
    }
    double spt = r->n_gen > 1 ? r->t_decode / (r->n_gen - 1) : 0.0;
    char *md = json_quote(o->model_dir, strlen(o->model_dir));
    fprintf(f, "{\n  \"version\": \"%s\",\n  \"model_dir\": %s,\n", K3_VERSION,
            md ? md : "null");
    free(md);
    json_ids(f, "prompt_ids", r->prompt, r->n_prompt);
    json_ids(f, "generated_ids", r->gen, r->n_gen);
    if (r->lp) {                               /* %.9g: reads back as the same float */
        fprintf(f, "  \"logprobs\": [");
        for (int i = 0; i < r->n_gen; i++) {
            fprintf(f, "%s{\"id\": %d, \"logprob\": %.9g, \"top\": [", i ? ", " : "",
                    r->lp[i].id, (double)r->lp[i].logprob);
            for (int k = 0; k < r->lp[i].n_top; k++)
                fprintf(f, "%s[%d, %.9g]", k ? ", " : "", r->lp[i].top[k],
                        (double)r->lp[i].top_logprob[k]);
            fprintf(f, "]}");
        }
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"n_prompt\": %d,\n  \"n_generated\": %d,\n", r->n_prompt, r->n_gen);
    fprintf(f, "  \"mode\": \"%s\",\n  \"kernels\": \"%s\",\n  \"threads\": %d,\n",
            o->recompute ? "recompute" : "incremental", k3_kernels_name(), k3_threads());
    fprintf(f, "  \"seconds_prefill\": %.6f,\n  \"seconds_decode\": %.6f,\n", r->t_prefill,
            r->t_decode);
    fprintf(f, "  \"seconds_per_token\": %.6f,\n  \"tokens_per_second\": %.6f,\n", spt,
            spt > 0 ? 1.0 / spt : 0.0);
    fprintf(f, "  \"prefill_tokens_per_second\": %.6f,\n",
            r->t_prefill > 0 ? r->n_prompt / r->t_prefill : 0.0);
    fprintf(f, "  \"expert_failures\": %ld,\n  \"valid\": %s,\n", r->expert_failures,
            r->expert_failures ? "false" : "true");
    fprintf(f, "  \"interrupted\": %s,\n", r->interrupted ? "true" : "false");
    char *sq = r->stop ? json_quote(r->stop, strlen(r->stop)) : NULL;
    fprintf(f, "  \"stop\": \"%s\",\n  \"stop_string\": %s,\n", r->why, sq ? sq : "null");
    free(sq);
    if (r->sampled) fprintf(f, "  \"seed\": %llu,\n", (unsigned long long)r->seed);
    if (r->spec)
        fprintf(f, "  \"spec_drafted\": %ld,\n  \"spec_accepted\": %ld,\n  \"spec_passes\": %ld,\n",
                r->spec->drafted, r->spec->accepted, r->spec->passes);
    if (r->draft)
        fprintf(f, "  \"draft_blocks\": %ld,\n  \"draft_proposed\": %ld,\n  \"draft_accepted\": "
                "%ld,\n  \"draft_rows_verified\": %ld,\n  \"draft_seconds\": %.6f,\n",
                r->draft->blocks, r->draft->proposed, r->draft->accepted, r->draft->rows,
                r->draft->seconds);
    k3_ranks_json(r->ranks, r->n_ranks, r->n_prompt + r->n_gen, r->n_gen - 1, f);
    k3_mem_json(e->mem, f, r->t_prefill + r->t_decode);
    if (r->roof) k3_roofline_json(r->roof, f);
    fprintf(f, "  \"vocab_size\": %d,\n  \"peak_rss_bytes\": %llu\n}\n", e->m.cfg.vocab_size,
            (unsigned long long)r->peak_rss);
    if (k3_out_commit(&out, err, sizeof err)) {
        fprintf(stderr, "k3: --out %s\n", err);
        return -1;
    }
    return 0;
}

/* ---- batch completion ---- */

/* --draft-ids LIST or --draft-file PATH (tokenized): the reference drafts come from. */
static int read_draft(const Opts *o, const Tok *tok, int **ref, int *n_ref) {
    char err[4096];
    if (o->draft_ids && k3_parse_ids(o->draft_ids, ref, n_ref, err, sizeof err)) {
        fprintf(stderr, "k3: --draft-ids: %s\n", err);
        return K3_ERR_USAGE;
    }
    if (!o->draft_file) return 0;
    size_t len = 0, n = 0;
    char *text = k3_slurp(o->draft_file, SIZE_MAX, &len, err, sizeof err);
    if (!text) { fprintf(stderr, "k3: --draft-file %s\n", err); return K3_ERR_USAGE; }
    int32_t *ids = tok_encode(tok, text, len, 0, &n);
    free(text);
    int *v = ids ? realloc(*ref, sizeof(int) * ((size_t)*n_ref + n + 1)) : NULL;
    if (!v) { free(ids); fprintf(stderr, "k3: out of memory\n"); return K3_ERR_RUNTIME; }
    for (size_t i = 0; i < n; i++) v[*n_ref + i] = ids[i];
    *ref = v; *n_ref += (int)n;
    free(ids);
    return 0;
}

/* Output paths must be writable before a long run (nothing is truncated yet). */
static int check_outputs(const Opts *o) {
    const char *flag[4] = { "--out", "--dump-logits", "--dump-cache-trace", "--dump-draft" };
    const char *path[4] = { o->out, o->dump_logits, o->ef.mem.trace_dir, o->dump_draft };
    char err[8400];
    for (int i = 0; i < 4; i++)
        if (path[i] && k3_check_output(flag[i], path[i], i == 2, err, sizeof err)) {
            fprintf(stderr, "k3: %s\n", err);
            return K3_ERR_USAGE;
        }
    return 0;
}

/* prompt + gen past the trained context (max_position_embeddings) is refused unless --ctx
 * asks for more; then a warning. A config that does not load is left to the engine. */
static int check_context(const Opts *o, int n_prompt) {
    K3Config cfg;
    char err[4096], path[4200];
    snprintf(path, sizeof path, "%s/config.json", o->model_dir);
    const char *cp = o->ef.config ? o->ef.config : path;
    if (k3_config_load(cp, &cfg, err, sizeof err)) return 0;
    const int mpe = cfg.max_position_embeddings;
    const long need = (long)n_prompt + o->gen;
    if (o->ef.mem.ctx > 0 && n_prompt > o->ef.mem.ctx) {
        fprintf(stderr, "k3: the prompt is %d tokens, past --ctx %d (the context limit: prompt "
                "+ generated tokens); shorten the prompt or pass --ctx %d or more\n", n_prompt,
                o->ef.mem.ctx, n_prompt + o->gen);
        return K3_ERR_USAGE;
    }
    if (mpe <= 0) return 0;
    if (o->ef.mem.ctx > mpe) {
        fprintf(stderr, "k3: warning: --ctx %d is past the trained context "
                "(max_position_embeddings %d in %s); positions past %d are untested\n",
                o->ef.mem.ctx, mpe, cp, mpe);
        return 0;
    }
    if (need <= mpe || (o->ef.mem.ctx > 0 && o->ef.mem.ctx <= mpe)) return 0;
    fprintf(stderr, "k3: the prompt (%d tokens) + --gen %d = %ld positions is past the trained "
            "context, max_position_embeddings %d in %s; shorten the prompt or --gen, or pass "
            "--ctx %ld to run past it anyway\n", n_prompt, o->gen, need, mpe, cp, need);
    return K3_ERR_USAGE;
}

/* The engine for this run: the plan covers the prompt, the generation and the chunk. */
static int open_engine(const Opts *o, int n_prompt, const RunImages *ri, K3Engine *e,
                       char *err, size_t errlen) {
    /* no --prefill-chunk: the plan sizes the chunk (the whole prompt when it fits) */
    const int want = o->recompute ? n_prompt + o->gen : n_prompt;
    const int pc = o->ef.chunk > 0 ? o->ef.chunk : (want > 0 ? want : 1);
    K3EngineOpts eo = k3_engine_flags_opts(&o->ef, o->model_dir);
    eo.mem.chunk_auto = o->ef.chunk <= 0;
    eo.mem.ctx = o->ef.mem.ctx > 0 ? o->ef.mem.ctx : n_prompt + o->gen;
    eo.mem.chunk = o->recompute ? pc : (n_prompt < pc ? n_prompt : pc);
    eo.mem.logits_rows = o->dump_logits ? n_prompt : 1;
    if (o->spec) {                             /* a verify pass: k+1 positions, every row */
        if (eo.mem.chunk < o->spec_k + 1) eo.mem.chunk = o->spec_k + 1;
        if (eo.mem.logits_rows < o->spec_k + 1) eo.mem.logits_rows = o->spec_k + 1;
        eo.mem.undo_T = o->spec_k + 1;
    }
    /* --draft: its share in the plan (a bad folder: zero here, refused by name at open) */
    if (o->draft_dir && k3_dspark_plan_file(o->draft_dir, &eo.mem.draft, err, errlen))
        memset(&eo.mem.draft, 0, sizeof eo.mem.draft);
    /* --image: the tower and the largest image in the plan (no tower: said at its open) */
    long most = 0, all = 0;
    for (int i = 0; i < ri->n; i++) {
        all += ri->im[i].plan.patches;
        if (ri->im[i].plan.patches > most) most = ri->im[i].plan.patches;
    }
    char verr[512];
    if (ri->n && k3_vision_mem_plan(o->model_dir, most, all, 1, &eo.mem.vision, verr, sizeof verr))
        memset(&eo.mem.vision, 0, sizeof eo.mem.vision);
    eo.mem.quiet = o->quiet;
    eo.mem.brief = 1;
    return k3_engine_open(e, &eo, err, errlen);
}

static int run_batch(const Opts *o) {
    char err[4096];
    Tok *tok = NULL;
    int *prompt = NULL, n_prompt = 0, rc = 0, *seq = NULL, *ref = NULL, n_ref = 0;
    K3State *st = NULL;
    K3DraftLoop *rd = NULL;                     /* --draft DIR */
    RunImages ri;                               /* --image */
    K3ImageCtx ictx = { o->model_dir, 0, o->quiet, NULL };
    memset(&ri, 0, sizeof ri);
    K3Logprob *lp = NULL;                       /* --logprobs */
    JgSchema *jg = NULL;                        /* --json, --json-schema */
    GrGrammar *gr = NULL;                       /* --grammar, --grammar-file */
    K3Cons cs = { 0 };
    float *mask = NULL;
    K3Engine e;
    memset(&e, 0, sizeof e);            /* closing an engine that never opened is a no-op */
    if (o->tok_dir && (o->prompt || o->prompt_file || o->tok_given || o->draft_file)) {
        tok = tok_load(o->tok_dir, err, sizeof err);
        if (!tok) { fprintf(stderr, "k3: %s\n", err); return K3_ERR_USAGE; }
    }
    if ((rc = run_read_prompt(o, tok, &ri, &prompt, &n_prompt)) || (rc = check_outputs(o)) ||
        (rc = check_context(o, n_prompt)) || (rc = read_draft(o, tok, &ref, &n_ref)))
        goto done;

    double t0 = k3_now();
    rc = open_engine(o, n_prompt, &ri, &e, err, sizeof err);
    if (rc) { fprintf(stderr, "k3: %s\n", err); goto done; }
    const K3Model *m = &e.m;
    const int V = m->cfg.vocab_size;
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= V) {
            fprintf(stderr, "k3: prompt id %d is outside the vocabulary (vocab_size %d)\n",
                    prompt[i], V);
            rc = K3_ERR_USAGE; goto done;
        }
    if (sampler_check_vocab(&o->ef.sp, V, "--logit-bias", err, sizeof err)) {
        fprintf(stderr, "k3: %s (vocab_size of this model)\n", err);
        rc = K3_ERR_USAGE; goto done;
    }
    for (int i = 0; i < n_ref; i++)
        if (ref[i] < 0 || ref[i] >= V) {
            fprintf(stderr, "k3: --draft-ids id %d is outside the vocabulary (vocab_size %d)\n",
                    ref[i], V);
            rc = K3_ERR_USAGE; goto done;
        }
    K3Spec cost;                               /* one more verified position's cost */
    k3_spec_init(&cost, m, NULL, 0, 0);
    if (o->draft_dir &&
        (rc = k3_draft_open(&rd, o->draft_dir, &e, o->draft_block, o->draft_fixed,
                           cost.step_cost, o->quiet, err, sizeof err))) {
        fprintf(stderr, "k3: --draft %s\n", err);
        goto done;
    }
    if (rd && o->dump_draft && !k3_comm_rank() &&     /* rank 0 writes */
        (rc = k3_draft_dump(rd, o->dump_draft, err, sizeof err))) {
        fprintf(stderr, "k3: %s\n", err);
        goto done;
    }
    if (tok && tok_vocab_size(tok) > V)
        fprintf(stderr, "k3: warning: the tokenizer has %d ids but the model only %d\n",
                tok_vocab_size(tok), V);
    if (!o->quiet)
        fprintf(stderr, "k3: %s: %d layers, hidden %d, %d experts (top %d), vocab %d; kernels %s; "
                "opened in %.2f s\n", o->model_dir, m->cfg.num_hidden_layers, m->cfg.hidden_size,
                m->cfg.num_experts, m->cfg.num_experts_per_token, V, k3_kernels_name(),
                k3_now() - t0);

    int total = n_prompt + o->gen;
    float *logits = e.rs.logits;               /* [dump ? n_prompt : 1][V], planned */
    seq = malloc(sizeof(int) * total);
    st = k3_state_new(m);
    if (!seq || !st) { fprintf(stderr, "k3: out of memory\n"); rc = K3_ERR_RUNTIME; goto done; }
    memcpy(seq, prompt, sizeof(int) * n_prompt);
    for (int i = 0; i < ri.n; i++)             /* each within what the plan admits */
        if ((rc = k3_vision_admit(o->images[i], ri.im[i].w, ri.im[i].h, ri.im[i].plan.patches,
                                  k3_mem_vision_patches(e.mem), err, sizeof err))) {
            fprintf(stderr, "k3: --image %s\n", err);
            goto done;
        }
    if (ri.n) {                                /* the images' rows, then into the prefill */
        ictx.hidden = m->cfg.hidden_size;
        if ((rc = k3_image_embed(&ictx, ri.im, ri.n, ri.span, &ri.embed, err, sizeof err))) {
            fprintf(stderr, "k3: --image %s\n", err);
            goto done;
        }
        st->embed = &ri.embed;
    }

    Emitter em = { stdout, 1, tok, { { 0 }, 0, NULL, 0 }, o, NULL, 0, 0, 0 };
    XtmlIds xi = { -1, -1, -1, -1, -1 };       /* --system-file: the reply ends at eom */
    if ((o->system_file || o->n_images) && xtml_ids(tok, &xi, err, sizeof err)) {
        fprintf(stderr, "k3: --system-file: %s/%s\n", o->tok_dir, err);
        rc = K3_ERR_USAGE; goto done;
    }
    if (tok) tok_stream_init(&em.ts);
    double tp = k3_now(), t_prefill = 0, t_decode = 0;
    int n = n_prompt, n_gen = 0;
    k3_sigint_once(on_interrupt);
    e.interrupt = &g_interrupted;              /* Ctrl-C stops the prefill inside a layer */
    e.prog.quiet = o->quiet;
    rc = k3_prefill(&e, st, seq, n, o->ef.chunk, logits, o->dump_logits != NULL, err, sizeof err);
    e.interrupt = NULL;
    if (rc == K3_INTERRUPTED) {                /* the report still says so (--out) */
        fprintf(stderr, "k3: prefill: %s (Ctrl-C): nothing generated%s\n", err,
                o->out ? "; the --out report is written" : "");
        Report r = { prompt, n_prompt, seq + n_prompt, 0, k3_now() - tp, 0, k3_peak_rss(),
                     k3_engine_expert_failures(&e), NULL, NULL, 0, 1, NULL, "interrupted",
                     0, 0, NULL, 0, NULL, NULL };
        if (o->out && k3_comm_rank() == 0) write_json(o->out, o, &e, &r);
        rc = K3_ERR_RUNTIME; goto done;
    }
    if (rc) { fprintf(stderr, "k3: prefill: %s\n", err); goto done; }
    if (rd && (rc = k3_draft_prefilled(rd, err, sizeof err))) {
        fprintf(stderr, "k3: prefill: %s\n", err); goto done;
    }
    t_prefill = k3_now() - tp;
    k3_mem_step(e.mem, 0, n_prompt, t_prefill, o->ef.mem.verbose && !o->quiet);
    if (o->dump_logits) {
        const size_t nl = (size_t)V * n_prompt;         /* rank 0 writes */
        if (!k3_comm_rank() &&
            k3_out_save(o->dump_logits, logits, sizeof(float) * nl, 0666, err, sizeof err)) {
            fprintf(stderr, "k3: --dump-logits %s\n", err);
            rc = K3_ERR_RUNTIME; goto done;
        }
        memmove(logits, logits + (size_t)(n_prompt - 1) * V, sizeof(float) * V);
    }
    double td = k3_now(), td_step = td;
    const K3CommStats comm_decode = k3_comm_stats();   /* over N ranks: the decode's share */
    Sampler smp;                               /* greedy unless a sampling flag is given */
    const int sampled = o->ef.sampling && !sampler_is_greedy(&o->ef.sp) && o->gen > 0;
    const uint64_t seed = sampled && !o->ef.seed_set ? k3_draw_seed() : o->ef.seed;
    if (sampled && !o->ef.seed_set && !o->quiet)   /* every run differs, and can be replayed */
        fprintf(stderr, "k3: sampling with seed %llu (repeat the run with --seed %llu)\n",
                (unsigned long long)seed, (unsigned long long)seed);
    sampler_init(&smp, &o->ef.sp, seed);
    if (!o->ef.sampling) smp.p.greedy = 1;
    /* --ctx is the context limit: prompt + generated tokens; the run stops there */
    const int ctx_cap = o->ef.mem.ctx > 0 && n_prompt + o->gen > o->ef.mem.ctx;
    const int gen = ctx_cap ? o->ef.mem.ctx - n_prompt : o->gen;
    const char *why = "length";
    K3Spec spec;                               /* --spec: tokens a verify pass already drew */
    int pend[65], n_pend = 0, i_pend = 0, draft[64];
    if (o->spec) k3_spec_init(&spec, m, ref, n_ref, o->spec_k);
    if (o->logprobs >= 0 && o->gen > 0 && !(lp = malloc(sizeof *lp * (size_t)o->gen))) {
        fprintf(stderr, "k3: out of memory\n"); rc = K3_ERR_RUNTIME; goto done;
    }
    const int end_id = xi.eom >= 0 ? xi.eom : m->cfg.eos_token_id;
    if ((o->json || o->json_schema || o->grammar || o->grammar_file) &&
        (rc = run_json_mode(o, &jg, &gr, &mask, V))) goto done;
    if (k3_cons_init(&cs, jg, gr)) { fprintf(stderr, "k3: out of memory\n"); rc = 1; goto done; }
    if (gen == 0 && ctx_cap) why = "context";
    while (n_gen < gen) {
        /* the token at generated position n_gen: drawn by (seed, position) only; in JSON
         * mode from the row with what may not come next masked */
        const float *row = logits;
        if (k3_cons_on(&cs) && i_pend == n_pend) {   /* (verify passes masked their rows) */
            memcpy(mask, logits, sizeof(float) * V);
            if (!k3_cons_mask(&cs, tok, V, end_id, mask)) {
                fprintf(stderr, "\nk3: %s: no token can continue the text\n",
                        k3_cons_name(&cs));
                rc = K3_ERR_RUNTIME; goto done;
            }
            row = mask;
        }
        int next = i_pend < n_pend ? pend[i_pend++] : sampler_sample_at(&smp, row, V, n_gen);
        size_t nb = 0;
        const char *b = k3_cons_on(&cs) && next >= 0 && next != end_id ?
                        tok_token_bytes(tok, next, &nb) : NULL;
        if (next < 0 || (b && k3_cons_put(&cs, (const unsigned char *)b, nb))) {
            if (next < 0) fprintf(stderr, "\nk3: out of memory\n");
            else fprintf(stderr, "\nk3: %s: token %d was drawn outside the mask (its logits "
                         "are -inf or NaN)\n", k3_cons_name(&cs), next);
            rc = K3_ERR_RUNTIME;
            goto done;
        }
        if (lp) k3_logprob_at(logits, V, next, o->logprobs, &lp[n_gen]);
        seq[n++] = next; n_gen++;
        const int end = !o->ignore_eos && (next == m->cfg.eos_token_id || next == xi.eom);
        /* the end token's text (<|end_of_msg|>, eos) is not the reply's: ids still list it */
        if ((!end || !tok) && emit(&em, next)) {
            fprintf(stderr, "\nk3: out of memory\n"); rc = K3_ERR_RUNTIME; goto done;
        }
        if (end) why = "eos";
        else if (em.stopped) why = "stop_string";
        else if (g_interrupted) why = "interrupted";
        else if (n_gen == gen && ctx_cap) why = "context";
        if (end || em.stopped || n_gen == gen || g_interrupted) break;
        if (i_pend < n_pend) continue;         /* an accepted draft: already in the state */
        const int k = rd ? k3_draft_block(rd, next, n_gen, gen - n_gen - 1, draft, err,
                                          sizeof err)
                         : o->spec ? k3_spec_draft(&spec, seq, n, n_prompt, gen - n_gen - 1,
                                                   draft) : 0;
        if (k < 0) { fprintf(stderr, "\nk3: draft: %s\n", err); rc = K3_ERR_RUNTIME; goto done; }
        if (k > 0) {                           /* verify: the last token and k drafts */
            memcpy(seq + n, draft, sizeof(int) * k);   /* room: n + k < n_prompt + gen */
            if (k3_state_mark(m, st, k + 1)) { fprintf(stderr, "k3: out of memory\n");
                                               rc = K3_ERR_RUNTIME; goto done; }
            rc = k3_forward(&e, st, seq + n - 1, k + 1, logits, 1, err, sizeof err);
            /* JSON mode: each row masked as a step-by-step run masks it (the same draws) */
            const int dead = rc || !k3_cons_on(&cs) ? k + 1 :
                             k3_cons_mask_drafts(&cs, tok, V, end_id, logits, draft, k);
            if (!rc) {
                n_pend = k3_spec_accept(&spec, m, st, &smp, n_gen, draft, k, logits, pend);
                i_pend = 0;
                if (n_pend < 0) { snprintf(err, sizeof err, "out of memory"); rc = 1; }
                else if (rd && k3_draft_keep(rd, k, n_pend, err, sizeof err)) rc = 1;
                else if (n_pend > dead) {
                    fprintf(stderr, "\nk3: %s: no token can continue the text\n",
                            k3_cons_name(&cs));
                    rc = K3_ERR_RUNTIME; goto done;
                }
                else if (o->ef.mem.verbose && !o->quiet)
                    fprintf(stderr, "k3: spec pass: %d drafted, %d accepted\n", k, n_pend - 1);
            }
        } else if (o->recompute) {
            k3_state_reset(m, st);
            rc = k3_prefill(&e, st, seq, n, o->ef.chunk, logits, 0, err, sizeof err);
        } else {
            rc = k3_forward(&e, st, seq + n - 1, 1, logits, 0, err, sizeof err);
            if (!rc && rd && k3_draft_keep(rd, 0, 1, err, sizeof err)) rc = 1;
        }
        if (rc) { fprintf(stderr, "\nk3: generation step %d: %s\n", n_gen, err); goto done; }
        double ts = k3_now();
        k3_mem_step(e.mem, n_gen, o->recompute ? n : k + 1, ts - td_step,
                    o->ef.mem.verbose && !o->quiet);
        td_step = ts;
    }
    t_decode = k3_now() - td;
    sampler_free(&smp);
    if (o->gen > 0) emit_end(&em);

    const long failures = k3_engine_expert_failures(&e);
    Report r = { prompt, n_prompt, seq + n_prompt, n_gen, t_prefill, t_decode, k3_peak_rss(),
                 failures, o->spec ? &spec : NULL, lp, o->logprobs, g_interrupted,
                 em.stopped ? o->stops[em.stopped - 1] : NULL, why, sampled, seed, NULL, 0, NULL,
                 NULL };
    const double *ranks = r.ranks = k3_ranks_gather(&e, comm_decode, &r.n_ranks);   /* all */
    r.draft = rd ? k3_draft_stats(rd) : NULL;
    /* the machine line: with --verbose or a run long enough to mean something; --out */
    const int roof_line = !o->quiet && (o->ef.mem.verbose || t_prefill >= 1 || t_decode >= 1);
    K3Machine mc;
    K3Roofline roof;
    if ((roof_line || o->out) && k3_comm_rank() == 0 && !k3_machine_get(&mc, o->reprobe)) {
        k3_roofline(&e.m, n_prompt, o->dump_logits ? n_prompt : 1, t_prefill, n_gen - 1, t_decode,
                    &mc, &roof);
        /* no run beats the FMA peak, nor a lone decode far past the caches the read
         * bandwidth: a cached figure below the run's is measured again */
        const int lone = !(o->spec && spec.accepted) &&
                         !(rd && k3_draft_stats(rd)->accepted) && k3_comm_size() == 1;
        if (mc.cached && (roof.prefill_share > 1 ||
                          k3_decode_beat_probe(&roof, lone, k3_llc_bytes())) &&
            !k3_machine_get(&mc, 1))
            k3_roofline(&e.m, n_prompt, o->dump_logits ? n_prompt : 1, t_prefill, n_gen - 1,
                        t_decode, &mc, &roof);
        r.roof = &roof;
    }
    if (r.interrupted)                         /* said even with --quiet: the exit is 1 */
        fprintf(stderr, "k3: interrupted after %d of --gen %d tokens; the ids so far%s are "
                "written\n", n_gen, o->gen, o->out ? " and the --out report" : "");
    if (!o->quiet) {      /* the report: why it stopped, one speed, one peak RSS (below) */
        char stop[80] = "";
        if (!strcmp(why, "length")) snprintf(stop, sizeof stop, "--gen %d", o->gen);
        else if (!strcmp(why, "context")) snprintf(stop, sizeof stop, "--ctx %d", o->ef.mem.ctx);
        else snprintf(stop, sizeof stop, "%s", !strcmp(why, "eos") ? "the end token" :
                      !strcmp(why, "stop_string") ? "a --stop string" : "Ctrl-C");
        fprintf(stderr, "k3: prefill %d token%s in %.3f s; generated %d token%s, stopped by %s "
                "(%s)\n", n_prompt, n_prompt == 1 ? "" : "s", t_prefill, n_gen,
                n_gen == 1 ? "" : "s", stop, why);
        if (o->ef.mem.verbose || !k3_mem_brief(e.mem))     /* what streamed, and how fast */
            k3_mem_summary(e.mem, stderr, t_prefill + t_decode, t_prefill, n_gen, t_decode);
        if (roof_line && r.roof) k3_roofline_print(r.roof, stderr);
        k3_ranks_print(ranks, r.n_ranks, n_prompt + n_gen, n_gen - 1, stderr);
        if (rd) {
            const K3DraftStats *ds = k3_draft_stats(rd);
            fprintf(stderr, "k3: draft: %ld block%s of %d, %ld drafts verified, %ld accepted "
                    "(%.2f per block), %.3f s in the draft\n", ds->blocks,
                    ds->blocks == 1 ? "" : "s", o->draft_block, ds->proposed, ds->accepted,
                    ds->blocks ? (double)ds->accepted / ds->blocks : 0.0, ds->seconds);
        } else if (o->spec && spec.passes)     /* no pass: nothing was speculated */
            fprintf(stderr, "k3: spec: %ld verify pass%s, %ld drafted, %ld accepted (%.2f "
                    "accepted tokens per pass)\n", spec.passes, spec.passes == 1 ? "" : "es",
                    spec.drafted, spec.accepted,
                    spec.passes ? (double)spec.accepted / spec.passes : 0.0);
    }
    if (o->out && k3_comm_rank() == 0 && write_json(o->out, o, &e, &r)) rc = K3_ERR_RUNTIME;
    if (k3_draft_finish(rd, err, sizeof err)) {
        fprintf(stderr, "k3: %s\n", err);
        rc = K3_ERR_RUNTIME;
    }
    if (!rc && failures) {
        fprintf(stderr, "k3: RUN INVALID: %ld routed expert load(s) failed; the generated ids "
                "are unsound\n", failures);
        rc = K3_ERR_EXPERT;
    }
    if (!rc && r.interrupted) rc = K3_ERR_RUNTIME;
    if (!o->quiet) {       /* the two lines scripts of the original tool parse: the speed */
        double wall = t_prefill + t_decode;
        fprintf(stderr, "%d tokens in %.3f s, %.3f s/token average\n", n_gen, wall,
                n_gen ? wall / n_gen : 0.0);
        fprintf(stderr, "PEAK RSS for the whole run: %.3f GB\n", r.peak_rss / K3_GB);
    }
    if (tok) tok_stream_free(&em.ts);
    free(em.hold);
done:
    for (int i = 0; i < ri.n; i++) k3_image_in_free(&ri.im[i]);
    k3_image_ctx_close(&ictx);
    k3_draft_close(rd);
    if (st) k3_state_free(&e.m, st);
    free(seq); free(prompt); free(ref); free(lp); free(mask);
    jg_free(jg);
    k3_cons_free(&cs); gr_free(gr);
    k3_engine_close(&e);
    tok_free(tok);
    return rc;
}

int k3_run_main(int argc, char **argv) {
    if (argc < 2) { fputs(k3_usage, stderr); return K3_ERR_USAGE; }
    Opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    return run_batch(&o);
}
