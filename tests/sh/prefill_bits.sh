#!/bin/sh
# Issue 24's bits acceptance: a prompt of any length goes through at the minimum budget
# (streamed trunk, starved cache: one forward with its activations in a file when they do
# not fit) and resident with the --dump-logits bytes of --prefill-chunk 1, token by token.
# make test: tiny5, 1 63 64 65 238 257 tokens (the edges of the 64-row blocks and of the
# 256-token matmul blocks); the slow tier (K3_TEST_FULL=1): every committed model, and 981
# and 4096 tokens too. From 64 tokens also with the MLA's tokens 1 and 5 at a time.
. tests/sh/lib/mem.sh
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
models="tiny5"; lens="1 63 64 65 238 257"
slow && { models="tiny5 tiny4 tiny5f"; lens="1 63 64 65 238 257 981 4096"; }
for mm in $models; do
  M=tests/models/$mm
  $K3 pack $M $T/trunk.$mm --quiet || bad "$mm: k3 pack failed"
  for n in $lens; do
    ids=$(seq 1 $n | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 200 + 1) }')
    c="--ids $ids --gen 0 --ctx 4100 --quiet"
    $K3 $M $c --prefill-chunk 1 --dump-logits $T/one.f32 >/dev/null 2>$T/err \
      || bad "$mm $n tokens, chunk 1: exit $? $(cat $T/err)"
    for b in resident minimum; do
      f=""; [ $b = minimum ] && f="--trunk $T/trunk.$mm --preset minimum"
      $K3 $M $c $f --dump-logits $T/l.f32 --out $T/r.json >/dev/null 2>$T/err \
        || bad "$mm $n tokens $b: exit $? $(cat $T/err)"
      ch=$(sed -n 's/^  "prefill_chunk": \([0-9]*\).*/\1/p' $T/r.json)
      cmp -s $T/one.f32 $T/l.f32 && ok "$mm $n tokens $b (chunk $ch): the bytes of" \
        "--prefill-chunk 1" \
        || bad "$mm $n tokens $b: logits bytes differ from --prefill-chunk 1"
    done
    # the MLA takes a head's tokens 16 at a time (mla.c); 5 and 1 (the planned row) the same
    [ $n -ge 64 ] && for g in 1 5; do
      K3_MLA_TOKENS=$g $K3 $M $c --dump-logits $T/l.f32 >/dev/null 2>$T/err &&
        cmp -s $T/one.f32 $T/l.f32 && ok "$mm $n tokens, the MLA $g token(s) at a time: the" \
        "bytes of --prefill-chunk 1" || bad "$mm $n tokens, K3_MLA_TOKENS=$g: other bytes"
    done
  done
done
exit $fail
