#!/bin/sh
# Regenerate the committed tiny DSpark draft checkpoints and their reference expectations.
#   sh tools/make_dspark_fixtures.sh      (from anywhere; needs /usr/bin/python3 + numpy)
# Writes tests/models/tiny5_dspark{,_b,_c}/ (config.json + model.safetensors) and the cases under
# .../ref/CASE/, then runs tools/dspark_ref.py --selftest.  Target: tests/models/tiny5 (not touched).
set -eu
PY=${PY:-/usr/bin/python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
T=tests/models/tiny5
A=tests/models/tiny5_dspark
B=tests/models/tiny5_dspark_b
C=tests/models/tiny5_dspark_c

rm -rf "$A" "$B" "$C"
$PY tools/gen_dspark.py --out $A --target $T
$PY tools/gen_dspark.py --out $B --target $T --mscale-all-dim 0.5 --link-weights ../tiny5_dspark/model.safetensors
$PY tools/gen_dspark.py --out $C --target $T --markov-scale 10

case_() {   # draft dir, case name, prompt options
    d=$1; n=$2; shift 2
    $PY tools/dspark_ref.py $d --target $T "$@" --out $d/ref/$n | sed "s/^/$n: /"
}
case_ $A a12  --prompt-file $T/ref/prompt.txt
case_ $A a0   --prompt ''
case_ $A a1   --prompt "$(cut -d, -f1 $T/ref/prompt.txt)"
case_ $A a37  --prompt-rand 37
case_ $A a200 --prompt-rand 200
case_ $B b37  --prompt-rand 37
case_ $C c12  --prompt-file $T/ref/prompt.txt

# the a12 anchor is the target's greedy next token (tests/models/tiny5/ref/greedy.txt)
[ "$(cat $A/ref/a12/anchor.txt)" = "$(cut -d, -f1 $T/ref/greedy.txt)" ] ||
    { echo "make_dspark_fixtures: a12 anchor != first id of $T/ref/greedy.txt" >&2; exit 1; }
# a37's prompt is a200's first 37 ids: the causal target gives the same taps
$PY -c '
import sys, numpy as np
a = np.fromfile(sys.argv[1], "<f4"); b = np.fromfile(sys.argv[2], "<f4")
assert np.array_equal(a, b[:a.size]), "a37 taps != a200 taps[:37]"
' $A/ref/a37/taps.f32 $A/ref/a200/taps.f32

cat > $A/ref/README.md <<'README'
# DSpark draft expectations (issue 36)

Made by `sh tools/make_dspark_fixtures.sh` (tools/gen_dspark.py writes the three draft
checkpoints, tools/dspark_ref.py computes every case, then `tools/dspark_ref.py --selftest`,
whose output is `selftest.txt`). Reference: an independent float64 NumPy implementation of
K3_DSPARK.md §4 in the non-absorbed form (K/V expanded per head, explicit non-causal softmax
over context ∪ block), target taps from tools/k3_ref.py. Target: `tests/models/tiny5`
(13 layers, hidden 256, AttnRes block 5, vocab 1024). The draft uses the TARGET's
`language_model.model.embed_tokens.weight` and `language_model.lm_head.weight`; the draft
file's own `embed_tokens.weight` is the target table x 1.1 (BF16) and must not be read.

## Drafts

| dir | variant |
|---|---|
| `tests/models/tiny5_dspark/` | A: config of K3_DSPARK §8.1 adapted to tiny5 (target_layer_ids [0, 2, 7], mask 1021, bos 768, eos 770, pad 1023, YaRN factor 4, original 64, θ 100, mscale 1, mscale_all_dim 1) |
| `tests/models/tiny5_dspark_b/` | B: A with `rope_parameters.mscale_all_dim` 0.5 (mag 1.0648216254, scale 0.2334024810); `model.safetensors` is a relative symlink to A's |
| `tests/models/tiny5_dspark_c/` | C: A's config, `markov_w1`/`markov_w2` x 10 (the Markov bias dominates the base logits) |

Golden YaRN (A): low 0, high 3, inv_freq [1.0, 0.2371708245, 0.05, 0.0079056942], softmax
scale 0.2646422580, mag 1.0.

## Files of a case (`ref/CASE/`)

Float files: float32 little-endian, raw (no header), row-major, computed in float64 and rounded
once. Int lists: decimal, comma-separated, one line ending in a newline (an empty list is an
empty file). P = number of context positions (0..P-1); the block rows are at P..P+6;
NL = 2 draft layers.

| file | shape | content |
|---|---|---|
| `prompt.txt` | P ids | context tokens at positions 0..P-1 (empty for P=0) |
| `anchor.txt` | 1 id | token at position P: the target reference's greedy next token after the prompt (argmax of its last logits row, lowest id on ties); 768 (bos) for P=0 |
| `taps.f32` | [P][3*256] | target taps of positions 0..P-1, concatenated in target_layer_ids order (0, 2, 7): raw within-block AttnRes prefix right after layer L's MLP |
| `ctx.f32` | [P][256] | c_p = RMS(context_proj . x_p, context_norm) |
| `lat.f32` | [NL][P][32] | per draft layer: RMS(z[0:32], kv_a_layernorm), z = kv_a_proj_with_mqa . c_p |
| `kpe.f32` | [NL][P][8] | per draft layer: Rope(z[32:40], p) (interleaved pairs, times mag) |
| `h_in.f32` | [7][256] | block input: target embedding of [anchor, mask 1021 x 6] |
| `h_l0.f32` | [7][256] | residual stream after draft layer 0 (attention and MLP added) |
| `h_l1.f32` | [7][256] | after draft layer 1 |
| `hf.f32` | [7][256] | RMS(h_l1, final_norm) |
| `base.f32` | [7][1024] | target lm_head . hf |
| `logits.f32` | [7][1024] | base + markov_w2 . markov_w1[prev_r], prev_0 = anchor, prev_r = drafts[r-1] |
| `drafts.txt` | 7 ids | argmax of each logits row (lowest id on ties) |
| `conf.f32` | [7] | sigmoid(w_c . [hf_r ; markov_w1[prev_r]] + b_c) |
| `meta.txt` | text | command, anchor, drafts, min top-2 gaps, Markov effect, conf (informational) |

All numbers of a case derive only from prompt/anchor and the target: an engine can compare
stage by stage, feeding either its own taps or `taps.f32` (computed from float64 taps; the
float32 rounding of the file changes ctx by ~1e-7 relative).

## Cases

| case | draft | P | prompt |
|---|---|---:|---|
| `a12` | A | 12 | tests/models/tiny5/ref/prompt.txt |
| `a0` | A | 0 | none: the block attends to its own 7 rows only |
| `a1` | A | 1 | 768 (the first id of tiny5's prompt) |
| `a37` | A | 37 | deterministic ids < 768 (`dspark_ref.py --prompt-rand 37`: splitmix64 stream, seed 2026, mod 768) |
| `a200` | A | 200 | `--prompt-rand 200` (the first 37 ids = a37's); positions > original_max_position_embeddings 64 |
| `tests/models/tiny5_dspark_b/ref/b37` | B | 37 | as a37 |
| `tests/models/tiny5_dspark_c/ref/c12` | C | 12 | as a12 |

Every case's smallest top-2 gap of the logits rows is >= 0.039 (see each meta.txt), so
drafts can be compared exactly. Suggested tolerances (K3_DSPARK §8.1): hf cosine > 0.99999,
max relative error < 1e-4.
README

$PY tools/dspark_ref.py --selftest > $A/ref/selftest.txt || { cat $A/ref/selftest.txt; exit 1; }
cat $A/ref/selftest.txt
