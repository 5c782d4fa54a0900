/* test_embed_unmap.c — the embedding's rows are unmapped after every forward (mem.c:
 * MADV_NOHUGEPAGE + MADV_RANDOM on the embedding's pages at open, MADV_DONTNEED at layer
 * 0 of each forward), so a long prompt or a long run never leaves a growing share of the
 * shard mapping resident. Through the engine as the CLI opens it (the memory system, with
 * and without a packed trunk) on every committed model: after a prefill in several
 * chunks, decode steps and a two-sequence step, /proc/self/pagemap must show no page of
 * the embedding's range mapped, and its mapping must carry the two advices (VmFlags nh,
 * rr in /proc/self/smaps). The embedding is 512 KB here, so pages are counted one by one.
 * The probe proves itself first: a row read by hand must show up as mapped. Beside it,
 * k3_alloc_huge (the expert cache, the pinned trunk, its window) must give 2 MB-aligned
 * memory whose mapping carries MADV_HUGEPAGE (VmFlags hg) wherever the kernel has THP. */
#include "cli.h"
#include "engine.h"
#include "sysmem.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PG 4096u

static int fails;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                       printf(__VA_ARGS__); printf("\n"); fails++; } } while (0)

static const char *const models[] = {
    "tests/models/tiny5", "tests/models/tiny4", "tests/models/tiny5f",
};

typedef struct { uintptr_t lo, hi; } Range;

/* The whole pages of the embedding, as mem.c advises them. */
static Range embed_range(const K3Mat *E) {
    const uintptr_t a = (uintptr_t)E->w;
    const uintptr_t n = (uintptr_t)E->rows * E->cols * (E->type == K3_W_F32 ? 4 : 2);
    Range r = { (a + PG - 1) & ~(uintptr_t)(PG - 1), (a + n) & ~(uintptr_t)(PG - 1) };
    return r;
}

/* Pages of r mapped in this process (pagemap bit 63), or -1 if pagemap cannot be read. */
static long mapped_pages(int pm, Range r) {
    long n = 0;
    for (uintptr_t va = r.lo; va < r.hi; va += PG) {
        uint64_t ent;
        if (pread(pm, &ent, sizeof ent, (off_t)(va / PG * sizeof ent)) != sizeof ent)
            return -1;
        n += (long)(ent >> 63);
    }
    return n;
}

/* 1 if the mapping holding va has both flags in its VmFlags line. */
static int vm_flags_have(uintptr_t va, const char *f1, const char *f2) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int in = 0, ok = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = va >= lo && va < hi;
        else if (in && !strncmp(line, "VmFlags:", 8)) {
            ok = strstr(line, f1) && strstr(line, f2);
            break;
        }
    }
    fclose(f);
    return ok;
}

static int probe_ok = 1;

static void run(const char *dir, const char *trunk, int pm) {
    char err[4096], what[512];
    snprintf(what, sizeof what, "%s%s%s", dir, trunk ? " --trunk " : "", trunk ? trunk : "");
    K3EngineOpts o = { dir, NULL, NULL, 2, { 0 } };
    k3_mem_opts_init(&o.mem);
    o.mem.trunk_dir = trunk;
    o.mem.trunk_gb = o.mem.cache_gb = 0;          /* the smallest plan: layers stream */
    o.mem.chunk = 8; o.mem.ctx = 64; o.mem.quiet = 1;
    K3Engine e;
    if (k3_engine_open(&e, &o, err, sizeof err)) { CHECK(0, "%s: open: %s", what, err); return; }
    const Range r = embed_range(&e.m.embed);
    const int V = e.m.cfg.vocab_size;
    CHECK(r.hi - r.lo >= 16 * PG, "%s: embedding of %lu pages", what,
          (unsigned long)((r.hi - r.lo) / PG));
    CHECK(vm_flags_have(r.lo, " nh", " rr"), "%s: the embedding's mapping lacks "
          "MADV_NOHUGEPAGE (nh) or MADV_RANDOM (rr) in its VmFlags", what);
    /* the probe: a row read by hand is mapped */
    const volatile unsigned char *mid = (const unsigned char *)(r.lo + (r.hi - r.lo) / 2);
    (void)*mid;
    const Range one = { (uintptr_t)mid & ~(uintptr_t)(PG - 1),
                        ((uintptr_t)mid & ~(uintptr_t)(PG - 1)) + PG };
    if (mapped_pages(pm, one) != 1) probe_ok = 0;
    CHECK(probe_ok, "%s: a page read by hand does not show in /proc/self/pagemap", what);

    int ids[40];
    for (int i = 0; i < 40; i++) ids[i] = (int)((i * 7919L + 13) % V);   /* rows all over */
    float *lg = malloc(sizeof(float) * (size_t)V * 2);
    K3State *s = k3_state_new(&e.m), *s2 = k3_state_new(&e.m);
    CHECK(lg && s && s2, "%s: out of memory", what);
    if (lg && s && s2) {
        int rc = k3_prefill(&e, s, ids, 30, 8, lg, 0, err, sizeof err);   /* 4 forwards */
        CHECK(rc == 0, "%s: prefill: %s", what, err);
        long n = mapped_pages(pm, r);
        CHECK(n == 0, "%s: %ld of %lu embedding pages mapped after a 30-token prefill", what,
              n, (unsigned long)((r.hi - r.lo) / PG));
        for (int t = 30; t < 34 && !rc; t++) {
            rc = k3_forward(&e, s, ids + t, 1, lg, 0, err, sizeof err);
            CHECK(rc == 0, "%s: decode: %s", what, err);
            n = mapped_pages(pm, r);
            CHECK(n == 0, "%s: %ld embedding pages mapped after decode step %d", what, n, t);
        }
        const K3Seq sq[2] = { { s, ids + 34, 1, 0 }, { s2, ids + 35, 5, 0 } };
        rc = k3_forward_seqs(&e, sq, 2, lg, err, sizeof err);
        CHECK(rc == 0, "%s: two sequences: %s", what, err);
        n = mapped_pages(pm, r);
        CHECK(n == 0, "%s: %ld embedding pages mapped after a two-sequence step", what, n);
    }
    if (s) k3_state_free(&e.m, s);
    if (s2) k3_state_free(&e.m, s2);
    free(lg);
    k3_engine_close(&e);
}

static void huge_alloc(void) {
    const size_t n = ((size_t)5 << 20) + 123;
    unsigned char *m = k3_alloc_huge(n);
    CHECK(m && ((uintptr_t)m & (((uintptr_t)2 << 20) - 1)) == 0, "k3_alloc_huge: %p is not "
          "2 MB-aligned", (void *)m);
    if (!m) return;
    memset(m, 1, n);
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", R_OK) == 0)
        CHECK(vm_flags_have((uintptr_t)m, "hg", "hg"), "k3_alloc_huge: its mapping "
              "lacks MADV_HUGEPAGE (no hg in VmFlags)");
    free(m);
}

int main(void) {
    huge_alloc();
    const int pm = open("/proc/self/pagemap", O_RDONLY);
    if (pm < 0) { printf("SKIP test_embed_unmap: /proc/self/pagemap unreadable\n"); return 0; }
    char tmp[] = "/tmp/k3_embed_unmap_XXXXXX";
    if (!mkdtemp(tmp)) { printf("FAIL: mkdtemp\n"); return 1; }
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        const char *dir = models[i];
        run(dir, NULL, pm);
        char tr[256], *argv[] = { "pack", (char *)dir, tr, "--quiet", NULL };
        snprintf(tr, sizeof tr, "%s/trunk%zu", tmp, i);
        const int rc = k3_pack_main(4, argv);
        CHECK(rc == 0, "%s: k3 pack into %s: exit %d", dir, tr, rc);
        if (!rc) run(dir, tr, pm);
        char p[300];
        snprintf(p, sizeof p, "%s/trunk.k3", tr);
        unlink(p);
        rmdir(tr);
    }
    rmdir(tmp);
    close(pm);
    if (fails) { printf("%d check(s) failed\n", fails); return 1; }
    printf("test_embed_unmap: ok (3 models, with and without a trunk)\n");
    return 0;
}
