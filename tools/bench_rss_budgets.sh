#!/bin/sh
# Peak RSS against the printed plan at a mid budget and with the trunk resident (all
# pinned), on a model with a packed trunk: REPS cold runs each, interleaved rep by rep
# (tools/lib/cold_run.sh: page cache dropped, under the lock, one JSON line per run to
# OUT), 8-token prompt and a 256-token one at the resident budget.
#   sh tools/bench_rss_budgets.sh BIN MODEL_DIR TRUNK_DIR OUT [REPS]
set -eu
BIN=$1; M=$2; TR=$3; OUT=$4; REPS=${5:-1}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; V=${VOCAB:-16000}
LONG=$(seq 1 256 | awk -v v="$V" '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % v + 1) }')
: > "$OUT"
. "$(dirname "$0")/lib/cold_run.sh"
run() { _ids=$2; _l=$1; shift 2; cold_run "$_l" "$BIN" "$TR" "$@" --ids "$_ids" --gen 2; }
for r in $(seq 1 "$REPS"); do
  run budget-5/1 "$IDS" --trunk-gb 5 --cache-gb 1
  run budget-8.5/1 "$IDS" --trunk-gb 8.5 --cache-gb 1
  run budget-8.5/1-256 "$LONG" --trunk-gb 8.5 --cache-gb 1
done
