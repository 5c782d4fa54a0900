#!/bin/sh
# max_position_embeddings (the trained context): prompt + --gen past it is refused with
# exit 2 before the model opens, unless --ctx explicitly asks for more, which runs with a
# warning (batch and chat). A copy of tiny5 whose config says 16 positions.
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)            # 12 ids
. tests/sh/lib/check.sh
mkdir $T/m; for f in $M/*; do ln -s "$(pwd)/$f" $T/m/; done
rm $T/m/config.json
sed 's/"max_position_embeddings": 4096/"max_position_embeddings": 16/' $M/config.json \
  > $T/m/config.json
grep -q '"max_position_embeddings": 16' $T/m/config.json \
  || { echo "FAIL: could not edit the config"; exit 1; }

$K3 $T/m --ids "$P" --gen 4 --quiet >$T/o 2>$T/e && [ -s $T/o ] && [ ! -s $T/e ] \
  && ok "12 + 4 = 16 positions: runs, no warning" || bad "at the limit: $(cat $T/e)"
$K3 $T/m --ids "$P" --gen 5 >$T/o 2>$T/e; rc=$?
[ $rc -eq 2 ] && grep -q 'max_position_embeddings 16' $T/e && grep -q -- '--ctx 17' $T/e \
  && ! grep -q 'memory plan' $T/e && [ ! -s $T/o ] \
  && ok "12 + 5 > 16: exit 2 before the model opens, naming max_position_embeddings and --ctx 17" \
  || bad "past the limit: rc $rc $(cat $T/e)"
$K3 $T/m --ids "$P" --gen 8 --ctx 20 --quiet >$T/o 2>$T/e; rc=$?
[ $rc -eq 0 ] && grep -q 'warning: --ctx 20 is past the trained context' $T/e \
  && [ "$(cat $T/o)" = "$(cut -d, -f1-8 $M/ref/greedy.txt)" ] \
  && ok "--ctx 20 asks for more: runs with a warning, the same ids" \
  || bad "--ctx 20: rc $rc $(cat $T/e)"
printf 'Hi\n' | $K3 $T/m --chat --tok $TK --gen 4 --seed 1 >$T/o 2>$T/e; rc=$?
[ $rc -eq 0 ] && grep -q 'context full' $T/e && ! grep -q '\[reused' $T/e \
  && ok "chat: a turn past max_position_embeddings is refused (nothing generated)" \
  || bad "chat at 16 positions: rc $rc $(cat $T/e)"
printf 'Hi\n' | $K3 $T/m --chat --tok $TK --gen 4 --seed 1 --ctx 400 >$T/o 2>$T/e; rc=$?
[ $rc -eq 0 ] && grep -q 'warning: --ctx 400 is past the trained context' $T/e \
  && grep -q '\[reused' $T/e \
  && ok "chat --ctx 400: runs with a warning" || bad "chat --ctx 400: rc $rc $(cat $T/e)"
exit $fail
