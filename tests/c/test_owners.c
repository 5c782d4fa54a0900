/* test_owners.c — the routed experts' owners over N ranks (src/engine/owners.c). Without a
 * trace: expert e of layer L on rank (e + L) mod N. With --expert-use's cache trace, per
 * layer: every expert owned once, every rank the default's count (floor or ceil of E/N),
 * and the measured use balanced: on Zipf-skewed traces the largest rank's share of the
 * requests is within 5% of the mean at N = 2, 3, 4 where the id split is not (checked, so
 * the fixture can tell a split that ignores the trace). Malformed traces: exit 2 naming
 * the file, the line and what is wrong; 3000 mutated traces: no crash, 0 or 2 only. */
#include "k3.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL " __VA_ARGS__); puts(""); } } \
                      while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t xs(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

enum { NL = 6, NE = 32, TOPK = 4, STEPS = 400 };
static K3Config cfg;
static char path[256];
static long use[NL][NE];

/* A trace of STEPS steps: per MoE layer TOPK distinct experts from a Zipf law over a
 * per-layer permutation (layer 0 dense, as K3's first layer). */
static void write_trace(double s) {
    memset(use, 0, sizeof use);
    FILE *f = fopen(path, "w");
    fprintf(f, "# k3 cache trace: layers %d experts %d top_k %d slots 5 slot_bytes 1 policy "
            "lfu-aged\n# step layer expert hit\n", NL, NE, TOPK);
    double w[NE], tot = 0;
    for (int r = 0; r < NE; r++) tot += w[r] = 1 / pow(r + 1, s);
    int perm[NL][NE];
    for (int L = 0; L < NL; L++) {
        for (int e = 0; e < NE; e++) perm[L][e] = e;
        for (int e = NE - 1; e > 0; e--) {
            int j = (int)(xs() % (uint64_t)(e + 1)), t = perm[L][e];
            perm[L][e] = perm[L][j]; perm[L][j] = t;
        }
    }
    for (int st = 0; st < STEPS; st++)
        for (int L = 1; L < NL; L++) {
            int got[NE] = { 0 };
            for (int k = 0; k < TOPK; k++) {
                int r;
                do {
                    double u = (double)(xs() >> 11) / 9007199254740992.0 * tot, a = 0;
                    for (r = 0; r < NE - 1 && (a += w[r]) < u; r++) {}
                } while (got[r]);
                got[r] = 1;
                use[L][perm[L][r]]++;
                fprintf(f, "%d %d %d %d\n", st, L, perm[L][r], (int)(xs() & 1));
            }
        }
    fclose(f);
}

/* max over ranks of its share of all requests, over the mean share (1 = even) */
static double imbalance(int n) {
    double load[8] = { 0 }, tot = 0, mx = 0;
    for (int L = 1; L < NL; L++)
        for (int e = 0; e < NE; e++) {
            load[k3_expert_owner(L, e, n)] += (double)use[L][e];
            tot += (double)use[L][e];
        }
    for (int k = 0; k < n; k++) if (load[k] > mx) mx = load[k];
    return mx / (tot / n);
}

static void check_counts(int n) {
    for (int L = 0; L < NL; L++) {
        int count[8] = { 0 }, bad = 0;
        for (int e = 0; e < NE; e++) {
            int o = k3_expert_owner(L, e, n);
            if (o < 0 || o >= n) bad = 1; else count[o]++;
        }
        int hi = 0;
        for (int k = 0; k < n; k++) {
            if (count[k] != NE / n && count[k] != NE / n + 1) bad = 1;
            hi += count[k] == NE / n + 1;
        }
        CHECK(!bad && hi == NE % n, "n %d layer %d: counts not the default's", n, L);
    }
}

static int build_text(const char *text, int n, char *err, size_t en) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return k3_expert_owners_build(&cfg, path, n, err, en);
}

static void check_error(const char *text, const char *want) {
    char err[512] = "";
    int rc = build_text(text, 2, err, sizeof err);
    CHECK(rc == K3_ERR_USAGE && strstr(err, path) && strstr(err, want),
          "malformed trace: rc %d, err '%s' (want '%s')", rc, err, want);
    CHECK(k3_expert_use_share(0) < 0, "a refused trace left a table");
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/k3_test_owners.%d.txt", (int)getpid());
    cfg.num_hidden_layers = NL; cfg.num_experts = NE;
    for (int L = 1; L < NL; L++) cfg.is_moe[L] = 1;
    char err[512];
    for (int n = 1; n <= 4; n++)                    /* no table: the rotation by layer */
        for (int L = 0; L < NL; L++)
            for (int e = 0; e < NE; e++)
                CHECK(k3_expert_owner(L, e, n) == (e + L) % n, "default owner");
    for (int n = 2; n <= 4; n++) {
        write_trace(1.1);
        const double by_id = imbalance(n);
        CHECK(!k3_expert_owners_build(&cfg, path, n, err, sizeof err), "build: %s", err);
        const double by_use = imbalance(n);
        check_counts(n);
        printf("n %d: largest rank's use / mean: by id %.3f, by measured use %.3f\n", n, by_id,
               by_use);
        CHECK(by_id > 1.05, "n %d: the fixture's id split is balanced (%.3f): it cannot tell", n,
              by_id);
        CHECK(by_use <= 1.05, "n %d: the use split leaves %.3f of the mean on a rank", n,
              by_use);
        double sh = 0;
        for (int k = 0; k < n; k++) sh += k3_expert_use_share(k);
        CHECK(fabs(sh - 1) < 1e-9, "n %d: use shares sum to %f", n, sh);
        int first[NL][NE];                          /* the same file: the same table */
        for (int L = 0; L < NL; L++)
            for (int e = 0; e < NE; e++) first[L][e] = k3_expert_owner(L, e, n);
        CHECK(!k3_expert_owners_build(&cfg, path, n, err, sizeof err), "rebuild");
        for (int L = 0; L < NL; L++)
            for (int e = 0; e < NE; e++)
                CHECK(first[L][e] == k3_expert_owner(L, e, n), "not deterministic");
        CHECK(k3_expert_owner(1, 0, n + 1) == (1 + 0) % (n + 1), "another N: the default");
        k3_expert_owners_clear();
        CHECK(k3_expert_use_share(0) < 0, "cleared");
    }
    const char *H = "# k3 cache trace: layers 6 experts 32 top_k 4 slots 5\n";
    char t[512];
    check_error("", "no expert request");
    check_error("0 1 2 0\n", "before the");
    snprintf(t, sizeof t, "%s0 1 2\n", H); check_error(t, "line 2: not a request line");
    snprintf(t, sizeof t, "%s0 1 2 0 9\n", H); check_error(t, "line 2: not a request line");
    snprintf(t, sizeof t, "%s0 1 2 7\n", H); check_error(t, "line 2: not a request line");
    snprintf(t, sizeof t, "%s0 1 32 0\n", H); check_error(t, "line 2: layer 1 expert 32");
    snprintf(t, sizeof t, "%s0 0 3 0\n", H); check_error(t, "line 2: layer 0 expert 3");
    snprintf(t, sizeof t, "%s0 6 3 0\n", H); check_error(t, "line 2: layer 6");
    check_error("# k3 cache trace: layers 7 experts 32\n0 1 1 0\n", "7 layers and 32 experts");
    snprintf(t, sizeof t, "%s0 1 2 0\n", H);
    CHECK(!build_text(t, 2, err, sizeof err), "one request: %s", err);
    /* mutated traces: a crash or another exit code fails */
    write_trace(1.0);
    long len;
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END); len = ftell(f); fseek(f, 0, SEEK_SET);
    char *base = malloc((size_t)len), *m = malloc((size_t)len + 64);
    if (fread(base, 1, (size_t)len, f) != (size_t)len) return 1;
    fclose(f);
    int ok = 0, refused = 0;
    for (int it = 0; it < 3000; it++) {
        long n = 200 + (long)(xs() % 2000);
        if (n > len) n = len;
        memcpy(m, base, (size_t)n);
        for (int k = 0, nm = 1 + (int)(xs() % 4); k < nm; k++) {
            long at = (long)(xs() % (uint64_t)n);
            static const char pool[] = "0123456789 -\n#x\t\r\0";
            m[at] = pool[xs() % (sizeof pool - 1)];
        }
        m[n] = 0;
        FILE *g = fopen(path, "wb");
        fwrite(m, 1, (size_t)n, g);
        fclose(g);
        err[0] = 0;
        int rc = k3_expert_owners_build(&cfg, path, 1 + (int)(xs() % 4), err, sizeof err);
        CHECK(rc == 0 || (rc == K3_ERR_USAGE && !strncmp(err, "--expert-use ", 13)),
              "mutated trace %d: rc %d err '%s'", it, rc, err);
        ok += rc == 0; refused += rc != 0;
        if (fails > 10) break;
    }
    printf("mutated traces: %d taken, %d refused\n", ok, refused);
    CHECK(ok > 0 && refused > 0, "the mutations never reached one of the outcomes");
    free(base); free(m);
    unlink(path);
    k3_expert_owners_clear();
    printf("%s\n", fails ? "test_owners: FAILED" : "test_owners: all passed");
    return fails != 0;
}
