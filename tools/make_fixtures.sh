#!/bin/sh
# Regenerate the committed tiny K3 checkpoints and their reference outputs.
#   sh tools/make_fixtures.sh            (from the repo root; needs /usr/bin/python3 + numpy)
# Writes tests/models/{tiny5,tiny4,tiny5f}/ (checkpoint) and .../ref/ (reference outputs).
set -eu
PY=${PY:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PROMPT=768,12,345,67,89,101,500,23,400,7,650,3
NGEN=16

make_one() {   # name, then gen_k3.py options
    name=$1; shift
    d=tests/models/$name
    rm -rf "$d"
    $PY tools/gen_k3.py --out "$d" "$@"
    mkdir -p "$d/ref"
    printf '%s\n' "$PROMPT" > "$d/ref/prompt.txt"
    out=$($PY tools/k3_ref.py "$d" --ids "$PROMPT" --gen $NGEN \
          --dump-logits "$d/ref/logits.f32" --out-ids "$d/ref/greedy.txt")
    printf '%s\n' "$out" | sed -n 's/^argmax: //p' > "$d/ref/argmax.txt"
    out32=$($PY tools/k3_ref.py "$d" --f32 --ids "$PROMPT" --gen $NGEN --dump-logits /tmp/k3_fix_$$.f32)
    chk=$($PY -c '
import sys, numpy as np
a = np.fromfile(sys.argv[1], "<f4").astype(np.float64); b = np.fromfile(sys.argv[2], "<f4").astype(np.float64)
V = int(sys.argv[3]); a = a.reshape(-1, V); b = b.reshape(-1, V)
s = np.sort(a, -1)
print("f32-vs-f64 logits rel-L2 %.2e, argmax equal %s, min top-2 logit gap %.3f" % (
      np.linalg.norm(a - b) / np.linalg.norm(a), bool((a.argmax(-1) == b.argmax(-1)).all()), (s[:, -1] - s[:, -2]).min()))
' "$d/ref/logits.f32" /tmp/k3_fix_$$.f32 1024)
    rm -f /tmp/k3_fix_$$.f32
    g64=$(printf '%s\n' "$out" | sed -n 's/^greedy: //p')
    g32=$(printf '%s\n' "$out32" | sed -n 's/^greedy: //p')
    [ "$g64" = "$g32" ] || { echo "make_fixtures: $name: f32 and f64 greedy differ: $g64 / $g32" >&2; exit 1; }
    cat > "$d/ref/meta.txt" <<META
model:      $d
generated:  /usr/bin/python3 tools/gen_k3.py --out $d $*
reference:  /usr/bin/python3 tools/k3_ref.py $d --ids \$(cat $d/ref/prompt.txt) --gen $NGEN --dump-logits $d/ref/logits.f32 --out-ids $d/ref/greedy.txt
            (float64 NumPy reference written from K3_MODEL.md §3; no bf16 activation rounding)
prompt.txt: $(echo "$PROMPT" | tr ',' '\n' | wc -l | tr -d ' ') prompt ids (768 = bos of the 768-rank test tokenizer)
logits.f32: float32 little-endian [n_prompt][vocab=1024], teacher-forced logits of every prompt position
argmax.txt: teacher-forced argmax of every prompt position (lowest id on ties)
greedy.txt: $NGEN greedy ids after the prompt (stops early only on eos_token_id 770), each from a full re-run
check:      $chk; float32 greedy identical
regenerate: sh tools/make_fixtures.sh
META
    echo "$name: $chk"
}

make_one tiny5  --seed 1 --block 5
make_one tiny4  --seed 2 --block 4
make_one tiny5f --seed 3 --block 3 --f32-small --hidden 192 --heads 3 --kda-heads 3 \
         --experts 8 --topk 2 --layers 11 --latent 96 --inter 576
