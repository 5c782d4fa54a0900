/* test_cache.c — the expert-cache policy (LFU with ageing, policy.c) against LRU and
 * Belady's optimum on synthetic MoE request traces (skewed per-layer popularity,
 * k distinct experts per layer per token), at several capacities: the policy must
 * beat LRU and stay at or below the optimum. Same cache model as
 * tools/cache_replay.py: a request hits if resident, else it is loaded, evicting the
 * policy's victim when full. */
#include "../../src/mem/internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t xs(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* trace: steps x layers x k distinct experts drawn from a Zipf-ish law (weight 1/(r+1)^s)
 * over a per-layer random permutation of the experts. */
static int make_trace(int steps, int NL, int E, int k, double s, size_t **out) {
    size_t n = (size_t)steps * NL * k, o = 0;
    size_t *tr = malloc(n * sizeof(size_t));
    double *w = malloc(sizeof(double) * E);
    int *perm = malloc(sizeof(int) * NL * E);
    double tot = 0;
    for (int r = 0; r < E; r++) { w[r] = 1.0 / pow(r + 1, s); tot += w[r]; }
    for (int L = 0; L < NL; L++) {
        for (int e = 0; e < E; e++) perm[L * E + e] = e;
        for (int e = E - 1; e > 0; e--) {
            int j = (int)(xs() % (uint64_t)(e + 1)), t = perm[L * E + e];
            perm[L * E + e] = perm[L * E + j]; perm[L * E + j] = t;
        }
    }
    for (int st = 0; st < steps; st++)
        for (int L = 0; L < NL; L++) {
            int got[64], ng = 0;
            while (ng < k) {
                double u = (xs() >> 11) * (1.0 / 9007199254740992.0) * tot, acc = 0;
                int r = 0;
                for (; r < E - 1; r++) { acc += w[r]; if (u < acc) break; }
                int e = perm[L * E + r], dup = 0;
                for (int i = 0; i < ng; i++) dup |= got[i] == e;
                if (!dup) got[ng++] = e;
            }
            for (int i = 0; i < ng; i++) tr[o++] = (size_t)L * E + got[i];
        }
    free(w); free(perm);
    *out = tr;
    return (int)o;
}

/* policy 0 = LRU, 1 = k3 policy */
static long simulate(const size_t *tr, int n, size_t nkeys, int cap, int policy) {
    K3Policy p;
    k3_policy_init(&p, nkeys, cap);
    char *res = calloc(nkeys, 1);
    size_t *slots = malloc(sizeof(size_t) * cap);
    int used = 0;
    long hits = 0;
    uint64_t *lru = calloc(nkeys, sizeof(uint64_t));
    for (int i = 0; i < n; i++) {
        size_t k = tr[i];
        if (res[k]) hits++;
        else {
            if (used < cap) slots[used++] = k;
            else {
                int v = 0;
                if (policy) v = k3_policy_victim(&p, slots, cap);
                else for (int j = 1; j < cap; j++) if (lru[slots[j]] < lru[slots[v]]) v = j;
                res[slots[v]] = 0; slots[v] = k;
            }
            res[k] = 1;
        }
        lru[k] = (uint64_t)i + 1;
        k3_policy_touch(&p, k);
    }
    k3_policy_free(&p); free(res); free(slots); free(lru);
    return hits;
}

static long belady(const size_t *tr, int n, size_t nkeys, int cap) {
    int *next = malloc(sizeof(int) * n), *last = malloc(sizeof(int) * nkeys);
    for (size_t k = 0; k < nkeys; k++) last[k] = 1 << 30;
    for (int i = n - 1; i >= 0; i--) { next[i] = last[tr[i]]; last[tr[i]] = i; }
    int *nu = malloc(sizeof(int) * nkeys);      /* next use of each resident key */
    char *res = calloc(nkeys, 1);
    size_t *slots = malloc(sizeof(size_t) * cap);
    int used = 0; long hits = 0;
    for (int i = 0; i < n; i++) {
        size_t k = tr[i];
        if (res[k]) hits++;
        else {
            if (used < cap) slots[used++] = k;
            else {
                int v = 0;
                for (int j = 1; j < cap; j++) if (nu[slots[j]] > nu[slots[v]]) v = j;
                res[slots[v]] = 0; slots[v] = k;
            }
            res[k] = 1;
        }
        nu[k] = next[i];
    }
    free(next); free(last); free(nu); free(res); free(slots);
    return hits;
}

/* test_cache --replay TRACE CAP: the C policy on a recorded trace (k3 --dump-cache-trace),
 * same cache model as tools/cache_replay.py, which compares the two (--check-c). */
static int replay(const char *path, int cap) {
    FILE *f = fopen(path, "r");
    if (!f || cap < 1) {
        fprintf(stderr, "test_cache --replay: cannot read %s (or capacity %d < 1)\n", path, cap);
        return 2;
    }
    char line[512];
    int NL = 0, E = 0, n = 0, ncap = 1024;
    size_t *tr = malloc(sizeof(size_t) * ncap);
    while (tr && fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            const char *a = strstr(line, " layers "), *b = strstr(line, " experts ");
            if (a) NL = atoi(a + 8);
            if (b) E = atoi(b + 9);
            continue;
        }
        int st, L, e;
        if (sscanf(line, "%d %d %d", &st, &L, &e) != 3 || E <= 0 || L < 0 || L >= NL || e < 0 ||
            e >= E)
            continue;
        if (n == ncap) {
            size_t *t2 = realloc(tr, sizeof(size_t) * (ncap *= 2));
            if (!t2) break;
            tr = t2;
        }
        tr[n++] = (size_t)L * E + e;
    }
    fclose(f);
    if (!tr || NL <= 0 || E <= 0) {
        fprintf(stderr, "test_cache --replay: %s has no k3 trace header\n", path);
        free(tr);
        return 2;
    }
    printf("hits %ld requests %d capacity %d\n", simulate(tr, n, (size_t)NL * E, cap, 1), n, cap);
    free(tr);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--replay")) return replay(argv[2], atoi(argv[3]));
    int fail = 0;
    const int NL = 12, E = 64, K = 8, steps = 400;
    size_t *tr;
    int n = make_trace(steps, NL, E, K, 0.9, &tr);
    size_t nkeys = (size_t)NL * E;
    const int caps[] = { 48, 96, 192, 384, 600 };
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        long l = simulate(tr, n, nkeys, caps[c], 0), p = simulate(tr, n, nkeys, caps[c], 1);
        long b = belady(tr, n, nkeys, caps[c]);
        int good = p > l && p <= b;
        printf("%s capacity %3d of %zu keys: LRU %.3f  lfu-aged %.3f  Belady %.3f\n",
               good ? "ok  " : "FAIL", caps[c], nkeys, (double)l / n, (double)p / n, (double)b / n);
        fail |= !good;
    }
    /* ageing: a key hot long ago loses to a key hot now */
    K3Policy pol;
    k3_policy_init(&pol, 4, 1);
    for (int i = 0; i < 3000; i++) k3_policy_touch(&pol, 0);
    for (int i = 0; i < 20000; i++) k3_policy_touch(&pol, i % 3 ? 2 : 3);
    for (int i = 0; i < 1200; i++) k3_policy_touch(&pol, 1);
    size_t cand[2] = { 0, 1 };
    int v = k3_policy_victim(&pol, cand, 2);
    printf("%s ageing: stale frequency %u vs recent %u, victim key %zu\n", v == 0 ? "ok  " : "FAIL",
           pol.freq[0], pol.freq[1], cand[v]);
    fail |= v != 0;
    k3_policy_free(&pol);
    free(tr);
    return fail;
}
