#!/bin/sh
# Op-level reference intermediates for tests/c/test_ops.c (adds files only; the
# checkpoints and the other ref/ files from tools/make_fixtures.sh are left untouched).
#   sh tools/make_op_fixtures.sh         (from anywhere; needs /usr/bin/python3 + numpy)
# Writes tests/models/{tiny5,tiny4}/ref/ops/: per layer L the attention input/output,
# the FFN input/output, both AttnRes mix outputs, MoE selections; see its manifest.txt.
set -eu
PY=${PY:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
for name in tiny5 tiny4; do
    d=tests/models/$name
    rm -rf "$d/ref/ops"
    $PY tools/k3_ref.py "$d" --ids "$(cat "$d/ref/prompt.txt")" --dump-ops "$d/ref/ops" > /dev/null
    cat > "$d/ref/ops/README.txt" <<META
Intermediates of the float64 reference's prompt forward (ref/prompt.txt), as float32 LE
(.f32) or int32 LE (.i32); manifest.txt lists name, type and shape [T][...].
  embed            e, the embedding rows (B[0])
  Lnn_mix_attn     h, attention-site Mix output (= p = e at layer 0)
  Lnn_attn_in      RMSNorm(h; input_layernorm)       -> KDA / MLA input
  Lnn_attn_out     a, attention sublayer output
  Lnn_mix_mlp      h2, MLP-site Mix output
  Lnn_ffn_in       RMSNorm(h2; post_attention_layernorm) -> dense MLP / MoE input
  Lnn_ffn_out      f, FFN output
  Lnn_moe_ids      selected experts [T][k], ascending; Lnn_moe_w their weights, same order
  final_mix        final Mix output; final_norm = RMSNorm(final_mix; model.norm)
generated: /usr/bin/python3 tools/k3_ref.py $d --ids \$(cat $d/ref/prompt.txt) --dump-ops $d/ref/ops
regenerate: sh tools/make_op_fixtures.sh
META
    echo "$name: $(ls "$d/ref/ops" | wc -l) files, $(du -sk "$d/ref/ops" | cut -f1) KB"
done
