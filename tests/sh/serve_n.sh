#!/bin/sh
# n > 1 on tiny5: choice i of a request with n and seed S equals the same request with
# n = 1 and seed S + i (completions and chat, streamed and not); the prompt is prefilled
# once (the other choices start from a copy of choice 0's state: /metrics); streamed
# chunks carry their choice's index and concatenate per index to the non-streamed
# choices; n above --max-batch, n = 17 and n with echo are refused (400).
. tests/sh/lib/serve.sh
start main --max-batch 4
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }
# the choices of a reply, one a line (the JSON of each, without its index)
choices() { sed 's/.*"choices": \[//; s/\], "usage".*//; s/}, {"index"/}\n{"index"/g' |
  sed 's/^{"index": [0-9]*, //'; }
metric() { $C "$U/metrics" | sed -n "s/^k3_$1 //p"; }

p0=$(metric prefill_tokens_total)
post /v1/completions '{"prompt": "The capital of France is", "max_tokens": 8, "n": 3,
  "seed": 40}' > "$T/c3.json"
p1=$(metric prefill_tokens_total)
[ "$(jnum prompt_tokens < "$T/c3.json")" = $((p1 - p0)) ] ||
  fail "n 3 prefilled $((p1 - p0)) tokens for a prompt of $(jnum prompt_tokens < "$T/c3.json")"
[ "$(jnum completion_tokens < "$T/c3.json")" = 24 ] || fail "usage: $(cat "$T/c3.json")"
choices < "$T/c3.json" > "$T/c3"
[ "$(wc -l < "$T/c3")" = 3 ] && [ "$(sort -u "$T/c3" | wc -l)" = 3 ] ||
  fail "n 3: not 3 distinct choices: $(cat "$T/c3.json")"
for i in 0 1 2; do
  post /v1/completions "{\"prompt\": \"The capital of France is\", \"max_tokens\": 8,
    \"seed\": $((40 + i))}" | choices > "$T/one"
  [ "$(sed -n "$((i + 1))p" "$T/c3")" = "$(cat "$T/one")" ] ||
    fail "completions choice $i: $(sed -n "$((i + 1))p" "$T/c3"), seed $((40 + i)): $(cat "$T/one")"
done
echo "ok n: 3 completions choices = seeds 40, 41, 42 alone; the prompt prefilled once"

M1='"messages": [{"role": "user", "content": "Name a color"}], "max_tokens": 10'
post /v1/chat/completions "{$M1, \"n\": 2, \"seed\": 9}" > "$T/ch.json"
choices < "$T/ch.json" > "$T/ch"
for i in 0 1; do
  post /v1/chat/completions "{$M1, \"seed\": $((9 + i))}" | choices > "$T/one"
  [ "$(sed -n "$((i + 1))p" "$T/ch")" = "$(cat "$T/one")" ] || fail "chat choice $i"
done
post /v1/chat/completions "{$M1, \"n\": 2, \"seed\": 9, \"stream\": true}" > "$T/s.txt"
grep -q '^data: \[DONE\]' "$T/s.txt" || fail "stream: no [DONE]"
for i in 0 1; do
  r=$(grep "\"index\": $i, \"delta\": {\"reasoning_content\"" "$T/s.txt" |
      sed 's/.*"reasoning_content": "\(.*\)"}, "finish_reason.*/\1/' | tr -d '\n')
  [ "$(grep -c "\"index\": $i, \"delta\": {}, \"finish_reason\": \"" "$T/s.txt")" = 1 ] ||
    fail "stream: choice $i has no finish chunk"
  want=$(sed -n "$((i + 1))p" "$T/ch" | sed 's/.*"reasoning_content": "\(.*\)"}, "finish.*/\1/')
  [ "$r" = "$want" ] || fail "stream choice $i: '$r', not streamed '$want'"
done
post /v1/chat/completions "{$M1, \"n\": 2, \"temperature\": 0}" | choices > "$T/g"
[ "$(sort -u "$T/g" | wc -l)" = 1 ] || fail "greedy n 2: the choices differ"
echo "ok n: chat choices = seeds alone, streamed per index, greedy choices equal"

code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
  "$U/v1/chat/completions" -d "{$M1, \"n\": 5}")
[ "$code" = 400 ] && grep -q 'max-batch' "$T/e" || fail "n 5 at --max-batch 4: $code $(cat "$T/e")"
code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
  "$U/v1/completions" -d '{"prompt": "x", "n": 2, "echo": true}')
[ "$code" = 400 ] && grep -q echo "$T/e" || fail "n with echo: $code $(cat "$T/e")"
[ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after the refusals"
echo "ok n: n above --max-batch and n with echo answered 400"
