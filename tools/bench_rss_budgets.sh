#!/bin/sh
# Peak RSS against the printed plan at a mid budget and with the trunk resident (all
# pinned), on a model with a packed trunk: one cold run each (page cache dropped, under
# flock /var/tmp/bench.lock), 8-token prompt and a 256-token one at the resident budget.
# One JSON line per run (the --out report + label, args) to OUT.
#   sh tools/bench_rss_budgets.sh BIN MODEL_DIR TRUNK_DIR OUT
set -eu
BIN=$1; M=$2; TR=$3; OUT=$4
IDS=16000,5,17,300,42,7,900,12
LONG=$(seq 1 256 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 16000 + 1) }')
J=$(mktemp); trap 'rm -f "$J"' EXIT
: > "$OUT"
run() {   # IDS ARGS...
  ids=$1; shift
  flock /var/tmp/bench.lock sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    exec "$@"' sh "$BIN" "$M" --trunk "$TR" "$@" --ids "$ids" --gen 2 --quiet --out "$J" \
    > /dev/null
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d.pop("steps", None)
d.update(label="budget", args=sys.argv[2]); print(json.dumps(d))' "$J" "$*" >> "$OUT"
}
run "$IDS" --trunk-gb 5 --cache-gb 1
run "$IDS" --trunk-gb 8.5 --cache-gb 1
run "$LONG" --trunk-gb 8.5 --cache-gb 1
