#!/usr/bin/env python3
"""Summarise tools/bench_mem.sh output (JSON lines) into a markdown table + JSON.

    /usr/bin/python3 tools/bench_mem_summary.py RUNS.jsonl OUT.md [--trunk-layers-gb 7.3501] [--expert-bytes 17547264] [--moe-layers 5] [--topk 16]
Medians over runs. Decode-step figures use steps >= 2 (step 1 partly read ahead during prefill).
Streaming efficiency = (bytes read per token / in-run disk bandwidth) / s per token.
"""
import argparse, json, statistics as st

ap = argparse.ArgumentParser()
ap.add_argument("runs"); ap.add_argument("out")
ap.add_argument("--trunk-layers-gb", type=float, default=7.3501)
ap.add_argument("--expert-bytes", type=int, default=17547264)
ap.add_argument("--moe-layers", type=int, default=5)
ap.add_argument("--topk", type=int, default=16)
ap.add_argument("--lm-head-gb", type=float, default=0.234881, help="lm_head bytes (read every forward when streamed)")
ap.add_argument("--head-stream-below-gb", type=float, default=3.832,
                help="trunk budgets below ring minimum + lm_head stream lm_head (fw6: 3.597 + 0.235)")
ap.add_argument("--bw-mb-s", type=float, default=0, help="override the in-run disk bandwidth (MB/s); default: the in-run"
                " tools/bench_mem_disk.py figure (O_DIRECT expert windows, queue depth 4)")
a = ap.parse_args()
runs = [json.loads(l) for l in open(a.runs) if l.strip()]
groups = {}
for r in runs:
    groups.setdefault((r["trunk_gb"], r["cache_gb"]), []).append(r)
med = lambda xs: st.median(xs) if xs else float("nan")
rows = []
for (tg, cg), rs in sorted(groups.items()):
    ok = [r for r in rs if r["rc"] == 0]
    dec = lambda r: [s for s in r["steps"] if s["step"] >= 2]
    bpt = med([med([(s["trunk_mb"] + s["expert_mb"]) * 1e6 for s in dec(r)]) for r in ok])
    spt = med([med([s["s"] for s in dec(r)]) for r in ok])
    bw = (a.bw_mb_s or med([r["disk_odirect_mb_s"] for r in ok])) * 1e6
    pinned = med([r["plan"].get("trunk pinned", 0) for r in ok])
    hits = med([sum(s["resident"] for s in dec(r)) / max(1, sum(s["requests"] for s in dec(r))) for r in ok])
    theo = (a.trunk_layers_gb - pinned) * 1e9 + a.topk * a.moe_layers * a.expert_bytes
    if tg < a.head_stream_below_gb: theo += a.lm_head_gb * 1e9
    row = dict(trunk_gb=tg, cache_gb=cg, runs=len(rs), ok=len(ok),
               plan_gb=med([r["plan_total_gb"] for r in ok]),
               peak_rss_gb=med([r["report"]["peak_rss_bytes"] / 1e9 for r in ok]),
               cgroup_limit_gb=med([r["cgroup_limit"] / 1e9 for r in ok]),
               cgroup_max_usage_gb=med([r["cgroup_max_usage"] / 1e9 for r in ok]),
               s_per_token=spt, prefill_s=med([r["report"]["seconds_prefill"] for r in ok]),
               bytes_per_token=bpt, theoretical_bytes_per_token_no_cache=theo,
               decode_hit_rate=hits, disk_odirect_mb_s=bw / 1e6,
               io_bound_s_per_token=bpt / bw if bw else float("nan"),
               streaming_efficiency=(bpt / bw) / spt if bw and spt else float("nan"),
               io_share=med([r["report"].get("io_share", 0) for r in ok]))
    row["peak_over_plan"] = row["peak_rss_gb"] / row["plan_gb"]
    rows.append(row)
with open(a.out.replace(".md", ".json"), "w") as f:
    json.dump(rows, f, indent=1)
with open(a.out, "w") as f:
    f.write("| --trunk-gb | --cache-gb | plan GB | peak RSS GB | peak/plan | cgroup limit GB | s/token | bytes/token GB | theory (no cache) GB | decode hit rate | disk O_DIRECT MB/s | bytes/bw s | efficiency | I/O wait share |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        f.write("| %g | %g | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f%% | %.0f | %.3f | %.2f | %.1f%% |\n" % (
            r["trunk_gb"], r["cache_gb"], r["plan_gb"], r["peak_rss_gb"], r["peak_over_plan"], r["cgroup_limit_gb"], r["s_per_token"],
            r["bytes_per_token"] / 1e9, r["theoretical_bytes_per_token_no_cache"] / 1e9, 100 * r["decode_hit_rate"], r["disk_odirect_mb_s"],
            r["io_bound_s_per_token"], r["streaming_efficiency"], 100 * r["io_share"]))
print(open(a.out).read())
