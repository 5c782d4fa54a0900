#!/bin/sh
# The trunk-in-pieces measurements on a model with a packed trunk (docs/PERFORMANCE.md,
# "Streaming in pieces"), interleaved rep by rep so old and new share the machine's
# state: the smallest budget (--preset minimum), decode at --trunk-gb 3 --cache-gb 0.5
# with the new binary and an old one, decode at --trunk-gb 2.8 --cache-gb 0.5 (new), a
# 256-token prompt at 3/0.5 with the new binary (the plan's chunk; with CHUNK64=1 also
# --prefill-chunk 64, as before the plan sized it) and the old one; then, each rep, the
# disk at queue depth 1/4/16/32 with the stream's pattern. Every run under flock
# /var/tmp/bench.lock, the page cache dropped first (on this VM the host still caches the
# disk). One JSON object per run to OUT (JSON lines): the --out report plus label, args,
# user_s/sys_s (CPU seconds of the process: less noisy than the wall on a shared
# machine) and plan_printed_bytes (the plan's "total" line on stderr: the old binary's
# --out has no plan_bytes). OLD_TRUNK (default TRUNK_DIR) is the old binary's trunk.
#   sh tools/bench_pieces.sh NEW_BIN OLD_BIN MODEL_DIR TRUNK_DIR OUT [REPS]
set -eu
NEW=$1; OLD=$2; M=$3; TR=$4; OUT=$5; REPS=${6:-3}; OTR=${OLD_TRUNK:-$TR}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; V=${VOCAB:-16000}
LONG=$(seq 1 256 | awk -v v="$V" '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % v + 1) }')
J=$(mktemp); TM=$(mktemp); E=$(mktemp); trap 'rm -f "$J" "$TM" "$E"' EXIT
: > "$OUT"
run() {   # LABEL BIN TRUNK ARGS...: one cold run, its --out JSON as one line with the label
  label=$1; bin=$2; tr=$3; shift 3
  flock /var/tmp/bench.lock sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    exec /usr/bin/time -f "%U %S" -o "$0" "$@"' "$TM" "$bin" "$M" --trunk "$tr" "$@" \
    --out "$J" > /dev/null 2> "$E"
  python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1])); d.pop("steps", None)
u, s = open(sys.argv[4]).read().split()[-2:]
p = re.findall(r"^  total +([0-9.]+)", open(sys.argv[5]).read(), re.M)
d.update(label=sys.argv[2], args=sys.argv[3], user_s=float(u), sys_s=float(s),
         plan_printed_bytes=float(p[0]) * 1e9 if p else None)
print(json.dumps(d))' "$J" "$label" "$*" "$TM" "$E" >> "$OUT"
}
B="--trunk-gb 3 --cache-gb 0.5"
for r in $(seq 1 "$REPS"); do
  run minimum "$NEW" "$TR" --preset minimum --ids "$IDS" --gen 4
  run decode-new "$NEW" "$TR" $B --ids "$IDS" --gen 4
  run decode-old "$OLD" "$OTR" $B --ids "$IDS" --gen 4
  run decode-new-2.8 "$NEW" "$TR" --trunk-gb 2.8 --cache-gb 0.5 --ids "$IDS" --gen 4
  run prompt256-new "$NEW" "$TR" $B --ids "$LONG" --gen 0
  [ "${CHUNK64:-0}" = 1 ] && run prompt256-new-chunk64 "$NEW" "$TR" $B --ids "$LONG" --gen 0 \
    --prefill-chunk 64
  run prompt256-old "$OLD" "$OTR" $B --ids "$LONG" --gen 0
  flock /var/tmp/bench.lock python3 "$(dirname "$0")/bench_disk_qd.py" "$TR" --max-gb 4 \
    | sed "s/^{/{\"label\": \"disk\", \"rep\": $r, /" >> "$OUT"
done
