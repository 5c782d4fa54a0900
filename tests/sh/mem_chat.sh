#!/bin/sh
# Chat uses the same memory plan and budgets as batch mode: a piped two-turn chat at a
# starved budget (packed trunk through the 2-slot ring, 5 expert slots, lm_head in row
# blocks) prints byte-identical replies to the resident run with the same --seed.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; cat "$T/err" 2>/dev/null | tail -5; exit 1; }
chat() { timeout 120 "$K3" $M --chat --tok $TK --no-think --gen 8 --seed 11 "$@" < "$T/in"; }
strip() { grep -a -v -e '^last turn' -e '^session' -e '^peak RSS' -e '^positions' "$1"; }
$K3 pack $M $T/trunk --quiet 2>"$T/err" || fail "k3 pack"
printf 'Hello there\n/stats\nAnd a second\\\nline\n/stats\n' > "$T/in"
chat --cache-gb 1000 > "$T/res" 2> "$T/err" || fail "resident chat exited $?"
K3_LMHEAD_ROWS=7 chat --trunk $T/trunk --trunk-gb 0 --cache-gb 0 --verbose > "$T/low" \
  2> "$T/err" || fail "starved chat exited $?"
grep -q "memory plan" "$T/err" && grep -q "lm_head streamed" "$T/err" \
  && grep -q "0 of 172 matrices pinned .* pieces streamed through" "$T/err" \
  || fail "starved chat did not print the plan / stream the trunk and lm_head"
strip "$T/res" > "$T/a"; strip "$T/low" > "$T/b"
[ -s "$T/a" ] && cmp -s "$T/a" "$T/b" || fail "starved chat replies differ from the resident run"
K3_MEM_AVAILABLE=1000 chat > /dev/null 2> "$T/err"; rc=$?
[ $rc -eq 1 ] && grep -q "needs .* GB but" "$T/err" \
  || fail "chat did not refuse a plan that does not fit (rc $rc)"
$K3 $M --chat --tok $TK --preset nope < /dev/null > /dev/null 2>&1
[ $? -eq 2 ] || fail "chat --preset nope: want exit 2"
echo "ok chat: two piped turns at a starved budget (--trunk, ring, 5 slots, lm_head blocks) ==" \
  "resident, same --seed; refusal exit 1; bad preset exit 2"
