/* predict.c — what a preset would cost per decoded token on this model, for `k3 doctor`:
 * the engine's own plan (plan.c) at the preset's budgets, then the bytes one token reads
 * from disk (the streamed part of the trunk and lm_head, expert-cache misses) and from
 * memory (the pinned prefix, cache hits). Routing is taken as uniform
 * (hit rate = cached experts / all routed experts): an estimate, usually a pessimistic
 * one (the measured LFU cache does better, docs/PERFORMANCE.md). */
#include "internal.h"
#include "sysmem.h"
#include <stdlib.h>
#include <string.h>

const char *k3_preset_cost(const K3Model *m, int i, int ctx, K3PresetCost *out) {
    return k3_preset_cost_draft(m, i, ctx, NULL, 0, out);
}

const char *k3_preset_cost_draft(const K3Model *m, int i, int ctx, const K3DraftPlan *draft,
                                 int rows, K3PresetCost *out) {
    if (i < 0 || i >= k3_preset_count()) return NULL;
    const K3Config *c = &m->cfg;
    const int NL = c->num_hidden_layers;
    uint64_t *lb = calloc(NL, sizeof(uint64_t)), global = 0;
    memset(out, 0, sizeof *out);
    if (!lb) return NULL;
    k3_trunk_sizes_from_shards(m, lb, &global);
    K3MemOpts o;
    k3_mem_opts_init(&o);
    o.ctx = ctx; o.trunk_dir = "TRUNK_DIR";
    if (draft) {                  /* the draft and a verify pass of rows positions */
        o.draft = *draft;
        o.undo_T = o.logits_rows = rows;
        if (o.chunk < rows) o.chunk = rows;
    }
    double tgb, cgb;
    k3_preset_budgets(i, &tgb, &cgb);
    K3Plan p;
    k3_plan_make(c, m->lm_head.type == K3_W_F32, &o, lb, 1, tgb, cgb, k3_rss_now(), &p);
    int nmoe = 0;
    for (int L = 0; L < NL; L++) nmoe += c->is_moe[L];
    const uint64_t all = (uint64_t)nmoe * c->num_experts;
    const double hit = all ? (p.nslots >= (int)all ? 1.0 : (double)p.nslots / all) : 0.0;
    const double ex = (double)nmoe * c->num_experts_per_token * k3_expert_bytes(c);
    out->total = p.total; out->n_pinned = p.n_pinned; out->nslots = p.nslots;
    out->head_stream = p.head_stream; out->hit_rate = hit;
    /* the trunk and lm_head: the pinned prefix from memory, the rest from disk */
    out->streamed = (uint64_t)(ex * (1 - hit)) + (p.trunk_total + p.head_full - p.pinned);
    out->resident = (uint64_t)(ex * hit) + p.pinned;
    out->draft_pinned = p.draft_pin > 0;
    out->undo = p.undo;
    if (draft) {                  /* a block: distinct experts of rows tokens (uniform) */
        double miss = 1;
        const double pk = c->num_experts ? (double)c->num_experts_per_token / c->num_experts : 0;
        for (int r = 0; r < rows; r++) miss *= 1 - pk;
        const double ex_blk = (double)nmoe * c->num_experts * (1 - miss) * k3_expert_bytes(c);
        out->block_read = (uint64_t)(ex_blk * (1 - hit)) + (p.trunk_total + p.head_full -
                          p.pinned) + p.draft_read;
        out->draft_read = p.draft_read;
    }
    free(lb);
    return k3_preset_name(i);
}
