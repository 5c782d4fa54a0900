#!/usr/bin/python3
"""Sums up tools/bench_mpi.sh's JSONL: per label the median s/token (and prefill), its ratio
to one-2t's, the decode's collectives and wait a token per rank; for the streamed pair each
rank's peak RSS and bytes read a token against the single process's, and whether the ids
agree.   Usage: tools/bench_mpi_summary.py OUT.jsonl"""
import json
import statistics
import sys

runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by = {}
for r in runs:
    by.setdefault(r["label"], []).append(r)


def med(label, key):
    return statistics.median(r["report"][key] for r in by[label])


def per_token(rep):
    """Trunk (streamed + pinned loads) and expert bytes over every token of the run."""
    n = rep["n_prompt"] + rep["n_generated"]
    return (rep["trunk_bytes_read"] + rep["trunk_pinned_bytes"] + rep["expert_bytes_read"]) / n


base = med("one-2t", "seconds_per_token") if "one-2t" in by else None
for label, rs in by.items():
    s = med(label, "seconds_per_token")
    line = "%-16s n=%d  s/token median %.3f (min %.3f max %.3f), prefill %.2f s" % (
        label, len(rs), s, min(r["report"]["seconds_per_token"] for r in rs),
        max(r["report"]["seconds_per_token"] for r in rs), med(label, "seconds_prefill"))
    if base and label.startswith("np"):
        line += ", %.2fx one-2t" % (s / base)
    print(line)
    for p in rs[-1]["report"].get("per_rank", []):
        print("    rank %d: decode %.0f collectives, %.0f KB, %.3f s waiting a token" % (
            p["rank"], p["decode_collectives_per_token"],
            p["decode_comm_bytes_per_token"] / 1e3, p["decode_comm_wait_s_per_token"]))
    ids = sorted({r["ids"] for r in rs})
    print("    ids %s" % " | ".join(ids))
if "stream-one" in by and "stream-np2" in by:
    one, two = by["stream-one"][-1], by["stream-np2"][-1]
    b1 = per_token(one["report"])
    print("stream: one process %.1f MB a token (trunk + experts), peak RSS %.3f GB" % (
        b1 / 1e6, one["report"]["peak_rss_bytes"] / 1e9))
    for p in two["report"]["per_rank"]:
        print("  rank %d: %.1f MB a token = %.3f of one process's, peak RSS %.3f GB" % (
            p["rank"], p["bytes_read_per_token"] / 1e6, p["bytes_read_per_token"] / b1,
            p["peak_rss_bytes"] / 1e9))
    print("  ids %s" % ("the same" if one["ids"] == two["ids"] else
                        "DIFFER: %s vs %s" % (one["ids"], two["ids"])))
