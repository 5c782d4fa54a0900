#!/usr/bin/python3
"""Write a tiny synthetic K3 vision tower (K3_VISION.md §8) beside the tiny text model.

The output folder (default tests/models/tiny5_vision) is tiny5 with a real vision tower:
  config.json                      tiny5's, with vision_config replaced by the §8 tiny values
  model.safetensors.index.json     tiny5's, its stub vision entries replaced by the 27-style
                                   names of §3 (2 blocks here)
  model-00001..14-of-000016        symlinks to ../tiny5 (the text model, unchanged)
  model-00015-of-000016            mm_projector.* (3 tensors, as the release's shard 95)
  model-00016-of-000016            vision_tower.* (15 tensors, as the release's shard 96)
Then tools/vision_ref.py writes the expected values under ref/.

    /usr/bin/python3 tools/gen_vision.py [--out DIR] [--text tests/models/tiny5] [--seed 7]

Tiny config: patch 14, hidden 64, qkv 96 (3 heads of 32: wo is not square), MLP 128,
2 blocks, position grid 8 x 8, projector 256 -> 256 -> 256 (the text hidden of tiny5).
Weights: numpy default_rng(seed), per tensor in the order written; every tensor random
(norms too: all-ones norms hide swaps), rounded float32 -> BF16 (nearest even):
  matrices [out][in...]   normal * 1/sqrt(fan_in); wqkv * 2 (peakier softmax)
  norm weights            0.5 + uniform[0, 1)
  pos_emb [8][8][64]      normal * 0.5
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import write_bf16, write_index  # noqa: E402

CFG = {
    "model_type": "kimi_k3_vision",
    "patch_size": 14, "vt_hidden_size": 64, "mm_hidden_size": 64, "qkv_hidden_size": 96,
    "vt_num_attention_heads": 3, "vt_intermediate_size": 128, "vt_num_hidden_layers": 2,
    "norm_type": "rmsnorm", "attn_bias": False, "linear_bias": False,
    "patch_embed_proj_bias": False, "activation_func": "gelu_pytorch_tanh",
    "projector_hidden_act": "gelu", "init_pos_emb_height": 8, "init_pos_emb_width": 8,
    "init_pos_emb_time": 4, "pos_emb_type": "divided_fixed",
    "pos_emb_interpolation_mode": "bilinear", "merge_kernel_size": [2, 2],
    "merge_type": "sd2_tpool", "mm_projector_type": "patchmergerv2", "projector_ln_eps": 1e-5,
    "text_hidden_size": 256,
}


def tensors(seed):
    c = CFG
    D, A, F, p = c["vt_hidden_size"], c["qkv_hidden_size"], c["vt_intermediate_size"], 14
    out = c["text_hidden_size"]
    rng = np.random.default_rng(seed)

    def mat(*shape, gain=1.0):
        fan = int(np.prod(shape[1:]))
        return rng.standard_normal(shape).astype(np.float32) * np.float32(gain / np.sqrt(fan))

    def vec(n):
        return (0.5 + rng.random(n)).astype(np.float32)

    vt = [("vision_tower.patch_embed.proj.weight", mat(D, 3, p, p)),
          ("vision_tower.patch_embed.pos_emb.weight",
           (rng.standard_normal((8, 8, D)) * 0.5).astype(np.float32))]
    for b in range(c["vt_num_hidden_layers"]):
        n = "vision_tower.encoder.blocks.%d." % b
        vt += [(n + "norm0.weight", vec(D)), (n + "norm1.weight", vec(D)),
               (n + "wqkv.weight", mat(3 * A, D, gain=2.0)), (n + "wo.weight", mat(D, A)),
               (n + "mlp.fc0.weight", mat(F, D)), (n + "mlp.fc1.weight", mat(D, F))]
    vt.append(("vision_tower.encoder.final_layernorm.weight", vec(D)))
    mm = [("mm_projector.proj.0.weight", mat(4 * D, 4 * D)),
          ("mm_projector.proj.2.weight", mat(out, 4 * D)),
          ("mm_projector.post_norm.weight", vec(out))]
    return vt, mm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/models/tiny5_vision")
    ap.add_argument("--text", default="tests/models/tiny5")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cfg = json.load(open(os.path.join(a.text, "config.json")))
    cfg["vision_config"] = CFG
    ix = json.load(open(os.path.join(a.text, "model.safetensors.index.json")))
    wm = {k: v for k, v in ix["weight_map"].items()
          if not k.startswith(("vision_tower.", "mm_projector."))}
    shards = sorted(set(wm.values()))
    rel = os.path.relpath(a.text, a.out)
    for s in shards:
        dst = os.path.join(a.out, s)
        if os.path.lexists(dst):
            os.remove(dst)
        os.symlink(os.path.join(rel, s), dst)
    vt, mm = tensors(a.seed)
    s15, s16 = "model-00015-of-000016.safetensors", "model-00016-of-000016.safetensors"
    assert s15 not in shards and s16 not in shards, "the text model uses shards 15/16"
    n15 = write_bf16(os.path.join(a.out, s15), mm)
    n16 = write_bf16(os.path.join(a.out, s16), vt)
    total = 0
    for s in shards:
        with open(os.path.join(a.text, s), "rb") as f:
            hl = int.from_bytes(f.read(8), "little")
            h = json.loads(f.read(hl))
            total += sum(v["data_offsets"][1] - v["data_offsets"][0]
                         for k, v in h.items() if k in wm)
    for n, _ in mm:
        wm[n] = s15
    for n, _ in vt:
        wm[n] = s16
    write_index(a.out, cfg, wm, total + n15 + n16)
    print("gen_vision: %s: %d vision tensors, %d projector tensors (%d + %d bytes)"
          % (a.out, len(vt), len(mm), n16, n15))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import vision_ref
    vision_ref.write_fixtures(a.out, os.path.join(a.out, "ref"))


if __name__ == "__main__":
    main()
