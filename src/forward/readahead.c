/* readahead.c — decode's guess of the next MoE layer's experts (--read-ahead on; issue 24
 * item 4). At layer L's MoE, in a step with no prompt rows, the next MoE layer's router is
 * applied to L's input: each token's top-k by that layer's sigmoid scores and bias, the
 * union less what another rank owns, goes to storage as a guess, read behind L's own
 * experts while L computes. A guess only schedules reads: which experts run, and every
 * bit, are the real router's. The next layer's input is not L's (L's attention and MoE
 * and the mix over depth come between), so a guess can miss; the memory report counts the
 * experts guessed, used and evicted unused. Only where the next router is in memory
 * whatever layer is acquired (weights.h peek: the trunk in the shard mappings). */
#include "comm.h"
#include "k3.h"
#include "kernels.h"
#include "weights.h"

enum { GUESS_T = 8 };             /* decode rows a step guesses for (a batch of up to 8) */

void k3_read_ahead(K3Engine *e, int L, const float *x, int T) {
    const K3Config *c = &e->m.cfg;
    K3Weights *w = e->w;
    if (!e->read_ahead || e->prog.step_T > 0 || T > GUESS_T || !w->ops->peek || !w->ops->guess)
        return;
    const int NL = c->num_hidden_layers, E = c->num_experts, K = c->num_experts_per_token;
    int nx = L + 1;
    while (nx < NL && !c->is_moe[nx]) nx++;
    const K3Layer *ny = nx < NL ? w->ops->peek(w, nx) : NULL;
    if (!ny || K > 64) return;
    float s[GUESS_T * E];
    unsigned char want[E];
    int ids[64], n = 0;
    k3_matmul(s, &ny->router, x, T);                 /* whole on every rank: E rows */
    for (int j = 0; j < E; j++) want[j] = 0;
    for (int t = 0; t < T; t++) {                    /* the router's choice: sigmoid + bias */
        float *st = s + (size_t)t * E;
        for (int j = 0; j < E; j++) st[j] = k3_sigmoidf(st[j]) + ny->router_bias[j];
        k3_topk(st, E, K, ids);
        for (int k = 0; k < K; k++) want[ids[k]] = 1;
    }
    const int N = k3_comm_size(), me = k3_comm_rank();
    int guess[E];
    for (int j = 0; j < E; j++)
        if (want[j] && k3_expert_owner(nx, j, N) == me) guess[n++] = j;
    w->ops->guess(w, nx, guess, n);
}
