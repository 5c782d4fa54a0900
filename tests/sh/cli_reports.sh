#!/bin/sh
# Reports that agree (issue 27): a one-shot run's two peak-RSS lines in one unit and the
# same figure; its stderr short (an all-resident plan in one line, the table with
# --verbose); a raised budget shown in a unit that shows it; --list-presets' totals at the
# chunk it names; batch's summary with the prefill time its lines report; Ctrl-C on a
# one-shot --out run still writes the report.
. tests/sh/lib/check.sh
M=tests/models/tiny5
P=$(cat $M/ref/prompt.txt)

$K3 $M --ids "$P" --gen 4 > /dev/null 2> $T/e; rc=$?
# issue 35: a tiny run's stderr is the plan, why it stopped, one speed and one peak RSS
n=$(wc -l < $T/e); nr=$(grep -ci 'peak rss' $T/e); ns=$(grep -c 's/token' $T/e)
[ $rc = 0 ] && [ "$nr" = 1 ] && [ "$ns" = 1 ] && grep -q '^PEAK RSS for the whole run: ' $T/e &&
  ok "one peak RSS line, one speed" || bad "$nr peak RSS lines, $ns speeds: $(tr '\n' '|' < $T/e)"
[ "$n" -le 6 ] && grep -q '^k3: memory plan .* everything resident' $T/e &&
  grep -Eq '^4 tokens in [0-9.]+ s, [0-9.]+ s/token average$' $T/e &&
  grep -q 'stopped by --gen 4 (length)' $T/e &&
  ok "a tiny run prints $n stderr lines, the plan in one" ||
  bad "a tiny run prints $n stderr lines: $(tr '\n' '|' < $T/e)"
$K3 $M --ids "$P" --gen 4 --verbose > /dev/null 2> $T/v
# the plan counts what a speculative verify allocates (k3_state_mark's undo log); the
# issue-36 real-shape run peaked 0.38 GB over a plan without it
$K3 $M --ids "$P" --gen 4 --verbose --no-spec > /dev/null 2> $T/nv
grep -q '^  verify undo log ' $T/v && ! grep -q 'verify undo log' $T/nv &&
  ok "the plan has the verify's undo log with speculation, not without" ||
  bad "undo log in the plan: '$(grep undo $T/v)' / '$(grep undo $T/nv)'"
grep -q '^k3: memory plan (GB = 1e9 bytes)' $T/v && grep -q '^  total ' $T/v &&
  ok "--verbose prints the plan's table" || bad "--verbose: no table: $(head -n 3 $T/v)"

$K3 $M --ids "$P" --gen 1 --cache-gb 0.0001 > /dev/null 2> $T/e
l=$(grep 'cache-gb raised to the working minimum' $T/e)
case "$l" in *" 0.000 GB"*|"") bad "raised --cache-gb: '$l'";; *) ok "raised: '$l'";; esac

$K3 --list-presets > $T/p
c=$(sed -n 's/.*totals are at a prefill chunk of \([0-9]*\).*/\1/p' $T/p)
odd=$(grep -o 'prefill chunk [0-9][0-9]*' $T/p | grep -v "prefill chunk $c\$")
[ -n "$c" ] && [ -z "$odd" ] && grep -q '^laptop .*chunks up to [0-9]* fit' $T/p &&
  ok "--list-presets: totals at a chunk of $c, and every row says so" ||
  bad "--list-presets: chunk '$c', rows: $odd"

printf '{"ids": [1, 2, 3], "gen": 4}\n{"ids": [4, 5, 6, 7], "gen": 4}\n' > $T/b.jsonl
$K3 $M --batch $T/b.jsonl > $T/b.out 2> $T/b.err
pf=$(sed -n 's/.*memory summary: .* prefill \([0-9.]*\) s.*/\1/p' $T/b.err)
line=$(sed -n 's/.*"seconds_prefill": \([0-9.]*\).*/\1/p' $T/b.out | head -n 1)
awk -v s="$pf" -v l="$line" 'BEGIN { exit !(s > 0 && l > 0 && s >= l / 2 && s <= 2 * l) }' &&
  ok "batch: the summary's prefill $pf s agrees with a line's $line s" ||
  bad "batch: summary prefill '$pf' s, a line's '$line' s"

# Ctrl-C on a one-shot --out run: the ids so far and the report, exit 1
$K3 $M --ids 1,2,3 --gen 3000 --out $T/r.json > $T/ids 2> $T/i.err &
pid=$!
i=0
while [ ! -s $T/ids ]; do i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1; done
kill -INT $pid; wait $pid; rc=$?
ng=$(sed -n 's/.*"n_generated": \([0-9]*\).*/\1/p' $T/r.json 2>/dev/null)
[ $rc = 1 ] && grep -q '"interrupted": true' $T/r.json 2>/dev/null && [ "${ng:-0}" -gt 0 ] &&
  grep -q '^k3: interrupted after' $T/i.err &&
  [ "$(tr ',' '\n' < $T/ids | grep -c .)" = "$ng" ] &&
  ok "SIGINT: exit 1, --out written with $ng ids, as many on stdout" ||
  bad "SIGINT: exit $rc, n_generated '$ng', $(tail -n 1 $T/i.err)"
exit $fail
