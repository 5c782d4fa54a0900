#!/bin/sh
# The trunk-in-pieces measurements on a model with a packed trunk (docs/PERFORMANCE.md,
# "Streaming in pieces"): the smallest budget (--preset minimum) REPS times, a 256-token
# prompt at --trunk-gb 3 --cache-gb 0.5 with the new binary and an old one (its default
# chunk), and the disk at queue depth 1/4/16/32 with the stream's pattern. Every run
# under flock /var/tmp/bench.lock, the page cache dropped first (on this VM the host
# still caches the disk). Writes one JSON object per run to OUT (JSON lines).
#   sh tools/bench_pieces.sh NEW_BIN OLD_BIN MODEL_DIR TRUNK_DIR OUT [REPS]
set -eu
NEW=$1; OLD=$2; M=$3; TR=$4; OUT=$5; REPS=${6:-3}
IDS=16000,5,17,300,42,7,900,12
LONG=$(seq 1 256 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 16000 + 1) }')
J=$(mktemp); trap 'rm -f "$J"' EXIT
: > "$OUT"
run() {   # LABEL BIN ARGS...: one cold run, its --out JSON as one line with the label
  label=$1; bin=$2; shift 2
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  flock /var/tmp/bench.lock "$bin" "$M" --trunk "$TR" "$@" --quiet --out "$J" > /dev/null
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("steps",None); d["label"]=sys.argv[2]; d["args"]=sys.argv[3]; print(json.dumps(d))' "$J" "$label" "$*" >> "$OUT"
}
for r in $(seq 1 "$REPS"); do
  run minimum "$NEW" --preset minimum --ids "$IDS" --gen 4
done
run prompt256-new "$NEW" --trunk-gb 3 --cache-gb 0.5 --ids "$LONG" --gen 1
run prompt256-old "$OLD" --trunk-gb 3 --cache-gb 0.5 --ids "$LONG" --gen 1
flock /var/tmp/bench.lock python3 "$(dirname "$0")/bench_disk_qd.py" "$TR" --max-gb 4 \
  | sed 's/^{/{"label": "disk", /' >> "$OUT"
