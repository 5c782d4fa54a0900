/* chat_gen.c — one chat turn: re-render the transcript, reuse the state when it holds
 * an exact prefix (else reset and re-prefill, saying so), sample the reply and stream
 * it (thinking dim or hidden, answer UTF-8-safe), record it. */
#include "chat.h"
#include "comm.h"
#include "util.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t chat_interrupted;

static const char *s_(long n) { return n == 1 ? "" : "s"; }

#define DIM "\033[2m"
#define RST "\033[0m"

enum { SEEN_MAX = 1 << 20 };                /* ids of dropped conversations kept to draft */

void chat_draft_send(Chat *c, int op, int a, int b, int d) {
    const int32_t v[4] = { op, a, b, d };
    if (c->draft) k3_sched_user(c->sch, c->q, v, sizeof v);   /* (N = 1: nothing) */
}

void chat_draft_send_ctx(Chat *c) {
    if (!c->draft || k3_comm_size() == 1) return;
    int nl, kl, dr;
    k3_draft_ctx_shape(c->draft, &nl, &kl, &dr);
    const int P = k3_draft_pos(c->draft);
    const size_t n = 4 + (size_t)nl * P * (size_t)(kl + dr);
    float *b = malloc(sizeof(float) * n);
    if (!b) k3_comm_abort(1, "out of memory for the draft's context");
    const int32_t h[4] = { CHAT_DR_RESTORE, P, 0, 0 };
    memcpy(b, h, sizeof h);
    float *q = b + 4;
    for (int l = 0; l < nl; l++) {
        memcpy(q, k3_draft_ctx_rows(c->draft, l, 0), sizeof(float) * (size_t)P * kl);
        q += (size_t)P * kl;
        memcpy(q, k3_draft_ctx_rows(c->draft, l, 1), sizeof(float) * (size_t)P * dr);
        q += (size_t)P * dr;
    }
    k3_sched_user(c->sch, c->q, b, sizeof(float) * n);
    free(b);
}

/* A follower: rank 0's draft call on st, the state of its slot here. */
void chat_draft_replay(void *ctx, K3State *st, const void *p, size_t n) {
    Chat *c = ctx;
    int32_t v[4];
    if (!c->draft || n < sizeof v) k3_comm_abort(1, "the mirror: a draft record of %zu bytes", n);
    memcpy(v, p, sizeof v);
    k3_draft_follow(c->draft, st);
    char err[512];
    int d[K3_DSPARK_MAX_N], rc = 0;
    if (v[0] == CHAT_DR_BLOCK) rc = k3_draft_block(c->draft, v[1], v[2], v[3], d, err,
                                                   sizeof err) < 0;
    else if (v[0] == CHAT_DR_KEEP) rc = k3_draft_keep(c->draft, v[1], v[2], err, sizeof err);
    else if (v[0] == CHAT_DR_TRUNC) k3_draft_truncate(c->draft, v[1]);
    else if (v[0] == CHAT_DR_RESTORE) {
        int nl, kl, dr;
        k3_draft_ctx_shape(c->draft, &nl, &kl, &dr);
        const int P = v[1];
        const float *q = (const float *)p + 4;
        if (P < 0 || n != sizeof(float) * (4 + (size_t)nl * P * (size_t)(kl + dr)) ||
            (rc = k3_draft_restore(c->draft, P, err, sizeof err)) != 0) {
            if (!rc) snprintf(err, sizeof err, "a draft context of %zu bytes", n);
            rc = 1;
        }
        for (int l = 0; !rc && l < nl; l++) {
            memcpy(k3_draft_ctx_rows(c->draft, l, 0), q, sizeof(float) * (size_t)P * kl);
            q += (size_t)P * kl;
            memcpy(k3_draft_ctx_rows(c->draft, l, 1), q, sizeof(float) * (size_t)P * dr);
            q += (size_t)P * dr;
        }
    }
    if (rc) k3_comm_abort(1, "the mirror: a draft call rank 0 made failed here: %s", err);
}

void chat_forget_state(Chat *c) {
    k3_sched_reset(c->sch, c->q);                /* (and on the other ranks) */
    if (c->draft) { chat_draft_send(c, CHAT_DR_TRUNC, 0, 0, 0); k3_draft_truncate(c->draft, 0); }
    /* a regenerated reply (/reset, the same message) drafts from the one before */
    size_t n = c->nfed < SEEN_MAX ? c->nfed : SEEN_MAX, keep = c->nseen;
    if (keep + n > SEEN_MAX) keep = SEEN_MAX - n;           /* the oldest go */
    int *v = realloc(c->seen, sizeof *v * (keep + n ? keep + n : 1));
    if (v) {
        memmove(v, v + c->nseen - keep, sizeof *v * keep);
        for (size_t i = 0; i < n; i++) v[keep + i] = c->fed[c->nfed - n + i];
        c->seen = v; c->nseen = keep + n;
    }
    c->nfed = 0;
}

static int fed_push(Chat *c, const int32_t *ids, size_t n) {
    if (c->nfed + n > c->capfed) {
        size_t nc = c->capfed ? c->capfed : 1024;
        while (nc < c->nfed + n) nc *= 2;
        int32_t *nv = realloc(c->fed, sizeof *nv * nc);
        if (!nv) return -1;
        c->fed = nv; c->capfed = nc;
    }
    memcpy(c->fed + c->nfed, ids, sizeof *ids * n);
    c->nfed += n;
    return 0;
}

/* Feeds ids; 0, -1 on a runtime failure (printed), or 1 when Ctrl-C stopped it (only when
 * interruptible: the prompt's prefill; a reply's single tokens finish, keeping the state). */
static int forward(Chat *c, const int32_t *ids, size_t n, int interruptible) {
    char err[512];
    int *v = malloc(sizeof(int) * (n ? n : 1));
    if (!v) { fprintf(stderr, "k3: out of memory\n"); return -1; }
    for (size_t i = 0; i < n; i++) v[i] = ids[i];
    /* in steps of the plan's chunk: long turns stay bounded */
    c->eng.interrupt = interruptible ? &chat_interrupted : NULL;
    int rc = k3_sched_feed(c->sch, c->q, v, (int)n, 0, err, sizeof err);
    c->eng.interrupt = NULL;
    free(v);
    if (rc == K3_INTERRUPTED) return 1;
    if (!rc && c->draft && k3_draft_failed(c->draft, err, sizeof err)) rc = 1;  /* its tap */
    if (rc) { fprintf(stderr, "\nk3: %s\n", err); return -1; }
    return fed_push(c, ids, n);
}

/* v[0] (the reply's token) and its drafts v[1..k] fed as one step, then kept as far as the
 * target agrees (spec_step's contract). */
static int verify(Chat *c, Sampler *smp, const int *v, int k, long gen_pos, int *pend,
                  int *np) {
    char err[512];
    if (k3_state_mark(&c->eng.m, c->st, k + 1)) { fprintf(stderr, "\nk3: out of memory\n");
                                                  return -1; }
    if (k3_sched_feed(c->sch, c->q, v, k + 1, 1, err, sizeof err)) {     /* one step */
        fprintf(stderr, "\nk3: %s\n", err); return -1;
    }
    /* --grammar: each row masked as a step-by-step run masks it (the same draws) */
    const int dead = k3_cons_on(&c->cs) ? k3_cons_mask_drafts(&c->cs, c->tok,
                     c->eng.m.cfg.vocab_size, c->ids.eom, c->logits, v + 1, k) : k + 1;
    const int got = k3_spec_accept(&c->spec_st, &c->eng.m, c->st, smp, gen_pos, v + 1, k,
                                   c->logits, pend);
    if (got < 0) { fprintf(stderr, "\nk3: out of memory\n"); return -1; }
    if (got > dead) { fprintf(stderr, "\nk3: grammar: no token can continue the reply\n");
                      return -1; }
    k3_sched_rolled_back(c->sch, c->q, got);       /* the other ranks' state keeps as many */
    if (c->draft) chat_draft_send(c, CHAT_DR_KEEP, k, got, 0);     /* (and theirs) */
    if (c->draft && k3_draft_keep(c->draft, k, got, err, sizeof err)) {
        fprintf(stderr, "\nk3: %s\n", err); return -1;
    }
    c->last_passes++; c->last_accepted += got - 1;
    for (int j = 0; j < got; j++) {
        const int32_t x = v[j];
        if (fed_push(c, &x, 1)) { fprintf(stderr, "\nk3: out of memory\n"); return -1; }
    }
    *np = got;
    return 0;
}

/* --draft: a block from id when the draft's context is the state's (else a plain step).
 * The test hook's index (K3_TEST_DRAFT_ORACLE) counts the session's reply tokens. */
static int dspark_step(Chat *c, Sampler *smp, int32_t id, long gen_pos, int room, int *pend,
                       int *np) {
    char err[512];
    int v[K3_DSPARK_MAX_N + 1];
    v[0] = id;
    chat_draft_send(c, CHAT_DR_BLOCK, id, (int)(c->tot_gen + gen_pos), room);   /* N ranks */
    const int k = k3_draft_block(c->draft, id, c->tot_gen + gen_pos, room, v + 1, err,
                                 sizeof err);
    if (k < 0) { fprintf(stderr, "\nk3: %s\n", err); return -1; }
    return k ? verify(c, smp, v, k, gen_pos, pend, np) : 0;
}

static int V0(const Chat *c) { return c->eng.m.cfg.vocab_size; }

/* The draw of reply position nrec, as the plain loop's sampler_sample makes it; under
 * --grammar from the row with what may not come next masked, the token's bytes fed to
 * the grammar (the end token has none). -1 (printed) on failure. */
static int gr_draw(Chat *c, Sampler *smp, int V, int nrec) {
    const float *row = c->logits;
    if (k3_cons_on(&c->cs)) {
        memcpy(c->mask, c->logits, sizeof(float) * (size_t)V);
        if (!k3_cons_mask(&c->cs, c->tok, V, c->ids.eom, c->mask)) {
            fprintf(stderr, "\nk3: grammar: no token can continue the reply\n");
            return -1;
        }
        row = c->mask;
    }
    int id = sampler_sample_at(smp, row, V, nrec);
    if (id < 0) { fprintf(stderr, "\nk3: out of memory\n"); return -1; }
    return id;
}

/* Speculation: the reply's token id (recorded, not yet fed) and a draft from the whole
 * conversation (n-grams, --draft-file; or the DSpark draft's block from id, --draft)
 * verified in one forward. Then the state and c->fed
 * hold id and the accepted drafts; pend[0..*np) are the tokens the pass drew (the
 * accepted drafts, then the model's own, not in the state). *np = 0: no draft, nothing
 * fed. 0, or -1 on a runtime failure (printed). */
static int spec_step(Chat *c, Sampler *smp, int32_t id, long gen_pos, size_t reply0,
                     int room, int *pend, int *np) {
    int v[65];
    *np = 0;
    if (c->draft) return dspark_step(c, smp, id, gen_pos, room, pend, np);
    const size_t n = c->nseen + c->nfed + 1;     /* seen, the conversation, id */
    if (n > c->capd) {
        int *b = realloc(c->dbuf, sizeof *b * n * 2);
        if (!b) { fprintf(stderr, "\nk3: out of memory\n"); return -1; }
        c->dbuf = b; c->capd = n * 2;
    }
    if (c->nseen) memcpy(c->dbuf, c->seen, sizeof(int) * c->nseen);   /* (seen may be NULL) */
    for (size_t i = 0; i < c->nfed; i++) c->dbuf[c->nseen + i] = c->fed[i];
    c->dbuf[n - 1] = id;
    const int k = k3_spec_draft(&c->spec_st, c->dbuf, (int)n, (int)(c->nseen + reply0), room,
                                v + 1);
    if (k <= 0) return 0;
    v[0] = id;
    return verify(c, smp, v, k, gen_pos, pend, np);
}

int chat_image_add(Chat *c, const char *path) {
    char err[1024];
    if (!*path) { printf("usage: /image PATH\n"); return -1; }
    K3ImageIn *v = realloc(c->pend, sizeof *v * (size_t)(c->n_pend + 1));
    if (!v) { printf("k3: out of memory\n"); return -1; }
    c->pend = v;
    if (k3_image_in_file(path, c->tok, &v[c->n_pend], err, sizeof err)) {
        printf("k3: %s\n", err);
        return -1;
    }
    const K3ImageIn *ni = &v[c->n_pend];         /* within what the memory plan admits */
    if (k3_vision_admit(path, ni->w, ni->h, ni->plan.patches, k3_mem_vision_patches(c->eng.mem),
                        err, sizeof err)) {
        printf("k3: %s\n", err);
        k3_image_in_free(&v[c->n_pend]);
        return -1;
    }
    if (!c->ictx.dir) {                          /* the tower: now, so a model without one
                                                  * says so before the message is typed */
        c->ictx.dir = c->model_dir;
        c->ictx.hidden = c->eng.m.cfg.hidden_size;
    }
    if (k3_image_rows(&c->ictx, &v[c->n_pend], 1, err, sizeof err)) {
        printf("k3: %s\n", err);
        k3_image_in_free(&v[c->n_pend]);
        return -1;
    }
    const K3ImageIn *im = &v[c->n_pend++];
    printf("(image %s: %dx%d, %ld rows; it goes with your next message: %d queued)\n", path,
           im->w, im->h, im->plan.rows, c->n_pend);
    return 0;
}

int chat_has_images(const Chat *c) {
    for (int i = 0; i < c->log.n; i++)
        if (c->log.v[i].n_img) return 1;
    return c->n_pend > 0;
}

/* A message's content without image marks: one that has none of its images (a history
 * keeps their places, not their pixels; a mark typed as text) must not take another
 * message's image. NULL: out of memory. */
static char *without_marks(const char *s) {
    const size_t pl = strlen(K3_IMAGE_PLACEHOLDER);
    char *o = malloc(strlen(s) + 1), *d = o;
    for (const char *p = s; o && *p;) {
        if (!strncmp(p, K3_IMAGE_PLACEHOLDER, pl)) { p += pl; continue; }
        *d++ = *p++;
    }
    if (o) *d = 0;
    return o;
}

/* Renders the whole transcript (+ generation prompt) to ids; the images of the rendered
 * messages at their placeholders, their rows' spans in c->embed. */
int chat_render(Chat *c, int32_t **ids, size_t *n) {
    XtmlMsg *mm = calloc((size_t)c->log.n + 1, sizeof *mm);
    int nimg = 0;
    for (int i = 0; i < c->log.n; i++) nimg += c->log.v[i].n_img;
    K3ImageIn *img = calloc((size_t)nimg + 1, sizeof *img);   /* shallow copies, in order */
    K3EmbedSpan *sp = realloc(c->span, sizeof *sp * (size_t)(nimg + 1));
    char **own = calloc((size_t)c->log.n + 1, sizeof *own);    /* contents without marks */
    if (sp) c->span = sp;
    if (!mm || !img || !sp || !own) {
        free(mm); free(img); free(own); fprintf(stderr, "k3: out of memory\n");
        return -1;
    }
    const int sys = c->log.n && !strcmp(c->log.v[0].role, "system");
    int k = 0, rc0 = 0;
    nimg = 0;
    for (int i = 0; i < c->log.n; i++) {
        if (i >= sys && i < sys + c->skip) continue;         /* dropped to fit (--context-full) */
        const ChatMsg *s = &c->log.v[i];
        mm[k++] = (XtmlMsg){ s->role, s->content, s->reasoning, s->gen_ids, s->n_gen,
                             s->gen_thinking, s->gen_state };
        if (!s->n_img && !strcmp(s->role, "user") && s->content &&
            k3_image_placeholders(s->content, strlen(s->content))) {
            static int told;                     /* (once a process) */
            if (!told++)
                fprintf(stderr, "k3: note: message %d holds an image mark (%s) without its "
                        "image (a history keeps the places of images, not their pixels; a "
                        "state saved after it keeps them: --load-state); it is rendered "
                        "without the mark\n", i + 1, K3_IMAGE_PLACEHOLDER);
            if (!(own[k - 1] = without_marks(s->content))) rc0 = -1;
            mm[k - 1].content = own[k - 1] ? own[k - 1] : "";
        }
        for (int j = 0; j < s->n_img; j++) img[nimg++] = s->img[j];
    }
    XtmlOpts o = { c->thinking, c->effort, 1, !c->canonical };
    char err[256];
    XtmlSegs sg = { NULL, 0, 0 };
    int rc = rc0 ? (snprintf(err, sizeof err, "out of memory"), -1)
                 : xtml_segments(mm, k, &o, &sg, err, sizeof err);
    if (!rc) rc = k3_image_segs(&sg, img, nimg, err, sizeof err);
    if (!rc && xtml_segs_encode(&sg, c->tok, ids, n)) {
        snprintf(err, sizeof err, "out of memory encoding the chat");
        rc = -1;
    }
    if (!rc && nimg && (rc = k3_image_spans(*ids, *n, c->tok, img, nimg, sp, err, sizeof err))) {
        free(*ids);                              /* the caller frees what it is given */
        *ids = NULL; *n = 0;
    }
    c->embed.span = sp;
    c->embed.n = rc ? 0 : nimg;
    if (rc) fprintf(stderr, "k3: %s\n", err);
    xtml_segs_free(&sg);
    for (int i = 0; i < k; i++) free(own[i]);
    free(own);
    free(img);
    free(mm);
    return rc;
}

/* The rows of the rendered images that have none yet (the tower), into c->embed. */
static int image_rows(Chat *c) {
    char err[1024];
    for (int i = 0; i < c->log.n; i++) {
        ChatMsg *m = &c->log.v[i];
        if (m->n_img && k3_image_rows(&c->ictx, m->img, m->n_img, err, sizeof err)) {
            fprintf(stderr, "k3: %s\n", err);
            return -1;
        }
    }
    int k = 0;               /* spans are in message order, as the rows now are */
    for (int i = 0; i < c->log.n; i++) {
        const int sys = c->log.n && !strcmp(c->log.v[0].role, "system");
        if (i >= sys && i < sys + c->skip) continue;
        for (int j = 0; j < c->log.v[i].n_img && k < c->embed.n; j++)
            c->span[k++].rows = c->log.v[i].img[j].rows;
    }
    k3_sched_embed(c->sch, c->q, &c->embed);    /* (the other ranks get the rows: the tower
                                                 * runs on rank 0 only) */
    return 0;
}

typedef struct {
    Chat *c;
    TokStream think, resp;
    int in_think;        /* the <think> wrapper is open on screen */
    int indicator;       /* "thinking…" is on a terminal's stderr line, to be erased */
} Out;

static void out_bytes(Out *o, const char *b, size_t n, int think) {
    if (think && o->c->hide_thinking) return;
    fwrite(b, 1, n, stdout);
}

static void out_ids(Out *o, const int32_t *ids, int n, int think) {
    for (int i = 0; i < n; i++) {
        const char *b; size_t l;
        if (tok_stream_put(think ? &o->think : &o->resp, o->c->tok, ids[i], &b, &l) == 0)
            out_bytes(o, b, l, think);
    }
    fflush(stdout);
}

static void close_think(Out *o) {
    if (o->indicator) { fputs("\r\033[K", stderr); fflush(stderr); o->indicator = 0; }
    if (!o->in_think) return;
    const char *b; size_t l;
    tok_stream_flush(&o->think, &b, &l);
    out_bytes(o, b, l, 1);
    if (!o->c->hide_thinking) fputs(o->c->color ? "\n</think>" RST "\n" : "\n</think>\n", stdout);
    o->in_think = 0;
}

static const char *state_name(int s) {
    static const char *n[] = { "think", "between channels", "response", "after response",
                               "after message", "done" };
    return s >= 0 && s <= XP_DONE ? n[s] : "?";
}

int chat_turn(Chat *c, const char *user_text) {
    char *with = NULL;                           /* the text with the queued images' places */
    if (c->n_pend) {
        char err[256];
        if (!(with = k3_image_content(user_text, c->n_pend, err, sizeof err))) {
            fprintf(stderr, "k3: %s; the message was not sent\n", err);
            return 1;
        }
    }
    if (chat_log_add(&c->log, "user", with ? with : user_text, NULL)) {
        free(with);
        fprintf(stderr, "k3: out of memory\n"); return -1;
    }
    free(with);
    if (c->n_pend) {                             /* the images go with this message */
        ChatMsg *m = &c->log.v[c->log.n - 1];
        m->img = c->pend; m->n_img = c->n_pend;
        c->pend = NULL; c->n_pend = 0;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (chat_render(c, &ids, &n)) { chat_msg_free(&c->log.v[--c->log.n]); return -1; }
    const int sys = c->log.n && !strcmp(c->log.v[0].role, "system"), skip0 = c->skip;
    while (c->ctx_drop && (long)n + 1 > c->ctx && c->log.n - sys - c->skip > 1) {
        c->skip += 2;                            /* the oldest user message and its reply */
        free(ids); ids = NULL;
        if (chat_render(c, &ids, &n)) {
            c->skip = skip0; chat_msg_free(&c->log.v[--c->log.n]); return -1;
        }
    }
    if ((long)n + 1 > c->ctx) {
        c->skip = skip0;
        fprintf(stderr, "k3: context full: this turn needs %zu positions before the reply, "
                "the limit is %d (max_position_embeddings or --ctx). Nothing was generated; "
                "%s\n", n + 1, c->ctx, c->ctx_drop ? "even with every earlier turn dropped "
                "it does not fit: send a shorter message or raise --ctx" : "/reset starts "
                "over, keeping the system message, or run with --context-full drop-oldest.");
        free(ids);
        chat_msg_free(&c->log.v[--c->log.n]);
        return 1;
    }
    if (c->skip > skip0) {
        fprintf(stderr, "k3: context full: dropped the oldest %d turn%s (%d messages; %d "
                "dropped in all) to fit %zu positions in %d; the system message is kept and "
                "the history file still holds them\n", (c->skip - skip0) / 2,
                s_((c->skip - skip0) / 2), c->skip - skip0, c->skip, n + 1, c->ctx);
        c->reprefill_why = "the oldest turns were dropped to fit the context (--context-full)";
    }
    /* Prefix reuse: the state holds fed[0..nfed); keep it only if the new render extends it. */
    size_t reuse = 0;
    if (c->nfed && c->nfed < n && !memcmp(ids, c->fed, sizeof *ids * c->nfed)) reuse = c->nfed;
    else if (c->nfed) {
        size_t d = 0;
        while (d < c->nfed && d < n && ids[d] == c->fed[d]) d++;
        if (c->reprefill_why)
            fprintf(stderr, "k3: re-prefilling %zu tokens: %s\n", n, c->reprefill_why);
        else
            fprintf(stderr, "k3: re-prefilling %zu tokens: the conversation now renders "
                    "differently from the %zu positions the state holds (from position %zu), "
                    "and the state cannot roll back\n", n, c->nfed, d);
        chat_forget_state(c);
        c->reprefills++;
    } else if (c->reprefill_why) fprintf(stderr, "k3: prefilling %zu tokens: %s\n", n,
                                         c->reprefill_why);
    c->reprefill_why = NULL;
    chat_interrupted = 0;
    double t0 = k3_now();
    if (c->embed.n && image_rows(c)) {
        free(ids); chat_msg_free(&c->log.v[--c->log.n]);
        return -1;
    }
    if (!c->embed.n && c->st->embed) k3_sched_embed(c->sch, c->q, NULL);   /* none now */
    int fr = forward(c, ids + reuse, n - reuse, 1);
    if (fr) {
        long done = (long)c->st->pos - (long)reuse;      /* whole chunks the state took in */
        free(ids); chat_msg_free(&c->log.v[--c->log.n]); chat_forget_state(c);
        if (fr < 0) return -1;
        fprintf(stderr, "\nk3: interrupted (Ctrl-C) during the prefill, after %ld of %zu "
                "tokens: the message was not sent (nothing generated or stored)\n",
                done > 0 ? done : 0, n - reuse);
        c->reprefill_why = "the interrupted prefill left the cached state partial, so it "
                           "was dropped";
        return 1;
    }
    double tp = k3_now() - t0;
    c->last_reused = (long)reuse; c->last_prefill = (long)(n - reuse); c->last_tp = tp;
    c->tot_reused += (long)reuse; c->tot_prefill += (long)(n - reuse); c->t_prefill += tp;
    free(ids);

    /* Generate. */
    int turn = 0;
    for (int i = 0; i < c->log.n; i++) turn += !strcmp(c->log.v[i].role, "assistant");
    Sampler smp;
    sampler_init(&smp, &c->sp, sampler_turn_seed(c->seed, turn));
    XtmlParser p;
    xtml_parser_init(&p, c->tok, &c->ids, c->thinking);
    Out o = { c, { { 0 }, 0, NULL, 0 }, { { 0 }, 0, NULL, 0 }, 0, 0 };
    tok_stream_init(&o.think); tok_stream_init(&o.resp);
    int32_t *rec = malloc(sizeof *rec * (size_t)(c->gen > 0 ? c->gen : 1));
    int nrec = 0, rc = 0, state_before_end = p.state, ctrl_c = 0;
    const char *why = NULL;
    if (!rec || k3_cons_init(&c->cs, NULL, c->gr) ||
        (c->gr && !c->mask && !(c->mask = malloc(sizeof(float) * (size_t)V0(c)))))
        { fprintf(stderr, "k3: out of memory\n"); rc = -1; }
    if (c->thinking && !c->hide_thinking) {
        fputs(c->color ? DIM "<think>\n" : "<think>\n", stdout); o.in_think = 1;
    }
    else if (c->thinking) {                  /* hidden: say that it is thinking, not silence */
        o.in_think = 1;
        o.indicator = isatty(2);
        fputs(o.indicator ? DIM "thinking…" RST : "k3: thinking… (hidden by --hide-thinking)\n",
              stderr);
        fflush(stderr);
    }
    fflush(stdout);
    double t1 = k3_now();
    int V = c->eng.m.cfg.vocab_size;
    /* --spec: pend[0..np) the last verify pass drew; pend[0..np-1) are in the state (and
     * c->fed) already, `kept` of them went where the plain loop feeds its tokens */
    int pend[65], np = 0, ip = 0, kept = 0;
    const size_t reply0 = c->nfed;
    c->last_passes = c->last_accepted = 0;
    if (c->draft) c->draft0 = *k3_draft_stats(c->draft);
    while (!rc) {
        const int ahead = np ? np - 1 - kept : 0;      /* in the state, not fed in plain */
        if (chat_interrupted) { why = "interrupted (Ctrl-C)"; ctrl_c = 1; break; }
        if (nrec >= c->gen) { why = "reply cut at --gen"; break; }
        if (c->st->pos - ahead >= c->ctx) {
            why = c->ctx_drop ? "context limit reached; the next turn drops the oldest turns"
                              : "context limit reached; /reset to start over";
            break;
        }
        /* the draw of reply position nrec, as the plain loop's sampler_sample makes it */
        int id = ip < np ? pend[ip++] : gr_draw(c, &smp, V, nrec);
        if (id < 0) { rc = -1; break; }
        size_t nb = 0;
        const char *tb = k3_cons_on(&c->cs) && id != c->ids.eom ?
                         tok_token_bytes(c->tok, id, &nb) : NULL;
        if (tb && k3_cons_put(&c->cs, (const unsigned char *)tb, nb)) {
            fprintf(stderr, "\nk3: grammar: token %d was drawn outside the mask\n", id);
            rc = -1; break;
        }
        XtmlEvent ev[2];
        int prev = p.state;
        int ne = xtml_parser_put(&p, id, ev);
        if (ne < 0) { fprintf(stderr, "k3: out of memory\n"); rc = -1; break; }
        int ended = 0;
        for (int e = 0; e < ne; e++) {
            if (ev[e].kind == XE_THINK) out_ids(&o, ev[e].ids, ev[e].n, 1);
            else if (ev[e].kind == XE_RESPONSE) out_ids(&o, ev[e].ids, ev[e].n, 0);
            else if (ev[e].kind == XE_ANOMALY) {
                if (prev == XP_THINK || prev == XP_RESPONSE)
                    out_ids(&o, ev[e].ids, ev[e].n, prev == XP_THINK);
            } else if (ev[e].kind == XE_CHANNEL && p.state == XP_BETWEEN) close_think(&o);
            else if (ev[e].kind == XE_END) ended = 1;
        }
        if (ended) { state_before_end = prev; break; }
        rec[nrec++] = id;
        if (nrec >= c->gen || chat_interrupted) continue;     /* not fed: the loop ends */
        if (ip < np) { kept++; continue; }      /* an accepted draft: in the state already */
        np = ip = kept = 0;
        /* the drafts the plain loop could still feed; a reply that ends (at the context
         * limit, on END, by Ctrl-C) inside accepted drafts rolls the state back below */
        int room = c->gen - nrec - 1;
        const int max_T = k3_sched_max_T(c->sch);                     /* one forward */
        if (room > max_T - 1) room = max_T - 1;
        if (c->spec && room > 0 && spec_step(c, &smp, id, nrec, reply0, room, pend, &np)) {
            rc = -1; break;
        }
        int32_t id32 = id;
        if (!np && forward(c, &id32, 1, 0)) rc = -1;
    }
    if (!rc && np && kept < np - 1) {         /* the reply ended inside accepted drafts */
        if (k3_sched_rollback(c->sch, c->q, 1 + kept)) {
            fprintf(stderr, "k3: the state could not be rolled back\n"); rc = -1;
        }
        if (c->draft) {
            chat_draft_send(c, CHAT_DR_TRUNC, c->st->pos, 0, 0);
            k3_draft_truncate(c->draft, c->st->pos);
        }
        c->nfed -= (size_t)(np - 1 - kept);
    }
    double td = k3_now() - t1;
    int dropped = xtml_parser_finish(&p);
    close_think(&o);
    const char *b; size_t l;
    tok_stream_flush(&o.resp, &b, &l);
    fwrite(b, 1, l, stdout);
    if (c->color) fputs(RST, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    int empty = 0;                           /* no text at all: not stored as a reply */
    if (rc) {
        chat_forget_state(c);
    } else {
        int end_state = p.state == XP_DONE ? state_before_end : p.state;
        char *reasoning = xtml_parser_reasoning(&p), *content = xtml_parser_content(&p);
        empty = reasoning && content && !*reasoning && !*content;
        if (empty) {
            fprintf(stderr, "k3: %s: the reply is empty, so neither it nor the message is "
                    "stored; send it again, or /reset\n",
                    why ? why : "the model ended its reply at once");
            why = NULL;
            c->reprefill_why = "the empty turn was dropped from the conversation";
        } else if (!reasoning || !content ||
            chat_log_add(&c->log, "assistant", content, c->thinking ? reasoning : NULL)) {
            fprintf(stderr, "k3: out of memory\n"); rc = -1;
        } else {
            ChatMsg *m = &c->log.v[c->log.n - 1];
            m->gen_ids = rec; rec = NULL;
            m->n_gen = nrec - dropped;
            m->gen_thinking = c->thinking;
            m->gen_state = end_state;
        }
        const int no_answer = !empty && content && !*content;
        free(reasoning); free(content);
        c->last_gen = nrec; c->last_td = td;
        c->tot_gen += nrec; c->t_decode += td; c->turns += !empty;
        if (p.anomalies)
            fprintf(stderr, "k3: note: %d control-token sequence(s) in the reply were not valid "
                    "XTML structure; kept as text\n", p.anomalies);
        if (why)
            fprintf(stderr, "k3: %s%s (stopped in the %s channel)\n", why,
                    ctrl_c ? "; the partial reply is kept" : "", state_name(end_state));
        if (no_answer && (c->hide_thinking || !why))      /* a cut reply says so already */
            fprintf(stderr, "k3: note: the reply has no answer, only thinking%s\n",
                    c->hide_thinking ? " (hidden by --hide-thinking; drop it to see the "
                                       "thinking)" : "");
        fprintf(stderr, "k3: [reused %ld position%s, prefilled %ld token%s in %.2f s, "
                "generated %d token%s in %.2f s]\n", c->last_reused, s_(c->last_reused),
                c->last_prefill, s_(c->last_prefill), tp, nrec, s_(nrec), td);
        if (c->last_passes)
            fprintf(stderr, "k3: spec: %ld verify pass%s, %ld draft%s accepted (%.2f accepted "
                    "tokens per pass)\n", c->last_passes, c->last_passes == 1 ? "" : "es",
                    c->last_accepted, s_(c->last_accepted),
                    (double)c->last_accepted / c->last_passes);
        if (c->draft) {
            const K3DraftStats *ds = k3_draft_stats(c->draft);
            const long dp = ds->proposed - c->draft0.proposed;
            fprintf(stderr, "k3: draft: %ld block%s, %ld draft%s verified, %ld accepted\n",
                    ds->blocks - c->draft0.blocks, s_(ds->blocks - c->draft0.blocks), dp,
                    s_(dp), ds->accepted - c->draft0.accepted);
        }
    }
    free(rec);
    xtml_parser_free(&p);
    sampler_free(&smp);
    tok_stream_free(&o.think); tok_stream_free(&o.resp);
    if (rc || empty) chat_msg_free(&c->log.v[--c->log.n]);
    return rc ? rc : empty;
}

/* "N tok/s", or "n/a" when there is nothing timed to divide by (a reply's first token
 * comes from the prefill's logits: one token alone times only the sampler) */
static const char *rate(char *b, size_t n, long count, double secs) {
    if (count > 0 && secs > 0) snprintf(b, n, "%.1f tok/s", count / secs);
    else snprintf(b, n, "n/a");
    return b;
}

void chat_print_stats(const Chat *c, FILE *f) {
    char r[4][32];
    fprintf(f, "messages: %d, replies this session: %ld\n", c->log.n, c->turns);
    fprintf(f, "positions: %d in the state (limit %d)\n", c->st->pos, c->ctx);
    fprintf(f, "last turn: reused %ld position%s, prefilled %ld token%s in %.3f s (%s), "
            "generated %ld token%s in %.3f s (%s)\n",
            c->last_reused, s_(c->last_reused), c->last_prefill, s_(c->last_prefill), c->last_tp,
            rate(r[0], 32, c->last_prefill, c->last_tp), c->last_gen, s_(c->last_gen), c->last_td,
            rate(r[1], 32, c->last_gen > 1 ? c->last_gen : 0, c->last_td));
    fprintf(f, "session: prefilled %ld token%s (%s), reused %ld position%s, "
            "generated %ld token%s (%s), re-prefills %ld\n",
            c->tot_prefill, s_(c->tot_prefill), rate(r[2], 32, c->tot_prefill, c->t_prefill),
            c->tot_reused, s_(c->tot_reused), c->tot_gen, s_(c->tot_gen),
            rate(r[3], 32, c->tot_gen > 1 ? c->tot_gen : 0, c->t_decode), c->reprefills);
    fprintf(f, "peak RSS: %.1f MiB\n", k3_peak_rss() / 1048576.0);
    if (sampler_is_greedy(&c->sp)) fprintf(f, "sampling: greedy\n");
    else fprintf(f, "sampling: temperature %g, top-k %d, top-p %g, min-p %g, seed %llu\n",
                 c->sp.temperature, c->sp.top_k, c->sp.top_p, c->sp.min_p,
                 (unsigned long long)c->seed);
    fprintf(f, "thinking: %s\n", c->thinking ? c->effort : "off");
    if (c->draft) {
        const K3DraftStats *ds = k3_draft_stats(c->draft);
        const int dpos = k3_draft_pos(c->draft);
        fprintf(f, "draft: %ld block%s, %ld draft%s verified, %ld accepted, %.3f s in the "
                "draft; its context %s\n", ds->blocks, s_(ds->blocks), ds->proposed,
                s_(ds->proposed), ds->accepted, ds->seconds, dpos == c->st->pos ?
                "covers the state" : "is behind the state (a loaded state): drafts resume "
                "once the conversation is prefilled again");
    }
}
