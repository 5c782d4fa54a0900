#!/bin/sh
# k3 bench on the committed tiny5: the JSON schema (2 rows x 3 reps, min <= median <= max,
# peak RSS > 0; checked with the project's own JSON parser, build/tests/test_bench_json),
# a markdown table, CSV, JSON lines, a refused row beside a row that completes, --compare
# against itself, Ctrl-C, --help and the refusals; and the plain run's last two stderr
# lines. No timing assertions.
set -u
BUILD=${BUILD:-build}
CHK=$BUILD/tests/test_bench_json
M=tests/models/tiny5
. tests/sh/lib/check.sh
export TMPDIR=$T
# schema FILE ROWS REPS [ARGS]: the validator when built, else a grep-level check
schema() {
  f=$1; rows=$2; reps=$3; shift 3
  if [ -x "$CHK" ]; then
    "$CHK" "$f" "$rows" "$reps" "$@" > $T/chk || { cat $T/chk; return 1; }
  else echo "SKIP $CHK not built: grep-level schema check only"; fi
  [ "$(grep -c '"row": ' "$f")" -eq "$rows" ] && grep -q '"schema": 1' "$f"
}
B="$K3 bench $M"

# 1. JSON: two budgets, 3 reps each
$B --budget 0:0,1:1 --reps 3 -p 8 -n 4 -o json > $T/b.json 2> $T/err; rc=$?
if [ $rc -eq 0 ] && schema $T/b.json 2 3; then
  rss=$(sed -n 's/.*"row": 1,.*"peak_rss_bytes": \([0-9]*\),.*/\1/p' $T/b.json)
  [ -n "$rss" ] && [ "$rss" -gt 0 ] &&
    ok "-o json: 2 rows x 3 reps, min <= median <= max, peak RSS $rss B" ||
    bad "-o json: peak_rss_bytes of row 1 is '$rss'"
else bad "-o json: exit $rc $(tail -n 2 $T/err)"; fi
grep -q 'k3 bench: row 2/2 rep 3/3' $T/err && grep -q 'ETA' $T/err &&
  ok "progress on stderr: row i/n, rep j/k, ETA" || bad "no progress lines: $(head -n 3 $T/err)"
grep -q '"memory_read_gb_per_s": {"[0-9]*": [0-9.]*}' $T/b.json &&
  grep -q '"disk": {"mb_per_s": [0-9.]*,' $T/b.json &&
  ok "the limits (memory read, disk with the engine's pattern) are measured in the run" ||
  bad "limits missing"

# 2. markdown table
$B --budget 0:0,1:1 --reps 2 -p 8 -n 4 -o md -q --no-limits > $T/b.md; rc=$?
if [ $rc -eq 0 ] && grep -q '^| row | budget ' $T/b.md && grep -q '^|:--' $T/b.md &&
   [ "$(grep -c '^| [12] ' $T/b.md)" -eq 2 ] && grep -q '^- CPU: ' $T/b.md; then
  w=$(grep '^|' $T/b.md | awk '{ print length }' | sort -u | wc -l)
  [ "$w" -eq 1 ] && ok "-o md: an aligned markdown table under the machine header" ||
    bad "-o md: lines of $w widths"
else bad "-o md: exit $rc $(head -n 3 $T/b.md)"; fi

# 3. CSV, with llama-bench's -t (threads) and -r (reps)
$B --budget 0:0 -t 1,2 -r 2 -p 8 -n 4 -o csv -q --no-limits > $T/b.csv; rc=$?
nf=$(awk -F, 'NR == 1 { print NF }' $T/b.csv)
odd=$(awk -F, -v n="$nf" 'NF != n' $T/b.csv | wc -l)
if [ $rc -eq 0 ] && grep -q '^row,budget,preset,trunk_gb,cache_gb,threads,' $T/b.csv &&
   [ "$(wc -l < $T/b.csv)" -eq 3 ] && [ "$odd" -eq 0 ]; then
  ok "-o csv: a header and 2 rows of $nf fields"
else bad "-o csv: exit $rc $(head -n 3 $T/b.csv)"; fi
awk -F, 'NR > 1 { s = s $6 ":" $10 " " } END { exit s != "1:2 2:2 " }' $T/b.csv &&
  ok "-t 1,2 -r 2: rows of 1 and 2 threads, 2 reps each" ||
  bad "-t/-r: threads:reps $(awk -F, 'NR > 1 { printf "%s:%s ", $6, $10 }' $T/b.csv)"

# 4. a refused row beside one that completes: with a packed trunk, K3_MEM_AVAILABLE between
# the plans of 0:0 (a ring) and 1:1 (all pinned), taken from the plans' own refusals
$K3 pack $M $T/trunk --quiet || bad "k3 pack"
need() {
  K3_MEM_AVAILABLE=1 $K3 $M --trunk $T/trunk --trunk-gb $1 --cache-gb $1 --ids 1,2,3,4,5,6,7,8 \
    --gen 4 --quiet 2>&1 | sed -n 's/.*plan needs \([0-9.]*\) GB.*/\1/p'
}
AV=$(awk -v a="$(need 0)" -v b="$(need 1)" 'BEGIN { if (b > a) printf "%.0f", (a + b) / 2 * 1e9 }')
[ -n "$AV" ] || bad "the plans of 0:0 and 1:1 do not differ"
R="--trunk $T/trunk --budget 0:0,1:1 -p 8 -n 4 -q --no-limits"
K3_MEM_AVAILABLE=$AV $B $R --reps 2 -o json > $T/r.json 2> $T/err; rc=$?
if [ $rc -eq 1 ] && schema $T/r.json 2 2 --error 2 &&
   grep -q '"row": 2,.*"error": "exit 1: k3: the memory plan needs' $T/r.json; then
  ok "a refused row reports the child's refusal, the other row completes, exit 1"
else bad "refused row: exit $rc $(grep -o '"error": [^}]*' $T/r.json | head -c 300)"; fi
K3_MEM_AVAILABLE=$AV $B $R --reps 1 -o md > $T/r.md 2>/dev/null
grep -q '^| 2 .*exit 1: k3: the memory plan needs' $T/r.md &&
  ok "-o md shows the refusal in its row" || bad "-o md refused row: $(grep '^| 2' $T/r.md)"

# 5. --compare against itself, JSON lines
$B --budget 0:0 --reps 2 -p 8 -n 4 -o jsonl -q --no-limits --compare $K3 > $T/c.jsonl; rc=$?
if [ $rc -eq 0 ] && schema $T/c.jsonl 1 2 --jsonl --compare &&
   [ "$(wc -l < $T/c.jsonl)" -eq 2 ] && grep -q '"compare": {"binary": ' $T/c.jsonl; then
  r=$(sed -n 's/.*"ratio": {"seconds_per_token": \([0-9.]*\),.*/\1/p' $T/c.jsonl)
  ok "--compare itself: B/A ratios present and positive (s/token $r); -o jsonl: header + 1 row"
else bad "--compare: exit $rc $(head -c 300 $T/c.jsonl)"; fi

# --no-spec reaches every child (a --compare binary that logs its arguments)
printf '#!/bin/sh\necho "$*" >> %s/args\nexec %s "$@"\n' "$T" "$K3" > $T/wrap; chmod +x $T/wrap
$B --budget 0:0 -r 1 -p 4 -n 2 -o csv -q --no-limits --no-spec --compare $T/wrap > /dev/null &&
  grep -q -- '--no-spec --out' $T/args && ok "--no-spec: the children run without speculation" ||
  bad "--no-spec not passed on: $(cat $T/args 2>/dev/null)"

# 6. --prompt-file: its first N tokens
printf 'hello world, this is a prompt for the bench' > $T/p.txt
$B --tok tests/tok/tiny --prompt-file $T/p.txt -p 5 --reps 1 -n 2 -o csv -q --no-limits \
  > $T/p.csv && awk -F, 'NR == 2 && $8 == 5 { f = 1 } END { exit !f }' $T/p.csv &&
  ok "--prompt-file -p 5" || bad "--prompt-file: $(cat $T/p.csv)"

# 6b. why each row's generation stopped (issue 35): "length" when it made -n tokens, "eos"
# when the model ended it first ("rygl" ends at eos after 14 tokens on tiny5, greedy), in
# json, jsonl (a batch row: eos when a sequence ended so) and csv's last column
printf 'rygl' > $T/eos.txt
E="--tok tests/tok/tiny --prompt-file $T/eos.txt -p 4 --reps 1 -q --no-limits"
$B $E -n 4,32 -o json > $T/s.json; rc=$?
[ $rc -eq 0 ] && grep -q '"row": 1,.*"n_generated": 4, "stop": "length"' $T/s.json &&
  grep -q '"row": 2,.*"n_generated": 14, "stop": "eos"' $T/s.json &&
  ok "json: stop length at -n, eos when the model ended first" ||
  bad "json stop: exit $rc, $(grep -o '"n_generated": [0-9]*, "stop": [^,]*' $T/s.json)"
$B $E -n 32 --batch 2 -o jsonl > $T/s.jsonl && grep -q '"batch": 2,.*"stop": "eos"' $T/s.jsonl &&
  ok "jsonl: a batch row whose sequences ended at eos says eos" ||
  bad "jsonl batch stop: $(grep -o '"stop": [^,]*' $T/s.jsonl)"
$B $E -n 4,32 -o csv > $T/s.csv && head -n 1 $T/s.csv | grep -q ',batch,stop,prefill_flops,' &&
  [ "$(cut -d, -f1,39 $T/s.csv | tr '\n' ' ')" = 'row,stop 1,"length" 2,"eos" ' ] &&
  ok "csv: a stop column" || bad "csv stop: $(cut -d, -f1,39 $T/s.csv | tr '\n' ' ')"

# 7. Ctrl-C: the rows finished are printed, exit 1
$B --budget 0:0,1:1,0.001:0.001 --reps 100 -p 8 -n 24 -o csv --no-limits > $T/i.csv 2> $T/i.err &
pid=$!
sleep 2; kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 1 ] && grep -q 'interrupted: [0-9]* of 3 rows finished' $T/i.err &&
  head -n 1 $T/i.csv | grep -q '^row,' && ok "SIGINT: stops, prints the rows finished, exit 1" ||
  bad "SIGINT: exit $rc $(tail -n 1 $T/i.err)"

# 8. --help, refusals (exit 2 naming the flag)
$K3 bench --help > $T/h 2> $T/he; rc=$?
miss=""
for o in --budget --preset --threads -p -n --kernels --trunk --tok --prompt-file --reps --cold \
         --warm --drop-caches --compare --disk-gb --no-limits -o --quiet --help --batch --spec \
         --no-spec ' -t ' ' -r '; do
  grep -q -- "$o" $T/h || miss="$miss $o"
done
[ $rc -eq 0 ] && [ -z "$miss" ] && [ ! -s $T/he ] && grep -q '^Usage: k3 bench' $T/h &&
  ok "k3 bench --help lists every option" || bad "--help: exit $rc, missing:$miss"
for a in "--batch 0:--batch" "--batch 300:--batch" "--reps 0:--reps" \
         "-r 0:--reps" "-t 0:--threads" "--spek:did you mean --spec?" \
         "--threads 0:--threads" "-p 0:-p" \
         "-n x:-n" "--budget 1:--budget" "--preset nope:--preset" "--kernels foo:--kernels" \
         "-o xml:-o" "--disk-gb -1:--disk-gb" "--bogus:--bogus"; do
  flag=${a%%:*}; pat=${a#*:}
  # shellcheck disable=SC2086
  $B $flag > /dev/null 2> $T/e; rc=$?
  [ $rc -eq 2 ] && grep -q -- "$pat" $T/e ||
    bad "k3 bench $flag: exit $rc, want 2 naming $pat: $(head -n 1 $T/e)"
done
ok "bad values (--batch 0 and 300 too), a typo: exit 2 naming the flag"

# 9. the plain run's report ends with the two lines scripts of the original tool parse
P=$(cat $M/ref/prompt.txt)
$K3 $M --ids "$P" --gen 4 > /dev/null 2> $T/plain; rc=$?
l1=$(tail -n 2 $T/plain | head -n 1); l2=$(tail -n 1 $T/plain)
echo "$l1" | grep -Eq '^4 tokens in [0-9.]+ s, [0-9.]+ s/token average$' &&
  echo "$l2" | grep -Eq '^PEAK RSS for the whole run: [0-9.]+ GB$' && [ $rc -eq 0 ] &&
  ok "plain run ends with '$l1' / '$l2'" || bad "plain run's last lines: '$l1' / '$l2'"
$K3 $M --ids "$P" --gen 4 --quiet > /dev/null 2> $T/q
[ ! -s $T/q ] && ok "--quiet: no report" || bad "--quiet wrote: $(head -n 1 $T/q)"
exit $fail
