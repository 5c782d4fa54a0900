/* progress.c — what a long forward does besides computing: it looks at the interrupt
 * between matmuls, blocks of tokens and experts (so Ctrl-C, SIGINT or a gone client stops
 * a prefill inside a layer, not after it), prints the prefill's progress on stderr, and
 * runs the test hooks that make a tiny model's prefill long (docs/ENGINEERING.md). */
#include "comm.h"
#include "k3.h"
#include "util.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static struct { int init; double every; long slow_ms, sigint_at, experts; int gaps; } hook;

static void hooks_init(void) {
    if (hook.init) return;
    hook.init = 1;
    hook.every = k3_progress_every();
    const char *v = getenv("K3_TEST_SLOW_MM_MS");  /* test hook: each matmul sleeps, to a stop */
    hook.slow_ms = v ? atol(v) : 0;
    v = getenv("K3_TEST_SIGINT_AT_EXPERT");            /* test hook: SIGINT at expert N */
    hook.sigint_at = v ? atol(v) : 0;
    v = getenv("K3_CHECK_GAPS");                       /* the longest unchecked stretch */
    hook.gaps = v && *v == '1';
}

static void progress_line(K3Engine *e, double now) {
    K3Progress *p = &e->prog;
    const int NL = e->m.cfg.num_hidden_layers;
    const double f = (p->done + (double)p->step_T * p->L / NL) / (p->total > 0 ? p->total : 1);
    const double el = now - p->t0;
    char left[32] = "?", so_far[32];
    if (f > 0.001) k3_secs_text(left, sizeof left, el * (1 - f) / f);
    k3_secs_text(so_far, sizeof so_far, el);
    fprintf(stderr, "%s: prefill: %d of %d tokens done, the next %d in layer %d of %d; %.0f%%, "
            "~%s left (%s so far)\n", p->who ? p->who : "k3", p->done, p->total, p->step_T,
            p->L + 1, NL, 100 * f, left, so_far);
}

void k3_progress_begin(K3Engine *e, int done, int total) {
    hooks_init();
    K3Progress *p = &e->prog;
    const double now = k3_now();
    if (done == 0 || p->total == 0) { p->t0 = now; p->next = now + hook.every; }
    p->done = done; p->total = total;
}

void k3_progress_end(K3Engine *e) {
    K3Progress *p = &e->prog;
    if (hook.gaps && p->gap_max > 0)
        fprintf(stderr, "%s: the longest stretch without an interrupt check: %.3f s (layer "
                "%d)\n", p->who ? p->who : "k3", p->gap_max, p->gap_L);
    p->total = p->done = p->step_T = 0;
}

/* The engine whose forward runs (set by k3_forward_seqs): the streamed matmul in
 * src/mem/stream.c looks through it between its row pieces and token blocks. */
static K3Engine *running;
void k3_halt_running(K3Engine *e) { running = e; }
void k3_halt_forget(const K3Engine *e) { if (running == e) running = NULL; }
int k3_halt_poll(void) { return running ? k3_halted(running) : 0; }

int k3_halted(K3Engine *e) {
    hooks_init();
    K3Progress *p = &e->prog;
    const double now = k3_now();
    if (p->last > 0 && now - p->last > p->gap_max) { p->gap_max = now - p->last; p->gap_L = p->L; }
    p->last = now;
    if (e->tick && now >= e->tick_next) { e->tick_next = now + 0.1; e->tick(e->tick_ctx); }
    /* over N ranks a forward is never cut short: each rank must reach every gather */
    if (!e->halt && e->interrupt && *e->interrupt && k3_comm_size() == 1) e->halt = 1;
    if (e->halt) hook.slow_ms = 0;                     /* the slow hook lasts until a stop */
    if (!e->halt && p->step_T > 0 && p->total > 0 && !p->quiet && now >= p->next) {
        progress_line(e, now);
        p->next = now + hook.every;
    }
    return e->halt;
}

/* Test hooks, at each matmul and each expert of a forward with at least 50 prompt rows (a
 * long prefill, not a chat's first turn or a short request): nothing unless set. */
#define HOOK_ROWS 50
void k3_test_mm_hook(const K3Engine *e) {
    if (hook.slow_ms <= 0 || e->prog.step_T < HOOK_ROWS) return;
    struct timespec ts = { hook.slow_ms / 1000, (hook.slow_ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* SIGINT raised before the N-th expert of those forwards, so a test knows exactly how many
 * an implementation that looks at the interrupt per expert fetches. */
void k3_test_expert_hook(const K3Engine *e) {
    if (hook.sigint_at > 0 && e->prog.step_T >= HOOK_ROWS && ++hook.experts == hook.sigint_at)
        raise(SIGINT);
}
