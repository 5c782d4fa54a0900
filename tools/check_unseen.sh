#!/bin/sh
# Acceptance drill: generate checkpoints k3 has never seen (other dims, seeds, block
# sizes, F32 tensors), then compare bin/k3 with the NumPy reference: greedy ids
# (incremental and --recompute), teacher-forced argmax at every position, logits
# rel-L2. Needs /usr/bin/python3 with numpy. Usage: tools/check_unseen.sh [OUTDIR]
set -eu
OUT=${1:-/tmp/k3-unseen}
PY=/usr/bin/python3
K3=${K3:-./bin/k3}
mkdir -p "$OUT"
i=0
while read -r args; do
  i=$((i+1)); d="$OUT/m$i"; rm -rf "$d"
  $PY tools/gen_k3.py --out "$d" $args >/dev/null
  ids="768,3,500,77,12,901,45,6,300,2,88"
  $PY tools/k3_ref.py "$d" --ids "$ids" --gen 10 --dump-logits "$d/ref.f32" > "$d/ref.txt"
  want_arg=$(sed -n 's/^argmax: //p' "$d/ref.txt"); want_gen=$(sed -n 's/^greedy: //p' "$d/ref.txt")
  inc=$($K3 "$d" --ids "$ids" --gen 10 --dump-logits "$d/k3.f32" --quiet)
  rec=$($K3 "$d" --ids "$ids" --gen 10 --recompute --quiet)
  res=$($PY - "$d" <<'PYEOF'
import sys, numpy as np, json
d = sys.argv[1]
V = json.load(open(d + "/config.json"))["text_config"]["vocab_size"]
a = np.fromfile(d + "/ref.f32", np.float32).reshape(-1, V).astype(np.float64)
b = np.fromfile(d + "/k3.f32", np.float32).reshape(-1, V).astype(np.float64)
print("%.3g %s" % (np.linalg.norm(a - b) / np.linalg.norm(a), ",".join(str(int(x)) for x in b.argmax(1))))
PYEOF
)
  rel=${res% *}; arg=${res#* }
  st=ok
  [ "$inc" = "$want_gen" ] && [ "$rec" = "$want_gen" ] && [ "$arg" = "$want_arg" ] || st=MISMATCH
  awk "BEGIN{exit !($rel < 1e-4)}" || st=MISMATCH
  echo "$st m$i [$args] logits rel-L2 $rel; greedy $inc"
done <<'EOF2'
--seed 11 --block 3 --hidden 192 --heads 3 --kda-heads 6 --kda-head-dim 32 --experts 8 --topk 2 --layers 9
--seed 12 --block 7 --f32-all --hidden 320 --heads 5 --kda-heads 5 --experts 32 --topk 8 --layers 10 --latent 160 --moe-inter 96
--seed 13 --block 2 --f32-small --hidden 128 --heads 2 --kda-heads 4 --kda-head-dim 16 --q-lora 48 --kv-lora 32 --nope 16 --rope 8 --vhead 32 --experts 16 --topk 3 --layers 7 --latent 64 --moe-inter 32 --inter 256
--seed 14 --block 4 --hidden 256 --layers 13 --experts 12 --topk 5 --shared 1
--seed 15 --block 6 --hidden 256 --layers 8 --kda-layers 1,2,4,5,7 --mla-layers 3,6,8
EOF2
