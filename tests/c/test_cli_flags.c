/* test_cli_flags.c — the flag tables follow the parsers (every K3_FLAGS_SAMPLER and
 * K3_FLAGS_MEM entry is parsed, taking a value exactly when the table says so),
 * --flag=value splitting (values given as their own word are never split; a flag
 * without a value refuses one), and the "did you mean" hints (llama.cpp aliases, unique
 * prefixes, one-edit typos, nothing for far-off names). */
#include "cli.h"
#include "sampler.h"
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); } } while (0)

static const K3Flag SAMPLER[] = { K3_FLAGS_SAMPLER }, MEM[] = { K3_FLAGS_MEM };
static const K3Flag TABLE[] = { { "--gen", 1 }, { "--prompt", 1 }, { "--ids", 1 },
                                { "--chat", 0 }, { "--hide-thinking", 0 }, K3_FLAGS_SAMPLER,
                                K3_FLAGS_MEM };
#define N(a) (int)(sizeof a / sizeof a[0])

static void tables_follow_parsers(void) {
    char err[256];
    for (int k = 0; k < N(SAMPLER); k++) {
        char *argv[] = { (char *)SAMPLER[k].name, "1", NULL };
        SamplerParams p; uint64_t seed = 0; int i = 0;
        sampler_defaults(&p);
        int r = sampler_parse_flag(2, argv, &i, &p, &seed, NULL, err, sizeof err);
        CHECK(r == 1 && i == SAMPLER[k].takes_value, "%s: parsed %d, consumed %d", argv[0], r, i);
    }
    for (int k = 0; k < N(MEM); k++) {
        char *argv[] = { (char *)MEM[k].name, !strcmp(MEM[k].name, "--preset") ? "laptop" : "1",
                         NULL };
        K3MemOpts o; int i = 0;
        k3_mem_opts_init(&o);
        int r = k3_mem_parse_flag(2, argv, &i, &o, 1, err, sizeof err);
        CHECK(r == 1 && i == MEM[k].takes_value, "%s: parsed %d, consumed %d", argv[0], r, i);
    }
}

static void expand(void) {
    char err[256], **v;
    int n;
    char *a1[] = { "k3", "M", "--gen=3", "--prompt", "--ctx=5", "--prompt=a=b", "--ids=",
                   "--frob=1", "--seed", "7", "x=y" };
    CHECK(!k3_args_expand(N(a1), a1, TABLE, N(TABLE), &n, &v, err, sizeof err), "%s", err);
    const char *want[] = { "k3", "M", "--gen", "3", "--prompt", "--ctx=5", "--prompt", "a=b",
                           "--ids", "", "--frob=1", "--seed", "7", "x=y" };
    CHECK(n == N(want), "%d words, want %d", n, N(want));
    for (int i = 0; i < n && i < N(want); i++)
        CHECK(!strcmp(v[i], want[i]), "word %d: '%s', want '%s'", i, v[i], want[i]);
    CHECK(v[n] == NULL, "argv not NULL-terminated");
    char *a2[] = { "k3", "--greedy=1" };
    CHECK(k3_args_expand(2, a2, TABLE, N(TABLE), &n, &v, err, sizeof err) == 2 &&
          strstr(err, "--greedy takes no value"), "--greedy=1: '%s'", err);
    char *a3[] = { "--gen=1" };                   /* argv[0] is the program, never split */
    CHECK(!k3_args_expand(1, a3, TABLE, N(TABLE), &n, &v, err, sizeof err) && n == 1 &&
          !strcmp(v[0], "--gen=1"), "argv[0] split");
}

static void hint(const char *arg, const char *want) {
    char msg[512];
    k3_unknown_option(arg, TABLE, N(TABLE), msg, sizeof msg);
    char full[300];
    snprintf(full, sizeof full, "unknown option '%s'%s%s%s", arg, want ? "; did you mean " : "",
             want ? want : "", want ? "?" : "");
    CHECK(!strcmp(msg, full), "%s: '%s', want '%s'", arg, msg, full);
}

int main(void) {
    tables_follow_parsers();
    expand();
    hint("--temp", "--temperature");             /* llama.cpp aliases */
    hint("-n", "--gen");
    hint("--n-predict", "--gen");
    hint("-p", "--prompt");
    hint("--top_k", "--top-k");
    hint("-i", "--chat");
    hint("--temp=0.7", "--temperature");         /* the name before '=' */
    hint("--hide", "--hide-thinking");           /* a unique prefix */
    hint("--gne", "--gen");                      /* one edit (a swap) */
    hint("--trunkgb", "--trunk-gb");
    hint("--frobnicate", NULL);                  /* nothing close */
    hint("-c", NULL);                            /* an alias whose flag this table lacks */
    char msg[512];
    k3_unknown_option("-ngl", TABLE, N(TABLE), msg, sizeof msg);
    CHECK(strstr(msg, "runs on the CPU") != NULL, "-ngl: '%s'", msg);
    if (fails) { printf("%d failure(s)\n", fails); return 1; }
    printf("ok flag tables follow the parsers; --flag=value; did-you-mean hints\n");
    return 0;
}
