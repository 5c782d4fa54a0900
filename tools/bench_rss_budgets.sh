#!/bin/sh
# Peak RSS against the printed plan at a mid budget and with the trunk resident (all
# pinned), on a model with a packed trunk: REPS cold runs each, interleaved rep by rep
# (page cache dropped, under flock /var/tmp/bench.lock), 8-token prompt and a 256-token
# one at the resident budget. One JSON line per run (the --out report + label, args,
# plan_printed_bytes: the plan's "total" line on stderr) to OUT.
#   sh tools/bench_rss_budgets.sh BIN MODEL_DIR TRUNK_DIR OUT [REPS]
set -eu
BIN=$1; M=$2; TR=$3; OUT=$4; REPS=${5:-1}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; V=${VOCAB:-16000}
LONG=$(seq 1 256 | awk -v v="$V" '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % v + 1) }')
J=$(mktemp); E=$(mktemp); trap 'rm -f "$J" "$E"' EXIT
: > "$OUT"
run() {   # LABEL IDS ARGS...
  label=$1; ids=$2; shift 2
  flock /var/tmp/bench.lock sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    exec "$@"' sh "$BIN" "$M" --trunk "$TR" "$@" --ids "$ids" --gen 2 --out "$J" \
    > /dev/null 2> "$E"
  python3 -c 'import json, re, sys; d = json.load(open(sys.argv[1])); d.pop("steps", None)
p = re.findall(r"^  total +([0-9.]+)", open(sys.argv[4]).read(), re.M)
d.update(label=sys.argv[2], args=sys.argv[3], plan_printed_bytes=float(p[0]) * 1e9 if p else None)
print(json.dumps(d))' "$J" "$label" "$*" "$E" >> "$OUT"
}
for r in $(seq 1 "$REPS"); do
  run budget-5/1 "$IDS" --trunk-gb 5 --cache-gb 1
  run budget-8.5/1 "$IDS" --trunk-gb 8.5 --cache-gb 1
  run budget-8.5/1-256 "$LONG" --trunk-gb 8.5 --cache-gb 1
done
