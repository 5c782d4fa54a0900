#!/usr/bin/python3
"""Write a random Kimi K3 checkpoint in the released layout (K3_MODEL.md §1, §2, §4, §5, §6).

Written from the model description only (docs/MODEL.md).  Tensors are produced and written one at a
time in row chunks, so --full-width checkpoints stream to disk shard by shard.

    /usr/bin/python3 tools/gen_k3.py --out DIR [--seed N] [--block 5] ...
    /usr/bin/python3 tools/gen_k3.py --out DIR --full-width --layers 6 --experts 64

See tools/README.md.
"""
import argparse
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from st_write import bf16_bytes, head, nbytes, write_index  # noqa: E402

P = "language_model."            # release prefix of every text tensor
LP = P + "model.layers.%d."      # per-layer prefix

# safetensors (Rust writer) orders the data section by dtype descending, then by name:
# F32 > BF16 > U8.  Hence all U8 expert tensors sit after the non-expert tensors and
# experts appear in string order of their names (0, 1, 10, 11, ..., 2, ...).
DTYPE_RANK = {"F32": 2, "BF16": 1, "U8": 0}


class T:
    """A tensor to write: name, dtype, shape and a generator producing rows."""

    def __init__(self, name, dtype, shape, gen):
        self.name, self.dtype, self.shape, self.gen = name, dtype, list(shape), gen

    def nbytes(self):
        return nbytes(self.dtype, self.shape)


def layout(tensors):
    """The tensors in the data's order, and the file's head (st_write.head's triple)."""
    tensors = sorted(tensors, key=lambda t: (-DTYPE_RANK[t.dtype], t.name))
    return tensors, head([(t.name, t.dtype, t.shape) for t in tensors], {"format": "pt"},
                         sort_names=True)


def write_safetensors(path, tensors, seed):
    tensors, (h, _, total) = layout(tensors)
    with open(path, "wb") as f:
        f.write(h)
        for t in tensors:
            rng = np.random.default_rng([seed, zlib.crc32(t.name.encode())])
            rows = t.shape[0]
            rowsize = 1
            for s in t.shape[1:]:
                rowsize *= s
            chunk = max(1, (1 << 23) // max(1, rowsize))
            done = 0
            written = 0
            while done < rows:
                n = min(chunk, rows - done)
                a = t.gen(rng, done, n, rowsize)
                a = np.asarray(a).reshape(-1)
                assert a.size == n * rowsize, (t.name, a.size, n, rowsize)
                if t.dtype == "BF16":
                    b = bf16_bytes(a)
                elif t.dtype == "F32":
                    b = a.astype("<f4").tobytes()
                else:
                    b = a.astype(np.uint8).tobytes()
                f.write(b)
                written += len(b)
                done += n
            assert written == t.nbytes(), t.name
    return total


# ---- value generators (rng, first_row, n_rows, rowsize) -> float32 or uint8 array ----

def g_mat(gain, fan_in):
    s = gain / np.sqrt(fan_in)
    return lambda rng, r0, n, rs: rng.standard_normal(n * rs, dtype=np.float32) * np.float32(s)


def g_normal(mean, std):
    return lambda rng, r0, n, rs: (np.float32(mean) +
                                   rng.standard_normal(n * rs, dtype=np.float32) * np.float32(std))


def g_unif(lo, hi):
    return lambda rng, r0, n, rs: rng.uniform(lo, hi, n * rs).astype(np.float32)


def g_conv():
    # [C,1,4] taps, non-symmetric: the last tap (current token) is dominant, earlier taps
    # are smaller and of mixed sign, so reversing the taps changes the result.
    def g(rng, r0, n, rs):
        w = rng.standard_normal((n, 4)).astype(np.float32) * np.float32(0.45)
        w[:, 3] = rng.uniform(0.7, 1.4, n)
        w[:, 2] += np.float32(0.25)
        return w
    return g


def g_alog(nheads):
    # one value per head, log of values spread over [1,16], zero padding beyond num_heads
    def g(rng, r0, n, rs):
        a = np.zeros(n * rs, dtype=np.float32)
        # geometric mid-points of [1,16]: distinct, never exactly 0 (so no real head looks
        # like padding); e.g. 4 heads -> 1.41, 2.83, 5.66, 11.3
        vals = np.exp((np.arange(nheads) + 0.5) / nheads * np.log(16.0))
        a[:nheads] = np.log(rng.permutation(vals))
        return a
    return g


def g_u8(lo, hi):
    return lambda rng, r0, n, rs: rng.integers(lo, hi + 1, n * rs, dtype=np.uint8)


# ---------------------------------------------------------------------------------------

def build_config(a):
    N = a.layers
    kda = a.kda_layers
    full = a.mla_layers
    if kda is None and full is None:
        full = sorted(set([n for n in range(1, N + 1) if n % 4 == 0] + ([N - 1, N] if N >= 3 else [N])))
        kda = [n for n in range(1, N + 1) if n not in full]
    elif kda is None:
        kda = [n for n in range(1, N + 1) if n not in full]
    elif full is None:
        full = [n for n in range(1, N + 1) if n not in kda]
    qc = {
        "quant_method": "compressed-tensors",
        "format": "mxfp4-pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "format": "mxfp4-pack-quantized",
                "weights": {
                    "num_bits": 4, "type": "float", "group_size": 32, "strategy": "group",
                    "symmetric": True, "scale_dtype": "torch.uint8", "dynamic": False,
                    "observer": "minmax", "actorder": None, "block_structure": None,
                    "observer_kwargs": {}, "zp_dtype": None,
                },
                "input_activations": None,
                "output_activations": None,
            }
        },
        "kv_cache_scheme": None,
        "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*",
                   "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
                   "re:.*vision_tower.*", "re:.*mm_projector.*"],
    }
    tc = {
        "architectures": ["KimiLinearForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k3.KimiLinearConfig",
            "AutoModel": "modeling_kimi_linear.KimiLinearModel",
            "AutoModelForCausalLM": "modeling_kimi_linear.KimiLinearForCausalLM",
        },
        "model_type": "kimi_linear",
        "activation_situ_beta": 4.0,
        "activation_situ_linear_beta": 25.0,
        "attn_res_block_size": a.block,
        "bos_token_id": a.bos,
        "eos_token_id": a.eos,
        "pad_token_id": a.pad,
        "dtype": "bfloat16",
        "first_k_dense_replace": 1,
        "hidden_act": "situ",
        "hidden_size": a.hidden,
        "initializer_range": 0.02,
        "intermediate_size": a.inter,
        "kv_lora_rank": a.kv_lora,
        "latent_moe_use_norm": True,
        "linear_attn_config": {
            "full_attn_layers": full,
            "gate_lower_bound": -5.0,
            "head_dim": a.kda_head_dim,
            "kda_layers": kda,
            "num_heads": a.kda_heads,
            "short_conv_kernel_size": 4,
            "use_full_rank_gate": True,
        },
        "max_position_embeddings": 4096 if not a.full_width else 1048576,
        "mla_use_nope": True,
        "mla_use_output_gate": True,
        "moe_intermediate_size": a.moe_inter,
        "moe_layer_freq": 1,
        "moe_renormalize": True,
        "moe_router_activation_func": "sigmoid",
        "num_attention_heads": a.heads,
        "num_expert_group": 1,
        "num_experts": a.experts,
        "num_experts_per_token": a.topk,
        "num_hidden_layers": N,
        "num_key_value_heads": a.heads,
        "num_nextn_predict_layers": 0,
        "num_shared_experts": a.shared,
        "q_lora_rank": a.q_lora,
        "qk_nope_head_dim": a.nope,
        "qk_rope_head_dim": a.rope,
        "quantization_config": qc,
        "rms_norm_eps": 1e-05,
        "routed_expert_hidden_size": a.latent,
        "routed_scaling_factor": 1.0,
        "tie_word_embeddings": False,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "use_cache": True,
        "use_grouped_topk": True,
        "v_head_dim": a.vhead,
        "vocab_size": a.vocab,
    }
    cfg = {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k3.KimiK3Config",
            "AutoModel": "modeling_kimi_k3.KimiK3ForConditionalGeneration",
            "AutoModelForCausalLM": "modeling_kimi_k3.KimiK3ForConditionalGeneration",
        },
        "bos_token_id": a.bos,
        "dtype": "bfloat16",
        "eos_token_id": a.eos,
        "ignore_index": -100,
        "image_placeholder": "<|kimi_image_placeholder|>",
        "media_placeholder_token_id": a.media,
        "model_type": "kimi_k3",
        "pad_token_id": a.pad,
        "text_config": tc,
        "tie_word_embeddings": False,
        "transformers_version": "4.56.0",
        "vision_config": {
            "model_type": "kimi_k3_vision",
            "vt_hidden_size": 64,
            "vt_num_hidden_layers": 1,
            "note": "stub: random dummy vision tensors, a text engine must skip them",
        },
    }
    return cfg, kda, full


def layer_tensors(a, L, is_kda):
    H = a.hidden
    f32s = "F32" if (a.f32_small or a.f32_all) else "BF16"   # small 1-D / norm tensors
    mat = "F32" if a.f32_all else "BF16"
    lp = LP % L
    t = []
    # per-layer norms and AttnRes vectors (score std ~ res_gain across random candidates)
    res_std = a.res_gain / np.sqrt(H)
    t += [T(lp + "input_layernorm.weight", f32s, [H], g_unif(0.6, 1.4)),
          T(lp + "post_attention_layernorm.weight", f32s, [H], g_unif(0.6, 1.4)),
          T(lp + "self_attention_res_norm.weight", f32s, [H], g_unif(0.5, 1.5)),
          T(lp + "self_attention_res_proj.weight", f32s, [1, H], g_normal(0.0, res_std)),
          T(lp + "mlp_res_norm.weight", f32s, [H], g_unif(0.5, 1.5)),
          T(lp + "mlp_res_proj.weight", f32s, [1, H], g_normal(0.0, res_std))]
    sa = lp + "self_attn."
    if is_kda:
        nh, hd = a.kda_heads, a.kda_head_dim
        C = nh * hd
        t += [T(sa + "q_proj.weight", mat, [C, H], g_mat(1.0, H)),
              T(sa + "k_proj.weight", mat, [C, H], g_mat(1.0, H)),
              T(sa + "v_proj.weight", mat, [C, H], g_mat(1.0, H)),
              T(sa + "q_conv1d.weight", "F32", [C, 1, 4], g_conv()),
              T(sa + "k_conv1d.weight", "F32", [C, 1, 4], g_conv()),
              T(sa + "v_conv1d.weight", "F32", [C, 1, 4], g_conv()),
              T(sa + "f_a_proj.weight", mat, [hd, H], g_mat(a.kda_gain, H)),
              T(sa + "f_b_proj.weight", mat, [C, hd], g_mat(1.0, hd)),
              T(sa + "dt_bias", "F32", [C], g_normal(a.dt_mean, a.dt_std)),
              T(sa + "A_log", "F32", [hd], g_alog(nh)),
              T(sa + "b_proj.weight", mat, [nh, H], g_mat(1.5, H)),
              T(sa + "g_proj.weight", mat, [C, H], g_mat(1.5, H)),
              T(sa + "o_norm.weight", "F32", [hd], g_unif(0.6, 1.4)),
              T(sa + "o_proj.weight", mat, [H, C], g_mat(1.5, C))]
    else:
        nh = a.heads
        qd = a.nope + a.rope
        t += [T(sa + "q_a_proj.weight", mat, [a.q_lora, H], g_mat(1.0, H)),
              T(sa + "q_a_layernorm.weight", f32s, [a.q_lora], g_unif(0.6, 1.4)),
              T(sa + "q_b_proj.weight", mat, [nh * qd, a.q_lora], g_mat(a.mla_gain, a.q_lora)),
              T(sa + "kv_a_proj_with_mqa.weight", mat, [a.kv_lora + a.rope, H], g_mat(a.mla_gain, H)),
              T(sa + "kv_a_layernorm.weight", f32s, [a.kv_lora], g_unif(0.6, 1.4)),
              T(sa + "kv_b_proj.weight", mat, [nh * (a.nope + a.vhead), a.kv_lora],
                g_mat(a.mla_gain, a.kv_lora)),
              T(sa + "g_proj.weight", mat, [nh * a.vhead, H], g_mat(1.5, H)),
              T(sa + "o_proj.weight", mat, [H, nh * a.vhead], g_mat(1.5, nh * a.vhead))]
    if L == 0:  # dense SiTU MLP (first_k_dense_replace = 1)
        mp = lp + "mlp."
        t += [T(mp + "gate_proj.weight", mat, [a.inter, H], g_mat(a.gate_gain, H)),
              T(mp + "up_proj.weight", mat, [a.inter, H], g_mat(a.up_gain, H)),
              T(mp + "down_proj.weight", mat, [H, a.inter], g_mat(a.down_gain, a.inter))]
    else:
        mp = lp + "block_sparse_moe."
        Sh = a.shared * a.moe_inter
        X = a.latent
        t += [T(mp + "gate.weight", mat, [a.experts, H], g_mat(a.router_gain, H)),
              T(mp + "gate.e_score_correction_bias", "F32", [a.experts], g_normal(0.0, a.bias_std)),
              T(mp + "routed_expert_down_proj.weight", mat, [X, H], g_mat(1.0, H)),
              T(mp + "routed_expert_norm.weight", f32s, [X], g_unif(0.6, 1.4)),
              T(mp + "routed_expert_up_proj.weight", mat, [H, X], g_mat(1.0, X)),
              T(mp + "shared_experts.gate_proj.weight", mat, [Sh, H], g_mat(a.gate_gain, H)),
              T(mp + "shared_experts.up_proj.weight", mat, [Sh, H], g_mat(a.up_gain, H)),
              T(mp + "shared_experts.down_proj.weight", mat, [H, Sh], g_mat(a.down_gain, Sh))]
        I = a.moe_inter
        # E8M0 scales: w1 (gate) ~ 2^-3 so |g| reaches > 8, w3 (up) ~ 2^0 so |u| reaches > 50
        # (for latent input of rms ~1 and fan-in 128); w2 (down) scale is irrelevant after the
        # latent RMSNorm, spread over 120..126.  For wide models shift by log2(sqrt(fan_in/128)).
        sh1 = int(round(np.log2(np.sqrt(X / 128.0))))
        sh2 = int(round(np.log2(np.sqrt(I / 64.0))))
        for e in range(a.experts):
            ep = mp + "experts.%d." % e
            t += [T(ep + "w1.weight_packed", "U8", [I, X // 2], g_u8(0, 255)),
                  T(ep + "w1.weight_scale", "U8", [I, X // 32], g_u8(122 - sh1, 126 - sh1)),
                  T(ep + "w2.weight_packed", "U8", [X, I // 2], g_u8(0, 255)),
                  T(ep + "w2.weight_scale", "U8", [X, I // 32], g_u8(120 - sh2, 126 - sh2)),
                  T(ep + "w3.weight_packed", "U8", [I, X // 2], g_u8(0, 255)),
                  T(ep + "w3.weight_scale", "U8", [I, X // 32], g_u8(125 - sh1, 130 - sh1))]
    return t


def global_tensors(a):
    H, V = a.hidden, a.vocab
    f32s = "F32" if (a.f32_small or a.f32_all) else "BF16"
    mat = "F32" if a.f32_all else "BF16"
    return [T(P + "model.embed_tokens.weight", mat, [V, H], g_normal(0.0, 1.0)),
            T(P + "lm_head.weight", mat, [V, H], g_mat(a.lm_gain, H)),
            T(P + "model.norm.weight", f32s, [H], g_unif(0.6, 1.4)),
            T(P + "model.output_attn_res_norm.weight", f32s, [H], g_unif(0.5, 1.5)),
            T(P + "model.output_attn_res_proj.weight", f32s, [1, H],
              g_normal(0.0, a.res_gain / np.sqrt(H)))]


def vision_tensors(which):
    if which == "mm":
        return [T("mm_projector.pre_norm.weight", "BF16", [64], g_unif(0.5, 1.5)),
                T("mm_projector.proj.0.weight", "BF16", [64, 64], g_mat(1.0, 64)),
                T("mm_projector.proj.2.weight", "BF16", [32, 64], g_mat(1.0, 64))]
    return [T("vision_tower.patch_embed.proj.weight", "BF16", [64, 3, 2, 2], g_mat(1.0, 12)),
            T("vision_tower.encoder.blocks.0.norm0.weight", "BF16", [64], g_unif(0.5, 1.5)),
            T("vision_tower.encoder.blocks.0.wqkv.weight", "BF16", [192, 64], g_mat(1.0, 64)),
            T("vision_tower.encoder.blocks.0.wqkv.bias", "F32", [192], g_normal(0, 0.1)),
            T("vision_tower.encoder.final_layernorm.weight", "BF16", [64], g_unif(0.5, 1.5))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--full-width", action="store_true",
                    help="real K3 widths (hidden 7168, ...); set --layers/--experts")
    d = dict(hidden=256, layers=13, vocab=1024, heads=4, kda_heads=4, kda_head_dim=32, q_lora=96,
             kv_lora=64, nope=32, rope=16, vhead=32, experts=16, topk=4, shared=2, moe_inter=64,
             latent=128, inter=768, block=5, bos=768, eos=770, pad=1023, media=789)
    for k in d:
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=None)
    ap.add_argument("--kda-layers", type=lambda s: [int(x) for x in s.split(",") if x],
                    default=None, help="1-based, comma-separated")
    ap.add_argument("--mla-layers", type=lambda s: [int(x) for x in s.split(",") if x],
                    default=None, help="1-based full_attn_layers, comma-separated")
    ap.add_argument("--f32-small", action="store_true", help="norm / 1-D / res_proj tensors as F32")
    ap.add_argument("--f32-all", action="store_true", help="every non-expert tensor as F32")
    # weight-scale knobs (defaults tuned so every pitfall of K3_MODEL.md §7 shows)
    ap.add_argument("--res-gain", type=float, default=0.7, help="AttnRes score std")
    ap.add_argument("--mla-gain", type=float, default=1.6)
    ap.add_argument("--gate-gain", type=float, default=3.0, help="SiTU gate pre-activation rms")
    ap.add_argument("--up-gain", type=float, default=20.0, help="SiTU up pre-activation rms")
    ap.add_argument("--down-gain", type=float, default=0.04)
    ap.add_argument("--router-gain", type=float, default=1.5)
    ap.add_argument("--bias-std", type=float, default=0.25)
    ap.add_argument("--lm-gain", type=float, default=3.0)
    ap.add_argument("--dt-mean", type=float, default=-1.5, help="KDA dt_bias mean")
    ap.add_argument("--dt-std", type=float, default=1.0)
    ap.add_argument("--kda-gain", type=float, default=1.0, help="KDA f_a/f_b (decay input) gain")
    a = ap.parse_args(argv)
    if a.full_width:
        fw = dict(hidden=7168, kda_heads=96, kda_head_dim=128, heads=96, q_lora=1536, kv_lora=512,
                  nope=128, rope=64, vhead=128, latent=3584, moe_inter=3072, shared=2, inter=33792,
                  vocab=163840, topk=16, block=12, bos=163584, eos=163586, pad=163839, media=163605,
                  layers=6, experts=64)
        d.update(fw)
        if a.topk is None and a.experts is not None:
            d["topk"] = min(16, a.experts)
    for k, v in d.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.topk > a.experts:
        sys.exit("gen_k3: --topk must be <= --experts")
    for k in ("latent", "moe_inter"):
        if getattr(a, k) % 32:
            sys.exit("gen_k3: --%s must be a multiple of 32 (MXFP4 group)" % k.replace("_", "-"))
    if a.kda_heads * a.kda_head_dim != a.heads * a.vhead:
        print("gen_k3: note: KDA width %d != MLA heads x v_head %d (allowed)" %
              (a.kda_heads * a.kda_head_dim, a.heads * a.vhead), file=sys.stderr)

    os.makedirs(a.out, exist_ok=True)
    cfg, kda, full = build_config(a)
    kset = set(kda)
    nsh = a.layers + 3
    name = lambda i: "model-%05d-of-%06d.safetensors" % (i, nsh)
    weight_map = {}
    total = 0
    plan = [(name(L + 1), lambda L=L: layer_tensors(a, L, (L + 1) in kset)) for L in range(a.layers)]
    plan.append((name(a.layers + 1), lambda: global_tensors(a)))
    plan.append((name(a.layers + 2), lambda: vision_tensors("mm")))
    plan.append((name(a.layers + 3), lambda: vision_tensors("vt")))
    for fn, mk in plan:
        ts = mk()
        total += write_safetensors(os.path.join(a.out, fn), ts, a.seed)
        for t in ts:
            weight_map[t.name] = fn
        if a.full_width:
            print("wrote", fn, file=sys.stderr)
    write_index(a.out, cfg, weight_map, total)
    print("gen_k3: wrote %s: %d layers (MLA 1-based %s), %d shards, %d tensor bytes" %
          (a.out, a.layers, full, nsh, total))


if __name__ == "__main__":
    main()
