/* mem.c — the memory system as one storage behind weights.h: plans the budgets
 * (plan.c), refuses a plan that does not fit, then opens the trunk (its index, trunk.c;
 * pinned prefix and pieces through the window, lm_head included, stream.c) and the
 * expert cache (expert_cache.c). Without --trunk the trunk streams the same way from the
 * shards where they hold it, or, when --trunk-gb holds all of it, stays in the shard
 * mappings (only experts are cached). */
#include "internal.h"
#include "comm.h"
#include "fault.h"
#include "sysmem.h"
#include "util.h"
#include "vision.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void k3_mem_opts_init(K3MemOpts *o) {
    memset(o, 0, sizeof *o);
    o->trunk_gb = o->cache_gb = K3_BUDGET_UNSET;
    o->chunk = K3_PREFILL_CHUNK;
    o->logits_rows = 1;
}

/* ---- weights.h ---- */

static K3Mem *of(K3Weights *w) { return (K3Mem *)w; }

/* The embedding's pages in the shard mapping (k3_model_embed_advise): a row lookup, so
 * the kernel must not map whole 2 MB folios or read ahead around the rows (advice at
 * open), and the rows a forward touched are unmapped once copied out (here at layer 0;
 * with the buffers in a file, forward.c every block of rows), so the embedding holds one
 * forward's rows (plan.c), never a growing share of the mapping. The page cache keeps
 * them: a later lookup is a minor fault. */
static const K3Layer *acquire(K3Weights *w, int L, char *err, size_t errlen) {
    K3Mem *x = of(w);
    if (L == 0) k3_model_embed_advise(x->m, MADV_DONTNEED);
    if (!x->stream) return &x->m->layers[L];
    return k3_stream_acquire(x->stream, L, err, errlen);
}

static void release(K3Weights *w, int L) {
    if (of(w)->stream) k3_stream_release(of(w)->stream, L);
}

static void prefetch(K3Weights *w, int L, const int *ids, int n) {
    if (of(w)->cache) k3_ecache_prefetch(of(w)->cache, L, ids, n);
}

static int expert(K3Weights *w, int L, int e, K3Expert *out) {
    if (!of(w)->cache) return -1;              /* no MoE layer: never asked */
    return k3_ecache_get(of(w)->cache, L, e, out);
}

static int lm_head(K3Weights *w, float *Y, const float *X, int T, char *err, size_t errlen) {
    K3Mem *x = of(w);
    if (x->stream) return k3_stream_head(x->stream, Y, X, T, err, errlen);
    k3_matmul_polled(Y, &x->m->lm_head, X, T);   /* split over N ranks; else polled */
    return 0;
}

static void close_weights(K3Weights *w) { k3_mem_close(of(w)); }

static const K3Layer *peek(K3Weights *w, int L) {
    return of(w)->stream ? NULL : &of(w)->m->layers[L];
}

static void guess(K3Weights *w, int L, const int *ids, int n) {
    if (of(w)->cache) k3_ecache_guess(of(w)->cache, L, ids, n);
}

static const K3WeightsOps MEM_OPS = { acquire, release, prefetch, expert, lm_head, close_weights,
                                      peek, guess };

K3Weights *k3_mem_weights(K3Mem *x) { return &x->base; }
const K3MemStats *k3_mem_stats(const K3Mem *x) { return x ? &x->st : NULL; }
uint64_t k3_mem_buffer_bytes(const K3Mem *x) { return x->buffer_bytes; }
int k3_mem_chunk(const K3Mem *x) { return x->chunk; }
const char *k3_mem_act_dir(const K3Mem *x) { return x->act_dir; }
int k3_mem_seqs(const K3Mem *x) { return x->seqs; }
int k3_mem_state_mode(const K3Mem *x) { return x->state_mode; }
int k3_mem_draft_streamed(const K3Mem *x) { return x ? x->draft_streamed : 0; }
int k3_mem_draft_planned(const K3Mem *x) { return x ? x->draft_planned : 0; }
long k3_mem_vision_patches(const K3Mem *x) { return x ? x->vision_patches : -1; }

/* ---- setup ---- */

/* What the plan may use: MemAvailable, a cgroup limit, or the test knob. */
static uint64_t available(uint64_t self, char *adesc, size_t n) {
    char cdesc[300] = "";
    uint64_t avail = k3_mem_available(), cg = k3_cgroup_available(self, cdesc, sizeof cdesc);
    snprintf(adesc, n, "MemAvailable");
    if (cg) {
        snprintf(adesc, n, "MemAvailable %.3f; %s limit less its other processes %.3f",
                 avail / K3_GB, cdesc, cg / K3_GB);
        if (!avail || cg < avail) avail = cg;
    }
    if (k3_faults()->mem_available_set) {
        avail = k3_faults()->mem_available;
        snprintf(adesc, n, "K3_MEM_AVAILABLE");
    }
    return avail;
}

/* Budgets left unset or auto: the largest preset whose plan fits 90% of avail. */
static void pick_budgets(const K3Model *m, const K3MemOpts *o, const uint64_t *lb, uint64_t self,
                         uint64_t avail, double *tgb, double *cgb) {
    if (*tgb >= 0 && *cgb >= 0) return;
    int pick = 0;
    K3Plan p;
    K3MemOpts q = *o;             /* a count the plan may lower is planned as one sequence: */
    if (q.seqs_auto) q.seqs = 1;  /* memory buys speed first, the batch gets what is left */
    for (int i = k3_preset_count() - 1; i >= 0; i--) {
        double t, c;
        k3_preset_budgets(i, &t, &c);
        if (*tgb >= 0) t = *tgb;
        if (*cgb >= 0) c = *cgb;
        k3_plan_make(&m->cfg, m->lm_head.type == K3_W_F32, &q, lb, o->trunk_dir != NULL, t, c,
                     self, &p);
        if (!avail || p.total <= 0.9 * avail) { pick = i; break; }
    }
    double t, c;
    k3_preset_budgets(pick, &t, &c);
    if (*tgb < 0) *tgb = t;
    if (*cgb < 0) *cgb = c;
    if (!o->quiet) {
        char tb[32], cb[32];                  /* max's 1e6 GB reads "all" */
        snprintf(tb, sizeof tb, *tgb >= 1e6 ? "all" : "%g", *tgb);
        snprintf(cb, sizeof cb, *cgb >= 1e6 ? "all" : "%g", *cgb);
        fprintf(stderr, "k3: auto budgets: preset %s (--trunk-gb %s --cache-gb %s)\n",
                k3_preset_name(pick), tb, cb);
    }
}

/* The prefill chunk: the largest T <= o->chunk whose buffers fit inside the trunk budget
 * beside the window (--trunk-gb is the ceiling: a larger chunk costs pinned bytes, never
 * more memory) and whose plan fits 90% of avail, so a prompt reads each (layer, expert)
 * once per chunk with as few chunks as memory allows. At the working minimum (the budget
 * is raised even for T = 1) only avail bounds it. *why says which bound won. */
static int fits(const K3Model *m, K3MemOpts *q, const uint64_t *lb, double tgb, double cgb,
                uint64_t self, double room, int floor, int T) {
    K3Plan p;
    q->chunk = T;
    k3_plan_make(&m->cfg, m->lm_head.type == K3_W_F32, q, lb, q->trunk_dir != NULL, tgb, cgb,
                 self, &p);
    return (!room || (double)p.total <= room) && (floor || !p.raised_trunk);
}

static int search(const K3Model *m, K3MemOpts *q, const uint64_t *lb, double tgb, double cgb,
                  uint64_t self, double room, int floor, int hi) {
    int lo = 1;
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (fits(m, q, lb, tgb, cgb, self, room, floor, mid)) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The chunk, at most want, and whether its buffers go to a file (*act): a prompt the
 * buffers cannot hold in memory still goes through in one forward (each weight read once)
 * with its activations in a file, where that makes the chunk larger. */
static int fit_chunk(const K3Model *m, const K3MemOpts *o, int want, const uint64_t *lb,
                     double tgb, double cgb, uint64_t self, uint64_t avail, const char **why,
                     int *act) {
    K3MemOpts q = *o;
    int hi = want > 0 ? want : 1;
    *act = 0;
    q.act_file = 0;
    *why = "--prefill-chunk or the caller";
    if (!o->chunk_auto) return hi;
    *why = "all the tokens of the forward";
    const double room = 0.9 * (double)avail;
    const int floor = !fits(m, &q, lb, tgb, cgb, self, 0, 0, 1);   /* raised at T = 1 */
    if (fits(m, &q, lb, tgb, cgb, self, room, floor, hi)) return hi;
    *why = floor || !fits(m, &q, lb, tgb, cgb, self, 0, 0, hi)
         ? (floor ? "the largest whose buffers fit 90% of available beside the budgets"
                  : "the largest whose buffers fit inside --trunk-gb beside the window")
         : "the largest whose buffers fit 90% of available beside the budgets";
    const int lo = search(m, &q, lb, tgb, cgb, self, room, floor, hi);
    K3MemOpts f = *o;
    f.act_file = 1;
    const int lf = fits(m, &f, lb, tgb, cgb, self, room, floor, hi) ? hi
                 : search(m, &f, lb, tgb, cgb, self, room, floor, hi);
    if (lf <= lo) return lo;
    *act = 1;
    *why = lf == hi ? "all the tokens of the forward, activations in a file"
                    : "the largest whose mapped buffers fit, activations in a file";
    return lf;
}

/* Images: the most patches one image may have beside the rest of the plan in avail (the
 * print's "admits"); when the largest asked for does not fit, the plan is made again for the
 * largest that does (under 4 patches: none, and the tower is not planned). Returns it. */
static long admit_images(const K3Model *m, K3MemOpts *o, const uint64_t *lb, double tgb,
                         double cgb, uint64_t self, uint64_t avail, long want, K3Plan *p) {
    K3VisionPlan *v = &o->vision;
    /* per_seq: every sequence's images at once, each sequence's up to the admitted */
    const long nseq = v->per_seq && o->seqs > 1 ? o->seqs : 1;
    const long others = v->per_seq ? 0
                      : v->all_patches > v->patches ? v->all_patches - v->patches : 0;
    long fit = -1, use = want;
    if (avail) {
        const uint64_t rest = p->total - p->vis_weights - p->vis_act;
        const double room = (double)avail - (double)rest - (double)v->weights -
                            (double)v->fixed - (double)others * (double)v->io_pp;
        fit = room > 0 ? (long)(room / (double)(v->act_pp + nseq * v->io_pp)) : 0;
        if (fit > K3_VISION_MAX_PATCHES) fit = K3_VISION_MAX_PATCHES;
        if (fit < 4) fit = 0;
        if (fit < use) use = fit;
    }
    if (use != v->patches || (v->per_seq && v->all_patches != nseq * use)) {
        v->all_patches = v->per_seq ? nseq * use : others + use;
        v->patches = use;
        k3_plan_make(&m->cfg, m->lm_head.type == K3_W_F32, o, lb, o->trunk_dir != NULL, tgb,
                     cgb, self, p);
    }
    p->vis_fit = fit;
    return use;
}

/* 1 when any trunk matrix is stored coded (it has a row offset table). */
static int trunk_coded(const K3Trunk *t, int NL) {
    for (int L = 0; L < NL; L++)
        for (int i = 0; i < k3_trunk_nmats(t, L); i++)
            if (k3_trunk_rowoff(t, L, i)) return 1;
    return 0;
}

static int open_trace(K3Mem *x, const K3MemOpts *o, int nslots, char *err, size_t errlen) {
    const K3Config *c = &x->m->cfg;
    char path[4200];
    snprintf(path, sizeof path, "%s/cache_trace.txt", o->trace_dir);
    if (!(x->trace = fopen(path, "w"))) {
        snprintf(err, errlen, "--dump-cache-trace %s: cannot create %s", o->trace_dir, path);
        return K3_ERR_USAGE;
    }
    setvbuf(x->trace, NULL, _IOLBF, 0);        /* whole lines as they come: tests read it live */
    fprintf(x->trace, "# k3 cache trace: layers %d experts %d top_k %d slots %d slot_bytes %llu "
            "policy lfu-aged\n# step layer expert hit\n", c->num_hidden_layers, c->num_experts,
            c->num_experts_per_token, nslots, (unsigned long long)k3_ecache_slot_bytes(c));
    return 0;
}

static int setup(K3Mem *x, const K3MemOpts *asked, uint64_t *lb, char *err, size_t errlen) {
    K3Model *m = x->m;
    K3MemOpts opts = *asked, *o = &opts;       /* o->chunk becomes the chunk the plan picks */
    const long vis_want = asked->vision.patches;
    if (o->vision.fill) o->vision.patches = o->vision.all_patches = 4;  /* text model first */
    const int chunk_want = o->chunk;    /* fit_chunk's ceiling; budgets: at most the default */
    const int NL = m->cfg.num_hidden_layers;
    uint64_t global = 0;
    if (o->trunk_dir) {
        x->trunk = k3_trunk_open(m, o->trunk_dir, err, errlen);
        if (!x->trunk) return K3_ERR_RUNTIME;
        for (int L = 0; L < NL; L++) lb[L] = k3_trunk_layer_bytes(x->trunk, L);
        k3_stream_rank_bytes(m, x->trunk, lb);      /* N ranks: this rank's rows */
    } else k3_trunk_sizes_from_shards(m, lb, &global);
    const uint64_t self = k3_rss_now();
    char adesc[400];
    const uint64_t avail = available(self, adesc, sizeof adesc);
    double tgb = o->trunk_gb, cgb = o->cache_gb;
    if (o->chunk_auto && o->chunk > K3_PREFILL_CHUNK) o->chunk = K3_PREFILL_CHUNK;
    pick_budgets(m, o, lb, self, avail, &tgb, &cgb);   /* budgets first, then the chunk */
    const char *why;
    o->chunk = fit_chunk(m, o, chunk_want, lb, tgb, cgb, self, avail, &why, &o->act_file);
    /* N ranks each fit their own share and their own process's bytes; a step must be the
     * same on every rank, so all take the least chunk (smaller fits every budget) */
    int32_t chunk = o->chunk;
    k3_comm_least(&chunk, 1);
    o->chunk = chunk;
    x->chunk = o->chunk;
    if (o->act_file) {
        x->act_dir = o->state_dir ? o->state_dir : getenv("TMPDIR");
        if (!x->act_dir || !*x->act_dir) x->act_dir = "/tmp";
    }
    k3_plan_states(&m->cfg, m->lm_head.type == K3_W_F32, o, lb, o->trunk_dir != NULL, tgb, cgb,
                   self, avail);                  /* resident states or a state file */
    x->seqs = o->seqs > 1 ? o->seqs : 1;
    x->state_mode = o->state_file > 0 ? o->state_file : 0;
    K3Plan p;
    k3_plan_make(&m->cfg, m->lm_head.type == K3_W_F32, o, lb, o->trunk_dir != NULL, tgb, cgb,
                 self, &p);
    x->vision_patches = o->vision.weights
                      ? admit_images(m, o, lb, tgb, cgb, self, avail, vis_want, &p) : -1;
    if (o->vision.weights) {        /* N ranks run the same images: all admit the least */
        int32_t vp = (int32_t)x->vision_patches;
        k3_comm_least(&vp, 1);
        x->vision_patches = vp;
    }
    x->vision_bytes = p.vis_weights + p.vis_act;
    x->buffer_bytes = p.buffers;
    x->plan_bytes = p.total;
    x->trunk_budget = o->trunk_dir || p.shards ? (uint64_t)p.trunk_budget : 0;
    x->cache_budget = (uint64_t)p.cache_budget;
    x->draft_streamed = p.draft_win > 0;
    x->draft_planned = o->draft.weights > 0;
    x->draft_bytes = k3_plan_draft_bytes(&p);
    p.chunk_why = why;
    const int one_line = o->brief && !o->verbose &&
                         k3_plan_all_resident(&p, o->trunk_dir != NULL, avail);
    x->brief = one_line;
    if (!o->quiet && one_line) k3_plan_line(&p, NL, avail, adesc, stderr);
    else if (!o->quiet) k3_plan_print(&p, NL, o->trunk_dir != NULL, avail, adesc, o->ctx, stderr);
    if (!o->quiet && x->trunk && trunk_coded(x->trunk, NL) && !k3_kernels_coded_fast())
        fprintf(stderr, "k3: note: %s is coded (k3 pack --compress); the %s kernels decode "
                "it to the same bits but slower than a plain trunk (only AVX-512 with VBMI "
                "decodes at SIMD speed; docs/CODEC.md): unless the disk is the bound, a plain "
                "`k3 pack` is faster here\n", k3_trunk_path(x->trunk), k3_kernels_name());
    k3_plan_ranks(&p, o->trunk_dir != NULL, !o->quiet, stderr);   /* N > 1: each rank's */
    if (avail && p.total > avail) {
        k3_plan_refusal(&p, m, o, lb, avail, adesc, err, errlen);
        return K3_ERR_RUNTIME;
    }
    if (o->verify_reads && !o->trunk_dir) {
        snprintf(err, errlen, "--verify-reads checks a packed trunk's checksums and the shards "
                 "carry none: pack one (k3 pack %.300s TRUNK_DIR) and add --trunk TRUNK_DIR, or "
                 "leave out --verify-reads", m->dir);
        return K3_ERR_USAGE;
    }
    /* no pack and a budget short of the trunk: it streams from the shards (plan.c) */
    if (p.shards && !(x->trunk = k3_trunk_shards(m, err, errlen))) return K3_ERR_RUNTIME;
    int rc;
    k3_model_embed_advise(m, MADV_NOHUGEPAGE);
    k3_model_embed_advise(m, MADV_RANDOM);
    x->io.st = &x->st;
    pthread_mutex_init(&x->io.mu, NULL);
    x->io_init = 1;
    const int depth = o->io_depth > 0 ? o->io_depth : 16;
    if (x->trunk) {
        const K3StreamOpts so = { p.pinned, p.piece, p.ring_bytes, o->piece_rows, depth,
                                  o->chunk, o->verify_reads, 1, o->quiet };
        if (!(x->stream = k3_stream_open(m, x->trunk, &so, &x->st, &x->io, err, errlen)))
            return K3_ERR_RUNTIME;
    }
    int any_moe = 0;
    for (int L = 0; L < NL; L++) any_moe |= m->cfg.is_moe[L];
    const K3ECacheSink sink = { &x->st, &x->base.expert_failures, &x->trace, &x->step, &x->io,
                                x->stream ? k3_stream_kick : NULL, x->stream };
    /* expert reads in flight: the cache keeps one slot for the expert being computed */
    const int eth = depth < p.nslots - 1 ? depth : p.nslots - 1 > 0 ? p.nslots - 1 : 1;
    if (any_moe && !(x->cache = k3_ecache_new(m, p.nslots, eth, sink, err, errlen)))
        return K3_ERR_RUNTIME;
    if (x->stream && x->cache) k3_stream_set_experts(x->stream, k3_ecache_busy(x->cache));
    if (o->trace_dir && (rc = open_trace(x, o, p.nslots, err, errlen))) return rc;
    if (!o->quiet) {
        char d[700];
        if (x->stream) {
            k3_stream_describe(x->stream, d, sizeof d);
            fprintf(stderr, "k3: trunk %s\n", d);
        }
        if (x->cache && !one_line) {         /* the one line has the slots already */
            k3_ecache_describe(x->cache, d, sizeof d);
            fprintf(stderr, "k3: expert cache %s\n", d);
        }
    }
    return 0;
}

int k3_mem_open(K3Model *m, const K3MemOpts *o, K3Mem **out, char *err, size_t errlen) {
    K3Mem *x = calloc(1, sizeof *x);
    uint64_t *lb = calloc(m->cfg.num_hidden_layers, sizeof(uint64_t));
    *out = NULL;
    if (!x || !lb) {
        free(x); free(lb);
        snprintf(err, errlen, "out of memory");
        return K3_ERR_RUNTIME;
    }
    x->base.ops = &MEM_OPS;
    x->m = m;
    int rc = setup(x, o, lb, err, errlen);
    free(lb);
    if (rc) { k3_mem_close(x); return rc; }
    *out = x;
    return 0;
}

void k3_mem_close(K3Mem *x) {
    if (!x) return;
    k3_ecache_free(x->cache);                  /* before the stream its idle hook wakes */
    k3_stream_close(x->stream);
    k3_trunk_close(x->trunk);
    if (x->io_init) pthread_mutex_destroy(&x->io.mu);
    if (x->trace) fclose(x->trace);
    free(x->steps);
    free(x);
}
