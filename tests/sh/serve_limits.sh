#!/bin/sh
# k3 serve on tests/models/tiny5 over loopback (curl): the connection limit (one more
# connection is answered 503 with a JSON error, and the server serves on once it closes),
# the warning for a non-loopback --host without --api-key (and none with a key), the chat
# page's address for --host 0.0.0.0 (http://127.0.0.1:PORT/, a browser can open it), every
# OpenAI reasoning_effort value rendered as the effort it maps to (the reply equals the
# REPL's --greedy reply at that effort), and the first-turn reply equal to the REPL's
# default (exact-id) history mode as well as --canonical-history (docs/SERVE.md).
. tests/sh/lib/serve.sh

# ---- --max-conns: one more connection is 503, then the server serves on ----
start lim --max-conns 1 --timeout 2
UL=http://127.0.0.1:$PORT_lim
[ "$($C "$UL/health")" = '{"status": "ok"}' ] || fail "/health before the limit"
(sleep 4) | curl -s --max-time 10 "telnet://127.0.0.1:$PORT_lim" > /dev/null 2>&1 &
hold=$!
sleep 0.7
got=$($C -o "$T/e" -w '%{http_code}' "$UL/health")
[ "$got" = 503 ] || fail "a second connection with --max-conns 1: status $got, want 503"
grep -q '^{"error": {"message": ".*open connections.*", "type": "[a-z_]*", "code": 503}}' \
  "$T/e" || fail "503 is not an OpenAI error: $(cat "$T/e")"
wait $hold
i=0
while [ "$($C "$UL/health")" != '{"status": "ok"}' ]; do
  i=$((i+1)); [ $i -gt 100 ] && fail "not healthy after the held connection closed"; sleep 0.1
done
echo "ok --max-conns 1: a second connection gets 503 with a JSON error; served again after"

# ---- non-loopback --host: warned without --api-key, not with one ----
start open --host 0.0.0.0
grep -q 'k3: warning: serving on 0.0.0.0 without --api-key' "$T/open.err" ||
  fail "no warning for --host 0.0.0.0 without --api-key"
[ "$($C "http://127.0.0.1:$PORT_open/health")" = '{"status": "ok"}' ] || fail "0.0.0.0 health"
# the chat page line names an address a browser can open, not 0.0.0.0
grep -q "^k3: chat page: open http://127.0.0.1:$PORT_open/ in a browser; --host 0.0.0.0 listens on \
every interface" "$T/open.err" && ! grep -q 'open http://0\.0\.0\.0' "$T/open.err" ||
  fail "--host 0.0.0.0: the chat page line is $(grep 'chat page' "$T/open.err")"
start keyed --host 0.0.0.0 --api-key k
grep -q 'warning' "$T/keyed.err" && fail "a warning although --api-key is set"
start loop
grep -q 'warning' "$T/loop.err" && fail "a warning on the loopback default"
for p in $PIDS; do kill "$p" 2>/dev/null; done; PIDS=""
echo "ok a non-loopback --host without --api-key warns; with a key, or on loopback, it does not;" \
  "--host 0.0.0.0 says to open http://127.0.0.1:PORT/"

# ---- reasoning_effort values: the REPL's reply at the mapped effort ----
start main
U=http://127.0.0.1:$PORT_main
U1='{"role": "user", "content": "Hello there"}'
for e in low high max; do
  printf 'Hello there\n' | timeout 120 "$K3" $M --chat --tok $TK --greedy --gen 12 \
    --think-effort $e --history "$T/h_$e.jsonl" > /dev/null 2> "$T/repl.err" ||
    fail "REPL --think-effort $e"
done
printf 'Hello there\n' | timeout 120 "$K3" $M --chat --tok $TK --greedy --gen 12 \
  --no-think --history "$T/h_none.jsonl" > /dev/null 2> "$T/repl.err" || fail "REPL --no-think"
for pair in none:none minimal:low low:low medium:high high:high xhigh:max max:max; do
  v=${pair%%:*}; e=${pair#*:}
  $C "$U/v1/chat/completions" -d "{\"messages\": [$U1], \"temperature\": 0, \"max_tokens\": 12,
    \"reasoning_effort\": \"$v\"}" > "$T/r_$v"
  [ "$(jstr content < "$T/r_$v")" = "$(hjstr content "$T/h_$e.jsonl" 2)" ] ||
    fail "reasoning_effort $v: content differs from the REPL's at effort $e"
  if [ $e = none ]; then
    grep -q reasoning_content "$T/r_$v" && fail "reasoning_effort none: reasoning_content"
  else
    [ "$(jstr reasoning_content < "$T/r_$v")" = "$(hjstr reasoning_content "$T/h_$e.jsonl" 2)" ] ||
      fail "reasoning_effort $v: reasoning differs from the REPL's at effort $e"
  fi
done
pl=$(jnum prompt_tokens < "$T/r_low"); ph=$(jnum prompt_tokens < "$T/r_high")
pm=$(jnum prompt_tokens < "$T/r_medium"); pn=$(jnum prompt_tokens < "$T/r_none")
[ "$pm" = "$ph" ] && [ "$pl" != "$ph" ] && [ "$pn" -lt "$pl" ] ||
  fail "prompt tokens: none $pn low $pl medium $pm high $ph"
echo "ok reasoning_effort none/minimal/low/medium/high/xhigh/max: the REPL's reply at" \
  "off/low/low/high/high/max/max (prompts: none $pn, low $pl, medium = high $ph tokens)"

# ---- the first turn equals the REPL's default mode too (no --canonical-history) ----
[ "$(jstr content < "$T/r_max")" = "$(hjstr content "$T/h_max.jsonl" 2)" ] &&
  [ "$(jstr reasoning_content < "$T/r_max")" = "$(hjstr reasoning_content "$T/h_max.jsonl" 2)" ] ||
  fail "first turn differs from the REPL's default history mode"
echo "ok the first turn equals the REPL's default (exact-id history) greedy reply"
