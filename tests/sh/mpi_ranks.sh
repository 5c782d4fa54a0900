#!/bin/sh
# K3 over MPI, the split by measured use and the reports (docs/DISTRIBUTED.md):
# --expert-use (a cache trace of bin/k3) gives bin/k3's ids and --dump-logits bytes at np 2
# on tiny5, each rank's share of the use in the plan. The slow tier (make check,
# K3_TEST_FULL=1): the same at np 3 (tiny5 and tiny5f), where every rank's expert reads are
# closer to even than the split by id on the same run; a missing or malformed trace is
# exit 2 naming it; batch mode's --out carries every rank's bytes and collectives; k3 bench
# under mpirun runs its grid (one prompt and a batch row) with each rank's peak RSS and the
# collectives per token, and refuses --compare.
# SKIP without mpirun or bin/k3-mpi.
. tests/sh/lib/check.sh
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
KM=${K3_MPI:-./bin/k3-mpi}
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$KM" ]; then
  echo "SKIP mpi_ranks: no mpirun or no $KM (apt-get install openmpi-bin libopenmpi-dev; make mpi)"
  exit $fail
fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi() { n=$1; shift; timeout 120 mpirun --oversubscribe -np "$n" "$KM" "$@"; }
# the largest rank's expert bytes read over the mean, from an --out report
spread() { tr ',' '\n' < "$1" | sed -n 's/.*"expert_bytes_read": \([0-9]*\).*/\1/p' \
           | awk '{ s += $1; if ($1 > m) m = $1; n++ } END { if (n) printf "%.3f\n", m * n / s }'; }

# make test: tiny5 at np 2 (mpirun's start is most of it); the rest: the slow tier
MODELS="tiny5 tiny5f"; slow || MODELS=tiny5
for m in $MODELS; do
  M=tests/models/$m; P=$(cat $M/ref/prompt.txt); f0=$fail; fail=0
  mkdir -p $T/tr-$m
  want=$("$K3" $M --ids "$P" --gen 16 --cache-gb 0 --dump-cache-trace $T/tr-$m \
         --dump-logits $T/one.f32 --quiet 2>$T/err) || bad "$m: bin/k3 exited $?: $(cat $T/err)"
  U=$T/tr-$m/cache_trace.txt
  nps="2 3"; [ $m = tiny5f ] && nps=3; slow || nps=2
  for np in $nps; do
    rm -f $T/n.f32
    got=$(mpi $np $M --ids "$P" --gen 16 --cache-gb 0 --expert-use $U --dump-logits $T/n.f32 \
          --out $T/use.json 2>$T/err) || bad "$m np $np --expert-use: exit $?: $(tail -c 300 \
          $T/err)"
    [ "$got" = "$want" ] || bad "$m np $np --expert-use: ids '$got', bin/k3 '$want'"
    cmp -s $T/one.f32 $T/n.f32 || bad "$m np $np --expert-use: logits bytes differ from bin/k3"
    [ "$(grep -c '^k3: rank [0-9] of [0-9]: .*owns [0-9]* ([0-9.]*% of the measured use)' \
         $T/err)" = $np ] || bad "$m np $np: the plan lacks each rank's share of the use"
    [ $np = 3 ] || continue                       # the id split is near even at np 2 here
    mpi $np $M --ids "$P" --gen 16 --cache-gb 0 --out $T/id.json --quiet >/dev/null 2>$T/err \
      || bad "$m np $np: exit $?: $(tail -c 300 $T/err)"
    a=$(spread $T/id.json); b=$(spread $T/use.json)
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(b != "" && b < a) }' \
      || bad "$m np $np: experts read, largest rank / mean: by use $b, by id $a (not lower)"
    echo "     $m np $np: experts read, largest rank / mean: by id $a, by measured use $b"
  done
  even=; case " $nps " in *" 3 "*) even="; reads closer to even than by id at np 3";; esac
  [ $fail = 0 ] && ok "$m: --expert-use at np $nps: bin/k3's ids and logits bytes$even;" \
    "the plan gives each rank's use"
  [ $f0 = 0 ] || fail=1
done
slow || exit $fail

M=tests/models/tiny5; P=$(cat $M/ref/prompt.txt)
"$K3" $M --ids "$P" --gen 2 --expert-use $T/none.txt --quiet >/dev/null 2>$T/err
rc=$?; [ $rc = 2 ] && grep -q -- "--expert-use $T/none.txt: cannot open" $T/err \
  || bad "a missing --expert-use file: exit $rc, '$(cat $T/err)'"
printf '# k3 cache trace: layers 13 experts 16\n0 1 2\n' > $T/bad.txt
mpi 2 $M --ids "$P" --gen 2 --expert-use $T/bad.txt --quiet >/dev/null 2>$T/err
rc=$?; [ $rc = 2 ] && grep -q -- "--expert-use $T/bad.txt: line 2: not a request line" $T/err \
  && ok "a missing or malformed --expert-use trace: exit 2, naming the file and the line" \
  || bad "a malformed --expert-use trace at np 2: exit $rc, '$(tail -c 300 $T/err)'"

# batch mode's --out: every rank's bytes read and collectives per token
cat > $T/b.jsonl <<JSONL
{"id": "a", "ids": [$P], "gen": 6}
{"id": "b", "ids": [5, 6, 7], "gen": 4}
JSONL
mpi 2 $M --batch $T/b.jsonl --batch-size 2 --out $T/b.json --quiet >/dev/null 2>$T/err \
  || bad "batch np 2: exit $?: $(tail -c 300 $T/err)"
for k in '"ranks": 2' '"rank": 1, "peak_rss_bytes": [1-9]' '"collectives_per_token": [1-9]' \
         '"comm_bytes_per_token": [1-9]' '"comm_wait_s_per_token"'; do
  grep -q "$k" $T/b.json || bad "batch np 2: --out lacks $k"
done
grep -q '"rank": 1' $T/b.json && ok "batch np 2: --out carries every rank's bytes read," \
  "peak RSS and collectives per token"

# k3 bench under mpirun: each rep on every rank in its process
mpi 2 bench $M -p 8 -n 4 --reps 1 --threads 1 --batch 1,2 --no-limits -o json >$T/bench.json \
  2>$T/err || bad "bench np 2: exit $?: $(tail -c 400 $T/err)"
n=$(grep -o '"ranks": 2, "comm_per_token": {"collectives": [1-9]' $T/bench.json | wc -l)
e=$(grep -o '"exit_code": [0-9]*' $T/bench.json | sort -u)
rss=$(grep -o '"peak_rss_bytes": [0-9]*' $T/bench.json | head -1 | sed 's/.* //')
[ "$n" = 2 ] && [ "$e" = '"exit_code": 0' ] && [ "${rss:-0}" -gt 1000000 ] \
  || bad "bench np 2: $n rows with ranks and collectives, exit codes '$e', peak RSS '$rss'"
mpi 2 bench $M -p 4 -n 2 --reps 1 --threads 1 --no-limits -o md >$T/bench.md 2>$T/err
grep -q '^- ranks: 2 ' $T/bench.md && grep -q 'comm ms/tok' $T/bench.md \
  || bad "bench np 2 -o md: no ranks line or comm columns: $(head -c 300 $T/bench.md)"
mpi 2 bench $M --compare "$K3" --reps 1 --no-limits >/dev/null 2>$T/err
rc=$?; [ $rc = 2 ] && grep -q "compare in one process" $T/err \
  || bad "bench np 2 --compare: exit $rc, '$(tail -c 300 $T/err)'"
[ $fail = 0 ] && ok "bench np 2: one-prompt and batch rows, each rank's peak RSS," \
  "collectives per token (json, md); --compare refused (exit 2)"
exit $fail
