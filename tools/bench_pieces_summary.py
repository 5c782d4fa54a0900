#!/usr/bin/env python3
"""Medians of tools/bench_pieces.sh's JSON lines by label: s/token, prefill seconds, user
CPU seconds, peak RSS against the plan, expert bytes read (and the ratio to the pairs the
prompt selected, each read once), and streaming efficiency: bytes read per decoded token
over the disk rate measured in the same run at the engine's depth (16), against s/token.
    python3 tools/bench_pieces_summary.py docs/data/pieces_fw6.jsonl"""
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
disk = {r["qd"]: r["mb_per_s"] for r in rows if r.get("label") == "disk"}
runs = {}
for r in rows:
    if r.get("label") != "disk":
        runs.setdefault(r["label"], []).append(r)
med = statistics.median
print("disk MB/s by queue depth:", disk)
for label, rs in runs.items():
    def m(k):
        v = [r[k] for r in rs if isinstance(r.get(k), (int, float))]
        return med(v) if v else float("nan")
    line = (f"{label:24s} n={len(rs)} s/token {m('seconds_per_token'):.3f} prefill "
            f"{m('seconds_prefill'):.2f} s user {m('user_s'):.1f} s peak RSS "
            f"{m('peak_rss_bytes') / 1e9:.3f} GB plan {m('plan_bytes') / 1e9:.3f} GB "
            f"(peak/plan {med([r['peak_rss_bytes'] / r['plan_bytes'] for r in rs]):.4f}) "
            f"experts {m('expert_bytes_read') / 1e9:.2f} GB in {m('expert_reads'):.0f} reads")
    per_tok = [r.get("trunk_bytes_per_token", 0) + r.get("expert_bytes_per_token", 0)
               for r in rs]
    if disk.get(16) and rs[0].get("n_generated", 0) > 1 and med(per_tok) > 0:
        t = med(per_tok) / (disk[16] * 1e6)
        line += (f"; {med(per_tok) / 1e9:.2f} GB/token = {t:.2f} s at qd16, efficiency "
                 f"{t / m('seconds_per_token'):.2f}")
    ids = {tuple(r.get("generated_ids", [])) for r in rs}
    print(line + f"; ids {'same' if len(ids) == 1 else 'DIFFER'} {sorted(ids)[0][:4]}")
