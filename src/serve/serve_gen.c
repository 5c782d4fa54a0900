/* serve_gen.c — one request on the engine thread of k3 serve, in three parts that the
 * step loop (serve_step.c) drives: serve_gen_begin renders and resumes the prompt,
 * serve_gen_prefill gives the steps its tail (in the room the decoding requests leave, so
 * a new request does not stop the others), serve_gen_token samples and handles one token
 * (the loop feeds the tokens of every request in flight in one k3_forward_seqs),
 * serve_gen_end replies and keeps the states.
 *
 * A chat request is rendered canonically (from the messages' text: the reply is a function
 * of the request alone), then resumed from the kept state whose fed ids are the longest
 * prefix of the render; only the tail is prefilled, in chunks as in batch mode. Two
 * states are kept per request: the one at the prompt's end, with the logits of its last
 * position (a repeat samples from them without a forward; the next turn of the
 * conversation resumes at least the prompt, whatever the re-render of the reply), and the
 * one at the end of the reply. Both hold exactly the ids fed, so the reply is bit-identical
 * to a run from scratch. Kept states are bounded by --state-cache-gb, least recently used
 * evicted first.
 *
 * Sampling and the think/answer split are the REPL's (chat_gen.c): the same sampler, the
 * same XTML parser, the same decoding of each channel (ill-formed UTF-8 -> U+FFFD, NUL
 * dropped). Streamed deltas are cut from that same text, so they concatenate to it. */
#include "serve.h"
#include "roofline.h"
#include "serve_gen.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- kept states ---- */
static size_t kda_len(const K3Config *c) {
    return (size_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim;
}
static size_t conv_len(const K3Config *c) {
    return 3 * (size_t)c->kda_num_heads * c->kda_head_dim * (size_t)(c->short_conv_kernel_size - 1);
}
static size_t state_bytes(const K3Config *c, const K3State *s, size_t nfed) {
    size_t b = nfed * 4 + sizeof *s;
    for (int L = 0; L < c->num_hidden_layers; L++)
        b += c->is_kda[L] ? 4 * (kda_len(c) + conv_len(c))
                          : 4 * (size_t)s->cap * (size_t)(c->kv_lora_rank + c->qk_rope_head_dim);
    return b;
}

static int forget_files = 1;              /* 0 at shutdown: the files outlive the process */
static void kept_free(Server *s, Kept *k) {
    if (!k) return;
    if (forget_files) serve_disk_forget(s, k->file);
    k3_sched_free(s->sch, k->st);                 /* (and the other ranks' copy) */
    free(k->fed); free(k->logits); free(k->draft.rows);
    free(k);
}

void serve_cache_free(Server *s) {
    forget_files = 0;
    while (s->kept) { Kept *k = s->kept; s->kept = k->next; kept_free(s, k); }
    s->kept_bytes = 0;
}

static void unlink_kept(Server *s, Kept *k) {
    for (Kept **p = &s->kept; *p; p = &(*p)->next)
        if (*p == k) { *p = k->next; s->kept_bytes -= k->bytes; return; }
}

/* Takes ownership of st, fed[0..n), logits (the row of the last position, or NULL) and the
 * draft's context d (NULL or no rows: none). Drops an entry with the same ids, then the
 * least recently used until the cache fits. */
static void keep(Server *s, K3State *st, int32_t *fed, size_t n, float *logits,
                 const char *file, KeptDraft *d) {
    size_t cap = (size_t)(s->cache_gb * 1e9);
    Kept *k = calloc(1, sizeof *k);
    if (!k) {
        k3_sched_free(s->sch, st); free(fed); free(logits); serve_disk_forget(s, file);
        if (d) { free(d->rows); d->rows = NULL; }
        return;
    }
    k->st = st; k->fed = fed; k->nfed = n; k->logits = logits; k->used = ++s->clock;
    if (d) { k->draft = *d; d->rows = NULL; }
    snprintf(k->file, sizeof k->file, "%s", file);
    k->bytes = state_bytes(&s->eng.m.cfg, st, n) +
               (logits ? 4 * (size_t)s->eng.m.cfg.vocab_size : 0) +
               (k->draft.rows ? 4 * k->draft.n : 0);
    for (Kept *o = s->kept; o; o = o->next)
        if (o->nfed == n && !memcmp(o->fed, fed, 4 * n)) {
            if (o->logits && !logits) { kept_free(s, k); return; }   /* the one with a row */
            if (!strcmp(o->file, k->file)) o->file[0] = 0;     /* just rewritten: stays */
            unlink_kept(s, o); kept_free(s, o); break;
        }
    if (k->bytes > cap) { kept_free(s, k); return; }
    while (s->kept && s->kept_bytes + k->bytes > cap) {
        Kept *lru = s->kept;
        for (Kept *o = s->kept; o; o = o->next) if (o->used < lru->used) lru = o;
        unlink_kept(s, lru);
        kept_free(s, lru);
    }
    k->next = s->kept; s->kept = k; s->kept_bytes += k->bytes;
}

void serve_keep_file(Server *s, void *st, int32_t *fed, size_t n, float *logits,
                     const char *file, KeptDraft *d) {
    keep(s, st, fed, n, logits, file, d);
}

/* The kept state with the longest fed prefix of ids[0..n): one that holds all n ids needs
 * its logits row (the first token is sampled from it), a shorter one feeds the rest. NULL
 * when none. The caller advances a copy. */
static Kept *find_kept(Server *s, const int32_t *ids, size_t n) {
    Kept *best = NULL;
    for (Kept *k = s->kept; k; k = k->next)
        if ((k->nfed < n || (k->nfed == n && k->logits)) &&
            (!best || k->nfed > best->nfed) && !memcmp(k->fed, ids, 4 * k->nfed))
            best = k;
    return best;
}

/* The request's images: decoded, preprocessed and through the tower (the engine thread's
 * time: images are rare and the tower is small beside the prefill they cause; over MPI
 * ranks on rank 0 only, its rows sent with k3_sched_embed). 0, or the
 * status (400: a bad image or no tower; 500) with g->err. */
static K3ImageCtx g_ictx;                  /* the vision tower, opened on first use */
static int gen_images(Server *s, Gen *g) {
    const ServeReq *r = &g->j->req;
    if (!(g->img = calloc((size_t)r->n_img, sizeof *g->img)) ||
        !(g->span = calloc((size_t)r->n_img, sizeof *g->span)))
        return snprintf(g->err, sizeof g->err, "out of memory"), 500;
    for (int k = 0; k < r->n_img; k++, g->n_img++) {
        char name[48];
        snprintf(name, sizeof name, "image %d", k + 1);
        int rc = k3_image_in(r->img[k], r->img_n[k], name, s->tok, &g->img[k], g->err,
                             sizeof g->err);
        if (rc) return rc == K3_ERR_RUNTIME && strstr(g->err, "out of memory") ? 500 : 400;
    }
    if (k3_image_admit(g->img, g->n_img, NULL, k3_mem_vision_patches(s->eng.mem), 1, g->err,
                       sizeof g->err))
        return 400;                        /* over what the memory plan holds */
    g_ictx.dir = s->eng.m.dir;
    g_ictx.hidden = s->eng.m.cfg.hidden_size;
    g_ictx.quiet = 1;
    int rc = k3_image_rows(&g_ictx, g->img, g->n_img, g->err, sizeof g->err);
    return rc == K3_ERR_USAGE ? 400 : rc ? 500 : 0;
}

/* The images' positions in the prompt: their rows there (g->emb), and in the ids the server
 * keeps, at each image's pads, ids drawn from the image bytes' hash: the pads' embedding is
 * never read (the rows replace it), so the ids are free to be the key that makes a kept state
 * or a state file match only a prompt with the same pixels. */
static int image_spans(Server *s, Gen *g, int32_t *ids, size_t n, char *err, size_t errlen) {
    if (k3_image_spans(ids, n, s->tok, g->img, g->n_img, g->span, err, errlen)) return -1;
    const uint64_t V = (uint64_t)s->eng.m.cfg.vocab_size;
    for (int k = 0; k < g->n_img; k++) {
        uint64_t h = g->img[k].hash;
        for (int i = 0; i < g->span[k].len; i++) {
            h = k3_hash(h, &i, sizeof i);
            ids[g->span[k].pos0 + i] = (int32_t)(h % V);
        }
    }
    g->emb.span = g->span;
    g->emb.n = g->n_img;
    return 0;
}

/* The prompt as ids: the rendered chat, or a copy of the completion's prompt pr (its ids
 * made by serve_req_prompt_ids). */
static int prompt_ids(Server *s, Gen *g, const ServeReq *r, const ServePrompt *pr,
                      int32_t **ids, size_t *n, char *err, size_t errlen) {
    if (r->kind == REQ_COMPLETION) {
        if (!(*ids = malloc(4 * pr->n_ids))) {
            snprintf(err, errlen, "out of memory"); return -1;
        }
        memcpy(*ids, pr->ids, 4 * pr->n_ids);
        *n = pr->n_ids;
        return 0;
    }
    XtmlOpts o = { r->thinking, r->effort, 1, 0 };
    XtmlTools tl = { r->tools_json, r->tool_choice, r->ext };
    if (!g->n_img)
        return xtml_render_ids_tools(s->tok, r->msgs, r->n_msgs, &o, &tl, ids, n, err, errlen);
    XtmlSegs sg = { NULL, 0, 0 };
    int rc = xtml_segments_tools(r->msgs, r->n_msgs, &o, &tl, &sg, err, errlen) ||
             k3_image_segs(&sg, g->img, g->n_img, err, errlen);
    if (!rc && xtml_segs_encode(&sg, s->tok, ids, n)) {
        snprintf(err, errlen, "out of memory encoding the chat");
        rc = 1;
    }
    xtml_segs_free(&sg);
    if (!rc && image_spans(s, g, *ids, *n, err, errlen)) {
        free(*ids);
        rc = 1;
    }
    return rc ? -1 : 0;
}

static int fed_push(int32_t **v, size_t *n, size_t *cap, int32_t id) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        int32_t *nv = realloc(*v, sizeof *nv * nc);
        if (!nv) return -1;
        *v = nv; *cap = nc;
    }
    (*v)[(*n)++] = id;
    return 0;
}

static uint64_t draw_seed(Server *s, uint64_t id) {
    uint64_t x = (uint64_t)time(NULL) ^ (id << 32) ^ (uint64_t)(k3_now() * 1e9) ^ s->clock;
    return k3_splitmix64(&x) % 10000000000ULL;
}

static void gen_free(Gen *g) {
    if (g->q && g->q->st) g->q->st->embed = NULL;
    if (g->q) k3_sched_leave(g->s->sch, g->q);
    for (int k = 0; k < g->n_img; k++) k3_image_in_free(&g->img[k]);
    free(g->img); free(g->span);
    if (g->pst) k3_sched_free(g->s->sch, g->pst);
    free(g->plogits); free(g->logits); free(g->fed); free(g->out);
    free(g->text[0]); free(g->text[1]);
    serve_lp_free(&g->lp); serve_lp_free(&g->plp);
    free(g->mask); free(g->prow); free(g->pdraft.rows); k3_cons_free(&g->cs);
    buf_free(&g->r_acc);
    xtml_parser_free(&g->xp);
    sampler_free(&g->smp);
    free(g);
}

/* Resumes the longest kept prefix; the rest of the prompt is left to the steps
 * (serve_gen_prefill). 0, or -1 with g->err. */
static int resume(Server *s, Gen *g) {
    const K3Model *m = &s->eng.m;
    const size_t V = (size_t)m->cfg.vocab_size, n = g->n;
    if (!(g->q = k3_sched_join(s->sch, g)))
        return snprintf(g->err, sizeof g->err, "out of memory"), -1;
    Kept *k = g->j->req.echo ? NULL : find_kept(s, g->fed, n);   /* echo: every row */
    if (k) {                              /* a copy: the kept one stays for other branches */
        if (k3_sched_load(s->sch, g->q, k->st, g->err, sizeof g->err)) return -1;
        g->reuse = k->nfed;
        g->from = k;                      /* --draft: its context (serve_draft_begin) */
        k->used = ++s->clock;
        if (g->reuse == n) {              /* the whole prompt: sampled from the kept row */
            memcpy(g->logits, k->logits, 4 * V);
            g->pf = n;
            return 0;
        }
    }
    g->pf = g->reuse;
    if (g->n_img) k3_sched_embed(s->sch, g->q, &g->emb);   /* the rows at their positions
                                                            * (and on the other ranks) */
    g->q->ids = (const int *)g->fed + g->pf;          /* the steps take it in the room left */
    g->q->n = (int)(g->nprompt - g->pf);
    g->q->all_logits = g->j->req.echo && g->j->req.logprobs;
    return 0;
}

int serve_gen_prefilling(const Gen *g) { return g->pf < g->nprompt; }

int serve_gen_prefill(Gen *g) {
    if (g->fail) return -1;
    const int lead_over = g->waiting && g->j->lead_over[g->choice / g->j->req.n_choices];
    if (g->gone || http_peer_gone(g->j->fd) || lead_over) {
        g->gone = 1;
        return -1;
    }
    if (g->j->req.api && g->j->req.stream) serve_anth_head(g);   /* pings while it waits */
    return 0;
}

/* Choice 0's prompt is in: the choices waiting for it start from a copy of its state and
 * its row (the same bits as their own prefill would give). */
static void give_prompt(Gen *g) {
    Job *j = g->j;
    const size_t V = (size_t)g->s->eng.m.cfg.vocab_size;
    K3State *st = g->pst;
    for (int i = g->choice + 1; i < g->choice + j->req.n_choices; i++) {   /* its prompt's */
        Gen *f = j->gen[i];
        if (!f || !f->waiting) continue;
        if (!st && !(st = k3_sched_copy(g->s->sch, g->q, f->err, sizeof f->err))) {
            f->fail = 1; continue;
        }
        if (k3_sched_load(g->s->sch, f->q, st, f->err, sizeof f->err)) { f->fail = 1; continue; }
        memcpy(f->logits, g->logits, 4 * V);
        f->pf = f->reuse = f->nprompt; f->waiting = 0;
        serve_gen_stream_head(f);
    }
    if (st && st != g->pst) k3_sched_free(g->s->sch, st);
}

/* A refusal at the start of choice c: the job's reply for the first, else kept for the
 * end (another choice has begun). */
static Gen *begin_fail(Gen *g, int c, int status, const char *msg, int keep_alive) {
    Job *j = g->j;
    if (!c) serve_gen_job_error(j, status, msg, keep_alive);
    else if (!j->err[0]) snprintf(j->err, sizeof j->err, "%s", msg);
    if (status != 400) j->failed = 1;
    gen_free(g);
    return NULL;
}

Gen *serve_gen_begin(Server *s, Job *j, int choice) {
    ServeReq *r = &j->req;
    Gen *g = calloc(1, sizeof *g);
    if (!g) {
        if (!choice) serve_gen_job_error(j, 500, "out of memory", 0);
        else snprintf(j->err, sizeof j->err, "out of memory");
        j->failed = 1; return NULL;
    }
    if (!choice) j->created = (long)time(NULL);
    g->s = s; g->j = j; g->created = j->created; g->choice = choice;
    g->obj = r->kind == REQ_CHAT ? "chat.completion" : "text_completion";
    snprintf(g->id, sizeof g->id, "%s-%llu", r->kind == REQ_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)j->id);
    g->thinking = r->kind == REQ_CHAT && r->thinking;
    for (int i = 0; i < r->n_stop; i++)
        if (r->stop_len[i] > g->maxstop) g->maxstop = r->stop_len[i];
    if (!choice && !r->seed_set) j->seed0 = draw_seed(s, j->id);
    /* choice j of a prompt draws as n: 1 with seed + j would */
    const int nn = r->n_choices, lead_i = choice - choice % nn;
    sampler_init(&g->smp, &r->sp, (r->seed_set ? r->seed : j->seed0) + (uint64_t)(choice % nn));
    xtml_parser_init(&g->xp, s->tok, &s->ids, r->thinking);
    if (r->parse_tools) xtml_parser_tools(&g->xp);
    if (r->kind == REQ_CHAT) g->p = &g->xp;
    g->logits = malloc(4 * (size_t)s->eng.m.cfg.vocab_size);
    if (r->jg || r->gr || r->n_strict) {
        if (k3_cons_init(&g->cs, r->jg, r->gr) ||
            !(g->mask = malloc(4 * (size_t)s->eng.m.cfg.vocab_size))) { free(g->logits);
                                                                        g->logits = NULL; }
    }
    const int st = !choice && r->kind == REQ_COMPLETION
                       ? serve_req_prompt_ids(r, s->tok, s->ctx, g->err, sizeof g->err) : 0;
    if (st) return begin_fail(g, choice, st, g->err, st == 400 ? j->keep_alive : 0);
    if (r->kind == REQ_COMPLETION) g->pr = &r->prompts[choice / nn];
    const int ist = r->n_img && r->kind == REQ_CHAT ? gen_images(s, g) : 0;
    if (ist) return begin_fail(g, choice, ist, g->err, ist == 400 ? j->keep_alive : 0);
    if (!g->logits || prompt_ids(s, g, r, g->pr, &g->fed, &g->n, g->err, sizeof g->err))
        return begin_fail(g, choice, 500, g->logits ? g->err : "out of memory", j->keep_alive);
    g->capfed = g->nprompt = g->n;
    g->cap = r->max_tokens > 0 && r->max_tokens < s->max_tokens ? r->max_tokens : s->max_tokens;
    if (r->no_tokens) g->cap = 0;
    if (r->kind == REQ_COMPLETION && !r->echo) g->lp_off = g->pr->len;  /* text_offset */
    if (r->echo && r->logprobs && serve_lp_push(&g->plp, NULL, 0, g->fed[0], 0, LP_NULL))
        return begin_fail(g, choice, 500, "out of memory", 0);
    if ((long)g->n + 1 > s->ctx) {
        snprintf(g->err, sizeof g->err, "the prompt is %zu tokens; with the reply it needs more "
                 "than the context of %d positions (k3 serve --ctx)", g->n, s->ctx);
        return begin_fail(g, choice, 400, g->err, j->keep_alive);     /* stays open */
    }
    if (sampler_check_vocab(&r->sp, s->eng.m.cfg.vocab_size, "'logit_bias'", g->err,
                            sizeof g->err))
        return begin_fail(g, choice, 400, g->err, j->keep_alive);
    Gen *lead = j->gen[lead_i];
    if (choice > lead_i && lead && serve_gen_prefilling(lead)) {   /* its prompt's first's */
        if (!(g->q = k3_sched_join(s->sch, g))) return begin_fail(g, choice, 500,
                                                                  "out of memory", 0);
        g->waiting = 1;
    } else if (resume(s, g)) {
        fprintf(stderr, "k3: serve: request %llu: %s\n", (unsigned long long)j->id, g->err);
        return begin_fail(g, choice, 500, g->err, 0);
    }
    j->gen[choice] = g; j->started++; j->left++;
    serve_draft_begin(g);                     /* --draft: from position 0 only */
    if (!serve_gen_prefilling(g)) serve_gen_stream_head(g);
    return g;
}

Job *serve_gen_job(const Gen *g) { return g->j; }

/* The next id from g's row: in JSON mode from the row with what may not come next masked
 * (json_gram.h), the reply's bytes fed to the validator. -1 with g->err, or out of memory. */
static int sample(Server *s, Gen *g) {
    const ServeReq *r = &g->j->req;
    const int V = s->eng.m.cfg.vocab_size;
    const int end = g->in_args ? s->ids.close
                  : r->kind == REQ_CHAT ? s->ids.eom : s->eng.m.cfg.eos_token_id;
    if (!k3_cons_on(&g->cs)) return sampler_sample(&g->smp, g->logits, V);
    memcpy(g->mask, g->logits, 4 * (size_t)V);
    if (!k3_cons_mask(&g->cs, s->tok, V, end, g->mask)) {
        snprintf(g->err, sizeof g->err, "%s: no token can continue the reply",
                 k3_cons_name(&g->cs));
        return -1;
    }
    int id = sampler_sample(&g->smp, g->mask, V);
    size_t n = 0;
    const char *b = id >= 0 && id != end ? tok_token_bytes(s->tok, id, &n) : NULL;
    if (b && k3_cons_put(&g->cs, (const unsigned char *)b, n)) {
        snprintf(g->err, sizeof g->err, "%s: token %d was drawn outside the mask (its "
                 "logits are all -inf or NaN)", k3_cons_name(&g->cs), id);
        return -1;
    }
    return id;
}

/* ---- strict tools (docs/SERVE.md "Strict tools") ----
 * Once the model has opened a call of a strict tool (<|open|>call tool="NAME" ..<|sep|>),
 * the server writes the opening of a json block, the tool's compiled schema constrains the
 * arguments up to the <|close|> it allows only at their end, and the server closes the
 * block and the call. The forced ids are the server's; every other id is sampled. */
static int force(Server *s, Gen *g, const char *markup) {
    size_t n = 0;
    int32_t *ids = tok_encode(s->tok, markup, strlen(markup), 1, &n);
    const int ok = ids && n <= sizeof g->force / sizeof *g->force;
    if (ok) memcpy(g->force, ids, 4 * n);
    free(ids);
    g->n_force = ok ? (int)n : 0; g->i_force = 0;
    return ok ? 0 : -1;
}

/* After id: starts, arms or ends the arguments' constraint. -1 when out of memory. */
static int strict_after(Server *s, Gen *g, int id) {
    const ServeReq *r = &g->j->req;
    const XtmlParser *p = &g->xp;
    if (!r->n_strict || g->i_force < g->n_force) return 0;
    if (g->in_args) {
        if (id != s->ids.close) return 0;
        g->in_args = 0; k3_cons_free(&g->cs);
        return force(s, g, "json<|sep|><|close|>call<|sep|>");
    }
    if (g->arm) {                                   /* the opening is out: the arguments */
        const JgSchema *jg = g->arm;
        g->arm = NULL;
        if (k3_cons_init(&g->cs, jg, NULL)) return -1;
        g->in_args = 1;
        return 0;
    }
    if (p->state == XP_CALL && p->n_calls > g->calls_seen) {  /* a call's header, just now */
        g->calls_seen = p->n_calls;
        if ((g->arm = serve_strict_schema(r, p->calls[p->n_calls - 1].name)))
            return force(s, g, "<|open|>json type=\"object\"<|sep|>");
    }
    return 0;
}

/* The reply is at max_tokens (the server's cap included) or the context's end: 0. */
static int out_of_room(Gen *g) { g->why = g->ngen >= g->cap ? K3STOP_LENGTH : K3STOP_CONTEXT;
                                 return 0; }

void serve_gen_stopping(Gen *g) { g->why = K3STOP_INTERRUPTED; g->j->interrupted = 1; }

/* K3_SERVE_TEST_HOLD (a test hook): the reply waits here, the engine with it, until its
 * client goes away (1, g gone) or the server stops (1, interrupted), so a test can act on a
 * reply that cannot end by itself. */
static int hold(Server *s, Gen *g) {
    fprintf(stderr, "k3: serve: request %llu holds after %d tokens (K3_SERVE_TEST_HOLD)\n",
            (unsigned long long)g->j->id, g->ngen);
    for (;;) {
        if (http_peer_gone(g->j->fd)) { g->gone = 1; return 1; }
        if (*s->stop) { serve_gen_stopping(g); return 1; }
        struct timespec ts = { 0, 20000000L };
        nanosleep(&ts, NULL);
    }
}

/* One token: 1 fed next, 0 g is over, 2 an accepted draft (already in the state: the
 * next token a verify pass drew follows at once). */
static int token_one(Server *s, Gen *g) {
    const ServeReq *r = &g->j->req;
    if (g->fail) return 0;
    if (g->gone || http_peer_gone(g->j->fd)) { g->gone = 1; return 0; }
    if (s->test_hold && g->ngen >= s->test_hold && hold(s, g)) return 0;
    const int pend = g->i_pend < g->n_pend;   /* drawn by a verify pass (serve_draft.c) */
    const long pos = pend ? (long)g->n : g->q->st->pos;   /* where a plain run would be */
    if (g->ngen >= g->cap || pos >= s->ctx) return out_of_room(g);
    /* (with strict tools the test hook's ids stand for the model's free choices only) */
    int id = pend ? serve_draft_next(g)
                  : g->i_force < g->n_force ? g->force[g->i_force++]
                  : s->test_reply && !g->in_args
                        ? (g->ntest < s->n_test_reply ? s->test_reply[g->ntest++] : s->ids.eom)
                        : sample(s, g);
    if (id < 0) { g->fail = 1; if (!g->err[0]) snprintf(g->err, sizeof g->err, "out of memory");
                  return 0; }
    g->ngen++;
    if (g->ngen == 1) g->j->t_first = k3_now();          /* the request log's TTFT */
    const int V = s->eng.m.cfg.vocab_size;
    if (r->kind == REQ_CHAT) {
        XtmlParser *p = &g->xp;
        XtmlEvent ev[2];
        const size_t nr = p->n_resp, nt = p->n_think;
        int ne = xtml_parser_put(p, id, ev);
        if (ne < 0 || strict_after(s, g, id)) {
            g->fail = 1; snprintf(g->err, sizeof g->err, "out of memory"); return 0;
        }
        if (r->logprobs && serve_lp_push(&g->lp, g->logits, V, id, r->top_logprobs,
                                         p->n_resp > nr ? 1 : p->n_think > nt ? 0 : -1)) {
            g->fail = 1; snprintf(g->err, sizeof g->err, "out of memory"); return 0;
        }
        for (int e = 0; e < ne; e++) g->ended |= ev[e].kind == XE_END;
        if (g->ended) { g->why = K3STOP_EOS; return 0; }
        if (g->thinking) serve_gen_update(g, 0, p->think_ids, p->n_think, 0);
        g->hit = serve_gen_update(g, 1, p->resp_ids, p->n_resp, 0);
        if (!g->hit && p->state >= XP_AFTER_RESPONSE && p->state != XP_DONE) {
            /* the answer is settled: all of it goes before the first tool call */
            if (r->stream && !g->settled) serve_gen_update(g, 1, p->resp_ids, p->n_resp, 1);
            g->settled = 1;
            serve_gen_tool_deltas(g);
        }
    } else {
        if (id == s->eng.m.cfg.eos_token_id) { g->ended = 1; g->why = K3STOP_EOS; return 0; }
        if (fed_push(&g->out, &g->nout, &g->capout, id) ||
            (r->logprobs && serve_lp_push(&g->lp, g->logits, V, id, r->top_logprobs, 1))) {
            g->fail = 1; snprintf(g->err, sizeof g->err, "out of memory"); return 0;
        }
        g->hit = serve_gen_update(g, 1, g->out, g->nout, 0);
    }
    if (g->hit) { g->why = K3STOP_STRING; return 0; }
    if (g->ngen >= g->cap || pos + 1 > s->ctx) return out_of_room(g);   /* not fed */
    if (fed_push(&g->fed, &g->n, &g->capfed, id)) {
        g->fail = 1; snprintf(g->err, sizeof g->err, "out of memory"); return 0;
    }
    g->fed_id = id;
    if (g->i_pend < g->n_pend) return 2;      /* an accepted draft: in the state */
    g->n_pend = g->i_pend = 0;
    serve_draft_feed(g, id);                  /* it, and drafts where the step has room */
    return 1;
}

int serve_gen_token(Server *s, Gen *g) {
    int rc;
    while ((rc = token_one(s, g)) == 2) {}
    return rc;
}

void serve_gen_fed(Gen *g, int T, const float *row, const float *taps) {
    const size_t V = (size_t)g->s->eng.m.cfg.vocab_size;
    const int was = serve_gen_prefilling(g);
    const int v = serve_draft_fed(g, T, row, taps, was);   /* --draft: its context */
    if (v < 0) g->fail = 1;
    if (v) return;                            /* a verify pass: its tokens are pending */
    if (was && g->q->all_logits) {        /* echo: row t scores the prompt's next id */
        for (int t = 0; t < T && g->pf + (size_t)t + 1 < g->nprompt; t++)
            if (serve_lp_push(&g->plp, row + (size_t)t * V, (int)V, g->fed[g->pf + t + 1],
                              g->j->req.top_logprobs, 1))
                g->gone = 1;              /* (out of memory: the reply is not sent) */
        row += (size_t)(T - 1) * V;
    }
    if (was && (g->pf += (size_t)T) < g->nprompt) return;
    memcpy(g->logits, row, 4 * V);
    if (!was) return;
    serve_gen_stream_head(g);
    if (g->s->cache_gb > 0) {             /* the prompt's end, kept when the reply is done */
        char err[256];
        g->pst = k3_sched_copy(g->s->sch, g->q, err, sizeof err);
        if (!g->pst) fprintf(stderr, "k3: serve: the prompt's state is not kept: %s\n", err);
        g->plogits = g->pst ? malloc(4 * V) : NULL;
        if (g->plogits) memcpy(g->plogits, g->logits, 4 * V);
        if (g->pst) g->pdraft = serve_draft_copy(g, g->nprompt);   /* --draft: its context */
    }
    if (g->j->req.n_choices > 1) give_prompt(g);
}

int serve_gen_end(Server *s, Gen *g, const char *fail_err) {
    Job *j = g->j;
    const ServeReq *r = &j->req;
    if (fail_err && !g->fail) { g->fail = 1; snprintf(g->err, sizeof g->err, "%s", fail_err); }
    const char *finish = "length";
    if (g->ended || g->hit) finish = "stop";
    if (g->ended && serve_gen_calls_done(g)) finish = "tool_calls";
    if (!g->fail && !g->hit) {
        xtml_parser_finish(&g->xp);
        if (r->kind == REQ_CHAT) {
            if (g->thinking) serve_gen_update(g, 0, g->xp.think_ids, g->xp.n_think, 1);
            serve_gen_update(g, 1, g->xp.resp_ids, g->xp.n_resp, 1);
        } else serve_gen_update(g, 1, g->out, g->nout, 1);
    }
    if (g->hit && g->thinking && !g->text[0])
        serve_gen_update(g, 0, g->xp.think_ids, g->xp.n_think, 1);
    if (g->fail) {
        fprintf(stderr, "k3: serve: request %llu: %s\n", (unsigned long long)j->id, g->err);
        if (r->stream && j->head_sent) j->cut = 1;    /* cut without [DONE] */
        if (j->cut && r->api) serve_anth_fail(g);     /* (Anthropic's: an error event) */
        else if (!j->err[0])                          /* (before its head: a plain 500) */
            snprintf(j->err, sizeof j->err, "%s", g->err);
        j->failed = 1;
    } else {
        char file[64];                                /* kept (and saved) first: a client
                                                       * that has its reply may restart us */
        if (g->pst) {                                 /* the prompt's end, with its row */
            int32_t *f2 = malloc(4 * g->nprompt);
            if (f2) {
                memcpy(f2, g->fed, 4 * g->nprompt);
                serve_disk_save(s, f2, g->nprompt, g->pst, g->plogits, &g->pdraft, file);
                keep(s, g->pst, f2, g->nprompt, g->plogits, file, &g->pdraft);
                g->pst = NULL; g->plogits = NULL;
            }
        }
        /* the reply's end (never one out of step; with no token fed it is the prompt's) */
        K3State *st = NULL;
        char err[256];
        if ((size_t)g->q->st->pos == g->n && g->n > g->nprompt && s->cache_gb > 0 &&
            !(st = k3_sched_take(s->sch, g->q, err, sizeof err)))
            fprintf(stderr, "k3: serve: the reply's state is not kept: %s\n", err);
        if (st) {
            KeptDraft d = serve_draft_copy(g, g->n);
            serve_disk_save(s, g->fed, g->n, st, NULL, &d, file);
            keep(s, st, g->fed, g->n, NULL, file, &d);
            g->fed = NULL;
        }
        if (!g->gone && !j->gone && !j->cut) serve_gen_reply(g, finish);
    }
    if (g->choice % r->n_choices == 0) {             /* its prompt's first: counted once */
        j->lead_over[g->choice / r->n_choices] = 1;
        j->cached += (long)g->reuse; j->n_prompt += (long)g->nprompt;
    }
    j->n_gen += g->ngen;                             /* the request log, the usage */
    j->drafted += g->sp.drafted; j->accepted += g->sp.accepted;
    j->gen[g->choice] = NULL;
    const int last = --j->left == 0;
    if (last) {                                       /* the job's reply is complete */
        if (j->err[0] && !j->cut) serve_gen_job_error(j, 500, j->err, 0);
        else if (!g->gone && !j->gone && !j->cut)
            serve_gen_reply_end(g, j->n_prompt, j->n_gen, j->cached);
        for (int i = 0; i < serve_req_choices(r); i++) { free(j->choice[i]); j->choice[i] = NULL; }
    }
    pthread_mutex_lock(&s->mu);
    s->st.prompt_tokens += (long)g->nprompt; s->st.completion_tokens += g->ngen;
    s->st.prefilled += (long)(g->nprompt - g->reuse); s->st.cached += (long)g->reuse;
    s->st.prefill_flops += k3_flops(&s->eng.m.cfg, (long)g->reuse, (long)(g->nprompt - g->reuse),
                                    1);
    if (g->reuse) s->st.cache_hits++; else s->st.cache_misses++;
    if (g->gone) s->st.disconnects++;
    s->st.draft_blocks += g->sp.passes;
    s->st.drafted += g->sp.drafted; s->st.accepted += g->sp.accepted;
    pthread_mutex_unlock(&s->mu);
    if (g->gone) j->failed = j->gone = 1;
    gen_free(g);
    return last;
}
