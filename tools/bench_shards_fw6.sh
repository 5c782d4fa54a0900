#!/bin/sh
# The trunk streamed from the shards (no --trunk) against a plain pack (issue 38), on the
# full-width slice: paired runs A (shards) B (pack), REPS of each, alternating, every run
# under flock /var/tmp/bench.lock; the ids, s/token over the decoded tokens, prefill, peak
# RSS and plan of each run, then the medians and the median of the pairs' ratios A/B.
#   sh tools/bench_shards_fw6.sh [OUT.txt]     (K3, MODEL, TRUNK, REPS, FLAGS to override)
set -u
K3=${K3:-./bin/k3}; MODEL=${MODEL:-/var/tmp/k3mem/fw6}; TRUNK=${TRUNK:-/var/tmp/fw6t/plain}
REPS=${REPS:-3}; FLAGS=${FLAGS:---trunk-gb 3 --cache-gb 0.5}
OUT=${1:-docs/data/shards_fw6.txt}
IDS=16000,5,17,300,42,7,900,12
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
j() { sed -n "s/^  \"$2\": \([0-9.]*\).*/\1/p" "$1"; }
one() {  # one NAME REP [--trunk DIR]: a run, its figures appended to $T/runs
  name=$1; rep=$2; shift 2
  # shellcheck disable=SC2086
  flock /var/tmp/bench.lock "$K3" "$MODEL" --ids $IDS --gen 4 $FLAGS "$@" --out $T/r.json \
    >$T/ids 2>$T/err || { echo "run $name $rep failed: $(tail -3 $T/err)" >&2; exit 1; }
  echo "$name $rep ids $(cat $T/ids) s_token $(j $T/r.json seconds_per_token)" \
    "prefill_s $(j $T/r.json seconds_prefill) peak_rss $(j $T/r.json peak_rss_bytes)" \
    "plan $(j $T/r.json plan_bytes) trunk_bytes_per_token $(j $T/r.json trunk_bytes_per_token)" \
    >> $T/runs
  grep '^k3: trunk ' $T/err | head -1 >> $T/desc
}
for r in $(seq 1 "$REPS"); do
  one shards "$r"
  one pack "$r" --trunk "$TRUNK"
done
{
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
  echo "# $(date -u +%Y-%m-%d) $cpu," \
    "$(nproc) vCPUs; k3 $(git rev-parse --short HEAD 2>/dev/null); $MODEL $FLAGS, --ids $IDS" \
    "--gen 4 (s/token over the 3 decoded tokens); A = the shards (no --trunk), B = --trunk" \
    "$TRUNK; runs A B alternating, each under flock /var/tmp/bench.lock"
  sort -u $T/desc | sed 's/^/# /'
  cat $T/runs
  awk '{ for (i = 3; i < NF; i += 2) v[$1, $i, $2] = $(i + 1); n[$1]++ }
    function med(a, m,   i, j, t) {             # insertion sort of a[1..m] (mawk)
      for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
      R = n["shards"]
      split("s_token prefill_s peak_rss plan", ks, " ")
      for (q = 1; q <= 4; q++) {
        k = ks[q]; delete a; delete b; delete r
        for (i = 1; i <= R; i++) { a[i] = v["shards", k, i]; b[i] = v["pack", k, i];
                                   r[i] = a[i] / b[i] }
        printf "median %-9s shards %.4g  pack %.4g  ratio of pairs %.3f\n", k, med(a, R),
          med(b, R), med(r, R)
      }
    }' $T/runs
} > "$OUT"
cat "$OUT"
