#!/usr/bin/env python3
"""Replay a k3 expert-cache trace (k3 ... --dump-cache-trace DIR -> DIR/cache_trace.txt)
under LRU, k3's policy (LFU with ageing, src/mem/policy.c k3_policy_*) and Belady's
optimum, at any capacities (in expert slots).

    /usr/bin/python3 tools/cache_replay.py DIR/cache_trace.txt [--capacity 8,16,64] [--json OUT]
        [--check-c build/tests/test_cache]

--check-c runs the C policy (k3_policy_*, via `test_cache --replay TRACE CAP`) on the same
trace at every capacity and exits 1 unless its hit count equals this file's lfu-aged
replay: the two implementations of the policy must agree.

Cache model (same as tests/c/test_cache.c): a request hits if the expert is resident,
else it is loaded, evicting the policy's victim when the cache is full. The engine
additionally never evicts the expert being computed or the prefetched rest of the
current union, so its recorded hit column can differ slightly from this replay.
"""
import argparse, json, sys


def read_trace(path):
    meta, keys = {}, []
    E = None
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                p = line[1:].split()
                for i, w in enumerate(p[:-1]):
                    if w in ("layers", "experts", "slots", "top_k"):
                        meta[w] = int(p[i + 1])
                continue
            s = line.split()
            if len(s) < 3:
                continue
            E = E or meta.get("experts", 1 << 20)
            keys.append(int(s[1]) * E + int(s[2]))
    return meta, keys


def lru(keys, cap):
    from collections import OrderedDict
    c, hits = OrderedDict(), 0
    for k in keys:
        if k in c:
            hits += 1
            c.move_to_end(k)
        else:
            if len(c) >= cap:
                c.popitem(last=False)
            c[k] = 1
    return hits


def lfu_aged(keys, cap):
    """Mirror of k3_policy_*: counts persist across evictions, halved every
    max(4096, 16*cap) requests; victim = lowest count, ties -> least recent."""
    freq, last = {}, {}
    age_every = max(4096, 16 * cap)
    next_age, clock = age_every, 0
    res, hits = [], set()
    nhit = 0
    for k in keys:
        if k in hits:
            nhit += 1
        else:
            if len(res) >= cap:
                v = min(range(len(res)), key=lambda i: (freq.get(res[i], 0), last.get(res[i], 0), i))
                hits.discard(res[v])
                res[v] = k
            else:
                res.append(k)
            hits.add(k)
        clock += 1
        freq[k] = freq.get(k, 0) + 1
        last[k] = clock
        if clock >= next_age:
            for kk in list(freq):
                freq[kk] >>= 1
            next_age += age_every
    return nhit


def belady(keys, cap):
    import heapq
    INF = 1 << 60
    nxt, seen = [0] * len(keys), {}
    for i in range(len(keys) - 1, -1, -1):
        nxt[i] = seen.get(keys[i], INF)
        seen[keys[i]] = i
    res, heap, hits = {}, [], 0   # res: key -> next use; heap of (-next, key), lazy
    for i, k in enumerate(keys):
        if k in res:
            hits += 1
        elif len(res) >= cap:
            while True:
                nu, v = heapq.heappop(heap)
                if v in res and res[v] == -nu:
                    del res[v]
                    break
        res[k] = nxt[i]
        heapq.heappush(heap, (-nxt[i], k))
    return hits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--capacity", default="")
    ap.add_argument("--json")
    ap.add_argument("--check-c", help="test_cache binary: compare its C-policy replay with lfu_aged")
    a = ap.parse_args()
    meta, keys = read_trace(a.trace)
    if not keys:
        sys.exit("cache_replay: %s has no requests" % a.trace)
    distinct = len(set(keys))
    caps = [int(x) for x in a.capacity.split(",") if x] or sorted({max(1, distinct * f // 16) for f in (1, 2, 4, 8, 12)})
    rows, bad = [], False
    print("trace %s: %d requests, %d distinct experts, recorded with %s slots" % (a.trace, len(keys), distinct, meta.get("slots", "?")))
    print("capacity  LRU     lfu-aged  Belady")
    for c in caps:
        l, p, b = lru(keys, c), lfu_aged(keys, c), belady(keys, c)
        rows.append({"capacity": c, "requests": len(keys), "lru": l / len(keys), "lfu_aged": p / len(keys), "belady": b / len(keys)})
        print("%8d  %.4f  %.4f    %.4f" % (c, l / len(keys), p / len(keys), b / len(keys)))
        if a.check_c:
            import subprocess
            out = subprocess.run([a.check_c, "--replay", a.trace, str(c)], capture_output=True, text=True, check=True).stdout.split()
            ch = int(out[1])
            rows[-1]["c_policy_hits"], rows[-1]["python_hits"] = ch, p
            print("          C policy %d hits, Python lfu-aged %d hits: %s" % (ch, p, "agree" if ch == p else "DISAGREE"))
            if ch != p:
                bad = True
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"trace": a.trace, "requests": len(keys), "distinct": distinct, "rows": rows}, f, indent=1)
    if bad:
        sys.exit("cache_replay: the C policy and the Python replay disagree")


if __name__ == "__main__":
    main()
