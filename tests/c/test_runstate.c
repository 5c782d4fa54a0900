/* test_runstate.c — the scratch plan: the memory plan's "buffers" figure is exactly what
 * the run state allocates (k3_runstate_bytes == rs.bytes == the plan's figure through
 * k3_engine_open), for every committed model and several chunk sizes, contexts and
 * logits rows; and the layout is sound: inside each layer kind's group (the fixed
 * buffers plus KDA, or MLA, or MoE + MLP) no two buffers overlap and each lies inside
 * the arena. With the buffers in a file (k3_runstate_open with a directory) the experts'
 * scratch lies apart, in memory: inside rs.scratch, disjoint, sized for one block of
 * K3_ACT_TOKENS tokens, and the resident bound counts it; the experts' loop's hold keeps
 * moe.r and moe.wsel mapped through a drop and nothing else. A layout that double-books a
 * buffer, or a plan that counts by hand, fails here. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

static int fails, holds;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL: "); printf(__VA_ARGS__); printf("\n"); \
                                       fails++; } } while (0)

typedef struct { const void *p; size_t n; const char *name; } Buf;

/* Every pair in b[0..n) disjoint and inside [base, base + len). */
static void disjoint(const Buf *b, int n, const void *base, size_t len, const char *what) {
    const char *lo = base, *hi = lo + len;
    for (int i = 0; i < n; i++) {
        const char *p = b[i].p;
        CHECK(p >= lo && p + b[i].n <= hi, "%s: %s outside the arena", what, b[i].name);
        for (int j = i + 1; j < n; j++) {
            const char *q = b[j].p;
            CHECK(p + b[i].n <= q || q + b[j].n <= p, "%s: %s overlaps %s", what, b[i].name,
                  b[j].name);
        }
    }
}

static void check_layout(const K3RunState *rs, const K3Config *c, const char *what) {
    const size_t T = rs->max_T, H = c->hidden_size, F = sizeof(float);
    const size_t C = (size_t)c->kda_num_heads * c->kda_head_dim, E = c->num_experts;
    const size_t MH = c->num_attention_heads, VD = c->v_head_dim;
    const size_t QH = c->qk_nope_head_dim + c->qk_rope_head_dim, R = c->kv_lora_rank;
    const size_t LAT = c->routed_expert_hidden_size, I = c->moe_intermediate_size;
    size_t mlp = 0;
    for (int L = 0; L < c->num_hidden_layers; L++) {
        size_t x = c->is_moe[L] ? I * c->num_shared_experts : (size_t)c->intermediate_size;
        if (x > mlp) mlp = x;
    }
    const size_t arena = rs->bytes - F * MH * rs->ctx;     /* the score rows are apart */
    Buf fixed[64];
    int nf = 0;
    fixed[nf++] = (Buf){ rs->logits, F * rs->logits_rows * c->vocab_size, "logits" };
    fixed[nf++] = (Buf){ rs->h, F * T * H, "h" };
    fixed[nf++] = (Buf){ rs->x, F * T * H, "x" };
    fixed[nf++] = (Buf){ rs->a, F * T * H, "a" };
    fixed[nf++] = (Buf){ rs->blocks, sizeof(float *) * rs->n_blocks, "blocks[]" };
    for (int i = 0; i < rs->n_blocks && nf < 40; i++)
        fixed[nf++] = (Buf){ rs->blocks[i], F * T * H, "block" };
    CHECK(rs->n_blocks >= c->num_hidden_layers / c->attn_res_block_size + 2,
          "%s: %d block buffers for %d layers in blocks of %d", what, rs->n_blocks,
          c->num_hidden_layers, c->attn_res_block_size);
    Buf g[64];
    int n = nf;
    memcpy(g, fixed, sizeof(Buf) * nf);
    g[n++] = (Buf){ rs->kda.q, F * T * C, "kda.q" };
    g[n++] = (Buf){ rs->kda.k, F * T * C, "kda.k" };
    g[n++] = (Buf){ rs->kda.v, F * T * C, "kda.v" };
    g[n++] = (Buf){ rs->kda.z, F * T * C, "kda.z" };
    g[n++] = (Buf){ rs->kda.G, F * T * C, "kda.G" };
    g[n++] = (Buf){ rs->kda.o, F * T * C, "kda.o" };
    g[n++] = (Buf){ rs->kda.fa, F * T * c->kda_head_dim, "kda.fa" };
    g[n++] = (Buf){ rs->kda.bl, F * T * c->kda_num_heads, "kda.bl" };
    disjoint(g, n, rs->arena, arena, what);
    n = nf;
    g[n++] = (Buf){ rs->mla.cq, F * T * c->q_lora_rank, "mla.cq" };
    g[n++] = (Buf){ rs->mla.q, F * T * MH * QH, "mla.q" };
    g[n++] = (Buf){ rs->mla.kva, F * T * (R + c->qk_rope_head_dim), "mla.kva" };
    g[n++] = (Buf){ rs->mla.G, F * T * MH * VD, "mla.G" };
    g[n++] = (Buf){ rs->mla.o, F * T * MH * VD, "mla.o" };
    disjoint(g, n, rs->arena, arena, what);
    n = nf;
    g[n++] = (Buf){ rs->moe.logit, F * T * E, "moe.logit" };
    g[n++] = (Buf){ rs->moe.wsel, F * T * E, "moe.wsel" };
    g[n++] = (Buf){ rs->moe.sel, T * E, "moe.sel" };
    g[n++] = (Buf){ rs->moe.xl, F * T * LAT, "moe.xl" };
    g[n++] = (Buf){ rs->moe.r, F * T * LAT, "moe.r" };
    g[n++] = (Buf){ rs->moe.xe, F * T * LAT, "moe.xe" };
    g[n++] = (Buf){ rs->moe.y, F * T * LAT, "moe.y" };
    g[n++] = (Buf){ rs->moe.g, F * T * I, "moe.g" };
    g[n++] = (Buf){ rs->moe.u, F * T * I, "moe.u" };
    g[n++] = (Buf){ rs->moe.shared, F * T * H, "moe.shared" };
    g[n++] = (Buf){ rs->moe.tok, sizeof(int) * T, "moe.tok" };
    g[n++] = (Buf){ rs->moe.uni, sizeof(int) * E, "moe.uni" };
    g[n++] = (Buf){ rs->mlp.g, F * T * mlp, "mlp.g" };
    g[n++] = (Buf){ rs->mlp.u, F * T * mlp, "mlp.u" };
    disjoint(g, n, rs->arena, arena, what);
    CHECK(rs->mla.scores != NULL, "%s: no MLA score rows", what);
}

/* Whether the page at p is mapped now (/proc/self/pagemap, bit 63); -1 if unknown. */
static int mapped(const void *p) {
    FILE *f = fopen("/proc/self/pagemap", "rb");
    uint64_t v = 0;
    int ok = f && !fseek(f, (long)((uintptr_t)p / 4096 * 8), SEEK_SET) && fread(&v, 8, 1, f) == 1;
    if (f) fclose(f);
    return ok ? (int)(v >> 63) : -1;
}

/* The experts' loop's hold (k3_runstate_hold): while on, a drop keeps every page of
 * moe.r and moe.wsel mapped and unmaps the rest (moe.xl); off drops them. Held only where
 * r and wsel over all T tokens, with a block of an expert's rows, fit the room the plan
 * gives a matmul block, so the resident bound holds them (it is not raised for them). */
static void check_hold(K3RunState *rs, const K3Config *c, int T, const char *what) {
    const size_t F = sizeof(float), LAT = c->routed_expert_hidden_size;
    const size_t E = c->num_experts;
    if (!rs->moe_hold) return;
    CHECK(rs->bytes >= F * (size_t)T * (LAT + E), "%s: hold: bound %zu under r and wsel",
          what, rs->bytes);
    const size_t nr = F * (size_t)T * LAT, nx = nr;
    memset(rs->moe.r, 1, nr); memset(rs->moe.wsel, 1, F * (size_t)T * E);
    memset(rs->moe.xl, 1, nx);
    const char *xl_mid = (const char *)rs->moe.xl + nx / 2;   /* a page inside xl, if any */
    const int inner = nx >= 3 * 4096;
    k3_runstate_hold(rs, 1);
    k3_runstate_drop(rs);
    if (mapped(rs->moe.r) < 0) return;                        /* no pagemap here */
    for (size_t o = 0; o < nr; o += 4096)
        CHECK(mapped((const char *)rs->moe.r + o) == 1, "%s: hold: r's page %zu dropped",
              what, o / 4096);
    CHECK(mapped((const char *)rs->moe.r + nr - 1) == 1, "%s: hold: r's last page dropped",
          what);
    CHECK(mapped(rs->moe.wsel) == 1, "%s: hold: wsel dropped", what);
    if (inner) CHECK(mapped(xl_mid) == 0, "%s: hold: xl still mapped", what);
    k3_runstate_hold(rs, 0);
    CHECK(mapped(rs->moe.r) == 0 && mapped(rs->moe.wsel) == 0, "%s: hold off: r or wsel "
          "still mapped", what);
    holds++;
}

/* The file layout: xe, y, g, u in the scratch (K3_ACT_TOKENS rows at most), the rest in
 * the mapped file, and the resident bound at least the scratch. */
static void check_file_layout(const K3Config *c, int T, const char *what) {
    K3RunState rs;
    char err[4096];
    if (k3_runstate_open(&rs, c, T, 20, 1, "/tmp", err, sizeof err)) {
        CHECK(0, "%s: file layout: %s", what, err);
        return;
    }
    const size_t B = (size_t)(T < K3_ACT_TOKENS ? T : K3_ACT_TOKENS), F = sizeof(float);
    const size_t LAT = c->routed_expert_hidden_size, I = c->moe_intermediate_size;
    const size_t n = F * B * (2 * LAT + 2 * I) + 4 * 64;
    Buf s[4] = { { rs.moe.xe, F * B * LAT, "moe.xe" }, { rs.moe.y, F * B * LAT, "moe.y" },
                 { rs.moe.g, F * B * I, "moe.g" }, { rs.moe.u, F * B * I, "moe.u" } };
    CHECK(rs.in_file && rs.scratch, "%s: file layout: no file or no scratch", what);
    disjoint(s, 4, rs.scratch, n, what);
    Buf f[2] = { { rs.moe.xl, F * T * LAT, "moe.xl" }, { rs.moe.r, F * T * LAT, "moe.r" } };
    disjoint(f, 2, rs.arena, rs.map_bytes, what);
    CHECK(rs.bytes >= n - 4 * 64, "%s: resident bound %zu under the scratch %zu", what,
          rs.bytes, n);
    check_hold(&rs, c, T, what);
    k3_runstate_free(&rs);
}

int main(void) {
    static const char *models[] = { "tests/models/tiny5", "tests/models/tiny4",
                                    "tests/models/tiny5f" };
    static const int chunks[] = { 1, 3, 64, 200 }, ctxs[] = { 1, 20, 4096 }, rows[] = { 1, 7 };
    int configs = 0;
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++)
        for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++)
            for (size_t xi = 0; xi < sizeof ctxs / sizeof ctxs[0]; xi++)
                for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
                    char err[4096], what[256];
                    snprintf(what, sizeof what, "%s chunk %d ctx %d rows %d", models[mi],
                             chunks[ci], ctxs[xi], rows[ri]);
                    K3EngineOpts o = { models[mi], NULL, "scalar", 1, { 0 } };
                    k3_mem_opts_init(&o.mem);
                    o.mem.trunk_gb = o.mem.cache_gb = 0;
                    o.mem.chunk = chunks[ci]; o.mem.ctx = ctxs[xi];
                    o.mem.logits_rows = rows[ri]; o.mem.quiet = 1;
                    K3Engine e;
                    int rc = k3_engine_open(&e, &o, err, sizeof err);
                    CHECK(rc == 0, "%s: %s", what, err);
                    if (rc) continue;
                    size_t want = k3_runstate_bytes(&e.m.cfg, chunks[ci], ctxs[xi], rows[ri]);
                    CHECK(k3_mem_buffer_bytes(e.mem) == e.rs.bytes && e.rs.bytes == want,
                          "%s: plan %llu, allocated %zu, k3_runstate_bytes %zu", what,
                          (unsigned long long)k3_mem_buffer_bytes(e.mem), e.rs.bytes, want);
                    check_layout(&e.rs, &e.m.cfg, what);
                    if (xi == 0 && ri == 0) check_file_layout(&e.m.cfg, chunks[ci], what);
                    k3_engine_close(&e);
                    configs++;
                }
    CHECK(holds > 0, "no configuration held the experts' rows (k3_runstate_hold untested)");
    printf("test_runstate: %d configs, plan == allocation, %d holds%s\n", configs, holds,
           fails ? ": FAILED" : "");
    return fails ? 1 : 0;
}
