/* test_scheduler.c — the step scheduler (scheduler.h) against solo runs and its own rules,
 * on every committed model, with the states in memory and in a state file (KDA; and the
 * MLA caches too). Three prompts (13, 3 and 6 ids, every row's logits) and a fourth that
 * joins once the first decodes go through slots of 3 at steps of 8 tokens: each step feeds
 * the decoding sequences whole before any prompt, the prompts in join order and split
 * where they do not fit, never more than 8 tokens or the planned logits rows; every row
 * equals the solo prefill's bytes and every greedy token the solo run's. A fourth join
 * into full slots is refused; a copy of a state loaded into another slot continues with
 * the same bits. */
#include "engine_fixture.h"
#include "scheduler.h"
#include "statefile.h"
#include <stdlib.h>
#include <string.h>

enum { NP = 4, GEN = 5, MAXT = 8, ROWS = 8, CTX = 64 };

typedef struct { int id, len, ids[32], n, done; float *solo; int want[GEN]; } Prompt;

static int argmax(const float *r, int V) {
    int b = 0;
    for (int i = 1; i < V; i++) if (r[i] > r[b]) b = i;
    return b;
}

static void test_mode(const char *dir, int mode) {
    char err[4096];
    K3Engine e;
    if (fixture_open(&e, dir, MAXT, CTX)) return;
    const K3Model *m = &e.m;
    const int V = m->cfg.vocab_size;
    k3_runstate_free(&e.rs);                         /* room for every sequence's rows */
    CHECK(!k3_runstate_init(&e.rs, &m->cfg, MAXT, CTX, ROWS), "%s: run state", dir);
    const int len[NP] = { 13, 3, 6, 4 };
    Prompt p[NP];
    for (int i = 0; i < NP; i++) {                   /* the solo runs: rows and greedy ids */
        p[i] = (Prompt){ .id = i, .len = len[i] };
        for (int k = 0; k < len[i]; k++) p[i].ids[k] = (i * 53 + k * 17 + 3) % V;
        p[i].solo = malloc(sizeof(float) * (size_t)len[i] * V);
        float *row = malloc(sizeof(float) * (size_t)V * MAXT);
        K3State *s = k3_state_new(m);
        int rc = k3_prefill(&e, s, p[i].ids, len[i], 0, p[i].solo, 1, err, sizeof err);
        int tok = argmax(p[i].solo + (size_t)(len[i] - 1) * V, V);
        for (int g = 0; !rc && g < GEN; g++) {
            p[i].want[g] = tok;
            rc = k3_forward(&e, s, &tok, 1, row, 0, err, sizeof err);
            tok = argmax(row, V);
        }
        CHECK(rc == 0, "%s: solo %d: %s", dir, i, err);
        k3_state_free(m, s); free(row);
    }
    K3Sched *sc;
    const K3SchedOpts so = { 3, mode, NULL, CTX, 0 };
    if (k3_sched_open(&sc, &e, &so, err, sizeof err)) {
        CHECK(0, "%s: open: %s", dir, err);
        k3_engine_close(&e);
        return;
    }
    CHECK(!!k3_sched_statefile(sc) == !!mode, "%s: mode %d: state file", dir, mode);
    K3SchedSeq *q[NP] = { 0 };
    int joined = 3, gen[NP] = { 0 }, last[NP], bad = 0, mixed = 0;
    for (int i = 0; i < 3; i++) {
        q[i] = k3_sched_join(sc, &p[i]);
        q[i]->ids = p[i].ids; q[i]->n = p[i].len; q[i]->all_logits = 1;
    }
    CHECK(k3_sched_join(sc, &p[3]) == NULL, "%s: a fourth join into 3 slots", dir);
    for (int step = 0; step < 100; step++) {
        K3SchedSeq **fed;
        int nf = 0, T = 0, rows = 0, seen_prompt = 0;
        const int rc = k3_sched_step(sc, &fed, &nf, err, sizeof err);
        CHECK(rc == 0, "%s: step %d: %s", dir, step, err);
        if (rc || !nf) break;
        for (int j = 0; j < nf; j++) {
            K3SchedSeq *s = fed[j];
            Prompt *pp = s->user;
            T += s->T; rows += s->all_logits ? s->T : 1;
            if (s->decode) bad += seen_prompt;       /* decode steps come first, whole */
            else seen_prompt = 1;
            if (s->decode) bad += s->T != 1 || s->n != 0;
            if (!s->decode) {                        /* its prompt rows, solo bytes */
                bad += memcmp(s->logits, pp->solo + (size_t)pp->done * V,
                              sizeof(float) * (size_t)s->T * V) != 0;
                pp->done += s->T;
                if (s->n) continue;                  /* still going in */
                last[pp->id] = argmax(s->logits + (size_t)(s->T - 1) * V, V);
            } else last[pp->id] = argmax(s->logits, V);
            const int i = pp->id;
            if (gen[i] == GEN) continue;
            bad += last[i] != p[i].want[gen[i]];
            if (++gen[i] == GEN) { k3_sched_leave(sc, s); q[i] = NULL; continue; }
            s->ids = &last[i]; s->n = 1; s->decode = 1; s->all_logits = 0;
        }
        mixed += k3_sched_stats(sc)->mixed > 0;
        CHECK(T <= MAXT && rows <= ROWS, "%s: step %d fed %d tokens, %d rows", dir, step, T, rows);
        if (joined == 3 && !q[1]) {                  /* a slot is free: the fourth comes in */
            q[3] = k3_sched_join(sc, &p[3]);
            CHECK(q[3] != NULL, "%s: no slot for the fourth", dir);
            if (q[3]) { q[3]->ids = p[3].ids; q[3]->n = p[3].len; q[3]->all_logits = 1; }
            joined = 4;
        }
    }
    for (int i = 0; i < NP; i++)
        CHECK(gen[i] == GEN, "%s: prompt %d made %d tokens", dir, i, gen[i]);
    CHECK(bad == 0, "%s: mode %d: %d rows, tokens or orderings off", dir, mode, bad);
    CHECK(mixed > 0, "%s: no step mixed a prompt with decode tokens", dir);
    /* a copy of a state continues, in another slot, with the same bits */
    K3SchedSeq *a = k3_sched_join(sc, NULL), *b = k3_sched_join(sc, NULL);
    float *r1 = malloc(sizeof(float) * V), *r2 = malloc(sizeof(float) * V);
    int nxt = p[2].want[0];
    CHECK(!k3_sched_feed(sc, a, p[2].ids, p[2].len, 0, err, sizeof err), "%s: feed", dir);
    K3State *cp = k3_sched_copy(sc, a, err, sizeof err);
    CHECK(cp && cp->pos == p[2].len, "%s: copy: %s", dir, err);
    CHECK(!k3_sched_feed(sc, a, &nxt, 1, 0, err, sizeof err), "%s: feed a", dir);
    memcpy(r1, a->logits, sizeof(float) * V);
    k3_sched_leave(sc, a);
    K3SchedSeq *z = k3_sched_join(sc, NULL);         /* a's slot, another sequence in it */
    CHECK(!k3_sched_feed(sc, z, p[0].ids, 5, 0, err, sizeof err), "%s: feed z", dir);
    CHECK(cp && !k3_sched_load(sc, b, cp, err, sizeof err), "%s: load: %s", dir, err);
    CHECK(!k3_sched_feed(sc, b, &nxt, 1, 0, err, sizeof err), "%s: feed b", dir);
    CHECK(!memcmp(r1, b->logits, sizeof(float) * V), "%s: mode %d: the loaded copy's logits "
          "differ", dir, mode);
    if (cp) k3_state_free(m, cp);
    free(r1); free(r2);
    for (int i = 0; i < NP; i++) free(p[i].solo);
    k3_sched_close(sc);
    k3_engine_close(&e);
}

static void test_dir(const char *dir) {
    (void)rand_int;                                  /* the fixture's, unused here */
    test_mode(dir, K3_STATES_RESIDENT);
    test_mode(dir, K3_STATES_KDA);
    test_mode(dir, K3_STATES_ALL);
}

int main(void) { return fixture_run("test_scheduler", test_dir); }
