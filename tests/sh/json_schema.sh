#!/bin/sh
# JSON Schema beyond JSON mode's automaton (anyOf, recursive $ref, pattern, enum, format,
# integer bounds: a grammar, json_schema.h) on tiny5: the one-shot command, a batch line,
# the server and speculative drafts (right, right then wrong, wrong, the model's own) all
# draw the same ids for a seed, so the grammar masks every path alike. Validity of the
# replies: tests/c/test_json_schema.c (documents judged from the spec) and
# tests/node/schema_ajv.sh (240 replies checked by Ajv; make check).
. tests/sh/lib/serve.sh
S='{"$defs": {"n": {"type": "object", "properties": {"k": {"enum": ["a", "b\"", 3]},
  "id": {"type": "string", "pattern": "^[a-z]{2}-\\d{1,3}$"}, "at": {"format": "date"},
  "v": {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 99}, {"$ref": "#/$defs/n"},
  {"type": "null"}]}}, "required": ["k", "id", "v"], "additionalProperties": false}},
  "$ref": "#/$defs/n"}'
printf '%s' "$S" > "$T/schema.json"; printf 'Be brief.' > "$T/sys.txt"
run() { "$K3" $M --tok $TK --system-file "$T/sys.txt" --prompt "Reply 5" --json-schema \
  "$T/schema.json" --temperature 1 --seed 5 --gen 400 --out "$T/o.json" --quiet "$@" \
  > /dev/null 2> "$T/run.err" || fail "one-shot $* exited $?"
  sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/o.json" | tr -d ' '; }
want=$(run)
[ -n "$want" ] || fail "no ids"
grep -q '"stop": "eos"' "$T/o.json" || fail "reply not ended"
part=$(echo "$want" | cut -d, -f1-4),7,7,7
for d in "--draft-ids $want" "--draft-ids $part" "--draft-ids 9,9,9" ""; do
  got=$(run --spec $d)
  [ "$got" = "$want" ] || fail "--spec $d: $got, without: $want"
  acc=$(sed -n 's/.*"spec_accepted": \([0-9]*\).*/\1/p' "$T/o.json")
  [ -n "${full:-}" ] || { [ "${acc:-0}" -gt 20 ] || fail "right drafts: $acc accepted"; full=1; }
done
echo "ok json schema: --spec with right, partly wrong, wrong and the model's drafts: the same ids"
RF="\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"t\",
  \"schema\": $S}}"
want_b=$(run_b() { "$K3" $M --tok $TK --prompt "Reply 5" --json-schema "$T/schema.json" \
  --temperature 1 --seed 5 --gen 400 --out "$T/ob.json" --quiet > /dev/null 2> "$T/run.err" ||
  fail "one-shot without a system exited $?"; }; run_b
  sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' "$T/ob.json" | tr -d ' ')
printf '{"id": "a", "prompt": "Reply 5", "gen": 400, "temperature": 1,
  "seed": 5, %s}\n{"id": "b", "prompt": "x", "gen": 30, "seed": 2, "temperature": 1}\n' \
  "$(printf '%s' "$RF" | tr -d '\n')" | tr -d '\n' | sed 's/}{/}\n{/' > "$T/b.jsonl"
echo >> "$T/b.jsonl"
"$K3" $M --tok $TK --batch "$T/b.jsonl" --batch-size 2 --quiet > "$T/b.out" 2> "$T/b.err" ||
  fail "batch exited $?"
got=$(sed -n 's/^{"id": "a", "generated_ids": \[\([^]]*\)\].*/\1/p' "$T/b.out" | tr -d ' ')
[ -n "$got" ] && [ "$got" = "$want_b" ] || fail "batch line: $got, one-shot: $want_b"
start main
U=http://127.0.0.1:$PORT_main
$C -H 'Content-Type: application/json' "$U/v1/chat/completions" -d "{\"messages\": [{\"role\":
  \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Reply 5\"}],
  \"seed\": 5, \"max_tokens\": 400, \"logprobs\": true, $RF}" > "$T/r.json"
got=$(grep -o '{"id": [0-9][0-9]*' "$T/r.json" | sed 's/.*: //' | paste -sd, -)
[ "$got" = "$(echo "$want" | sed 's/,[0-9]*$//')" ] ||
  fail "server: $got, one-shot: $want (less the end token)"
echo "ok json schema: the one-shot command, a batch line and the server draw the same ids"
