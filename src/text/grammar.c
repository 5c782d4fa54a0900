/* grammar.c — the incremental recogniser of a parsed GBNF grammar (include/grammar.h).
 *
 * A state is a set of parse stacks: each stack holds element positions (grammar_ir.h),
 * the top being the terminal that must match next; an empty stack means root is matched.
 * A code point advances every stack whose top matches it, then each advanced stack is
 * expanded until its top is a terminal again: an alternative's end pops, a rule reference
 * is replaced by its continuation (left off when the reference ends its alternative, so
 * right recursion and repetitions do not grow the stack) and one stack per alternative of
 * the rule. Stacks are deduplicated by content through a hash set, which keeps ambiguous
 * grammars from multiplying equal parses; the parser refused left recursion, so expansion
 * ends. Bytes are decoded as UTF-8 on the way in: a partial code point is kept aside and
 * checked against the range of code points it could still become.
 *
 * gr_mask walks a byte trie of the vocabulary (built once per tokenizer): a shared prefix
 * of many tokens is matched once, a subtree under a refused prefix is never visited. */
#include "grammar.h"
#include "grammar_ir.h"
#include "tok.h"
#include "util.h"
#include <math.h>
#include <pthread.h>
#include <string.h>

typedef struct {
    uint32_t *pool; size_t np, cpool;       /* stack contents, one after another */
    uint32_t *off, *len, *hash; int n, cap; /* stacks */
    uint32_t *slot, *gen; int hcap;         /* hash set of stack ids, live when gen matches */
    uint32_t cur;
    int empty;                              /* some stack is empty: root matched */
} Set;

typedef struct { uint32_t cp, lo; int need; } Utf;   /* a partial code point */

typedef struct {
    Set seen;                               /* every stack met while expanding */
    uint32_t *tmp; size_t tcap;
    int *wl; int wcap;
} Work;

struct GrState {
    const GrGrammar *g;
    Set st, nx;                             /* the stacks; the next step's, swapped in */
    Utf u;
    Work *w;                                /* scratch, made on first use */
    Set **lv; int nlv;                      /* gr_mask's stacks per trie depth */
    struct Memo *memo;                      /* gr_mask's steps, made on first use */
    GrState *dc;                            /* gr_mask_drafts' copy */
};

static void set_free(Set *s) {
    free(s->pool); free(s->off); free(s->len); free(s->hash); free(s->slot); free(s->gen);
}

static void set_reset(Set *s) {
    s->n = 0; s->np = 0; s->empty = 0;
    if (++s->cur == 0) { if (s->gen) memset(s->gen, 0, sizeof *s->gen * s->hcap); s->cur = 1; }
}

static uint32_t hash_stack(const uint32_t *v, uint32_t n) {
    uint32_t h = 2166136261u ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ v[i]) * 16777619u;
    return h ^ h >> 15;
}

static void rehash(Set *s, int cap) {
    free(s->slot); free(s->gen);
    s->slot = xmalloc(sizeof *s->slot * (size_t)cap);
    s->gen = xcalloc((size_t)cap, sizeof *s->gen);
    s->hcap = cap; s->cur = 1;
    for (int i = 0; i < s->n; i++) {
        uint32_t k = s->hash[i] & (uint32_t)(cap - 1);
        while (s->gen[k] == s->cur) k = (k + 1) & (uint32_t)(cap - 1);
        s->gen[k] = s->cur; s->slot[k] = (uint32_t)i;
    }
}

/* Adds stack v[0..n): its id when new, -1 when present, -2 past limit stacks. */
static int set_add(Set *s, const uint32_t *v, uint32_t n, int limit) {
    uint32_t h = hash_stack(v, n);
    if (2 * (s->n + 1) > s->hcap) rehash(s, s->hcap ? s->hcap * 2 : 64);
    uint32_t k = h & (uint32_t)(s->hcap - 1);
    for (; s->gen[k] == s->cur; k = (k + 1) & (uint32_t)(s->hcap - 1)) {
        uint32_t j = s->slot[k];
        if (s->hash[j] == h && s->len[j] == n &&
            (!n || !memcmp(s->pool + s->off[j], v, sizeof *v * n))) return -1;
    }
    if (s->n >= limit) return -2;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->off = xrealloc(s->off, sizeof *s->off * (size_t)s->cap);
        s->len = xrealloc(s->len, sizeof *s->len * (size_t)s->cap);
        s->hash = xrealloc(s->hash, sizeof *s->hash * (size_t)s->cap);
    }
    if (s->np + n > s->cpool) {
        s->cpool = (s->np + n) * 2 + 64;
        s->pool = xrealloc(s->pool, sizeof *s->pool * s->cpool);
    }
    if (n) memcpy(s->pool + s->np, v, sizeof *v * n);
    int id = s->n++;
    s->off[id] = (uint32_t)s->np; s->len[id] = n; s->hash[id] = h;
    s->np += n;
    s->gen[k] = s->cur; s->slot[k] = (uint32_t)id;
    if (!n) s->empty = 1;
    return id;
}

static void set_copy(Set *d, const Set *s) {
    set_reset(d);
    for (int i = 0; i < s->n; i++)
        set_add(d, s->len[i] ? s->pool + s->off[i] : NULL, s->len[i], 1 << 30);
}

static uint32_t *tmp_room(Work *w, size_t n) {
    if (n > w->tcap) { w->tcap = n * 2; w->tmp = xrealloc(w->tmp, sizeof *w->tmp * w->tcap); }
    return w->tmp;
}

/* Queues stack v[0..n) for expansion unless met before; -1 past the limits. */
static int meet(Work *w, const uint32_t *v, uint32_t n, int *nwl) {
    if (n > GR_MAX_DEPTH) return 0;                   /* too deep: this parse is dropped */
    int id = set_add(&w->seen, v, n, 8 * GR_MAX_STACKS);
    if (id == -2) return -1;
    if (id < 0) return 0;
    if (*nwl == w->wcap) {
        w->wcap = w->wcap ? w->wcap * 2 : 64;
        w->wl = xrealloc(w->wl, sizeof *w->wl * (size_t)w->wcap);
    }
    w->wl[(*nwl)++] = id;
    return 0;
}

/* Expands the queued stacks into out (tops terminal, or empty). -1 past the limits. */
static int expand(const GrGrammar *g, Work *w, int nwl, Set *out) {
    while (nwl) {
        int id = w->wl[--nwl];
        uint32_t n = w->seen.len[id];
        uint32_t *v = tmp_room(w, n + 2);
        if (n) memcpy(v, w->seen.pool + w->seen.off[id], sizeof *v * n);
        const GrElem *e = n ? &g->el[v[n - 1]] : NULL;
        if (!e || (e->type != GE_END && e->type != GE_REF)) {
            if (set_add(out, v, n, GR_MAX_STACKS) == -2) return -1;
        } else if (e->type == GE_END) {
            if (meet(w, v, n - 1, &nwl)) return -1;
        } else {
            const GrRule *r = &g->rule[e->arg];
            uint32_t base = n - 1;
            if (g->el[v[n - 1] + 1].type != GE_END) v[base++] = v[n - 1] + 1;
            for (int a = 0; a < r->nalt; a++) {
                v[base] = (uint32_t)g->alt[r->alt0 + a];
                if (meet(w, v, base + 1, &nwl)) return -1;
            }
        }
    }
    return 0;
}

static Work *work(GrState *s) {
    if (!s->w) s->w = xcalloc(1, sizeof *s->w);
    set_reset(&s->w->seen);
    return s->w;
}

/* dst := the stacks of src advanced by code point c. -1 when none is left. */
static int step(const GrGrammar *g, Work *w, const Set *src, uint32_t c, Set *dst) {
    int nwl = 0;
    set_reset(dst);
    for (int i = 0; i < src->n; i++) {
        uint32_t n = src->len[i];
        if (!n) continue;
        const uint32_t *v = src->pool + src->off[i];
        if (!gr_elem_match(g, &g->el[v[n - 1]], c)) continue;
        uint32_t *t = tmp_room(w, n);
        memcpy(t, v, sizeof *t * (n - 1));
        t[n - 1] = v[n - 1] + 1;
        if (meet(w, t, n, &nwl)) return -1;
    }
    if (expand(g, w, nwl, dst)) return -1;
    return dst->n ? 0 : -1;
}

/* The byte b into u: -1 not UTF-8, 0 a code point still partial, 1 one whole in *cp. */
static int utf_byte(Utf *u, int b, uint32_t *cp) {
    if (!u->need) {
        if (b < 0x80) { *cp = (uint32_t)b; return 1; }
        if (b < 0xC2 || b > 0xF4) return -1;
        u->need = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
        u->cp = (uint32_t)b & (u->need == 3 ? 0x07 : u->need == 2 ? 0x0F : 0x1F);
        u->lo = u->need == 3 ? 0x10000 : u->need == 2 ? 0x800 : 0x80;
        return 0;
    }
    if ((b & 0xC0) != 0x80) return -1;
    u->cp = u->cp << 6 | ((uint32_t)b & 0x3F);
    if (--u->need) return 0;
    *cp = u->cp;
    return *cp >= u->lo && *cp <= 0x10FFFF && !(*cp >= 0xD800 && *cp <= 0xDFFF) ? 1 : -1;
}

/* Some stack can take a code point that the partial u can still become. */
static int partial_ok(const GrGrammar *g, const Set *st, const Utf *u) {
    uint32_t lo = u->cp << 6 * u->need, hi = lo | ((1u << 6 * u->need) - 1);
    if (lo < u->lo) lo = u->lo;
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return 0;
    for (int i = 0; i < st->n; i++)
        if (st->len[i] && gr_elem_range(g, &g->el[st->pool[st->off[i] + st->len[i] - 1]],
                                        lo, hi))
            return 1;
    return 0;
}

/* gr_mask's memo. The walk meets the same (stacks, code point) pairs over and over: every
 * token that starts with 'a' steps the state's stacks by 'a', and inside a word every next
 * letter steps a set equal to the last. So results are kept for the mask: sets get ids,
 * equal contents one id (found by an order-free hash), and (id, code point) is stepped
 * once. Past MEMO_SETS sets the walk steps without it. */
#define MEMO_SETS 16384

typedef struct Memo {
    const Set **set; uint32_t *sh; int nset;  /* id -> set, its content hash; 0: the state */
    Set **pool; int npool, used;              /* the sets this memo owns */
    uint64_t *mk; int *mv; int mcap, mn;      /* (id, code point) + 1 -> id, or -1: none */
    int *ct; int ccap;                        /* ids by content hash */
} Memo;

static void memo_free(Memo *m) {
    if (!m) return;
    for (int i = 0; i < m->npool; i++) { set_free(m->pool[i]); free(m->pool[i]); }
    free(m->pool); free(m->set); free(m->sh); free(m->mk); free(m->mv); free(m->ct);
    free(m);
}

static uint32_t set_hash(const Set *s) {
    uint32_t h = (uint32_t)s->n * 0x9E3779B1u;
    for (int i = 0; i < s->n; i++) h += s->hash[i] * 0x85EBCA6Bu ^ (s->hash[i] >> 13);
    return h;
}

static int set_has(const Set *s, const uint32_t *v, uint32_t n, uint32_t h) {
    if (!s->hcap) return 0;
    for (uint32_t k = h & (uint32_t)(s->hcap - 1); s->gen[k] == s->cur;
         k = (k + 1) & (uint32_t)(s->hcap - 1)) {
        uint32_t j = s->slot[k];
        if (s->hash[j] == h && s->len[j] == n &&
            (!n || !memcmp(s->pool + s->off[j], v, sizeof *v * n))) return 1;
    }
    return 0;
}

static int set_equal(const Set *a, const Set *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (!set_has(b, a->len[i] ? a->pool + a->off[i] : NULL, a->len[i], a->hash[i]))
            return 0;
    return 1;
}

static void memo_put(Memo *m, uint64_t key, int v) {
    if (2 * (m->mn + 1) > m->mcap) {
        uint64_t *ok = m->mk; int *ov = m->mv, oc = m->mcap;
        m->mcap = oc ? oc * 2 : 1024;
        m->mk = xcalloc((size_t)m->mcap, sizeof *m->mk);
        m->mv = xmalloc(sizeof *m->mv * (size_t)m->mcap);
        m->mn = 0;
        for (int i = 0; i < oc; i++) if (ok[i]) memo_put(m, ok[i], ov[i]);
        free(ok); free(ov);
    }
    uint32_t k = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & (uint32_t)(m->mcap - 1);
    while (m->mk[k]) k = (k + 1) & (uint32_t)(m->mcap - 1);
    m->mk[k] = key; m->mv[k] = v; m->mn++;
}

static int memo_get(const Memo *m, uint64_t key, int *v) {
    if (!m->mcap) return 0;
    uint32_t k = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & (uint32_t)(m->mcap - 1);
    for (; m->mk[k]; k = (k + 1) & (uint32_t)(m->mcap - 1))
        if (m->mk[k] == key) { *v = m->mv[k]; return 1; }
    return 0;
}

/* The id of a set equal to d, registering d when it is new (*fresh). */
static int memo_id(Memo *m, const Set *d, int *fresh) {
    uint32_t h = set_hash(d);
    *fresh = 0;
    if (2 * (m->nset + 1) > m->ccap) {                  /* grow and rehash */
        free(m->ct);
        m->ccap = m->ccap ? m->ccap * 2 : 256;
        m->ct = xmalloc(sizeof *m->ct * (size_t)m->ccap);
        for (int i = 0; i < m->ccap; i++) m->ct[i] = -1;
        for (int i = 0; i < m->nset; i++) {
            uint32_t k = m->sh[i] & (uint32_t)(m->ccap - 1);
            while (m->ct[k] >= 0) k = (k + 1) & (uint32_t)(m->ccap - 1);
            m->ct[k] = i;
        }
    }
    uint32_t k = h & (uint32_t)(m->ccap - 1);
    for (; m->ct[k] >= 0; k = (k + 1) & (uint32_t)(m->ccap - 1))
        if (m->sh[m->ct[k]] == h && set_equal(m->set[m->ct[k]], d)) return m->ct[k];
    m->set = xrealloc(m->set, sizeof *m->set * (size_t)(m->nset + 1));
    m->sh = xrealloc(m->sh, sizeof *m->sh * (size_t)(m->nset + 1));
    m->set[m->nset] = d; m->sh[m->nset] = h;
    m->ct[k] = m->nset;
    *fresh = 1;
    return m->nset++;
}

static void memo_start(GrState *s) {
    if (!s->memo) s->memo = xcalloc(1, sizeof *s->memo);
    Memo *m = s->memo;
    m->nset = 0; m->used = 0; m->mn = 0;
    if (m->mk) memset(m->mk, 0, sizeof *m->mk * (size_t)m->mcap);
    if (m->ct) for (int i = 0; i < m->ccap; i++) m->ct[i] = -1;
    int fresh;
    memo_id(m, &s->st, &fresh);                         /* id 0 */
}

GrState *gr_new(const GrGrammar *g) {
    GrState *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->g = g;
    gr_init(s);
    return s;
}

void gr_init(GrState *s) {
    const GrGrammar *g = s->g;
    Work *w = work(s);
    int nwl = 0;
    uint32_t v;
    set_reset(&s->st);
    memset(&s->u, 0, sizeof s->u);
    for (int a = 0; a < g->rule[g->root].nalt; a++) {
        v = (uint32_t)g->alt[g->rule[g->root].alt0 + a];
        if (meet(w, &v, 1, &nwl)) return;
    }
    expand(g, w, nwl, &s->st);
}

void gr_state_free(GrState *s) {
    if (!s) return;
    set_free(&s->st); set_free(&s->nx);
    if (s->w) { set_free(&s->w->seen); free(s->w->tmp); free(s->w->wl); free(s->w); }
    for (int i = 0; i < s->nlv; i++) { set_free(s->lv[i]); free(s->lv[i]); }
    free(s->lv);
    memo_free(s->memo);
    gr_state_free(s->dc);
    free(s);
}

int gr_copy(GrState *d, const GrState *s) {
    if (d == s) return 0;
    d->g = s->g;
    set_copy(&d->st, &s->st);
    d->u = s->u;
    return 0;
}

int gr_put(GrState *s, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        int r = utf_byte(&s->u, b[i], &cp);
        if (r < 0) return -1;
        if (r == 0) { if (!partial_ok(s->g, &s->st, &s->u)) return -1; continue; }
        if (step(s->g, work(s), &s->st, cp, &s->nx)) return -1;
        Set t = s->st; s->st = s->nx; s->nx = t;
    }
    return 0;
}

int gr_complete(const GrState *s) { return !s->u.need && s->st.empty; }
int gr_done(const GrState *s) { return gr_complete(s) && s->st.n == 1; }

/* ---- the vocabulary's byte trie, and the mask ---- */

typedef struct { int child, sib, tok; unsigned char b; } TNode;

typedef struct {
    const Tok *t; int nr; uint64_t fp;
    TNode *nd; int nn;
    int *next;                          /* tokens of equal bytes: a chain */
    int maxlen;
} Trie;

static uint64_t fingerprint(const Tok *t, int nr) {
    uint64_t h = k3_hash(K3_HASH_INIT, &nr, sizeof nr);
    for (int k = 0; k < 64 && nr; k++) {
        size_t n = 0;
        int id = (int)((int64_t)nr * k / 64);
        const char *b = tok_token_bytes(t, id, &n);
        if (b) h = k3_hash(h, b, n);
        h = k3_hash(h, &n, sizeof n);
    }
    return h;
}

static Trie *trie_build(const Tok *t, int nr, uint64_t fp) {
    Trie *tr = xcalloc(1, sizeof *tr);
    int cap = 1024, root_kid[256];
    tr->t = t; tr->nr = nr; tr->fp = fp;
    tr->nd = xmalloc(sizeof *tr->nd * (size_t)cap);
    tr->nd[0] = (TNode){ -1, -1, -1, 0 };
    tr->nn = 1;
    tr->next = xmalloc(sizeof *tr->next * (size_t)(nr + 1));
    for (int c = 0; c < 256; c++) root_kid[c] = -1;
    for (int id = 0; id < nr; id++) {
        size_t n = 0;
        const unsigned char *b = (const unsigned char *)tok_token_bytes(t, id, &n);
        tr->next[id] = -1;
        if (!b || !n) continue;
        if ((int)n > tr->maxlen) tr->maxlen = (int)n;
        int at = 0;
        for (size_t i = 0; i < n; i++) {
            int k = i ? tr->nd[at].child : root_kid[b[i]];
            if (i) while (k >= 0 && tr->nd[k].b != b[i]) k = tr->nd[k].sib;
            if (k < 0) {
                if (tr->nn == cap) {
                    cap *= 2;
                    tr->nd = xrealloc(tr->nd, sizeof *tr->nd * (size_t)cap);
                }
                k = tr->nn++;
                tr->nd[k] = (TNode){ -1, tr->nd[at].child, -1, b[i] };
                tr->nd[at].child = k;
                if (!i) root_kid[b[i]] = k;
            }
            at = k;
        }
        tr->next[id] = tr->nd[at].tok;
        tr->nd[at].tok = id;
    }
    return tr;
}

#define N_TRIES 8
static pthread_mutex_t trie_mu = PTHREAD_MUTEX_INITIALIZER;
static Trie *tries[N_TRIES];

/* The trie of t's ranks; *own set when it is the caller's to free (the cache is full). */
static Trie *trie_for(const Tok *t, int *own) {
    int nr = tok_n_ranks(t);
    uint64_t fp = fingerprint(t, nr);
    Trie *tr = NULL;
    *own = 0;
    pthread_mutex_lock(&trie_mu);
    for (int i = 0; i < N_TRIES && tries[i] && !tr; i++)
        if (tries[i]->t == t && tries[i]->nr == nr && tries[i]->fp == fp) tr = tries[i];
    if (!tr) {
        tr = trie_build(t, nr, fp);
        int i = 0;
        while (i < N_TRIES && tries[i]) i++;
        if (i < N_TRIES) tries[i] = tr; else *own = 1;
    }
    pthread_mutex_unlock(&trie_mu);
    return tr;
}

typedef struct {
    GrState *s;
    const Trie *tr;
    unsigned char *ok;
} Walk;

static Set *level(GrState *s, int d) {
    if (d >= s->nlv) {
        s->lv = xrealloc(s->lv, sizeof *s->lv * (size_t)(d + 1));
        for (int i = s->nlv; i <= d; i++) s->lv[i] = xcalloc(1, sizeof **s->lv);
        s->nlv = d + 1;
    }
    return s->lv[d];
}

/* st (id pid; -1: not in the memo) stepped by cp: the set and its id, or NULL. */
static const Set *child(Walk *k, int depth, const Set *st, int pid, uint32_t cp, int *cid) {
    GrState *s = k->s;
    Memo *m = s->memo;
    const uint64_t key = ((uint64_t)pid << 21 | cp) + 1;
    int v;
    *cid = -1;
    if (pid >= 0 && memo_get(m, key, &v)) { *cid = v; return v >= 0 ? m->set[v] : NULL; }
    if (pid < 0 || m->used == MEMO_SETS) {              /* without the memo */
        Set *d = level(s, depth);
        return step(s->g, work(s), st, cp, d) ? NULL : d;
    }
    if (m->used == m->npool) {
        m->pool = xrealloc(m->pool, sizeof *m->pool * (size_t)(m->npool + 1));
        m->pool[m->npool++] = xcalloc(1, sizeof **m->pool);
    }
    Set *d = m->pool[m->used];
    if (step(s->g, work(s), st, cp, d)) { memo_put(m, key, -1); return NULL; }
    int fresh, id = memo_id(m, d, &fresh);
    if (fresh) m->used++;
    memo_put(m, key, id);
    *cid = id;
    return m->set[id];
}

static void walk(Walk *k, int node, int depth, const Set *st, int pid, Utf u) {
    const GrGrammar *g = k->s->g;
    for (int c = k->tr->nd[node].child; c >= 0; c = k->tr->nd[c].sib) {
        const TNode *x = &k->tr->nd[c];
        Utf u2 = u;
        uint32_t cp;
        const Set *nst = st;
        int r = utf_byte(&u2, x->b, &cp), cid = pid;
        if (r < 0) continue;
        if (r == 0) {
            if (!partial_ok(g, st, &u2)) continue;
        } else if (!(nst = child(k, depth, st, pid, cp, &cid))) continue;
        for (int id = x->tok; id >= 0; id = k->tr->next[id]) k->ok[id] = 1;
        if (x->child >= 0) walk(k, c, depth + 1, nst, cid, u2);
    }
}

int gr_mask(const GrState *cs, const Tok *t, int V, int end_id, float *logits) {
    GrState *s = (GrState *)cs;              /* only its scratch is written */
    int own, left = 0;
    Trie *tr = trie_for(t, &own);
    unsigned char *ok = xcalloc((size_t)(tr->nr > V ? tr->nr : V) + 1, 1);
    Walk k = { s, tr, ok };
    memo_start(s);
    walk(&k, 0, 0, &s->st, 0, s->u);
    const int done = gr_complete(s);
    for (int id = 0; id < V; id++) {
        if ((id < tr->nr && ok[id]) || (id == end_id && done)) left++;
        else logits[id] = -INFINITY;
    }
    free(ok);
    if (own) { free(tr->nd); free(tr->next); free(tr); }
    return left;
}

int gr_mask_drafts(const GrState *s, const Tok *t, int V, int end_id, float *lg,
                   const int *draft, int k) {
    GrState *m = (GrState *)s;
    if (!m->dc && !(m->dc = gr_new(s->g))) return 0;
    GrState *c = m->dc;
    gr_copy(c, s);
    for (int i = 0; i <= k; i++) {
        if (!gr_mask(c, t, V, end_id, lg + (size_t)i * V)) return i;
        size_t n = 0;
        const char *b = i < k && draft[i] >= 0 && draft[i] < tok_n_ranks(t) ?
                        tok_token_bytes(t, draft[i], &n) : NULL;
        if (!b || !n || gr_put(c, (const unsigned char *)b, n)) break;
    }
    return k + 1;
}
