#!/bin/sh
# --threads above the online cores warns once per process on stderr, in every mode (one
# prompt, chat, batch, serve, bench), and says when the count is capped at 256; at the
# online cores it says nothing. N is picked above this machine's online cores.
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)
. tests/sh/lib/check.sh

on=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)
n=$((on + 1)); use=$on; [ "$use" -gt 256 ] && use=256
cores=cores; [ "$on" -eq 1 ] && cores=core
W="k3: warning: --threads $n is more than the $on online $cores; more threads than cores"
W="$W run slower than --threads $use"
once() {  # once WHAT FILE [LINE]: the warning line is in FILE exactly once
  line=${3:-$W}
  c=$(grep -cxF -- "$line" "$2")
  [ "$c" -eq 1 ] && ok "$1: warned once" || bad "$1: the warning $c times, want once:" \
    "$(grep -a -m3 -e warning -e threads "$2")"
}

$K3 $M --ids "$P" --gen 2 --threads $n > $T/o 2> $T/e1 || bad "one prompt: exit $?"
once "one prompt" $T/e1
$K3 $M --ids "$P" --gen 2 --threads=$n --quiet > $T/o 2> $T/e1q || bad "--quiet: exit $?"
once "one prompt --quiet (a warning is not progress)" $T/e1q
printf 'Hello\n' | timeout 60 $K3 $M --chat --tok $TK --gen 2 --seed 1 --threads $n \
  > $T/o 2> $T/e2 || bad "chat: exit $?"
once "chat" $T/e2
printf '{"ids": [1, 2]}\n{"ids": [3]}\n' > $T/b.jsonl
$K3 $M --batch $T/b.jsonl --gen 2 --threads $n > $T/o 2> $T/e3 || bad "batch: exit $?"
once "batch" $T/e3
TMPDIR=$T $K3 bench $M --threads $n --reps 1 -p 4 -n 1 -o json --disk-gb 0 -q \
  > $T/o 2> $T/e4 || bad "bench: exit $?"
once "bench" $T/e4

# serve: the warning is on stderr before it listens
$K3 serve $M --tok $TK --port 0 --threads $n 2> $T/e5 &
pid=$!
i=0
while ! grep -qs 'listening on http://' $T/e5 && [ $i -lt 300 ]; do i=$((i + 1)); sleep 0.1; done
kill $pid 2>/dev/null; wait $pid 2>/dev/null
grep -qs 'listening on http://' $T/e5 || bad "serve did not start: $(tail -n 3 $T/e5)"
once "serve" $T/e5

big="k3: warning: --threads 100000 is more than the $on online $cores (capped at 256"
big="$big threads); more threads than cores run slower than --threads $use"
$K3 $M --ids "$P" --gen 1 --threads 100000 > $T/o 2> $T/e6 || bad "--threads 100000: exit $?"
once "--threads 100000 (capped at 256)" $T/e6 "$big"

$K3 $M --ids "$P" --gen 2 --threads $use > $T/o 2> $T/e7 || bad "--threads $use: exit $?"
grep -q 'warning: --threads' $T/e7 && bad "--threads $use (the online cores) warned" \
  || ok "--threads $use (the online cores): no warning"
exit $fail
