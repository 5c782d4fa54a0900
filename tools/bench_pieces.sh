#!/bin/sh
# The trunk-in-pieces measurements on a model with a packed trunk (docs/PERFORMANCE.md,
# "Streaming in pieces"), interleaved rep by rep so old and new share the machine's
# state: the smallest budget (--preset minimum), decode at --trunk-gb 3 --cache-gb 0.5
# with the new binary and an old one, decode at --trunk-gb 2.8 --cache-gb 0.5 (new), a
# 256-token prompt at 3/0.5 with the new binary (the plan's chunk; with CHUNK64=1 also
# --prefill-chunk 64, as before the plan sized it) and the old one; then, each rep, the
# disk at queue depth 1/4/16/32 with the stream's pattern. Every run is cold_run's
# (tools/lib/cold_run.sh: under the lock, page cache dropped, one JSON line per run to
# OUT). OLD_TRUNK (default TRUNK_DIR) is the old binary's trunk.
#   sh tools/bench_pieces.sh NEW_BIN OLD_BIN MODEL_DIR TRUNK_DIR OUT [REPS]
set -eu
NEW=$1; OLD=$2; M=$3; TR=$4; OUT=$5; REPS=${6:-3}; OTR=${OLD_TRUNK:-$TR}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; V=${VOCAB:-16000}
LONG=$(seq 1 256 | awk -v v="$V" '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % v + 1) }')
: > "$OUT"
. "$(dirname "$0")/lib/cold_run.sh"
B="--trunk-gb 3 --cache-gb 0.5"
for r in $(seq 1 "$REPS"); do
  cold_run minimum "$NEW" "$TR" --preset minimum --ids "$IDS" --gen 4
  cold_run decode-new "$NEW" "$TR" $B --ids "$IDS" --gen 4
  cold_run decode-old "$OLD" "$OTR" $B --ids "$IDS" --gen 4
  cold_run decode-new-2.8 "$NEW" "$TR" --trunk-gb 2.8 --cache-gb 0.5 --ids "$IDS" --gen 4
  cold_run prompt256-new "$NEW" "$TR" $B --ids "$LONG" --gen 0
  [ "${CHUNK64:-0}" = 1 ] && cold_run prompt256-new-chunk64 "$NEW" "$TR" $B --ids "$LONG" --gen 0 \
    --prefill-chunk 64
  cold_run prompt256-old "$OLD" "$OTR" $B --ids "$LONG" --gen 0
  flock /var/tmp/bench.lock python3 "$(dirname "$0")/bench_disk_qd.py" "$TR" --max-gb 4 \
    | sed "s/^{/{\"label\": \"disk\", \"rep\": $r, /" >> "$OUT"
done
