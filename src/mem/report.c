/* report.c — the memory system's figures: one line per forward (--verbose), the summary
 * after a run, and the JSON fields of --out (with a per-step array). */
#include "internal.h"
#include <stdlib.h>

static const char *s_(unsigned long long n) { return n == 1 ? "" : "s"; }

void k3_mem_step(K3Mem *x, int step, int ntok, double seconds, int verbose) {
    if (!x) return;
    const K3MemStats *s = &x->st, *p = &x->prev;
    uint64_t tb = s->trunk_bytes - p->trunk_bytes, eb = s->expert_bytes - p->expert_bytes;
    if (x->n_steps == x->cap_steps) {   /* kept for --out; a lost record only shortens the list */
        int cap = x->cap_steps ? 2 * x->cap_steps : 64;
        K3MemStep *v = realloc(x->steps, sizeof *v * (size_t)cap);
        if (v) { x->steps = v; x->cap_steps = cap; }
    }
    if (x->n_steps < x->cap_steps)
        x->steps[x->n_steps++] = (K3MemStep){ step, ntok, seconds, s->io_wait_s - p->io_wait_s,
                                              tb, eb, s->expert_reads - p->expert_reads,
                                              s->expert_req - p->expert_req,
                                              s->expert_hits - p->expert_hits,
                                              s->head_bytes - p->head_bytes,
                                              s->disk_busy_s - p->disk_busy_s };
    if (verbose) {
        const unsigned long long nr = s->expert_reads - p->expert_reads;
        const uint64_t hb = s->head_bytes - p->head_bytes;
        fprintf(stderr, "k3: step %d (%d token%s): %.3f s, trunk %.1f MB + lm_head %.1f MB, "
                "experts %.1f MB (%llu read%s), %llu of %llu experts already resident, "
                "%.1f MB/s, I/O wait %.3f s, disk busy %.0f%%\n",
                step, ntok, ntok == 1 ? "" : "s", seconds, (tb - hb) / 1e6, hb / 1e6,
                eb / 1e6, nr, s_(nr),
                (unsigned long long)(s->expert_hits - p->expert_hits),
                (unsigned long long)(s->expert_req - p->expert_req),
                seconds > 0 ? (tb + eb) / 1e6 / seconds : 0.0, s->io_wait_s - p->io_wait_s,
                seconds > 0 ? 100 * (s->disk_busy_s - p->disk_busy_s) / seconds : 0.0);
    }
    x->prev = *s;
    x->step = step + 1;
}

/* A read rate that never shows as "0 MB/s": tiny reads on a loaded machine can be slow. */
static const char *rate_text(double mbps, char *out, size_t n) {
    if (mbps >= 10) snprintf(out, n, "%.0f MB/s", mbps);
    else if (mbps >= 0.1) snprintf(out, n, "%.2f MB/s", mbps);
    else snprintf(out, n, "%.1f KB/s", mbps * 1e3);
    return out;
}

int k3_mem_brief(const K3Mem *x) { return x && x->brief; }

void k3_mem_summary(const K3Mem *x, FILE *f, double wall, double t_prefill, int n_gen,
                    double t_decode) {
    const K3MemStats *s = k3_mem_stats(x);
    if (!s) return;
    char spt[48], tr[64] = "", er[64] = "", r[32];
    if (n_gen > 1 && t_decode > 0)
        snprintf(spt, sizeof spt, "%.3f s/token", t_decode / (n_gen - 1));
    else snprintf(spt, sizeof spt, "s/token n/a (no decode step)");
    if (s->trunk_read_s > 0)
        snprintf(tr, sizeof tr, ", %s while reading",
                 rate_text(s->trunk_bytes / 1e6 / s->trunk_read_s, r, sizeof r));
    if (s->expert_read_s > 0)
        snprintf(er, sizeof er, ", %s per read stream",
                 rate_text(s->expert_bytes / 1e6 / s->expert_read_s, r, sizeof r));
    fprintf(f, "k3: memory summary: %d token%s generated, prefill %.3f s, %s; "
            "I/O wait %.1f%% of %.3f s wall\n", n_gen, s_((unsigned long long)n_gen), t_prefill,
            spt, wall > 0 ? 100 * s->io_wait_s / wall : 0.0, wall);
    fprintf(f, "k3:   trunk read %.3f GB (%llu layer read%s%s), pinned %.3f GB loaded once\n",
            s->trunk_bytes / K3_GB, (unsigned long long)s->trunk_reads, s_(s->trunk_reads), tr,
            s->trunk_load_bytes / K3_GB);
    if (s->disk_busy_s > 0)
        fprintf(f, "k3:   disk busy %.1f%% of the wall clock, up to %d reads in flight, read "
                "ahead up to %.1f MB\n", wall > 0 ? 100 * s->disk_busy_s / wall : 0.0,
                s->io_depth_max, s->ahead_max / 1e6);
    fprintf(f, "k3:   experts read %.3f GB (%llu read%s%s), requests %llu, retained (hit rate) "
            "%.1f%%, retries %llu, failed %llu\n",
            s->expert_bytes / K3_GB, (unsigned long long)s->expert_reads, s_(s->expert_reads), er,
            (unsigned long long)s->expert_req,
            s->expert_req ? 100.0 * s->expert_hits / s->expert_req : 0.0,
            (unsigned long long)s->expert_retries, (unsigned long long)s->expert_failed);
    if (s->guess_reads) {
        fprintf(f, "k3:   read ahead on a guess: %llu experts (%.3f GB), %llu used, %llu "
                "evicted unused\n", (unsigned long long)s->guess_reads, s->guess_bytes / K3_GB,
                (unsigned long long)s->guess_used, (unsigned long long)s->guess_wasted);
    }
}

void k3_mem_json(const K3Mem *x, FILE *f, double wall) {
    const K3MemStats *s = k3_mem_stats(x);
    if (!s) return;
    fprintf(f, "  \"io_wait_seconds\": %.6f,\n  \"io_share\": %.6f,\n", s->io_wait_s,
            wall > 0 ? s->io_wait_s / wall : 0.0);
    fprintf(f, "  \"trunk_bytes_read\": %llu,\n  \"trunk_reads\": %llu,\n"
            "  \"trunk_pinned_bytes\": %llu,\n  \"trunk_read_mb_per_s\": %.3f,\n",
            (unsigned long long)s->trunk_bytes, (unsigned long long)s->trunk_reads,
            (unsigned long long)s->trunk_load_bytes,
            s->trunk_read_s > 0 ? s->trunk_bytes / 1e6 / s->trunk_read_s : 0.0);
    fprintf(f, "  \"expert_bytes_read\": %llu,\n  \"expert_reads\": %llu,\n"
            "  \"expert_requests\": %llu,\n  \"expert_hits\": %llu,\n",
            (unsigned long long)s->expert_bytes, (unsigned long long)s->expert_reads,
            (unsigned long long)s->expert_req, (unsigned long long)s->expert_hits);
    fprintf(f, "  \"expert_hit_rate\": %.6f,\n  \"expert_read_mb_per_s\": %.3f,\n"
            "  \"expert_retries\": %llu,\n",
            s->expert_req ? (double)s->expert_hits / s->expert_req : 0.0,
            s->expert_read_s > 0 ? s->expert_bytes / 1e6 / s->expert_read_s : 0.0,
            (unsigned long long)s->expert_retries);
    fprintf(f, "  \"readahead_guessed\": %llu,\n  \"readahead_guessed_bytes\": %llu,\n"
            "  \"readahead_used\": %llu,\n  \"readahead_wasted\": %llu,\n",
            (unsigned long long)s->guess_reads, (unsigned long long)s->guess_bytes,
            (unsigned long long)s->guess_used, (unsigned long long)s->guess_wasted);
    fprintf(f, "  \"head_bytes_read\": %llu,\n  \"plan_bytes\": %llu,\n"
            "  \"buffer_bytes\": %llu,\n  \"prefill_chunk\": %d,\n",
            (unsigned long long)s->head_bytes, (unsigned long long)x->plan_bytes,
            (unsigned long long)x->buffer_bytes, x->chunk);
    fprintf(f, "  \"trunk_budget_bytes\": %llu,\n  \"cache_budget_bytes\": %llu,\n",
            (unsigned long long)x->trunk_budget, (unsigned long long)x->cache_budget);
    if (x->draft_planned)                  /* --draft: its share of plan_bytes */
        fprintf(f, "  \"draft_plan_bytes\": %llu,\n", (unsigned long long)x->draft_bytes);
    if (x->vision_patches >= 0)            /* images: the tower's share of plan_bytes */
        fprintf(f, "  \"vision_plan_bytes\": %llu,\n  \"vision_patches\": %ld,\n",
                (unsigned long long)x->vision_bytes, x->vision_patches);
    /* per decoded token (the steps after the prefill), by kind */
    uint64_t tk = 0, hk = 0, ek = 0;
    int nd = 0;
    for (int i = 0; i < x->n_steps; i++)
        if (x->steps[i].step > 0) {
            tk += x->steps[i].trunk_bytes - x->steps[i].head_bytes;
            hk += x->steps[i].head_bytes; ek += x->steps[i].expert_bytes; nd++;
        }
    fprintf(f, "  \"trunk_bytes_per_token\": %.0f,\n  \"head_bytes_per_token\": %.0f,\n"
            "  \"expert_bytes_per_token\": %.0f,\n", nd ? (double)tk / nd : 0.0,
            nd ? (double)hk / nd : 0.0, nd ? (double)ek / nd : 0.0);
    fprintf(f, "  \"disk_busy_seconds\": %.6f,\n  \"disk_busy_share\": %.6f,\n"
            "  \"io_depth_max\": %d,\n  \"read_ahead_bytes_max\": %llu,\n",
            s->disk_busy_s, wall > 0 ? s->disk_busy_s / wall : 0.0, s->io_depth_max,
            (unsigned long long)s->ahead_max);
    fprintf(f, "  \"steps\": [");
    for (int i = 0; i < x->n_steps; i++) {
        const K3MemStep *q = &x->steps[i];
        fprintf(f, "%s\n    {\"step\": %d, \"tokens\": %d, \"seconds\": %.6f, "
                   "\"trunk_bytes\": %llu, \"expert_bytes\": %llu, \"expert_reads\": %llu, "
                   "\"experts_requested\": %llu, \"experts_already_resident\": %llu, "
                   "\"bytes_per_second\": %.1f, \"io_wait_seconds\": %.6f, \"head_bytes\": %llu, "
                   "\"disk_busy_seconds\": %.6f}",
                i ? "," : "", q->step, q->ntok, q->seconds, (unsigned long long)q->trunk_bytes,
                (unsigned long long)q->expert_bytes, (unsigned long long)q->expert_reads,
                (unsigned long long)q->expert_req, (unsigned long long)q->expert_hits,
                q->seconds > 0 ? (q->trunk_bytes + q->expert_bytes) / q->seconds : 0.0,
                q->io_wait_s, (unsigned long long)q->head_bytes, q->disk_busy_s);
    }
    fprintf(f, "\n  ],\n");
}
