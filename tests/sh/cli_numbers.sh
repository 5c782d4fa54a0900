#!/bin/sh
# Numbers people read: budgets of the max preset say "all" (not 1e+06), a slot size keeps a
# readable unit (KB on tiny5, not "0.0 MB"), counts agree with their nouns ("1 token"), and
# no rate is printed where nothing was timed (no "0.00 tok/s", "n/a" in chat /stats).
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)
. tests/sh/lib/check.sh
has()  { grep -q -- "$2" $T/$1 && ok "says '$2'" \
  || bad "does not say '$2': $(grep -a -m3 -e "$3" $T/$1)"; }
hasnt() { grep -q -- "$2" $T/$1 && bad "says '$2': $(grep -a -m1 -- "$2" $T/$1)" \
  || ok "does not say '$2'"; }

K3_MEM_AVAILABLE=24000000000 $K3 $M --ids "$P" --gen 1 --verbose >/dev/null 2>$T/e1 ||
  bad "--gen 1 failed"
has e1 'auto budgets: preset max (--trunk-gb all --cache-gb all)' 'auto budgets'
hasnt e1 'e+06'
has e1 'slots of 20.5 KB' 'slots of'
hasnt e1 'slots of 0.0 MB'
has e1 '^k3: prefill 12 tokens in [0-9.]* s; generated 1 token, stopped by --gen 1' 'generated'
has e1 'memory summary: 1 token generated' 'summary'
hasnt e1 '0.00 tok/s'
hasnt e1 '0.000 s/token'
has e1 '(0 layer reads)' 'trunk read'
hasnt e1 ' 0 MB/s'
$K3 $M --ids 5 --gen 3 >/dev/null 2>$T/e2 || bad "--ids 5 failed"
has e2 '^k3: prefill 1 token in [0-9.]* s; generated 3 tokens, stopped by --gen 3' 'generated'
printf 'hi\n/stats\n' | $K3 $M --chat --tok $TK --gen 1 --seed 3 >$T/o3 2>$T/e3 || bad "chat failed"
has e3 'generated 1 token in' 'reused'
has o3 '^last turn: .*generated 1 token in [0-9.]* s (n/a)' 'last turn'
hasnt o3 ' 1 tokens'
exit $fail
