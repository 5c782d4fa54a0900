/* test_plan.c — the memory plan's arithmetic (plan.c): the two flags are the ceiling of
 * the whole process. On a full-width 6-layer config (fw6's shape) and the real K3's:
 * with --trunk, pinned + window + scatter block + everything beside them == the trunk
 * budget, slots + index <= the cache budget, so the total <= trunk-gb + cache-gb at every
 * budget above the floor and every prefill chunk (a larger chunk costs pinned bytes, not
 * more total); the floor pins nothing; a budget that holds everything pins it all with no
 * window; the buffers are k3_runstate_bytes; one forward's embedding rows. */
#include "../../src/mem/internal.h"
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(c, ...) do { if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); } } while (0)

static void config(K3Config *c, uint64_t *lb, int NL, int V) {
    memset(c, 0, sizeof *c);
    c->hidden_size = 7168; c->num_hidden_layers = NL; c->vocab_size = V;
    c->intermediate_size = 33792;
    c->num_experts = NL > 6 ? 896 : 64; c->num_experts_per_token = 16;
    c->num_shared_experts = 2;
    c->moe_intermediate_size = 3072; c->routed_expert_hidden_size = 3584;
    c->attn_res_block_size = 12;
    c->num_attention_heads = 96; c->q_lora_rank = 1536; c->kv_lora_rank = 512;
    c->qk_nope_head_dim = 128; c->qk_rope_head_dim = 64; c->v_head_dim = 128;
    c->kda_num_heads = 96; c->kda_head_dim = 128; c->short_conv_kernel_size = 4;
    for (int L = 0; L < NL; L++) {
        c->is_kda[L] = (L + 1) % 4 != 0;
        c->is_moe[L] = L >= 1;
        lb[L] = L == 0 ? 2341213184ull : c->is_kda[L] ? 1267744256ull : 844335616ull;
    }
}

static void one(const K3Config *c, const uint64_t *lb, double tgb, double cgb, int chunk,
                int ctx, K3Plan *p) {
    K3MemOpts o;
    k3_mem_opts_init(&o);
    o.chunk = chunk; o.ctx = ctx; o.trunk_dir = "x";
    k3_plan_make(c, 0, &o, lb, 1, tgb, cgb, 10000000, p);
    const uint64_t side = p->embed + p->vectors + p->state + p->mla + p->buffers + p->scratch +
                          p->process;
    CHECK(p->side == side, "side %llu != its terms %llu", (unsigned long long)p->side,
          (unsigned long long)side);
    CHECK(p->total == p->pinned + p->ring_bytes + p->cache + p->lm_head + p->side,
          "total is not the sum of its lines");
    CHECK(p->buffers == k3_runstate_bytes(c, chunk, ctx, 1), "buffers != k3_runstate_bytes");
    CHECK(p->scratch == (uint64_t)k3_threads() * k3_runstate_scratch_bytes(c, chunk, ctx) &&
          p->scratch > 0, "kernel scratch != every thread's k3_runstate_scratch_bytes");
    CHECK(p->cache == (uint64_t)p->nslots * p->slot_bytes + p->cache_index,
          "cache != slots + index");
    CHECK((double)p->cache <= p->cache_budget + 0.5, "cache %llu above its budget %.0f",
          (unsigned long long)p->cache, p->cache_budget);
    CHECK(p->cache_index == k3_ecache_index_bytes(c), "the cache's index is not counted");
    const uint64_t row = (uint64_t)c->hidden_size * 2;
    CHECK(p->embed >= (uint64_t)chunk * row || p->embed == (uint64_t)c->vocab_size * row,
          "embedding rows %llu below one forward's %d rows", (unsigned long long)p->embed,
          chunk);
    CHECK(p->embed <= (uint64_t)chunk * (row / 65536 + 2) * 65536,
          "embedding rows %llu more than one forward's", (unsigned long long)p->embed);
    if (p->ring) {   /* streamed: the trunk budget is spent exactly, never exceeded */
        const uint64_t used = p->pinned + p->ring_bytes + p->side;
        CHECK(used == (uint64_t)p->trunk_budget, "pinned + window + side %llu != trunk budget "
              "%.0f (tgb %g, chunk %d)", (unsigned long long)used, p->trunk_budget, tgb, chunk);
        CHECK(p->lm_head == 0, "lm_head counted beside the stream");
    }
}

int main(void) {
    K3Config c;
    static uint64_t lb[93];
    for (int real = 0; real < 2; real++) {
        const int NL = real ? 93 : 6;
        config(&c, lb, NL, real ? 163840 : 16384);
        const double tg[] = { 3, 6, real ? 40 : 8 }, cg[] = { 0.5, 2, 5 };
        for (int i = 0; i < 3; i++) {
            K3Plan a, b;
            one(&c, lb, tg[i], cg[i], 8, 16, &a);
            one(&c, lb, tg[i], cg[i], 256, 300, &b);
            const double ceil = (tg[i] + cg[i]) * K3_GB;
            CHECK((double)a.total <= ceil && (double)b.total <= ceil, "%s %g/%g: totals %llu, "
                  "%llu above the flags %.0f", real ? "K3" : "fw6", tg[i], cg[i],
                  (unsigned long long)a.total, (unsigned long long)b.total, ceil);
            CHECK(a.ring && b.ring, "%g: not streamed", tg[i]);
            CHECK(a.total == b.total, "chunk 256 changed the total (%llu vs %llu)",
                  (unsigned long long)a.total, (unsigned long long)b.total);
            CHECK(b.pinned + (b.side - a.side) == a.pinned,
                  "chunk 256 must cost exactly its bytes of pinned trunk");
            CHECK(ceil - (double)a.total < (double)a.slot_bytes + 1,
                  "%g/%g: %.0f bytes of the flags unused", tg[i], cg[i], ceil - a.total);
        }
        K3Plan f, r;
        one(&c, lb, 0, 0, 64, 4096, &f);           /* the floor */
        CHECK(f.raised_trunk && f.raised_cache && f.pinned == 0 && f.nslots == 5,
              "floor: raised %d %d, pinned %llu, %d slots", f.raised_trunk, f.raised_cache,
              (unsigned long long)f.pinned, f.nslots);
        CHECK(f.trunk_budget == (double)f.trunk_min, "floor: budget != working minimum");
        one(&c, lb, 1e6, 1e6, 64, 4096, &r);       /* everything fits */
        CHECK(!r.ring && r.ring_bytes == 0 && r.pinned == r.trunk_total + r.head_full,
              "max: not all pinned (ring %d)", r.ring);
        if (real)
            CHECK(f.total < 2.0 * K3_GB, "real K3 minimum %.3f GB above 2 GB", f.total / K3_GB);
    }
    if (!fails) printf("ok   plan: flags are the ceiling (pinned + window + side == trunk "
                       "budget, slots + index <= cache budget) on fw6 and the real K3\n");
    return fails != 0;
}
