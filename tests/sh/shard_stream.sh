#!/bin/sh
# With no --trunk and a --trunk-gb short of the trunk, the trunk streams from the released
# shards where they hold it (issue 38): the same pinned prefix, pieces, window and queue
# depth as a packed trunk. On every committed tiny model, --dump-logits bytes and ids equal
# across the trunk from the shards, a plain pack and a coded pack (k3 pack --compress), at
# the minimum, a laptop-like (pinned prefix + pieces) and the resident budget, 1 and 2
# threads; peak RSS within the plan and the plan within the flags; the plan names the
# source; --verify-reads without a pack is refused (exit 2). make test: at 2 threads only
# the shards (against the 1-thread packs' bytes); the slow tier (K3_TEST_FULL=1) all.
. tests/sh/lib/mem.sh
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }

for M in tests/models/*; do
  [ -f $M/ref/prompt.txt ] || continue           # the drafters are not models of their own
  n=$(basename $M); P=$(cat $M/ref/prompt.txt); REF=$(cut -d, -f1-4 $M/ref/greedy.txt)
  $K3 pack $M $T/$n.plain --quiet || bad "$n: k3 pack"
  $K3 pack $M $T/$n.coded --compress --quiet 2>/dev/null || bad "$n: k3 pack --compress"
  # laptop-like: a pinned prefix ending inside a matrix, the rest in pieces
  lap="--trunk-gb 0.014 --cache-gb 0.002"
  [ $n = tiny5f ] && lap="--trunk-gb 0.006 --cache-gb 0.001"
  runs=0; first=1; inside=0
  for b in "--preset minimum" "$lap" "--trunk-gb 1000 --cache-gb 1000"; do
    for th in 1 2; do
      for src in shards plain coded; do
        [ $th = 2 ] && [ $src != shards ] && ! slow && continue   # make test: 36 runs
        tr=""; [ $src = shards ] || tr="--trunk $T/$n.$src"
        # shellcheck disable=SC2086
        out=$($K3 $M --ids "$P" --gen 4 $tr $b --threads $th --dump-logits $T/l.f32 \
              --out $T/r.json 2>$T/err) || { bad "$n $src $b --threads $th: exit $?" \
              "$(tail -c 300 $T/err)"; continue; }
        [ "$out" = "$REF" ] || bad "$n $src $b --threads $th: ids '$out' != '$REF'"
        if [ $first = 1 ]; then mv $T/l.f32 $T/ref.f32; first=0
        else cmp -s $T/ref.f32 $T/l.f32 || bad "$n $src $b --threads $th: logits bytes differ"
        fi
        j() { sed -n "s/^  \"$1\": \([0-9]*\).*/\1/p" $T/r.json; }
        plan=$(j plan_bytes); peak=$(j peak_rss_bytes); tb=$(j trunk_budget_bytes)
        cb=$(j cache_budget_bytes)
        # a coded pack's decode tables sit beside a 5 MB plan: 2% and 256 KB there; so do,
        # from the shards, the mapped pages around the small tensors read in place (the
        # kernel maps up to 64 KB around each page fault: ~60 KB more than a pack, measured)
        slack=$((plan / 50)); [ $src = plain ] || slack=$((slack + 262144))
        [ "$peak" -le $((plan + slack)) ] ||
          bad "$n $src $b: peak RSS $peak > plan $plan + $slack"
        case "$b" in *1000*) ;; *)
          [ "$plan" -le $((tb + cb)) ] || bad "$n $src $b: plan $plan > budgets $tb + $cb";;
        esac
        if [ $src = shards ]; then
          case "$b" in
            *1000*) grep -q "everything resident\|trunk resident .* in place from the shards" \
                      $T/err && ! grep -q "^k3: trunk the shards" $T/err ||
                      bad "$n resident: the trunk is not in place in the shard mappings";;
            *) grep -q "trunk source .* the shards, read where they lie" $T/err &&
               grep -q "^k3: trunk the shards of $M: .* pieces streamed" $T/err ||
                 bad "$n $b: the plan does not stream from the shards: $(cat $T/err)";;
          esac
          # the prefix is what the budget leaves beside the process (its size varies)
          case "$b" in *0.0*) grep -q "(1 in part, " $T/err && inside=$((inside + 1));; esac
        fi
        runs=$((runs + 1))
      done
    done
  done
  [ $inside -gt 0 ] || bad "$n $lap: no run pinned a prefix ending inside a matrix"
  ok "$n: ids == ref and logits bytes equal over $runs runs (shards, plain and coded pack;" \
    "minimum, laptop-like, resident; 1/2 threads), peak RSS within the plan"
done

M=tests/models/tiny5; P=$(cat $M/ref/prompt.txt)
$K3 $M --ids "$P" --gen 2 --trunk-gb 0.004 --cache-gb 0.001 --verify-reads --quiet \
  >/dev/null 2>$T/err; rc=$?
[ $rc = 2 ] && grep -q "verify-reads checks a packed trunk's checksums" $T/err &&
  ok "--verify-reads without --trunk: exit 2 with the pack command" ||
  bad "--verify-reads without a pack: rc $rc $(cat $T/err)"
# the same pieces as a pack's (the plan sizes them from the trunk's bytes, which a pack
# pads: --piece-mb fixes the size) and window, at the minimum (the pinned prefix is what
# the budget leaves beside the process, whose size differs by the pack's index)
for src in shards plain; do
  tr=""; [ $src = shards ] || tr="--trunk $T/tiny5.plain"
  # shellcheck disable=SC2086
  $K3 $M --ids "$P" --gen 4 $tr --trunk-gb 0 --cache-gb 0 --io-depth 4 --piece-mb 0.05 \
    2>&1 >/dev/null | sed -n 's/^k3: trunk .*: \([0-9]* of .* readers\).*/\1/p' > $T/$src.txt
done
[ -s $T/shards.txt ] && cmp -s $T/shards.txt $T/plain.txt &&
  ok "the same stream from the shards as from a pack: $(cat $T/shards.txt)" ||
  bad "streams differ: shards '$(cat $T/shards.txt)', pack '$(cat $T/plain.txt)'"
exit $fail
