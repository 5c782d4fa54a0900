#!/bin/sh
# k3 --batch FILE --draft DIR (issue 36): each sequence drafts from its own DSpark context
# (its rows of the step's taps), several sequences' blocks verified in one step. A batch of
# 5 (3 greedy, 2 seeded sampled, one ending at eos) gives the ids and --dump-logits bytes
# of the run without a draft, at 2 and 1 threads, blocks chosen or fixed, all in flight or
# two at a time (a slot's context reset for its next prompt). With the test hook
# K3_TEST_DRAFT_ORACLE (one list a sequence, ';'-separated) drafts are accepted, and every
# sequence's drafts (K3_TEST_DRAFT_LOG, a function of its context) equal those of its solo
# run: a context fed another sequence's rows, or rolled back wrong, drafts otherwise.
# k3 bench --draft passes the draft to its rows and reports them.
. tests/sh/lib/check.sh
M=tests/models/tiny5; D=tests/models/tiny5_dspark
P=$(cat $M/ref/prompt.txt)
cat > $T/b.jsonl <<EOF
{"id": "a", "ids": [$P], "gen": 20}
{"id": "b", "ids": [754,475,608,87,876,126], "gen": 24}
{"id": "c", "ids": [9,8,7,6,5,4,3,2,1,10,11,12,13,14,15,16,17,18,19,20], "gen": 18}
{"id": "d", "ids": [100,200,300], "gen": 22, "temperature": 0.9, "seed": 5}
{"id": "e", "ids": [42,43,44,45,46,47,48,49], "gen": 20, "temperature": 0.8, "top_p":0.9, "seed":11}
EOF
# solo ID: the flags of line ID's run alone
solo() {
  case $1 in
    a) echo "--ids $P --gen 20" ;;
    b) echo "--ids 754,475,608,87,876,126 --gen 24" ;;
    c) echo "--ids 9,8,7,6,5,4,3,2,1,10,11,12,13,14,15,16,17,18,19,20 --gen 18" ;;
    d) echo "--ids 100,200,300 --gen 22 --temperature 0.9 --seed 5" ;;
    e) echo "--ids 42,43,44,45,46,47,48,49 --gen 20 --temperature 0.8 --top-p 0.9 --seed 11" ;;
  esac
}
ids() { sed -n "s/^{\"id\": \"$1\", \"generated_ids\": \[\([^]]*\)\].*/\1/p" $2 | tr -d ' '; }
lines() { sed 's/, "seconds_prefill.*//' $1 | sort; }    # each line's ids, in id order
num() { sed -n "s/^  \"$1\": \([0-9]*\),\$/\1/p" $2; }
mkdir $T/d0 $T/d1
$K3 $M --batch $T/b.jsonl --quiet --dump-logits $T/d0 > $T/o0 2> $T/e0 ||
  bad "the batch without a draft: $(tail -n 2 $T/e0)"
lines $T/o0 > $T/l0
grep -q '"stop": "eos"' $T/o0 || bad "no line ends at eos"
[ "$(wc -l < $T/l0)" = 5 ] || bad "not 5 lines: $(cat $T/o0)"
# same NAME ARGS..: the batch with --draft and ARGS gives the ids and logits bytes of o0
same() {
  name=$1; shift
  rm -f $T/d1/*
  $K3 $M --batch $T/b.jsonl --dump-logits $T/d1 --draft $D --out $T/r.json "$@" > $T/o1 \
    2> $T/e1; rc=$?
  lines $T/o1 > $T/l1
  diffs=0
  for f in $T/d0/*.f32; do cmp -s $f $T/d1/${f##*/} || diffs=$((diffs + 1)); done
  if [ $rc = 0 ] && cmp -s $T/l0 $T/l1 && [ $diffs = 0 ] && [ "$(ls $T/d1 | wc -l)" = 5 ]
  then ok "$name: the ids and logits bytes of the batch without a draft" \
          "($(num draft_accepted $T/r.json) of $(num draft_proposed $T/r.json) drafts kept)"
  else bad "$name: exit $rc, $diffs dumps differ: $(diff $T/l0 $T/l1 | head -n 4)" \
           "$(tail -n 2 $T/e1)"; fi
}
same "greedy and sampled, 2 threads, blocks chosen"
same "1 thread, --draft-block 3" --threads 1 --draft-block 3
same "--batch-size 2, --draft-block 7" --batch-size 2 --draft-block 7
grep -q '"draft_rows_verified": [1-9]' $T/r.json && grep -q '"draft_blocks": [1-9]' $T/r.json &&
  grep -q 'k3: draft: [0-9]* blocks, [0-9]* drafts verified' $T/e1 &&
  ok "the report and --out carry blocks, proposed, accepted and rows verified" ||
  bad "report: $(grep draft_ $T/r.json | tr -d '\n') $(grep 'k3: draft' $T/e1)"

# the oracle: each sequence's own continuation, the first R of a block right (R empty:
# all); the drafts each block made (the model's, logged before the hook replaces them)
# and the drafts proposed and accepted equal those of the 5 solo runs
OR="$(ids a $T/o0);$(ids b $T/o0);$(ids c $T/o0);$(ids d $T/o0);$(ids e $T/o0)"
oracle() {
  R=$1; name=$2; shift 2
  : > $T/ls; sacc=0; spro=0
  for id in a b c d e; do
    # shellcheck disable=SC2046
    K3_TEST_DRAFT_ORACLE=$(ids $id $T/o0) K3_TEST_DRAFT_RIGHT=$R K3_TEST_DRAFT_LOG=1 \
      $K3 $M $(solo $id) --draft $D --draft-block 7 --out $T/s.json 2>&1 > /dev/null |
      grep 'k3: test: block' >> $T/ls
    sacc=$((sacc + $(num draft_accepted $T/s.json)))
    spro=$((spro + $(num draft_proposed $T/s.json)))
  done
  K3_TEST_DRAFT_ORACLE=$OR K3_TEST_DRAFT_RIGHT=$R K3_TEST_DRAFT_LOG=1 $K3 $M \
    --batch $T/b.jsonl --draft $D --draft-block 7 --out $T/r.json "$@" > $T/o1 2> $T/e1
  rc=$?
  grep 'k3: test: block' $T/e1 | sort > $T/lb
  sort $T/ls > $T/ls2
  lines $T/o1 > $T/l1
  acc=$(num draft_accepted $T/r.json); pro=$(num draft_proposed $T/r.json)
  if [ $rc = 0 ] && cmp -s $T/l0 $T/l1 && { [ "${acc:-0}" -gt 0 ] || [ "$R" = 0 ]; } &&
     [ -s $T/lb ] &&
     cmp -s $T/lb $T/ls2 && [ "$acc" = $sacc ] && [ "$pro" = $spro ]
  then ok "$name: the same ids, $acc of $pro drafts accepted (as the solo runs)," \
          "$(wc -l < $T/lb) blocks' drafts those of the solo runs"
  else bad "$name: exit $rc, accepted $acc of $pro (solo $sacc of $spro);" \
           "$(diff $T/l0 $T/l1 | head -n 2)" \
           "$(diff $T/lb $T/ls2 | head -n 4) $(tail -n 1 $T/e1)"; fi
}
oracle 2 "oracle, 2 right a block, 5 in flight"
oracle "" "oracle, every draft right, 2 in flight, 1 thread" --batch-size 2 --threads 1
oracle 4 "oracle, 4 right a block, 3 in flight" --batch-size 3
oracle 0 "oracle, none right (blocks pause as the solo runs' do)" --batch-size 3

# past the draft's max_position_embeddings (256 here) a sequence takes plain steps
printf '{"id": "long", "ids": [%s], "gen": 250}\n{"id": "s", "ids": [%s], "gen": 8}\n' \
  "$P" "$P" > $T/long.jsonl
$K3 $M --batch $T/long.jsonl --quiet > $T/lo0 2> $T/e
$K3 $M --batch $T/long.jsonl --quiet --draft $D --draft-block 7 > $T/lo1 2> $T/e; rc=$?
[ $rc = 0 ] && [ -s $T/lo0 ] && [ "$(lines $T/lo0)" = "$(lines $T/lo1)" ] &&
  ok "a sequence past the draft's 256 positions: the same ids" ||
  bad "past max_position_embeddings: exit $rc $(tail -n 2 $T/e)"

# k3 bench --draft: its rows (one prompt, and a batch of 3) run the children with the draft
# and give the blocks, drafts and accepted per block
$K3 bench $M --draft $D --draft-block 7 -n 12 --reps 1 --no-limits --batch 1,3 -o json -q \
  > $T/bench.json 2> $T/e; rc=$?
R='"draft": {"blocks": [1-9][0-9]*, "proposed": [1-9][0-9]*, "accepted": 0, '
R="$R\"accepted_per_block\": 0}"
[ $rc = 0 ] && [ "$(grep -o "$R" $T/bench.json | wc -l)" = 2 ] &&
  ok "k3 bench --draft: both rows give blocks, drafts and accepted per block" ||
  bad "k3 bench --draft: exit $rc: $(grep -o '"draft": {[^}]*}' $T/bench.json) $(tail -n 2 $T/e)"
$K3 bench $M --draft $D --no-spec > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft verifies its blocks' $T/e &&
  ok "k3 bench --draft --no-spec: exit 2" ||
  bad "bench --draft --no-spec: exit $rc"

# refusals: exit 2 naming the flag
$K3 $M --batch $T/b.jsonl --draft-block 3 > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft-block is about a --draft DIR' $T/e &&
  ok "--draft-block without --draft: exit 2" || bad "--draft-block alone: exit $rc $(cat $T/e)"
$K3 $M --batch $T/b.jsonl --draft $D --draft-block 8 > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft-block takes 1..7' $T/e && ok "--draft-block 8: exit 2" ||
  bad "--draft-block 8: exit $rc $(cat $T/e)"
$K3 $M --batch $T/b.jsonl --draft $D --state-file all > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft needs the states resident' $T/e &&
  ok "--draft with a state file: exit 2" || bad "--draft --state-file all: exit $rc $(cat $T/e)"
$K3 $M --batch $T/b.jsonl --draft $T/none > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q "$T/none" $T/e && ok "a missing draft folder: exit 2 naming it" ||
  bad "missing draft: exit $rc $(cat $T/e)"
exit $fail
