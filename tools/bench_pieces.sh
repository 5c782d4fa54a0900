#!/bin/sh
# The trunk-in-pieces measurements on a model with a packed trunk (docs/PERFORMANCE.md,
# "Streaming in pieces"), interleaved rep by rep so old and new share the machine's
# state: the smallest budget (--preset minimum), decode at --trunk-gb 3 --cache-gb 0.5
# with the new binary and an old one, a 256-token prompt at that budget with the new
# binary (the plan's chunk, and --prefill-chunk 64 as before the plan sized it) and the
# old one; then the disk at queue depth 1/4/16/32 with the stream's pattern. Every run
# under flock /var/tmp/bench.lock, the page cache dropped first (on this VM the host still
# caches the disk). One JSON object per run to OUT (JSON lines): the --out report plus
# label, args, user_s/sys_s (CPU seconds of the process: less noisy than the wall on a
# shared machine).
#   sh tools/bench_pieces.sh NEW_BIN OLD_BIN MODEL_DIR TRUNK_DIR OUT [REPS]
set -eu
NEW=$1; OLD=$2; M=$3; TR=$4; OUT=$5; REPS=${6:-3}
IDS=16000,5,17,300,42,7,900,12
LONG=$(seq 1 256 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 16000 + 1) }')
J=$(mktemp); TM=$(mktemp); trap 'rm -f "$J" "$TM"' EXIT
: > "$OUT"
run() {   # LABEL BIN ARGS...: one cold run, its --out JSON as one line with the label
  label=$1; bin=$2; shift 2
  flock /var/tmp/bench.lock sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    exec /usr/bin/time -f "%U %S" -o "$0" "$@"' "$TM" "$bin" "$M" --trunk "$TR" "$@" --quiet \
    --out "$J" > /dev/null
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); d.pop("steps", None)
u, s = open(sys.argv[4]).read().split()[-2:]
d.update(label=sys.argv[2], args=sys.argv[3], user_s=float(u), sys_s=float(s))
print(json.dumps(d))' "$J" "$label" "$*" "$TM" >> "$OUT"
}
B="--trunk-gb 3 --cache-gb 0.5"
for r in $(seq 1 "$REPS"); do
  run minimum "$NEW" --preset minimum --ids "$IDS" --gen 4
  run decode-new "$NEW" $B --ids "$IDS" --gen 4
  run decode-old "$OLD" $B --ids "$IDS" --gen 4
  run prompt256-new "$NEW" $B --ids "$LONG" --gen 0
  run prompt256-new-chunk64 "$NEW" $B --ids "$LONG" --gen 0 --prefill-chunk 64
  run prompt256-old "$OLD" $B --ids "$LONG" --gen 0
done
flock /var/tmp/bench.lock python3 "$(dirname "$0")/bench_disk_qd.py" "$TR" --max-gb 4 \
  | sed 's/^{/{"label": "disk", /' >> "$OUT"
