#!/bin/sh
# Memory budgets decide where bytes live, never the bits: on the committed tiny
# checkpoints, ids equal tests/models/*/ref/greedy.txt and --dump-logits bytes equal
# the resident run at every budget (starved .. resident), pinned depth, ring and
# cache size, with and without a packed trunk. Also: presets, the plan, refusals.
. tests/sh/lib/mem.sh

for M in tests/models/tiny5 tests/models/tiny4; do
  P=$(cat $M/ref/prompt.txt); REF=$(cat $M/ref/greedy.txt); name=$(basename $M)
  $K3 $M --ids "$P" --gen 0 --cache-gb 1000 --dump-logits $T/base.f32 --quiet >/dev/null \
    || bad "$name: resident run failed"
  $K3 pack $M $T/trunk-$name --verify --quiet || bad "$name: k3 pack --verify failed"
  n=0
  for tr in "" "--trunk $T/trunk-$name"; do
    for b in "0.001 0.001" "0.002 0.0001" "0.004 0.003" "0.006 0.01" "1000 1000"; do
      set -- $b
      args="$tr --trunk-gb $1 --cache-gb $2"
      out=$($K3 $M --ids "$P" --gen 16 $args --quiet 2>$T/err) \
        || bad "$name $args: exit $? $(head -c 300 $T/err)"
      [ "$out" = "$REF" ] || bad "$name $args: ids '$out' != reference"
      $K3 $M --ids "$P" --gen 0 $args --dump-logits $T/l.f32 --quiet >/dev/null 2>&1
      cmp -s $T/base.f32 $T/l.f32 || bad "$name $args: logits bytes differ from the resident run"
      n=$((n + 1))
    done
  done
  for pc in 1 5; do   # chunked prefill with a starved cache and ring
    $K3 $M --ids "$P" --gen 0 --trunk $T/trunk-$name --trunk-gb 0 --cache-gb 0 \
      --prefill-chunk $pc --dump-logits $T/l.f32 --quiet >/dev/null 2>&1
    cmp -s $T/base.f32 $T/l.f32 || bad "$name --prefill-chunk $pc starved: logits differ"
  done
  # lm_head streamed in row blocks (tails, one row, one block): same logits bytes
  for rows in 1 7 1000000; do
    K3_LMHEAD_ROWS=$rows $K3 $M --ids "$P" --gen 0 --trunk $T/trunk-$name --trunk-gb 0 \
      --cache-gb 0 --dump-logits $T/l.f32 2>$T/err >/dev/null
    grep -q "lm_head streamed" $T/err && cmp -s $T/base.f32 $T/l.f32 \
      || bad "$name lm_head in blocks of $rows rows: logits differ or not streamed"
  done
  out=$(K3_LMHEAD_ROWS=7 $K3 $M --ids "$P" --gen 16 --trunk $T/trunk-$name --trunk-gb 0 \
    --cache-gb 0 --quiet 2>/dev/null)
  [ "$out" = "$REF" ] || bad "$name lm_head streamed: ids differ"
  out=$($K3 $M --ids "$P" --gen 16 --trunk $T/trunk-$name --preset laptop --recompute \
    --quiet 2>/dev/null)
  [ "$out" = "$REF" ] || bad "$name --recompute with --trunk: ids differ"
  ok "$name: ids == ref/greedy.txt and logits bytes identical at $n budget pairs (shards" \
    "and packed trunk, starved..resident), chunked prefill, recompute, lm_head in row" \
    "blocks (1, 7, all rows)"
done

M=tests/models/tiny5; P=$(cat $M/ref/prompt.txt)
# prefill reads each (layer, expert) at most once per chunk, even with a starved cache
$K3 $M --ids "$P" --gen 0 --cache-gb 0 --prefill-chunk 64 --out $T/r.json --quiet >/dev/null 2>&1
reads=$(sed -n 's/^  "expert_reads": \([0-9]*\).*/\1/p' $T/r.json)
req=$(sed -n 's/^  "expert_requests": \([0-9]*\).*/\1/p' $T/r.json)
[ -n "$reads" ] && [ "$reads" -le "$req" ] \
  && ok "prefill: $reads expert reads for $req (layer, expert) requests of one chunk" \
  || bad "prefill re-read experts: reads $reads requests $req"
for k in io_share trunk_bytes_read expert_bytes_read expert_hit_rate expert_read_mb_per_s \
         trunk_read_mb_per_s peak_rss_bytes; do
  grep -q "\"$k\"" $T/r.json || bad "--out JSON lacks $k"
done
ok "--out JSON has the memory report fields"

# the users' command shape (tokenizer-free ids instead of --prompt)
out=$($K3 $M --trunk $T/trunk-tiny5 --preset laptop --ids "$P" --gen 8 --incremental 2>$T/err)
[ $? -eq 0 ] && grep -q "memory plan" $T/err && grep -q "^PEAK RSS for the whole run" $T/err \
  && ok "--trunk --preset laptop --gen 8 --incremental runs, prints the plan and peak RSS" \
  || bad "preset laptop run: $(tail -3 $T/err)"
$K3 --list-presets > $T/p && for p in minimum laptop desktop workstation server max auto; do
  grep -q "^$p" $T/p || bad "--list-presets lacks $p"; done
# the 8 GB promise: the laptop plan on the real K3 fits an 8 GB machine's MemAvailable
# (<= 6.5 GB)
lap=$(sed -n 's/^laptop .* \([0-9.]*\) GB (.*/\1/p' $T/p)
min=$(sed -n 's/^minimum .* \([0-9.]*\) GB (.*/\1/p' $T/p)
awk -v l="$lap" -v m="$min" 'BEGIN { exit !(l != "" && l + 0 <= 6.5 && m + 0 <= l + 0) }' \
  && ok "--list-presets: minimum $min GB, laptop $lap GB on the real K3 (<= 6.5)" \
  || bad "--list-presets: laptop '$lap' GB, minimum '$min' GB (want <= 6.5)"
$K3 $M --ids 1 --gen 0 --preset nope --quiet >/dev/null 2>&1
[ $? -eq 2 ] && ok "unknown preset: exit 2" || bad "unknown preset"
# every preset --list-presets shows is accepted; minimum = both budgets at the working minimum
out=$($K3 $M --trunk $T/trunk-tiny5 --preset minimum --ids "$P" --gen 8 2>$T/err)
[ $? -eq 0 ] && [ "$out" = "$(cut -d, -f1-8 $M/ref/greedy.txt)" ] \
  && grep -q 'cache-gb raised to the working minimum' $T/err \
  && grep -q 'trunk-gb raised to the working minimum' $T/err \
  && ok "--preset minimum runs at the working minimum, same ids" \
  || bad "--preset minimum: $(tail -3 $T/err)"
for p in $(awk '$2 ~ /^([0-9.]+|all)$/ {print $1}' $T/p); do
  $K3 $M --ids 1 --gen 0 --preset $p --quiet >/dev/null 2>$T/err \
    || bad "--preset $p (listed) refused: $(cat $T/err)"
done
# a later flag wins: --cache-gb after --preset
$K3 $M --ids "$P" --gen 1 --preset max --cache-gb 0 2>$T/err >/dev/null
grep -q "raised to the working minimum" $T/err && ok "a later --cache-gb overrides the preset" \
  || bad "later flag"
# refuses when the plan does not fit, naming the numbers and a fix
K3_MEM_AVAILABLE=1000000 $K3 $M --ids "$P" --gen 1 --quiet >/dev/null 2>$T/err; rc=$?
[ $rc -eq 1 ] && grep -q "needs .* GB but .* GB is available" $T/err && grep -q "Fix:" $T/err \
  && ok "plan refuses (exit 1) with numbers and a fix" || bad "refusal: rc $rc $(cat $T/err)"
# a context whose MLA cache does not fit: the fix is a smaller --ctx, the largest that fits
K3_MEM_AVAILABLE=24000000000 $K3 $M --ids "$P" --gen 2 --ctx 100000000 --quiet >/dev/null \
  2>$T/err; rc=$?
[ $rc -eq 1 ] && grep -q "Fix: a smaller --ctx" $T/err && ! grep -q "stream the trunk" $T/err \
  && ok "--ctx 100000000: refused (exit 1), the fix is a smaller --ctx" \
  || bad "--ctx 100000000: rc $rc $(cat $T/err)"
A=60000000
K3_MEM_AVAILABLE=$A $K3 $M --ids "$P" --gen 1 --ctx 100000 --quiet >/dev/null 2>$T/err
n=$(sed -n 's/.*fit these budgets (--ctx \([0-9]*\)).*/\1/p' $T/err)
if [ -n "$n" ] \
   && K3_MEM_AVAILABLE=$A $K3 $M --ids "$P" --gen 1 --ctx $n --quiet >/dev/null 2>&1 \
   && ! K3_MEM_AVAILABLE=$A $K3 $M --ids "$P" --gen 1 --ctx $((n + 1)) --quiet \
     >/dev/null 2>&1; then
  ok "the suggested --ctx $n is the largest that fits $A bytes"
else bad "suggested --ctx '$n' under K3_MEM_AVAILABLE=$A: $(cat $T/err)"; fi
exit $fail
