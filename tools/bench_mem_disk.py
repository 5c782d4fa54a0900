#!/usr/bin/env python3
"""Disk bandwidth with k3's own expert access pattern (docs/PERFORMANCE.md): O_DIRECT
preads of one expert's aligned window (the engine reads up4k(17,547,264) = 17,551,360 B
on the real/full-width slice) at queue depth 4 (4 threads, as the expert I/O pool), over
the routed-expert regions of the checkpoint's own shard files, every expert once in a
shuffled order (fixed seed). Drop the page cache first (the bench script does).
    python3 tools/bench_mem_disk.py MODEL_DIR [--qd 4] [--max-gb G]
Prints one JSON line: bytes, seconds, mb_per_s, reads, qd, read_bytes."""
import json, mmap, os, random, re, struct, sys, threading, time

def expert_windows(model_dir):
    wins = []
    for f in sorted(os.listdir(model_dir)):
        if not f.endswith(".safetensors"):
            continue
        p = os.path.join(model_dir, f)
        with open(p, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            hdr = json.loads(fh.read(n))
        base = 8 + n
        ex = {}
        for name, t in hdr.items():
            m = re.search(r"layers\.(\d+)\..*experts\.(\d+)\.", name)
            if name == "__metadata__" or not m:
                continue
            k = (int(m[1]), int(m[2]))
            a, b = t["data_offsets"]
            lo, hi = ex.get(k, (1 << 62, 0))
            ex[k] = (min(lo, base + a), max(hi, base + b))
        for lo, hi in ex.values():
            a0 = lo & ~4095
            wins.append((p, a0, (hi - a0 + 4095) & ~4095))
    return wins

def main():
    a = sys.argv[1:]
    model, qd, max_gb = a[0], 4, 1e9
    if "--qd" in a: qd = int(a[a.index("--qd") + 1])
    if "--max-gb" in a: max_gb = float(a[a.index("--max-gb") + 1])
    wins = expert_windows(model)
    random.Random(1).shuffle(wins)
    out, tot = [], 0
    for w in wins:
        if tot + w[2] > max_gb * 1e9: break
        out.append(w); tot += w[2]
    fds = {p: os.open(p, os.O_RDONLY | os.O_DIRECT) for p in set(w[0] for w in out)}
    lock, nxt = threading.Lock(), [0]
    def work():
        buf = mmap.mmap(-1, max(w[2] for w in out))
        while True:
            with lock:
                i = nxt[0]; nxt[0] += 1
            if i >= len(out): return
            p, off, n = out[i]
            got = os.preadv(fds[p], [memoryview(buf)[:n]], off)
            if got != n: raise SystemExit(f"short read {got} of {n} at {off} in {p}")
    th = [threading.Thread(target=work) for _ in range(qd)]
    t0 = time.monotonic()
    for t in th: t.start()
    for t in th: t.join()
    dt = time.monotonic() - t0
    print(json.dumps(dict(bytes=tot, seconds=round(dt, 4), mb_per_s=round(tot / 1e6 / dt, 1), reads=len(out), qd=qd,
                          read_bytes=out[0][2] if out else 0)))

main()
