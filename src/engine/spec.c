/* spec.c — exact speculative decoding (spec.h): drafts, and keeping what the model agrees
 * with. The verify forward itself is the ordinary multi-position forward. */
#include "spec.h"
#include <string.h>

void k3_spec_init(K3Spec *sp, const K3Model *m, const int *ref, int n_ref, int kmax) {
    const K3Config *c = &m->cfg;
    memset(sp, 0, sizeof *sp);
    sp->ref = ref; sp->n_ref = n_ref; sp->kmax = kmax > 0 ? kmax : 8;
    sp->p[0] = 0.9;               /* priors: the user's reference, while it agrees, is */
    sp->p[1] = 0.5;               /* likely right; a lookup is worth trying until measured */
    sp->gap = 16; sp->kcap = 4;
    /* bytes: all tensors minus the routed experts and the embedding (rows only) = what
     * one step reads; one more token adds at most top-k experts per MoE layer */
    double all = 0, n_moe = 0;
    for (size_t i = 0; i < m->st->n_tensors; i++) all += (double)m->st->tensors[i].nbytes;
    for (int L = 0; L < c->num_hidden_layers; L++) n_moe += c->is_moe[L];
    const double ex = (double)k3_expert_bytes(c), per_tok = ex * c->num_experts_per_token * n_moe;
    const double emb = (double)m->embed.rows * m->embed.cols *
                       (m->embed.type == K3_W_F32 ? 4 : 2);
    double trunk = all - ex * c->num_experts * n_moe - emb;
    if (trunk < per_tok) trunk = per_tok;
    sp->step_cost = per_tok / (trunk + per_tok);
}

/* The k that maximises expected tokens per pass over its cost: a pass with k drafts gives
 * 1 + p + .. + p^k tokens for 1 + k * step_cost. */
static int best_k(const K3Spec *sp, int src, int limit) {
    int best = 0;
    double best_rate = 1.0, e = 1.0, pk = 1.0;
    for (int k = 1; k <= limit; k++) {
        pk *= sp->p[src]; e += pk;
        const double rate = e / (1.0 + k * sp->step_cost);
        if (rate > best_rate) { best_rate = rate; best = k; }
    }
    return best;
}

/* Where the last g tokens of seq[0..n) last occur in hay[0..nh) with at least one token
 * after them (before `before`); -1 when nowhere. */
static int find(const int *hay, int nh, int before, const int *seq, int n, int g) {
    if (n < g) return -1;
    for (int i = (before < nh ? before : nh) - g - 1; i >= 0; i--)
        if (!memcmp(hay + i, seq + n - g, sizeof(int) * (size_t)g)) return i + g;
    return -1;
}

int k3_spec_draft(K3Spec *sp, const int *seq, int n, int n_prompt, int room, int *draft) {
    int limit = sp->kmax < room ? sp->kmax : room;
    if (limit > sp->kcap) limit = sp->kcap;
    if (limit < 1) return 0;
    if (sp->cool > 0) { sp->cool--; return 0; }            /* after failed passes */
    const int gen = n - n_prompt;
    const int *src = NULL;
    int avail = 0;
    sp->src = 1;
    if (sp->ref && gen < sp->n_ref && !memcmp(sp->ref, seq + n_prompt, sizeof(int) * gen)) {
        src = sp->ref + gen; avail = sp->n_ref - gen;      /* the reference, aligned */
        sp->src = 0;
    }
    for (int g = 3; !src && sp->ref && g >= 1; g--) {      /* n-grams of the reference */
        const int at = find(sp->ref, sp->n_ref, sp->n_ref, seq, n, g);
        if (at >= 0) { src = sp->ref + at; avail = sp->n_ref - at; }
    }
    if (!src && gen < sp->n_ref) {                         /* the reference by position */
        src = sp->ref + gen; avail = sp->n_ref - gen;
    }
    for (int g = 3; !src && g >= 1; g--) {                 /* prompt lookup: the sequence's own */
        const int at = find(seq, n, n - 1, seq, n, g);
        if (at >= 0) { src = seq + at; avail = n - at; }
    }
    if (!src) return 0;
    int k = best_k(sp, sp->src, limit);
    if (k < 1) {                  /* not worth it as measured: probe once in a while */
        if (++sp->idle < sp->gap) return 0;
        sp->idle = 0; k = 1;
    }
    const int m = avail < k ? avail : k;
    memcpy(draft, src, sizeof(int) * (size_t)m);
    return m;
}

int k3_spec_accept(K3Spec *sp, const K3Model *m, K3State *s, Sampler *smp, long gen_pos,
                   const int *draft, int k, const float *lg, int *out) {
    const int V = m->cfg.vocab_size, eos = m->cfg.eos_token_id;
    int a = 0;
    for (;; a++) {
        const int id = sampler_sample_at(smp, lg + (size_t)a * V, V, gen_pos + a);
        if (id < 0) return -1;
        out[a] = id;
        if (a == k || id != draft[a] || id == eos) break;
    }
    /* out[a] is the model's own token (a draft it rejected, or past the draft); out[0..a)
     * agreed. An eos agreed with ends the sequence there as well. */
    if (k3_state_rollback(m, s, a + 1)) return -1;
    if (k > 0) {
        const int acc = a < k && out[a] == draft[a] ? a + 1 : a;   /* eos accepted: counts */
        sp->drafted += k; sp->accepted += acc; sp->passes++;
        double *p = &sp->p[sp->src];
        *p = 0.6 * *p + 0.4 * ((double)acc / k);
        if (*p < 0.02) *p = 0.02;
        /* a failed pass doubles the steps to the next probe (while k = 0 wins): a source
         * that keeps failing costs one position every 256 steps at most */
        sp->gap = acc ? 16 : (sp->gap < 128 ? sp->gap * 2 : 256);
        /* the widest pass: doubled after a fully accepted one, halved after a failed one,
         * so an untried source risks 4 positions, not kmax */
        if (acc == k) sp->kcap = sp->kcap * 2 < sp->kmax ? sp->kcap * 2 : sp->kmax;
        else if (!acc && sp->kcap > 1) sp->kcap /= 2;
        /* failed passes in a row wait 4, 8, 16 .. 256 plain steps before the next draft:
         * a source that is wrong everywhere costs a position now and then, not per step */
        sp->fails = acc ? 0 : sp->fails + 1;
        sp->cool = acc ? 0 : 4 << (sp->fails - 1 < 6 ? sp->fails - 1 : 6);
    }
    return a + 1;
}
