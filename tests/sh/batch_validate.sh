#!/bin/sh
# A --batch file is checked whole before anything runs (issue 35): every bad line is named
# with its line number and field (the first 20; then a count), of every kind (the JSON and
# its fields, a "prompt" without a tokenizer, ids and logit_bias outside the vocabulary),
# exit 2, and nothing runs: no line on stdout even where the good lines come first (a
# logit_bias outside the vocabulary was found only when its line started, after the lines
# before it had run and printed).
set -u
. tests/sh/lib/check.sh
M=tests/models/tiny5
cat > $T/mixed.jsonl <<'JL'
{"id": "a", "ids": [1, 2, 3], "gen": 2}
{"id": "b", "ids": [1, 2], "gen": -1}
not json

{"id": "d", "prompt": "hi"}
{"id": "e", "ids": [1, 99999]}
{"id": "f", "ids": [1], "logit_bias": {"5000": 1}}
{"id": "g", "ids": [1], "bogus": 1}
{"id": "h", "ids": [4, 5], "gen": 1}
JL
$K3 $M --batch $T/mixed.jsonl --batch-size 1 --quiet > $T/o 2> $T/e; rc=$?
[ $rc -eq 2 ] && ok "a file with bad lines: exit 2" || bad "exit $rc: $(cat $T/e)"
[ ! -s $T/o ] && ok "nothing ran: stdout empty" || bad "lines ran: $(cat $T/o)"
for want in 'line 2: "gen" must be an integer' 'line 3: not JSON' \
            'line 5: "prompt" needs a tokenizer' 'line 6: "ids" item 1 (99999) is outside' \
            'line 7: logit_bias: token id 5000 is outside' 'line 8: unknown field "bogus"' \
            '6 bad lines; nothing was run'; do
  grep -q "^k3: --batch $T/mixed.jsonl: $want" $T/e && ok "named: $want" ||
    bad "not named: $want: $(cat $T/e)"
done
# the good lines first, one bad at the end: still nothing runs
{ head -n 1 $T/mixed.jsonl; sed -n 9p $T/mixed.jsonl; sed -n 7p $T/mixed.jsonl; } > $T/late.jsonl
$K3 $M --batch $T/late.jsonl --batch-size 1 --quiet > $T/o 2> $T/e; rc=$?
[ $rc -eq 2 ] && [ ! -s $T/o ] && grep -q 'line 3: logit_bias: token id 5000' $T/e &&
  ok "a bad logit_bias after two good lines: exit 2 before any line runs" ||
  bad "late bad line: exit $rc, stdout: $(cat $T/o), $(cat $T/e)"
# 25 bad lines: the first 20 named, the count of all
i=0; : > $T/many.jsonl
while [ $i -lt 25 ]; do echo '{"ids": [1], "gen": "x"}' >> $T/many.jsonl; i=$((i + 1)); done
$K3 $M --batch $T/many.jsonl --quiet > $T/o 2> $T/e; rc=$?
n=$(grep -c '"gen" must be an integer' $T/e)
[ $rc -eq 2 ] && [ "$n" -eq 20 ] && grep -q 'line 20: "gen"' $T/e &&
  grep -q '25 bad lines (the first 20 named); nothing was run' $T/e &&
  ok "25 bad lines: 20 named, the count of all" || bad "25 bad lines: exit $rc, $n named"
# read as lines arrive (FILE -): a logit_bias outside the vocabulary is answered with an
# error line and skipped like the other bad lines; the next line still runs (it ended the
# whole run when its line started)
{ sed -n 7p $T/mixed.jsonl; sed -n 9p $T/mixed.jsonl; } |
  $K3 $M --batch - --quiet > $T/o 2> $T/e; rc=$?
[ $rc -eq 2 ] && grep -q '^{"line": 1, "error": ".*logit_bias: token id 5000' $T/o &&
  grep -q '"id": "h", "generated_ids"' $T/o &&
  ok "stream: a bad logit_bias answered with an error line, the next line runs, exit 2" ||
  bad "stream: exit $rc, $(cat $T/o) $(tail -n 2 $T/e)"
exit $fail
