#!/bin/sh
# k3 serve's POST /v1/messages (Anthropic's Messages API) on tests/models/tiny5 over
# loopback (curl): a plain reply, the same ids and text as its /v1/chat/completions twin
# (greedy, thinking off and on, tools and tool_choice through count_tokens), the stream's
# event order and its deltas joined = the plain reply, a tool call (the K3_SERVE_TEST_REPLY
# hook, as serve_tools.sh) as a tool_use block, streamed, and sent back with its tool_result
# (turn 2 resumes every id of turn 1), count_tokens, x-api-key, an error event ending a
# failed stream, malformed requests refused 400 in Anthropic's error shape, and the server
# stopping (a held stream's end, a queued message's 503 overloaded_error).
. tests/sh/lib/serve.sh

REPLY='I will check.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>'
REPLY="$REPLY"'<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
REPLY="$REPLY"'<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
REPLY="$REPLY"'<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
REPLY="$REPLY"'<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
start real
K3_SERVE_TEST_REPLY=$REPLY start hook
start keyed --api-key sekrit
U=http://127.0.0.1:$PORT_real
H=http://127.0.0.1:$PORT_hook
msg() { $C -H 'Content-Type: application/json' -H 'anthropic-version: 2023-06-01' \
          "$1/v1/messages" -d "$2"; }
chat() { $C -H 'Content-Type: application/json' "$1/v1/chat/completions" -d "$2"; }
count() { $C "$U/v1/messages/count_tokens" -d "$1" | jnum input_tokens; }
# every "KEY": "string" on stdin, one a line (jstr: the first only)
jstrs() { sed -n "s/.*\"$1\": \(\"\([^\"\\\\]\|\\\\.\)*\"\).*/\1/p"; }
# the prompt: input_tokens + cache_read_input_tokens (usage of a message)
ptoks() { echo $(( $(jnum input_tokens < "$1") + $(jnum cache_read_input_tokens < "$1") )); }

SYS='"You are terse."'
UM='{"role": "user", "content": "Hello there"}'
OFF='"thinking": {"type": "disabled"}'

# ---- a plain reply ----
msg $U "{\"model\": \"k3\", \"max_tokens\": 12, \"temperature\": 0, \"system\": $SYS,
  $OFF, \"messages\": [$UM]}" > "$T/m1"
HEAD='^{"id": "msg_[0-9]*", "type": "message", "role": "assistant", "model": "tiny5", '
grep -q "$HEAD"'"content": \[{"type": "text", "text": ' "$T/m1" ||
  fail "plain reply: $(cat "$T/m1")"
grep -qE '"stop_reason": "(max_tokens|end_turn)", "stop_sequence": null' "$T/m1" &&
  grep -qE '"usage": \{"input_tokens": [0-9]+, "output_tokens": [0-9]+, '\
'"cache_creation_input_tokens": 0, "cache_read_input_tokens": [0-9]+\}\}$' "$T/m1" ||
  fail "plain reply's stop or usage: $(cat "$T/m1")"
grep -q '"thinking"' "$T/m1" && fail "thinking disabled, yet a thinking block: $(cat "$T/m1")"
TEXT=$(jstr text < "$T/m1")
[ -n "$TEXT" ] && [ "$TEXT" != '""' ] || fail "empty text: $(cat "$T/m1")"
echo "ok a plain reply: a message, one text block $TEXT, stop_reason, usage"

# ---- the same ids and text as the chat twin ----
chat $U "{\"max_tokens\": 12, \"temperature\": 0, \"chat_template_kwargs\": {\"thinking\": false},
  \"messages\": [{\"role\": \"system\", \"content\": $SYS}, $UM]}" > "$T/c1"
[ "$(jstr content < "$T/c1")" = "$TEXT" ] || fail "chat twin's text $(jstr content < "$T/c1")" \
  "!= $TEXT"
[ "$(jnum prompt_tokens < "$T/c1")" = "$(ptoks "$T/m1")" ] &&
  [ "$(jnum completion_tokens < "$T/c1")" = "$(jnum output_tokens < "$T/m1")" ] ||
  fail "token counts differ: $(cat "$T/c1") vs $(cat "$T/m1")"
# thinking on (the default, as the chat path's), system as text blocks, content as blocks
msg $U "{\"model\": \"k3\", \"max_tokens\": 12, \"temperature\": 0, \"system\": [{\"type\":
  \"text\", \"text\": \"You are \"}, {\"type\": \"text\", \"text\": \"terse.\",
  \"cache_control\": {\"type\": \"ephemeral\"}}], \"thinking\": {\"type\": \"enabled\",
  \"budget_tokens\": 2048}, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\":
  \"text\", \"text\": \"Hello there\"}]}]}" > "$T/m2"
chat $U "{\"max_tokens\": 12, \"temperature\": 0,
  \"messages\": [{\"role\": \"system\", \"content\": $SYS}, $UM]}" > "$T/c2"
[ "$(jstr thinking < "$T/m2")" = "$(jstr reasoning_content < "$T/c2")" ] &&
  [ "$(jnum prompt_tokens < "$T/c2")" = "$(ptoks "$T/m2")" ] &&
  [ "$(jnum completion_tokens < "$T/c2")" = "$(jnum output_tokens < "$T/m2")" ] ||
  fail "thinking on: $(cat "$T/m2") vs $(cat "$T/c2")"
grep -q '"content": \[{"type": "thinking", "thinking": ".*", "signature": ""}' "$T/m2" ||
  fail "no thinking block: $(cat "$T/m2")"
echo "ok the chat twin: the same text and token counts, thinking off and on (a thinking" \
  "block = reasoning_content), system and content as text blocks"

# ---- streamed: the event order, deltas joined = the plain reply ----
msg $U "{\"model\": \"k3\", \"max_tokens\": 12, \"temperature\": 0, \"system\": $SYS,
  $OFF, \"stream\": true, \"messages\": [$UM]}" > "$T/s1"
EV=$(sed -n 's/^event: //p' "$T/s1" | tr '\n' ' ')
BLOCK='content_block_start (content_block_delta )+content_block_stop'
echo "$EV" | grep -qE "^message_start (ping )+$BLOCK message_delta message_stop \$" ||
  fail "event order: $EV"
# every event's data names it
[ "$(grep -c '^event: ' "$T/s1")" = "$(grep -c '^data: {"type": "' "$T/s1")" ] &&
  ! paste -d' ' - - - < "$T/s1" | grep -v '^event: \([a-z_]*\) data: {"type": "\1"' |
    grep -q . || fail "an event whose data is another type: $(cat "$T/s1")"
JOINED=$(grep '"type": "text_delta"' "$T/s1" | jstrs text | sed 's/^"//; s/"$//' | tr -d '\n')
[ "\"$JOINED\"" = "$TEXT" ] || fail "deltas joined \"$JOINED\" != the plain reply $TEXT"
MD='^data: {"type": "message_delta", "delta": {"stop_reason": "\(max_tokens\|end_turn\)", '
OT=$(jnum output_tokens < "$T/m1")
grep -q "$MD"'"stop_sequence": null}, "usage": {"output_tokens": '"$OT"'}' \
  "$T/s1" ||
  fail "message_delta: $(grep message_delta "$T/s1")"
echo "ok streamed: message_start ping content_block_start delta.. stop message_delta" \
  "message_stop, the deltas joined = the plain reply"

# thinking streamed: a thinking block (its signature_delta), its text = the plain reply's
msg $U "{\"model\": \"k3\", \"max_tokens\": 12, \"temperature\": 0, \"system\": $SYS,
  \"stream\": true, \"messages\": [$UM]}" > "$T/s2"
TH=$(grep '"type": "thinking_delta"' "$T/s2" | jstrs thinking | sed 's/^"//; s/"$//' | tr -d '\n')
[ "\"$TH\"" = "$(jstr reasoning_content < "$T/c2")" ] || fail "thinking deltas: \"$TH\""
grep -q '"content_block": {"type": "thinking", "thinking": "", "signature": ""}' "$T/s2" &&
  grep -q '"delta": {"type": "signature_delta", "signature": ""}' "$T/s2" ||
  fail "thinking block: $(cat "$T/s2")"
echo "ok thinking streamed: a thinking block, thinking_delta joined = reasoning_content"

# ---- stop_sequences: stop_reason stop_sequence and the string ----
SEQ=$(printf '%s' "$TEXT" | sed 's/^"//' | cut -c3-4)
msg $U "{\"model\": \"k3\", \"max_tokens\": 12, \"temperature\": 0, \"system\": $SYS, $OFF,
  \"stop_sequences\": [\"zzzz\", \"$SEQ\"], \"messages\": [$UM]}" > "$T/q1"
case $SEQ in *\\*|*\"*) echo "ok (stop_sequences skipped: an escape in '$SEQ')";; *)
  grep -qF "\"stop_reason\": \"stop_sequence\", \"stop_sequence\": \"$SEQ\"" "$T/q1" ||
    fail "stop_sequences [zzzz, $SEQ]: $(cat "$T/q1")"
  echo "ok stop_sequences: stop_reason stop_sequence, stop_sequence \"$SEQ\"";;
esac

# ---- count_tokens = the prompt of the message ----
n1=$(count "{\"model\": \"k3\", \"system\": $SYS, $OFF, \"messages\": [$UM]}")
[ "$n1" = "$(ptoks "$T/m1")" ] || fail "count_tokens $n1, the message's prompt $(ptoks "$T/m1")"
n0=$(count "{\"model\": \"k3\", \"system\": $SYS, \"messages\": [$UM]}")
[ "$n0" = "$(jnum prompt_tokens < "$T/c2")" ] || fail "count_tokens thinking on: $n0"
echo "ok count_tokens: $n1 = input_tokens + cache_read_input_tokens ($n0 thinking on)"

# ---- tools and tool_choice: the chat twin's ids (prompt lengths) ----
WS='"input_schema": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}}, "required": ["city"]}'
AW="{\"name\": \"get_weather\", \"description\": \"Weather.\", $WS}"
AS='{"name": "search", "input_schema": {"type": "object"}}'
OW="{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\":
  \"Weather.\", \"parameters\": $(echo "$WS" | sed 's/"input_schema": //')}}"
OS='{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}'
U1='{"role": "user", "content": "Weather in Paris?"}'
ctok() { chat $U "{\"messages\": [$U1], \"max_tokens\": 1, \"temperature\": 0, $1}" |
           jnum prompt_tokens; }
atok() { count "{\"model\": \"k3\", \"messages\": [$U1], $1}"; }
for pair in "\"tools\": [$AW]|\"tools\": [$OW]" \
            "\"tools\": [$AW, $AS], \"tool_choice\": {\"type\": \"auto\"}|\"tools\": [$OW, $OS]" \
            "\"tools\": [$AW], \"tool_choice\": {\"type\": \"any\"}|\"tools\": [$OW],
              \"tool_choice\": \"required\"" \
            "\"tools\": [$AW], \"tool_choice\": {\"type\": \"none\"}|\"tools\": [$OW],
              \"tool_choice\": \"none\"" \
            "\"tools\": [$AW, $AS], \"tool_choice\": {\"type\": \"tool\", \"name\":
              \"get_weather\"}|\"tools\": [$OW, $OS], \"tool_choice\": {\"type\": \"function\",
              \"function\": {\"name\": \"get_weather\"}}"; do
  a=$(atok "${pair%%|*}"); c=$(ctok "${pair#*|}")
  [ -n "$a" ] && [ "$a" = "$c" ] || fail "tools: count_tokens $a, chat $c for ${pair%%|*}"
done
[ "$(atok "\"tools\": [$AW]")" -gt "$(atok "\"max_tokens\": 1")" ] || fail "tools not rendered"
echo "ok tools and tool_choice auto/any/none/tool: the chat twin's prompt ids"

# ---- a tool call: a tool_use block; streamed; sent back with its tool_result ----
REQ="\"model\": \"k3\", \"max_tokens\": 200, \"temperature\": 0, \"tools\": [$AW]"
msg $H "{$REQ, \"messages\": [$U1]}" > "$T/t1"
TH='"content": \[{"type": "thinking", "thinking": "I will check.", "signature": ""}, '
TU='{"type": "tool_use", "id": "toolu_[0-9_]*", "name": "get_weather", "input": {"city": '
grep -q "$TH$TU"'"Paris", "days": 3}}\], "stop_reason": "tool_use", "stop_sequence": null' \
  "$T/t1" ||
  fail "tool call: $(cat "$T/t1")"
TID=$(sed -n 's/.*"id": "\(toolu_[0-9_]*\)".*/\1/p' "$T/t1")
msg $H "{$REQ, \"stream\": true, \"messages\": [$U1]}" > "$T/t2"
CB='"index": 1, "content_block": {"type": "tool_use", "id": "toolu_[0-9_]*", "name": '
JD='"index": 1, "delta": {"type": "input_json_delta", "partial_json": '
grep -q "$CB"'"get_weather", "input": {}}' "$T/t2" &&
  grep -qF "$JD"'"{\"city\": \"Paris\", \"days\": 3}"}' "$T/t2" &&
  grep -q '"delta": {"stop_reason": "tool_use"' "$T/t2" || fail "tool call streamed: $(cat "$T/t2")"
EV=$(sed -n 's/^event: //p' "$T/t2" | tr '\n' ' ')
echo "$EV" | grep -qE "^message_start (ping )+$BLOCK $BLOCK message_delta message_stop \$" ||
  fail "tool stream's event order: $EV"
echo "ok a tool call: a tool_use block (input an object), stop_reason tool_use; streamed as" \
  "content_block_start tool_use + input_json_delta"
A1="{\"role\": \"assistant\", \"content\": [{\"type\": \"thinking\",
  \"thinking\": \"I will check.\", \"signature\": \"\"}, {\"type\": \"tool_use\",
  \"id\": \"$TID\", \"name\": \"get_weather\",
  \"input\": {\"city\": \"Paris\", \"days\": 3}}]}"
R1="{\"role\": \"user\", \"content\": [{\"type\": \"tool_result\", \"tool_use_id\": \"$TID\",
  \"content\": [{\"type\": \"text\", \"text\": \"18C and sunny\"}]}, {\"type\": \"text\",
  \"text\": \"And tomorrow?\"}]}"
msg $H "{$REQ, \"messages\": [$U1, $A1, $R1]}" > "$T/t3"
p1=$(ptoks "$T/t1"); g1=$(jnum output_tokens < "$T/t1")
[ "$(jnum cache_read_input_tokens < "$T/t3")" = $((p1 + g1 - 1)) ] ||
  fail "turn 2 resumed $(jnum cache_read_input_tokens < "$T/t3"), want $p1 + $g1 - 1:" \
    "$(cat "$T/t3")"
OC="{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"I will check.\",
  \"tool_calls\": [{\"id\": \"$TID\", \"type\": \"function\", \"function\": {\"name\":
  \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 3}\"}}]}"
OT="{\"role\": \"tool\", \"tool_call_id\": \"$TID\", \"content\": \"18C and sunny\"},
  {\"role\": \"user\", \"content\": \"And tomorrow?\"}"
chat $H "{\"messages\": [$U1, $OC, $OT], \"tools\": [$OW], \"temperature\": 0,
  \"max_tokens\": 200}" > "$T/t4"
[ "$(jnum prompt_tokens < "$T/t4")" = "$(ptoks "$T/t3")" ] ||
  fail "turn 2: chat twin $(jnum prompt_tokens < "$T/t4") ids, message $(ptoks "$T/t3")"
echo "ok the tool_use and its tool_result sent back: turn 2 resumes all $((p1 + g1 - 1)) ids" \
  "of turn 1, the chat twin's prompt"

# ---- x-api-key ----
KU=http://127.0.0.1:$PORT_keyed
B="{\"model\": \"k3\", \"max_tokens\": 2, \"messages\": [$UM]}"
got=$($C -o "$T/k1" -w '%{http_code}' "$KU/v1/messages" -d "$B")
AE='^{"type": "error", "error": {"type": "authentication_error", "message": ".*"}}$'
[ "$got" = 401 ] && grep -q "$AE" "$T/k1" ||
  fail "no key: $got $(cat "$T/k1")"
got=$($C -o "$T/k2" -w '%{http_code}' -H 'x-api-key: wrong' "$KU/v1/messages" -d "$B")
[ "$got" = 401 ] || fail "a wrong x-api-key: $got"
got=$($C -o "$T/k3" -w '%{http_code}' -H 'x-api-key: sekrit' "$KU/v1/messages" -d "$B")
[ "$got" = 200 ] && grep -q '"type": "message"' "$T/k3" || fail "x-api-key: $got $(cat "$T/k3")"
got=$($C -o "$T/k4" -w '%{http_code}' -H 'Authorization: Bearer sekrit' "$KU/v1/messages" -d "$B")
[ "$got" = 200 ] || fail "Bearer: $got"
got=$($C -o "$T/k5" -w '%{http_code}' -H 'x-api-key: sekrit' "$KU/v1/messages/count_tokens" -d "$B")
[ "$got" = 200 ] || fail "count_tokens with x-api-key: $got"
echo "ok x-api-key: 401 without (authentication_error) or wrong; x-api-key or Bearer: 200"

# ---- a read that fails in a stream's prefill: an error event ends the stream ----
"$K3" pack $M "$T/trunk" > /dev/null 2>&1 || fail "k3 pack"
K3_FAULT_TRUNK_READ=3 start flt --trunk "$T/trunk" --trunk-gb 0
msg "http://127.0.0.1:$PORT_flt" "{\"model\": \"k3\", \"max_tokens\": 2, \"stream\": true,
  \"messages\": [$UM]}" > "$T/f1"
EV=$(sed -n 's/^event: //p' "$T/f1" | tr '\n' ' ')
echo "$EV" | grep -qE '^message_start (ping )+error $' &&
  grep -q '^data: {"type": "error", "error": {"type": "api_error", "message": "trunk read failed' \
    "$T/f1" || fail "a failed stream: $(cat "$T/f1")"
echo "ok a read that fails in a stream's prefill: message_start, ping, an error event" \
  "(api_error, the reason)"

# ---- malformed: 400, Anthropic's error, healthy after each ----
n=0
bad() {
  got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/messages" -d "$2")
  [ "$got" = 400 ] || fail "$1: status $got, want 400: $(cat "$T/e")"
  grep -q '^{"type": "error", "error": {"type": "invalid_request_error", "message": ".*"}}$' \
    "$T/e" || fail "$1: not Anthropic's error: $(cat "$T/e")"
  [ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after: $1"
  n=$((n+1))
}
MT="\"model\": \"k3\", \"max_tokens\": 8"
bad "not JSON" "{\"model\": "
bad "an array" "[]"
bad "no max_tokens" "{\"model\": \"k3\", \"messages\": [$UM]}"
bad "max_tokens 0" "{\"model\": \"k3\", \"max_tokens\": 0, \"messages\": [$UM]}"
bad "no messages" "{$MT}"
bad "messages empty" "{$MT, \"messages\": []}"
bad "unknown field" "{$MT, \"messages\": [$UM], \"frequency_penalty\": 1}"
bad "role system" "{$MT, \"messages\": [{\"role\": \"system\", \"content\": \"x\"}]}"
bad "content a number" "{$MT, \"messages\": [{\"role\": \"user\", \"content\": 3}]}"
bad "content empty" "{$MT, \"messages\": [{\"role\": \"user\", \"content\": []}]}"
bad "an image block with an empty source" "{$MT, \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\",
  \"source\": {}}]}]}"
bad "a final assistant message" "{$MT, \"messages\": [$UM, {\"role\": \"assistant\",
  \"content\": \"Sure\"}]}"
bad "tool_use in a user message" "{$MT, \"messages\": [{\"role\": \"user\", \"content\":
  [{\"type\": \"tool_use\", \"id\": \"a\", \"name\": \"f\", \"input\": {}}]}]}"
bad "tool_use input a string" "{$MT, \"messages\": [$UM, {\"role\": \"assistant\", \"content\":
  [{\"type\": \"tool_use\", \"id\": \"a\", \"name\": \"f\", \"input\": \"{}\"}]}, $UM]}"
bad "tool_result without tool_use_id" "{$MT, \"messages\": [{\"role\": \"user\", \"content\":
  [{\"type\": \"tool_result\", \"content\": \"x\"}]}]}"
bad "temperature 1.5" "{$MT, \"temperature\": 1.5, \"messages\": [$UM]}"
bad "stop_sequences a string" "{$MT, \"stop_sequences\": \"x\", \"messages\": [$UM]}"
bad "five stop_sequences" "{$MT, \"stop_sequences\": [\"a\", \"b\", \"c\", \"d\", \"e\"],
  \"messages\": [$UM]}"
bad "thinking type" "{$MT, \"thinking\": {\"type\": \"on\"}, \"messages\": [$UM]}"
bad "tool without input_schema" "{$MT, \"tools\": [{\"name\": \"f\"}], \"messages\": [$UM]}"
bad "a server tool" "{$MT, \"tools\": [{\"type\": \"web_search_20250305\", \"name\":
  \"web_search\"}], \"messages\": [$UM]}"
bad "tool_choice a string" "{$MT, \"tools\": [$AW], \"tool_choice\": \"auto\", \"messages\": [$UM]}"
bad "tool_choice any without tools" "{$MT, \"tool_choice\": {\"type\": \"any\"},
  \"messages\": [$UM]}"
bad "tool_choice names no tool" "{$MT, \"tools\": [$AW], \"tool_choice\": {\"type\": \"tool\",
  \"name\": \"search\"}, \"messages\": [$UM]}"
bad "system a number" "{$MT, \"system\": 1, \"messages\": [$UM]}"
bad "stream a string" "{$MT, \"stream\": \"yes\", \"messages\": [$UM]}"
[ $n -ge 20 ] || fail "only $n malformed requests"
got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/messages/count_tokens" -d '{"messages": 1}')
[ "$got" = 400 ] && grep -q '"type": "invalid_request_error"' "$T/e" ||
  fail "count_tokens malformed: $got $(cat "$T/e")"
got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/messages")
[ "$got" = 405 ] && grep -q '^{"type": "error", "error": {"type": "' "$T/e" ||
  fail "GET /v1/messages: $got $(cat "$T/e")"
# the other endpoints keep OpenAI's shape
$C "$U/v1/chat/completions" -d '{}' | grep -q '^{"error": {"message": ' ||
  fail "chat's errors changed shape"
msg $U "$B" | grep -q '"type": "message"' || fail "no reply after the malformed requests"
echo "ok $n malformed requests (and count_tokens', GET): 400 in Anthropic's shape, healthy" \
  "after each; chat's errors stay OpenAI's"

# ---- the server stopping: a held stream ends (k3_stop interrupted, message_stop), a
# queued message is answered 503 overloaded_error (K3_SERVE_TEST_HOLD, as serve_shutdown.sh)
K3_SERVE_TEST_HOLD=4 start hold
SU="http://127.0.0.1:$PORT_hold"
SPID=${PIDS##* }
$C -N "$SU/v1/messages" -d "{\"model\": \"k3\", \"max_tokens\": 3000, \"stream\": true,
  \"messages\": [$UM]}" > "$T/hs" &
c1=$!
i=0
while ! grep -q 'request [0-9]* holds after 4 tokens' "$T/hold.err"; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the stream did not reach its hold"
  sleep 0.1
done
$C -o "$T/hq" -w '%{http_code}' "$SU/v1/messages" -d "$B" > "$T/hc" &
c2=$!
i=0
while ! $C "$SU/metrics" | grep -q '^k3_queue_length 1$'; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the second message is not queued"
  sleep 0.1
done
kill -INT "$SPID"
wait "$c1"; wait "$c2"
wait "$SPID" || fail "SIGINT: the server exited $?"
[ "$(cat "$T/hc")" = 503 ] &&
  grep -q '^{"type": "error", "error": {"type": "overloaded_error", "message": "the server '\
'is stopping"}}$' "$T/hq" || fail "the queued message got $(cat "$T/hc") $(cat "$T/hq")"
MD='^data: {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": '
grep -q "$MD"'null}, "usage": {"output_tokens": 4}, "k3_stop": "interrupted"}$' "$T/hs" &&
  tail -n 2 "$T/hs" | grep -q '^data: {"type": "message_stop"}$' ||
  fail "the held stream's end: $(tail -n 6 "$T/hs")"
echo "ok the server stopping: a held stream ends with message_delta (k3_stop interrupted)" \
  "and message_stop, a queued message gets 503 overloaded_error"
