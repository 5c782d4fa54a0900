#!/bin/sh
# Speculative decoding on one model (the full-width slice), one prompt, in two regimes:
# the trunk streamed (--trunk-gb 3 --cache-gb 0.5) and the trunk resident (--trunk-gb 9
# --cache-gb 0.5), each run cold (drop_caches inside the lock; the host's cache remains).
# Per regime and rep, interleaved: --no-spec (plain), the default (speculation on, n-gram
# drafts of an ordinary prompt), the true continuation as --draft-ids, and a draft that
# always fails (those ids + 7). The ids of every run must equal --no-spec's (checked).
# KINDS (default "nospec default true wrong") picks the runs of a rep; their order is
# rotated by one each rep, so none always runs first after the cache drop.
# Each rep (its 8 runs, ~6 minutes on the slice) holds flock $LOCK (the machine is
# shared), so the runs of a rep are not spread over other people's benchmarks; raw --out
# reports go to $OUT.jsonl, medians and ratios to stdout.
#   sh tools/bench_spec.sh MODEL_DIR TRUNK_DIR [REPS] [GEN]
# K3 = the binary (default ./bin/k3); OUT default /var/tmp/spec/bench; REGIMES default
# "streamed resident".
set -eu
M=$1; TR=$2; REPS=${3:-5}; GEN=${4:-12}
K3=${K3:-./bin/k3}; LOCK=${LOCK:-/var/tmp/bench.lock}
OUT=${OUT:-/var/tmp/spec/bench}; mkdir -p "$(dirname "$OUT")"
REGIMES=${REGIMES:-streamed resident}
KINDS=${KINDS:-nospec default true wrong}   # which runs each rep makes (rotated per rep)
if [ -z "${BENCH_SPEC_W:-}" ]; then  # the outer call: one locked inner call per rep
  : > "$OUT.jsonl"
  BENCH_SPEC_W=$(mktemp -d); export BENCH_SPEC_W; trap 'rm -rf "$BENCH_SPEC_W"' EXIT
  for r in $(seq 0 "$REPS"); do       # rep 0: the true continuations, not timed
    BENCH_SPEC_REP=$r flock "$LOCK" sh "$0" "$@"
  done
  BENCH_SPEC_REP=summary sh "$0" "$@"
  exit 0
fi
W=$BENCH_SPEC_W
P=16000,108,239,370,501,632,763,894          # an ordinary prompt (tools/bench_batch.sh's)
flags() { case $1 in streamed) echo "--trunk-gb 3 --cache-gb 0.5";;
                     resident) echo "--trunk-gb 9 --cache-gb 0.5";; esac; }
run() {   # REGIME extra flags...: one cold run; ids to $W/ids, report to $W/r.json
  reg=$1; shift
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  # shellcheck disable=SC2046
  timeout 590 "$K3" "$M" --ids "$P" --gen "$GEN" --trunk "$TR" $(flags "$reg") --quiet \
    --out "$W/r.json" "$@" > "$W/ids"
}
add() {   # REGIME KIND REP: one report line
  python3 - "$@" "$W/r.json" >> "$OUT.jsonl" <<'PY'
import json, sys
reg, kind, rep, path = sys.argv[1:5]
d = json.load(open(path))
keep = {k: d.get(k) for k in ("n_generated", "seconds_prefill", "seconds_per_token",
        "spec_drafted", "spec_accepted", "spec_passes", "trunk_bytes_read",
        "expert_bytes_read", "peak_rss_bytes")}
print(json.dumps(dict(regime=reg, kind=kind, rep=int(rep), **keep)))
PY
}
r=$BENCH_SPEC_REP
if [ "$r" = 0 ]; then
  for reg in $REGIMES; do run "$reg" --no-spec; cp "$W/ids" "$W/true.$reg"; done
  exit 0
fi
if [ "$r" != summary ]; then
  for reg in $REGIMES; do
    TRUE=$(cat "$W/true.$reg")
    WRONG=$(echo "$TRUE" | awk -F, '{ for (i = 1; i <= NF; i++)
                                      printf "%s%d", (i > 1 ? "," : ""), ($i + 7) % 16000 }')
    # the kinds rotated by one each rep, so no kind always runs first after the drop
    ks=$(echo $KINDS | awk -v r="$r" '{ for (i = 0; i < NF; i++)
                                         printf "%s ", $((i + r - 1) % NF + 1) }')
    for kind in $ks; do
      case $kind in nospec) x=--no-spec;; default) x=;; true) x="--draft-ids $TRUE";;
                    wrong) x="--draft-ids $WRONG";; esac
      # shellcheck disable=SC2086
      run "$reg" $x
      cmp -s "$W/ids" "$W/true.$reg" || { echo "bench_spec: $reg $kind ids differ"; exit 1; }
      add "$reg" "$kind" "$r"
    done
  done
  exit 0
fi
python3 - "$OUT.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for reg in dict.fromkeys(r["regime"] for r in rows):
    sel = lambda k: [r for r in rows if r["regime"] == reg and r["kind"] == k]
    base = statistics.median(r["seconds_per_token"] for r in sel("nospec"))
    for k in ("nospec", "default", "true", "wrong"):
        rs = sel(k)
        if not rs: continue                       # not in $KINDS
        t = statistics.median(r["seconds_per_token"] for r in rs)
        per = [a["seconds_per_token"] / b["seconds_per_token"]
               for a, b in zip(rs, sel("nospec"))]
        print(f"{reg} {k}: {t:.3f} s/token ({t / base:.3f}x --no-spec; per rep "
              + ", ".join(f"{x:.2f}" for x in per) + f"); drafted {rs[0]['spec_drafted']}, "
              f"accepted {rs[0]['spec_accepted']}, passes {rs[0]['spec_passes']}; "
              f"expert GB {statistics.median(r['expert_bytes_read'] for r in rs) / 1e9:.1f}, "
              f"trunk GB {statistics.median(r['trunk_bytes_read'] for r in rs) / 1e9:.1f}; "
              f"{len(rs)} runs")
PY
