/* owners.c — which rank owns each routed expert over N ranks (k3_expert_owner). Its owner
 * reads, caches and multiplies it; moe.c gathers the outputs and sums them in id order on
 * every rank, so the owners move bytes, never bits.
 * By default expert e of layer L belongs to rank (e + L) mod N: every rank owns the same
 * count (experts are one size: the bytes balance) and each layer's extra ones rotate.
 * --expert-use FILE (a cache trace: --dump-cache-trace DIR's cache_trace.txt, one line per
 * expert request) balances the measured use as well: per layer, the experts in falling use
 * go each to the least-used rank that still has room for its even share of the count, so
 * the bytes stay balanced and the reads follow the use. Every rank builds the table from
 * its own copy of the file; a rank whose table differs from rank 0's is refused, named. */
#include "comm.h"
#include "k3.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int n, layers, experts;          /* the table's ranks and shape; n = 0: none */
    int *owner;                      /* [layers][experts] */
    double share[64];                /* each rank's share of the measured use (n <= 64) */
} tab;

int k3_expert_owner(int L, int ex, int n) {
    if (tab.n == n && L < tab.layers && ex < tab.experts)
        return tab.owner[(size_t)L * tab.experts + ex];
    return (ex + L) % n;
}

double k3_expert_use_share(int rank) { return tab.n && rank < tab.n ? tab.share[rank] : -1; }

void k3_expert_owners_clear(void) { free(tab.owner); memset(&tab, 0, sizeof tab); }

/* The trace's request counts, [layers][experts]: 0, or 2 with file, line and field. */
static int read_use(const K3Config *c, const char *path, long *use, char *err, size_t en) {
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, en, "--expert-use %s: cannot open it", path); return K3_ERR_USAGE; }
    const int NL = c->num_hidden_layers, NE = c->num_experts;
    char line[256];
    int ln = 0, rc = 0, header = 0;
    long n = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        ln++;
        int layers, experts, step, L, e, hit, used;
        if (line[0] == '#') {            /* "# k3 cache trace: layers N experts M ..." */
            if (sscanf(line, "# k3 cache trace: layers %d experts %d", &layers, &experts) != 2)
                continue;
            header = 1;
            if (layers != NL || experts != NE) {
                snprintf(err, en, "--expert-use %s: line %d: the trace is of a model with %d "
                         "layers and %d experts, this one has %d and %d (record it with "
                         "--dump-cache-trace on this model)", path, ln, layers, experts, NL, NE);
                rc = K3_ERR_USAGE;
            }
        } else if (sscanf(line, "%d %d %d %d%n", &step, &L, &e, &hit, &used) != 4 ||
                   line[used + strspn(line + used, " \r\n")] || step < 0 || hit < 0 || hit > 1) {
            snprintf(err, en, "--expert-use %s: line %d: not a request line \"step layer "
                     "expert hit\" (a --dump-cache-trace file)", path, ln);
            rc = K3_ERR_USAGE;
        } else if (L < 0 || L >= NL || !c->is_moe[L] || e < 0 || e >= NE) {
            snprintf(err, en, "--expert-use %s: line %d: layer %d expert %d is not a routed "
                     "expert of this model (%d layers, %d experts)", path, ln, L, e, NL, NE);
            rc = K3_ERR_USAGE;
        } else if (!header) {
            snprintf(err, en, "--expert-use %s: line %d: a request before the \"# k3 cache "
                     "trace:\" header (a --dump-cache-trace file starts with it)", path, ln);
            rc = K3_ERR_USAGE;
        } else { use[(size_t)L * NE + e]++; n++; }
    }
    if (!rc && ferror(f)) { snprintf(err, en, "--expert-use %s: read error", path); rc = 1; }
    if (!rc && !n) {
        snprintf(err, en, "--expert-use %s: no expert request in it (record a run with "
                 "--dump-cache-trace DIR and give DIR/cache_trace.txt)", path);
        rc = K3_ERR_USAGE;
    }
    fclose(f);
    return rc;
}

typedef struct { long use; int id; } Use;
static int by_use(const void *a, const void *b) {    /* most used first, then lower id */
    const Use *x = a, *y = b;
    return x->use != y->use ? (x->use < y->use ? 1 : -1) : (x->id > y->id) - (x->id < y->id);
}

/* Layer L's experts, most used first (ties: lower id), each to the rank with the least
 * use so far (ties: the fewest experts, then the rotation of L) among those with room:
 * below E/N rounded down, or at it while fewer than E mod N ranks have gone past it (so
 * every rank ends with the default's count, and the same bytes). */
static void split_layer(const long *use, int NE, int L, int n, int *owner, double *load) {
    Use order[NE];
    int count[64] = { 0 }, over = 0;
    double lay[64] = { 0 };
    for (int e = 0; e < NE; e++) order[e] = (Use){ use[e], e };
    qsort(order, (size_t)NE, sizeof *order, by_use);   /* a total order: the same everywhere */
    const int fl = NE / n, extra = NE % n;
    for (int i = 0; i < NE; i++) {
        int best = -1;
        for (int k = 0; k < n; k++) {
            const int r = (k + L) % n;
            if (count[r] > fl || (count[r] == fl && over >= extra)) continue;
            if (best < 0 || lay[r] < lay[best] || (lay[r] == lay[best] && count[r] < count[best]))
                best = r;
        }
        owner[order[i].id] = best;
        over += count[best]++ == fl;
        lay[best] += (double)order[i].use;
        load[best] += (double)order[i].use;
    }
}

int k3_expert_owners_build(const K3Config *c, const char *path, int N, char *err, size_t en) {
    k3_expert_owners_clear();
    const int NL = c->num_hidden_layers, NE = c->num_experts;
    if (N > 64) { snprintf(err, en, "--expert-use: at most 64 ranks (%d)", N); return 2; }
    long *use = calloc((size_t)NL * NE + 1, sizeof *use);
    int *owner = malloc(sizeof(int) * ((size_t)NL * NE + 1));
    if (!use || !owner) {
        free(use); free(owner);
        snprintf(err, en, "out of memory");
        return K3_ERR_RUNTIME;
    }
    int rc = read_use(c, path, use, err, en);
    double load[64] = { 0 }, total = 0;
    for (int L = 0; !rc && L < NL; L++) {
        if (c->is_moe[L]) split_layer(use + (size_t)L * NE, NE, L, N, owner + (size_t)L * NE,
                                      load);
        else for (int e = 0; e < NE; e++) owner[(size_t)L * NE + e] = (e + L) % N;
    }
    free(use);
    if (rc) { free(owner); return rc; }
    for (int k = 0; k < N; k++) total += load[k];
    tab.n = N; tab.layers = NL; tab.experts = NE; tab.owner = owner;
    for (int k = 0; k < N; k++) tab.share[k] = total > 0 ? load[k] / total : 0;
    return 0;
}

int k3_expert_owners_use(const K3Config *c, const char *path, char *err, size_t en) {
    const int N = k3_comm_size();
    int rc = k3_expert_owners_build(c, path, N, err, en);
    if (rc || N == 1) return rc;
    const uint64_t h = k3_hash(K3_HASH_INIT, tab.owner,   /* the same on every rank */
                               sizeof(int) * (size_t)tab.layers * tab.experts);
    const int k = k3_comm_differs(h);
    if (k) {
        snprintf(err, en, "--expert-use %s: rank %d's file gives another split than rank 0's: "
                 "every host needs the same file at the same path", path, k);
        k3_expert_owners_clear();
        return K3_ERR_USAGE;
    }
    return 0;
}
