#!/bin/sh
# A --history reload prefills each position of the conversation once: the history carries
# each reply's exact ids (k3_gen), so text with U+FFFD and reserved-token strings, made in
# a session that toggled thinking per turn, renders to the ids the session held; and the
# continued conversation has the same bytes as the session that never stopped. Records
# that do not fit (an edited message, an id outside the vocabulary, a bad shape) are
# dropped or refused with the line named.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat -v "$T/err" 2>/dev/null | tail -20; exit 1; }
chat() { timeout 120 "$K3" $M --chat --tok $TK --gen 40 --seed 3 --no-color "$@"; }
H=$T/h.jsonl
turns='hello \357\277\275 x <|reserved_token_5|> [EOS]\n/think off\nsecond\n/think on\n'
turns="${turns}third\n/think off\nfourth\n"
printf "$turns" | chat --history "$H" > "$T/out1" 2> "$T/err" || fail "session exited $?"
grep -q '"k3_gen":{"ids":\[' "$H" || fail "the history carries no exact records"
cp "$H" "$T/h0"
# the session that never stopped: its fifth turn reuses R and prefills P
printf "${turns}fifth\n" | chat > "$T/out3" 2> "$T/err" || fail "whole session exited $?"
last=$(grep 'prefilled' "$T/err" | tail -1)
R=$(echo "$last" | sed 's/.*reused \([0-9]*\) position.*/\1/')
P=$(echo "$last" | sed 's/.*prefilled \([0-9]*\) token.*/\1/')
printf 'fifth\n' | chat --history "$H" --no-think > "$T/out2" 2> "$T/err" \
  || fail "reload exited $?"
got=$(grep 'prefilled' "$T/err" | tail -1 | sed 's/.*prefilled \([0-9]*\) token.*/\1/')
[ "$got" = $((R + P)) ] || fail "reload prefilled $got tokens, the conversation has $((R + P))"
tail -c "$(wc -c < "$T/out2")" "$T/out3" | cmp -s - "$T/out2" \
  || fail "the reply after reloading differs from the session that never stopped"
echo "ok reload prefills $got = $R + $P positions once; the reply is the same bytes"

# an edited reply renders from its text (its record is dropped), and still loads
awk 'NR==4 { sub(/"content":"/, "&edited ") } { print }' "$T/h0" > "$H"
printf 'fifth\n' | chat --history "$H" --no-think > "$T/out2" 2> "$T/err" \
  || fail "edited history exited $?"
echo "ok an edited reply's record is dropped (rendered from the text)"

bad() {  # name, sed expression on line 2 of h0, expected message part
  sed "2$2" "$T/h0" > "$H"; cp "$H" "$T/keep"
  printf 'x\n' | chat --history "$H" > "$T/out2" 2> "$T/err"; rc=$?
  [ $rc = 2 ] || fail "$1: rc $rc, want 2"
  grep -q "$3" "$T/err" || fail "$1: message lacks '$3'"
  cmp -s "$H" "$T/keep" || fail "$1: the file was modified"
}
bad "id out of range" 's/"ids":\[[0-9]*/"ids":[99999/' 'line 2: k3_gen id 99999 is outside'
bad "negative id" 's/"ids":\[[0-9]*/"ids":[-1/' 'line 2: k3_gen ids must be non-negative'
bad "bad state" 's/"state":[0-9]*/"state":9/' 'line 2: k3_gen must be'
bad "not an object" 's/"k3_gen":{/"k3_gen":[{/; s/}}$/}]}/' 'line 2: k3_gen must be'
sed '1s/}$/,"k3_gen":{"ids":[],"thinking":0,"state":0,"of":"0"}}/' "$T/h0" > "$H"
printf 'x\n' | chat --history "$H" > "$T/out2" 2> "$T/err"
[ $? = 2 ] && grep -q 'line 1: k3_gen is only allowed on assistant' "$T/err" \
  || fail "k3_gen on a user message accepted"
echo "ok 5 bad records refused (exit 2, line named, file untouched)"
