#!/bin/sh
# k3 bench --batch B[,...]: rows of B sequences decoded together (k3 MODEL_DIR --batch with B
# prompts of -p ids, -n each) beside the one-sequence rows: the row's batch, the generated
# tokens of all B sequences, an aggregate tok/s, no memory/disk share (a batched step serves
# B tokens), the batch column in md and csv; the JSON checked with the project's parser when
# built. No timing assertions.
set -u
BUILD=${BUILD:-build}
CHK=$BUILD/tests/test_bench_json
M=tests/models/tiny5
. tests/sh/lib/check.sh
export TMPDIR=$T
B="$K3 bench $M"

$B --batch 1,3 -p 4 -n 5 --reps 2 -o json --disk-gb 0 -q > $T/b.json 2> $T/err; rc=$?
if [ $rc -ne 0 ]; then bad "--batch 1,3 -o json: exit $rc $(tail -n 2 $T/err)"
elif [ -x "$CHK" ]; then "$CHK" $T/b.json 2 2 > $T/chk && ok "-o json: the schema holds" ||
  bad "schema: $(cat $T/chk)"
fi
$B --batch 1,3 -p 4 -n 5 --reps 2 -o jsonl --disk-gb 0 -q > $T/b.jsonl 2> $T/err; rc=$?
r1=$(sed -n 2p $T/b.jsonl); r2=$(sed -n 3p $T/b.jsonl)
if [ $rc -ne 0 ]; then bad "--batch 1,3: exit $rc $(tail -n 2 $T/err)"
else
  echo "$r1" | grep -q '"batch": 1, "n_generated": 5,' || bad "row 1: $(echo "$r1" | cut -c1-300)"
  echo "$r2" | grep -q '"batch": 3, "n_generated": 15,' || bad "row 2: $(echo "$r2" | cut -c1-300)"
  echo "$r2" | grep -q '"reps": 2,' || bad "row 2 did not run its reps"
  tps=$(echo "$r2" | sed -n 's/.*"tokens_per_second": \([0-9.e+-]*\), "peak.*/\1/p')
  spt=$(echo "$r2" | sed -n 's/.*"seconds_per_token": {"median": \([0-9.e+-]*\),.*/\1/p')
  awk -v t="$tps" -v s="$spt" 'BEGIN { exit !(t > 0 && s > 0 && t * s > 0.99 && t * s < 1.01) }' \
    || bad "row 2: tok/s '$tps' is not 1 / s/token '$spt'"
  # one rep: tok/s is all 3 sequences' 5 tokens over the run's seconds
  $B --batch 3 -p 4 -n 5 --reps 1 -o jsonl --no-limits -q > $T/one.jsonl || bad "one rep"
  r=$(sed -n 2p $T/one.jsonl)
  w=$(echo "$r" | sed -n 's/.*"seconds": {"median": \([0-9.e+-]*\),.*/\1/p')
  t1=$(echo "$r" | sed -n 's/.*"tokens_per_second": \([0-9.e+-]*\), "peak.*/\1/p')
  awk -v t="$t1" -v w="$w" 'BEGIN { exit !(w > 0 && t * w > 14.9 && t * w < 15.1) }' ||
    bad "tok/s $t1 x seconds $w is not the 15 tokens of the 3 sequences"
  echo "$r2" | grep -q '"prefill_tokens_per_second": {"median": null' ||
    bad "row 2 reports a prefill rate batch mode does not time"
  echo "$r2" | grep -q "\"ratios\": {\"memory\": null" ||
    bad "row 2: a memory share for a batched row"
  echo "$r1" | grep -q "\"ratios\": {\"memory\": [0-9]" || bad "row 1: no memory share"
  [ "$fail" = 0 ] && ok "--batch 1,3: row 2 ran 3 sequences (15 tokens), aggregate tok/s $tps"
fi
$B --batch 1,2 -p 4 -n 3 --reps 1 -o md --no-limits -q > $T/b.md; rc=$?
[ $rc -eq 0 ] && grep -q '^| row | budget .* | n | batch |' $T/b.md &&
  [ "$(grep -c '^| [12] ' $T/b.md)" = 2 ] &&
  ok "-o md: a batch column" || bad "-o md: exit $rc $(head -n 12 $T/b.md)"
$B -p 4 -n 3 --reps 1 -o md --no-limits -q | grep -q '| batch |' &&
  bad "a batch column without --batch"
$B --batch 2 -p 4 -n 3 --reps 1 -o csv --no-limits -q > $T/b.csv; rc=$?
[ $rc -eq 0 ] && head -n 1 $T/b.csv | grep -q ',error,batch,stop,prefill_flops,' &&
  sed -n 2p $T/b.csv | grep -q ',2,"length",' &&
  ok "-o csv: the batch column, then stop" || bad "-o csv: exit $rc $(cat $T/b.csv)"
exit $fail
