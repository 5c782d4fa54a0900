/* batch.c — k3 MODEL_DIR --batch FILE: a file of prompts (JSON Lines, batch.h) completed
 * together. Up to --batch-size sequences are in flight, each with its own state; the
 * engine's scheduler (scheduler.h) feeds them all in one step (one read of each layer
 * and selected expert for all), a finished sequence's place going to the next waiting
 * prompt (continuous batching). FILE "-" or a pipe is read as lines arrive: a prompt joins
 * the next step, mid-decode of the others. Each prompt's ids and logits are its solo run's:
 * the forward gives every sequence its solo bits and the sampler draws by (seed, position)
 * only. */
#include "batch_priv.h"
#include "cli.h"
#include "config.h"
#include "engine.h"
#include "json.h"
#include "constrain.h"
#include "outfile.h"
#include "scheduler.h"
#include "spec.h"
#include "statefile.h"
#include "tok.h"
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *USAGE =
"Usage: k3 MODEL_DIR --batch FILE [options]\n"
"\n"
"FILE holds one JSON object per line (blank lines skipped):\n"
"  {\"id\": \"a\", \"ids\": [1, 2, 3]}   or   {\"id\": 7, \"prompt\": \"text\"}\n"
"with optional \"gen\" (default --gen) and sampling fields \"temperature\", \"top_p\",\n"
"\"top_k\", \"min_p\", \"seed\" (any of them turns sampling on for the line; the sampling\n"
"flags below are the defaults). Every line is checked before anything runs (exit 2\n"
"naming every bad line and field). As each prompt finishes one JSON line goes to\n"
"stdout: id, generated_ids, text (with a tokenizer), stop (length, eos, or interrupted\n"
"by SIGINT), n_prompt, n_generated, seconds_prefill, seconds_decode. Each prompt gets\n"
"the ids of its solo run. \"images\": [\"a.png\", ...] with \"prompt\" puts image files in\n"
"the line as k3 --image does (the chat template; docs/VISION.md); the memory plan holds\n"
"the vision tower and the images, and a line with an image over what it admits is\n"
"answered {\"id\": ..., \"line\": N, \"error\": ...} naming the size that fits (the others\n"
"run; exit 2 at the end).\n"
"FILE - (stdin) or a pipe is read as lines arrive: each prompt joins the next step while\n"
"the others decode; a bad line is answered {\"line\": N, \"error\": ...} and skipped (exit\n"
"2 at the end); the context is --ctx (default 4096).\n"
"\n"
"  --batch-size N       sequences in flight (default: what the memory plan fits, at most\n"
"                       the prompts and the prefill chunk; the plan prints it)\n"
"  --gen N              tokens per prompt without \"gen\" (default 16)\n"
"  --tok DIR            tokenizer for \"prompt\" lines and the text field\n"
"  --prefill-chunk N    most tokens one step feeds (default 64, at least --batch-size)\n"
"  --out FILE           run report: n_prompts, n_generated, seconds, tokens_per_second\n"
"                       (generated tokens per second of the run's wall time), peak_rss_bytes\n"
"  --dump-logits DIR    each prompt's prompt logits (float32 [n_prompt][vocab]) in\n"
"                       DIR/LINE.f32, LINE its line number: the bytes of its solo dump\n"
"  --spec [--spec-k N]  exact speculative decoding per sequence (n-gram drafts of its\n"
"                       own tokens, at most N, default 8): the same ids, fewer steps;\n"
"                       off by default here (--no-spec accepted), on for one prompt\n"
"  --draft DIR          a DSpark draft model (docs/DRAFT.md) drafts a block per step for\n"
"                       each sequence, from its own context, verified as --spec: the same\n"
"                       ids; --out gives draft_blocks, _proposed, _accepted, _rows_verified\n"
"  --draft-block N      verify N drafts a block (1..7; default: chosen each block)\n"
"  --state-file-dir DIR where the batch's states go when they do not fit the budget (a temp\n"
"                       file, deleted at once; default $TMPDIR, else /tmp)\n"
"  --state-file MODE    auto (default: the plan decides), off (states resident), kda (KDA\n"
"                       states in the file), all (the MLA caches too): the same bits\n"
"  --quiet              no progress on stderr\n"
"  --config --threads --kernels, the sampling flags and the memory flags as in k3 --help\n";

static const K3Flag FLAGS[] = {
    { "--batch", 1 }, { "--batch-size", 1 }, { "--gen", 1 }, { "--tok", 1 }, { "--out", 1 },
    { "--dump-logits", 1 }, { "--quiet", 0 }, { "--help", 0 }, K3_FLAGS_SPEC,
    { "--state-file", 1 }, { "--state-file-dir", 1 }, { "--draft", 1 }, { "--draft-block", 1 },
    K3_FLAGS_ENGINE,
};
#define N_FLAGS (int)(sizeof FLAGS / sizeof FLAGS[0])

static int usage(const char *fmt, const char *arg) {
    return k3_usage_error("k3 MODEL_DIR --batch FILE --help", fmt, arg);
}

static int parse(int argc, char **argv, BOpts *o) {
    memset(o, 0, sizeof *o);
    o->gen = 16; o->state_file = -1;
    k3_engine_flags_init(&o->ef);
    o->tok_dir = k3_tok_env();
    for (int i = 1; i < argc; i++)     /* anywhere: `--batch --help` asks, it names no FILE */
        if (!strcmp(argv[i], "--help")) { fputs(USAGE, stdout); exit(0); }
    char xerr[320], serr[256];
    if (k3_args_expand(argc, argv, FLAGS, N_FLAGS, &argc, &argv, xerr, sizeof xerr))
        return usage("%s", xerr);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL() do { if (!v) return usage("%s needs a value", a); i++; } while (0)
        int er = k3_engine_parse_flag(argc, argv, &i, &o->ef, serr, sizeof serr);
        if (!er) {
            const int k_given = !strcmp(a, "--spec-k");    /* here --spec-k implies --spec */
            er = k3_spec_parse_flag(argc, argv, &i, &o->spec, &o->spec_k, serr, sizeof serr);
            if (er > 0 && k_given) o->spec = 1;
        }
        if (er < 0) return usage("%s", serr);
        if (er) continue;
        if (!strcmp(a, "--batch")) { VAL(); o->file = v; }
        else if (!strcmp(a, "--tok")) { VAL(); o->tok_dir = v; }
        else if (!strcmp(a, "--out")) { VAL(); o->out = v; }
        else if (!strcmp(a, "--dump-logits")) { VAL(); o->dump = v; }
        else if (!strcmp(a, "--draft")) { VAL(); o->draft_dir = v; }
        else if (!strcmp(a, "--draft-block")) {
            VAL();
            if (k3_parse_int(a, v, 1, &o->draft_block)) return K3_ERR_USAGE;
            if (o->draft_block > K3_DSPARK_MAX_N)
                return usage("--draft-block takes 1..7 rows (DSpark's block), got %s", v);
            o->draft_fixed = 1;
        }
        else if (!strcmp(a, "--state-file-dir")) { VAL(); o->state_dir = v; }
        else if (!strcmp(a, "--state-file")) {
            VAL();
            if (k3_state_file_mode(v, &o->state_file))
                return usage("--state-file: '%s' is not auto, off, kda or all", v);
        }
        else if (!strcmp(a, "--gen")) { VAL(); if (k3_parse_int(a, v, 0, &o->gen)) return 2; }
        else if (!strcmp(a, "--batch-size")) {
            VAL(); if (k3_parse_int(a, v, 1, &o->batch_size)) return K3_ERR_USAGE;
        } else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (!strcmp(a, "--help")) { fputs(USAGE, stdout); exit(0); }
        else if (a[0] == '-' && a[1]) {
            k3_unknown_option(a, FLAGS, N_FLAGS, xerr, sizeof xerr);
            return usage("%s", xerr);
        } else if (!o->model_dir) o->model_dir = a;
        else return usage("unexpected argument '%s' (MODEL_DIR was already given)", a);
#undef VAL
    }
    if (!o->model_dir) return usage("%s", "missing MODEL_DIR");
    if (!o->file) return usage("%s", "--batch needs a FILE of JSON lines");
    if (sampler_check(&o->ef.sp, serr, sizeof serr)) return usage("%s", serr);
    if (o->draft_block && !o->draft_dir)
        return usage("%s", "--draft-block is about a --draft DIR");
    if (o->draft_dir) {            /* its blocks are verified as --spec's drafts */
        if (!o->draft_block) o->draft_block = K3_DSPARK_MAX_N;
        o->spec = 1; o->spec_k = o->draft_block;
    }
    if (o->spec && !o->spec_k) o->spec_k = 8;
    if (o->spec && o->state_file > 0)   /* a rollback replays from a copy of the state */
        return usage("%s", o->draft_dir ? "--draft needs the states resident: drop "
                     "--state-file or --draft" : "--spec needs the states resident: drop "
                     "--state-file or --spec");
    if (o->spec) o->state_file = 0;
    return 0;
}

/* --spec: drafts after the sequence's last token, at most room, for a verify pass; with
 * --draft DIR from its own draft context, which holds every position but the last token's. */
static int draft(K3SchedSeq *q, int room) {
    Slot *s = q->user;
    Batch *b = s->b;
    const int lim = s->gen - s->n_gen - 1 < room ? s->gen - s->n_gen - 1 : room;
    if (!s->dl) s->k = k3_spec_draft(&s->spec, s->seq, s->n, s->n_prompt, lim, s->seq + s->n);
    else if (k3_draft_stale(s->dl)) s->k = 0;       /* past the draft's positions */
    else if (k3_draft_pos(s->dl) != s->n - 1) {
        snprintf(b->derr, sizeof b->derr, "line %d: the draft's context holds %d positions, "
                 "the sequence %d", b->lines[s->li].line, k3_draft_pos(s->dl), s->n - 1);
        return -1;
    } else {
        k3_draft_history(s->dl, s->seq + s->n_prompt, s->n_gen);   /* the test hook */
        s->k = k3_draft_block(s->dl, s->seq[s->n - 1], s->n_gen, lim, s->seq + s->n, b->derr,
                              sizeof b->derr);
        if (s->k < 0) return -1;
    }
    if (s->k <= 0) return s->k = 0;
    if (k3_state_mark(&b->e.m, q->st, s->k + 1)) {
        snprintf(b->derr, sizeof b->derr, "out of memory");
        return -1;
    }
    q->all_logits = 1;
    return s->k;
}

/* The next step feeds sequence s its last token (and drafts). */
static void decode_next(Batch *b, Slot *s) {
    K3SchedSeq *q = s->q;
    s->k = 0;
    q->ids = s->seq + s->n - 1; q->n = 1; q->decode = 1; q->all_logits = 0;
    q->draft = b->o->spec ? draft : NULL;
}

/* Takes the next waiting prompt into slot s (its scheduler slot q). */
static int start(Batch *b, Slot *s, K3SchedSeq *q, char *err, size_t errlen) {
    const int i = b->next++, V = b->e.m.cfg.vocab_size;
    const BatchLine *l = &b->lines[i];
    char line[32];
    snprintf(line, sizeof line, "line %d: logit_bias", l->line);
    if (sampler_check_vocab(&l->sp, V, line, err, errlen)) return K3_ERR_USAGE;
    if ((l->jg || l->gr) && !b->tok) {
        snprintf(err, errlen, "--batch %s: line %d: response_format and grammar need a tokenizer "
                 "(the tokens' bytes): pass --tok DIR", b->o->file, l->line);
        return K3_ERR_USAGE;
    }
    if (k3_cons_init(&s->cs, l->jg, l->gr)) {
        snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME;
    }
    if (l->jg || l->gr) {
        free(s->mask);
        if (!(s->mask = malloc(sizeof(float) * (size_t)V))) {
            snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME;
        }
    }
    s->b = b; s->li = i; s->q = q;
    s->n_prompt = b->n_prompts[i];
    s->gen = line_gen(b, i);
    s->n = s->n_prompt; s->fed = 0; s->n_gen = 0;
    free(s->seq);
    s->seq = malloc(sizeof(int) * (size_t)(s->n_prompt + s->gen + 1));
    if (!s->seq) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    memcpy(s->seq, b->prompts[i], sizeof(int) * (size_t)s->n_prompt);
    sampler_init(&s->smp, &l->sp, l->seed);          /* greedy unless the line samples */
    if (!l->sampling) s->smp.p.greedy = 1;
    if (b->o->dump) {
        free(s->dump);
        s->dump = malloc(sizeof(float) * (size_t)s->n_prompt * V);
        if (!s->dump) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    }
    s->t0 = k3_now(); s->t_first = 0;
    if (b->o->spec) k3_spec_init(&s->spec, &b->e.m, NULL, 0, b->o->spec_k);
    if (s->dl) k3_draft_reset(s->dl);
    s->k = 0;
    q->st->embed = NULL;
    if (l->n_images) {                  /* the tower now: one line's rows at a time */
        BatchLine *lw = &b->lines[i];
        char why[1024];
        b->ictx = (K3ImageCtx){ b->o->model_dir, b->e.m.cfg.hidden_size, b->o->quiet, b->ictx.v };
        int rc = k3_image_embed(&b->ictx, lw->img, lw->n_images, lw->span, &lw->emb, why,
                                sizeof why);
        if (rc) return snprintf(err, errlen, "--batch %s: line %d: %s", b->o->file, l->line,
                                why), rc;
        q->st->embed = &lw->emb;
    }
    q->ids = s->seq; q->n = s->n_prompt; q->decode = 0; q->all_logits = s->dump != NULL;
    q->draft = NULL;
    if (b->in && !b->o->quiet)
        fprintf(stderr, "k3: batch: line %d joined at step %ld (%d in flight)\n", l->line,
                k3_sched_stats(b->sch)->steps, k3_sched_active(b->sch));
    return 0;
}

/* Sequence s's output line; stop: why it ended (eos, length, interrupted). */
static void put_line(const Batch *b, const Slot *s, const char *stop, double now) {
    const BatchLine *l = &b->lines[s->li];
    const int *g = s->seq + s->n_prompt;
    printf("{\"id\": %s, \"generated_ids\": [", l->id);
    for (int i = 0; i < s->n_gen; i++) printf(i ? ", %d" : "%d", g[i]);
    printf("]");
    if (b->tok) {
        size_t len = 0, bad = 0;
        int32_t *t = malloc(sizeof(int32_t) * (size_t)(s->n_gen + 1));
        for (int i = 0; t && i < s->n_gen; i++) t[i] = g[i];
        char *txt = t ? tok_decode(b->tok, t, (size_t)s->n_gen, &len, &bad) : NULL;
        char *q = txt ? json_quote(txt, len) : NULL;
        printf(", \"text\": %s", q ? q : "null");
        free(q); free(txt); free(t);
    }
    const double tf = s->t_first > 0 ? s->t_first : now;
    printf(", \"stop\": \"%s\", \"n_prompt\": %d, \"n_generated\": %d, \"seconds_prefill\": "
           "%.6f, \"seconds_decode\": %.6f}\n", stop, s->n_prompt, s->n_gen, tf - s->t0,
           now - tf);
    fflush(stdout);
}

static int finish(Batch *b, Slot *s, int eos, char *err, size_t errlen) {
    const double now = k3_now();
    const BatchLine *l = &b->lines[s->li];
    put_line(b, s, eos ? "eos" : "length", now);
    b->n_eos += eos;
    if (b->o->dump && k3_comm_rank() == 0) {    /* over N ranks, rank 0 writes */
        char path[1024], oe[1200];
        snprintf(path, sizeof path, "%.990s/%d.f32", b->o->dump, l->line);
        const size_t nl = (size_t)s->n_prompt * b->e.m.cfg.vocab_size;
        if (k3_out_save(path, s->dump, sizeof(float) * nl, 0666, oe, sizeof oe)) {
            snprintf(err, errlen, "--dump-logits %s", oe);
            return K3_ERR_RUNTIME;
        }
    }
    b->n_generated += s->n_gen;
    b->drafted += s->spec.drafted; b->accepted += s->spec.accepted; b->passes += s->spec.passes;
    b->done++;
    sampler_free(&s->smp);
    s->q->st->embed = NULL;                        /* the slot's next line has its own */
    for (int k = 0; b->lines[s->li].img && k < b->lines[s->li].n_images; k++)
        k3_image_in_free(&b->lines[s->li].img[k]);   /* its rows: done with */
    k3_sched_leave(b->sch, s->q);
    s->li = -1; s->q = NULL;
    if (!b->o->quiet) {
        const double el = now - b->t_run, rate = el > 0 ? b->n_generated / el : 0;
        if (b->in)
            fprintf(stderr, "k3: batch: %d prompts done, %d waiting, %.2f tok/s\n", b->done,
                    b->n_lines - b->next, rate);
        else
            fprintf(stderr, "k3: batch: %d/%d prompts done, %.2f tok/s, ETA %.0f s\n", b->done,
                    b->n_lines, rate, b->done ? el / b->done * (b->n_lines - b->done) : 0.0);
    }
    return 0;
}

/* After a step fed sequence s: T ids, rows lg (all of them with all_logits, else the last
 * one's). When its fed tokens reach its end, it samples (or finishes). */
/* JSON mode: the drawn token's bytes into the line's validator (the end token has none). */
static int json_put(Batch *b, Slot *s, int id, char *err, size_t errlen) {
    size_t nb = 0;
    const char *tb = id != b->e.m.cfg.eos_token_id ? tok_token_bytes(b->tok, id, &nb) : NULL;
    if (!tb || !k3_cons_put(&s->cs, (const unsigned char *)tb, nb)) return 0;
    snprintf(err, errlen, "line %d: %s: token %d was drawn outside the mask",
             b->lines[s->li].line, k3_cons_name(&s->cs), id);
    return -1;
}

/* The line's end token: eos, and <|end_of_msg|> for an "images" line (the chat template) */
static int ends(const Batch *b, const Slot *s, int id) {
    return id == b->e.m.cfg.eos_token_id || (b->lines[s->li].n_images && id == b->eom);
}

static int after_step(Batch *b, Slot *s, float *lg, int T, int all, char *err,
                      size_t errlen) {
    const int V = b->e.m.cfg.vocab_size, eos_id = b->e.m.cfg.eos_token_id;
    if (all && s->dump && s->fed < s->n_prompt)   /* prompt rows, in order */
        memcpy(s->dump + (size_t)s->fed * V, lg, sizeof(float) * (size_t)T * V);
    /* the draft's context: a prompt's rows, a plain step's token (a verify's: below) */
    if (s->dl && s->fed < s->n_prompt && k3_draft_ingest(s->dl, s->taps, T, err, errlen))
        return K3_ERR_RUNTIME;
    if (s->dl && s->fed >= s->n_prompt && !s->k &&
        k3_draft_keep_rows(s->dl, s->taps, 0, 1, err, errlen))
        return K3_ERR_RUNTIME;
    s->fed += T;
    if (s->fed < s->n) return 0;                   /* the prompt is still going in */
    const float *last = lg + (size_t)(all ? T - 1 : 0) * V;
    if (s->n_gen == s->gen) return finish(b, s, 0, err, errlen);   /* --gen 0 */
    const int jg = k3_cons_on(&s->cs);
    if (s->k > 0) {                    /* a verify pass: keep what the model agrees with */
        int out[65];
        /* JSON mode: each row masked as a step-by-step run masks it (the same draws) */
        const int dead = jg ? k3_cons_mask_drafts(&s->cs, b->tok, V, eos_id, lg, s->seq + s->n,
                                                  s->k) : s->k + 1;
        const int cnt = k3_spec_accept(&s->spec, &b->e.m, s->q->st, &s->smp, s->n_gen,
                                       s->seq + s->n, s->k, lg, out);
        if (cnt < 0) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
        if (s->dl && k3_draft_keep_rows(s->dl, s->taps, s->k, cnt, err, errlen))
            return K3_ERR_RUNTIME;     /* the anchor's and the accepted drafts' rows */
        if (cnt > dead) {
            snprintf(err, errlen, "line %d: %s: no token can continue the text",
                     b->lines[s->li].line, k3_cons_name(&s->cs));
            return K3_ERR_RUNTIME;
        }
        s->k = 0;
        for (int j = 0; j < cnt; j++) {
            const int id = out[j];
            if (jg && json_put(b, s, id, err, errlen)) return K3_ERR_RUNTIME;
            s->seq[s->n++] = id;
            s->n_gen++;
            if (ends(b, s, id) || s->n_gen == s->gen)
                return finish(b, s, ends(b, s, id), err, errlen);
        }
        s->fed = s->n - 1;             /* the state holds all but the model's own token */
        decode_next(b, s);
        return 0;
    }
    if (jg) {                          /* JSON mode: what may not come next masked */
        memcpy(s->mask, last, sizeof(float) * (size_t)V);
        if (!k3_cons_mask(&s->cs, b->tok, V, eos_id, s->mask)) {
            snprintf(err, errlen, "line %d: %s: no token can continue the text",
                     b->lines[s->li].line, k3_cons_name(&s->cs));
            return K3_ERR_RUNTIME;
        }
        last = s->mask;
    }
    const int id = sampler_sample_at(&s->smp, last, V, s->n_gen);  /* by position only */
    if (id < 0) { snprintf(err, errlen, "out of memory"); return K3_ERR_RUNTIME; }
    if (jg && json_put(b, s, id, err, errlen)) return K3_ERR_RUNTIME;
    if (!s->t_first) s->t_first = k3_now();
    s->seq[s->n++] = id;
    s->n_gen++;
    if (ends(b, s, id) || s->n_gen == s->gen)
        return finish(b, s, ends(b, s, id), err, errlen);
    decode_next(b, s);
    return 0;
}


/* SIGINT stops the step under way inside its layer (k3_halted) and the run; a second
 * one kills. The lines already written stay. */
static volatile sig_atomic_t g_sigint;
static void on_sigint(int sig) { (void)sig; g_sigint = 1; }

static int run(Batch *b, char *err, size_t errlen) {
    int rc = 0;
    b->t_run = k3_now();
    for (;;) {
        if (g_sigint) { snprintf(err, errlen, "interrupted"); rc = K3_INTERRUPTED; break; }
        const int idle = !k3_sched_active(b->sch) && b->next == b->n_lines;
        if (b->in && !b->in->eof && (rc = batch_stream_read(b, idle, err, errlen))) break;
        for (int i = 0; !rc && i < b->n_slots && b->next < b->n_lines; i++)
            if (b->slot[i].li < 0) {
                K3SchedSeq *q = k3_sched_join(b->sch, &b->slot[i]);
                if (!q) { snprintf(err, errlen, "out of memory"); rc = K3_ERR_RUNTIME; }
                else rc = start(b, &b->slot[i], q, err, errlen);
            }
        if (rc) break;
        if (!k3_sched_active(b->sch)) {
            if (!b->in || b->in->eof) break;
            continue;                                 /* the next line is on its way */
        }
        K3SchedSeq **fed;
        int nf = 0;
        b->derr[0] = 0;
        rc = k3_sched_step(b->sch, &fed, &nf, err, errlen);
        if (rc && b->derr[0]) snprintf(err, errlen, "draft: %s", b->derr);
        if (!rc && !nf) { snprintf(err, errlen, "a step fed nothing"); rc = K3_ERR_RUNTIME; }
        if (!rc && b->dl) {                           /* each sequence's rows of the taps */
            int rows = 0, W = 0;
            const float *tp = k3_draft_taps(b->dl[0], &rows, &W);
            for (int j = 0, r = 0; j < nf; r += fed[j++]->T)
                ((Slot *)fed[j]->user)->taps = tp + (size_t)r * W;
        }
        for (int j = 0; !rc && j < nf; j++)
            rc = after_step(b, fed[j]->user, fed[j]->logits, fed[j]->T, fed[j]->all_logits,
                            err, errlen);
        if (rc) break;
    }
    b->t_run = k3_now() - b->t_run;
    return rc;
}

/* The vision tower's share of the plan: the whole file's images are read (their patches
 * held) with the largest one's buffers; lines to come (a stream): the tower gets what the
 * text model leaves, each sequence's images held at once. */
static void plan_images(const Batch *b, K3VisionPlan *vp) {
    long most = 0, all = 0;
    for (int i = 0; i < b->n_lines; i++)
        for (int k = 0; b->lines[i].img && k < b->lines[i].n_images; k++) {
            const long p = b->lines[i].img[k].plan.patches;
            all += p;
            if (p > most) most = p;
        }
    char verr[512];
    const int stream = b->in && b->tok && k3_comm_size() == 1;
    if ((!all && !stream) ||
        k3_vision_mem_plan(b->o->model_dir, all ? most : K3_VISION_MAX_PATCHES,
                           all ? all : K3_VISION_MAX_PATCHES, all > 0, vp, verr, sizeof verr))
        memset(vp, 0, sizeof *vp);
    else if (!all) vp->fill = vp->per_seq = 1;
}

/* The file's lines whose images are over what the plan admits: each answered with an
 * error line (the others run) and dropped, its images freed. Returns how many. */
static int refuse_images(Batch *b) {
    int n = 0, j = 0;
    char err[1600];
    for (int i = 0; i < b->n_lines; i++) {
        if (b->in || !batch_admit_images(b, i, err, sizeof err)) {
            if (j != i) {
                b->lines[j] = b->lines[i];
                b->prompts[j] = b->prompts[i]; b->n_prompts[j] = b->n_prompts[i];
            }
            j++;
            continue;
        }
        char *q = json_quote(err, strlen(err));
        printf("{\"id\": %s, \"line\": %d, \"error\": %s}\n", b->lines[i].id,
               b->lines[i].line, q ? q : "null");
        free(q);
        fprintf(stderr, "k3: %s (the line is skipped)\n", err);
        free(b->prompts[i]);
        batch_line_free(&b->lines[i]);
        n++;
    }
    fflush(stdout);
    b->n_lines = j;
    return n;
}

int k3_batch_main(int argc, char **argv) {
    BOpts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    char err[4096];
    Batch b;
    Stream in = { .fd = -1 };
    memset(&b, 0, sizeof b);
    b.o = &o;
    struct stat sb;
    if (!strcmp(o.file, "-")) in.fd = 0;
    else if (!stat(o.file, &sb) && (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode))) {
        in.fd = open(o.file, O_RDONLY);
        if (in.fd < 0) {
            fprintf(stderr, "k3: --batch %s: %s\n", o.file, strerror(errno));
            return K3_ERR_USAGE;
        }
    }
    Bad bad = { o.file, 0 };
    if (in.fd >= 0) b.in = &in;
    else {
        size_t len = 0;
        char *text = k3_slurp(o.file, (size_t)1 << 32, &len, err, sizeof err);
        if (!text) { fprintf(stderr, "k3: --batch %s\n", err); return K3_ERR_USAGE; }
        int n_bad = 0;
        rc = batch_parse_each(text, len, &o.ef.sp, o.ef.seed, o.ef.sampling, &b.lines,
                              &b.n_lines, &n_bad, batch_bad_line, &bad);
        free(text);
        if (rc) { fprintf(stderr, "k3: out of memory\n"); return K3_ERR_RUNTIME; }
        if (!b.n_lines && !n_bad) {
            fprintf(stderr, "k3: --batch %s: %s\n", o.file, BATCH_NO_LINES);
            return K3_ERR_USAGE;
        }
    }
    const char *oflag[2] = { "--out", "--dump-logits" }, *opath[2] = { o.out, o.dump };
    for (int i = 0; i < 2 && !rc; i++)
        if (opath[i] && k3_check_output(oflag[i], opath[i], i == 1, err, sizeof err)) {
            fprintf(stderr, "k3: %s\n", err);
            rc = K3_ERR_USAGE;
        }
    b.eom = -1;
    if (!rc && o.tok_dir) {
        b.tok = tok_load(o.tok_dir, err, sizeof err);
        if (!b.tok) { fprintf(stderr, "k3: %s\n", err); rc = K3_ERR_USAGE; }
        else b.eom = tok_special_id(b.tok, "<|end_of_msg|>");
    }
    b.cap_lines = b.n_lines;
    b.prompts = calloc((size_t)b.n_lines + 1, sizeof(int *));
    b.n_prompts = calloc((size_t)b.n_lines + 1, sizeof(int));
    if (!rc && (!b.prompts || !b.n_prompts)) { fprintf(stderr, "k3: out of memory\n"); rc = 1; }
    int ctx = 1;
    for (int i = 0; !rc && i < b.n_lines; i++) {
        if ((rc = batch_ids_of(&b, i, err, sizeof err)) == K3_ERR_USAGE) {
            batch_bad_line(&bad, err);           /* named with the others; the run stops below */
            rc = 0;
            continue;
        }
        if (rc) { fprintf(stderr, "k3: %s\n", err); break; }
        if (b.n_prompts[i] + line_gen(&b, i) > ctx) ctx = b.n_prompts[i] + line_gen(&b, i);
    }
    if (!rc && !b.in) batch_check_lines(&b, &bad);
    if (!rc && bad.n) {
        char first[48] = "";
        if (bad.n > BAD_SHOWN) snprintf(first, sizeof first, " (the first %d named)", BAD_SHOWN);
        fprintf(stderr, "k3: --batch %s: %d bad line%s%s; nothing was run (fix %s and run "
                "again)\n", o.file, bad.n, bad.n == 1 ? "" : "s", first,
                bad.n == 1 ? "it" : "them");
        rc = K3_ERR_USAGE;
    }
    if (rc) goto done;
    if (b.in) ctx = 4096;                  /* lines to come: what the server plans for */
    int chunk = o.ef.chunk > 0 ? o.ef.chunk : K3_PREFILL_CHUNK;
    /* default: as many as the plan fits, at most the prompts and a step's rows */
    b.n_slots = o.batch_size > 0 ? o.batch_size : !b.in && b.n_lines < chunk ? b.n_lines : chunk;
    if (!b.in && b.n_slots > b.n_lines) b.n_slots = b.n_lines;
    if (chunk < b.n_slots) chunk = b.n_slots;          /* every decoding sequence fits a step */
    K3EngineOpts eo = k3_engine_flags_opts(&o.ef, o.model_dir);
    eo.mem.ctx = o.ef.mem.ctx > 0 ? o.ef.mem.ctx : ctx;
    eo.mem.chunk = chunk;
    if (o.spec && chunk < b.n_slots * (o.spec_k + 1)) chunk = b.n_slots * (o.spec_k + 1);
    eo.mem.logits_rows = o.dump || o.spec ? chunk : b.n_slots;
    eo.mem.undo_T = o.spec ? o.spec_k + 1 : 0;
    eo.mem.seqs = b.n_slots;
    eo.mem.seqs_auto = o.batch_size <= 0;
    eo.mem.state_file = o.state_file;
    eo.mem.state_dir = o.state_dir;
    /* --draft: its share in the plan, a context a slot (a bad folder: refused at open) */
    if (o.draft_dir && k3_dspark_plan_file(o.draft_dir, &eo.mem.draft, err, sizeof err))
        memset(&eo.mem.draft, 0, sizeof eo.mem.draft);
    eo.mem.quiet = o.quiet;
    plan_images(&b, &eo.mem.vision);
    rc = k3_engine_open(&b.e, &eo, err, sizeof err);
    if (rc) { fprintf(stderr, "k3: %s\n", err); goto done; }
    b.n_slots = k3_mem_seqs(b.e.mem);                  /* what the plan admits */
    if (b.in) b.ctx = eo.mem.ctx;
    for (int i = 0; !rc && i < b.n_lines; i++)
        if ((rc = batch_prompt_check(&b, i, b.e.m.cfg.vocab_size, err, sizeof err)))
            fprintf(stderr, "k3: %s\n", err);
    if (rc) goto done;
    const int refused = refuse_images(&b);
    const K3SchedOpts so = { b.n_slots, -1, o.state_dir, eo.mem.ctx,
                             1 + (o.ef.mem.verbose && !o.quiet) };
    if ((rc = k3_sched_open(&b.sch, &b.e, &so, err, sizeof err))) {
        fprintf(stderr, "k3: %s\n", err);
        goto done;
    }
    b.slot = calloc((size_t)b.n_slots, sizeof *b.slot);
    if (!b.slot) { fprintf(stderr, "k3: out of memory\n"); rc = K3_ERR_RUNTIME; goto done; }
    for (int i = 0; i < b.n_slots; i++) b.slot[i].li = -1;
    if (o.draft_dir) {                 /* one draft context a slot, over one tap */
        K3Spec cost;                   /* one more verified position's cost */
        k3_spec_init(&cost, &b.e.m, NULL, 0, 0);
        b.dl = calloc((size_t)b.n_slots, sizeof *b.dl);
        if (!b.dl) { fprintf(stderr, "k3: out of memory\n"); rc = K3_ERR_RUNTIME; goto done; }
        if ((rc = k3_draft_open_seqs(b.dl, b.n_slots, o.draft_dir, &b.e, o.draft_block,
                                     o.draft_fixed, cost.step_cost, o.quiet, err, sizeof err))) {
            fprintf(stderr, "k3: --draft %s\n", err);
            free(b.dl); b.dl = NULL;
            goto done;
        }
        for (int i = 0; i < b.n_slots; i++) b.slot[i].dl = b.dl[i];
    }
    const K3StateFile *sf = k3_sched_statefile(b.sch);
    if (!o.quiet) {
        if (b.in) fprintf(stderr, "k3: batch: prompts as they arrive on %s", o.file);
        else fprintf(stderr, "k3: batch: %d prompts", b.n_lines);
        fprintf(stderr, ", %d in flight%s, steps of up to %d tokens%s%s\n", b.n_slots,
                o.batch_size > 0 ? "" : " (what the plan fits)", chunk,
                sf ? "; states in a state file in " : "", sf ? k3_statefile_dir(sf) : "");
    }
    k3_sigint_once(on_sigint);
    b.e.interrupt = &g_sigint;
    b.e.prog.quiet = o.quiet;
    rc = run(&b, err, sizeof err);
    b.e.interrupt = NULL;
    if (rc == K3_INTERRUPTED) {            /* the sequences in flight: their tokens so far */
        int stopped = 0;
        for (int i = 0; i < b.n_slots; i++)
            if (b.slot[i].li >= 0) { put_line(&b, &b.slot[i], "interrupted", k3_now()); stopped++; }
        fprintf(stderr, "k3: batch: interrupted (SIGINT): %d of %d prompts finished, %d stopped "
                "(their lines say \"stop\": \"interrupted\"), %d not started\n", b.done,
                b.n_lines, stopped, b.n_lines - b.done - stopped);
        rc = K3_ERR_RUNTIME; goto done;
    }
    if (rc) { fprintf(stderr, "k3: batch: %s\n", err); goto done; }
    for (int i = 0; b.dl && i < b.n_slots; i++) {      /* the draft's totals */
        const K3DraftStats *d = k3_draft_stats(b.dl[i]);
        b.ds.blocks += d->blocks; b.ds.proposed += d->proposed; b.ds.accepted += d->accepted;
        b.ds.rows += d->rows; b.ds.seconds += d->seconds;
    }
    /* over N ranks: every rank's bytes read and collectives (every rank calls it here) */
    b.ranks = k3_ranks_gather(&b.e, (K3CommStats){ 0 }, &b.n_ranks);
    if (!o.quiet) {
        fprintf(stderr, "k3: batch: %ld tokens generated for %d prompts in %.3f s (%.2f tok/s); "
                "peak RSS %.3f GB\n", b.n_generated, b.n_lines, b.t_run,
                b.t_run > 0 ? b.n_generated / b.t_run : 0.0, k3_peak_rss() / K3_GB);
        /* the steps' times split by kind; s/token (t_decode / (n - 1) there) is the decode
         * time per token a decode step made: every prompt's first token is the prefill's */
        const K3SchedStats *ss = k3_sched_stats(b.sch);
        const long n_dec = b.n_generated - b.n_lines;
        k3_mem_summary(b.e.mem, stderr, b.t_run, ss->t_prefill, (int)b.n_generated,
                       n_dec > 0 ? ss->t_decode * (double)(b.n_generated - 1) / n_dec : 0);
        if (sf) {
            const K3StateFileStats *ss = k3_statefile_stats(sf);
            fprintf(stderr, "k3: state file: %.3f GB read, %.3f GB written (%s), %.2f s in "
                    "I/O, %.2f s waited for by the layers\n", ss->read / 1e9, ss->written / 1e9,
                    ss->direct ? "O_DIRECT" : "page cache", ss->io_s, ss->wait_s);
        }
        if (b.dl)
            fprintf(stderr, "k3: draft: %ld blocks, %ld drafts verified, %ld accepted (%.2f per "
                    "block), %ld rows verified, %.3f s in the draft\n", b.ds.blocks,
                    b.ds.proposed, b.ds.accepted,
                    b.ds.blocks ? (double)b.ds.accepted / b.ds.blocks : 0.0, b.ds.rows,
                    b.ds.seconds);
        else if (o.spec)
            fprintf(stderr, "k3: spec: %ld verify passes, %ld drafted, %ld accepted (%.2f "
                    "accepted tokens per pass)\n", b.passes, b.drafted, b.accepted,
                    b.passes ? (double)b.accepted / b.passes : 0.0);
        k3_ranks_print(b.ranks, b.n_ranks, (int)(ss->prompt_tokens + ss->decode_tokens), 0,
                       stderr);
    }
    if (o.out && k3_comm_rank() == 0 && batch_write_report(&b, o.out)) rc = K3_ERR_RUNTIME;
    const long fails = k3_engine_expert_failures(&b.e);
    if (!rc && fails) {
        fprintf(stderr, "k3: RUN INVALID: %ld routed expert load(s) failed; the generated ids "
                "are unsound\n", fails);
        rc = K3_ERR_EXPERT;
    }
    if (!rc && refused) {
        fprintf(stderr, "k3: batch: %d line%s of %s refused: images over what the memory plan "
                "admits (answered with an error line)\n", refused, refused == 1 ? "" : "s",
                o.file);
        rc = K3_ERR_USAGE;
    }
    if (!rc && in.bad) {
        fprintf(stderr, "k3: batch: %d line%s of %s refused (answered with an error line)\n",
                in.bad, in.bad == 1 ? "" : "s", o.file);
        rc = K3_ERR_USAGE;
    }
done:
    for (int i = 0; b.slot && i < b.n_slots; i++) {
        free(b.slot[i].seq); free(b.slot[i].dump); free(b.slot[i].mask);
        k3_cons_free(&b.slot[i].cs);
        if (b.slot[i].li >= 0) sampler_free(&b.slot[i].smp);
    }
    free(b.slot);
    for (int i = b.n_slots - 1; b.dl && i >= 0; i--) k3_draft_close(b.dl[i]);
    free(b.dl);
    k3_sched_close(b.sch);
    for (int i = 0; b.prompts && i < b.n_lines; i++) free(b.prompts[i]);
    free(b.prompts); free(b.n_prompts);
    batch_lines_free(b.lines, b.n_lines);
    k3_image_ctx_close(&b.ictx);
    k3_engine_close(&b.e);
    tok_free(b.tok);
    if (in.fd > 0) close(in.fd);
    free(in.buf);
    return rc;
}
