/* plan.c — the memory plan: what every budget buys, before anything big is allocated.
 *
 * The two flags are the ceiling of the whole process. --cache-gb holds the expert slots
 * and the cache's index; --trunk-gb holds everything else: the read-ahead window the
 * streamed trunk (lm_head included) goes through in pieces, embedding rows (a row
 * lookup), the f32 small vectors, the KDA recurrent state (one per sequence), the MLA
 * cache for --ctx positions, the forward buffers (k3_runstate_bytes: exactly what the run
 * state allocates) and what the process already holds; the pinned trunk prefix gets what
 * is left. Without --trunk the trunk and lm_head are resident in the shard mappings. The
 * total is compared with MemAvailable (and a cgroup memory limit); mem.c refuses to
 * start, with every number and the flag that would fix it (k3_plan_refusal), when it
 * does not fit. Over N ranks (comm.h) the flags are per rank and the plan is this
 * rank's: its rows of the streamed trunk (lb, k3_stream_rank_bytes) and of lm_head, the
 * routed experts it owns (k3_expert_owner); k3_plan_ranks prints every rank's. */
#include "internal.h"
#include "comm.h"
#include "k3.h"
#include "dio.h"
#include "statefile.h"
#include "tensors.h"
#include "image.h"
#include "vision.h"
#include <stdlib.h>
#include <string.h>

/* Bytes --trunk-gb governs: the pinned prefix, the window and everything beside it. */
static uint64_t trunk_used(const K3Plan *p) {
    return p->pinned + p->ring_bytes + p->side + p->draft_pin + p->draft_win;
}

/* --draft: a block's buffers, the tap rows of a forward of T rows, the context cache (grown
 * as dspark.c grows it: from 64 positions, doubling, reserved at open for the context) and
 * every thread's attention scratch over it. Batch and serve open a draft per sequence slot
 * (k3_draft_open_seqs): each has its own context cache, block buffers and ingestion rows;
 * the engine's tap (one forward's rows) and the threads' scratch are shared. */
static uint64_t draft_side(const K3DraftPlan *d, uint64_t T, int ctx, uint64_t seqs) {
    if (!d->weights) return 0;
    uint64_t cap = 64;
    const uint64_t n = (uint64_t)(ctx < d->max_pos ? ctx : d->max_pos);
    while (cap < n) cap *= 2;
    const int th = k3_threads();
    return seqs * (d->fixed + cap * d->pos_bytes) + T * d->tap_row +
           (uint64_t)(th > 0 ? th : 1) * (cap * d->att_row + d->att_fixed);
}

/* Images (K3MemOpts.vision): the tower's weights, resident while images run, and one
 * image's buffers at the largest planned for plus every image's patches and rows. Under 4
 * patches no image fits: nothing is planned (images are then refused). */
static void vision_share(const K3VisionPlan *v, K3Plan *p) {
    p->vis_fit = -1;
    if (!v->weights || v->patches < 4) return;
    const long all = v->all_patches > v->patches ? v->all_patches : v->patches;
    p->vis_patches = v->patches;
    p->vis_all = all;
    p->vis_weights = v->weights;
    p->vis_act = v->fixed + (uint64_t)v->patches * v->act_pp + (uint64_t)all * v->io_pp;
    p->vis_act -= v->held < p->vis_act ? v->held : p->vis_act;   /* in "process so far" */
}

/* Bytes of the embedding rows one forward of T tokens maps: a row lookup in the shard
 * mapping, dropped before layer 0 (mem.c), so only one forward's rows are resident; each
 * row's pages and the fault-around (64 KiB) the kernel maps beside them. */
static uint64_t embed_bytes(int H, int V, uint64_t T) {
    const uint64_t rows = T * (((uint64_t)H * 2 + 65535) / 65536 + 1) * 65536;
    return rows < (uint64_t)V * H * 2 ? rows : (uint64_t)V * H * 2;
}

/* lb[0..NL): trunk bytes per layer; process: bytes the process already holds.
 * The flags are the ceiling of the whole process: --cache-gb holds the expert slots and
 * the cache's index, --trunk-gb everything else (pinned prefix, window, forward buffers,
 * states, MLA cache, vectors, embedding rows, the process); pinned gets what is left. */
void k3_plan_make(const K3Config *c, int head_f32, const K3MemOpts *o, const uint64_t *lb,
                  int have_trunk, double tgb, double cgb, uint64_t process, K3Plan *p) {
    const int NL = c->num_hidden_layers, H = c->hidden_size, V = c->vocab_size;
    memset(p, 0, sizeof *p);
    for (int L = 0; L < NL; L++) p->trunk_total += lb[L];
    p->head_full = (uint64_t)V * H * (head_f32 ? 4 : 2);
    const int N = k3_comm_size(), me = k3_comm_rank();
    const uint64_t T = o->chunk > 0 ? o->chunk : 1;
    /* buffers in a file: forward.c drops the embedding's rows every K3_ROW_BLOCK */
    p->embed = embed_bytes(H, V, o->act_file && T > K3_ROW_BLOCK ? K3_ROW_BLOCK : T);
    const uint64_t C = (uint64_t)c->kda_num_heads * c->kda_head_dim;
    uint64_t cap = 64;
    while (cap < (uint64_t)(o->ctx > 0 ? o->ctx : 1)) cap *= 2;
    for (int L = 0; L < NL; L++) {
        p->vectors += (uint64_t)H * 4 * 4;
        if (c->is_kda[L]) {
            p->vectors += (3 * C * c->short_conv_kernel_size + C + c->kda_head_dim * 2) * 4;
            p->state += ((uint64_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim +
                         3 * C * (c->short_conv_kernel_size - 1)) * 4;
            if (o->undo_T > 0)            /* k3_state_mark's copy and the rows' inputs */
                p->undo += ((uint64_t)c->kda_num_heads * c->kda_head_dim * c->kda_head_dim +
                            3 * C * (c->short_conv_kernel_size - 1) + 1 +
                            (uint64_t)o->undo_T * (7 * C + c->kda_num_heads)) * 4;
        } else {
            p->vectors += (uint64_t)(c->q_lora_rank + c->kv_lora_rank) * 4;
            p->mla += cap * (c->kv_lora_rank + c->qk_rope_head_dim) * 4;
        }
        if (c->is_moe[L])
            p->vectors += (uint64_t)(c->num_experts + c->routed_expert_hidden_size) * 4;
    }
    const uint64_t seqs = o->seqs > 1 ? (uint64_t)o->seqs : 1;   /* a state per sequence */
    p->state *= seqs; p->mla *= seqs; p->undo *= seqs; p->seqs = (int)seqs;
    const int ctx = o->ctx > 0 ? o->ctx : 1;
    if (o->state_file > 0) {          /* in a state file: only its layer buffers resident */
        K3StateFileSize z;
        k3_statefile_size(c, o->state_file, (int)seqs, ctx, &z);
        p->state_mode = o->state_file;
        p->state = 0;
        if (o->state_file == K3_STATES_ALL) p->mla = 0;
        p->state_file = z.file; p->state_bufs = z.buffers; p->state_step = z.kda_step + z.mla_step;
        p->state_dir = o->state_dir ? o->state_dir : getenv("TMPDIR");
        if (!p->state_dir || !*p->state_dir) p->state_dir = "/tmp";
    }
    p->buffers = k3_runstate_bytes(c, (int)T, ctx, o->logits_rows);
    if (o->act_file) {                /* in a file: only what a forward keeps mapped counts */
        p->act_file = 1;
        p->act_bytes = p->buffers;
        p->buffers = k3_runstate_resident_bytes(c, (int)T, ctx, o->logits_rows);
    }
    p->chunk = (int)T;
    p->process = process;
    p->scratch = (uint64_t)k3_threads() * k3_runstate_scratch_bytes(c, (int)T, ctx);
    p->side = p->embed + p->vectors + p->state + p->undo + p->mla + p->state_bufs +
              p->buffers + p->scratch + p->process;
    p->draft_side = draft_side(&o->draft, T, ctx, seqs);
    p->side += p->draft_side;
    vision_share(&o->vision, p);
    p->side += p->vis_weights + p->vis_act;
    p->trunk_min = p->trunk_total + p->head_full + p->side;
    const uint64_t dw = o->draft.weights;    /* the draft's weights: pinned or streamed */
    const uint64_t dwin = o->draft.window * seqs;   /* streamed: each slot's draft its buffers */
    /* no pack: in place in the shard mappings when the budget holds it all (the draft's
     * weights too), else streamed from the shards in the same pieces, order and window */
    if (!have_trunk && tgb >= 0 && tgb * K3_GB < (double)(p->trunk_min + dw))
        have_trunk = p->shards = 1;
    if (have_trunk && N > 1) {                /* streamed: this rank's vocab rows (split.c) */
        int v0, v1;
        k3_share_rows(V, me, N, &v0, &v1);
        p->head_full = (uint64_t)(v1 - v0) * H * (head_f32 ? 4 : 2);
    }
    p->lm_head = p->head_full;
    p->trunk_budget = tgb * K3_GB;            /* the flag (the refusal's suggestions) */
    if (!have_trunk) { p->n_pinned = NL; p->pinned = p->trunk_total; p->draft_pin = dw; }
    else {
        /* one stream: the layers' matrices, then lm_head; a prefix pinned, the rest read
         * in pieces through the window every forward (same bits) */
        const uint64_t stream = p->trunk_total + p->head_full;
        uint64_t whole = 0;                   /* kv_b is used whole (mla.c) */
        for (int L = 0; L < NL; L++)
            if (!c->is_kda[L])
                whole = (uint64_t)c->num_attention_heads * (c->qk_nope_head_dim +
                        c->v_head_dim) * c->kv_lora_rank * 2;
        p->piece = o->piece_mb > 0 ? k3_up4k((uint64_t)(o->piece_mb * 1e6))
                                   : k3_stream_piece(stream);
        const uint64_t window = k3_stream_window(p->piece, whole);
        p->trunk_min = window + p->side + (dw ? dwin : 0);
        p->trunk_budget = tgb * K3_GB;
        if (p->trunk_budget < p->trunk_min) {
            p->trunk_budget = (double)p->trunk_min;
            p->raised_trunk = 1;
        }
        /* the draft first (a block reads all of it, ingestion part of it again): pinned
         * where it fits beside the working minimum, else streamed through its window */
        if (dw && p->trunk_budget >= (double)(window + p->side + dw)) p->draft_pin = dw;
        else if (dw) p->draft_win = dwin;
        const double tb = p->trunk_budget - (double)(p->draft_pin + p->draft_win);
        if (tb >= (double)(stream + p->side)) p->pinned = stream;
        else {
            p->pinned = (uint64_t)tb - (window + p->side);
            p->ring_bytes = window;
            p->ring = 1;
            p->head_stream = 1;
        }
        uint64_t acc = 0;
        for (int L = 0; L < NL && acc + lb[L] <= p->pinned; L++) { acc += lb[L]; p->n_pinned++; }
        p->streamed = NL - p->n_pinned;
        p->lm_head = 0;                       /* pinned or in the window */
    }
    int nmoe = 0, all = 0;                    /* the routed experts this rank owns */
    for (int L = 0; L < NL; L++) {
        nmoe += c->is_moe[L];
        for (int e = 0; c->is_moe[L] && e < c->num_experts; e++)
            all += k3_expert_owner(L, e, N) == me;
    }
    const uint64_t slot = k3_ecache_slot_bytes(c);
    p->slot_bytes = slot;
    int mins = all < 5 ? all : 5;
    p->cache_index = nmoe ? k3_ecache_index_bytes(c) : 0;
    p->all_experts = (uint64_t)all * slot;
    p->cache_min = (uint64_t)mins * slot + p->cache_index;
    p->cache_budget = cgb * K3_GB;
    if (p->cache_budget < (double)p->cache_min) {
        p->cache_budget = (double)p->cache_min;
        p->raised_cache = 1;
    }
    double ns = (p->cache_budget - (double)p->cache_index) / (double)slot;
    p->nslots = ns >= all ? all : (int)ns;  /* never more slots than routed experts: plan == use */
    if (p->nslots < mins) p->nslots = mins;
    p->cache = (uint64_t)p->nslots * slot + p->cache_index;
    p->total = p->pinned + p->ring_bytes + p->cache + p->lm_head + p->side +
               p->draft_pin + p->draft_win;
    p->draft_ingest = p->draft_win ? o->draft.ingest : 0;
    p->draft_read = p->draft_win ? o->draft.weights + p->draft_ingest : 0;
}

void k3_plan_states(const K3Config *c, int head_f32, K3MemOpts *o, const uint64_t *lb,
                    int have_trunk, double tgb, double cgb, uint64_t process, uint64_t avail) {
    const int pick = o->state_file < 0;           /* else that mode only (0: resident) */
    const int most = pick ? K3_STATES_ALL : o->state_file;
    const double room = 0.9 * (double)avail;
    K3Plan p;
    K3MemOpts q = *o;
#define FITS(mode, n) (q.state_file = (mode), q.seqs = (n), \
                       k3_plan_make(c, head_f32, &q, lb, have_trunk, tgb, cgb, process, &p), \
                       (double)p.total <= room)
    if (!avail) { if (pick) o->state_file = 0; return; }
    if (o->seqs_auto && o->seqs > 1 && !FITS(most, o->seqs)) {
        int lo = 1, hi = o->seqs;                 /* the most sequences the most paging fits */
        while (lo < hi) {
            const int mid = lo + (hi - lo + 1) / 2;
            if (FITS(most, mid)) lo = mid;
            else hi = mid - 1;
        }
        o->seqs = lo;
    }
    if (!pick) return;
    static const int modes[3] = { K3_STATES_RESIDENT, K3_STATES_KDA, K3_STATES_ALL };
    o->state_file = most;                         /* none fits: the refusal shows the least */
    for (int i = 0; i < 3; i++)
        if (FITS(modes[i], o->seqs)) { o->state_file = modes[i]; break; }
#undef FITS
}

/* bytes in the unit that keeps them readable (1e3 steps, as GB = 1e9 in the plan) */
const char *k3_size_text(uint64_t b, char *out, size_t n) {
    if (b < 1000) snprintf(out, n, "%llu bytes", (unsigned long long)b);
    else if (b < 1000000) snprintf(out, n, "%.1f KB", b / 1e3);
    else if (b < 1000000000) snprintf(out, n, "%.1f MB", b / 1e6);
    else snprintf(out, n, "%.2f GB", b / 1e9);
    return out;
}

int k3_plan_all_resident(const K3Plan *p, int have_trunk, uint64_t avail) {
    return !have_trunk && !p->shards && p->all_experts &&
           p->cache - p->cache_index >= p->all_experts && !p->state_mode && !p->raised_trunk &&
           !p->raised_cache && (!avail || p->total <= avail);
}

uint64_t k3_plan_draft_bytes(const K3Plan *p) {
    return p->draft_pin + p->draft_win + p->draft_side;
}

void k3_plan_line(const K3Plan *p, int NL, uint64_t avail, const char *adesc, FILE *f) {
    char slot[32], av[96] = "";
    if (adesc) snprintf(av, sizeof av, " of %.3f available (%s)", avail / K3_GB, adesc);
    char dr[80] = "";
    if (p->draft_pin)
        snprintf(dr, sizeof dr, ", the draft's %.3f GB", (p->draft_pin + p->draft_side) / K3_GB);
    char vt[96] = "";
    if (p->vis_weights)
        snprintf(vt, sizeof vt, ", the vision tower's %.3f GB (images of up to %ld patches)",
                 (p->vis_weights + p->vis_act) / K3_GB, p->vis_patches);
    fprintf(f, "k3: memory plan %.3f GB%s, everything resident: %d layers, lm_head, %d "
            "expert slots of %s%s%s, prefill chunk %d (the table: --verbose)\n",
            p->total / K3_GB, av, NL, p->nslots, k3_size_text(p->slot_bytes, slot, sizeof slot),
            dr, vt, p->chunk);
}

/* --draft: its weights pinned or its window, its context and buffers, and what a block
 * (one draft forward, one verify forward) reads from disk of the trunk and the draft. */
static void draft_print(const K3Plan *p, int have_trunk, int ctx, FILE *f) {
    if (!p->draft_pin && !p->draft_win) return;
    char a[32], b[32];
    if (p->draft_pin)
        fprintf(f, "  draft pinned       %8.3f  --draft's weights (the embedding and lm_head are "
                "the trunk's), read from memory once a block\n", p->draft_pin / K3_GB);
    else
        fprintf(f, "  draft window       %8.3f  --draft streamed: its %s read in pieces once a "
                "block (+ %s of context_proj and kv_a a step) through this buffer%s\n",
                p->draft_win / K3_GB, k3_size_text(p->draft_read - p->draft_ingest, a, sizeof a),
                k3_size_text(p->draft_ingest, b, sizeof b),
                p->seqs > 1 ? " (each sequence its own)" : "");
    char each[64] = "";                       /* batch, serve: a draft context a sequence */
    if (p->seqs > 1) snprintf(each, sizeof each, " (each of %d sequences its own)", p->seqs);
    fprintf(f, "  draft context      %8.3f  its context cache for --ctx %d, tap rows, a block's "
            "buffers%s\n", p->draft_side / K3_GB, ctx, each);
    if (have_trunk) {
        const uint64_t tr = p->trunk_total + p->head_full - (p->pinned < p->trunk_total +
                            p->head_full ? p->pinned : p->trunk_total + p->head_full);
        fprintf(f, "  a block reads          disk  trunk %s + draft %s (+ the experts the cache "
                "misses): one verify forward for every token it keeps\n",
                k3_size_text(tr, a, sizeof a), k3_size_text(p->draft_read, b, sizeof b));
    }
}

/* Images: the tower's weights and one image's peak; what the budget admits. */
static void vision_print(const K3Plan *p, FILE *f) {
    char w[32], a[32], fs[64] = "any image k3 decodes";
    if (p->vis_fit >= 0 && p->vis_fit < K3_VISION_MAX_PATCHES) {
        int sw, sh;
        k3_vision_fit_size(K3_IMAGE_MAX_SIDE, K3_IMAGE_MAX_SIDE, p->vis_fit, &sw, &sh);
        snprintf(fs, sizeof fs, "%ld patches, a square of %dx%d", p->vis_fit, sw, sh);
    }
    if (p->vis_weights)
        fprintf(f, "  vision tower       %8.3f  weights %s resident while images run (read "
                "once an image) + %s for the largest image planned, %ld patches (%ld rows: "
                "the tower's buffers, tiled attention, merge and projector, its patches and "
                "rows); memory admits %s\n", (p->vis_weights + p->vis_act) / K3_GB,
                k3_size_text(p->vis_weights, w, sizeof w), k3_size_text(p->vis_act, a, sizeof a),
                p->vis_patches, p->vis_patches / 4, fs);
    if (p->vis_weights && p->vis_all > p->vis_patches)   /* batch lines, serve's sequences */
        fprintf(f, "  %28s  of it: %ld patches' patches and rows held at once (every image "
                "the run holds together)\n", "", p->vis_all);
    else if (p->vis_fit == 0)
        fprintf(f, "  vision tower       %8s  no room beside the rest: images are refused\n",
                "-");
}

void k3_plan_print(const K3Plan *p, int NL, int have_trunk, uint64_t avail, const char *adesc,
                   int ctx, FILE *f) {
    char slot[32];
    if (k3_comm_size() > 1)                   /* the flags are per rank */
        fprintf(f, "k3: memory plan of rank 0 of %d (GB = 1e9 bytes; the flags are per rank, "
                "every rank's share below)\n", k3_comm_size());
    else fprintf(f, "k3: memory plan (GB = 1e9 bytes)\n");
    char pb[32];
    if (have_trunk || p->shards) {
        fprintf(f, "  trunk pinned       %8.3f  %d of %d layers whole%s, lm_head %s "
                "(what the trunk budget %.3f GB leaves: it holds every line but the expert "
                "cache)\n", p->pinned / K3_GB,
                p->n_pinned, NL, p->ring && p->n_pinned < NL ? " + part of the next" : "",
                p->head_stream ? "streamed" : "pinned", p->trunk_budget / K3_GB);
        char sb[32];                          /* read every forward (vectors: at most) */
        const uint64_t stream = p->trunk_total + p->head_full;
        if (p->ring)
            fprintf(f, "  trunk window       %8.3f  the rest (%s a forward) in pieces of %s, "
                    "read ahead while the layers compute\n", p->ring_bytes / K3_GB,
                    k3_size_text(stream > p->pinned ? stream - p->pinned : 0, sb, sizeof sb),
                    k3_size_text(p->piece, pb, sizeof pb));
        if (p->shards)                        /* the source, and what a pack would change */
            fprintf(f, "  trunk source       %8s  the shards, read where they lie (no pack "
                    "needed); a pack (k3 pack, then --trunk) streams the same bytes with "
                    "checksums (--verify-reads), --compress fewer of them\n", "");
    } else
        fprintf(f, "  trunk resident     %8.3f  all %d layers, used in place from the shards "
                "(a smaller --trunk-gb streams it from them)\n", p->pinned / K3_GB, NL);
    draft_print(p, have_trunk, ctx, f);
    vision_print(p, f);
    char ix[32];
    fprintf(f, "  expert cache       %8.3f  %d slots of %s (%.1f%% of all routed experts) "
            "+ index %s\n", p->cache / K3_GB, p->nslots,
            k3_size_text(p->slot_bytes, slot, sizeof slot), p->all_experts ?
            100.0 * (p->cache - p->cache_index) / p->all_experts : 0.0,
            k3_size_text(p->cache_index, ix, sizeof ix));
    if (!have_trunk && !p->shards)
        fprintf(f, "  lm_head            %8.3f  resident\n", p->lm_head / K3_GB);
    fprintf(f, "  embedding rows     %8.3f  row lookup: one forward's rows, dropped after it\n",
            p->embed / K3_GB);
    fprintf(f, "  small vectors f32  %8.3f\n", p->vectors / K3_GB);
    char sf[32], ss[32];
    if (p->state_mode) {             /* the choice, its disk bytes and what a step moves */
        fprintf(f, "  state file             disk  %s in %s: the %s of %d sequences, %s read "
                "+ written a step at most\n", k3_size_text(p->state_file, sf, sizeof sf),
                p->state_dir, p->state_mode == K3_STATES_ALL ? "KDA states and MLA caches" :
                "KDA states", p->seqs, k3_size_text(p->state_step, ss, sizeof ss));
        fprintf(f, "  state buffers      %8.3f  %d layer buffers of every sequence's record "
                "(computing, read ahead, written back)\n", p->state_bufs / K3_GB,
                K3_STATEFILE_NBUF);
    }
    if (p->state_mode != K3_STATES_KDA && p->state_mode != K3_STATES_ALL)
        fprintf(f, "  recurrent state    %8.3f  KDA S + conv windows%s\n", p->state / K3_GB,
                p->seqs > 1 ? " (each sequence its own)" : "");
    if (p->undo)
        fprintf(f, "  verify undo log    %8.3f  a speculative verify's copy of the KDA state and "
                "its rows' inputs\n", p->undo / K3_GB);
    if (p->state_mode != K3_STATES_ALL)
        fprintf(f, "  MLA cache          %8.3f  --ctx %d%s\n", p->mla / K3_GB, ctx,
                p->seqs > 1 ? " (each sequence its own)" : "");
    char bt[32];
    fprintf(f, "  buffers            %8.3f  prefill chunk %d token%s per forward, %s (%s)\n",
            p->buffers / K3_GB, p->chunk, p->chunk == 1 ? "" : "s",
            k3_size_text(p->buffers, bt, sizeof bt), p->chunk_why ? p->chunk_why : "planned");
    if (p->act_file)
        fprintf(f, "  (activations)      %8.3f  on disk: the chunk's buffers in a file (%s), "
                "mapped %d tokens of a matmul at a time; a prompt of %d tokens reads the trunk "
                "and each expert it selects once\n", p->act_bytes / K3_GB,
                k3_size_text(p->act_bytes, bt, sizeof bt), k3_runstate_act_tokens(p->chunk),
                p->chunk);
    const int th = k3_threads();              /* k3_plan_make's count */
    fprintf(f, "  kernel scratch     %8.3f  %s a thread's prefill panels and decoded rows, "
            "%d thread%s\n", p->scratch / K3_GB, k3_size_text(p->scratch / th, bt, sizeof bt),
            th, th == 1 ? "" : "s");
    fprintf(f, "  process so far     %8.3f  binary, index, tokenizer\n", p->process / K3_GB);
    if (adesc)
        fprintf(f, "  total              %8.3f  available %.3f (%s)\n", p->total / K3_GB,
                avail / K3_GB, adesc);
    else fprintf(f, "  total              %8.3f\n", p->total / K3_GB);
    const uint64_t per_seq = (p->state + p->mla) / (uint64_t)p->seqs;
    char each[32];
    if (p->state_mode)
        fprintf(f, "  sequences          %8d  planned, states in the state file\n", p->seqs);
    else if (adesc && per_seq && p->total <= avail)   /* sequences beside the rest of the plan */
        fprintf(f, "  sequences          %8d  planned; %llu fit this budget (%s of state + MLA "
                "cache each)\n", p->seqs, (unsigned long long)((avail - p->total) / per_seq +
                (uint64_t)p->seqs), k3_size_text(per_seq, each, sizeof each));
    char mn[32];                        /* in a unit that shows it: a tiny model's is KB */
    if (p->raised_trunk)
        fprintf(f, "k3: note: --trunk-gb raised to the working minimum %s "
                "(the read-ahead window and what sits beside it)\n",
                k3_size_text(p->trunk_min, mn, sizeof mn));
    if (p->raised_cache)
        fprintf(f, "k3: note: --cache-gb raised to the working minimum %s "
                "(5 expert slots)\n", k3_size_text(p->cache_min, mn, sizeof mn));
}

/* Over N ranks every rank's share as its plan has it (one gather, every rank calls it):
 * its rows of the trunk and lm_head, pinned and streamed a forward, the experts it owns
 * and its slots for them, its plan's total. Rank 0 prints them when print is set. */
void k3_plan_ranks(const K3Plan *p, int have_trunk, int print, FILE *f) {
    const int N = k3_comm_size();
    if (N == 1) return;
    enum { SHARE, PIN, OWNED, SLOTS, CACHE, TOTAL, USE, NF };
    have_trunk = have_trunk || p->shards;
    const uint64_t share = have_trunk ? p->trunk_total + p->head_full : p->trunk_total;
    const double mine[NF] = { (double)share, (double)(p->pinned < share ? p->pinned : share),
                              p->slot_bytes ? (double)(p->all_experts / p->slot_bytes) : 0,
                              p->nslots, (double)p->cache, (double)p->total,
                              k3_expert_use_share(k3_comm_rank()) };
    double all[NF * N];
    size_t counts[N];
    for (int k = 0; k < N; k++) counts[k] = sizeof mine;
    k3_comm_allgatherv(mine, all, counts);
    if (!print || k3_comm_rank() != 0) return;
    for (int k = 0; k < N; k++) {
        const double *v = all + (size_t)k * NF;
        char a[32], b[32], c[32], d[32], e[32];
        k3_size_text((uint64_t)v[SHARE], a, sizeof a);
        k3_size_text((uint64_t)v[PIN], b, sizeof b);
        k3_size_text((uint64_t)(v[SHARE] - v[PIN]), c, sizeof c);
        k3_size_text((uint64_t)v[CACHE], d, sizeof d);
        k3_size_text((uint64_t)v[TOTAL], e, sizeof e);
        if (have_trunk)
            fprintf(f, "k3: rank %d of %d: trunk rows %s (pinned %s, streamed %s a forward)",
                    k, N, a, b, c);
        else
            fprintf(f, "k3: rank %d of %d: trunk resident in the shard mappings (%s; its rows "
                    "touched)", k, N, a);
        fprintf(f, ", experts: owns %.0f", v[OWNED]);
        if (v[USE] >= 0) fprintf(f, " (%.1f%% of the measured use)", 100 * v[USE]);
        fprintf(f, ", %.0f slots (%s), plan %s\n", v[SLOTS], d, e);
    }
}

void k3_trunk_sizes_from_shards(const K3Model *m, uint64_t *lb, uint64_t *global) {
    const int NL = m->cfg.num_hidden_layers;
    memset(lb, 0, sizeof(uint64_t) * NL);
    *global = 0;
    for (size_t i = 0; i < m->st->n_tensors; i++) {
        const StTensor *t = &m->st->tensors[i];
        if (!k3_is_trunk_tensor(t->name)) continue;
        int L = k3_tensor_layer(t->name);
        if (L >= 0 && L < NL) lb[L] += t->nbytes;
        else *global += t->nbytes;
    }
}

/* The largest context <= o->ctx whose plan at these budgets fits avail (0: none). The
 * plan grows with the context (MLA cache, score rows, embedding rows), so bisect. */
static int ctx_that_fits(const K3Model *m, const K3MemOpts *o, const uint64_t *lb, int have_trunk,
                         double tgb, double cgb, uint64_t process, uint64_t avail) {
    K3MemOpts q = *o;
    K3Plan t;
    int lo = 0, hi = o->ctx > 0 ? o->ctx : 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        q.ctx = mid;
        k3_plan_make(&m->cfg, m->lm_head.type == K3_W_F32, &q, lb, have_trunk, tgb, cgb, process,
                     &t);
        if (t.total <= avail) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void k3_plan_refusal(const K3Plan *p, const K3Model *m, const K3MemOpts *o, const uint64_t *lb,
                     uint64_t avail, const char *adesc, char *err, size_t errlen) {
    /* the working minimum streams the trunk (from the shards without --trunk): what a
     * smaller --trunk-gb may give back, a resident trunk's lm_head included */
    K3Plan mn;
    k3_plan_make(&m->cfg, m->lm_head.type == K3_W_F32, o, lb, 1, 0, 0, p->process, &mn);
    const int streamed = o->trunk_dir || p->shards;
    const uint64_t used = trunk_used(p) + (streamed ? 0 : p->lm_head);
    uint64_t excess = p->total - avail, cred = p->cache - p->cache_min;
    const uint64_t tred = used > mn.trunk_min ? used - mn.trunk_min : 0;
    char fix[900];
    if (cred + tred >= excess) {
        uint64_t dc = excess < cred ? excess : cred, dt = excess - dc;
        uint64_t nc = p->cache - dc, nt = used - dt;
        if (dc && nc > p->cache_min + (20u << 20)) nc -= 20u << 20;   /* round down, a margin */
        snprintf(fix, sizeof fix, "--cache-gb %.3f", (double)(nc / 1000000) / 1000);
        if (dt)
            snprintf(fix + strlen(fix), sizeof fix - strlen(fix), " --trunk-gb %.3f",
                     (double)(nt / 1000000) / 1000);
    } else {
        /* the budgets cannot shrink enough: plan a smaller context */
        const int cur = ctx_that_fits(m, o, lb, o->trunk_dir != NULL, p->trunk_budget / K3_GB,
                                      p->cache_budget / K3_GB, p->process, avail);
        const int low = ctx_that_fits(m, o, lb, 1, 0, 0, p->process, avail);
        char ctxfix[400];
        snprintf(ctxfix, sizeof ctxfix, "a smaller --ctx: the MLA cache for %d positions needs "
                 "%.3f GB and the buffers %.3f GB; at most %d positions fit ", o->ctx,
                 p->mla / K3_GB, p->buffers / K3_GB, cur ? cur : low);
        if (cur) snprintf(ctxfix + strlen(ctxfix), sizeof ctxfix - strlen(ctxfix),
                          "these budgets (--ctx %d)", cur);
        else snprintf(ctxfix + strlen(ctxfix), sizeof ctxfix - strlen(ctxfix),
                      "the working minimum (--ctx %d --preset minimum)", low);
        if (cur || low) snprintf(fix, sizeof fix, "%s", ctxfix);
        else
            snprintf(fix, sizeof fix, "more memory: even the working minimum (streamed trunk, "
                     "5 expert slots) needs %.3f GB, and no smaller --ctx fits", mn.total / K3_GB);
    }
    snprintf(err, errlen, "the memory plan needs %.3f GB but %.3f GB is available (%s): "
             "trunk %.3f + window %.3f + expert cache %.3f + lm_head %.3f + embedding rows %.3f "
             "+ vectors %.3f + state %.3f + MLA cache %.3f + state-file buffers %.3f + buffers "
             "%.3f + process %.3f + draft %.3f + vision tower %.3f. Fix: %s",
             p->total / K3_GB, avail / K3_GB, adesc, p->pinned / K3_GB,
             p->ring_bytes / K3_GB,
             p->cache / K3_GB, p->lm_head / K3_GB, p->embed / K3_GB, p->vectors / K3_GB,
             p->state / K3_GB, p->mla / K3_GB, p->state_bufs / K3_GB, p->buffers / K3_GB,
             p->process / K3_GB, k3_plan_draft_bytes(p) / K3_GB,
             (p->vis_weights + p->vis_act) / K3_GB, fix);
}
