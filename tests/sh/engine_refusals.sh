#!/bin/sh
# Bad input gets a clear error, a documented exit code, and never a crash:
# configs k3 must refuse (exit 2, naming the key) and corrupt or incomplete
# checkpoints (exit 1, naming the file and tensor). Runs bin/k3 and, in make check,
# the ASan/UBSan binary bin/k3-asan on every case.
set -u
M=tests/models/tiny5
P=$(cat $M/ref/prompt.txt)
. tests/sh/lib/check.sh
# The ASan/UBSan binary too: K3_ASAN, else bin/k3-asan in the slow tier (make check builds
# it first); make test leaves it to make check (its -O1 build costs more than these runs).
BINS=$K3; [ "${K3_TEST_FULL:-}" = 1 ] && : "${K3_ASAN:=bin/k3-asan}"
if [ -n "${K3_ASAN:-}" ]; then
  [ -x "$K3_ASAN" ] || { echo "FAIL: $K3_ASAN not built (make asan)"; exit 1; }
  BINS="$BINS $K3_ASAN"
else echo "SKIP: the same cases under bin/k3-asan: make check runs them"; fi

# A model dir of symlinks to the fixture; the files we corrupt are real copies.
mkmodel() { rm -rf $T/m; mkdir $T/m; for f in $M/*; do ln -s "$(pwd)/$f" $T/m/; done; }
own() { rm -f $T/m/$1; cp $M/$1 $T/m/$1; chmod u+w $T/m/$1; }

expect() {  # expect CODE PATTERN WHAT
  for b in $BINS; do
    ASAN_OPTIONS=detect_leaks=0 $b $T/m --ids "$P" --gen 2 --quiet >$T/o 2>$T/e; rc=$?
    if [ $rc -eq $1 ] && grep -q -- "$2" $T/e \
      && ! grep -q -E "AddressSanitizer|runtime error" $T/e; then
      echo "ok   $(basename $b) exit $1 ($3): $(head -n 1 $T/e | cut -c1-150)"
    else echo "FAIL $(basename $b) $3: expected exit $1 and '$2', got $rc: $(head -c 400 $T/e)";
      fail=1; fi
  done
}

# ---- configs (exit 2, the key named) ----
mkmodel; own config.json; sed -i '/"hidden_act"/d' $T/m/config.json
expect 2 "hidden_act" "missing key"
mkmodel; own config.json; sed -i 's/"hidden_act": "situ"/"hidden_act": "silu"/' $T/m/config.json
expect 2 "hidden_act" "wrong activation"
mkmodel; own config.json
sed -i '/"kda_layers": \[/,/\]/c\      "kda_layers": [0, 1, 2, 4, 5, 6, 8, 9, 10],' $T/m/config.json
expect 2 "kda_layers" "0-based layer list"
mkmodel; own config.json
sed -i '/"kda_layers": \[/,/\]/c\      "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 14],' \
  $T/m/config.json
expect 2 "kda_layers" "layer index out of range"
mkmodel; own config.json; sed -i '/"rms_norm_eps"/d; /"num_experts_per_token"/d' $T/m/config.json
expect 2 "num_experts_per_token" "two missing keys (second named)"
grep -q "rms_norm_eps" $T/e && echo "ok   both missing keys reported at once" \
  || { echo "FAIL only one of two missing keys reported"; fail=1; }
mkmodel; own config.json; printf '{"text_config": {' > $T/m/config.json
expect 2 "config.json" "malformed JSON"

# ---- checkpoints (exit 1, the file named) ----
S=model-00014-of-000016.safetensors          # embed / lm_head / final norms
mkmodel; own $S; truncate -s -1000 $T/m/$S
expect 1 "$S" "truncated shard"
mkmodel; own $S; printf '\377\377\377\377\000\000\000\000' | dd of=$T/m/$S conv=notrunc 2>/dev/null
expect 1 "$S" "header length past EOF"
mkmodel; own $S; sed -i '1s/"data_offsets":\[524288,1048576\]/"data_offsets":[524287,1048575]/' \
  $T/m/$S
expect 1 "$S" "overlapping offsets"
mkmodel; own $S; sed -i '1s/"data_offsets":\[1049600,1050112\]/"data_offsets":[9049600,9050112]/' \
  $T/m/$S
expect 1 "$S" "offsets out of range"
mkmodel; own $S; sed -i '1s/"shape":\[1,256\]/"shape":[1,255]/' $T/m/$S
expect 1 "$S" "shape x dtype != byte range"
mkmodel; own $S; sed -i '1s/"dtype":"BF16","shape":\[256\]/"dtype":"BX16","shape":[256]/' $T/m/$S
expect 1 "BX16" "unknown dtype"
mkmodel; rm $T/m/model-00003-of-000016.safetensors
expect 1 "model-00003-of-000016.safetensors" "missing shard"
mkmodel; own $S; sed -i '1s/language_model.model.norm.weight/language_model.model.norm.wxight/' \
  $T/m/$S
expect 1 "norm" "tensor in the index but not in its shard"
mkmodel; own config.json; sed -i 's/"hidden_size": 256/"hidden_size": 384/' $T/m/config.json
expect 2 "shape" "config dims disagree with the tensors"
mkmodel; own model.safetensors.index.json; own $S
sed -i 's/language_model.model.norm.weight/language_model.model.norm.wxight/' \
  $T/m/model.safetensors.index.json $T/m/$S
expect 2 "language_model.model.norm.weight" "tensor missing from the checkpoint"
S2=model-00002-of-000016.safetensors        # layer 1 (KDA): conv taps stored transposed
F='q_conv1d.weight":{"dtype":"F32","shape":'
mkmodel; own $S2; sed -i "1s/$F\\[128,1,4\\]/$F[4,1,128]/" $T/m/$S2
expect 2 "q_conv1d" "conv taps with a transposed shape"
mkmodel; own model.safetensors.index.json; printf '{"weight_map": {' \
  > $T/m/model.safetensors.index.json
expect 1 "model.safetensors.index.json" "malformed index"
exit $fail
