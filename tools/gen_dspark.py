#!/usr/bin/python3
"""Write a synthetic Kimi-K3-DSpark draft checkpoint in the released layout (K3_DSPARK.md §1-§3, §8.1).

Written from the specification only.  One directory = config.json (the 35 keys of §2.1, tiny
sizes) + model.safetensors (single shard, all BF16, `__metadata__` {"torchspec_version":"0.1.0"},
the 8 global + 12 per-layer tensor names of §3.1).  Paired with a tiny K3 target (default
tests/models/tiny5): the draft reads the TARGET's embedding and lm_head (§3.3); the file's own
`embed_tokens.weight` is a deliberately different copy (target rows x 1.1) that an engine must
not read.

    /usr/bin/python3 tools/gen_dspark.py --out DIR [--target tests/models/tiny5] [--seed 1]
        [--mscale-all-dim 1.0] [--markov-scale 1.0] [--link-weights REL]
        [--full-width [--hollow]]

  --mscale-all-dim X   rope_parameters.mscale_all_dim (variant B: 0.5)
  --markov-scale S     multiply markov_w1 and markov_w2 by S before BF16 rounding (variant C: 10)
  --link-weights REL   write only config.json; model.safetensors = symlink to REL (variant B)
  --full-width         the released widths of §2.1/§3.1 (hidden 7168, 5 layers, 64 heads, ...,
                       4.78 GB of weights read) for a full-width target (gen_k3.py --full-width):
                       vocab, bos/eos/pad and the layer count come from the target, the 5 taps
                       are K3's [2, 23, 47, 71, 89] scaled to its layers (floor), mask = vocab - 3.
                       Written tensor by tensor in row chunks (bounded memory); the file's
                       embed_tokens copy (never read, §3.3) is left a sparse hole of zeros.
  --hollow             with --full-width: the matrices and Markov tables are sparse holes of
                       zeros too (only the norms and the confidence head written, ~0.2 MB on
                       disk, seconds): the same shapes and bytes read, finite numerics (the
                       draft proposes what zero hidden states give), for the real-shape
                       memory test (tests/sh/hollow_k3.sh) beside tools/gen_hollow.py.

Weights: per tensor, a splitmix64 stream seeded with splitmix64(seed ^ fnv1a64(name)) gives
u = (z >> 11) * 2^-53 in [0,1), U = 2u - 1 in [-1,1), one draw per element in row-major
order; then
  matrices [out][in]                  U * sqrt(3/in)      (variance 1/in)
  norm weights                        1 + 0.1 * U
  markov_w1 [V][R] (a lookup table)   U * sqrt(3)         (unit variance rows)
  markov_w2 [V][R]                    U * sqrt(3/R) * 3   (bias std ~3 = the target lm_head's
                                      base-logit std, so the Markov term matters in variant A)
  confidence_head.proj.weight [1][H+R] U * sqrt(3/(H+R));  .bias [1]  0.1 * U
  embed_tokens [V][H]                 target embed_tokens (BF16) * 1.1
all rounded float32 -> BF16 round-to-nearest-even.  See tools/README.md.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import bf16_bytes, head, write_bf16  # noqa: E402
from k3_ref import Checkpoint  # noqa: E402

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def splitmix64_scalar(x):
    x = (x + GAMMA) & M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def uniform_pm1(seed, name, n, start=0):
    """n draws of U(-1,1) from draw `start` on: state_i = s0 + (i+1)*gamma, splitmix64 output,
    top 53 bits."""
    s0 = splitmix64_scalar((seed ^ fnv1a64(name)) & M64)
    with np.errstate(over="ignore"):
        i = np.arange(start + 1, start + n + 1, dtype=np.uint64)
        z = np.uint64(s0) + i * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    return 2.0 * u - 1.0


def build_config(a):
    rp = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64,
          "rope_theta": 100.0, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
          "mscale_all_dim": a.mscale_all_dim}
    c = {
        "architectures": ["K3DSparkModel"],
        "model_type": "k3_dspark",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "q_lora_rank": 64,
        "kv_lora_rank": 32,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
        "mla_use_nope": False,
        "mla_use_output_gate": False,
        "vocab_size": 1024,
        "rms_norm_eps": 1e-05,
        "max_position_embeddings": 256,
        "rope_theta": 100.0,
        "num_target_layers": 3,
        "target_hidden_size": 256,
        "target_num_hidden_layers": 13,
        "target_layer_ids": [0, 2, 7],
        "mask_token_id": 1021,
        "bos_token_id": 768,
        "eos_token_id": 770,
        "pad_token_id": 1023,
        "markov_rank": 16,
        "markov_head_type": "vanilla",
        "enable_confidence_head": True,
        "confidence_head_with_markov": True,
        "tie_word_embeddings": False,
        "draft_vocab_size": 1024,
        "_torchspec_version": "0.1.0",
        "torch_dtype": "bfloat16",
        "rope_parameters": rp,
    }
    assert len(c) == 35
    return c


def tensors(c, a, target_embed):
    """[(name, float32 array)] for all tensors of §3.1."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    NH, QL, KL = c["num_attention_heads"], c["q_lora_rank"], c["kv_lora_rank"]
    DN, DR, DV = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    R, T, TH = c["markov_rank"], c["num_target_layers"], c["target_hidden_size"]
    out = []

    def U(name, shape):
        n = int(np.prod(shape))
        return uniform_pm1(a.seed, name, n).reshape(shape)

    def mat(name, shape, gain=1.0):
        out.append((name, U(name, shape) * np.sqrt(3.0 / shape[1]) * gain))

    def norm(name, n):
        out.append((name, 1.0 + 0.1 * U(name, (n,))))

    out.append(("confidence_head.proj.weight",
                U("confidence_head.proj.weight", (1, H + R)) * np.sqrt(3.0 / (H + R))))
    out.append(("confidence_head.proj.bias", 0.1 * U("confidence_head.proj.bias", (1,))))
    mat("context_proj.weight", (H, T * TH))
    norm("context_norm.weight", H)
    out.append(("embed_tokens.weight", target_embed.astype(np.float32) * np.float32(1.1)))
    norm("final_norm.weight", H)
    out.append(("markov_head.markov_w1.weight",
                U("markov_head.markov_w1.weight", (V, R)) * np.sqrt(3.0) * a.markov_scale))
    out.append(("markov_head.markov_w2.weight",
                U("markov_head.markov_w2.weight", (V, R)) * np.sqrt(3.0 / R) * 3.0 * a.markov_scale))
    for L in range(c["num_hidden_layers"]):
        p = "layers.%d." % L
        norm(p + "input_layernorm.weight", H)
        norm(p + "post_attention_layernorm.weight", H)
        mat(p + "self_attn.q_a_proj.weight", (QL, H))
        norm(p + "self_attn.q_a_layernorm.weight", QL)
        mat(p + "self_attn.q_b_proj.weight", (NH * (DN + DR), QL))
        mat(p + "self_attn.kv_a_proj_with_mqa.weight", (KL + DR, H))
        norm(p + "self_attn.kv_a_layernorm.weight", KL)
        mat(p + "self_attn.kv_b_proj.weight", (NH * (DN + DV), KL))
        mat(p + "self_attn.o_proj.weight", (H, NH * DV))
        mat(p + "mlp.gate_proj.weight", (I, H))
        mat(p + "mlp.up_proj.weight", (I, H))
        mat(p + "mlp.down_proj.weight", (H, I))
    return out


META = {"torchspec_version": "0.1.0"}


def write_safetensors(path, ts):
    """Single shard, all BF16; data ordered by name (the writer's dtype-then-name order)."""
    return write_bf16(path, sorted(ts, key=lambda t: t[0]), META)


def build_config_full(a, tcfg):
    """§2.1 at the released values; what must match the target taken from it."""
    c = build_config(a)
    c["rope_parameters"] = {"rope_type": "yarn", "factor": 32.0,
                            "original_max_position_embeddings": 32768, "rope_theta": 50000.0,
                            "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                            "mscale_all_dim": a.mscale_all_dim}
    L, V = tcfg["num_hidden_layers"], tcfg["vocab_size"]
    taps = sorted(set(t * L // 93 for t in (2, 23, 47, 71, 89)))
    if len(taps) < 5:
        sys.exit("gen_dspark: --full-width needs a target of at least 5 layers, got %d" % L)
    c.update({"hidden_size": 7168, "intermediate_size": 14336, "num_hidden_layers": 5,
              "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536,
              "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
              "v_head_dim": 128, "vocab_size": V, "draft_vocab_size": V,
              "max_position_embeddings": 1048576, "rope_theta": 50000.0,
              "num_target_layers": 5, "target_hidden_size": 7168,
              "target_num_hidden_layers": L, "target_layer_ids": taps, "mask_token_id": V - 3,
              "bos_token_id": tcfg.get("bos_token_id", 163584),
              "eos_token_id": tcfg.get("eos_token_id", 163586),
              "pad_token_id": tcfg.get("pad_token_id", 163839), "markov_rank": 256})
    assert len(c) == 35
    return c


def specs(c):
    """[(name, shape, kind)] of §3.1; kind: mat, norm, w1, w2, conf, bias, embed."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    NH, QL, KL = c["num_attention_heads"], c["q_lora_rank"], c["kv_lora_rank"]
    DN, DR, DV = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    R, T, TH = c["markov_rank"], c["num_target_layers"], c["target_hidden_size"]
    out = [("confidence_head.proj.weight", (1, H + R), "conf"),
           ("confidence_head.proj.bias", (1,), "bias"),
           ("context_proj.weight", (H, T * TH), "mat"), ("context_norm.weight", (H,), "norm"),
           ("embed_tokens.weight", (V, H), "embed"), ("final_norm.weight", (H,), "norm"),
           ("markov_head.markov_w1.weight", (V, R), "w1"),
           ("markov_head.markov_w2.weight", (V, R), "w2")]
    for L in range(c["num_hidden_layers"]):
        p = "layers.%d." % L
        out += [(p + "input_layernorm.weight", (H,), "norm"),
                (p + "post_attention_layernorm.weight", (H,), "norm"),
                (p + "self_attn.q_a_proj.weight", (QL, H), "mat"),
                (p + "self_attn.q_a_layernorm.weight", (QL,), "norm"),
                (p + "self_attn.q_b_proj.weight", (NH * (DN + DR), QL), "mat"),
                (p + "self_attn.kv_a_proj_with_mqa.weight", (KL + DR, H), "mat"),
                (p + "self_attn.kv_a_layernorm.weight", (KL,), "norm"),
                (p + "self_attn.kv_b_proj.weight", (NH * (DN + DV), KL), "mat"),
                (p + "self_attn.o_proj.weight", (H, NH * DV), "mat"),
                (p + "mlp.gate_proj.weight", (I, H), "mat"),
                (p + "mlp.up_proj.weight", (I, H), "mat"),
                (p + "mlp.down_proj.weight", (H, I), "mat")]
    return out


def chunk_values(a, name, shape, kind, r0, r1):
    """Rows [r0, r1) of a tensor as float32, the same draws and scales as tensors()."""
    cols = shape[1] if len(shape) == 2 else 1
    u = uniform_pm1(a.seed, name, (r1 - r0) * cols, r0 * cols)
    R = shape[1] if len(shape) == 2 else 1
    if kind == "mat":
        v = u * np.sqrt(3.0 / cols)
    elif kind == "norm":
        v = 1.0 + 0.1 * u
    elif kind == "w1":
        v = u * np.sqrt(3.0) * a.markov_scale
    elif kind == "w2":
        v = u * np.sqrt(3.0 / R) * 3.0 * a.markov_scale
    elif kind == "conf":
        v = u * np.sqrt(3.0 / cols)
    else:
        v = 0.1 * u
    return v.astype(np.float32)


def write_safetensors_stream(path, c, a):
    """The layout of write_safetensors, each tensor generated in row chunks of ~8M values;
    embed_tokens is skipped over (a hole of zeros), and with --hollow every matrix too."""
    ts = sorted(specs(c), key=lambda t: t[0])
    h, offs, total = head([(name, "BF16", shape) for name, shape, _ in ts], META)
    with open(path, "wb") as f:
        f.write(h)
        for name, shape, kind in ts:
            f.seek(len(h) + offs[name][0])
            if kind == "embed" or (a.hollow and kind in ("mat", "w1", "w2")):
                continue
            rows = shape[0]
            cols = shape[1] if len(shape) == 2 else 1
            step = max(1, (8 << 20) // cols)
            for r0 in range(0, rows, step):
                v = chunk_values(a, name, shape, kind, r0, min(rows, r0 + step))
                f.write(bf16_bytes(v))
            print("gen_dspark: %s %s" % (name, list(shape)), file=sys.stderr)
        f.truncate(len(h) + total)
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default="tests/models/tiny5")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mscale-all-dim", type=float, default=1.0)
    ap.add_argument("--markov-scale", type=float, default=1.0)
    ap.add_argument("--link-weights", metavar="REL")
    ap.add_argument("--full-width", action="store_true")
    ap.add_argument("--hollow", action="store_true")
    a = ap.parse_args(argv)
    c = build_config(a)
    if a.hollow and not a.full_width:
        sys.exit("gen_dspark: --hollow is a --full-width option (the tiny drafts are small)")
    if a.full_width:
        if a.link_weights:
            sys.exit("gen_dspark: --full-width writes its own weights: drop --link-weights")
        tcfg = json.load(open(os.path.join(a.target, "config.json")))["text_config"]
        c = build_config_full(a, tcfg)
    os.makedirs(a.out, exist_ok=True)
    st = os.path.join(a.out, "model.safetensors")
    if os.path.lexists(st):
        os.remove(st)
    if a.link_weights:
        if a.markov_scale != 1.0:
            sys.exit("gen_dspark: --link-weights shares the weights; --markov-scale needs its own file")
        os.symlink(a.link_weights, st)
        n = os.path.getsize(st)
    elif a.full_width:
        if tcfg["hidden_size"] != 7168:
            sys.exit("gen_dspark: --full-width needs a full-width target (hidden_size %s != 7168)"
                     % tcfg["hidden_size"])
        n = write_safetensors_stream(st, c, a)
    else:
        tcfg = json.load(open(os.path.join(a.target, "config.json")))["text_config"]
        for k, v in (("hidden_size", c["target_hidden_size"]), ("num_hidden_layers", c["target_num_hidden_layers"]),
                     ("vocab_size", c["vocab_size"])):
            if tcfg[k] != v:
                sys.exit("gen_dspark: target %s %s != %s" % (k, tcfg[k], v))
        dt, emb = Checkpoint(a.target).raw("language_model.model.embed_tokens.weight")
        n = write_safetensors(st, tensors(c, a, emb))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    print("gen_dspark: wrote %s (%d tensor bytes%s)" % (a.out, n, ", weights -> " + a.link_weights if a.link_weights else ""))


if __name__ == "__main__":
    main()
