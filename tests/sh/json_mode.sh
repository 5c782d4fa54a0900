#!/bin/sh
# JSON mode on tiny5 (a random model: what it writes is the mask's doing): seeded replies
# under a json_schema (200; make test: 20) and under json_object all parse whole and match,
# checked by tests/c/test_json_check.c (a parser and the schema's rules of its own); the
# replies of requests in flight together equal those one at a time (the mask is a function
# of the reply's bytes, so batching cannot move it); a greedy reply matches too;
# unsupported keywords and bad response_formats are refused with 400 naming them.
. tests/sh/lib/serve.sh
CHK=${BUILD:-build}/tests/test_json_check
[ -x "$CHK" ] || fail "$CHK missing (make test builds it)"
N=20; P=8; O=10; [ -n "${K3_TEST_FULL:-}" ] && { N=200; P=16; O=20; }
S='{"type": "object", "properties": {"n": {"type": "integer"}, "b": {"type": "boolean"},
  "c": {"enum": ["x", "yy", 3]}, "s": {"type": "string", "maxLength": 5},
  "l": {"type": "array", "items": {"type": "null"}, "minItems": 1, "maxItems": 2}},
  "required": ["n", "c"], "additionalProperties": false}'
RF="\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"t\",
  \"strict\": true, \"schema\": $S}}"
start main
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }
chat() { post /v1/chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"$1\"}],
  \"max_tokens\": 400, \"seed\": $2, $RF}" | sed 's/"created": [0-9]*, //; s/"id": "[^"]*", //
  s/"cached_tokens": [0-9]*//'; }
i=1
while [ $i -le $N ]; do chat "Reply $i" $i >> "$T/seq.jsonl"; i=$((i + 1)); done
grep -c '"finish_reason": "stop"' "$T/seq.jsonl" | grep -qx "$N" ||
  fail "not every reply ended: $(grep -v '"finish_reason": "stop"' "$T/seq.jsonl" | head -n 2)"
"$CHK" schema "$T/seq.jsonl" || fail "schema replies"
# the first P again, 8 in flight at a time: the same bytes
for i in $(seq 1 $P); do                  # (wait on these: the server is a child too)
  chat "Reply $i" $i > "$T/par.$i" & W="${W:-} $!"
  [ $((i % 8)) -eq 0 ] && { for w in $W; do wait "$w"; done; W=; }
done
for i in $(seq 1 $P); do
  sed -n "${i}p" "$T/seq.jsonl" | cmp -s - "$T/par.$i" ||
    fail "reply $i differs in a batch: $(cat "$T/par.$i")"
done
echo "ok json mode: $N seeded schema replies parse and match; $P in 8s in flight equal"

i=1
while [ $i -le $O ]; do
  post /v1/completions "{\"prompt\": \"Item $i\", \"max_tokens\": 300, \"seed\": $i,
    \"logit_bias\": {\"92\": 4, \"1\": 4}, \"response_format\": {\"type\": \"json_object\"}}" \
    >> "$T/obj.jsonl"
  i=$((i + 1))
done
grep -c '"finish_reason": "stop"' "$T/obj.jsonl" | grep -qx $O || fail "json_object: not ended"
"$CHK" object "$T/obj.jsonl" || fail "json_object replies"
post /v1/chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"Greedy\"}],
  \"max_tokens\": 400, \"temperature\": 0, $RF}" > "$T/g.json"
"$CHK" schema "$T/g.json" || fail "greedy reply"
echo "ok json mode: $O json_object completions parse as objects; a greedy reply matches"

# the one-shot command's --json-schema: the server's ids (chat, system + user = what
# --system-file renders), seeded sampling; refusals exit 2
printf '%s' "$S" > "$T/schema.json"; printf 'Be brief.' > "$T/sys.txt"
for seed in 5 6 7; do
  "$K3" $M --tok $TK --system-file "$T/sys.txt" --prompt "Reply $seed" --json-schema \
    "$T/schema.json" --temperature 1 --seed $seed --gen 400 --out "$T/o.json" --quiet \
    > /dev/null 2> "$T/run.err" || fail "one-shot --json-schema exited $?"
  want=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/o.json" | tr -d ' ' |
         sed 's/,[0-9]*$//')                          # less the end token
  post /v1/chat/completions "{\"messages\": [{\"role\": \"system\", \"content\":
    \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Reply $seed\"}], \"seed\": $seed,
    \"max_tokens\": 400, \"logprobs\": true, $RF}" > "$T/r.json"
  got=$(grep -o '{"id": [0-9][0-9]*' "$T/r.json" | sed 's/.*: //' | paste -sd, -)
  [ -n "$got" ] && [ "$got" = "$want" ] || fail "seed $seed: server $got, one-shot $want"
done
# a batch line's response_format: the one-shot's ids, beside another line, with --spec
"$K3" $M --tok $TK --ids 51,273,274 --json-schema "$T/schema.json" --temperature 1 --seed 4 \
  --gen 400 --out "$T/o.json" --quiet > /dev/null 2> "$T/run.err" || fail "one-shot --ids"
want=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/o.json")
printf '{"id": "a", "ids": [51, 273, 274], "gen": 400, "temperature": 1, "seed": 4, %s}
{"id": "b", "ids": [1, 2, 3], "gen": 20, "temperature": 1, "seed": 2}\n' \
  "$(echo "$RF" | tr -d '\n')" > "$T/b.jsonl"
"$K3" $M --tok $TK --batch "$T/b.jsonl" --batch-size 2 --spec --quiet > "$T/b.out" \
  2> "$T/b.err" || fail "batch exited $?"
got=$(sed -n 's/^{"id": "a", "generated_ids": \[\([^]]*\)\].*/\1/p' "$T/b.out")
[ -n "$got" ] && [ "$got" = "$want" ] || fail "batch line: $got, one-shot: $want"
printf '{"ids": [1], "response_format": {"type": "json_schema", "json_schema": {"schema":
  {"not": {}}}}}\n' | tr -d '\n' > "$T/bad.jsonl"
"$K3" $M --tok $TK --batch "$T/bad.jsonl" --quiet > /dev/null 2> "$T/bad.err"
[ $? -eq 2 ] && grep -q "line 1: .*the keyword 'not'" "$T/bad.err" ||
  fail "batch not: $(cat "$T/bad.err")"
# speculation: every row of a verify pass is masked as its own step would be, so drafts
# (all right, right then wrong, wrong, the model's own) leave the ids as they were
part=$(echo "$want" | tr -d ' ' | cut -d, -f1-3),7,7,7
for d in "--draft-ids $(echo "$want" | tr -d ' ')" "--draft-ids $part" "--draft-ids 9,9,9" ""; do
  "$K3" $M --tok $TK --ids 51,273,274 --json-schema "$T/schema.json" --temperature 1 \
    --seed 4 --gen 400 --spec $d --verbose --out "$T/s.json" > /dev/null 2> "$T/s.err" ||
    fail "--spec $d exited $?: $(tail -n 2 "$T/s.err")"
  got=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/s.json")
  [ "$got" = "$want" ] || fail "--json-schema --spec $d: $got, without: $want"
  acc=$(sed -n 's/.*"spec_accepted": \([0-9]*\).*/\1/p' "$T/s.json")
  [ -n "${full:-}" ] || { [ "${acc:-0}" -gt 5 ] || fail "right drafts: $acc accepted"; full=1; }
done
printf '{"type": "object", "properties": {"a": {"format": "ipv6"}}}' > "$T/bad.json"
"$K3" $M --tok $TK --prompt x --json-schema "$T/bad.json" --quiet > /dev/null 2> "$T/run.err"
[ $? -eq 2 ] && grep -q "properties.a: 'format' 'ipv6' is not supported" "$T/run.err" ||
  fail "--json-schema with format: $(cat "$T/run.err")"
echo "ok json mode: --json-schema and a batch line draw the server's ids; refusals exit 2"

for kw in '"not": {}' '"multipleOf": 2' '"uniqueItems": true' '"if": {}'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
    "$U/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}],
    \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\":
    {\"type\": \"object\", \"properties\": {\"a\": {$kw}}}}}}")
  k=$(echo "$kw" | sed 's/^"\([^"]*\)".*/\1/')
  [ "$code" = 400 ] && grep -q "properties.a: the keyword '$k'" "$T/e" ||
    fail "$kw: $code $(cat "$T/e")"
done
for rf in '{"type": "xml"}' '{"type": "json_schema"}' '{"type": "json_object", "x": 1}'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
    "$U/v1/chat/completions" -d "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}],
    \"response_format\": $rf}")
  [ "$code" = 400 ] && grep -q response_format "$T/e" || fail "$rf: $code $(cat "$T/e")"
done
[ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after the refusals"
echo "ok json mode: 4 unsupported keywords and 3 bad response_formats answered 400"
