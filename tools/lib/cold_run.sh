# Sourced by the tools that time whole k3 runs cold (bench_pieces.sh, bench_rss_budgets.sh);
# not a tool itself. Needs M (the model) and OUT (a JSON-lines file) set by the caller.
#   cold_run LABEL BIN TRUNK ARGS...
# One run under flock /var/tmp/bench.lock with the page cache dropped first (on this VM
# the host still caches the disk), appending to OUT its --out report as one line (steps
# dropped) plus label, args, user_s/sys_s (CPU seconds of the process: less noisy than
# the wall on a shared machine) and plan_printed_bytes (the plan's "total" line on stderr:
# an old binary's --out may have no plan_bytes).
_CR_J=$(mktemp); _CR_T=$(mktemp); _CR_E=$(mktemp)
trap 'rm -f "$_CR_J" "$_CR_T" "$_CR_E"' EXIT
cold_run() {
  _label=$1; _bin=$2; _tr=$3; shift 3
  flock /var/tmp/bench.lock sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    exec /usr/bin/time -f "%U %S" -o "$0" "$@"' "$_CR_T" "$_bin" "$M" --trunk "$_tr" "$@" \
    --out "$_CR_J" > /dev/null 2> "$_CR_E"
  python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1])); d.pop("steps", None)
u, s = open(sys.argv[4]).read().split()[-2:]
p = re.findall(r"^  total +([0-9.]+)", open(sys.argv[5]).read(), re.M)
d.update(label=sys.argv[2], args=sys.argv[3], user_s=float(u), sys_s=float(s),
         plan_printed_bytes=float(p[0]) * 1e9 if p else None)
print(json.dumps(d))' "$_CR_J" "$_label" "$*" "$_CR_T" "$_CR_E" >> "$OUT"
}
