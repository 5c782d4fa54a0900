#!/bin/sh
# --draft DIR (issue 36): a DSpark draft model proposes a block per step and the target's
# exact verify keeps what it agrees with, so the ids and --dump-logits bytes are those of
# the run without a draft: greedy and seeded sampling, 1 and 2 threads, every x86 kernel
# path, the draft variants B and C, block lengths, a streamed trunk at the minimum budget;
# with the test hook K3_TEST_DRAFT_ORACLE (the drafts replaced by the target's own
# continuation after the draft forward ran) every draft is accepted, and with
# K3_TEST_DRAFT_RIGHT=2 two a block; bad combinations are exit 2 naming the flag. The slow
# tier (K3_TEST_FULL=1) adds NEON and scalar under qemu.
. tests/sh/lib/check.sh
M=tests/models/tiny5; D=tests/models/tiny5_dspark; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt); G=$(cat $M/ref/greedy.txt)
# same NAME ARGS...: the ids and prompt logits with --draft $D equal those without
same() {
  name=$1; shift
  $K3 $M "$@" --quiet --dump-logits $T/a.f32 > $T/a 2> $T/ae; ra=$?
  # shellcheck disable=SC2086
  $K3 $M "$@" --quiet --dump-logits $T/b.f32 --draft $D ${DARGS:-} > $T/b 2> $T/be; rb=$?
  if [ $ra = 0 ] && [ $rb = 0 ] && [ -s $T/a ] && cmp -s $T/a $T/b && cmp -s $T/a.f32 $T/b.f32
  then ok "$name: the same ids and logits bytes with --draft"
  else bad "$name: exit $ra/$rb, '$(cat $T/a)' vs '$(cat $T/b)': $(tail -n 2 $T/be)"; fi
}
same "greedy" --ids "$P" --gen 24
[ "$(cat $T/b)" = "$(cut -d, -f1-16 $M/ref/greedy.txt),$(cut -d, -f17-24 $T/a)" ] ||
  bad "greedy: not the reference's ids"
same "sampled, seed 3" --ids "$P" --gen 24 --temperature 0.9 --top-p 0.95 --seed 3
same "1 thread" --ids "$P" --gen 12 --threads 1
same "avx2" --ids "$P" --gen 12 --kernels avx2
same "scalar" --ids "$P" --gen 8 --kernels scalar
same "text prompt" --tok $TK --prompt "The capital of France is" --gen 12
DARGS="--draft-block 3" same "--draft-block 3" --ids "$P" --gen 12
for v in b c; do
  $K3 $M --ids "$P" --gen 16 --quiet --draft ${D}_$v > $T/v 2> $T/ve
  [ "$(cat $T/v)" = "$(cut -d, -f1-16 $M/ref/greedy.txt)" ] && ok "variant $v: the same ids" ||
    bad "variant $v: '$(cat $T/v)': $(tail -n 2 $T/ve)"
done
# a streamed trunk at the minimum budget
$K3 pack $M $T/trunk --quiet || bad "k3 pack"
$K3 $M --trunk $T/trunk --preset minimum --ids "$P" --gen 12 --quiet --draft $D > $T/s 2>$T/se
[ "$(cat $T/s)" = "$(cut -d, -f1-12 $M/ref/greedy.txt)" ] &&
  ok "streamed trunk, minimum budget: the same ids" || bad "streamed: $(tail -n 2 $T/se)"
# the oracle hook: every draft right, then two a block; the ids never change
K3_TEST_DRAFT_ORACLE=$G $K3 $M --ids "$P" --gen 16 --draft $D --draft-block 7 --out $T/o.json \
  > $T/o 2>$T/oe
num() { sed -n "s/^  \"$1\": \([0-9]*\),\$/\1/p" $T/o.json; }
[ "$(cat $T/o)" = "$(echo $G | cut -d, -f1-16)" ] ||
  bad "oracle: ids '$(cat $T/o)'"
# the first token is the prefill's; then a block of 7 (8 tokens), then 6 drafts (room 6)
[ "$(num draft_accepted)" = 13 ] && [ "$(num draft_proposed)" = 13 ] &&
  [ "$(num draft_blocks)" = 2 ] && [ "$(num draft_rows_verified)" = 15 ] &&
  grep -q 'k3: draft: 2 blocks of 7, 13 drafts verified, 13 accepted' $T/oe &&
  ok "oracle: 13 of 13 drafts accepted in 2 blocks" ||
  bad "oracle: $(grep 'k3: draft' $T/oe) $(grep draft_ $T/o.json | tr -d '\n')"
K3_TEST_DRAFT_ORACLE=$G K3_TEST_DRAFT_RIGHT=2 $K3 $M --ids "$P" --gen 16 --draft $D \
  --draft-block 7 --out $T/o.json > $T/o 2>$T/oe
[ "$(cat $T/o)" = "$(echo $G | cut -d, -f1-16)" ] && [ "$(num draft_accepted)" = 10 ] &&
  ok "oracle, 2 right a block: 10 accepted, the same ids" ||
  bad "oracle 2 right: '$(cat $T/o)', $(grep 'k3: draft' $T/oe)"
# drafts that are never right: blocks pause (no draft forward) for 8, 16, 32 steps after
# each, with --draft-block 7 too (4 blocks in 63 steps, at most 28 drafts), and chosen
# lengths verify fewer; drafts that are always right are kept in long blocks
$K3 $M --ids "$P" --gen 64 --quiet > $T/g64
$K3 $M --ids "$P" --gen 64 --draft $D --draft-block 7 --out $T/o.json > $T/f 2>/dev/null
fixed=$(num draft_proposed)
$K3 $M --ids "$P" --gen 64 --draft $D --out $T/o.json > $T/a 2>/dev/null
chosen=$(num draft_proposed)
cmp -s $T/f $T/g64 && cmp -s $T/a $T/g64 && [ "$chosen" -gt 0 ] && [ "$chosen" -lt "$fixed" ] &&
  [ "$fixed" -le 28 ] &&
  ok "no draft right: $chosen drafts verified when chosen, $fixed with --draft-block 7" ||
  bad "no draft right: chosen $chosen, fixed $fixed"
K3_TEST_DRAFT_ORACLE=$(cat $T/g64) $K3 $M --ids "$P" --gen 64 --draft $D --out $T/o.json \
  > $T/a 2>/dev/null
cmp -s $T/a $T/g64 && [ "$(num draft_accepted)" = "$(num draft_proposed)" ] &&
  [ "$(num draft_accepted)" -ge 40 ] &&
  ok "every draft right, chosen: $(num draft_accepted) accepted in $(num draft_blocks) blocks" ||
  bad "every draft right, chosen: $(grep draft_ $T/o.json | tr -d '\n')"
# --dump-draft: the first block (position 12, the anchor 135) against the NumPy reference
# (tools/dspark_ref.py, case a12): the drafts exactly, the confidences and logits within
# 1e-4 of the largest value (max |k3 - ref| / max |ref|; the taps are k3's own, fp32)
R=$D/ref/a12
$K3 $M --ids "$P" --gen 3 --quiet --draft $D --dump-draft $T/dd.bin > /dev/null 2>$T/e
f4() { od -An -v -t f4 | tr -s ' ' '\n' | grep -v '^$'; }
relerr() { paste "$1" "$2" | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d;
  a = $2; if (a < 0) a = -a; if (a > r) r = a; n++ }
  END { e = 1; if (n == 7 || n == 7168) if (r > 0) e = m / r; printf("%.3g", e) }'; }
ids=$(od -An -v -t d4 -j 12 -N 28 $T/dd.bin | tr -s ' \n' ',' | sed 's/^,//; s/,$//')
head -c 12 $T/dd.bin | od -An -t d4 | tr -s ' ' > $T/hd
tail -c +41 $T/dd.bin | head -c 28 | f4 > $T/c1; f4 < $R/conf.f32 > $T/c2
tail -c +69 $T/dd.bin | head -c 28672 | f4 > $T/l1; f4 < $R/logits.f32 > $T/l2
ec=$(relerr $T/c1 $T/c2); el=$(relerr $T/l1 $T/l2)
[ "$(cat $T/hd)" = " 12 7 1024" ] && [ "$ids" = "$(cat $R/drafts.txt)" ] &&
  awk -v a="$ec" -v b="$el" 'BEGIN { exit !(a < 1e-4 && b < 1e-4) }' &&
  ok "--dump-draft: the first block's drafts $ids, confidences ($ec) and logits ($el) as the reference" ||
  bad "--dump-draft: header '$(cat $T/hd)', drafts $ids, errors $ec / $el: $(cat $T/e)"
# refusals
for a in "--recompute" "--no-spec" "--draft-ids 1,2" "--logprobs 2" "--draft-block 8" \
         "--dump-draft $T"; do
  # shellcheck disable=SC2086
  $K3 $M --ids "$P" --gen 4 --draft $D $a > /dev/null 2> $T/e; rc=$?
  [ $rc = 2 ] && ok "--draft with $a: exit 2: $(head -n 1 $T/e)" || bad "--draft $a: exit $rc"
done
$K3 $M --ids "$P" --gen 4 --draft $T/none > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q "$T/none" $T/e && ok "a missing draft folder: exit 2" ||
  bad "missing draft: exit $rc: $(cat $T/e)"
mkdir $T/dd; cp $D/model.safetensors $T/dd/
sed 's/"target_num_hidden_layers": 13/"target_num_hidden_layers": 12/' $D/config.json \
  > $T/dd/config.json
$K3 $M --ids "$P" --gen 4 --draft $T/dd > /dev/null 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q target_num_hidden_layers $T/e &&
  ok "a draft for another target: exit 2: $(grep target_num $T/e)" ||
  bad "another target: exit $rc: $(cat $T/e)"
# the slow tier: NEON and scalar under qemu, byte for byte
if [ -n "${K3_TEST_FULL:-}" ] && [ -x bin/k3-aarch64 ] && command -v qemu-aarch64 >/dev/null; then
  for k in neon scalar; do
    qemu-aarch64 bin/k3-aarch64 $M --ids "$P" --gen 10 --quiet --kernels $k --draft $D \
      --dump-logits $T/n.f32 > $T/n 2> $T/ne
    $K3 $M --ids "$P" --gen 10 --quiet --dump-logits $T/x.f32 > $T/x 2>/dev/null
    cmp -s $T/n $T/x && cmp -s $T/n.f32 $T/x.f32 && ok "aarch64 $k under qemu: the same bits" ||
      bad "aarch64 $k: '$(cat $T/n)' vs '$(cat $T/x)': $(tail -n 2 $T/ne)"
  done
fi
exit $fail
