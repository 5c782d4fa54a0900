#!/usr/bin/env python3
"""Disk bandwidth with the trunk stream's own pattern (src/mem/stream.c) at several queue
depths: O_DIRECT preads of 1 MiB aligned chunks in file-offset order over a packed trunk,
QD threads each taking the next chunk (as the engine's --io-depth readers do), the page
cache dropped before each depth. On this VM the disk is cached by the host: a "cold" read
after drop_caches is not a physically cold disk, so the figures are the host cache's.
    python3 tools/bench_disk_qd.py TRUNK_DIR [--qd 1,4,16,32] [--max-gb G]
Prints one JSON line per depth: qd, bytes, seconds, mb_per_s."""
import json, mmap, os, sys, threading, time

CHUNK = 1 << 20


def run(path, qd, limit):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = min(os.fstat(fd).st_size // CHUNK * CHUNK, limit)
    nxt, lock, moved = [0], threading.Lock(), [0]

    def worker():
        buf = mmap.mmap(-1, CHUNK)                # page-aligned, as O_DIRECT needs
        while True:
            with lock:
                off = nxt[0]
                nxt[0] += CHUNK
            if off >= size:
                return
            n = os.preadv(fd, [buf], off)
            with lock:
                moved[0] += n

    th = [threading.Thread(target=worker) for _ in range(qd)]
    t0 = time.time()
    for t in th:
        t.start()
    for t in th:
        t.join()
    dt = time.time() - t0
    os.close(fd)
    return {"qd": qd, "bytes": moved[0], "seconds": round(dt, 4),
            "mb_per_s": round(moved[0] / 1e6 / dt, 1), "chunk": CHUNK}


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    qds, limit = [1, 4, 16, 32], 4e9
    if "--qd" in a:
        qds = [int(x) for x in a[a.index("--qd") + 1].split(",")]
    if "--max-gb" in a:
        limit = float(a[a.index("--max-gb") + 1]) * 1e9
    path = os.path.join(a[0], "trunk.k3")
    for qd in qds:
        os.system("sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null")
        print(json.dumps(run(path, qd, int(limit))), flush=True)


if __name__ == "__main__":
    main()
