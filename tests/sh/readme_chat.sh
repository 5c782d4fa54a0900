#!/bin/sh
# The README's chat example is what its command prints: the shown session is run again
# and compared line by line, timings and speeds aside (and non-ASCII bytes aside: the
# README shows the random model's ill-formed UTF-8 as U+FFFD).
K3=${K3:-./bin/k3}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
norm() { LC_ALL=C sed -e '/opened in\|tok\/s\|peak RSS/d' -e 's/in [0-9.]* s/in T s/g' | \
  LC_ALL=C tr -d '\200-\377'; }
awk '/^\$ printf .What is the capital of France/ {on=1; getline; next} on && /^```/ {exit} on' \
  README.md | norm > $T/want
[ -s $T/want ] || { echo "FAIL: no chat example found in README.md"; exit 1; }
printf 'What is the capital of France?\nAnd of Italy?\n/stats\n' | \
    "$K3" tests/models/tiny5 --chat --tok tests/tok/tiny --gen 12 --seed 2 2>&1 | norm > $T/got
if cmp -s $T/want $T/got; then echo "ok the README chat example matches a run" \
  "($(wc -l < $T/got) lines)"
else echo "FAIL: the README chat example differs from a run:"; diff $T/want $T/got; exit 1; fi
