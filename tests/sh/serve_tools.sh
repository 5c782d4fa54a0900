#!/bin/sh
# k3 serve's tools on tests/models/tiny5 over loopback (curl). The random model never
# writes a tool call, so a test hook (K3_SERVE_TEST_REPLY) makes the reply a fixed XTML
# completion, still fed through the engine: it is parsed into message.tool_calls
# (finish_reason "tool_calls"), streamed as delta.tool_calls, and sent back as the next
# turn's assistant message it renders to the very ids the model wrote (cached_tokens =
# the whole previous prompt and reply). tool_choice auto/none/required/named rendered as
# the spec says (compared through prompt_tokens), and malformed tools refused with 400.
. tests/sh/lib/serve.sh

REPLY='I will check.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>'
REPLY="$REPLY"'<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
REPLY="$REPLY"'<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
REPLY="$REPLY"'<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
REPLY="$REPLY"'<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
K3_SERVE_TEST_REPLY=$REPLY start hook
PLAIN='Just text.<|close|>think<|sep|><|open|>response<|sep|>Hi<|close|>response<|sep|>'
K3_SERVE_TEST_REPLY="$PLAIN<|close|>message<|sep|><|end_of_msg|>" start plain
start real
U=http://127.0.0.1:$PORT_hook
post() { $C -H 'Content-Type: application/json' "$1/v1/chat/completions" -d "$2"; }
WEATHER='{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}}, "required": ["city"]}}}'
SEARCH='{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}'
U1='{"role": "user", "content": "Weather in Paris?"}'
REQ="\"messages\": [$U1], \"tools\": [$WEATHER], \"temperature\": 0, \"max_tokens\": 200"

# ---- the reply's tool call ----
post $U "{$REQ}" > "$T/r1"
grep -q '"finish_reason": "tool_calls"' "$T/r1" || fail "finish_reason: $(cat "$T/r1")"
grep -q '"content": null' "$T/r1" || fail "content is not null: $(cat "$T/r1")"
ARGS='"arguments": "{\"city\": \"Paris\", \"days\": 3}"'
grep -qF '"tool_calls": [{"id": "call_' "$T/r1" &&
  grep -qF '"type": "function", "function": {"name": "get_weather", '"$ARGS"'}}]' "$T/r1" ||
  fail "tool_calls: $(cat "$T/r1")"
[ "$(jstr reasoning_content < "$T/r1")" = '"I will check."' ] || fail "reasoning: $(cat "$T/r1")"
CALL=$(sed -n 's/.*"tool_calls": \(\[.*\]\)}, "finish_reason".*/\1/p' "$T/r1")
CID=$(printf '%s' "$CALL" | sed -n 's/.*"id": "\([^"]*\)".*/\1/p')
[ -n "$CALL" ] && [ -n "$CID" ] || fail "could not cut the tool_calls out of $(cat "$T/r1")"
echo "ok a tool call in the reply: message.tool_calls (id $CID, get_weather, $ARGS)," \
  "content null, finish_reason tool_calls"

# ---- streamed ----
post $U "{$REQ, \"stream\": true}" > "$T/s1"
grep -qF '"delta": {"tool_calls": [{"index": 0, "id": "call_' "$T/s1" &&
  grep -qF '"function": {"name": "get_weather", '"$ARGS"'}}]}' "$T/s1" ||
  fail "no delta.tool_calls: $(cat "$T/s1")"
grep -q '"finish_reason": "tool_calls"' "$T/s1" || fail "stream finish_reason"
tail -n 2 "$T/s1" | grep -q '^data: \[DONE\]' || fail "stream does not end with [DONE]"
echo "ok streamed: delta.tool_calls with the same call, finish_reason tool_calls, [DONE]"

# ---- the call sent back renders to the ids the model wrote ----
p1=$(jnum prompt_tokens < "$T/r1"); g1=$(jnum completion_tokens < "$T/r1")
A1="{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"I will check.\",
  \"tool_calls\": $CALL}"
TM="{\"role\": \"tool\", \"tool_call_id\": \"$CID\", \"content\": \"18C and sunny\"}"
post $U "{\"messages\": [$U1, $A1, $TM], \"tools\": [$WEATHER], \"temperature\": 0,
  \"max_tokens\": 200}" > "$T/r2"
c2=$(jnum cached_tokens < "$T/r2")
[ "$c2" = $((p1 + g1 - 1)) ] ||
  fail "turn 2 resumed $c2 tokens, want the whole turn 1 ($p1 prompt + $g1 reply - the end id)"
echo "ok the returned tool call and a tool message: turn 2 resumes all $c2 ids of turn 1" \
  "(the rendered call is id-exact to the model's)"

# ---- --state-dir keeps tool conversations: a restart resumes turn 2 without re-prefill ----
mkdir "$T/sd"
R2="{\"messages\": [$U1, $A1, $TM], \"tools\": [$WEATHER], \"temperature\": 0,
  \"max_tokens\": 200}"
K3_SERVE_TEST_REPLY=$REPLY start disk1 --state-dir "$T/sd"
post "http://127.0.0.1:$PORT_disk1" "{$REQ}" > /dev/null
post "http://127.0.0.1:$PORT_disk1" "$R2" > "$T/d1"
ls "$T/sd" | grep -q '\.state$' || fail "--state-dir: no tool conversation saved"
pid=${PIDS##* }; kill $pid; wait $pid 2>/dev/null
K3_SERVE_TEST_REPLY=$REPLY start disk2 --state-dir "$T/sd"
UD=http://127.0.0.1:$PORT_disk2
grep -q ' [1-9][0-9]* state(s) resumed' "$T/disk2.err" ||
  fail "nothing resumed: $(cat "$T/disk2.err")"
post $UD "$R2" > "$T/d2"
p2=$(jnum prompt_tokens < "$T/d2")
[ "$(jnum cached_tokens < "$T/d2")" = "$p2" ] ||
  fail "after a restart turn 2 cached $(jnum cached_tokens < "$T/d2") of $p2 tokens"
[ "$($C "$UD/metrics" | sed -n 's/^k3_prefill_tokens_total //p')" = 0 ] ||
  fail "after a restart turn 2 prefilled tokens"
nm() { sed 's/"created": [0-9]*//; s/"cached_tokens": [0-9]*//; s/"id": "[^"]*"//g' "$1"; }
[ "$(nm "$T/d2")" = "$(nm "$T/d1")" ] ||
  fail "the tool turn after a restart differs: $(cat "$T/d2") vs $(cat "$T/d1")"
echo "ok --state-dir keeps tool conversations: after a restart turn 2 (tools, a tool call and" \
  "its result) resumes all $p2 prompt tokens from disk, nothing prefilled, the same reply"

# ---- tool_choice, through the rendered prompt's length ----
ptok() { post "http://127.0.0.1:$PORT_real" "$1" | jnum prompt_tokens; }
B="\"messages\": [$U1], \"max_tokens\": 1, \"temperature\": 0"
none=$(ptok "{$B}"); auto=$(ptok "{$B, \"tools\": [$WEATHER]}")
auto2=$(ptok "{$B, \"tools\": [$WEATHER], \"tool_choice\": \"auto\"}")
tnone=$(ptok "{$B, \"tools\": [$WEATHER], \"tool_choice\": \"none\"}")
req=$(ptok "{$B, \"tools\": [$WEATHER], \"tool_choice\": \"required\"}")
both=$(ptok "{$B, \"tools\": [$WEATHER, $SEARCH]}")
named=$(ptok "{$B, \"tools\": [$WEATHER, $SEARCH], \"tool_choice\": {\"type\": \"function\",
  \"function\": {\"name\": \"get_weather\"}}}")
[ "$auto" -gt "$none" ] && [ "$auto2" = "$auto" ] && [ "$tnone" -gt "$auto" ] &&
  [ "$req" -gt "$auto" ] && [ "$req" != "$tnone" ] && [ "$both" -gt "$auto" ] &&
  [ "$named" = "$req" ] ||
  fail "prompt tokens: no tools $none, auto $auto/$auto2, none $tnone, required $req," \
       "two tools $both, named $named"
post $U "{$REQ, \"tool_choice\": \"none\"}" > "$T/n1"
grep -q '"tool_calls"' "$T/n1" && fail "tool_choice none returned tool_calls"
grep -q '"finish_reason": "stop"' "$T/n1" || fail "tool_choice none: $(cat "$T/n1")"
post "http://127.0.0.1:$PORT_plain" "{$REQ}" > "$T/p1"
grep -q '"tool_calls"' "$T/p1" && fail "a reply without a call has tool_calls"
[ "$(jstr content < "$T/p1")" = '"Hi"' ] && grep -q '"finish_reason": "stop"' "$T/p1" ||
  fail "plain reply with tools declared: $(cat "$T/p1")"
echo "ok tool_choice: auto = no message ($auto tokens), none ($tnone) and required ($req)" \
  "add theirs, a named function = required with only that tool; none parses no calls"

# ---- malformed tools: 400, an OpenAI error, healthy after each ----
n=0
bad() {
  got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/chat/completions" -d "$2")
  [ "$got" = 400 ] || fail "$1: status $got, want 400: $(cat "$T/e")"
  grep -q '^{"error": {"message": ".*", "type": "[a-z_]*", "code": 400}}' "$T/e" ||
    fail "$1: not an OpenAI error: $(cat "$T/e")"
  [ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after: $1"
  n=$((n+1))
}
M1="\"messages\": [$U1]"
bad "tools an object" "{$M1, \"tools\": {}}"
bad "tool a string" "{$M1, \"tools\": [\"get_weather\"]}"
bad "tool type" "{$M1, \"tools\": [{\"type\": \"code\", \"function\": {\"name\": \"a\"}}]}"
bad "tool without function" "{$M1, \"tools\": [{\"type\": \"function\"}]}"
bad "tool unknown field" "{$M1, \"tools\": [{\"type\": \"function\", \"function\": {\"name\":
  \"a\"}, \"x\": 1}]}"
bad "function unknown field" "{$M1, \"tools\": [{\"type\": \"function\", \"function\":
  {\"name\": \"a\", \"params\": {}}}]}"
bad "function name missing" "{$M1, \"tools\": [{\"type\": \"function\", \"function\": {}}]}"
bad "function name spaces" "{$M1, \"tools\": [{\"type\": \"function\", \"function\":
  {\"name\": \"get weather\"}}]}"
bad "function name 65 chars" "{$M1, \"tools\": [{\"type\": \"function\", \"function\":
  {\"name\": \"$(printf 'a%.0s' $(seq 65))\"}}]}"
bad "two functions one name" "{$M1, \"tools\": [$WEATHER, $WEATHER]}"
bad "parameters a string" "{$M1, \"tools\": [{\"type\": \"function\", \"function\":
  {\"name\": \"a\", \"parameters\": \"{}\"}}]}"
bad "description a number" "{$M1, \"tools\": [{\"type\": \"function\", \"function\":
  {\"name\": \"a\", \"description\": 1}}]}"
bad "tool_choice unknown" "{$M1, \"tools\": [$WEATHER], \"tool_choice\": \"always\"}"
bad "tool_choice a number" "{$M1, \"tools\": [$WEATHER], \"tool_choice\": 1}"
bad "tool_choice names no tool" "{$M1, \"tools\": [$WEATHER], \"tool_choice\": {\"type\":
  \"function\", \"function\": {\"name\": \"search\"}}}"
bad "tool_choice required, no tools" "{$M1, \"tool_choice\": \"required\"}"
bad "parallel_tool_calls a string" "{$M1, \"tools\": [$WEATHER], \"parallel_tool_calls\": \"y\"}"
bad "tool_calls entry a string" "{\"messages\": [$U1, {\"role\": \"assistant\", \"tool_calls\":
  [\"x\"]}]}"
bad "tool_calls without function" "{\"messages\": [$U1, {\"role\": \"assistant\",
  \"tool_calls\": [{\"id\": \"a\", \"type\": \"function\"}]}]}"
bad "tool_calls arguments an object" "{\"messages\": [$U1, {\"role\": \"assistant\",
  \"tool_calls\": [{\"id\": \"a\", \"function\": {\"name\": \"f\", \"arguments\": {}}}]}]}"
bad "tool_calls arguments a JSON array" "{\"messages\": [$U1, {\"role\": \"assistant\",
  \"tool_calls\": [{\"id\": \"a\", \"function\": {\"name\": \"f\", \"arguments\": \"[1]\"}}]}]}"
bad "tool_calls type" "{\"messages\": [$U1, {\"role\": \"assistant\", \"tool_calls\":
  [{\"id\": \"a\", \"type\": \"x\", \"function\": {\"name\": \"f\"}}]}]}"
bad "tool_calls id a number" "{\"messages\": [$U1, {\"role\": \"assistant\", \"tool_calls\":
  [{\"id\": 1, \"function\": {\"name\": \"f\"}}]}]}"
bad "tool message, no call, no name" "{\"messages\": [$U1, {\"role\": \"tool\", \"content\":
  \"x\"}]}"
bad "tool message without content" "{\"messages\": [$U1, {\"role\": \"tool\", \"name\": \"f\"}]}"
bad "tool_call_id a number" "{\"messages\": [$U1, {\"role\": \"tool\", \"tool_call_id\": 3,
  \"content\": \"x\"}]}"
bad "tool_call_id on a user message" "{\"messages\": [{\"role\": \"user\", \"content\": \"x\",
  \"tool_call_id\": \"a\"}]}"
bad "tool_calls on a user message" "{\"messages\": [{\"role\": \"user\", \"content\": \"x\",
  \"tool_calls\": []}]}"
bad "role function" "{\"messages\": [{\"role\": \"function\", \"name\": \"f\",
  \"content\": \"x\"}]}"
[ $n -ge 25 ] || fail "only $n malformed tool requests"
echo "ok $n malformed tool requests: 400, an OpenAI error, healthy after each"
