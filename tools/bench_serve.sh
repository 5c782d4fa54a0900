#!/bin/sh
# Requests per second through k3 serve on a tiny model, and the server's own share of the
# time: N chat requests (max_tokens G, greedy, thinking off, each a new conversation so
# nothing is resumed) over one keep-alive connection; the engine's prefill and decode
# seconds come from /metrics, the rest is HTTP, JSON, the queue and rendering.
# Usage: sh tools/bench_serve.sh [N] [G] > docs/data/serve_bench.txt
K3=${K3:-./bin/k3}; M=${M:-tests/models/tiny5}; TK=${TK:-tests/tok/tiny}
N=${1:-50}; G=${2:-8}
T=$(mktemp -d); trap 'kill $pid 2>/dev/null; rm -rf "$T"' EXIT
"$K3" serve $M --tok $TK --port 0 --state-cache-gb 0 2> "$T/err" & pid=$!
while ! grep -qs 'listening on' "$T/err"; do sleep 0.1; done
U=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$T/err")
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
