#!/bin/sh
# Chat --save-state / --load-state on tests/models/tiny5 + tests/tok/tiny: two turns saved,
# a new process resumes and its third reply equals the one of a single three-turn process
# (same --seed) with nothing re-prefilled; states from another model, another thinking
# mode or another history, and truncated or corrupt files are refused.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; M4=tests/models/tiny4; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$T/out" 2>/dev/null; echo "--- stderr";
  cat "$T/err" 2>/dev/null; exit 1; }
chat() { timeout 120 "$K3" "$@" --chat --tok $TK --no-think --gen 8 --seed 7; }
turn_line() { grep '^k3: \[reused' "$1" | sed -n "$2"p; }

printf 'Hello there\nSecond one\nThird turn\n' > "$T/in3"
chat $M --history "$T/h3.jsonl" < "$T/in3" > "$T/out3" 2> "$T/err3" \
  || { cp "$T/err3" "$T/err"; fail "three-turn session exited $?"; }
printf 'Hello there\nSecond one\n' > "$T/in2"
chat $M --history "$T/h.jsonl" --save-state "$T/s.bin" < "$T/in2" > "$T/out" 2> "$T/err" \
  || fail "two-turn session exited $?"
cp "$T/out" "$T/out2"
grep -q '^k3: state saved to .*s.bin: [1-9][0-9]* positions' "$T/err" \
  || fail "no 'state saved' line"
[ -s "$T/s.bin" ] || fail "no state file"
ls "$T" | grep -q tmp && fail "a temporary file was left behind"
cp "$T/h.jsonl" "$T/h0.jsonl"
printf 'Third turn\n' | \
  chat $M --history "$T/h.jsonl" --load-state "$T/s.bin" > "$T/out" 2> "$T/err" \
  || fail "resumed session exited $?"
grep -q "^k3: state .*: [1-9][0-9]* positions restored .* 0 re-prefilled" "$T/err" \
  || fail "no 'positions restored' line"
grep -q 'the first turn prefills them' "$T/err" \
  && fail "the resumed session says it prefills the history"
cat "$T/out2" "$T/out" > "$T/b"   # replies 1-2 from the first process, 3 from the resumed one
cmp -s "$T/out3" "$T/b" \
  || fail "third reply differs from the single process's: '$(cat "$T/out3")' vs '$(cat "$T/b")'"
l3=$(turn_line "$T/err3" 3 | sed 's/ in [0-9.]* s//g'); lr=$(turn_line "$T/err" 1 | \
  sed 's/ in [0-9.]* s//g')
[ -n "$l3" ] && [ "$l3" = "$lr" ] || fail "turn figures differ: single '$l3', resumed '$lr'"
reused=$(echo "$lr" | sed 's/.*reused \([0-9]*\) positions.*/\1/')
echo "$lr" | grep -q "reused [1-9]" || fail "the resumed turn reused nothing: $lr"
cmp -s "$T/h.jsonl" "$T/h3.jsonl" || fail "the resumed history differs from the single-process one"
echo "ok resumed from the state: third reply identical, $reused positions" \
  "reused, 0 re-prefilled ($lr)"

# refusals: each exits with a message naming the problem and leaves the history alone:
# 2 when this run's flags contradict a sound state (thinking mode), 1 for a state file that
# is damaged or foreign (another checkpoint, history or format version; README "Exit codes")
refuse() { want=2; refused "$@"; }
damaged() { want=1; refused "$@"; }
refused() {   # refused WHAT PATTERN args...
  what=$1; pat=$2; shift 2
  cp "$T/h0.jsonl" "$T/hx.jsonl"
  printf 'More\n' | \
    timeout 60 "$K3" "$@" --chat --tok $TK --gen 4 --seed 7 --history "$T/hx.jsonl" > "$T/out" \
    2> "$T/err"; rc=$?
  [ $rc = $want ] || fail "$what: exit $rc, want $want"
  grep -q -- "$pat" "$T/err" || fail "$what: message does not say '$pat'"
  cmp -s "$T/h0.jsonl" "$T/hx.jsonl" || fail "$what: the history was changed"
}
if [ -d $M4 ]; then
  damaged "tiny4 model" 'saved from another checkpoint' $M4 --no-think --load-state "$T/s.bin"
else echo "note: $M4 missing; other-model refusal not checked"; fi
refuse "thinking mode" 'saved with thinking off' $M --load-state "$T/s.bin"
size=$(wc -c < "$T/s.bin")
head -c $((size - 100)) "$T/s.bin" > "$T/short.bin"
damaged "truncated file" 'truncated or corrupt' $M --no-think --load-state "$T/short.bin"
head -c 200 "$T/s.bin" > "$T/short2.bin"
damaged "truncated header" 'truncated at byte' $M --no-think --load-state "$T/short2.bin"
cp "$T/s.bin" "$T/flip.bin"
printf '\001' | dd of="$T/flip.bin" bs=1 seek=$((size - 5000)) conv=notrunc 2>/dev/null
damaged "flipped byte" 'checksum mismatch' $M --no-think --load-state "$T/flip.bin"
printf 'NOTSTATE' > "$T/bad.bin"
damaged "not a state file" 'not a k3 chat state' $M --no-think --load-state "$T/bad.bin"
cp "$T/s.bin" "$T/v9.bin"
printf '\011' | dd of="$T/v9.bin" bs=1 seek=8 conv=notrunc 2>/dev/null
damaged "another format version" 'format version 9' $M --no-think --load-state "$T/v9.bin"
{ printf '{"role":"user","content":"Hello"}\n'
  printf '{"role":"assistant","content":"x","reasoning_content":""}\n'; } > "$T/other.jsonl"
cp "$T/other.jsonl" "$T/hx.jsonl"
printf 'More\n' | \
  timeout 60 "$K3" $M --chat --tok $TK --no-think --gen 4 --history "$T/hx.jsonl" --load-state \
  "$T/s.bin" > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 1 ] && grep -q 'covers 4 messages' "$T/err" || fail "another history: rc $rc, want 1"
sed 's/Hello there/Hello where/' "$T/h0.jsonl" > "$T/hx.jsonl"
printf 'More\n' | \
  timeout 60 "$K3" $M --chat --tok $TK --no-think --gen 4 --history "$T/hx.jsonl" --load-state \
  "$T/s.bin" > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 1 ] && grep -q 'message 1 (user) of .* differs' "$T/err" \
  || fail "a changed message: rc $rc, want 1: $(cat "$T/err")"
timeout 30 "$K3" $M --chat --tok $TK --load-state "$T/s.bin" < /dev/null > "$T/out" 2> "$T/err";
rc=$?
[ $rc = 2 ] && grep -q 'need --history' "$T/err" || fail "--load-state without --history: rc $rc"
echo "ok refused: another thinking mode (exit 2); another model, another history, a changed" \
  "message, another format version, truncated, corrupt, not a state file (exit 1)"

# /save-state mid-session, then resume from it
printf 'Hello there\n/save-state %s\n' "$T/s2.bin" | \
  chat $M --history "$T/h2.jsonl" > "$T/out" 2> "$T/err" || fail "/save-state session exited $?"
grep -q 'saved the state: [1-9][0-9]* positions, 2 messages' "$T/out" \
  || fail "/save-state did not report"
grep -v '^(saved the state' "$T/out" > "$T/a"
printf 'Second one\n' | \
  chat $M --history "$T/h2.jsonl" --load-state "$T/s2.bin" > "$T/out" 2> "$T/err" \
  || fail "resume from /save-state exited $?"
cat "$T/out" >> "$T/a"
cmp -s "$T/a" "$T/out2" \
  || fail "replies after /save-state and resume differ from the two-turn session"
echo "ok /save-state FILE, resumed: the second reply matches"
