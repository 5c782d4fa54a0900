#!/bin/sh
# --context-full: stop (the default) refuses a turn that does not fit, naming the choice;
# drop-oldest drops the oldest turns (the system message kept), re-prefills and answers
# as a chat that held only the kept turns would, while the history file keeps them all.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat -v "$T/err" 2>/dev/null | tail -20; exit 1; }
chat() { timeout 120 "$K3" $M --chat --tok $TK --no-think --gen 20 --greedy --no-color \
  --ctx 150 --system "Be brief." "$@"; }

printf 'one\ntwo\nthree\n/stats\n' | chat > "$T/out" 2> "$T/err" || fail "stop session exited $?"
grep -q 'context full: this turn needs' "$T/err" || fail "stop: no context-full message"
grep -q 'context-full drop-oldest' "$T/err" || fail "stop: the message does not name the choice"
grep -q '^messages: 5' "$T/out" || fail "stop: the refused turn was kept"
echo "ok --context-full stop (default): the turn is refused, the message names drop-oldest"

printf 'one\ntwo\nthree\n' | chat --context-full drop-oldest --history "$T/h.jsonl" \
  > "$T/out" 2> "$T/err" || fail "drop-oldest session exited $?"
[ "$(grep -c "context full: dropped the oldest 1 turn" "$T/err")" = 1 ] \
  || fail "drop-oldest: want one drop of one turn"
grep -q 'this turn needs' "$T/err" && fail "drop-oldest refused a turn"
[ "$(wc -l < "$T/h.jsonl")" = 7 ] || fail "the history file lost the dropped turns"
last=$(grep 'prefilled' "$T/err" | tail -1 | sed 's/.*prefilled \([0-9]*\) token.*/\1/')
# what the last turn saw: the system message, turn two, message three
sed -n '1p;4p;5p' "$T/h.jsonl" > "$T/kept.jsonl"
printf 'three\n' | chat --history "$T/kept.jsonl" > "$T/out2" 2> "$T/err" \
  || fail "kept-turns session exited $?"
got=$(grep 'prefilled' "$T/err" | tail -1 | sed 's/.*prefilled \([0-9]*\) token.*/\1/')
[ "$got" = "$last" ] || fail "after the drop the turn prefilled $last, the kept turns are $got"
tail -c "$(wc -c < "$T/out2")" "$T/out" | cmp -s - "$T/out2" \
  || fail "the reply after the drop differs from a chat holding only the kept turns"
echo "ok --context-full drop-oldest: oldest turns dropped, system kept, same reply bytes"

printf 'one\n' | chat --context-full sometimes > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 2 ] && grep -q 'context-full must be stop or drop-oldest' "$T/err" \
  || fail "a bad --context-full gave rc $rc"
echo "ok a bad --context-full value: exit 2"
