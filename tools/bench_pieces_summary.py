#!/usr/bin/env python3
"""Medians of tools/bench_pieces.sh's (and bench_rss_budgets.sh's) JSON lines by label:
s/token (and its range), prefill seconds, user CPU seconds, peak RSS against the printed
plan (the plan's "total" line; the --out plan_bytes where the binary writes one), expert
bytes read (and "x once": reads over the (layer, expert) pairs the prompt selected, i.e.
the requests of a forward that took the whole prompt in one chunk), and streaming
efficiency: bytes read per decoded token (trunk + lm_head + experts) over the disk rate
measured in the same run with the engine's pattern (median over reps, at depth 16, the
engine's default, and the range over depths), against s/token. Then the A/B ratios.
    python3 tools/bench_pieces_summary.py FILE.jsonl"""
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = statistics.median
disk = {}
for r in rows:
    if r.get("label") == "disk":
        disk.setdefault(r["qd"], []).append(r["mb_per_s"])
disk = {q: med(v) for q, v in sorted(disk.items())}
runs = {}
for r in rows:
    if r.get("label") != "disk":
        runs.setdefault(r["label"], []).append(r)
# the (layer, expert) pairs a prompt selected: requests of a one-chunk forward of it
pairs = {}
for r in rows:
    if r.get("n_generated") == 0 and r.get("prefill_chunk", 0) >= r.get("n_prompt", 1 << 30):
        pairs[r["n_prompt"]] = r["expert_requests"]


def plan(r):
    return r.get("plan_printed_bytes") or r.get("plan_bytes")


print("disk MB/s by queue depth (median of %d reps): %s" %
      (max([len([r for r in rows if r.get("label") == "disk" and r["qd"] == q])
            for q in disk] or [0]), disk))
meds = {}
for label, rs in runs.items():
    def m(k, f=lambda r, k: r.get(k)):
        v = [f(r, k) for r in rs if isinstance(f(r, k), (int, float))]
        return med(v) if v else float("nan")
    spt = [r["seconds_per_token"] for r in rs if r.get("n_generated", 0) > 1]
    meds[label] = {"spt": m("seconds_per_token"), "rss": m("peak_rss_bytes"),
                   "exp": m("expert_bytes_read"),
                   "pre": m("seconds_prefill")}
    line = f"{label:18s} n={len(rs)}"
    if spt:
        line += f" s/token {med(spt):.3f} ({min(spt):.2f}-{max(spt):.2f})"
    line += (f" prefill {m('seconds_prefill'):.2f} s user {m('user_s'):.1f} s peak RSS "
             f"{m('peak_rss_bytes') / 1e9:.3f} GB ({min(r['peak_rss_bytes'] for r in rs) / 1e9:.3f}"
             f"-{max(r['peak_rss_bytes'] for r in rs) / 1e9:.3f}) plan "
             f"{m('p', lambda r, k: plan(r)) / 1e9:.3f} GB (peak/plan "
             f"{med([r['peak_rss_bytes'] / plan(r) for r in rs if plan(r)]):.4f}, max "
             f"{max([r['peak_rss_bytes'] / plan(r) for r in rs if plan(r)]):.4f}) experts "
             f"{m('expert_bytes_read') / 1e9:.2f} GB in {m('expert_reads'):.0f} reads")
    if rs[0].get("n_generated") == 0 and pairs.get(rs[0]["n_prompt"]):
        line += f" ({m('expert_reads') / pairs[rs[0]['n_prompt']]:.2f}x once)"
    per_tok = [r.get("trunk_bytes_per_token", 0) + r.get("head_bytes_per_token", 0) +
               r.get("expert_bytes_per_token", 0) for r in rs]
    if disk.get(16) and spt and med(per_tok) > 0:
        t = med(per_tok) / (disk[16] * 1e6)
        lo, hi = (med(per_tok) / (max(disk.values()) * 1e6),
                  med(per_tok) / (min(disk.values()) * 1e6))
        line += (f"; {med(per_tok) / 1e9:.2f} GB/token = {t:.2f} s at qd16 ({lo:.2f}-{hi:.2f}"
                 f" over depths), efficiency {t / med(spt):.2f} ({lo / med(spt):.2f}-"
                 f"{hi / med(spt):.2f}); disk busy {m('disk_busy_share'):.3f}")
    ids = {tuple(r.get("generated_ids", [])) for r in rs}
    print(line + f"; ids {'same' if len(ids) == 1 else 'DIFFER'} {list(sorted(ids)[0][:4])}")
for a, b in (("decode-new", "decode-old"), ("decode-new-2.8", "decode-old"),
             ("decode-new-2.8", "decode-new"), ("prompt256-new", "prompt256-old")):
    if a in meds and b in meds:
        x, y = meds[a], meds[b]
        t = (f"s/token {x['spt'] / y['spt']:.3f}" if y["spt"] > 0 else
             f"prefill s {x['pre'] / y['pre']:.3f}")
        print(f"{a} / {b}: {t}, peak RSS "
              f"{x['rss'] / y['rss']:.3f}, experts read {x['exp'] / y['exp']:.3f}")
by_prompt = {}
for r in rows:
    if r.get("generated_ids"):
        by_prompt.setdefault(tuple(r["prompt_ids"]), []).append(r["generated_ids"])
for pr, gs in by_prompt.items():
    k = min(len(g) for g in gs)
    same = len({tuple(g[:k]) for g in gs}) == 1
    print(f"prompt of {len(pr)}: the first {k} ids over {len(gs)} runs (every budget and "
          f"binary): {'same' if same else 'DIFFER'}")
