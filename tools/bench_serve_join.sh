#!/bin/sh
# A prompt that arrives while another request decodes, through k3 serve, old binary
# against new in the same run (the new one feeds the prompt beside the decode steps, the
# old one prefilled it alone while the other request waited). Per run, one fresh server
# (under flock /var/tmp/bench.lock): client A streams G greedy tokens; once A has its
# third token, client B sends a long prompt (P words) for 4 tokens. Both timed chunk by
# chunk by tools/serve_client.py. One JSON line per run to stdout: bin, rep, A's largest
# gap between tokens (its stall while B's prompt goes in) and total, B's time to first
# token and total, and the server's steps / mixed steps from /metrics. The replies are
# fixed text (the K3_SERVE_TEST_REPLY hook: fw6's random ids have no text in the tiny
# tokenizer, so nothing would stream to time); every id still goes through the forward.
#   sh tools/bench_serve_join.sh OLD_BIN NEW_BIN [MODEL_DIR] [REPS] [G] [P]
set -eu
OLD=$1; NEW=$2; M=${3:-/var/tmp/k3mem/fw6}; R=${4:-3}; G=${5:-16}; P=${6:-120}
TK=${TK:-tests/tok/tiny}; MEM=${FWMEM---trunk-gb 8 --cache-gb 2 --ctx 512}
D=$(dirname "$0"); T=$(mktemp -d); pid=
trap '[ -z "$pid" ] || kill $pid 2>/dev/null; rm -rf "$T"' EXIT
printf '{"prompt": "The capital of France is", "max_tokens": %d, "temperature": 0, ' $G > "$T/a"
printf '"stream": true}' >> "$T/a"
LONGP=$(seq 1 "$P" | awk '{ printf("%sword%d", NR > 1 ? " " : "", $1 * 37 % 101) }')
printf '{"prompt": "%s", "max_tokens": 4, "temperature": 0, "stream": true, ' "$LONGP" > "$T/b"
printf '"stream_options": {"include_usage": true}}' >> "$T/b"
K3_SERVE_TEST_REPLY="$(seq 1 64 | tr '\n' ' ')"; export K3_SERVE_TEST_REPLY
. "$D/lib/serve_start.sh"
one() {   # BIN LABEL REP: one server, the two clients (inside the lock)
  # shellcheck disable=SC2086
  serve_start "$1" "$M" "$T/err" $MEM
  rm -f "$T/prog"
  PROGRESS="$T/prog" python3 "$D/serve_client.py" "$U/v1/completions" "$T/a" > "$T/ra" &
  wa=$!
  python3 "$D/serve_client.py" "$U/v1/completions" "$T/b" --after "$T/prog" 3 > "$T/rb"
  wait $wa
  curl -s "$U/metrics" > "$T/m"
  kill $pid; wait $pid 2>/dev/null || true; pid=
  python3 -c '
import json, re, sys
a, b = (json.loads(open(f).read()) for f in sys.argv[1:3])
m = open(sys.argv[3]).read()
met = lambda k: float((re.findall(r"^k3_" + k + r" (\S+)", m, re.M) or ["nan"])[0])
print(json.dumps({"bin": sys.argv[4], "rep": int(sys.argv[5]), "a_gap_max": a["gap_max"],
                  "a_gap_median": a["gap_median"], "a_total": a["t_total"],
                  "b_prompt_tokens": (b["usage"] or {}).get("prompt_tokens"),
                  "b_ttft": b["t_first"], "b_total": b["t_total"],
                  "steps": met("batch_steps_total"), "mixed_steps": met("batch_mixed_steps_total"),
                  "prefill_s": met("prefill_seconds_total"),
                  "decode_s": met("decode_seconds_total")}))' "$T/ra" "$T/rb" "$T/m" "$2" "$3"
}
for r in $(seq 1 "$R"); do
  for side in old new; do
    b=$OLD; [ $side = new ] && b=$NEW
    exec 9>/var/tmp/bench.lock; flock 9; one "$b" $side "$r"; exec 9>&-   # under the lock
  done
done
