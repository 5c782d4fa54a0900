#!/bin/sh
# k3 bench --plot FILE.svg and -o html on tiny5: the figure is well-formed SVG with two
# panels, axes and series (build/tests/test_bench_plot FILE checks it), against the
# budgets and against threads; an unwritable --plot is refused (exit 2) before any row.
set -u
BUILD=${BUILD:-build}
CHK=$BUILD/tests/test_bench_plot
. tests/sh/lib/check.sh
export TMPDIR=$T
B="$K3 bench tests/models/tiny5 --reps 1 -p 8 -n 4 -q --disk-gb 0.05"
$B --budget 0:0,1:1 --plot $T/a.svg -o json > $T/a.json; rc=$?
if [ $rc -eq 0 ] && [ -x "$CHK" ] && "$CHK" $T/a.svg > $T/c; then ok "budgets: $(cat $T/c)"
else bad "--plot (budgets): exit $rc $(cat $T/c 2>/dev/null)"; fi
grep -q 'memory budget --trunk-gb:--cache-gb (GB)' $T/a.svg && grep -q '>s/token<' $T/a.svg &&
  grep -q 'peak RSS (GB)' $T/a.svg && grep -q 'data-name="memory stream limit' $T/a.svg &&
  ok "against the budgets: s/token and peak RSS (GB), the memory stream limit drawn" ||
  bad "budget figure lacks its axis titles or limits"
$B --threads 1,2 --no-limits --plot $T/t.svg -o html > $T/t.html; rc=$?
if [ $rc -eq 0 ] && "$CHK" $T/t.svg > $T/c && grep -q '>threads</text>' $T/t.svg &&
   grep -q 'tokens/s' $T/t.svg && grep -q '<svg xmlns' $T/t.html && grep -q '| row |' $T/t.html
then ok "against threads: tokens/s; -o html has the figure and the table"
else bad "--threads figure or -o html: exit $rc"; fi
mkdir $T/ro; chmod 500 $T/ro
for p in /nonexistent/x.svg $T; do
  $B --plot $p > $T/o 2> $T/e; rc=$?
  [ $rc -eq 2 ] && grep -q "^k3 bench: --plot $p: cannot write it" $T/e && [ ! -s $T/o ] &&
    ok "--plot $p: exit 2, $(head -n 1 $T/e | cut -c1-80)" || bad "--plot $p: exit $rc $(cat $T/e)"
done
exit $fail
