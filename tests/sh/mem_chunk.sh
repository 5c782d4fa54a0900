#!/bin/sh
# The plan sizes the prefill chunk: without --prefill-chunk a prompt goes through in one
# forward when its buffers fit beside the budgets (so each (layer, expert) is read once),
# in the largest chunks that fit when they do not, and --prefill-chunk still overrides.
# The logits bytes never depend on the chunk (resident and streamed trunk, starved cache).
# Chunks of 1 and 7 tokens on a streamed trunk (about 15 s) are the slow tier: make check
# (K3_TEST_FULL=1); make test runs them without a trunk.
. tests/sh/lib/mem.sh
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
num() { sed -n "s/^  \"$1\": \([0-9]*\).*/\1/p" "$2"; }

M=tests/models/tiny5
ids=$(seq 1 300 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 200 + 1) }')
$K3 $M --ids "$ids" --gen 0 --cache-gb 1000 --prefill-chunk 300 --dump-logits $T/base.f32 \
  --quiet >/dev/null || bad "resident run failed"
$K3 pack $M $T/trunk --quiet || bad "k3 pack failed"
$K3 pack $M $T/trunkc --compress --quiet || bad "k3 pack --compress failed"
# the coded trunk too: a long chunk makes the streamed matmul cut its rows into blocks
for tr in "" "--trunk $T/trunk" "--trunk $T/trunkc"; do
  case "$tr" in "") lab="";; *trunkc) lab=" (coded trunk)";; *) lab=" (trunk)";; esac
  # default: one forward of all 300 tokens, each (layer, expert) read at most once
  $K3 $M --ids "$ids" --gen 0 $tr --trunk-gb 0 --cache-gb 0 --dump-logits $T/l.f32 \
    --out $T/r.json 2>$T/err >/dev/null || bad "auto chunk$lab: exit $?"
  c=$(num prefill_chunk $T/r.json); reads=$(num expert_reads $T/r.json)
  plan=$(num plan_bytes $T/r.json)
  [ "$c" = 300 ] && grep -q "prefill chunk 300 tokens per forward" $T/err \
    && ok "auto chunk$lab: 300 tokens in one forward, printed in the plan" \
    || bad "auto chunk$lab: chunk '$c' $(grep 'prefill chunk' $T/err)"
  cmp -s $T/base.f32 $T/l.f32 || bad "auto chunk$lab: logits bytes differ"
  $K3 $M --ids "$ids" --gen 0 $tr --trunk-gb 0 --cache-gb 0 --prefill-chunk 64 \
    --out $T/r64.json --quiet >/dev/null 2>&1
  r64=$(num expert_reads $T/r64.json)
  [ -n "$reads" ] && [ -n "$r64" ] && [ "$reads" -lt "$r64" ] \
    && ok "auto chunk$lab: $reads expert reads, --prefill-chunk 64: $r64" \
    || bad "auto chunk$lab: expert reads '$reads' not below chunk 64's '$r64'"
  # memory bounds the chunk: less available than the one-forward plan, smaller chunks, or
  # the same chunk with its activations in a file (each weight still read once a forward)
  last=301
  for f in 1.0 0.96 0.92; do
    A=$(awk -v p="$plan" -v f=$f 'BEGIN { printf "%d", p * f }')
    K3_MEM_AVAILABLE=$A $K3 $M --ids "$ids" --gen 0 $tr --trunk-gb 0 --cache-gb 0 \
      --dump-logits $T/l.f32 --out $T/r.json 2>$T/err >/dev/null ||
      bad "avail $A$lab: exit $?"
    c=$(num prefill_chunk $T/r.json)
    cmp -s $T/base.f32 $T/l.f32 || bad "avail $A$lab: chunk $c: logits bytes differ"
    if grep -q "activations in a file" $T/err; then
      [ -n "$c" ] && [ "$c" -le "$last" ] && [ "$c" -ge 1 ] && [ "$c" -le 300 ] \
        && grep -q "on disk: the chunk's buffers in a file" $T/err \
        || bad "avail $A$lab: chunk '$c' in a file (previous $last)"
    else
      [ -n "$c" ] && [ "$c" -lt "$last" ] && [ "$c" -ge 1 ] \
        && grep -q "fit 90% of available" $T/err \
        || bad "avail $A$lab: chunk '$c' (previous $last)"
    fi
    last=${c:-0}
  done
  ok "available 1.0, 0.96, 0.92 x the one-forward plan$lab: chunks shrink (or go to a" \
    "file) to $last tokens, same logits bytes"
  pcs="1 7 64 299 300 1000"; [ -z "$tr" ] || slow || pcs="64 299 300 1000"
  for pc in $pcs; do
    $K3 $M --ids "$ids" --gen 0 $tr --trunk-gb 0 --cache-gb 0 --prefill-chunk $pc \
      --dump-logits $T/l.f32 --quiet >/dev/null 2>&1 ||
      bad "--prefill-chunk $pc$lab: exit $?"
    cmp -s $T/base.f32 $T/l.f32 || bad "--prefill-chunk $pc$lab: logits bytes differ"
  done
  ok "--prefill-chunk $pcs$lab: logits bytes identical"
done
# --trunk-gb is the ceiling: between the working minimum at chunk 1 and at chunk 300, the
# chunk shrinks to what fits inside it (pinned gets the rest) instead of raising the budget
$K3 $M --ids "$ids" --gen 0 --trunk $T/trunk --trunk-gb 0 --cache-gb 0 --prefill-chunk 1 \
  --out $T/r1.json --quiet >/dev/null 2>&1
$K3 $M --ids "$ids" --gen 0 --trunk $T/trunk --trunk-gb 0 --cache-gb 0 --out $T/r300.json \
  --quiet >/dev/null 2>&1
f1=$(num trunk_budget_bytes $T/r1.json); f300=$(num trunk_budget_bytes $T/r300.json)
tg=$(awk -v a="${f1:-0}" -v b="${f300:-0}" 'BEGIN { printf "%.6f", (a + b) / 2e9 }')
$K3 $M --ids "$ids" --gen 0 --trunk $T/trunk --trunk-gb $tg --cache-gb 0 --dump-logits $T/l.f32 \
  --out $T/r.json 2>$T/err >/dev/null || bad "--trunk-gb $tg: exit $?"
c=$(num prefill_chunk $T/r.json); tb=$(num trunk_budget_bytes $T/r.json)
want=$(awk -v t=$tg 'BEGIN { printf "%d", t * 1e9 }')
cmp -s $T/base.f32 $T/l.f32 || bad "--trunk-gb $tg: logits bytes differ"
[ -n "$c" ] && [ "$c" -gt 1 ] && [ "$c" -lt 300 ] && [ "$tb" = "$want" ] \
  && grep -q "fit inside --trunk-gb" $T/err && ! grep -q "trunk-gb raised" $T/err \
  && ok "--trunk-gb $tg (floors $f1 at chunk 1, $f300 at 300): chunk $c inside the budget" \
  || bad "--trunk-gb $tg: chunk '$c', trunk budget '$tb' (want $want) $(grep chunk $T/err)"
# Activations in a file (the prompt's buffers do not fit; K3_MEM_AVAILABLE just under the
# in-memory plan): the whole prompt still goes in one forward, and what stays mapped does
# not grow with it: matmuls and experts 128 tokens at a time, rows 64 at a time, pages
# dropped between (runstate.c). At 600 and 1200 tokens the mapped buffers differ by the
# dump's logits rows, the routing bytes and the attention score row only (4 x vocab + under
# 64 bytes a token), not by 600 rows of a matmul's widths too (as when a matmul mapped all
# its rows); the logits bytes, the expert reads of the in-memory forward, peak RSS within
# the plan.
ids=$(seq 1 1200 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 200 + 1) }')
for n in 600 1200; do
  pi=$(echo "$ids" | cut -d, -f1-$n)
  $K3 $M --ids "$pi" --gen 0 --trunk $T/trunk --trunk-gb 0 --cache-gb 0 --out $T/m$n.json \
    --dump-logits $T/m$n.f32 --quiet >/dev/null 2>&1 || bad "memory $n: exit $?"
  A=$(awk -v p="$(num plan_bytes $T/m$n.json)" 'BEGIN { printf "%d", p * 0.96 }')
  K3_MEM_AVAILABLE=$A $K3 $M --ids "$pi" --gen 0 --trunk $T/trunk --trunk-gb 0 --cache-gb 0 \
    --dump-logits $T/f$n.f32 --out $T/f$n.json 2>$T/err$n >/dev/null || bad "file $n: exit $?"
  c=$(num prefill_chunk $T/f$n.json)
  [ "$c" = $n ] && grep -q "all the tokens of the forward, activations in a file" $T/err$n \
    || bad "file $n: chunk '$c' $(grep 'prefill chunk' $T/err$n)"
  cmp -s $T/m$n.f32 $T/f$n.f32 || bad "file $n: logits bytes differ from memory's"
  peak=$(num peak_rss_bytes $T/f$n.json); plan=$(num plan_bytes $T/f$n.json)
  [ -n "$peak" ] && [ "$peak" -le $((plan + plan / 50)) ] \
    || bad "file $n: peak RSS '$peak' over the plan '$plan' + 2%"
  [ "$(num expert_reads $T/f$n.json)" = "$(num expert_reads $T/m$n.json)" ] \
    || bad "file $n: expert reads $(num expert_reads $T/f$n.json), one forward's" \
      "$(num expert_reads $T/m$n.json)"
done
V=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' $M/config.json)
b1=$(num buffer_bytes $T/f600.json); b2=$(num buffer_bytes $T/f1200.json)
[ -n "$b1" ] && [ -n "$b2" ] && [ $((b2 - b1)) -le $((600 * (64 + 4 * V))) ] \
  && ok "activations in a file: 600 and 1200 tokens in one forward each, mapped buffers" \
    "$b1 and $b2 bytes, the logits bytes and expert reads of memory, peak RSS in the plan" \
  || bad "activations in a file: mapped buffers $b1 at 600 tokens, $b2 at 1200"
exit $fail
