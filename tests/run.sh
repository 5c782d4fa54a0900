#!/bin/sh
# Runs every C test binary given as arguments, then every tests/sh/*.sh in name order.
# Prints one line per test; exits non-zero if any failed.
fail=0; n=0
now() { date +%s.%N 2>/dev/null || date +%s; }
secs() { awk "BEGIN{printf \"%.1fs\", $(now) - $1}"; }
for t in "$@"; do
  n=$((n+1)); t0=$(now)
  if out=$("$t" 2>&1); then echo "PASS $(basename "$t") ($(secs $t0))"; else echo "$out" | tail -n 30; echo "FAIL $(basename "$t")"; fail=$((fail+1)); fi
  echo "$out" | grep -E '^SKIP' | sed 's/^/     /'
done
for t in tests/sh/*.sh; do
  [ -e "$t" ] || continue
  n=$((n+1)); t0=$(now)
  if out=$(sh "$t" 2>&1); then echo "PASS $t ($(secs $t0))"; else echo "$out" | tail -n 30; echo "FAIL $t"; fail=$((fail+1)); fi
  echo "$out" | grep -E '^SKIP' | sed 's/^/     /'
done
echo "$((n-fail))/$n tests passed"
[ $fail -eq 0 ]
