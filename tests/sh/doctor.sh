#!/bin/sh
# k3 doctor: exit 0 and "healthy" on the committed model (with the measurements, with a
# packed trunk, with --scan, with --json); exit 1 naming the problem on a truncated
# shard, a missing shard (both named when both happen; the shards line counts what the index
# names and sets vision-only shards apart), a stale trunk, a flipped trunk
# byte and, with --scan, a NaN weight and an E8M0 scale 0xFF; exit 2 on usage errors.
# Corrupted copies of tiny5 are made in a temp dir.
set -u
M=tests/models/tiny5
. tests/sh/lib/tensor.sh
. tests/sh/lib/check.sh
doc() {  # doc CODE PATTERN -- args...: exit CODE, PATTERN in the report (stdout) and stderr
  code=$1; pat=$2; shift 3
  $K3 doctor "$@" >$T/o 2>$T/e; rc=$?
  if [ $rc -ne $code ]; then bad "doctor $*: exit $rc, want $code: $(tail -c 300 $T/e)"; return; fi
  if [ $code -eq 0 ]; then
    grep -q "^k3 doctor: healthy$" $T/o && ok "doctor $*: healthy, exit 0" ||
      bad "doctor $*: no 'healthy' line"
    return
  fi
  grep -q -- "$pat" $T/o && grep -q -- "k3: doctor: .*$pat" $T/e &&
    ok "doctor $*: exit $code, names '$pat'" || bad "doctor $*: '$pat' not named: $(cat $T/e)"
}
fresh() { rm -rf $T/m; mkdir $T/m; cp $M/*.json $M/*.safetensors $T/m/; }
S4=model-00004-of-000016.safetensors; S7=model-00007-of-000016.safetensors

doc 0 "" -- $M                                   # the machine measured too (bounded: 3 s)
grep -q "disk read .* MB/s" $T/o && grep -q "recommended: --preset" $T/o &&
  grep -q "s/token (an estimate)" $T/o && ok "bandwidth measured, a preset and s/token" ||
  bad "no measurement or recommendation: $(cat $T/o)"
$K3 pack $M $T/tr --quiet
doc 0 "" -- $M --trunk $T/tr --scan --no-bench
grep -q "tensors (.* GB) match their checksums" $T/o && grep -q "every value finite" $T/o &&
  ok "trunk checksums and scan reported" || bad "trunk/scan lines missing: $(cat $T/o)"
$K3 doctor $M --no-bench --json >$T/j 2>$T/e && grep -q '"healthy": true' $T/j &&
  grep -q '"problems": \[\]' $T/j && ok "--json: healthy" || bad "--json: $(cat $T/j)"
# the transparent huge page settings, as the kernel gives them (or "none")
want=none
[ -r /sys/kernel/mm/transparent_hugepage/enabled ] &&
  want=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled)
grep -q "\"transparent_hugepage\": \"$want\"" $T/j &&
  grep -q "huge pages     transparent $want, defrag " $T/o &&
  ok "huge pages: transparent $want in the report and --json" ||
  bad "huge pages: want $want: $(grep -i huge $T/o $T/j)"

# a truncated shard; a missing one; both at once (every problem, not just the first)
fresh; truncate -s 500000 $T/m/$S4
doc 1 "$S4: .*truncated" -- $T/m --no-bench
fresh; rm $T/m/$S7
doc 1 "$S7 is missing" -- $T/m --no-bench
truncate -s 500000 $T/m/$S4
doc 1 "$S4: .*truncated" -- $T/m --no-bench
grep -q "$S7 is missing" $T/o && grep -q "^k3 doctor: 2 problems" $T/o &&
  ok "both problems named" || bad "not every problem named: $(cat $T/o)"
# the shards line counts what the index names (16: 14 with text tensors, 2 vision-only),
# what is present, and which missing ones matter (issue 35: it said "14 present")
$K3 doctor $M --no-bench > $T/o 2>&1
grep -q "shards         16 named by the index, all present: 14 with the tensors k3 reads" \
  $T/o && grep -q "2 with vision tensors only (k3 does not read them)$" $T/o &&
  ok "shards: 16 named, all present, 14 read, 2 vision-only" || bad "shards: $(grep shards $T/o)"
S16=model-00016-of-000016.safetensors
fresh; rm $T/m/$S16
doc 0 "" -- $T/m --no-bench                      # a vision-only shard missing: no problem
grep -q "shards         16 named by the index, 15 present: .* of which missing (nothing to \
do): $S16$" $T/o && grep -q "every file k3 reads present (1 of the 16 named are missing" $T/o &&
  ok "a missing vision-only shard named, not a problem" || bad "vision-only: $(head -n 3 $T/o)"
rm $T/m/$S7
doc 1 "$S7 is missing" -- $T/m --no-bench
grep -q "16 named by the index, 14 present; missing, with tensors k3 reads: $S7 (above); .*\
of which missing (nothing to do): $S16$" $T/o && ok "both missing: the one that matters apart" ||
  bad "both missing: $(grep shards $T/o)"
$K3 doctor $T/m --no-bench --json > $T/j 2>/dev/null
grep -q '"shards_named": 16,' $T/j && grep -q '"shards_present": 14,' $T/j &&
  grep -q '"shards_vision_only": 2,' $T/j && ok "--json: shards_named, _present, _vision_only" ||
  bad "--json shards: $(grep shards $T/j)"
# a stale trunk (config.json changed since the pack) and a flipped trunk byte
fresh; sed 's/"rms_norm_eps"/ "rms_norm_eps"/' $M/config.json > $T/m/config.json
doc 1 "trunk.k3 was packed from a different checkpoint or config.json" -- $T/m --trunk $T/tr \
  --no-bench
fresh; mkdir $T/trf; cp $T/tr/trunk.k3 $T/trf/
off=$(grep -a '^t -1 .*model.norm.weight$' $T/trf/trunk.k3 | awk '{print $3 + 0}')
patch_bytes $T/trf/trunk.k3 $((off + 7)) '\125'
doc 1 "tensor 'language_model.model.norm.weight' (global) does not match its checksum" -- \
  $T/m --trunk $T/trf --no-bench
# --scan: a NaN weight (a matrix, not read at load) and an E8M0 scale 0xFF
n=language_model.model.layers.5.self_attn.q_proj.weight; f=$(shard_of $T/m $n)
set -- $(tensor_offset $f $n); patch_bytes $f $(($1 + 64)) '\300\177'
n=language_model.model.layers.6.block_sparse_moe.experts.3.w2.weight_scale; f=$(shard_of $T/m $n)
set -- $(tensor_offset $f $n); patch_bytes $f $(($1 + 5)) '\377'
doc 0 "" -- $T/m --no-bench                        # without --scan nothing reads them
doc 1 "layers.5.self_attn.q_proj.weight' in .*non-finite value (NaN or Inf) at element 32" -- \
  $T/m --scan --no-bench
grep -q "experts.3.w2.weight_scale' in .*E8M0 scale 0xFF (NaN) at element 5" $T/o &&
  ok "--scan: the bad scale named too" || bad "--scan: scale not named: $(cat $T/o)"

# --json writes null, never 0, for what is not there: no cgroup limit, no shard to test
# O_DIRECT on (the text says "no cgroup limit" / "not tested")
$K3 doctor $M --no-bench --json >$T/j 2>/dev/null
$K3 doctor $M --no-bench >$T/o 2>/dev/null
cg=$(sed -n 's/^  "cgroup_available_bytes": \(.*\),$/\1/p' $T/j)
if grep -q 'no cgroup limit' $T/o; then want=null; else want='[1-9][0-9]*'; fi
echo "$cg" | grep -Eqx "$want" && ok "--json: cgroup_available_bytes $cg (want $want)" ||
  bad "--json: cgroup_available_bytes '$cg', want $want"
mkdir $T/noshard; cp $M/config.json $T/noshard/
$K3 doctor $T/noshard --no-bench --json >$T/j 2>/dev/null
grep -q '"o_direct": null,' $T/j && ok "--json: o_direct null when no shard could test it" ||
  bad "--json: o_direct $(grep o_direct $T/j)"

# usage
$K3 doctor >/dev/null 2>$T/e; [ $? -eq 2 ] && grep -q "missing MODEL_DIR" $T/e &&
  ok "no MODEL_DIR: exit 2" || bad "no MODEL_DIR: $(cat $T/e)"
$K3 doctor $M --bogus >/dev/null 2>$T/e; [ $? -eq 2 ] && grep -q "'--bogus'" $T/e &&
  ok "unknown option: exit 2" || bad "--bogus: $(cat $T/e)"
$K3 doctor --help >$T/o 2>$T/e && grep -q '^Usage: k3 doctor' $T/o && [ ! -s $T/e ] &&
  ok "--help: usage on stdout, exit 0" || bad "--help"
exit $fail
