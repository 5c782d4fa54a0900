#!/bin/sh
# k3 doctor --draft DIR (issue 36 item 1): the DSpark draft checked against the model
# (config key by key, tensors by name, dtype and shape, the borrowed embedding and lm_head)
# with its memory on every preset (pinned or streamed, the verify pass's undo log, what a
# block reads from disk); broken copies of the tiny5 draft: a config for another target,
# a renamed tensor and a transposed one (both named, each with its fix), a missing folder:
# exit 1 naming the key or tensor, on stdout and stderr; --json carries the figures.
set -u
M=tests/models/tiny5; D=tests/models/tiny5_dspark
. tests/sh/lib/check.sh
$K3 doctor $M --draft $D --no-bench >$T/o 2>$T/e; rc=$?
[ $rc = 0 ] && grep -q "^k3 doctor: healthy$" $T/o && grep -q "^draft $D" $T/o \
  && grep -q "tensors  *all 32 by name, BF16 and shape; embed_tokens.weight .* never read" $T/o \
  && grep -q "every key checked against $M/config.json" $T/o \
  && ok "doctor --draft: healthy, config and the 32 tensors checked, the embedding borrowed" \
  || bad "doctor --draft: exit $rc: $(cat $T/o $T/e | tail -n 8)"
n=$(grep -c "^                 [a-z]* .* \(pinned\|streamed\) " $T/o)
grep -q "with --draft .*block MB" $T/o && [ "$n" = 5 ] \
  && ok "doctor --draft: the draft on each of the 5 presets (plan, pinned, undo, block bytes)" \
  || bad "doctor --draft: the presets table ($n rows): $(grep -A6 'with --draft' $T/o)"
$K3 doctor $M --draft $D --no-bench --json >$T/j 2>/dev/null
grep -q '"draft_ok": true' $T/j && grep -q '"draft_weights_bytes": [1-9]' $T/j \
  && grep -q '"draft_block_disk_bytes": ' $T/j && ok "doctor --draft --json: the draft's figures" \
  || bad "doctor --draft --json: $(grep draft $T/j)"
# bad NAME PATTERN...: exit 1, every PATTERN on stdout and in a 'k3: doctor:' stderr line
bad_draft() {
  name=$1; shift
  $K3 doctor $M --draft $T/d --no-bench >$T/o 2>$T/e; rc=$?
  [ $rc = 1 ] || { bad "$name: exit $rc, want 1"; return; }
  for p in "$@"; do
    grep -q -- "$p" $T/o && grep -q -- "k3: doctor: --draft .*$p" $T/e \
      || { bad "$name: '$p' not named: $(cat $T/e)"; return; }
  done
  ok "$name: exit 1, names $*"
}
fresh() { rm -rf $T/d; mkdir $T/d; cp $D/config.json $D/model.safetensors $T/d/; }
fresh; sed 's/"hidden_size": 256/"hidden_size": 512/' $D/config.json > $T/d/config.json
bad_draft "another target's hidden_size" "hidden_size: is 512, the target's hidden_size is 256" \
  "use the DSpark made for this checkpoint"
fresh
at=$(grep -boa 'layers.1.mlp.up_proj.weight' $T/d/model.safetensors | head -n 1 | cut -d: -f1)
printf 'X' | dd of=$T/d/model.safetensors bs=1 seek=$((at + 22)) conv=notrunc 2>/dev/null
at=$(grep -boa '"shape":\[256,768\]' $T/d/model.safetensors | head -n 1 | cut -d: -f1)
printf '768,256' | dd of=$T/d/model.safetensors bs=1 seek=$((at + 9)) conv=notrunc 2>/dev/null
bad_draft "a renamed and a transposed tensor" \
  "tensor 'layers.1.mlp.up_proj.weight' is missing" "download model.safetensors again" \
  "tensor 'context_proj.weight' has shape \[768, 256\], expected \[256, 768\]" \
  "download both again from the same revision"
rm -rf $T/d
bad_draft "a missing folder" "$T/d/config.json"
$K3 doctor $M --draft >/dev/null 2>&1; [ $? = 2 ] && ok "doctor --draft without a value: exit 2" \
  || bad "doctor --draft without a value: not exit 2"
exit $fail
