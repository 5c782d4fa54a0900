#!/bin/sh
# Plain vs coded trunk (k3 pack vs k3 pack --compress) with one binary, in the same run:
# the runs alternate plain, coded, plain, ... (each under flock /var/tmp/bench.lock), and
# each run's own figures (--out JSON) are kept: s/token, prefill, trunk bytes read per
# decode step; the logits of both sides must be identical (--dump-logits, sha256).
#   sh tools/bench_coded.sh BIN MODEL PLAIN_TRUNK CODED_TRUNK OUT.jsonl [REPS] ["CFG;CFG"]
# Prints per config the medians and coded/plain ratios. The page cache is not dropped
# (the host caches the disk anyway): say so when quoting streamed figures. "warm" is the
# median decode step that read no expert (the expert cache already held all it routed to):
# with the trunk pinned, such a step reads only RAM. A long prompt (IDS) warms the cache.
# OLD_BIN and OLD_TRUNK (both set): a third side "old", the previous commit's binary on its
# own coded trunk, run after each coded run (an A/B of a codec change in the same run).
set -eu
BIN=$1; M=$2; P=$3; C=$4; OUT=$5; REPS=${6:-3}
CONFIGS=${7:-"--trunk-gb 16 --threads 2;--trunk-gb 0 --cache-gb 0.5 --threads 2"}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; GEN=${GEN:-6}
WORK=${WORK:-/var/tmp/coded/bench}; mkdir -p "$WORK"; : > "$OUT"
echo "$CONFIGS" | tr ';' '\n' | while read -r cfg; do
  [ -n "$cfg" ] || continue
  for r in $(seq 1 "$REPS"); do
    sides="plain coded"; [ -n "${OLD_BIN:-}" ] && [ -n "${OLD_TRUNK:-}" ] && sides="$sides old"
    for side in $sides; do
      tr=$P; b=$BIN; [ $side = coded ] && tr=$C
      [ $side = old ] && { tr=$OLD_TRUNK; b=$OLD_BIN; }
      # shellcheck disable=SC2086
      flock /var/tmp/bench.lock "$b" "$M" --ids "$IDS" --gen "$GEN" --trunk "$tr" $cfg --quiet \
        --out "$WORK/run.json" --dump-logits "$WORK/l.f32" > /dev/null
      python3 - "$WORK/run.json" "$side" "$cfg" "$r" "$(sha256sum < "$WORK/l.f32" | cut -c1-16)" \
        >> "$OUT" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
dec = [s for s in d["steps"] if s["tokens"] == 1]
warm = sorted(s["seconds"] for s in dec if s["expert_reads"] == 0)
print(json.dumps({"side": sys.argv[2], "config": sys.argv[3], "rep": int(sys.argv[4]),
                  "seconds_prefill": d["seconds_prefill"],
                  "seconds_per_token": d["seconds_per_token"],
                  "seconds_per_token_warm": warm[len(warm) // 2] if warm else None,
                  "warm_steps": len(warm),
                  "trunk_bytes_per_token": sum(s["trunk_bytes"] for s in dec) / max(1, len(dec)),
                  "expert_bytes_per_token": sum(s["expert_bytes"] for s in dec) / max(1, len(dec)),
                  "trunk_pinned_bytes": d["trunk_pinned_bytes"], "plan_bytes": d["plan_bytes"],
                  "trunk_read_mb_per_s": d["trunk_read_mb_per_s"],
                  "peak_rss_bytes": d["peak_rss_bytes"], "kernels": d["kernels"],
                  "logits_sha": sys.argv[5], "generated_ids": d["generated_ids"]}))
PY
    done
  done
done
python3 - "$OUT" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for cfg in dict.fromkeys(r["config"] for r in rows):
    g = {s: [r for r in rows if r["config"] == cfg and r["side"] == s] for s in ("plain", "coded")}
    med = {s: {k: st.median(r[k] for r in g[s]) for k in
               ("seconds_per_token", "seconds_prefill", "trunk_bytes_per_token")} for s in g}
    old = [r for r in rows if r["config"] == cfg and r["side"] == "old"]
    same = len({r["logits_sha"] for r in g["plain"] + g["coded"] + old}) == 1
    sp, sc = med["plain"]["seconds_per_token"], med["coded"]["seconds_per_token"]
    print(f"{cfg}: s/token plain {sp:.3f} coded {sc:.3f} (x{sc / sp:.3f}); "
          f"trunk GB read/token plain {med['plain']['trunk_bytes_per_token'] / 1e9:.3f} coded "
          f"{med['coded']['trunk_bytes_per_token'] / 1e9:.3f}; prefill s plain "
          f"{med['plain']['seconds_prefill']:.2f} coded {med['coded']['seconds_prefill']:.2f}; "
          f"logits {'identical' if same else 'DIFFER'}")
    w = {s: [r["seconds_per_token_warm"] for r in g[s] if r.get("seconds_per_token_warm")]
         for s in g}
    if w["plain"] and w["coded"]:
        a, b = st.median(w["plain"]), st.median(w["coded"])
        print(f"  warm decode steps (no expert read): s/token plain {a:.3f} coded {b:.3f} "
              f"(x{b / a:.3f}); paired x" + " ".join(f"{c / p:.3f}" for p, c in
                                                zip(w["plain"], w["coded"])))
    if old:
        so = st.median(r["seconds_per_token"] for r in old)
        wo = [r["seconds_per_token_warm"] for r in old if r.get("seconds_per_token_warm")]
        print(f"  old (OLD_BIN on OLD_TRUNK): s/token {so:.3f} (x{so / sp:.3f} of plain); "
              f"coded / old x{sc / so:.3f}" + (f"; warm {st.median(wo):.3f}, coded / old x"
              f"{st.median(w['coded']) / st.median(wo):.3f}" if wo and w["coded"] else ""))
PY
