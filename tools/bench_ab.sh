#!/bin/sh
# A/B of two k3 binaries on one model in the same run: the runs alternate A B A B ... so
# both see the same machine, and each run's own figures (--out JSON: seconds_prefill,
# seconds_per_token) are collected; prints the medians and the B/A ratio per config.
#   sh tools/bench_ab.sh BIN_A BIN_B MODEL_DIR "CONFIG;CONFIG..." [REPS] [IDS] [GEN]
# A CONFIG is the extra flags of one row, e.g. "--threads 2" or
# "--trunk @T --trunk-gb 0 --cache-gb 0": @T is replaced by the trunk packed by that
# binary (packed on first use into $WORK/trunk-a and $WORK/trunk-b), so two binaries
# with different trunk identities can be compared. Output: one line per config and
# the raw runs in $WORK/ab.jsonl.
set -eu
A=$1; B=$2; M=$3; CONFIGS=$4; REPS=${5:-3}; IDS=${6:-16000,5,17,300,42,7,900,12}; GEN=${7:-6}
WORK=${WORK:-/var/tmp/k3ab}; mkdir -p "$WORK"; : > "$WORK/ab.jsonl"
trunk() {   # BIN TAG: the trunk this binary packed
  [ -f "$WORK/trunk-$2/trunk.k3" ] || "$1" pack "$M" "$WORK/trunk-$2" --quiet
  echo "$WORK/trunk-$2"
}
echo "$CONFIGS" | tr ';' '\n' | while read -r cfg; do
  [ -n "$cfg" ] || continue
  for r in $(seq 1 "$REPS"); do
    for side in a b; do
      bin=$A; [ $side = b ] && bin=$B
      flags=$cfg
      case "$cfg" in *@T*) t=$(trunk "$bin" $side); flags=$(echo "$cfg" | sed "s#@T#$t#");; esac
      sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
      # shellcheck disable=SC2086
      "$bin" "$M" --ids "$IDS" --gen "$GEN" $flags --quiet --out "$WORK/run.json" > /dev/null
      python3 - "$WORK/run.json" "$side" "$cfg" "$r" >> "$WORK/ab.jsonl" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({"side": sys.argv[2], "config": sys.argv[3], "rep": int(sys.argv[4]),
                  "seconds_prefill": d["seconds_prefill"],
                  "seconds_per_token": d["seconds_per_token"],
                  "peak_rss_bytes": d["peak_rss_bytes"], "generated_ids": d["generated_ids"]}))
PY
    done
  done
done
python3 - "$WORK/ab.jsonl" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for cfg in dict.fromkeys(r["config"] for r in rows):
    a = [r for r in rows if r["config"] == cfg and r["side"] == "a"]
    b = [r for r in rows if r["config"] == cfg and r["side"] == "b"]
    same = all(x["generated_ids"] == a[0]["generated_ids"] for x in a + b)
    def med(v, k): return st.median(x[k] for x in v)
    pa, pb = med(a, "seconds_prefill"), med(b, "seconds_prefill")
    da, db = med(a, "seconds_per_token"), med(b, "seconds_per_token")
    print(f"{cfg or '(defaults)'}: prefill A {pa:.3f} s B {pb:.3f} s (B/A {pb / pa:.3f}); "
          f"decode A {da:.3f} s/token B {db:.3f} s/token (B/A {db / da:.3f}); "
          f"peak RSS A {med(a, 'peak_rss_bytes') / 2**20:.0f} B {med(b, 'peak_rss_bytes') / 2**20:.0f} MiB; "
          f"ids {'identical' if same else 'DIFFER'}; {len(a)}+{len(b)} runs")
PY
