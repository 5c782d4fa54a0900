#!/usr/bin/env python3
"""One streamed request to k3 serve, timed chunk by chunk (the tools' client; stdlib only).

  python3 tools/serve_client.py URL BODY.json [--after FILE N]

Prints one JSON line: t_head (the response head), t_first (the first chunk that carries
text: the time to first token), t_total, the gaps between text chunks (max and median, s),
n_text (text chunks), the usage object when the stream has one. With --after FILE N the
request is sent only once FILE holds N lines (another client's progress). Times are from
the moment the request is sent."""
import http.client, json, os, statistics, sys, time, urllib.parse


def text_of(ev):
    for c in ev.get("choices", []):
        d = c.get("delta") or {}
        if c.get("text") or d.get("content") or d.get("reasoning_content"):
            return True
    return False


def main():
    url, body = sys.argv[1], open(sys.argv[2], "rb").read()
    if "--after" in sys.argv:
        i = sys.argv.index("--after")
        f, n = sys.argv[i + 1], int(sys.argv[i + 2])
        while not os.path.exists(f) or sum(1 for _ in open(f)) < n:
            time.sleep(0.01)
    u = urllib.parse.urlparse(url)
    con = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.monotonic()
    con.request("POST", u.path, body, {"Content-Type": "application/json"})
    r = con.getresponse()
    t_head = time.monotonic() - t0
    times, usage = [], None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        if text_of(ev):
            times.append(time.monotonic() - t0)
            if os.environ.get("PROGRESS"):
                with open(os.environ["PROGRESS"], "a") as p:
                    p.write("%.6f\n" % times[-1])
    gaps = [b - a for a, b in zip(times, times[1:])]
    print(json.dumps({"t_head": t_head, "t_first": times[0] if times else None,
                      "t_total": time.monotonic() - t0, "n_text": len(times),
                      "gap_max": max(gaps) if gaps else None,
                      "gap_median": statistics.median(gaps) if gaps else None,
                      "usage": usage}))


main()
