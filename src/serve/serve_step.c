/* serve_step.c — the engine loop of k3 serve: up to --max-batch requests in flight, fed
 * together. Each step feeds one token of every decoding request and, in the room left
 * (the plan's chunk), the next prompt ids of the requests still prefilling, all in one
 * k3_forward_seqs: each trunk piece and selected expert is read once for all of them, and
 * a new request no longer stops the others while its prompt goes in. Every sequence gets
 * the bits of its solo forward (any chunking gives the same bits) and draws from its own
 * sampler, so each reply is byte-identical to its run alone. A finished or disconnected
 * request leaves the step at once and its client is answered. */
#include "serve.h"
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
    serve_gen_end(s, g, fail_err);
    job_done(s, j);
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

void serve_engine_loop(Server *s, volatile sig_atomic_t *stop) {
    const int B = s->max_batch, max_T = s->eng.rs.max_T;
    const size_t V = (size_t)s->eng.m.cfg.vocab_size;
    Gen **act = calloc((size_t)B, sizeof *act), **who = calloc((size_t)B, sizeof *who);
    K3Seq *seq = calloc((size_t)B, sizeof *seq);
    char err[1024];
    int n = 0;
    if (!act || !who || !seq) { fprintf(stderr, "k3: serve: out of memory\n"); *stop = 1; }
    while (!*stop) {
        while (n < B) {                                   /* new requests join */
            Job *j = next_job(s, n == 0, stop);
            if (!j) break;
            Gen *g = serve_gen_begin(s, j);
            if (g) act[n++] = g;
            else job_done(s, j);
        }
        if (!n) continue;
        /* one token of each decoding request, then prompts take the room left */
        double t0 = k3_now();
        int m = 0, k = 0, T = 0, Tp = 0;
        for (int i = 0; i < n; i++) {
            Gen *g = act[i];
            if (serve_gen_prefilling(g)) act[k++] = g;
            else if (serve_gen_token(s, g, &seq[m])) { who[m++] = g; act[k++] = g; T++; }
            else end(s, g, NULL);
        }
        n = k; k = 0;
        for (int i = 0; i < n; i++) {
            Gen *g = act[i];
            int r = serve_gen_prefill(g, max_T - T, &seq[m]);
            if (r < 0) { end(s, g, NULL); continue; }
            act[k++] = g;
            if (r > 0) { who[m++] = g; T += r; Tp += r; }
        }
        n = k;
        int rc = m ? k3_forward_seqs(&s->eng, seq, m, s->eng.rs.logits, err, sizeof err) : 0;
        for (int i = 0; !rc && i < m; i++)
            serve_gen_fed(who[i], seq[i].T, s->eng.rs.logits + i * V);
        double dt = k3_now() - t0;
        pthread_mutex_lock(&s->mu);
        if (T) {                          /* the step's time, shared by its rows' kinds */
            s->st.t_prefill += dt * Tp / T; s->st.t_decode += dt * (T - Tp) / T;
        }
        if (m) { s->st.steps++; s->st.step_rows += m; }
        if (Tp && Tp < T) s->st.mixed_steps++;
        s->st.active = n;
        pthread_mutex_unlock(&s->mu);
        if (rc) {                          /* the step failed: every request in it ends */
            for (int i = 0; i < n; i++) end(s, act[i], err);
            n = 0;
        }
    }
    for (int i = 0; i < n; i++) end(s, act[i], "the server is stopping");
    free(act); free(who); free(seq);
}
