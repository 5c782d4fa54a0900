#!/bin/sh
# /metrics follows the Prometheus conventions (every counter is TYPE counter with a _total
# name, and every _total is a counter), and SIGTERM ends an open stream with its finish
# ("k3_stop": "interrupted") and "data: [DONE]" before the server exits 0; SIGINT the same,
# and a queued request is answered 503, each logged (interrupted) before the exit.
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
grep -q '"finish_reason": "length", "k3_stop": "interrupted"' "$T/st" ||
  fail "SIGTERM: no finish chunk with k3_stop interrupted: $(tail -n 3 "$T/st")"
[ $rc = 0 ] || fail "SIGTERM: the server exited $rc"
grep -q 'stopping' "$T/a.err" || fail "SIGTERM: the server did not say it is stopping"
echo "ok SIGTERM: the open stream ends with its finish chunk (k3_stop interrupted) and" \
  "[DONE], the server exits 0"

# SIGINT while a stream is under way and another request waits in the queue. The stream
# cannot end by itself (K3_SERVE_TEST_HOLD: after 4 tokens it holds, the engine with it,
# until its client goes or the server stops), so the queued one stays queued: the stream
# still ends with its finish chunk ("k3_stop": "interrupted") and [DONE], the queued
# request is answered 503, and each gets its request log line, marked (interrupted),
# before the server exits 0
K3_SERVE_TEST_HOLD=4 start h
H="http://127.0.0.1:$PORT_h"
HPID=${PIDS##* }
$C -N "$H/v1/completions" -d '{"prompt": "Hello", "max_tokens": 3000, "temperature": 0,
  "stream": true}' > "$T/hs" &
c1=$!
i=0
while ! grep -q 'request [0-9]* holds after 4 tokens' "$T/h.err"; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the stream did not reach its hold"
  sleep 0.1
done
$C "$H/v1/chat/completions" -d '{"messages": [{"role": "user", "content": "Hi"}],
  "max_tokens": 3}' > "$T/hq" &
c2=$!
i=0
while ! $C "$H/metrics" | grep -q '^k3_queue_length 1$'; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the second request is not queued"
  sleep 0.1
done
kill -INT "$HPID"
wait "$c1"; wait "$c2"
wait "$HPID"; rc=$?
[ $rc = 0 ] || fail "SIGINT: the server exited $rc"
tail -n 2 "$T/hs" | grep -q '^data: \[DONE\]' ||
  fail "SIGINT: the held stream does not end with [DONE]: $(tail -n 3 "$T/hs")"
grep -q '"finish_reason": "length", "k3_stop": "interrupted"' "$T/hs" ||
  fail "SIGINT: no finish chunk with k3_stop interrupted: $(tail -n 3 "$T/hs")"
grep -q '"code": 503' "$T/hq" && grep -q 'the server is stopping' "$T/hq" ||
  fail "SIGINT: the queued request got $(cat "$T/hq")"
grep -q '^k3: request POST /v1/completions 200 prompt=[0-9]* gen=4 .* (interrupted)$' \
  "$T/h.err" || fail "SIGINT: the stream's log line: $(grep 'request POST' "$T/h.err")"
grep -q '^k3: request POST /v1/chat/completions 503 .* (interrupted)$' "$T/h.err" ||
  fail "SIGINT: the queued request's log line: $(grep 'request POST' "$T/h.err")"
echo "ok SIGINT: a stream under way ends with k3_stop interrupted and [DONE], a queued" \
  "request gets 503; both logged (interrupted) before the exit (0)"
