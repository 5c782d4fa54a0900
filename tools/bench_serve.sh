#!/bin/sh
# Requests per second through k3 serve on a tiny model, and the server's own share of the
# time: N chat requests (max_tokens G, greedy, thinking off, each a new conversation so
# nothing is resumed) over one keep-alive connection; the engine's prefill and decode
# seconds come from /metrics, the rest is HTTP, JSON, the queue and rendering.
# Usage: sh tools/bench_serve.sh [N] [G] > docs/data/serve_bench.txt
#
# sh tools/bench_serve.sh fw [MODEL_DIR] [RUNS] [G]: time to first token and tokens/s of
# one greedy completion through k3 serve (a fresh server per run: its first request, cold
# like a batch run; streamed, timed by curl: TTFT = the first byte of the stream, sent
# once the prompt is prefilled; decode = (G - 1) tokens over the rest) against the same
# prompt and budget in batch mode (its own prefill and s/token lines), on the full-width
# slice (default /var/tmp/k3mem/fw6), with and without kept states (--state-cache-gb 0).
# Each run (batch, cold, kept, two clients, in that order) holds /var/tmp/bench.lock once
# (one heavy run at a time); medians of RUNS.
# Each run also serves two concurrent clients (other prompts of the same length) from one
# server: their decode steps are shared; the aggregate tokens/s against one client's.
# sh tools/bench_serve.sh share FILE: from the run lines of that output, the server's own
# share of each run (curl's first byte - the engine's prefill; curl's time after it - the
# engine's decode seconds, both from /metrics).
K3=${K3:-./bin/k3}; M=${M:-tests/models/tiny5}; TK=${TK:-tests/tok/tiny}
FWMEM=${FWMEM:---trunk-gb 8 --cache-gb 2 --ctx 256}
FWPROMPT="The capital of France is a city that many people visit every year"
FWPROMPT2="The capital of Italy is a town that many people see every summer"
LOCK=${LOCK:-/var/tmp/bench.lock}
. "$(dirname "$0")/lib/serve_start.sh"
# serve_up MODEL_DIR [flags]: serve_start with $K3, killed at exit, its stderr in $T/err (T
# a new temporary folder)
serve_up() {
  m=$1; shift
  T=$(mktemp -d); trap 'kill $pid 2>/dev/null; rm -rf "$T"' EXIT
  serve_start "$K3" "$m" "$T/err" "$@"
}
if [ "$1" = fw-server ]; then        # one server run (inside the lock): prints 4 numbers
  FW=$2; G=$3; shift 3
  serve_up "$FW" $FWMEM "$@"
  printf '{"prompt": "%s", "max_tokens": %d, "temperature": 0, "stream": true, ' \
    "$FWPROMPT" $G > "$T/b"
  printf '"stream_options": {"include_usage": true}}' >> "$T/b"
  curl -s -N -o "$T/out" -w '%{time_starttransfer} %{time_total}\n' "$U/v1/completions" \
    -d @"$T/b" > "$T/w"
  curl -s "$U/metrics" > "$T/m"
  pt=$(sed -n 's/.*"prompt_tokens": \([0-9]*\).*/\1/p' "$T/out")
  ct=$(sed -n 's/.*"completion_tokens": \([0-9]*\).*/\1/p' "$T/out")
  pf=$(sed -n 's/^k3_prefill_seconds_total //p' "$T/m")
  dc=$(sed -n 's/^k3_decode_seconds_total //p' "$T/m")
  echo "$(cat "$T/w") $pt $ct $pf $dc"
  exit 0
fi
if [ "$1" = fw-two ]; then           # one server, two concurrent clients: 4 numbers each
  FW=$2; G=$3; shift 3
  serve_up "$FW" $FWMEM "$@"
  for c in 1 2; do
    if [ $c = 1 ]; then pr=$FWPROMPT; else pr=$FWPROMPT2; fi
    printf '{"prompt": "%s", "max_tokens": %d, "temperature": 0, "stream": true}' "$pr" $G \
      > "$T/b$c"
  done
  W=""
  for c in 1 2; do
    curl -s -N -o "$T/out$c" -w '%{time_starttransfer} %{time_total}\n' "$U/v1/completions" \
      -d @"$T/b$c" > "$T/w$c" & W="$W $!"
  done
  wait $W
  curl -s "$U/metrics" > "$T/m"
  occ=$(sed -n 's/^k3_batch_occupancy //p' "$T/m")
  echo "$(cat "$T/w1") $(cat "$T/w2") $occ"
  exit 0
fi
if [ "$1" = fw-run ]; then            # one interleaved run (inside the lock), into DIR
  FW=$2; G=$3; D=$4
  "$K3" "$FW" --tok $TK --prompt "$FWPROMPT" --gen $G $FWMEM 2> "$D/batch.err" > /dev/null ||
    { cat "$D/batch.err"; exit 1; }
  pf=$(sed -n 's/^k3: prefill \([0-9]*\) tokens in \([0-9.]*\) s.*/\2/p' "$D/batch.err")
  pt=$(sed -n 's/^k3: prefill \([0-9]*\) tokens in.*/\1/p' "$D/batch.err")
  spt=$(sed -n 's/^k3: generated \([0-9]*\) tokens; \([0-9.]*\) s\/token.*/\2/p' "$D/batch.err")
  echo "$pf $spt $pt" >> "$D/batch"
  sh "$0" fw-server "$FW" $G --state-cache-gb 0 >> "$D/cold" || exit 1
  sh "$0" fw-server "$FW" $G >> "$D/kept" || exit 1
  sh "$0" fw-two "$FW" $G >> "$D/two" || exit 1
  exit 0
fi
if [ "$1" = share ]; then           # the server's own share in each run line of FILE
  awk '/run [0-9].*batch/ {
    for (i = 1; i <= NF; i++) if ($i == "cold" || $i == "kept") {
      f = $(i+1); t = $(i+2); p = $(i+5); d = $(i+6); sub(/;/, "", d)
      printf "run %s %s ttft_share_ms %.1f decode_share_ms %.1f\n", $2, $i, 1000 * (f - p),
        1000 * ((t - f) - d)
    } }' "$2"
  exit 0
fi
med() {
  sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR/2] + v[NR/2+1]) / 2}'
}
if [ "$1" = fw ]; then
  FW=${2:-/var/tmp/k3mem/fw6}; R=${3:-3}; G=${4:-8}
  T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
  echo "k3 serve vs batch mode on $FW: prompt \"$FWPROMPT\" (tokenizer $TK), $G greedy"
  echo "tokens, $FWMEM, $R runs each (interleaved), medians; every run under flock $LOCK"
  echo "(per run: batch = prefill s, s/token, prompt tokens; serve = curl's first byte s, total"
  echo " s, prompt tokens, generated tokens, then /metrics prefill s and decode s)"
  r=1
  while [ $r -le $R ]; do            # one lock per run: batch, cold, kept, two clients
    flock "$LOCK" sh "$0" fw-run "$FW" $G "$T" || exit 1
    echo "  run $r (load average $(cut -d' ' -f1 /proc/loadavg)): batch $(tail -n 1 "$T/batch");" \
      "serve cold $(tail -n 1 "$T/cold"); serve kept $(tail -n 1 "$T/kept");" \
      "two clients $(tail -n 1 "$T/two")"
    r=$((r+1))
  done
  bp=$(cut -d' ' -f1 "$T/batch" | med); bs=$(cut -d' ' -f2 "$T/batch" | med)
  echo "batch mode:  TTFT (prefill $(cut -d' ' -f3 "$T/batch" | head -n 1) tokens) $bp s;" \
    "decode $bs s/token"
  for mode in cold kept; do
    awk -v G=$G '{print $1}' "$T/$mode" | med > "$T/t"
    awk -v G=$G '{print ($2 - $1) / (G - 1)}' "$T/$mode" | med > "$T/d"
    awk '{print $5}' "$T/$mode" | med > "$T/ip"
    awk '{print $6 / ($4 - 1)}' "$T/$mode" | med > "$T/id"
    tt=$(cat "$T/t"); dd=$(cat "$T/d")
    if [ $mode = cold ]; then what="--state-cache-gb 0"; else what="default (kept states)"; fi
    echo "serve, $what: prompt $(awk '{print $3}' "$T/$mode" | head -n 1) tokens," \
      "$(awk '{print $4}' "$T/$mode" | head -n 1) generated"
    awk -v t=$tt -v d=$dd -v bp=$bp -v bs=$bs -v ip=$(cat "$T/ip") -v id=$(cat "$T/id") 'BEGIN {
      printf "  TTFT %.3f s (%+.1f%% vs batch), decode %.3f s/token = %.3f tok/s (%+.1f%%" \
        " time per token vs batch)\n", t, 100 * (t / bp - 1), d, 1 / d, 100 * (d / bs - 1)
      printf "  (the engine inside the server, from /metrics: prefill %.3f s, decode %.3f" \
        " s/token)\n", ip, id }'
  done
  echo "(+: the server is slower than batch mode by that much)"
  # two clients: both decode together once the second is prefilled (each prefill alone)
  awk -v G=$G '{ f = $1 > $3 ? $1 : $3; t = $2 > $4 ? $2 : $4; print 2 * (G - 1) / (t - f) }' \
    "$T/two" | med > "$T/agg"
  awk '{print $5}' "$T/two" | med > "$T/occ"
  awk -v a=$(cat "$T/agg") -v d=$dd -v o=$(cat "$T/occ") 'BEGIN {
    printf "two concurrent clients (default mode): decode %.3f tok/s together = %.2fx one" \
      " client'"'"'s %.3f tok/s (mean occupancy %s sequences per step)\n", a, a * d, 1 / d, o }'
  echo "(two clients: each line is client 1 first byte + total s, client 2 first byte +" \
    "total s, then /metrics k3_batch_occupancy)"
  echo "machine: $(nproc) vCPU, $(uname -m), $(free -g | awk '/Mem:/ {print $2}') GB;" \
    "$(date -u +%Y-%m-%d); page cache warm (the slice is read from the host's cache)"
  exit 0
fi
N=${1:-50}; G=${2:-8}
serve_up $M --state-cache-gb 0
args=""
i=0
while [ $i -lt $N ]; do
  printf '{"messages": [{"role": "user", "content": "question %d"}], "temperature": 0, ' $i \
    > "$T/b$i"
  printf '"max_tokens": %d, "chat_template_kwargs": {"thinking": false}}' $G >> "$T/b$i"
  [ $i -gt 0 ] && args="$args --next"
  args="$args -s -o /dev/null $U/v1/chat/completions -d @$T/b$i"
  i=$((i+1))
done
t0=$(date +%s.%N); curl $args; t1=$(date +%s.%N)
echo "k3 serve $M, $N requests of $G tokens (greedy, thinking off, no resume), one connection:"
awk "BEGIN{d=$t1-$t0; printf \"  %.2f s, %.1f requests/s, %.1f ms/request\n\", d, $N/d, 1000*d/$N}"
curl -s "$U/metrics" > "$T/m"
e=$(awk '/^k3_(prefill|decode)_seconds_total/ {s += $2} END {print s}' "$T/m")
echo "  engine (prefill + decode, from /metrics): $e s; HTTP, JSON, queue and rendering:"
awk "BEGIN{d=$t1-$t0-$e; printf \"  %.3f s = %.2f ms/request (%.1f%% of the wall time)\n\", d, \
  1000*d/$N, 100*d/($t1-$t0)}"
grep -E '^k3_(prompt|completion)_tokens_total' "$T/m"
echo "machine: $(nproc) vCPU, $(uname -m); $(date -u +%Y-%m-%d)"
