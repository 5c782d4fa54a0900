/* serve_step.c — the engine loop of k3 serve: up to --max-batch requests in flight, fed
 * together by the engine's scheduler (scheduler.h). Each step feeds one token of every
 * decoding request and, in the room left (the plan's chunk), the next prompt ids of the
 * requests still prefilling, all in one k3_forward_seqs: each trunk piece and selected
 * expert is read once for all of them, and a new request does not stop the others while
 * its prompt goes in; where their states do not fit they are paged through a state file.
 * Every sequence gets the bits of its solo forward (any chunking gives the same bits) and
 * draws from its own sampler, so each reply is byte-identical to its run alone. A finished
 * or disconnected request leaves the step at once and its client is answered. */
#include "serve.h"
#include "draft_loop.h"
#include "util.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The job to its connection thread, and the kept-state gauges. */
static void job_done(Server *s, Job *j) {
    pthread_mutex_lock(&s->mu);
    s->st.requests++;
    long kn = 0;
    for (Kept *k = s->kept; k; k = k->next) kn++;
    s->st.kept_n = kn; s->st.kept_bytes = (long)s->kept_bytes;
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&s->mu);
}

static void end(Server *s, Gen *g, const char *fail_err) {
    Job *j = serve_gen_job(g);
    if (serve_gen_end(s, g, fail_err)) job_done(s, j);
}

/* Waits for a job while none is in flight; otherwise only looks. NULL: none (yet). */
static Job *next_job(Server *s, int idle, volatile sig_atomic_t *stop) {
    pthread_mutex_lock(&s->mu);
    while (idle && !s->qhead && !*stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&s->qcv, &s->mu, &ts);
    }
    Job *j = s->qhead;
    if (j) { s->qhead = j->next; if (!s->qhead) s->qtail = NULL; s->qlen--; }
    pthread_mutex_unlock(&s->mu);
    return j;
}

/* Inside a step (k3_halted calls it every 0.1 s): the prefill gauges for /metrics, and
 * when every request in flight has gone away, the step stops inside its layer (a step
 * that holds another client's rows runs on: stopping it would spoil that client's state). */
typedef struct { Server *s; Gen **act; int n; volatile sig_atomic_t cancel; } Watch;
static void gauges(Server *s) {
    const K3Progress *p = &s->eng.prog;
    pthread_mutex_lock(&s->mu);
    s->st.pf_left = p->total - p->done; s->st.pf_done = p->done;
    pthread_mutex_unlock(&s->mu);
}
static void watch(void *ctx) {
    Watch *w = ctx;
    gauges(w->s);
    int gone = 0;
    for (int i = 0; i < w->n; i++) gone += http_peer_gone(serve_gen_job(w->act[i])->fd);
    if (w->n && gone == w->n && !w->cancel) {
        w->cancel = 1;
        fprintf(stderr, "k3: serve: every request of the step went away: it stops in layer "
                "%d of %d\n", w->s->eng.prog.L + 1, w->s->eng.m.cfg.num_hidden_layers);
    }
}

void serve_engine_loop(Server *s, volatile sig_atomic_t *stop) {
    const int B = s->max_batch;
    Gen **act = calloc((size_t)B, sizeof *act);
    char err[1024];
    int n = 0;
    Watch w = { s, act, 0, 0 };
    s->eng.tick = watch; s->eng.tick_ctx = &w;
    s->eng.interrupt = &w.cancel;
    s->eng.prog.who = "k3: serve";
    s->stop = stop;
    if (!act) { fprintf(stderr, "k3: serve: out of memory\n"); *stop = 1; }
    Job *held = NULL;                     /* its n choices wait for as many free slots */
    while (!*stop) {
        while (n < B) {                                   /* new requests join */
            Job *j = held ? held : next_job(s, n == 0, stop);
            if (!j) break;
            const int c = serve_req_choices(&j->req);
            if (c > B) {
                if (c == j->req.n_choices)
                    snprintf(err, sizeof err, "'n' is %d but this server generates at most %d "
                             "sequences at once (k3 serve --max-batch)", c, B);
                else
                    snprintf(err, sizeof err, "%d prompts with 'n' %d are %d choices but this "
                             "server generates at most %d sequences at once (k3 serve "
                             "--max-batch)", j->req.n_prompts, j->req.n_choices, c, B);
                j->status = 400;
                http_error_api(j->fd, 400, err, j->keep_alive, j->req.api);
                job_done(s, j);
                continue;
            }
            if (n + c > B) { held = j; break; }
            held = NULL;
            for (int i = 0; i < c; i++) {
                Gen *g = serve_gen_begin(s, j, i);
                if (g) act[n++] = g;
                else if (!j->started) { job_done(s, j); break; }   /* answered */
            }
        }
        if (!n) continue;
        /* each decoding request samples its token; the scheduler feeds them, then the
         * prompts in the room left */
        int k = 0;
        for (int i = 0; i < n; i++) {
            Gen *g = act[i];
            if (serve_gen_prefilling(g) ? serve_gen_prefill(g) == 0 : serve_gen_token(s, g))
                act[k++] = g;
            else end(s, g, NULL);
        }
        n = k;
        K3SchedSeq **fed;
        int nf = 0;
        w.n = n; w.cancel = 0;
        int rc = n ? k3_sched_step(s->sch, &fed, &nf, err, sizeof err) : 0;
        gauges(s);
        if (rc == K3_INTERRUPTED) continue;   /* each gone request ends at the next look */
        int tw = 0;                        /* --draft: each request's rows of the taps */
        const float *tp = !rc && s->dl ? k3_draft_taps(s->dl[0], NULL, &tw) : NULL;
        for (int i = 0, r = 0; !rc && i < nf; r += fed[i++]->T)
            serve_gen_fed(fed[i]->user, fed[i]->T, fed[i]->logits,
                          tp ? tp + (size_t)r * tw : NULL);
        const K3SchedStats *st = k3_sched_stats(s->sch);
        pthread_mutex_lock(&s->mu);
        s->st.t_prefill = st->t_prefill; s->st.t_decode = st->t_decode;   /* its totals */
        s->st.steps = st->steps; s->st.step_rows = st->rows; s->st.mixed_steps = st->mixed;
        s->st.active = n;
        pthread_mutex_unlock(&s->mu);
        if (rc) {                          /* the step failed: every request in it ends */
            for (int i = 0; i < n; i++) end(s, act[i], err);
            n = 0;
        }
    }
    /* stopping: a reply under way ends as cut at its length (a stream with its finish and
     * [DONE]); one still prefilling has nothing to send but the refusal */
    for (int i = 0; i < n; i++) {
        serve_gen_stopping(act[i]);
        end(s, act[i], serve_gen_prefilling(act[i]) ? "the server is stopping" : NULL);
    }
    if (held) {
        held->status = 503; held->interrupted = 1;
        http_error_api(held->fd, 503, "the server is stopping", 0, held->req.api);
        held->failed = 1;
        job_done(s, held);
    }
    free(act);
}
