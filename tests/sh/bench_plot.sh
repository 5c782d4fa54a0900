#!/bin/sh
# k3 bench --plot FILE.svg and -o html on tiny5: the figure is well-formed SVG with two
# panels, axes and series (build/tests/test_bench_plot FILE checks it), against the
# budgets and against threads; -o html is a page with a real <table>, its text escaped; an
# unwritable --plot is refused (exit 2) before any row.
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
   grep -q 'tokens/s' $T/t.svg && grep -q '<svg xmlns' $T/t.html
then ok "against threads: tokens/s; -o html has the figure"
else bad "--threads figure or -o html: exit $rc"; fi
# -o html: a standalone page with a real <table> (a <pre> of the markdown scrolled sideways):
# a header row and one row per grid row, no <pre>
head -n 1 $T/t.html | grep -q '^<!DOCTYPE html>' && tail -n 1 $T/t.html | grep -q '</html>$' &&
  grep -q '^<table>$' $T/t.html && grep -q '<thead><tr><th>row</th><th>budget</th>' $T/t.html &&
  [ "$(grep -c '^<tr><td class="t">[12]</td>' $T/t.html)" -eq 2 ] &&
  grep -q '^</table>$' $T/t.html && ! grep -q '<pre' $T/t.html &&
  ok "-o html: a page with a <table>: the header and 2 rows" ||
  bad "-o html table: $(grep -c '<tr>' $T/t.html) <tr>, $(grep -c '<pre' $T/t.html) <pre>"
# what the page shows is escaped: a model folder named with < & > in it
ln -s "$(pwd)/tests/models/tiny5" "$T/m<&>"
$K3 bench "$T/m<&>" --reps 1 -p 4 -n 2 -q --no-limits -o html > $T/e.html; rc=$?
[ $rc -eq 0 ] && grep -q 'm&lt;&amp;&gt;' $T/e.html && ! grep -q 'm<&>' $T/e.html &&
  ok "-o html: the model's name escaped" || bad "-o html escaping: exit $rc"
mkdir $T/ro; chmod 500 $T/ro
for p in /nonexistent/x.svg $T; do
  $B --plot $p > $T/o 2> $T/e; rc=$?
  [ $rc -eq 2 ] && grep -q "^k3 bench: --plot $p: cannot write it" $T/e && [ ! -s $T/o ] &&
    ok "--plot $p: exit 2, $(head -n 1 $T/e | cut -c1-80)" || bad "--plot $p: exit $rc $(cat $T/e)"
done
exit $fail
