#!/bin/sh
# A long prefill is visible and can be stopped inside a layer (issue 24 item 5):
# - SIGINT (the one-shot command, batch) and Ctrl-C (chat) stop the forward at the next
#   expert, not at the end of the layer or the chunk: the test hook
#   K3_TEST_SIGINT_AT_EXPERT=N raises SIGINT before the N-th expert of a long prefill, and
#   the expert-cache trace must then hold exactly N - 1 of its experts (a forward that
#   looks only between layers fetches the rest of the layer's 16, one that looks only
#   between chunks all of them);
# - a streamed trunk: the rest of the stopped pass is not read (K3_FAULT_TRUNK_READ);
# - chat: the turn is dropped and the next one prefills the conversation again;
# - batch: the lines already finished are written, the stopped one "stop": "interrupted",
#   exit 1;
# - progress lines (tokens, layer, ETA) on stderr while a prefill runs (K3_TEST_SLOW_MM_MS
#   makes each matmul sleep; K3_PROGRESS_SECONDS their interval), none with --quiet; the
#   pinned trunk's load the same;
# - serve: a client that goes away stops the step it alone is in, inside its layer; the
#   log says so, /metrics has the prefill gauges, the next request is answered.
. tests/sh/lib/check.sh
M=tests/models/tiny5; TK=tests/tok/tiny
ids=$(seq 1 300 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 200 + 1) }')
lines() { n=$(grep -c '^[0-9]' "$1" 2>/dev/null); echo "${n:-0}"; }   # experts in a trace

# one-shot: SIGINT before the 21st expert of the prefill
mkdir -p $T/t1
K3_TEST_SIGINT_AT_EXPERT=21 $K3 $M --ids "$ids" --gen 4 --threads 1 --dump-cache-trace $T/t1 \
  >$T/out 2>$T/err; rc=$?
n=$(lines $T/t1/cache_trace.txt)
[ $rc = 1 ] && grep -q 'prefill: interrupted after 0 of 300 tokens (in layer 3 of 13)' $T/err \
  && [ ! -s $T/out ] && ok "one-shot: SIGINT stops the prefill, exit 1, nothing out" \
  || bad "one-shot: exit $rc, stdout '$(cat $T/out)', $(grep interrupted $T/err)"
[ "$n" = 20 ] && ok "one-shot: stopped at the expert: 20 of its experts fetched" \
  || bad "one-shot: $n experts fetched after SIGINT before the 21st, want 20"

# a streamed trunk: the rest of the stopped pass is drained without reading it (a stop
# costs no I/O): an injected failure of trunk read 150 of the pass's 186 never happens
$K3 pack $M $T/trunk --quiet || bad "k3 pack"
K3_FAULT_TRUNK_READ=150 K3_TEST_SIGINT_AT_EXPERT=21 $K3 $M --ids "$ids" --gen 0 --threads 1 \
  --trunk $T/trunk --preset minimum >/dev/null 2>$T/err; rc=$?
[ $rc = 1 ] && grep -q 'prefill: interrupted after 0 of 300 tokens (in layer 3 of 13)' $T/err \
  && ok "streamed trunk: stopped in layer 3, the rest of the pass not read" \
  || bad "streamed trunk: exit $rc: $(tail -n 1 $T/err)"

# progress on stderr while the prefill runs; none with --quiet
K3_TEST_SLOW_MM_MS=2 K3_PROGRESS_SECONDS=0.2 $K3 $M --ids "$ids" --gen 0 --threads 1 \
  >/dev/null 2>$T/err || bad "progress: exit $?"
re='^k3: prefill: 0 of 300 tokens done, the next 300 in layer [0-9]* of 13; [0-9]*%, ~.* left'
grep -q "$re" $T/err && ok "progress: $(grep -c '^k3: prefill: ' $T/err) lines, e.g." \
  "$(grep '^k3: prefill: ' $T/err | tail -n 1)" || bad "progress: no progress line: $(cat $T/err)"
K3_TEST_SLOW_MM_MS=2 K3_PROGRESS_SECONDS=0.2 $K3 $M --ids "$ids" --gen 0 --threads 1 --quiet \
  >/dev/null 2>$T/err
grep -q 'prefill: ' $T/err && bad "progress: lines with --quiet" || ok "progress: none with --quiet"
# the pinned trunk's load has its progress lines too (a real K3's is up to 111 GB)
K3_PROGRESS_SECONDS=0.000001 $K3 $M --ids 1,2,3 --gen 1 --threads 2 --trunk $T/trunk \
  >/dev/null 2>$T/err || bad "load progress: exit $?"
re='^k3: pinning the trunk: [0-9.]* of [0-9.]* GB read ([0-9]*%), [0-9.]* GB/s, ~.* left$'
grep -q "$re" $T/err && grep -q '^k3: pinned [0-9.]* GB of the trunk in ' $T/err &&
  ok "load progress: $(grep -c '^k3: pinning' $T/err) lines, e.g. $(grep '^k3: pinning' $T/err |
  tail -n 1)" || bad "load progress: no line: $(head -c 600 $T/err)"
K3_PROGRESS_SECONDS=0.000001 $K3 $M --ids 1,2,3 --gen 1 --threads 2 --trunk $T/trunk --quiet \
  >/dev/null 2>$T/err
grep -q 'pinn' $T/err && bad "load progress: lines with --quiet" ||
  ok "load progress: none with --quiet"

# batch: the short line 1 finishes, SIGINT inside line 2's prefill
printf '{"id": "short", "ids": [5, 6, 7], "gen": 2}\n' > $T/one.jsonl
{ cat $T/one.jsonl; printf '{"id": "long", "ids": [%s], "gen": 2}\n' "$ids"; } > $T/b.jsonl
mkdir -p $T/b0 $T/b1
$K3 $M --batch $T/one.jsonl --batch-size 1 --threads 1 --dump-cache-trace $T/b0 >/dev/null \
  2>&1 || bad "batch: the short line alone: exit $?"
K3_TEST_SIGINT_AT_EXPERT=21 $K3 $M --batch $T/b.jsonl --batch-size 1 --threads 1 \
  --dump-cache-trace $T/b1 >$T/out 2>$T/err; rc=$?
n0=$(lines $T/b0/cache_trace.txt); n1=$(lines $T/b1/cache_trace.txt)
[ $rc = 1 ] && grep -q 'interrupted (SIGINT): 1 of 2 prompts finished' $T/err \
  && grep -q '"id": "short", .*"stop": "length"' $T/out \
  && grep -q '"id": "long", "generated_ids": \[\], "stop": "interrupted"' $T/out \
  && ok "batch: SIGINT: exit 1, the finished line written, the stopped one says interrupted" \
  || bad "batch: exit $rc, $(grep -i interrupt $T/err), out: $(cat $T/out)"
[ $((n1 - n0)) = 20 ] && ok "batch: stopped at the expert: 20 of the long prefill's fetched" \
  || bad "batch: $((n1 - n0)) experts of the long prefill fetched, want 20"

# chat: Ctrl-C inside the long turn's prefill; the next turn prefills again
mkfifo $T/in
long=$(i=0; while [ $i -lt 60 ]; do printf 'words %d and more ' $i; i=$((i+1)); done)
mkdir -p $T/c
K3_TEST_SIGINT_AT_EXPERT=21 $K3 $M --chat --tok $TK --no-think --gen 2 --seed 9 --threads 1 \
  --history $T/h.jsonl --dump-cache-trace $T/c < $T/in > $T/cout 2> $T/cerr &
pid=$!
exec 3> $T/in
# (k3 opens the FIFO on stdin, which blocks, before its stderr file exists: none counts 0)
wait_for() { i=0; while n=$(grep -c -- "$2" "$1" 2>/dev/null); [ "${n:-0}" -lt "$3" ]; do
  i=$((i+1)); [ $i -gt 600 ] && return 1; sleep 0.1; done; }
printf 'Hello\n' >&3
wait_for $T/cerr '^k3: \[reused' 1 || bad "chat: turn 1 did not finish"
n0=$(lines $T/c/cache_trace.txt)
printf '%s\n' "$long" >&3
wait_for $T/cerr 'interrupted (Ctrl-C) during the prefill' 1 || bad "chat: no interrupt"
n1=$(lines $T/c/cache_trace.txt)
printf 'Again\n' >&3
wait_for $T/cerr '^k3: \[reused' 2 || bad "chat: the turn after the interrupt did not finish"
exec 3>&-
wait $pid; rc=$?
[ $((n1 - n0)) = 20 ] && ok "chat: Ctrl-C stopped the prefill at the expert (20 fetched)" \
  || bad "chat: $((n1 - n0)) experts fetched after Ctrl-C before the 21st, want 20"
[ $rc = 0 ] && grep -q '^k3: prefilling [0-9]* tokens: the interrupted prefill' $T/cerr \
  && [ "$(wc -l < $T/h.jsonl)" = 4 ] && ! grep -q 'words 12 and more' $T/h.jsonl \
  && ok "chat: the turn was dropped, the next one prefilled again, exit 0" \
  || bad "chat: exit $rc, history $(wc -l < $T/h.jsonl) lines: $(tail -n 3 $T/cerr)"

# serve: the client goes away during a slow prefill
command -v curl >/dev/null 2>&1 || { echo "SKIP: the serve part needs curl"; exit $fail; }
K3_TEST_SLOW_MM_MS=30 K3_PROGRESS_SECONDS=0.3 $K3 serve $M --tok $TK --port 0 --threads 1 \
  2> $T/serr &
spid=$!
trap 'kill $spid 2>/dev/null; chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
i=0; while ! grep -qs 'listening on' $T/serr; do i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1
done
p=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' $T/serr)
u=http://127.0.0.1:$p
curl -s --max-time 2 $u/v1/chat/completions -d "{\"messages\": [{\"role\": \"user\", \
\"content\": \"$long\"}], \"max_tokens\": 2}" >/dev/null
wait_for $T/serr 'every request of the step went away: it stops in layer' 1 \
  && ok "serve: $(grep 'went away' $T/serr)" || bad "serve: the step did not stop"
grep -q '^k3: serve: prefill: 0 of [0-9]* tokens done' $T/serr && ok "serve: progress in the log" \
  || bad "serve: no progress line in the log"
curl -s --max-time 60 $u/v1/chat/completions \
  -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}' > $T/r2
grep -q '"finish_reason"' $T/r2 && ok "serve: the next request is answered" \
  || bad "serve: the next request: $(cat $T/r2)"
curl -s --max-time 60 $u/metrics > $T/m
grep -q '^k3_client_disconnects_total 1$' $T/m && grep -q '^k3_prefill_tokens_in_flight 0$' $T/m \
  && grep -q '^k3_prefill_tokens_done 0$' $T/m \
  && ok "serve: /metrics: 1 disconnect, the prefill gauges" || bad "serve: /metrics: $(grep \
  -e disconnects -e prefill_tokens $T/m)"
exit $fail
