/* serve_step.c — the engine loop of k3 serve: up to --max-batch requests in flight, their
 * decode steps run together. Each step feeds one token of every request in one
 * k3_forward_seqs, so each trunk piece and selected expert is read once for all of them;
 * every sequence gets the bits of its solo forward and draws from its own sampler, so each
 * reply is byte-identical to its run alone. A new request is prefilled on its own between
 * steps (the others wait that long); a finished or disconnected one leaves the step at
 * once and its client is answered. */
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
    const int B = s->max_batch;
    const size_t V = (size_t)s->eng.m.cfg.vocab_size;
    Gen **act = calloc((size_t)B, sizeof *act), **who = calloc((size_t)B, sizeof *who);
    K3Seq *seq = calloc((size_t)B, sizeof *seq);
    char err[1024];
    int n = 0;
    if (!act || !who || !seq) { fprintf(stderr, "k3: serve: out of memory\n"); *stop = 1; }
    while (!*stop) {
        /* new requests join, each prefilled on its own */
        while (n < B) {
            Job *j = next_job(s, n == 0, stop);
            if (!j) break;
            Gen *g = serve_gen_begin(s, j);
            if (g) act[n++] = g;
            else job_done(s, j);
        }
        if (!n) continue;
        /* one token of each; those that go on are fed together */
        double t0 = k3_now();
        int m = 0, k = 0;
        for (int i = 0; i < n; i++) {
            if (serve_gen_token(s, act[i], &seq[m])) { who[m++] = act[i]; act[k++] = act[i]; }
            else end(s, act[i], NULL);
        }
        n = k;
        int rc = m ? k3_forward_seqs(&s->eng, seq, m, s->eng.rs.logits, err, sizeof err) : 0;
        for (int i = 0; !rc && i < m; i++) serve_gen_fed(who[i], s->eng.rs.logits + i * V);
        pthread_mutex_lock(&s->mu);
        s->st.t_decode += k3_now() - t0;
        if (m) { s->st.steps++; s->st.step_rows += m; }
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
