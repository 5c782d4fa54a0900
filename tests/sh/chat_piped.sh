#!/bin/sh
# Chat, piped (non-TTY) mode on tests/models/tiny5 + tests/tok/tiny: two turns where the
# second feeds only its new tokens (state reused), replay with the same --seed is byte
# for byte identical, multi-line input, commands, and usage errors.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$T/out" 2>/dev/null; echo "--- stderr";
  cat "$T/err" 2>/dev/null; exit 1; }
chat() { timeout 120 "$K3" $M --chat --tok $TK --no-think --gen 8 "$@"; }

printf 'Hello there\n/stats\nAnd a second\\\nline\n/stats\n' > "$T/in"
chat --seed 11 < "$T/in" > "$T/out" 2> "$T/err" || fail "two-turn session exited $?"
pos1=$(grep '^positions:' "$T/out" | sed -n 1p | awk '{print $2}')
reused2=$(grep '^last turn:' "$T/out" | sed -n 2p | sed 's/.*reused \([0-9]*\) positions.*/\1/')
pre2=$(grep '^last turn:' "$T/out" | sed -n 2p | sed 's/.*prefilled \([0-9]*\) tokens.*/\1/')
pre1=$(grep '^last turn:' "$T/out" | sed -n 1p | sed 's/.*prefilled \([0-9]*\) tokens.*/\1/')
[ -n "$pos1" ] && [ "$pos1" -gt 0 ] || fail "no positions after turn 1"
[ "$reused2" = "$pos1" ] \
  || fail "turn 2 reused $reused2 positions, want all $pos1 held after turn 1"
# The new tail, counted independently: the reply's last sampled id (never fed when the
# reply is cut at --gen), the canonical close of the response channel and message, then
# the second user message and the generation prompt.
if sed -n 3p "$T/err" | grep -q 'cut at --gen (stopped in the response channel)'; then
  { printf '<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>'
    printf '<|open|>message role="user"<|sep|>And a second\nline<|close|>message<|sep|>'
    printf '<|end_of_msg|><|open|>message role="assistant"<|sep|><|open|>response<|sep|>'
  } > "$T/tail"
  ntail=$("$K3" tokenize --tok $TK --special "$T/tail" | tr ',' '\n' | grep -c .)
  [ "$pre2" = $((ntail + 1)) ] \
    || fail "turn 2 prefilled $pre2 tokens, want the new tail: 1 + $ntail"
else
  echo "note: turn 1 did not stop at --gen in the response channel; tail count not checked"
fi
grep -q 're-prefills 0' "$T/out" || fail "a re-prefill happened"
grep -q 'seed 11' "$T/err" || fail "seed not reported"
echo "ok two turns: turn 2 reused all $reused2 positions and prefilled only $pre2 new tokens"

cp "$T/out" "$T/out1"
chat --seed 11 < "$T/in" > "$T/out" 2> "$T/err" || fail "replay exited $?"
grep -a -v -e '^last turn' -e '^session' -e '^peak RSS' "$T/out1" > "$T/a"
grep -a -v -e '^last turn' -e '^session' -e '^peak RSS' "$T/out" > "$T/b"
cmp -s "$T/a" "$T/b" || fail "replay with --seed 11 differs"
chat --seed 12 < "$T/in" > "$T/out" 2> "$T/err" || fail "seed 12 exited $?"
grep -a -v -e '^last turn' -e '^session' -e '^peak RSS' "$T/out" > "$T/c"
cmp -s "$T/a" "$T/c" && fail "seed 12 gave the same replies as seed 11"
echo "ok replay with the same --seed is byte for byte identical; another seed differs"

# thinking on: the reply opens in the think channel; the drawn seed is printed
printf 'Hi\n' | timeout 120 "$K3" $M --chat --tok $TK --gen 6 > "$T/out" 2> "$T/err" \
  || fail "thinking session exited $?"
grep -q '^<think>' "$T/out" || fail "no <think> wrapper"
grep -q 'replay with --seed [0-9]' "$T/err" || fail "drawn seed not printed"
printf 'Hi\n' | timeout 120 "$K3" $M --chat --tok $TK --gen 6 --seed 4 --hide-thinking > "$T/out" \
  2> "$T/err" || fail "hide-thinking exited $?"
grep -q 'think>' "$T/out" && fail "--hide-thinking printed the think channel"
# a reply that is all thinking, hidden: an indicator while it thinks and a note at the end
grep -q '^k3: thinking… (hidden by --hide-thinking)$' "$T/err" \
  || fail "--hide-thinking: no thinking indicator"
grep -q '^k3: note: the reply has no answer, only thinking (hidden by --hide-thinking' "$T/err" \
  || fail "--hide-thinking: no note that the reply had no answer"
echo "ok thinking shown in <think>, hidden with --hide-thinking (an indicator, a note when there" \
  "is no answer), drawn seed printed"

# """ blocks, // escape, commands, greedy determinism
{ printf '"""\nline one\nline two\n"""\n//slash text\n'
  printf '/think low\n/temp 0\n/seed 5\n/history\n/nonsense\n/exit\nnot read\n'; } > "$T/in"
chat --seed 3 < "$T/in" > "$T/out" 2> "$T/err" || fail "commands session exited $?"
grep -q 'thinking: low' "$T/out" || fail "/think low"
grep -q 'temperature 0: greedy' "$T/out" || fail "/temp 0"
grep -q '^seed 5' "$T/out" || fail "/seed"
grep -q '   1  line one' "$T/out" || fail "/history lists the block"
grep -q 'unknown command /nonsense' "$T/out" || fail "unknown command"
[ "$(grep -c 'reused' "$T/err")" = 2 ] || fail "expected exactly 2 replies (block and //)"
echo "ok \"\"\" blocks, // escape, /think /temp /seed /history, /exit stops reading"

# /think off mid-conversation: the command and the next turn say why it re-prefills (not an
# error-like "differs"); a /think that changes nothing says nothing of the kind
printf 'What is 2+2?\n/think off\nAnd 3+3?\n/think off\nAnd 4+4?\n' | \
  timeout 120 "$K3" $M --chat --tok $TK --gen 8 --seed 42 > "$T/out" 2> "$T/err" \
  || fail "/think off session exited $?"
want='^thinking: off (the conversation renders differently now: the next turn prefills it again)$'
grep -a -q "$want" "$T/out" \
  || fail "/think off does not say the next turn prefills again"
grep -a -q '^k3: re-prefilling [0-9]* tokens: thinking is off now (/think)' "$T/err" \
  || fail "the re-prefill does not say why"
grep -a -q -i 'differs' "$T/err" && fail "the re-prefill still reads like an error"
[ "$(grep -a -c '^thinking: off$' "$T/out")" = 1 ] \
  || fail "the second /think off (no change) should just say 'thinking: off'"
[ "$(grep -a -c 're-prefilling' "$T/err")" = 1 ] \
  || fail "a re-prefill after the unchanged /think off"
echo "ok /think off says why the next turn re-prefills; an unchanged /think does not"

chat --greedy < /dev/null > "$T/out" 2> "$T/err" || fail "EOF at once exited $?"
grep -q 'greedy decoding' "$T/err" || fail "--greedy not reported"
timeout 30 "$K3" $M --chat --tok $TK --top-p 2 < /dev/null > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 2 ] && grep -q 'top-p' "$T/err" || fail "--top-p 2 gave rc $rc"
timeout 30 "$K3" $M --chat --tok $TK --think-effort medium < /dev/null > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 2 ] || fail "--think-effort medium gave rc $rc"
timeout 30 "$K3" $M --chat < /dev/null > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 2 ] || [ -n "$K3_TOK_FILES" ] || fail "missing --tok gave rc $rc"
echo "ok EOF exits 0; bad flags exit 2"
