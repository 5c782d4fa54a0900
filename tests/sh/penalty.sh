#!/bin/sh
# Penalties and logit bias end to end on tiny5: the flags change greedy output (a +100 bias
# forces its token), a penalised run gives the same ids with speculation (the n-gram
# drafter, a true and a wrong draft: drafts are verified against the penalised
# distribution), with the trunk streamed at the smallest budget, in a batch line (the
# fields) and, as text, from the server (chat, its fields) equal to the chat REPL with the
# flags; ids outside the vocabulary and bad values are refused (exit 2, HTTP 400).
. tests/sh/lib/serve.sh
P=$(cat $M/ref/prompt.txt),$(cat $M/ref/prompt.txt)
PEN="--repeat-penalty 0.5 --repeat-last-n 16 --frequency-penalty -0.5 --presence-penalty 0.3"
# shellcheck disable=SC2086
run() { "$K3" $M --ids "$P" --gen 24 --threads 2 --quiet "$@" 2> "$T/run.err"; }
plain=$(run --no-spec) || fail "plain"
# shellcheck disable=SC2086
pen=$(run --no-spec $PEN --logit-bias 7=1.5) || fail "penalised exited $?"
[ "$pen" != "$plain" ] || fail "penalties left the greedy ids unchanged: $pen"
forced=$(run --no-spec --logit-bias 42=100) || fail "bias exited $?"
[ "$forced" = "$(printf '42,%.0s' $(seq 24) | sed 's/,$//')" ] || fail "+100 bias: $forced"
"$K3" pack $M "$T/m.trunk" --quiet 2> "$T/pack.err" || fail "pack"
for s in "" "--temperature 0.9 --seed 11"; do
  # shellcheck disable=SC2086
  want=$(run --no-spec $PEN --logit-bias 7=1.5 $s) || fail "penalised ($s)"
  for how in "" "--spec" "--draft-ids $want" "--draft-ids 1,2,3,4,5,6,7,8" \
             "--no-spec --trunk $T/m.trunk --trunk-gb 0 --cache-gb 0"; do
    # shellcheck disable=SC2086
    got=$(run $PEN --logit-bias 7=1.5 $s $how) || fail "penalised $how ($s) exited $?"
    [ "$got" = "$want" ] || fail "penalised $how ($s): '$got', plain '$want'"
  done
done
echo "ok penalties: greedy moved, +100 forces, same ids with speculation and streamed"

B="\"repeat_penalty\": 0.5, \"repeat_last_n\": 16, \"frequency_penalty\": -0.5,"
B="$B \"presence_penalty\": 0.3, \"logit_bias\": {\"7\": 1.5}"
printf '{"id": "a", "ids": [%s], "gen": 24, %s}\n{"id": "b", "ids": [1,2,3], "gen": 4}\n' \
  "$P" "$B" > "$T/b.jsonl"
"$K3" $M --batch "$T/b.jsonl" --batch-size 2 --threads 2 --quiet > "$T/b.out" 2> "$T/b.err" ||
  fail "batch exited $?"
got=$(sed -n 's/^{"id": "a", "generated_ids": \[\([^]]*\)\].*/\1/p' "$T/b.out" | tr -d ' ')
[ "$got" = "$(run --no-spec $PEN --logit-bias 7=1.5)" ] || fail "batch line: $got"
printf '{"ids": [1], "logit_bias": {"5000": 1}}\n' > "$T/bad.jsonl"
"$K3" $M --batch "$T/bad.jsonl" --quiet > /dev/null 2> "$T/bad.err"
[ $? -eq 2 ] && grep -q "outside the vocabulary" "$T/bad.err" || fail "batch: bias id 5000"
printf '{"ids": [1], "frequency_penalty": 3}\n' > "$T/bad.jsonl"
"$K3" $M --batch "$T/bad.jsonl" --quiet > /dev/null 2> "$T/bad.err"
[ $? -eq 2 ] && grep -q "frequency_penalty" "$T/bad.err" || fail "batch: frequency 3"
run --logit-bias 5000=1 > /dev/null; [ $? -eq 2 ] && grep -q "outside the vocabulary" \
  "$T/run.err" || fail "--logit-bias 5000=1"
run --repeat-penalty 0 > /dev/null; [ $? -eq 2 ] || fail "--repeat-penalty 0 accepted"
echo "ok penalties: batch fields = the flags; bad ids and values refused with exit 2"

# the server's fields = the chat REPL's flags (greedy, thinking on)
printf 'Hello there\n' | timeout 120 "$K3" $M --chat --tok $TK --greedy --gen 12 $PEN \
  --logit-bias 7=1.5 --canonical-history --history "$T/h.jsonl" > /dev/null \
  2> "$T/repl.err" || fail "REPL with penalties"
start main
U=http://127.0.0.1:$PORT_main
post() { $C -H 'Content-Type: application/json' "$U$1" -d "$2"; }
M1='"messages": [{"role": "user", "content": "Hello there"}], "temperature": 0'
post /v1/chat/completions "{$M1, \"max_tokens\": 12, $B}" > "$T/r1"
[ "$(jstr content < "$T/r1")" = "$(hjstr content "$T/h.jsonl" 2)" ] ||
  fail "server content differs from the REPL: $(cat "$T/r1")"
[ "$(jstr reasoning_content < "$T/r1")" = "$(hjstr reasoning_content "$T/h.jsonl" 2)" ] ||
  fail "server reasoning differs from the REPL"
printf 'Hello there\n' | timeout 120 "$K3" $M --chat --tok $TK --greedy --gen 12 \
  --canonical-history --history "$T/h0.jsonl" > /dev/null 2> "$T/repl.err" || fail "REPL"
[ "$(hjstr reasoning_content "$T/h.jsonl" 2)" != "$(hjstr reasoning_content "$T/h0.jsonl" 2)" ] ||
  fail "the penalties did not move the REPL's reply"
for bad in '"logit_bias": {"5000": 1}' '"logit_bias": {"x": 1}' '"logit_bias": {"3": 101}' \
           '"logit_bias": [1]' '"frequency_penalty": 2.5' '"presence_penalty": "a"' \
           '"repetition_penalty": 0' '"repeat_last_n": -2'; do
  code=$($C -o "$T/e" -w '%{http_code}' -H 'Content-Type: application/json' \
         "$U/v1/chat/completions" -d "{$M1, \"max_tokens\": 2, $bad}")
  key=$(echo "$bad" | sed 's/^"\([a-z_]*\)".*/\1/')
  [ "$code" = 400 ] && grep -q "$key" "$T/e" || fail "$bad: $code $(cat "$T/e")"
done
[ "$($C "$U/health")" = '{"status": "ok"}' ] || fail "unhealthy after the refusals"
echo "ok penalties: server fields = the REPL's flags; 8 bad values answered 400"
