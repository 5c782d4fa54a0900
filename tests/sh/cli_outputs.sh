#!/bin/sh
# Output paths (--out, --dump-logits, --dump-cache-trace; chat --history, --save-state)
# that point into a missing folder or at a directory are refused before the model is
# opened: exit 2, the flag and the path named, no memory plan printed, nothing generated.
M=tests/models/tiny5; TK=tests/tok/tiny
. tests/sh/lib/check.sh
expect() {  # expect PATTERN -- command...   (stdin: one chat line)
  pat=$1; shift 2
  echo hi | timeout 60 "$@" >$T/o 2>$T/e; rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pat" $T/e && ! grep -q -e 'memory plan' -e 'opened in' $T/e \
     && [ ! -s $T/o ]; then ok "exit 2 before the model opens: $pat"
  else bad "expected exit 2 and '$pat' before the model opens, got $rc: $(head -c 300 $T/e)"; fi
}
expect "--out $T/none/r.json: the folder $T/none does not exist" -- $K3 $M --ids 1 --gen 1 --out \
  $T/none/r.json
expect "--out $T: is a directory" -- $K3 $M --ids 1 --gen 1 --out $T
expect "--out $T/: is a directory" -- $K3 $M --ids 1 --gen 1 --out $T/
expect "--dump-logits $T/none/l.f32: the folder" -- $K3 $M --ids 1 --gen 1 --dump-logits \
  $T/none/l.f32
expect "--dump-logits $T: is a directory" -- $K3 $M --ids 1 --gen 1 --dump-logits $T
expect "--dump-cache-trace $T/none: no such folder" -- $K3 $M --ids 1 --gen 1 --dump-cache-trace \
  $T/none
touch $T/file
expect "--dump-cache-trace $T/file: not a folder" -- $K3 $M --ids 1 --gen 1 --dump-cache-trace \
  $T/file
expect "--history $T/none/h.jsonl: the folder $T/none does not exist" -- $K3 $M --chat --tok $TK \
  --gen 2 --history $T/none/h.jsonl
expect "--history $T: is a directory" -- $K3 $M --chat --tok $TK --gen 2 --history $T
expect "--save-state $T: is a directory" -- $K3 $M --chat --tok $TK --gen 2 --history $T/h.jsonl \
  --save-state $T
expect "--save-state $T/none/s.bin: the folder" -- $K3 $M --chat --tok $TK --gen 2 --history \
  $T/h.jsonl --save-state $T/none/s.bin
expect "--dump-cache-trace $T/none" -- $K3 $M --chat --tok $TK --gen 2 --dump-cache-trace $T/none
[ ! -e $T/h.jsonl ] && ok "a refused chat wrote no history" || bad "a refused chat wrote $T/h.jsonl"
ls -a $T | grep -q k3-probe && bad "a probe file was left behind" || ok "no probe file left behind"
# good paths still work, in the current folder too (a fixed --seed: a sampled reply can be
# empty, 1 seed in 300, and an empty reply is rightly not stored)
(cd $T && echo hi | timeout 60 "$OLDPWD/$K3" "$OLDPWD/$M" --chat --tok "$OLDPWD/$TK" --gen 2 \
  --seed 1 --history h.jsonl >/dev/null 2>$T/e) \
  && [ -s $T/h.jsonl ] && ok "a history in the current folder is written" \
  || bad "history in the current folder: $(tail -n 3 $T/e)"
$K3 $M --ids 1 --gen 1 --out $T/r.json --dump-cache-trace $T --quiet >/dev/null \
  && [ -s $T/r.json ] \
  && [ -s $T/cache_trace.txt ] && ok "good --out and --dump-cache-trace run" || bad "good outputs"
exit $fail
