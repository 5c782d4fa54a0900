#!/bin/sh
# Why each batch line stopped (issue 35): "stop" is "length" (its gen reached), "eos" (the
# model's end token), or "interrupted" (SIGINT: the sequences in flight are written with
# their tokens so far, a prefix of their solo run, where they were not written at all); the
# --out report counts them ("stops"). K3_TEST_SIGINT_AT_EXPERT raises the SIGINT inside a
# long prefill's step (no timing).
set -u
. tests/sh/lib/check.sh
M=tests/models/tiny5
EOSP=754,475,608,87,876,126                # greedy, reaches eos within 40 tokens (batch.sh)
printf '{"id": "len", "ids": [5, 6, 7], "gen": 4}\n{"id": "eos", "ids": [%s], "gen": 40}\n' \
  "$EOSP" > $T/a.jsonl
$K3 $M --batch $T/a.jsonl --quiet --out $T/r.json > $T/o 2> $T/e; rc=$?
[ $rc -eq 0 ] && grep -q '"id": "len", .*"stop": "length", .*"n_generated": 4,' $T/o &&
  grep -q '"id": "eos", .*"stop": "eos",' $T/o &&
  ok "stop: length for the line that reached its gen, eos for the one that ended" ||
  bad "length/eos: exit $rc, $(cat $T/o $T/e)"
grep -q '"stops": {"eos": 1, "length": 1},' $T/r.json && ok "--out: stops counted" ||
  bad "--out stops: $(grep stops $T/r.json)"

ids=$(seq 1 300 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 200 + 1) }')
{ printf '{"id": "short", "ids": [5, 6, 7], "gen": 20}\n'
  printf '{"id": "long", "ids": [%s], "gen": 2}\n' "$ids"; } > $T/b.jsonl
solo=$($K3 $M --ids 5,6,7 --gen 20 --quiet)
# SIGINT in the second step: short has its first token, long is still prefilling
K3_TEST_SIGINT_AT_EXPERT=300 $K3 $M --batch $T/b.jsonl --batch-size 2 --threads 1 --quiet \
  > $T/o 2> $T/e; rc=$?
got=$(sed -n 's/^{"id": "short", "generated_ids": \[\([^]]*\)\], "stop": "interrupted".*/\1/p' \
  $T/o | tr -d ' ')
n=$(sed -n 's/^{"id": "short", .*"n_generated": \([0-9]*\),.*/\1/p' $T/o)
[ $rc -eq 1 ] && [ -n "$got" ] && [ "${n:-0}" -ge 1 ] && [ "${n:-20}" -lt 20 ] &&
  case "$solo," in "$got",*) true ;; *) false ;; esac &&
  ok "SIGINT: the decoding line written, stop interrupted, $n tokens: its solo run's first" ||
  bad "SIGINT short: exit $rc, got '$got' (solo $solo): $(cat $T/o)"
grep -q '^{"id": "long", "generated_ids": \[\], "stop": "interrupted", "n_prompt": 300,' $T/o &&
  grep -q 'interrupted (SIGINT): 0 of 2 prompts finished, 2 stopped' $T/e &&
  ok "SIGINT: the prefilling line written too, stop interrupted, no tokens" ||
  bad "SIGINT long: $(cat $T/o $T/e)"
exit $fail
