#!/bin/sh
# /metrics follows the Prometheus conventions (every counter is TYPE counter with a _total
# name, and every _total is a counter), and SIGTERM ends an open stream with its finish and
# "data: [DONE]" before the server exits 0.
. tests/sh/lib/serve.sh
start a
U="http://127.0.0.1:$PORT_a"
SPID=${PIDS##* }
$C "$U/v1/completions" -d '{"prompt": "Hi", "max_tokens": 2, "temperature": 0}' > /dev/null
$C "$U/metrics" > "$T/m"
bad=$(awk '$1 == "#" && $2 == "TYPE" {
             if (($3 ~ /_total$/) != ($4 == "counter")) printf "%s %s; ", $3, $4 }' "$T/m")
[ -z "$bad" ] || fail "/metrics: counters and _total names disagree: $bad"
grep -q '^# TYPE k3_prefill_seconds_total counter' "$T/m" || fail "prefill_seconds_total"
[ "$(grep -c '^# TYPE' "$T/m")" -ge 10 ] || fail "/metrics has too few metrics"
echo "ok /metrics: every counter is declared counter with a _total name"

# a long stream (3000 tokens) open when the server is told to stop
$C "$U/v1/completions" -d '{"prompt": "Hello", "max_tokens": 3000, "temperature": 0,
  "stream": true}' > "$T/st" &
cpid=$!
i=0
while [ "$(grep -c '^data: {' "$T/st" 2>/dev/null)" -lt 3 ]; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the stream did not start"
  sleep 0.1
done
grep -q '\[DONE\]' "$T/st" && fail "the stream ended before SIGTERM: make it longer"
kill -TERM "$SPID"
wait "$cpid"
wait "$SPID"; rc=$?
tail -n 2 "$T/st" | grep -q '^data: \[DONE\]' ||
  fail "SIGTERM: the open stream does not end with [DONE]: $(tail -n 3 "$T/st")"
grep -q '"finish_reason": "[a-z]*"' "$T/st" || fail "SIGTERM: no finish_reason chunk"
[ $rc = 0 ] || fail "SIGTERM: the server exited $rc"
grep -q 'stopping' "$T/a.err" || fail "SIGTERM: the server did not say it is stopping"
echo "ok SIGTERM: the open stream ends with its finish_reason and [DONE], the server exits 0"
