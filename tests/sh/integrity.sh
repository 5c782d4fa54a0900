#!/bin/sh
# Data integrity and injected faults (issue 15): a NaN/Inf weight or an E8M0 scale 0xFF is
# refused at load, by `k3 pack`, or stops the run at the layer where activations first go
# non-finite (exit 1, never ids 0,0,0,0 with "valid": true); a flipped trunk byte fails its
# checksum (pinned layers always, at any thread count; streamed ones with --verify-reads); a
# format-1 trunk is refused; a shard truncated or removed under a run is named (SIGBUS on the
# mapping: exit 1; expert reads: exit 4); a disk full during `k3 pack` leaves no partial
# file; short reads and EINTR change no bit. Corrupted copies of tiny5 are made in a temp dir.
set -u
M=tests/models/tiny5
. tests/sh/lib/tensor.sh
P=$(cat $M/ref/prompt.txt); REF=$(cat $M/ref/greedy.txt)
. tests/sh/lib/check.sh
expect() {  # expect CODE PATTERN -- command...: exit CODE and PATTERN on stderr
  code=$1; pat=$2; shift 3
  "$@" >$T/o 2>$T/e; rc=$?
  if [ $rc -eq $code ] && grep -q -- "$pat" $T/e; then ok "exit $code: $pat"
  else bad "expected exit $code and '$pat', got $rc: $(tail -c 400 $T/e)"; fi
}
fresh() { rm -rf $T/m; mkdir $T/m; cp $M/*.json $M/*.safetensors $T/m/; }
# poke NAME BYTE_OFFSET OCTAL: overwrite bytes of tensor NAME in the copy $T/m
poke() {
  f=$(shard_of $T/m "language_model.$1") || { bad "no shard for $1"; return; }
  set -- $(tensor_offset "$f" "language_model.$1") "$2" "$3"
  patch_bytes "$f" $(($1 + $4)) "$5"
}
no_valid_out() {  # --out of a failed run never says valid: true
  if [ -f $T/run.json ] && grep -q '"valid": true' $T/run.json; then bad "$1: --out says valid"
  else ok "$1: --out does not claim a valid run"; fi
  rm -f $T/run.json
}

# ---- non-finite weights
fresh; poke model.layers.2.input_layernorm.weight 2 '\200\177'          # BF16 +Inf
expect 1 "layers.2.input_layernorm.weight' holds a non-finite value" -- \
  $K3 $T/m --ids "$P" --gen 4 --quiet --out $T/run.json
no_valid_out "Inf norm weight"
fresh; poke model.layers.2.self_attn.q_proj.weight 1000 '\300\177'      # BF16 NaN
expect 1 "prefill: non-finite activations (NaN) first in layer 2's attention" -- \
  $K3 $T/m --ids "$P" --gen 4 --quiet --out $T/run.json
no_valid_out "NaN matrix weight"
expect 1 "model.layers.2.self_attn.q_proj.weight' in .*non-finite" -- $K3 pack $T/m $T/trn --quiet
[ -z "$(ls $T/trn)" ] && ok "pack left no trunk behind" ||
  bad "pack left a file: $(ls $T/trn)"
# the first generated id (135) gets a NaN embedding row: the decode step is named
fresh; poke model.embed_tokens.weight $((135 * 512 + 6)) '\300\177'
expect 1 "generation step 1: non-finite activations (NaN) first in layer 0's attention" -- \
  $K3 $T/m --ids "$P" --gen 4 --quiet
# E8M0 scale 0xFF (NaN) in every routed expert of layer 3
fresh
for e in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
  poke model.layers.3.block_sparse_moe.experts.$e.w1.weight_scale 0 '\377'
done
expect 1 "first in layer 3's MoE output" -- $K3 $T/m --ids "$P" --gen 4 --quiet --out $T/run.json
no_valid_out "E8M0 0xFF"

# ---- trunk checksums
fresh; $K3 pack $T/m $T/tr --verify --quiet || bad "pack --verify of an intact copy"
head -c 4096 $T/tr/trunk.k3 | grep -aq 'k3trunk 2$' && ok "trunk index format 2" \
  || bad "no 'k3trunk 2' line"
$K3 $T/m --trunk $T/tr --trunk-gb 0 --verify-reads --ids "$P" --gen 16 --quiet \
  --dump-logits $T/l1 >$T/o 2>$T/e && [ "$(cat $T/o)" = "$REF" ] &&
  $K3 $T/m --ids "$P" --gen 1 --quiet --dump-logits $T/l0 >/dev/null &&
  cmp -s $T/l0 $T/l1 && ok "--verify-reads: ids and logits bits unchanged" ||
  bad "--verify-reads changed the run: $(tail -c 300 $T/e)"
mkdir $T/trf; cp $T/tr/trunk.k3 $T/trf/
off=$(grep -a '^t 3 .*layers.3.self_attn.o_proj.weight$' $T/trf/trunk.k3 | awk '{print $3 + 0}')
patch_bytes $T/trf/trunk.k3 $((off + 100)) '\125'
what="tensor 'language_model.model.layers.3.self_attn.o_proj.weight' (layer 3)"
expect 1 "trunk.k3: $what does not match its checksum" -- \
  $K3 $T/m --trunk $T/trf --ids "$P" --gen 2 --quiet
expect 1 "layers.3.self_attn.o_proj.weight' (layer 3) does not match its checksum" -- \
  $K3 $T/m --trunk $T/trf --trunk-gb 0 --verify-reads --ids "$P" --gen 2 --quiet
# the pinned prefix is read in slices by the kernels' threads (pin.c): the resident bits at
# 1 and 3 threads; of two corrupt matrices the first in stream order is named at both
for th in 1 3; do
  $K3 $T/m --trunk $T/tr --threads $th --ids "$P" --gen 1 --quiet --dump-logits $T/lp$th \
    >/dev/null 2>$T/e && cmp -s $T/l0 $T/lp$th && ok "pinned at --threads $th: resident bits" ||
    bad "pinned at --threads $th: other bits or a failure: $(tail -c 300 $T/e)"
done
off=$(grep -a '^t 1 .*layers.1.block_sparse_moe.shared_experts.gate_proj.weight$' \
  $T/trf/trunk.k3 | awk '{print $3 + 0}')
patch_bytes $T/trf/trunk.k3 $((off + 300)) '\125'
for th in 1 3; do
  expect 1 "layers.1.block_sparse_moe.shared_experts.gate_proj.weight' (layer 1) does not" -- \
    $K3 $T/m --trunk $T/trf --threads $th --ids "$P" --gen 2 --quiet
done
sed '1s/k3trunk 2$/k3trunk 1/' $T/tr/trunk.k3 > $T/trf/trunk.k3
expect 1 "trunk format 1; this k3 reads format 2.*re-run k3 pack" -- \
  $K3 $T/m --trunk $T/trf --ids "$P" --gen 2 --quiet

# ---- a shard that changes under the run (K3_FAULT_SHRINK_AT, fault.h)
S4=model-00004-of-000016.safetensors
fresh
expect 1 "$S4 changed under the run" -- env K3_FAULT_SHRINK_AT=1 K3_FAULT_SHRINK_SHARD=4 \
  $K3 $T/m --ids "$P" --gen 4 --quiet --out $T/run.json
grep -q "Bus error" $T/e && bad "the SIGBUS was not handled"
no_valid_out "shard truncated under a resident run"
fresh; $K3 pack $T/m $T/trm --quiet
expect 4 "$S4: reading .*short read" -- env K3_FAULT_SHRINK_AT=1 K3_FAULT_SHRINK_SHARD=4 \
  $K3 $T/m --trunk $T/trm --ids "$P" --gen 4 --quiet
fresh
expect 4 "cannot open .*$S4: No such file" -- env K3_FAULT_SHRINK_AT=1 K3_FAULT_SHRINK_SHARD=4 \
  K3_FAULT_SHRINK_UNLINK=1 $K3 $T/m --ids "$P" --gen 4 --quiet
grep -q "RUN INVALID" $T/e && ok "removed shard: RUN INVALID" || bad "no RUN INVALID"

# ---- disk full while packing: exit 1, no partial file, an earlier trunk left intact
fresh; $K3 pack $T/m $T/tp --quiet; cp $T/tp/trunk.k3 $T/good.k3
last=$(($(grep -ac '^t ' $T/tp/trunk.k3) + 3))          # header, index, tensors, index again
for n in 1 2 50 $last; do
  expect 1 "writing .*trunk.k3.tmp.[0-9.]*: No space left on device" -- \
    env K3_FAULT_PACK_WRITE=$n $K3 pack $T/m $T/tp --quiet
  [ "$(ls $T/tp)" = trunk.k3 ] && cmp -s $T/tp/trunk.k3 $T/good.k3 &&
    ok "write $n failed: no partial file, the old trunk intact" || bad "write $n: leftovers"
done
K3_FAULT_PACK_WRITE=$((last + 1)) $K3 pack $T/m $T/tp --quiet && cmp -s $T/tp/trunk.k3 $T/good.k3 &&
  ok "write $((last + 1)) does not exist: the pack succeeds" || bad "pack wrote $last writes?"

# ---- short reads and EINTR (every read capped, every other one interrupted): same bits
$K3 $M --trunk $T/tr --trunk-gb 0 --cache-gb 0 --ids "$P" --gen 4 --quiet --dump-logits $T/a \
  >$T/ida 2>/dev/null
for cap in 1 1000 4097; do
  K3_FAULT_SHORT_READS=$cap $K3 $M --trunk $T/tr --trunk-gb 0 --cache-gb 0 --ids "$P" --gen 4 \
    --quiet --dump-logits $T/b >$T/idb 2>$T/e && cmp -s $T/a $T/b && cmp -s $T/ida $T/idb &&
    ok "K3_FAULT_SHORT_READS=$cap: logits and ids bit-identical" ||
    bad "K3_FAULT_SHORT_READS=$cap changed the run: $(tail -c 300 $T/e)"
done
K3_FAULT_SHORT_READS=777 $K3 pack $M $T/ts --quiet && cmp -s $T/ts/trunk.k3 $T/tr/trunk.k3 &&
  ok "pack under short reads: the same trunk bytes" || bad "pack under short reads differs"
exit $fail
