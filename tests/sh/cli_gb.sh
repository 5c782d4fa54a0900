#!/bin/sh
# --cache-gb and --trunk-gb: a number that is only too big (1e20, an overflow like 1e999)
# says so and what to give, exit 2; junk, a negative, nan and inf stay "not a number".
# One prompt, chat and batch mode share the parser (flags.c k3_mem_parse_flag).
M=tests/models/tiny5; TK=tests/tok/tiny
. tests/sh/lib/check.sh

expect() {  # expect PATTERN -- command...: exit 2 and PATTERN on stderr
  pat=$1; shift 2
  "$@" < /dev/null >$T/o 2>$T/e; rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$pat" $T/e; then ok "exit 2: $pat";
  else bad "expected exit 2 and '$pat', got $rc: $(head -c 300 $T/e)"; fi
}
for f in --cache-gb --trunk-gb; do
  for v in 1e20 1e999 1000000001; do
    expect "k3: $f $v: more than 1e9 GB; give the GB this machine may use (e.g. $f 8)" \
      -- $K3 $M --ids 1 --gen 1 $f $v
  done
  for v in abc -1 nan inf -inf ''; do
    expect "k3: $f: '$v' is not a number of GB >= 0" -- $K3 $M --ids 1 --gen 1 $f "$v"
  done
done
expect "k3: --cache-gb 1e20: more than 1e9 GB" -- $K3 $M --chat --tok $TK --cache-gb 1e20
echo '{"ids": [1]}' > $T/b.jsonl
expect "k3: --trunk-gb 1e20: more than 1e9 GB" -- $K3 $M --batch $T/b.jsonl --trunk-gb=1e20
# the largest number taken is still taken (the plan caps it at what the model needs)
$K3 $M --ids 1 --gen 1 --cache-gb 1e9 --quiet >/dev/null 2>$T/e && ok "--cache-gb 1e9 is taken" \
  || bad "--cache-gb 1e9 refused: $(head -c 300 $T/e)"
exit $fail
