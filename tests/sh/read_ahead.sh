#!/bin/sh
# --read-ahead on (issue 24 item 4; src/forward/readahead.c): decode reads the experts the
# next MoE layer's router picks from this layer's input while this layer computes. A
# guess only schedules reads: on every committed model at the minimum cache (5 slots, the
# guesses fighting the layer's own window for slots) and with room, one prompt and a batch
# of 3 give the ids and --dump-logits bytes of --read-ahead off; --out counts the guesses
# (some made, used + evicted unused <= made); with the trunk streamed it is inert (the next
# router is not in memory); a bad value is exit 2.
. tests/sh/lib/check.sh
for m in tiny5 tiny4 tiny5f; do
  M=tests/models/$m; P=$(cat $M/ref/prompt.txt); f0=$fail; fail=0
  for cg in 0 1000; do
    for ra in off on; do
      "$K3" $M --ids "$P" --gen 16 --cache-gb $cg --read-ahead $ra --dump-logits $T/$ra.f32 \
        --out $T/$ra.json --quiet >$T/$ra.ids 2>$T/err || bad "$m $cg $ra: exit $?: $(cat $T/err)"
    done
    cmp -s $T/off.ids $T/on.ids && cmp -s $T/off.f32 $T/on.f32 \
      || bad "$m --cache-gb $cg: --read-ahead on changed the ids or the logits bytes"
    g=$(sed -n 's/.*"readahead_guessed": \([0-9]*\).*/\1/p' $T/on.json)
    u=$(sed -n 's/.*"readahead_used": \([0-9]*\).*/\1/p' $T/on.json)
    w=$(sed -n 's/.*"readahead_wasted": \([0-9]*\).*/\1/p' $T/on.json)
    z=$(sed -n 's/.*"readahead_guessed": \([0-9]*\).*/\1/p' $T/off.json)
    [ $cg = 0 ] && { [ "${g:-0}" -gt 0 ] && [ $((u + w)) -le "$g" ] && [ "$z" = 0 ] \
      || bad "$m --cache-gb 0: guessed '$g' used '$u' wasted '$w' (off: '$z')"; }
    [ $cg = 0 ] && echo "     $m --cache-gb 0: $g experts guessed, $u used, $w evicted unused"
  done
  { printf '{"id": "a", "ids": [%s], "gen": 8}\n' "$P"
    printf '{"id": "b", "ids": [5, 6], "gen": 9}\n{"id": "c", "ids": [9], "gen": 7}\n'
  } > $T/b.jsonl
  for ra in off on; do
    mkdir -p $T/d$ra
    "$K3" $M --batch $T/b.jsonl --batch-size 3 --cache-gb 0 --read-ahead $ra \
      --dump-logits $T/d$ra --quiet > $T/b$ra.out 2>$T/err || bad "$m batch $ra: $(cat $T/err)"
  done
  gen() { sed 's/.*"generated_ids": \(\[[^]]*\]\).*/\1/' "$1"; }
  [ "$(gen $T/boff.out)" = "$(gen $T/bon.out)" ] && [ "$(gen $T/bon.out | wc -l)" = 3 ] \
    || bad "$m batch: --read-ahead on changed the ids"
  for f in $T/doff/*; do cmp -s $f $T/don/$(basename $f) || bad "$m batch: $f differs"; done
  [ $fail = 0 ] && ok "$m: --read-ahead on gives off's ids and logits bytes (one prompt at" \
    "--cache-gb 0 and 1000, a batch of 3); --out counts the guesses"
  [ $f0 = 0 ] || fail=1
done
M=tests/models/tiny5; P=$(cat $M/ref/prompt.txt)
"$K3" pack $M $T/trunk --quiet || bad "k3 pack failed"
"$K3" $M --ids "$P" --gen 4 --trunk $T/trunk --trunk-gb 0 --cache-gb 0 --read-ahead on \
  --out $T/s.json --quiet >/dev/null 2>$T/err || bad "streamed: $(cat $T/err)"
grep -q '"readahead_guessed": 0,' $T/s.json && ok "--read-ahead with the trunk streamed: inert" \
  || bad "streamed trunk: $(grep readahead $T/s.json)"
"$K3" $M --ids "$P" --gen 1 --read-ahead maybe >/dev/null 2>$T/err
rc=$?; [ $rc = 2 ] && grep -q "read-ahead: 'maybe' is not on or off" $T/err \
  && ok "--read-ahead maybe: exit 2" || bad "--read-ahead maybe: exit $rc: $(cat $T/err)"
exit $fail
