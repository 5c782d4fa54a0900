#!/bin/sh
# /v1/completions with a list of prompts (OpenAI's forms) on tiny5: a list of strings, a
# prompt of token ids and a list of token-id lists. Choice p*n + j of a request is prompt p's
# reply with seed + j, equal to that prompt alone (n = 1, seed + j); usage sums the prompts;
# a streamed reply carries each choice's index and concatenates per index to the
# non-streamed one; malformed prompts (empty, mixed, ids out of the vocabulary, too many)
# are 400 in OpenAI's error shape, naming the prompt.
. tests/sh/lib/serve.sh
start main
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U/v1/completions" -d "$1"; }
# the choices of a reply, one a line (the JSON of each, with its index)
choices() { sed 's/.*"choices": \[//; s/\], "usage".*//; s/}, {"index"/}\n{"index"/g'; }
# a choice without its index (to compare with the same prompt's reply alone)
noindex() { sed 's/^{"index": [0-9]*, //'; }
S='"max_tokens": 6, "temperature": 0.8'

# a list of strings: choice i is prompt i alone, same seed
post "{\"prompt\": [\"Hello\", \"The cat\", \"Hi\"], $S, \"seed\": 5}" > "$T/l.json"
choices < "$T/l.json" > "$T/l"
[ "$(wc -l < "$T/l")" = 3 ] || fail "3 prompts: $(cat "$T/l.json")"
pt=0; ct=0; i=0
for p in Hello "The cat" Hi; do
  post "{\"prompt\": \"$p\", $S, \"seed\": 5}" > "$T/one.json"
  pt=$((pt + $(jnum prompt_tokens < "$T/one.json")))
  ct=$((ct + $(jnum completion_tokens < "$T/one.json")))
  line=$(sed -n "$((i + 1))p" "$T/l")
  case $line in "{\"index\": $i, "*) ;; *) fail "choice $i has another index: $line";; esac
  [ "$(echo "$line" | noindex)" = "$(choices < "$T/one.json" | noindex)" ] ||
    fail "prompt $i ($p): $line; alone: $(choices < "$T/one.json")"
  i=$((i + 1))
done
[ "$(jnum prompt_tokens < "$T/l.json")" = $pt ] &&
  [ "$(jnum completion_tokens < "$T/l.json")" = $ct ] ||
  fail "usage is not the sum over the prompts ($pt, $ct): $(cat "$T/l.json")"
echo "ok a list of 3 prompts: choice i = prompt i alone (seeded), usage summed ($pt + $ct)"

# with n 2: choice p*2 + j = prompt p alone with seed + j
post "{\"prompt\": [\"Hello\", \"The cat\"], $S, \"seed\": 7, \"n\": 2}" | choices > "$T/n"
[ "$(wc -l < "$T/n")" = 4 ] || fail "2 prompts, n 2: $(cat "$T/n")"
for p in 0 1; do
  for j in 0 1; do
    k=$((p * 2 + j)); txt=Hello; [ $p = 1 ] && txt="The cat"
    post "{\"prompt\": \"$txt\", $S, \"seed\": $((7 + j))}" | choices | noindex > "$T/one"
    line=$(sed -n "$((k + 1))p" "$T/n")
    case $line in "{\"index\": $k, "*) ;; *) fail "choice $k has another index: $line";; esac
    [ "$(echo "$line" | noindex)" = "$(cat "$T/one")" ] ||
      fail "prompt $p, choice $j: $line; alone with seed $((7 + j)): $(cat "$T/one")"
  done
done
echo "ok 2 prompts with n 2: choice p*2 + j = prompt p alone with seed + j"

# token ids: the same reply as the text they tokenize to; a list of id lists as the strings
ids() { $C "$U/tokenize" -d "{\"content\": \"$1\"}" | sed 's/.*\[\(.*\)\].*/\1/'; }
a=$(ids Hello); b=$(ids "The cat")
[ -n "$a" ] && [ -n "$b" ] || fail "/tokenize gave no ids"
post "{\"prompt\": [$a], $S, \"seed\": 5}" | choices > "$T/i1"
[ "$(cat "$T/i1")" = "$(sed -n 1p "$T/l")" ] ||
  fail "prompt [$a]: $(cat "$T/i1"); as text: $(sed -n 1p "$T/l")"
post "{\"prompt\": [[$a], [$b]], $S, \"seed\": 5}" | choices > "$T/i2"
[ "$(cat "$T/i2")" = "$(sed -n 1,2p "$T/l")" ] ||
  fail "prompt [[$a], [$b]]: $(cat "$T/i2"); as text: $(sed -n 1,2p "$T/l")"
post "{\"prompt\": [[$a]], \"max_tokens\": 2, \"echo\": true}" > "$T/e.json"
grep -q '"text": "Hello' "$T/e.json" || fail "echo of token ids: $(cat "$T/e.json")"
echo "ok token ids [$a] = \"Hello\", [[$a], [$b]] = the two strings; echo gives their text"

# streamed: every choice's chunks carry its index and concatenate to the plain reply's text
post "{\"prompt\": [\"Hello\", \"The cat\", \"Hi\"], $S, \"seed\": 5, \"stream\": true}" > "$T/s"
tail -n 2 "$T/s" | grep -q '^data: \[DONE\]' || fail "the stream did not finish"
for i in 0 1 2; do
  got=$(grep "^data: {.*\"index\": $i, \"text\"" "$T/s" |
        sed 's/.*"text": "\(\([^"\\]\|\\.\)*\)".*/\1/' | tr -d '\n')
  want=$(sed -n "$((i + 1))p" "$T/l" | sed 's/.*"text": "\(\([^"\\]\|\\.\)*\)".*/\1/')
  [ "$got" = "$want" ] || fail "streamed choice $i: '$got', not '$want'"
  grep -q "\"index\": $i, \"text\": \"\", \"finish_reason\": \"[a-z]*\"" "$T/s" ||
    fail "streamed choice $i: no finish chunk"
done
echo "ok streamed, 3 prompts: each index's chunks = its choice's text, each with its finish"

# malformed prompts: 400, OpenAI's error shape, the prompt named
many=$(awk 'BEGIN { for (i = 0; i < 65; i++) printf "%s\"a\"", i ? ", " : "" }')
n=0
for c in '[]|empty list' '[[1], []]|prompt\[1\]' '["a", 1]|prompt\[1\]' \
  '[1, -1]|prompt\[1\]' '[1, 2.5]|prompt\[1\]' '[[1], [1, 99999]]|prompt\[1\]\[1\]. is 99999' \
  '[1, 99999]|prompt\[1\]. is 99999' '[""]|prompt\[0\]' '""|empty' '{"a": 1}|prompt' \
  '[["a"]]|prompt\[0\]\[0\]' "[$many]|65 prompts"; do
  body=${c%%|*}; want=${c#*|}
  code=$($C -o "$T/err" -w '%{http_code}' "$U/v1/completions" \
    -d "{\"prompt\": $body, \"max_tokens\": 2}")
  [ "$code" = 400 ] && grep -q "$want" "$T/err" &&
    grep -q '^{"error": {"message": ".*", "type": "invalid_request_error", "code": 400}}$' \
    "$T/err" || fail "prompt $body: $code $(cat "$T/err")"
  n=$((n + 1))
done
[ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "not healthy after the refusals"
code=$($C -o "$T/err" -w '%{http_code}' "$U/v1/completions" \
  -d '{"prompt": ["a", "b", "c", "d", "e"], "n": 16, "max_tokens": 2}')
[ "$code" = 400 ] && grep -q 'over the 64' "$T/err" || fail "5 x 16: $code $(cat "$T/err")"
echo "ok $n malformed prompts and 5 prompts x n 16: 400 naming the prompt, the server healthy"
