#!/bin/sh
# The suite runner (make test, make check): the C test binaries given as arguments and every
# tests/sh/*.sh, each its own job, up to K3_TEST_JOBS at a time (default: the cores), the
# longest first (the times of the last run, $BUILD/test_times*.txt, else tests/times.txt).
# One line per test as it ends, with its time: a failing test's output tail above its FAIL
# line, the SKIP lines of its output below; then "N passed, N failed". Exits 1 if one failed.
#   --full  only the tests with a slow tier (those that read K3_TEST_FULL), run whole with
#           K3_TEST_FULL=1 (make check, after make test). K3_TEST_FULL=1 sh tests/run.sh:
#           every test whole, once.
# Each test runs from the repository root with K3 and BUILD exported, stdin /dev/null.
set -u
K3=${K3:-./bin/k3}; BUILD=${BUILD:-build}; export K3 BUILD
full=; [ "${1:-}" = --full ] && { full=1; shift; K3_TEST_FULL=1; export K3_TEST_FULL; }
jobs=${K3_TEST_JOBS:-$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
D=$(mktemp -d) || exit 1
trap 'rm -rf "$D"' EXIT
# the machine's probe (roofline.h) cached for the suite, never in the user's cache folder
[ -n "${K3_MACHINE_CACHE:-}" ] || { K3_MACHINE_CACHE=$D/machine.txt; export K3_MACHINE_CACHE; }
# Ctrl-C / TERM: the jobs' tests get TERM (their traps clean up); async jobs ignore SIGINT
trap 'for f in "$D"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
      exit 130' INT TERM
now() { date +%s.%N 2>/dev/null || date +%s; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# the list: "ESTIMATE NAME PATH", NAME as printed (a C test by its basename)
times=tests/times.txt; last=$BUILD/test_times${full:+_full}.txt
for t in "$@"; do echo "c $(basename "$t") $t"; done > "$D/list"
for t in tests/sh/*.sh; do
  [ -e "$t" ] || continue
  [ -z "$full" ] || grep -q K3_TEST_FULL "$t" || continue
  echo "sh $t $t"
done >> "$D/list"
# unknown tests (new ones) count as 10 s: started early, in case they are long
est=/dev/null; for f in "$times" "$last"; do [ -f "$f" ] && est="$est $f"; done
# shellcheck disable=SC2086
awk -v list="$D/list" '{ e[$1] = $2 } END { while ((getline l < list) > 0) {
  split(l, f, " "); print (f[2] in e ? e[f[2]] : 10), l } }' $est | sort -k1,1 -rn > "$D/sorted"
total=$(wc -l < "$D/sorted")

# job I KIND PATH: runs the test; its output in $D/I.out, "RC SECONDS" in $D/I.st, then I
# written to the done FIFO (fd 3, closed for the test itself)
job() {
  t0=$(now)
  if [ "$2" = c ]; then "$3" < /dev/null > "$D/$1.out" 2>&1 3>&- &
  else sh "$3" < /dev/null > "$D/$1.out" 2>&1 3>&- & fi
  echo $! > "$D/$1.pid"
  wait $!; rc=$?
  { echo "$rc $(since "$t0")" > "$D/$1.st"; echo "$1" >&3; } 2>/dev/null  # gone if stopped
}
mkfifo "$D/done" && exec 3<> "$D/done" || exit 1
t_all=$(now); i=0; running=0; ended=0; passed=0; failed=0
: > "$D/times"
while [ $ended -lt "$total" ]; do
  while [ $running -lt "$jobs" ] && [ $i -lt "$total" ]; do
    i=$((i + 1))
    set -- $(sed -n "${i}p" "$D/sorted")
    eval "name_$i=\$3"
    job $i "$2" "$4" &
    running=$((running + 1))
  done
  read -r k <&3 || exit 1
  running=$((running - 1)); ended=$((ended + 1)); rm -f "$D/$k.pid"
  read -r rc secs < "$D/$k.st"; eval "name=\$name_$k"
  echo "$name $secs" >> "$D/times"
  if [ "$rc" = 0 ]; then echo "PASS $name (${secs}s)"; passed=$((passed + 1))
  else
    tail -n 30 "$D/$k.out"; echo "FAIL $name (${secs}s, exit $rc)"; failed=$((failed + 1))
  fi
  grep -E '^SKIP' "$D/$k.out" | sed 's/^/     /'
done
wait
[ -d "$BUILD" ] && cp "$D/times" "$last" 2>/dev/null
echo "suite: $(since "$t_all")s wall, $jobs at a time${full:+, slow tier (K3_TEST_FULL=1)}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
