#!/bin/sh
# SIGINT (Ctrl-C) during a long prefill stops it inside the prefill, not after it: nothing
# is generated, the message is not stored (no empty reply in the history), the next turn
# says why it prefills the conversation again, and the session goes on and exits 0, with
# the trunk resident and streamed through its ring.
# The signal is sent once the expert-cache trace shows the long prefill under way.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat -v "$T/err"; exit 1; }
# waits until FILE has at least N lines matching RE (60 s)
# K3_TEST_SLOW=N: N times the patience, for slow builds (make test-asan); not a timing test
slow=${K3_TEST_SLOW:-1}
wait_for() { i=0; while n=$(grep -a -c -- "$2" "$1" 2>/dev/null); [ "${n:-0}" -lt "$3" ];
  do i=$((i+1)); [ $i -gt $((600 * slow)) ] && return 1; sleep 0.1; done; }
lines() { wc -l < "$T/cache_trace.txt" 2>/dev/null || echo 0; }

session() {   # session LABEL extra flags...: the whole scenario
label=$1; shift
rm -f "$T/in" "$T/h.jsonl" "$T/cache_trace.txt"
mkfifo "$T/in"
"$K3" $M --chat --tok $TK --no-think --gen 4 --seed 9 --threads 1 --prefill-chunk 64 --history \
  "$T/h.jsonl" \
  --dump-cache-trace "$T" "$@" < "$T/in" > "$T/out" 2> "$T/err" &
pid=$!
exec 3> "$T/in"
printf 'Hello\n' >&3
wait_for "$T/err" '^k3: \[reused' 1 || fail "turn 1 did not finish"
n1=$(lines)
long=$(i=0; while [ $i -lt 300 ]; do printf 'words %d and more ' $i; i=$((i+1)); done)
printf '%s\n' "$long" >&3
# ~2900 tokens: about 45 chunks of 64 (--prefill-chunk 64; the plan would take one), each
# adding up to 12 layers x 16 experts to the trace
i=0; while [ "$(lines)" -lt $((n1 + 1000)) ]; do i=$((i+1)); [ $i -gt $((600 * slow)) ] \
  && fail "the long prefill did not start"; sleep 0.05; done
kill -INT $pid
wait_for "$T/err" 'interrupted (Ctrl-C) during the prefill' 1 \
  || fail "Ctrl-C did not stop the prefill"
grep -q 'prefilled 2[0-9][0-9][0-9] tokens' "$T/err" && fail "the long prefill ran to its end"
sed -n 's/.*during the prefill, after \([0-9]*\) of \([0-9]*\) tokens.*/\1 \2/p' "$T/err" > "$T/n"
read done total < "$T/n"
[ "$done" -lt "$total" ] || fail "interrupted after $done of $total tokens"
echo "ok $label: SIGINT stops a long prefill after $done of $total tokens; nothing was generated"

printf 'Again\n/stats\n' >&3
wait_for "$T/err" '^k3: \[reused' 2 || fail "the turn after the interrupt did not finish"
grep -q '^k3: prefilling [0-9]* tokens: the interrupted prefill' "$T/err" \
  || fail "the next turn does not say why it prefills again"
grep -q '^k3: \[reused 0 positions' "$T/err" || fail "the next turn reused a partial state"
exec 3>&-
wait $pid; rc=$?; pid=
[ $rc = 0 ] || fail "exit $rc, want 0"
grep -q '^messages: 4,' "$T/out" || fail "/stats: $(grep '^messages' "$T/out")"
[ "$(wc -l < "$T/h.jsonl")" = 4 ] || fail "history has $(wc -l < "$T/h.jsonl") lines, want 4"
grep -q 'words 12 and more' "$T/h.jsonl" && fail "the interrupted message was stored"
grep -q '"role":"assistant","content":"","reasoning_content":""' "$T/h.jsonl" \
  && fail "an empty reply was stored"
echo "ok $label: the next turn prefills again (saying why), the history holds 4 messages" \
  "and no empty reply; exit 0"
}
session resident
# a streamed trunk (ring of 2, 5 expert slots): the stopped forward still walks the ring in
# order, so the next turn's layers come in sequence
"$K3" pack $M "$T/trunk" --quiet || fail "k3 pack"
session "streamed trunk" --trunk "$T/trunk" --preset minimum
if grep -q "out of order" "$T/err"; then fail "the ring went out of order"; fi
echo "ok streamed trunk: the ring stayed in order"
