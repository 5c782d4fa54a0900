#!/bin/sh
# k3 serve on tests/models/tiny5 + tests/tok/tiny over loopback, driven by curl: the
# temperature-0 reply equals the chat REPL's --greedy reply (content and reasoning_content,
# thinking on and off, two turns), streamed deltas concatenate to the non-streamed reply,
# the second turn resumes a kept state (cached_tokens, only the tail prefilled) and is
# byte-identical to a server without kept states, two concurrent clients, a client that
# disconnects mid-stream, and a malformed-request suite (status, JSON error, still healthy).
. tests/sh/lib/serve.sh
start main
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }

[ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "/health"
$C "$U/v1/models" | grep -q '"id": "tiny5"' || fail "/v1/models"
echo "ok started on a free port; /health and /v1/models"

# ---- the REPL's greedy replies, thinking on and off, two turns (canonical re-render) ----
printf 'Hello there\nAnd a second\n' | timeout 120 "$K3" $M --chat --tok $TK --greedy --gen 12 \
  --canonical-history --history "$T/h_think.jsonl" > /dev/null 2> "$T/repl.err" || fail "REPL"
printf 'Hello there\nAnd a second\n' | timeout 120 "$K3" $M --chat --tok $TK --greedy --gen 12 \
  --canonical-history --no-think --history "$T/h_off.jsonl" > /dev/null 2>> "$T/repl.err" ||
  fail "REPL --no-think"
U1='{"role": "user", "content": "Hello there"}'
U2='{"role": "user", "content": "And a second"}'
post /v1/chat/completions "{\"messages\": [$U1], \"temperature\": 0, \"max_tokens\": 12}" \
  > "$T/r1"
c1=$(jstr content < "$T/r1"); r1=$(jstr reasoning_content < "$T/r1")
[ -n "$r1" ] || fail "no reasoning_content in $(cat "$T/r1")"
[ "$c1" = "$(hjstr content "$T/h_think.jsonl" 2)" ] || fail "content differs from the REPL"
[ "$r1" = "$(hjstr reasoning_content "$T/h_think.jsonl" 2)" ] ||
  fail "reasoning_content differs from the REPL: $r1"
p1=$(jnum prompt_tokens < "$T/r1"); g1=$(jnum completion_tokens < "$T/r1")
pre_before=$($C "$U/metrics" | sed -n 's/^k3_prefill_tokens_total //p')
A1="{\"role\": \"assistant\", \"content\": $c1, \"reasoning_content\": $r1}"
REQ2="{\"messages\": [$U1, $A1, $U2], \"temperature\": 0, \"max_tokens\": 12}"
post /v1/chat/completions "$REQ2" > "$T/r2"
[ "$(jstr content < "$T/r2")" = "$(hjstr content "$T/h_think.jsonl" 4)" ] ||
  fail "turn 2 content differs from the REPL"
[ "$(jstr reasoning_content < "$T/r2")" = "$(hjstr reasoning_content "$T/h_think.jsonl" 4)" ] ||
  fail "turn 2 reasoning differs from the REPL"
p2=$(jnum prompt_tokens < "$T/r2"); cached=$(jnum cached_tokens < "$T/r2")
pre_after=$($C "$U/metrics" | sed -n 's/^k3_prefill_tokens_total //p')
[ "$cached" -ge $((p1 - 1)) ] || fail "turn 2 cached $cached tokens, want >= $((p1 - 1))"
[ $((pre_after - pre_before)) = $((p2 - cached)) ] ||
  fail "turn 2 prefilled $((pre_after - pre_before)), want the tail $p2 - $cached"
# the machine gauges (issue 40): the prefills' FLOPs, their GFLOP/s against the FMA peak
$C "$U/metrics" > "$T/met"
for g in prefill_flops_total prefill_gflops prefill_peak_share machine_fma_gflops \
  machine_read_gbps; do
  awk -v g="k3_$g" '$1 == g && $2 > 0 { f = 1 } END { exit !f }' "$T/met" ||
    fail "/metrics: $(grep "k3_$g" "$T/met")"
done
echo "ok /metrics: $(grep '^k3_prefill_peak_share' "$T/met")"
echo "ok greedy replies equal the REPL's (2 turns, thinking on); turn 2 cached $cached of $p2" \
  "prompt tokens (turn 1: $p1 prompt + $g1 generated) and prefilled only the tail"
OFF='"chat_template_kwargs": {"thinking": false}'
post /v1/chat/completions "{\"messages\": [$U1], \"temperature\": 0, \"max_tokens\": 12, $OFF}" \
  > "$T/o1"
grep -q reasoning_content "$T/o1" && fail "reasoning_content with thinking off"
co=$(jstr content < "$T/o1")
[ "$co" = "$(hjstr content "$T/h_off.jsonl" 2)" ] || fail "thinking-off content differs"
AO="{\"role\": \"assistant\", \"content\": $co}"
post /v1/chat/completions "{\"messages\": [$U1, $AO, $U2], \"temperature\": 0, \"max_tokens\": 12,
  $OFF}" > "$T/o2"
[ "$(jstr content < "$T/o2")" = "$(hjstr content "$T/h_off.jsonl" 4)" ] ||
  fail "thinking-off turn 2 differs"
echo "ok thinking off (chat_template_kwargs): content equals the REPL's --no-think, 2 turns"

# ---- byte-identical to a server that keeps no state ----
start cold --state-cache-gb 0
UC=http://127.0.0.1:$PORT_cold
$C -H 'Content-Type: application/json' "$UC/v1/chat/completions" -d "$REQ2" > "$T/c2"
[ "$(jstr content < "$T/c2")$(jstr reasoning_content < "$T/c2")" = \
  "$(jstr content < "$T/r2")$(jstr reasoning_content < "$T/r2")" ] ||
  fail "resumed reply differs from the reply computed from scratch"
[ "$(jnum cached_tokens < "$T/c2")" = 0 ] || fail "cold server reports cached tokens"
SREQ="{\"messages\": [$U1, $A1, $U2], \"temperature\": 0.9, \"seed\": 42, \"max_tokens\": 20}"
post /v1/chat/completions "$SREQ" > "$T/s1"
$C "$UC/v1/chat/completions" -d "$SREQ" > "$T/s2"
[ "$(jstr content < "$T/s1")$(jstr reasoning_content < "$T/s1")" = \
  "$(jstr content < "$T/s2")$(jstr reasoning_content < "$T/s2")" ] ||
  fail "seeded sampled reply differs between resumed and scratch"
echo "ok resumed replies (greedy and seeded sampling) are byte-identical to scratch"

# ---- streaming ----
for th in "" ", $OFF"; do
  BODY="{\"messages\": [$U1, $A1, $U2], \"temperature\": 0, \"max_tokens\": 40$th}"
  post /v1/chat/completions "$BODY" > "$T/ns"
  post /v1/chat/completions "{\"messages\": [$U1, $A1, $U2], \"temperature\": 0, \
\"max_tokens\": 40, \"stream\": true, \"stream_options\": {\"include_usage\": true}$th}" > "$T/st"
  tail -n 2 "$T/st" | grep -q '^data: \[DONE\]' || fail "stream does not end with [DONE]"
  grep -q '"object": "chat.completion.chunk"' "$T/st" || fail "no chunk objects"
  grep -q '"choices": \[\], "usage": {"prompt_tokens"' "$T/st" || fail "no usage chunk"
  for k in content reasoning_content; do
    s=$(grep '^data: {' "$T/st" |
        sed -n "s/.*\"delta\": {\"$k\": \"\(\([^\"\\\\]\|\\\\.\)*\)\"}.*/\1/p" |
        tr -d '\n')
    want=$(jstr $k < "$T/ns" | sed 's/^"//; s/"$//')
    [ "$s" = "$want" ] || fail "streamed $k '$s' != non-streamed '$want'"
  done
  [ "$(grep -o '"finish_reason": "[a-z]*"' "$T/st")" = \
    "$(grep -o '"finish_reason": "[a-z]*"' "$T/ns")" ] || fail "finish_reason differs"
done
echo "ok streamed deltas concatenate to the non-streamed reply (thinking on and off), [DONE], usage"

# ---- stop strings, completions ----
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 10, "temperature": 0}' \
  > "$T/cp"
txt=$(jstr text < "$T/cp" | sed 's/^"//; s/"$//')
[ -n "$txt" ] || fail "/v1/completions: no text in $(cat "$T/cp")"
grep -q '"object": "text_completion"' "$T/cp" || fail "/v1/completions object"
echo "ok /v1/completions"
want=$(jstr content < "$T/ns" | sed 's/^"//; s/"$//')     # thinking off, 40 tokens
cut=$(printf '%s' "$want" | cut -c 3-4)
if [ -n "$cut" ] && ! printf '%s' "$cut" | grep -q '[\\"]'; then
  post /v1/chat/completions "{\"messages\": [$U1, $A1, $U2], \"temperature\": 0, \
\"max_tokens\": 40, $OFF, \"stop\": [\"$cut\"]}" > "$T/sp"
  got=$(jstr content < "$T/sp" | sed 's/^"//; s/"$//')
  case "$want" in "$got$cut"*) ;; *) fail "stop '$cut': '$got' is not the text before it";; esac
  grep -q '"finish_reason": "stop"' "$T/sp" || fail "stop: finish_reason"
  echo "ok stop string cuts the answer before its first occurrence"
fi

# ---- two concurrent clients ----
G0='"temperature": 0, "max_tokens": 30'
B1="{\"messages\": [{\"role\": \"user\", \"content\": \"first client\"}], $G0}"
B2="{\"messages\": [{\"role\": \"user\", \"content\": \"second client\"}], $G0, \"stream\": true}"
$C "$UC/v1/chat/completions" -d "$B1" > "$T/w1"
$C "$UC/v1/chat/completions" -d "$B2" > "$T/w2"
post /v1/chat/completions "$B1" > "$T/x1" & w1=$!
post /v1/chat/completions "$B2" > "$T/x2" & w2=$!
wait $w1 $w2
[ "$(jstr reasoning_content < "$T/x1")" = "$(jstr reasoning_content < "$T/w1")" ] ||
  fail "concurrent client 1 got another reply"
[ "$(grep -c delta "$T/x2")" = "$(grep -c delta "$T/w2")" ] &&
  [ "$(sed 's/"created": [0-9]*//; s/"id": "[^"]*"//' "$T/x2")" = \
    "$(sed 's/"created": [0-9]*//; s/"id": "[^"]*"//' "$T/w2")" ] || fail "concurrent client 2"
echo "ok two concurrent clients (one streaming) both get their own correct replies"

# ---- a client that disconnects mid-stream ----
d0=$($C "$U/metrics" | sed -n 's/^k3_client_disconnects_total //p')
LONG="{\"messages\": [$U1], \"max_tokens\": 3500, \"stream\": true, \"seed\": 1}"
curl -s -N --max-time 60 "$U/v1/chat/completions" -d "$LONG" 2>/dev/null | head -c 2000 > "$T/dc"
if grep -q '\[DONE\]' "$T/dc"; then echo "note: the stream finished before the disconnect"
else
  i=0
  while [ "$($C "$U/metrics" | sed -n 's/^k3_client_disconnects_total //p')" = "$d0" ]; do
    i=$((i+1)); [ $i -gt 600 ] && fail "the engine did not notice the disconnect"; sleep 0.1
  done
  post /v1/chat/completions "{\"messages\": [$U1], \"temperature\": 0, \"max_tokens\": 12}" \
    > "$T/r1b"
  cmp -s "$T/r1" "$T/r1b" ||
    [ "$(jstr reasoning_content < "$T/r1b")" = "$r1" ] || fail "reply after a disconnect"
  echo "ok a client that disconnects mid-stream cancels its request; the engine serves on"
fi

# ---- malformed requests: status, JSON error, healthy after each ----
n=0
chk() {   # chk STATUS DESCRIPTION curl-args...
  want=$1; what=$2; shift 2
  got=$($C -o "$T/e" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "$what: status $got, want $want: $(cat "$T/e")"
  grep -q "^{\"error\": {\"message\": \".*\", \"type\": \"[a-z_]*\", \"code\": $want}}" "$T/e" ||
    fail "$what: not an OpenAI error: $(cat "$T/e")"
  [ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after: $what"
  n=$((n+1))
}
bad() { chk 400 "$1" -H 'Content-Type: application/json' "$U/v1/chat/completions" -d "$2"; }
OKM="\"messages\": [$U1]"
bad "invalid JSON" '{'
bad "array body" '[]'
bad "string body" '"hello"'
bad "number body" '42'
bad "trailing garbage" '{} x'
bad "lone surrogate" '{"messages": [{"role": "user", "content": "\ud800"}]}'
bad "invalid UTF-8" "$(printf '{"messages": [{"role": "user", "content": "\377"}]}')"
bad "deep nesting" "$(i=0; while [ $i -lt 600 ]; do printf '['; i=$((i+1)); done)"
bad "empty object" '{}'
bad "messages not an array" '{"messages": {"role": "user"}}'
bad "messages empty" '{"messages": []}'
bad "message not an object" '{"messages": ["hi"]}'
bad "role missing" '{"messages": [{"content": "hi"}]}'
bad "role a number" '{"messages": [{"role": 1, "content": "hi"}]}'
bad "role unknown" '{"messages": [{"role": "robot", "content": "hi"}]}'
bad "content missing" '{"messages": [{"role": "user"}]}'
bad "content a number" '{"messages": [{"role": "user", "content": 5}]}'
bad "content part image" '{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}'
bad "content part no text" '{"messages": [{"role": "user", "content": [{"type": "text"}]}]}'
bad "content with NUL" '{"messages": [{"role": "user", "content": "a\u0000b"}]}'
bad "unknown message field" '{"messages": [{"role": "user", "content": "hi", "mood": 1}]}'
bad "reasoning on user" \
  '{"messages": [{"role": "user", "content": "hi", "reasoning_content": "r"}]}'
bad "tool role" '{"messages": [{"role": "tool", "content": "hi"}]}'
bad "tool_calls an object" '{"messages": [{"role": "assistant", "content": "", "tool_calls": {}}]}'
bad "unknown field" "{$OKM, \"frobnicate\": true}"
bad "temperature string" "{$OKM, \"temperature\": \"hot\"}"
bad "temperature negative" "{$OKM, \"temperature\": -0.5}"
bad "temperature huge" "{$OKM, \"temperature\": 1000}"
bad "top_p zero" "{$OKM, \"top_p\": 0}"
bad "top_p above 1" "{$OKM, \"top_p\": 1.5}"
bad "top_k fraction" "{$OKM, \"top_k\": 1.5}"
bad "min_p 1" "{$OKM, \"min_p\": 1}"
bad "seed string" "{$OKM, \"seed\": \"x\"}"
bad "seed fraction" "{$OKM, \"seed\": 1.5}"
bad "max_tokens 0" "{$OKM, \"max_tokens\": 0}"
bad "max_tokens negative" "{$OKM, \"max_tokens\": -3}"
bad "max_tokens string" "{$OKM, \"max_tokens\": \"10\"}"
bad "max_completion_tokens 0" "{$OKM, \"max_completion_tokens\": 0}"
bad "stop a number" "{$OKM, \"stop\": 7}"
bad "stop five entries" "{$OKM, \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}"
bad "stop empty string" "{$OKM, \"stop\": [\"\"]}"
bad "stream a string" "{$OKM, \"stream\": \"yes\"}"
bad "stream_options without stream" "{$OKM, \"stream_options\": {\"include_usage\": true}}"
bad "stream_options unknown" "{$OKM, \"stream\": true, \"stream_options\": {\"x\": 1}}"
bad "reasoning_effort unknown" "{$OKM, \"reasoning_effort\": \"extreme\"}"
bad "reasoning_effort number" "{$OKM, \"reasoning_effort\": 3}"
bad "chat_template_kwargs unknown" "{$OKM, \"chat_template_kwargs\": {\"x\": 1}}"
bad "thinking not a bool" "{$OKM, \"chat_template_kwargs\": {\"thinking\": \"no\"}}"
bad "n 17" "{$OKM, \"n\": 17}"
bad "presence_penalty out of range" "{$OKM, \"presence_penalty\": 3}"
bad "tools" "{$OKM, \"tools\": [{\"type\": \"function\"}]}"
bad "logprobs a string" "{$OKM, \"logprobs\": \"yes\"}"
bad "response_format xml" "{$OKM, \"response_format\": {\"type\": \"xml\"}}"
bad "model a number" "{$OKM, \"model\": 5}"
cbad() { chk 400 "$1" "$U/v1/completions" -d "$2"; }
cbad "completions: no prompt" '{"max_tokens": 3}'
cbad "completions: prompt a number" '{"prompt": 3}'
cbad "completions: prompt empty" '{"prompt": ""}'
cbad "completions: messages field" '{"prompt": "a", "messages": []}'
chk 400 "context overflow" "$U/v1/completions" \
  -d "{\"prompt\": \"$(i=0; while [ $i -lt 2000 ]; do printf 'word %d ' $i; i=$((i+1)); done)\"}"
$C "$U/metrics" | grep -q '^k3_request_errors_total{code="400"} [1-9]' ||
  fail "/metrics does not count the 400s"
chk 400 "POST without a body" -X POST "$U/v1/chat/completions"
chk 413 "huge Content-Length" -H 'Content-Length: 50000000' "$U/v1/chat/completions" -d '{}'
head -c 5000000 /dev/zero | tr '\0' ' ' > "$T/big"
chk 413 "huge body" -H 'Expect:' "$U/v1/chat/completions" --data-binary @"$T/big"
chk 501 "chunked request body" -H 'Transfer-Encoding: chunked' "$U/v1/chat/completions" -d '{}'
chk 404 "unknown path" "$U/v1/nothing"
chk 404 "no such file beside the chat page" "$U/index.htm"
chk 404 "engines path" "$U/v1/engines"
chk 405 "GET chat/completions" "$U/v1/chat/completions"
chk 405 "GET completions" "$U/v1/completions"
chk 405 "POST health" -X POST "$U/health"
chk 405 "PUT models" -X PUT "$U/v1/models"
chk 405 "DELETE metrics" -X DELETE "$U/metrics"
# raw requests (curl's telnet:// sends stdin as is)
raw() {   # raw STATUS DESCRIPTION BYTES
  (printf "$3"; sleep 1) | curl -s --max-time 10 "telnet://127.0.0.1:$PORT_main" \
    > "$T/e" 2>/dev/null
  head -n 1 "$T/e" | grep -q "^HTTP/1.1 $1 " || fail "$2: $(head -n 1 "$T/e")"
  grep -q "\"code\": $1}}" "$T/e" || fail "$2: not an OpenAI error"
  [ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after: $2"
  n=$((n+1))
}
raw 400 "garbage request line" 'GARBAGE\r\n\r\n'
raw 400 "no Host" 'GET /health HTTP/1.1\r\n\r\n'
raw 505 "HTTP/2.0" 'GET /health HTTP/2.0\r\nHost: x\r\n\r\n'
raw 400 "bad Content-Length" \
  'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n'
raw 431 "huge head" "GET /health HTTP/1.1\r\nX: $(head -c 17000 /dev/zero | tr '\0' a)\r\n\r\n"
echo "ok $n malformed requests: each the right status and an OpenAI error; healthy after each"

# ---- pipelining, slow clients, auth ----
(printf 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'
 printf 'GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'
 sleep 1) | curl -s --max-time 10 "telnet://127.0.0.1:$PORT_main" > "$T/pl"
[ "$(grep -c '^HTTP/1.1 200' "$T/pl")" = 2 ] || fail "two pipelined requests, keep-alive"
start slow --timeout 1 --api-key sekrit
US=http://127.0.0.1:$PORT_slow
(printf 'GET /health HTTP/1.1\r\n'; sleep 3) |
  curl -s --max-time 10 "telnet://127.0.0.1:$PORT_slow" \
  > "$T/sl"
grep -q '^HTTP/1.1 408' "$T/sl" || fail "slow head: $(head -n 1 "$T/sl")"
[ "$($C "$US/health")" = '{"status": "ok"}' ] || fail "/health needs no key"
U=$US
chk 401 "no API key" "$US/v1/models"
chk 401 "wrong API key" -H 'Authorization: Bearer nope' "$US/v1/models"
chk 401 "Basic auth" -H 'Authorization: Basic c2Vrcml0' "$US/v1/models"
chk 401 "metrics without key" "$US/metrics"
chk 401 "chat without key" "$US/v1/chat/completions" -d "{$OKM}"
$C -H 'Authorization: Bearer sekrit' "$US/v1/models" | grep -q tiny5 || fail "the right key"
[ $n -ge 50 ] || fail "the malformed-request suite ran $n cases, want >= 50"
echo "ok pipelined requests, slow head (408), Authorization: Bearer ($n error cases in all)"

# ---- --state-dir: a restart resumes; a corrupt file is refused, the rest still load ----
mkdir "$T/sd"
start disk1 --state-dir "$T/sd"
RQ="{\"messages\": [$U1, $A1, $U2], \"temperature\": 0, \"max_tokens\": 12}"
$C "http://127.0.0.1:$PORT_disk1/v1/chat/completions" -d "$RQ" > "$T/d1"
ls "$T/sd" | grep -q '\.state$' || fail "--state-dir: no state file written"
for p in $PIDS; do kill "$p" 2>/dev/null; done; PIDS=""
i=0; while [ -n "$($C "$U/health" 2>/dev/null)" ]; do
  i=$((i+1)); [ $i -gt 100 ] && fail "servers did not stop"; sleep 0.1; done
f=$(ls "$T/sd" | grep '\.state$' | head -n 1)
printf 'K3STATE\nnonsense' > "$T/sd/0000000000000000-max.state"    # version 1
cp "$T/sd/$f" "$T/sd/flipped.state"                    # one byte of the tensors flipped
sz=$(wc -c < "$T/sd/flipped.state")
printf '\377' | dd of="$T/sd/flipped.state" bs=1 seek=$((sz - 100)) conv=notrunc 2>/dev/null
head -c 100 "$T/sd/$f" > "$T/sd/short.state"            # truncated
start disk2 --state-dir "$T/sd"
grep -q ' [1-9][0-9]* state(s) resumed' "$T/disk2.err" || fail "--state-dir: nothing loaded"
grep -q 'version 1 state.*ignored' "$T/disk2.err" || fail "--state-dir: version 1 not refused"
grep -q 'flipped.state: checksum mismatch.*ignored' "$T/disk2.err" ||
  fail "--state-dir: the flipped byte was not refused: $(cat "$T/disk2.err")"
grep -q 'short.state: .*ignored' "$T/disk2.err" || fail "--state-dir: a truncated file loaded"
pre=$($C "http://127.0.0.1:$PORT_disk2/metrics" | sed -n 's/^k3_prefill_tokens_total //p')
$C "http://127.0.0.1:$PORT_disk2/v1/chat/completions" -d "$RQ" > "$T/d2"
[ "$(jnum cached_tokens < "$T/d2")" = "$(jnum prompt_tokens < "$T/d2")" ] &&
  [ "$($C "http://127.0.0.1:$PORT_disk2/metrics" | sed -n 's/^k3_prefill_tokens_total //p')" \
    = "$pre" ] || fail "after a restart: cached $(jnum cached_tokens < "$T/d2") tokens"
[ "$(jstr content < "$T/d2")$(jstr reasoning_content < "$T/d2")" = \
  "$(jstr content < "$T/d1")$(jstr reasoning_content < "$T/d1")" ] ||
  fail "the resumed reply after a restart differs"
echo "ok --state-dir: after a restart the request resumes $(jnum cached_tokens < "$T/d2") of" \
  "$(jnum prompt_tokens < "$T/d2") prompt tokens from disk (its logits row: nothing prefilled)," \
  "same reply; version 1, a flipped byte and a truncated file are refused"

"$K3" serve --help | grep -q -- '--state-cache-gb' || fail "serve --help"
"$K3" serve $M 2>/dev/null; [ $? = 2 ] || fail "serve without --tok must exit 2"
"$K3" serve $M --tok $TK --port 99999 2>/dev/null; [ $? = 2 ] || fail "--port 99999: exit 2"
"$K3" serve $M --tok $TK --host nowhere 2>/dev/null; [ $? = 2 ] || fail "--host nowhere: exit 2"
"$K3" serve $M --tok $TK --port $PORT_disk2 2>/dev/null; [ $? = 1 ] || fail "port in use: exit 1"
"$K3" serve $M --tok $TK --state-dir "$T/nodir" --port 0 2>/dev/null; [ $? = 2 ] ||
  fail "--state-dir missing: exit 2"
echo "ok usage errors exit 2, a port in use exits 1"
