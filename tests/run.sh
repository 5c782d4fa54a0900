#!/bin/sh
# Runs every C test binary given as arguments, then every tests/sh/*.sh in name order.
# Prints one line per test; exits non-zero if any failed.
fail=0; n=0
for t in "$@"; do
  n=$((n+1))
  if out=$("$t" 2>&1); then echo "PASS $(basename "$t")"; else echo "$out" | tail -n 30; echo "FAIL $(basename "$t")"; fail=$((fail+1)); fi
  echo "$out" | grep -E '^SKIP' | sed 's/^/     /'
done
for t in tests/sh/*.sh; do
  [ -e "$t" ] || continue
  n=$((n+1))
  if out=$(sh "$t" 2>&1); then echo "PASS $t"; else echo "$out" | tail -n 30; echo "FAIL $t"; fail=$((fail+1)); fi
  echo "$out" | grep -E '^SKIP' | sed 's/^/     /'
done
echo "$((n-fail))/$n tests passed"
[ $fail -eq 0 ]
