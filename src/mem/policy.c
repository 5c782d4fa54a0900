/* policy.c — the expert cache's eviction policy: LFU with ageing over a history that
 * outlives residency, ties broken by least recent use (internal.h). tools/cache_replay.py
 * mirrors it; test_cache --replay checks the two agree. */
#include "internal.h"
#include <stdlib.h>
#include <string.h>

int k3_policy_init(K3Policy *p, size_t nkeys, int capacity) {
    memset(p, 0, sizeof *p);
    p->freq = calloc(nkeys ? nkeys : 1, sizeof(uint32_t));
    p->last = calloc(nkeys ? nkeys : 1, sizeof(uint64_t));
    p->nkeys = nkeys;
    p->age_every = (uint64_t)(capacity > 0 ? capacity : 1) * 16;
    if (p->age_every < 4096) p->age_every = 4096;
    p->next_age = p->age_every;
    return p->freq && p->last ? 0 : -1;
}

void k3_policy_free(K3Policy *p) { free(p->freq); free(p->last); memset(p, 0, sizeof *p); }

void k3_policy_touch(K3Policy *p, size_t key) {
    if (key >= p->nkeys) return;
    p->clock++;
    if (p->freq[key] < 0xffffffffu) p->freq[key]++;
    p->last[key] = p->clock;
    if (p->clock >= p->next_age) {            /* ageing: halve every count */
        for (size_t i = 0; i < p->nkeys; i++) p->freq[i] >>= 1;
        p->next_age += p->age_every;
    }
}

int k3_policy_victim(const K3Policy *p, const size_t *cand, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        size_t a = cand[i], b = cand[best];
        if (p->freq[a] < p->freq[b] || (p->freq[a] == p->freq[b] && p->last[a] < p->last[b]))
            best = i;
    }
    return best;
}
