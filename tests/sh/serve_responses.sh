#!/bin/sh
# k3 serve's POST /v1/responses (OpenAI's Responses API) on tests/models/tiny5 over loopback
# (curl): a plain reply with instructions, the same text and token counts as its
# /v1/chat/completions twin (greedy, reasoning off and on), the stream's event order and
# its deltas joined = the plain reply, a function call (the K3_SERVE_TEST_REPLY hook, as
# serve_tools.sh) as a function_call item, streamed, and sent back with its
# function_call_output (turn 2 resumes every id of turn 1), previous_response_id after
# store: true (404 naming it after store false), malformed requests refused 400 in
# OpenAI's error shape with the server still answering.
. tests/sh/lib/serve.sh

REPLY='I will check.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>'
REPLY="$REPLY"'<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
REPLY="$REPLY"'<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
REPLY="$REPLY"'<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
REPLY="$REPLY"'<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
start real
K3_SERVE_TEST_REPLY=$REPLY start hook
U=http://127.0.0.1:$PORT_real
H=http://127.0.0.1:$PORT_hook
resp() { $C -H 'Content-Type: application/json' "$1/v1/responses" -d "$2"; }
chat() { $C -H 'Content-Type: application/json' "$1/v1/chat/completions" -d "$2"; }
jstrs() { sed -n "s/.*\"$1\": \(\"\([^\"\\\\]\|\\\\.\)*\"\).*/\1/p"; }
# the text of the output_text part (of the message item), the reasoning summary's
otext() { sed -n 's/.*"type": "output_text", "text": \("\([^"\\]\|\\.\)*"\).*/\1/p' "$1"; }
rtext() { sed -n 's/.*"type": "summary_text", "text": \("\([^"\\]\|\\.\)*"\).*/\1/p' "$1" |
            head -n 1; }

INS='"instructions": "You are terse."'
OFF='"reasoning": {"effort": "none"}'
G='"model": "k3", "max_output_tokens": 12, "temperature": 0'

# ---- a plain reply ----
resp $U "{$G, $INS, $OFF, \"input\": \"Hello there\"}" > "$T/r1"
HEAD='^{"id": "resp_[0-9]*", "object": "response", "created_at": [0-9]*, "status": '
grep -qE "$HEAD"'"(completed|incomplete)", ' "$T/r1" &&
  grep -q '"output": \[{"id": "msg_[0-9]*", "type": "message", "status": "completed", '\
'"role": "assistant", "content": \[{"type": "output_text", "text": ".*", '\
'"annotations": \[\]}\]}\]' "$T/r1" || fail "plain reply: $(cat "$T/r1")"
grep -qE '"usage": \{"input_tokens": [0-9]+, "input_tokens_details": \{"cached_tokens": '\
'[0-9]+\}, "output_tokens": [0-9]+, "output_tokens_details": \{"reasoning_tokens": 0\}, '\
'"total_tokens": [0-9]+\}\}$' "$T/r1" || fail "usage: $(cat "$T/r1")"
grep -q '"type": "reasoning"' "$T/r1" && fail "reasoning off, yet a reasoning item"
TEXT=$(otext "$T/r1")
[ -n "$TEXT" ] && [ "$TEXT" != '""' ] || fail "empty text: $(cat "$T/r1")"
if [ "$(jnum output_tokens < "$T/r1")" = 12 ]; then
  grep -q '"status": "incomplete", "error": null, "incomplete_details": {"reason": '\
'"max_output_tokens"}' "$T/r1" || fail "12 tokens, not incomplete: $(cat "$T/r1")"
fi
echo "ok a plain reply: a response, one message item with output_text $TEXT, usage"

# ---- the chat twin: the same text and token counts (instructions = a system message) ----
SM='{"role": "system", "content": "You are terse."}'
UM='{"role": "user", "content": "Hello there"}'
chat $U "{\"max_tokens\": 12, \"temperature\": 0, \"reasoning_effort\": \"none\",
  \"messages\": [$SM, $UM]}" > "$T/c1"
[ "$(jstr content < "$T/c1")" = "$TEXT" ] &&
  [ "$(jnum prompt_tokens < "$T/c1")" = "$(jnum input_tokens < "$T/r1")" ] &&
  [ "$(jnum completion_tokens < "$T/c1")" = "$(jnum output_tokens < "$T/r1")" ] ||
  fail "chat twin: $(cat "$T/c1") vs $(cat "$T/r1")"
# reasoning on (the default), input as a message item with input_text parts
resp $U "{$G, $INS, \"input\": [{\"type\": \"message\", \"role\": \"user\", \"content\":
  [{\"type\": \"input_text\", \"text\": \"Hello \"}, {\"type\": \"input_text\",
  \"text\": \"there\"}]}]}" > "$T/r2"
chat $U "{\"max_tokens\": 12, \"temperature\": 0, \"messages\": [$SM, {\"role\": \"user\",
  \"content\": [{\"type\": \"text\", \"text\": \"Hello \"}, {\"type\": \"text\",
  \"text\": \"there\"}]}]}" > "$T/c2"
[ "$(rtext "$T/r2")" = "$(jstr reasoning_content < "$T/c2")" ] &&
  [ "$(jnum prompt_tokens < "$T/c2")" = "$(jnum input_tokens < "$T/r2")" ] &&
  [ "$(jnum completion_tokens < "$T/c2")" = "$(jnum output_tokens < "$T/r2")" ] ||
  fail "reasoning on: $(cat "$T/r2") vs $(cat "$T/c2")"
grep -q '"output": \[{"id": "rs_[0-9]*", "type": "reasoning", "summary": \[{"type": '\
'"summary_text", "text": ' "$T/r2" || fail "no reasoning item: $(cat "$T/r2")"
[ "$(jnum reasoning_tokens < "$T/r2")" -gt 0 ] || fail "reasoning_tokens 0: $(cat "$T/r2")"
echo "ok the chat twin: the same text and token counts, reasoning off and on (a reasoning" \
  "item = reasoning_content), instructions = a system message"

# ---- streamed: the event order, deltas joined = the plain reply ----
resp $U "{$G, $INS, $OFF, \"stream\": true, \"input\": \"Hello there\"}" > "$T/s1"
EV=$(sed -n 's/^event: //p' "$T/s1" | tr '\n' ' ')
MSG='response.output_item.added response.content_part.added (response.output_text.delta )+'
MSG="${MSG}response.output_text.done response.content_part.done response.output_item.done"
echo "$EV" | grep -qE "^response.created response.in_progress $MSG "\
'response.(completed|incomplete) $' || fail "event order: $EV"
# every event's data names it; sequence numbers 0, 1, 2, ...
! paste -d' ' - - - < "$T/s1" | grep -v '^event: \([a-z_.]*\) data: {"type": "\1", '\
'"sequence_number": [0-9]*' | grep -q . || fail "an event whose data is another type"
SQ=$(sed -n 's/.*"sequence_number": \([0-9]*\).*/\1/p' "$T/s1" | tr '\n' ' ')
[ "$SQ" = "$(seq 0 $(($(grep -c '^event: ' "$T/s1") - 1)) | tr '\n' ' ')" ] ||
  fail "sequence numbers: $SQ"
JOINED=$(grep '"type": "response.output_text.delta"' "$T/s1" | jstrs delta |
           sed 's/^"//; s/"$//' | tr -d '\n')
[ "\"$JOINED\"" = "$TEXT" ] || fail "deltas joined \"$JOINED\" != the plain reply $TEXT"
grep '"type": "response.output_text.done"' "$T/s1" | grep -qF "\"text\": $TEXT}" &&
  tail -n 2 "$T/s1" | grep -qF "\"text\": $TEXT, \"annotations\": []}]}]" ||
  fail "the done text or the completed response: $(tail -n 2 "$T/s1")"
[ "$(tail -n 2 "$T/s1" | jnum output_tokens)" = "$(jnum output_tokens < "$T/r1")" ] ||
  fail "stream's usage: $(tail -n 2 "$T/s1")"
echo "ok streamed: created, in_progress, output_item / content_part added, text deltas," \
  "done events, completed with the whole response; the deltas joined = the plain reply"
# reasoning streamed: summary deltas joined = the plain reply's reasoning item
resp $U "{$G, $INS, \"stream\": true, \"input\": \"Hello there\"}" > "$T/s2"
RS=$(grep '"type": "response.reasoning_summary_text.delta"' "$T/s2" | jstrs delta |
       sed 's/^"//; s/"$//' | tr -d '\n')
[ "\"$RS\"" = "$(jstr reasoning_content < "$T/c2")" ] || fail "reasoning deltas: \"$RS\""
sed -n 's/^event: //p' "$T/s2" | head -n 4 | tail -n 2 | tr '\n' ' ' |
  grep -q '^response.output_item.added response.reasoning_summary_part.added $' ||
  fail "reasoning stream: $(sed -n 's/^event: //p' "$T/s2" | tr '\n' ' ')"
echo "ok reasoning streamed: a reasoning item, its summary deltas joined = reasoning_content"

# ---- a function call: a function_call item; streamed; sent back with its output ----
WP='"parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "days": {"type": "integer"}}, "required": ["city"]}'
RT="{\"type\": \"function\", \"name\": \"get_weather\", \"description\": \"Weather.\", $WP,
  \"strict\": false}"
OW="{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\":
  \"Weather.\", $WP}}"
REQ="\"model\": \"k3\", \"max_output_tokens\": 200, \"temperature\": 0, \"tools\": [$RT]"
resp $H "{$REQ, \"input\": \"Weather in Paris?\"}" > "$T/t1"
FC='{"id": "fc_[0-9_]*", "type": "function_call", "status": "completed", "call_id": '
grep -q '"status": "completed", ' "$T/t1" &&
  grep -q '"output": \[{"id": "rs_[0-9]*", "type": "reasoning", "summary": \[{"type": '\
'"summary_text", "text": "I will check."}\]}, '"$FC"'"call_[0-9_]*", "name": '\
'"get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}\]' "$T/t1" ||
  fail "function call: $(cat "$T/t1")"
CID=$(sed -n 's/.*"call_id": "\(call_[0-9_]*\)".*/\1/p' "$T/t1")
resp $H "{$REQ, \"stream\": true, \"input\": \"Weather in Paris?\"}" > "$T/t2"
EV=$(sed -n 's/^event: //p' "$T/t2" | tr '\n' ' ')
FEV='response.output_item.added response.function_call_arguments.delta '
FEV="${FEV}response.function_call_arguments.done response.output_item.done"
echo "$EV" | grep -qE "output_item.done $FEV response.completed \$" &&
  grep -qF '"delta": "{\"city\": \"Paris\", \"days\": 3}"' "$T/t2" ||
  fail "function call streamed: $EV $(cat "$T/t2")"
echo "ok a function call: a function_call item (call_id, name, arguments) after the" \
  "reasoning item; streamed as output_item.added + function_call_arguments delta/done"
I1='{"role": "user", "content": "Weather in Paris?"}'
RI='{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text",
  "text": "I will check."}]}'
FI="{\"type\": \"function_call\", \"call_id\": \"$CID\", \"name\": \"get_weather\",
  \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 3}\"}"
FO="{\"type\": \"function_call_output\", \"call_id\": \"$CID\", \"output\": \"18C and sunny\"}"
I2='{"role": "user", "content": "And tomorrow?"}'
resp $H "{$REQ, \"input\": [$I1, $RI, $FI, $FO, $I2]}" > "$T/t3"
p1=$(jnum input_tokens < "$T/t1"); g1=$(jnum output_tokens < "$T/t1")
[ "$(jnum cached_tokens < "$T/t3")" = $((p1 + g1 - 1)) ] ||
  fail "turn 2 resumed $(jnum cached_tokens < "$T/t3"), want $p1 + $g1 - 1: $(cat "$T/t3")"
OC="{\"role\": \"assistant\", \"content\": null, \"reasoning_content\": \"I will check.\",
  \"tool_calls\": [{\"id\": \"$CID\", \"type\": \"function\", \"function\": {\"name\":
  \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"days\\\": 3}\"}}]}"
OT="{\"role\": \"tool\", \"tool_call_id\": \"$CID\", \"content\": \"18C and sunny\"}"
chat $H "{\"messages\": [$I1, $OC, $OT, $I2], \"tools\": [$OW], \"temperature\": 0,
  \"max_tokens\": 200}" > "$T/t4"
[ "$(jnum prompt_tokens < "$T/t4")" = "$(jnum input_tokens < "$T/t3")" ] ||
  fail "turn 2: chat twin $(jnum prompt_tokens < "$T/t4") ids, response $(cat "$T/t3")"
echo "ok the function_call and its function_call_output sent back: turn 2 resumes all" \
  "$((p1 + g1 - 1)) ids of turn 1, the chat twin's prompt"
# tool_choice forcing a function, and "required": the chat twin's prompt
for pair in "{\"type\": \"function\", \"name\": \"get_weather\"}|{\"type\": \"function\",
              \"function\": {\"name\": \"get_weather\"}}" "\"required\"|\"required\""; do
  a=$(resp $U "{$REQ, \"max_output_tokens\": 1, \"tool_choice\": ${pair%%|*},
        \"input\": \"Weather in Paris?\"}" | jnum input_tokens)
  c=$(chat $U "{\"max_tokens\": 1, \"tools\": [$OW], \"tool_choice\": ${pair#*|},
        \"messages\": [$I1]}" | jnum prompt_tokens)
  [ -n "$a" ] && [ "$a" = "$c" ] || fail "tool_choice ${pair%%|*}: $a vs chat $c"
done
echo "ok tool_choice {function} and required: the chat twin's prompt ids"

# ---- previous_response_id: a stored response continued; store false keeps nothing ----
resp $U "{$G, $OFF, \"store\": true, \"input\": \"Hello there\"}" > "$T/p1"
RID=$(sed -n 's/^{"id": "\(resp_[0-9]*\)".*/\1/p' "$T/p1")
grep -q '"store": true' "$T/p1" || fail "store: $(cat "$T/p1")"
resp $U "{$G, $OFF, \"store\": true, \"previous_response_id\": \"$RID\",
  \"input\": \"And then?\"}" > "$T/p2"
grep -q "\"previous_response_id\": \"$RID\"" "$T/p2" || fail "turn 2: $(cat "$T/p2")"
A1="{\"role\": \"assistant\", \"content\": $(otext "$T/p1")}"
chat $U "{\"max_tokens\": 12, \"temperature\": 0, \"reasoning_effort\": \"none\",
  \"messages\": [$UM, $A1, {\"role\": \"user\", \"content\": \"And then?\"}]}" > "$T/p3"
[ "$(jnum prompt_tokens < "$T/p3")" = "$(jnum input_tokens < "$T/p2")" ] &&
  [ "$(jstr content < "$T/p3")" = "$(otext "$T/p2")" ] ||
  fail "previous_response_id: $(cat "$T/p2") vs chat $(cat "$T/p3")"
# at least turn 1's prompt resumed (its reply's ids too where its text tokenizes back to
# them; tiny5's random text need not)
[ "$(jnum cached_tokens < "$T/p2")" -ge "$(jnum input_tokens < "$T/p1")" ] ||
  fail "turn 2 resumed only $(jnum cached_tokens < "$T/p2"): $(cat "$T/p2")"
# a third turn on the second (the chain)
RID2=$(sed -n 's/^{"id": "\(resp_[0-9]*\)".*/\1/p' "$T/p2")
resp $U "{$G, $OFF, \"previous_response_id\": \"$RID2\", \"input\": \"Ok.\"}" > "$T/p4"
[ "$(jnum input_tokens < "$T/p4")" -gt "$(jnum input_tokens < "$T/p2")" ] &&
  [ "$(jnum cached_tokens < "$T/p4")" -ge "$(jnum input_tokens < "$T/p2")" ] ||
  fail "turn 3: $(cat "$T/p4")"
resp $U "{$G, $OFF, \"store\": false, \"input\": \"Hello there\"}" > "$T/n1"
NID=$(sed -n 's/^{"id": "\(resp_[0-9]*\)".*/\1/p' "$T/n1")
for id in "$NID" "$(sed -n 's/^{"id": "\(resp_[0-9]*\)".*/\1/p' "$T/p4")"; do
  got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/responses" -d "{$G, \"previous_response_id\":
    \"$id\", \"input\": \"And then?\"}")
  [ "$got" = 404 ] && grep -q "previous_response_id '$id' not found" "$T/e" ||
    fail "previous_response_id $id (not stored): $got $(cat "$T/e")"
done
grep -q '^{"error": {"message": "previous_response_id .resp_[0-9]*. not found: .*", '\
'"type": "not_found_error", "param": null, "code": null}}$' "$T/e" || fail "404: $(cat "$T/e")"
echo "ok previous_response_id: a stored response continued (the chat twin's prompt, its ids" \
  "resumed), a chain of three; store false or absent: 404 naming the id"

# ---- a read that fails in a stream's prefill: an error event ends the stream ----
"$K3" pack $M "$T/trunk" > /dev/null 2>&1 || fail "k3 pack"
K3_FAULT_TRUNK_READ=3 start flt --trunk "$T/trunk" --trunk-gb 0
resp "http://127.0.0.1:$PORT_flt" "{$G, \"stream\": true, \"input\": \"Hello there\"}" \
  > "$T/f1"
EV=$(sed -n 's/^event: //p' "$T/f1" | tr '\n' ' ')
[ "$EV" = "response.created response.in_progress error " ] &&
  grep -q '^data: {"type": "error", "sequence_number": 2, "code": "server_error", '\
'"message": "trunk read failed.*", "param": null}$' "$T/f1" ||
  fail "a failed stream: $(cat "$T/f1")"
# not streamed: a 500 in OpenAI's shape
got=$($C -o "$T/f2" -w '%{http_code}' "http://127.0.0.1:$PORT_flt/v1/responses" \
        -d "{$G, \"input\": \"Hello there\"}")
[ "$got" = 500 ] && grep -q '"type": "server_error", "param": null, "code": null}}$' "$T/f2" ||
  fail "a failed response: $got $(cat "$T/f2")"
echo "ok a read that fails: a stream's error event (server_error, the reason) after" \
  "created and in_progress; not streamed, a 500 in OpenAI's shape"

# ---- malformed: 400, OpenAI's error shape, healthy after each ----
n=0
bad() {
  got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/responses" -d "$2")
  [ "$got" = 400 ] || fail "$1: status $got, want 400: $(cat "$T/e")"
  grep -q '^{"error": {"message": ".*", "type": "invalid_request_error", "param": null, '\
'"code": null}}$' "$T/e" || fail "$1: not OpenAI's error: $(cat "$T/e")"
  [ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after: $1"
  n=$((n+1))
}
MT='"model": "k3", "max_output_tokens": 8'
bad "not JSON" "{\"model\": "
bad "an array" "[]"
bad "no input" "{$MT}"
bad "input empty" "{$MT, \"input\": []}"
bad "input a number" "{$MT, \"input\": 3}"
bad "unknown field" "{$MT, \"input\": \"x\", \"frequency_penalty\": 1}"
bad "max_output_tokens 0" "{\"max_output_tokens\": 0, \"input\": \"x\"}"
bad "temperature 3" "{$MT, \"temperature\": 3, \"input\": \"x\"}"
bad "role tool" "{$MT, \"input\": [{\"role\": \"tool\", \"content\": \"x\"}]}"
bad "an image part with an http URL (not fetched)" "{$MT, \"input\": [{\"role\": \"user\", \"content\": [{\"type\":
  \"input_image\", \"image_url\": \"http://x\"}]}]}"
bad "an unknown item" "{$MT, \"input\": [{\"type\": \"item_reference\", \"id\": \"x\"}]}"
bad "function_call without arguments" "{$MT, \"input\": [{\"type\": \"function_call\",
  \"call_id\": \"c\", \"name\": \"f\"}]}"
bad "function_call_output without call_id" "{$MT, \"input\": [{\"type\":
  \"function_call_output\", \"output\": \"x\"}]}"
bad "a built-in tool" "{$MT, \"tools\": [{\"type\": \"web_search\"}], \"input\": \"x\"}"
bad "a tool without a name" "{$MT, \"tools\": [{\"type\": \"function\"}], \"input\": \"x\"}"
bad "tool_choice required without tools" "{$MT, \"tool_choice\": \"required\", \"input\": \"x\"}"
bad "tool_choice a hosted tool" "{$MT, \"tools\": [$RT], \"tool_choice\": {\"type\":
  \"file_search\"}, \"input\": \"x\"}"
bad "reasoning effort" "{$MT, \"reasoning\": {\"effort\": \"huge\"}, \"input\": \"x\"}"
bad "instructions a number" "{$MT, \"instructions\": 1, \"input\": \"x\"}"
bad "stream a string" "{$MT, \"stream\": \"yes\", \"input\": \"x\"}"
bad "store a string" "{$MT, \"store\": \"yes\", \"input\": \"x\"}"
bad "background" "{$MT, \"background\": true, \"input\": \"x\"}"
bad "text.format json_schema" "{$MT, \"text\": {\"format\": {\"type\": \"json_schema\"}},
  \"input\": \"x\"}"
bad "previous_response_id not an id" "{$MT, \"previous_response_id\": \"abc\", \"input\": \"x\"}"
[ $n -ge 20 ] || fail "only $n malformed requests"
got=$($C -o "$T/e" -w '%{http_code}' "$U/v1/responses")
[ "$got" = 405 ] || fail "GET /v1/responses: $got $(cat "$T/e")"
$C "$U/v1/chat/completions" -d '{}' | grep -q '"code": 400}}$' || fail "chat's errors changed"
resp $U "{$MT, \"input\": \"x\"}" | grep -q '"object": "response"' ||
  fail "no reply after the malformed requests"
echo "ok $n malformed requests: 400 in OpenAI's shape (param, code), healthy after each;" \
  "chat's errors unchanged"
# ---- the server stopping: a held stream ends (k3_stop interrupted, response.completed), a
# queued response is answered 503 in OpenAI's shape (K3_SERVE_TEST_HOLD, as serve_shutdown.sh)
K3_SERVE_TEST_HOLD=4 start hold
SU="http://127.0.0.1:$PORT_hold"
SPID=${PIDS##* }
$C -N "$SU/v1/responses" -d '{"max_output_tokens": 3000, "stream": true, "input": "Hi"}' \
  > "$T/hs" &
c1=$!
i=0
while ! grep -q 'request [0-9]* holds after 4 tokens' "$T/hold.err"; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the stream did not reach its hold"
  sleep 0.1
done
$C -o "$T/hq" -w '%{http_code}' "$SU/v1/responses" -d '{"input": "Hi"}' > "$T/hc" &
c2=$!
i=0
while ! $C "$SU/metrics" | grep -q '^k3_queue_length 1$'; do
  i=$((i+1)); [ $i -gt 300 ] && fail "the second response is not queued"
  sleep 0.1
done
kill -INT "$SPID"
wait "$c1"; wait "$c2"
wait "$SPID" || fail "SIGINT: the server exited $?"
[ "$(cat "$T/hc")" = 503 ] && grep -q '^{"error": {"message": "the server is stopping", '\
'"type": ".*", "param": null, "code": null}}$' "$T/hq" ||
  fail "the queued response got $(cat "$T/hc") $(cat "$T/hq")"
tail -n 2 "$T/hs" | grep -q '^data: {"type": "response.completed", .*"status": "completed", '\
'.*"k3_stop": "interrupted", .*"output_tokens": 4, ' ||
  fail "the held stream's end: $(tail -n 6 "$T/hs")"
echo "ok the server stopping: a held stream ends with response.completed (k3_stop" \
  "interrupted), a queued response gets 503 in OpenAI's shape"
echo "PASS: serve_responses.sh"
