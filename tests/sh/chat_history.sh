#!/bin/sh
# Chat history (--history FILE, JSONL): written after every turn, reloaded and continued,
# --system must agree, corrupt files are refused (exit 2, line named) and left
# untouched, /save and /load, and the context limit is reported before generating.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat -v "$T/out" 2>/dev/null; echo "--- stderr";
  cat -v "$T/err" 2>/dev/null; exit 1; }
chat() { timeout 120 "$K3" $M --chat --tok $TK --no-think --gen 6 --seed 1 "$@"; }
H=$T/h.jsonl

printf 'one\ntwo\n' | chat --history "$H" --system "Be brief." > "$T/out" 2> "$T/err" \
  || fail "first session exited $?"
[ "$(wc -l < "$H")" = 5 ] || fail "history has $(wc -l < "$H") lines, want 5"
sed -n 1p "$H" | grep -q '^{"role":"system","content":"Be brief."}$' \
  || fail "system line: $(sed -n 1p "$H")"
sed -n 2p "$H" | grep -q '^{"role":"user","content":"one"}$' || fail "user line"
sed -n 3p "$H" | grep -q '^{"role":"assistant","content":".*","reasoning_content":".*",'\
'"k3_gen":{"ids":\[[0-9,]*\],"thinking":[01],"state":[0-5],"of":"[0-9a-f]\{16\}"}}$' \
  || fail "assistant line"
ls "$T" | grep -q 'tmp' && fail "a temp file was left behind"
echo "ok history written after every turn (5 JSONL lines)"

printf 'three\n/stats\n' | chat --history "$H" --system "Be brief." > "$T/out" 2> "$T/err" \
  || fail "continued session exited $?"
[ "$(wc -l < "$H")" = 7 ] || fail "history has $(wc -l < "$H") lines after continuing, want 7"
grep -q '5 messages from' "$T/err" || fail "load not reported"
grep -q '^messages: 7' "$T/out" || fail "stats after continuing"
echo "ok history reloaded, re-prefilled and continued"

cp "$H" "$T/keep"
printf 'x\n' | chat --history "$H" --system "Other." > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 2 ] && grep -q 'differs from the system message' "$T/err" \
  || fail "--system mismatch gave rc $rc"
cmp -s "$H" "$T/keep" || fail "history changed after a refused --system"
echo "ok --system that disagrees with the history: exit 2, file untouched"

bad() {  # name, file content (printf format), expected message part
  printf "$2" > "$T/bad.jsonl"; cp "$T/bad.jsonl" "$T/bad.keep"
  printf 'x\n' | chat --history "$T/bad.jsonl" > "$T/out" 2> "$T/err"; rc=$?
  [ $rc = 2 ] || fail "$1: rc $rc, want 2"
  grep -q "$3" "$T/err" || fail "$1: message lacks '$3'"
  cmp -s "$T/bad.jsonl" "$T/bad.keep" || fail "$1: the file was modified"
}
bad "invalid JSON" '{"role":"user","content":"a"}\n{"role":"assistant","content":"b"\n' \
  'line 2: invalid JSON'
bad "unknown key" '{"role":"user","content":"a","name":"x"}\n{"role":"assistant","content":"b"}\n' \
  'line 1: unknown key "name"'
bad "order" '{"role":"user","content":"a"}\n{"role":"user","content":"b"}\n' \
  'line 2: two user messages'
late='{"role":"user","content":"a"}\n{"role":"assistant","content":"b"}\n'
bad "late system" "$late"'{"role":"system","content":"c"}\n' \
  'line 3: a system message may only be the first'
bad "reasoning on user" '{"role":"user","content":"a","reasoning_content":"r"}\n' \
  'line 1: reasoning_content is only allowed'
bad "tool role" '{"role":"tool","content":"a"}\n' 'line 1: role "tool"'
bad "not a string" '{"role":"user","content":5}\n' 'line 1: "content" must be a string'
bad "empty line" '{"role":"user","content":"a"}\n\n' 'line 2: empty line'
bad "dangling user" '{"role":"user","content":"a"}\n' 'without a reply'
bad "assistant first" '{"role":"assistant","content":"a"}\n' \
  'line 1: an assistant message must follow'
echo "ok 10 corrupt histories refused with the line named, files untouched"

printf '/save %s\n/load %s\n/load %s\n/reset\nafter reset\n/stats\n' "$T/saved.jsonl" \
  "$T/bad.jsonl" "$T/saved.jsonl" |
  chat --history "$H" > "$T/out" 2> "$T/err" || fail "save/load session exited $?"
cmp -s "$T/saved.jsonl" "$T/keep" || fail "/save wrote something else than the history"
grep -q 'nothing changed' "$T/out" || fail "/load of a bad file not refused"
grep -q 'loaded 7 messages' "$T/out" || fail "/load"
grep -q 'system message kept' "$T/out" || fail "/reset"
[ "$(wc -l < "$H")" = 3 ] || fail "history after /reset + 1 turn has $(wc -l < "$H") lines, want 3"
echo "ok /save, /load (bad file refused), /reset keeps the system message"

printf 'a long enough message to overflow a tiny context\n/stats\n' | \
  chat --ctx 30 > "$T/out" 2> "$T/err" || fail "ctx session exited $?"
grep -q 'context full' "$T/err" || fail "context limit not reported"
grep -q '^messages: 0' "$T/out" || fail "the refused turn was kept"
echo "ok context limit reported before generating; nothing kept"
