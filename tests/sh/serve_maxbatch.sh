#!/bin/sh
# k3 serve --max-batch: by default as many requests generate at once as the memory plan
# fits (its sequence count, at most its chunk), printed in the startup line and in
# /metrics k3_max_batch; under a smaller K3_MEM_AVAILABLE the plan fits fewer, and they are
# the most whose plan fits 90% of it (one more does not); --max-batch still overrides.
. tests/sh/lib/serve.sh
met() { $C "http://127.0.0.1:$1/metrics" | sed -n "s/^k3_$2 //p"; }
mb() { sed -n 's/.*; max batch \([0-9]*\)[;,].*/\1/p' "$T/$1.err"; }
total() { sed -n 's/^  total *\([0-9.]*\)  available.*/\1/p' "$T/$1.err"; }

# ample memory: a chunk's worth (the plan's chunk, 64 tokens per step)
start big --verbose
n=$(mb big)
[ "$n" = 64 ] && grep -q "max batch 64, the memory plan's;" "$T/big.err" ||
  fail "default max batch '$n', want the plan's 64: $(grep 'serving' "$T/big.err")"
grep -q 'prefill chunk 64 tokens per forward' "$T/big.err" || fail "the plan's chunk is not 64"
grep -q '^  sequences  *64  planned' "$T/big.err" || fail "the plan did not plan 64 sequences"
[ "$(met "$PORT_big" max_batch)" = 64 ] || fail "/metrics k3_max_batch $(met "$PORT_big" max_batch)"
echo "ok default --max-batch with ample memory: 64, the plan's chunk, printed at start"

# 100 MB available: the plan fits fewer; one more would not fit 90% of it
A=100000000
K3_MEM_AVAILABLE=$A start low --preset laptop --verbose
n=$(mb low)
[ -n "$n" ] && [ "$n" -gt 1 ] && [ "$n" -lt 64 ] ||
  fail "max batch '$n' under $A bytes available: want fewer than 64"
grep -q "^  sequences  *$n  planned" "$T/low.err" || fail "the startup line's $n is not the plan's"
[ "$(met "$PORT_low" max_batch)" = "$n" ] || fail "/metrics k3_max_batch is not $n"
K3_MEM_AVAILABLE=$A start one --preset laptop --verbose --max-batch $((n + 1))
K3_MEM_AVAILABLE=$A start same --preset laptop --verbose --max-batch $n
awk -v a=$A -v f="$(total same)" -v g="$(total one)" \
  'BEGIN { r = 0.9 * a / 1e9; exit !(f != "" && g != "" && f <= r && g > r) }' ||
  fail "$n sequences plan $(total same) GB, $((n + 1)) plan $(total one) GB: want the first" \
    "within 90% of $A bytes and the second past it"
R='{"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "max_tokens": 4}'
$C "http://127.0.0.1:$PORT_low/v1/chat/completions" -d "$R" | grep -q '"finish_reason"' ||
  fail "the server with the plan's max batch did not answer"
echo "ok under $A bytes available the default max batch is $n: its plan fits 90%," \
  "$((n + 1)) do not (plans $(total same) and $(total one) GB)"

# auto budgets pick the preset for one sequence: the batch takes what the budgets leave
K3_MEM_AVAILABLE=$A start auto --verbose
K3_MEM_AVAILABLE=$A start auto1 --verbose --max-batch 1
pa=$(sed -n 's/^k3: auto budgets: preset \([a-z]*\).*/\1/p' "$T/auto.err")
p1=$(sed -n 's/^k3: auto budgets: preset \([a-z]*\).*/\1/p' "$T/auto1.err")
[ -n "$pa" ] && [ "$pa" = "$p1" ] ||
  fail "auto budgets under $A bytes: preset '$pa' by default, '$p1' with --max-batch 1"
echo "ok auto budgets under $A bytes pick preset $pa, as for one sequence, max batch $(mb auto)"

# the flag overrides the plan
start three --max-batch 3
grep -q '; max batch 3; opened' "$T/three.err" ||
  fail "--max-batch 3: $(grep serving "$T/three.err")"
[ "$(met "$PORT_three" max_batch)" = 3 ] || fail "--max-batch 3: /metrics k3_max_batch"
echo "ok --max-batch 3 overrides the plan (startup line and /metrics)"
