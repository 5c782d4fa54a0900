#!/bin/sh
# Faults in the memory layer: a failed expert read is retried once, then counted and
# the run ends "RUN INVALID" with exit 4; a failed trunk read exits 1; truncated,
# unreadable, stale and foreign shards/trunks are refused (never read as zeros).
. tests/sh/lib/mem.sh
M=tests/models/tiny5
P=$(cat $M/ref/prompt.txt); REF=$(cat $M/ref/greedy.txt)
expect() {  # expect CODE PATTERN -- command...
  code=$1; pat=$2; shift 3
  "$@" >$T/o 2>$T/e; rc=$?
  if [ $rc -eq $code ] && grep -q -- "$pat" $T/e; then ok "exit $code: $pat"
  else bad "expected exit $code and '$pat', got $rc: $(tail -c 400 $T/e)"; fi
}
$K3 pack $M $T/tr --quiet || bad "pack"

expect 4 "RUN INVALID" -- env K3_FAULT_EXPERT_READ=3 $K3 $M --ids "$P" --gen 4 --cache-gb 0 --quiet
grep -q "retrying once" $T/e && ok "failed expert read was retried once before being counted" \
  || bad "no retry message"
K3_FAULT_EXPERT_READ_ONCE=3 $K3 $M --ids "$P" --gen 16 --cache-gb 0 >$T/o 2>$T/e; rc=$?
[ $rc -eq 0 ] && [ "$(cat $T/o)" = "$REF" ] && grep -q "retrying once" $T/e \
  && ok "a read that fails once is retried: exit 0, ids equal" \
  || bad "retry-once: rc $rc $(tail -c 300 $T/e)"
expect 4 "RUN INVALID" -- env K3_FAULT_EXPERT_READ=1 \
  $K3 $M --trunk $T/tr --trunk-gb 0 --ids "$P" --gen 2 --quiet
expect 1 "trunk read failed" -- env K3_FAULT_TRUNK_READ=4 \
  $K3 $M --trunk $T/tr --trunk-gb 0 --ids "$P" --gen 4 --quiet
expect 1 "injected failure of trunk read 1" -- env K3_FAULT_TRUNK_READ=1 \
  $K3 $M --trunk $T/tr --trunk-gb 0 --ids "$P" --gen 4 --quiet
expect 1 "injected failure of trunk read" -- env K3_FAULT_TRUNK_READ=1 \
  $K3 $M --trunk $T/tr --trunk-gb 1000 --ids "$P" --gen 1 --quiet

# a truncated copy of a shard (the one holding layer 3's experts)
mkdir $T/m; cp $M/*.json $M/*.safetensors $T/m/
sh=$(ls $T/m/model-00004-*.safetensors); sz=$(wc -c < $sh)
truncate -s $((sz - 4096)) $sh
expect 1 "truncated" -- $K3 $T/m --ids "$P" --gen 1 --quiet
# a trunk packed from the intact copy is stale for the truncated one
cp $M/*.json $M/*.safetensors $T/m/; $K3 pack $T/m $T/trm --quiet
truncate -s $((sz - 4096)) $sh
expect 1 "truncated" -- $K3 $T/m --trunk $T/trm --ids "$P" --gen 1 --quiet
cp $M/*.json $M/*.safetensors $T/m/
# truncated trunk, foreign trunk, stale config, missing trunk, leftover temp file
cp $T/tr/trunk.k3 $T/trunc.k3; mkdir $T/trt; tsz=$(wc -c < $T/trunc.k3)
head -c $((tsz - 8192)) $T/trunc.k3 > $T/trt/trunk.k3
expect 1 "truncated" -- $K3 $M --trunk $T/trt --ids "$P" --gen 1 --quiet
if [ -f tests/models/tiny4/config.json ]; then
  $K3 pack tests/models/tiny4 $T/tr4 --quiet
  expect 1 "re-run k3 pack" -- $K3 $M --trunk $T/tr4 --ids "$P" --gen 1 --quiet
fi
sed 's/"rms_norm_eps"/ "rms_norm_eps"/' $M/config.json > $T/m/config.json
expect 1 "different checkpoint or config.json" -- $K3 $T/m --trunk $T/trm --ids "$P" --gen 1 --quiet
cp $M/config.json $T/m/
# a --trunk folder without trunk.k3, or with a directory there, is a usage error (exit 2,
# README "Exit codes"), found before the model is opened
mkdir $T/tmp; cp $T/tr/trunk.k3 $T/tmp/trunk.k3.tmp
expect 2 "trunk.k3 does not exist (create it with: k3 pack" -- \
  $K3 $M --trunk $T/tmp --ids "$P" --gen 1 --quiet
mkdir -p $T/dir/trunk.k3
expect 2 "trunk.k3 is a directory" -- $K3 $M --trunk $T/dir --ids "$P" --gen 1 --quiet
# unreadable files: chmod 000 when not root (an I/O failure, exit 1)
if [ "$(id -u)" != 0 ]; then
  chmod 000 $sh
  expect 1 "model-00004" -- $K3 $T/m --ids "$P" --gen 1 --cache-gb 0 --quiet
  chmod 644 $sh
else
  echo "SKIP: chmod 000 cannot make a file unreadable for root"
fi
exit $fail
