#!/usr/bin/python3
"""NumPy reference of K3's vision tower, merge and projector, written from K3_VISION.md §4
(not from k3's C code), and the fixtures of tests/c/test_vision.c.

    /usr/bin/python3 tools/vision_ref.py [MODEL_DIR] [OUT_DIR]
        (defaults tests/models/tiny5_vision, MODEL_DIR/ref)

Everything in float64 from the BF16 weights, except where the spec prescribes float32
(the bilinear source indices and weights of §4.2, the RoPE frequencies and angles of §4.3).
Several images go through one packed call with a block-diagonal attention mask (the
reference's cu_seqlens, §4.8), not one at a time.

The test patches: image seed s, element i of the flat [L][3][14][14] array:
  u = (i * 2654435761 + s * 97531 + 12345) mod 2^32; u ^= u >> 15;
  u = u * 2246822519 mod 2^32; u ^= u >> 13;  value = ((u >> 24) - 128) / 128
Fixtures (raw little-endian float32) per case: CASE.STAGE.f32 for STAGE in embed (after
patch embedding + positions), b0, b1 (after each block), final, merged, rows; cases.txt
lists "CASE SEED GH GW [SEED GH GW ...] STAGES".
"""
import json
import math
import os
import sys

import numpy as np

FLT_EPS = 1.1920928955078125e-7


def load(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))["vision_config"]
    ix = json.load(open(os.path.join(model_dir, "model.safetensors.index.json")))
    W = {}
    for shard in sorted(set(ix["weight_map"].values())):
        with open(os.path.join(model_dir, shard), "rb") as f:
            hl = int.from_bytes(f.read(8), "little")
            hdr = json.loads(f.read(hl))
            data = f.read()
        for name, t in hdr.items():
            if not name.startswith(("vision_tower.", "mm_projector.")):
                continue
            assert t["dtype"] == "BF16", name
            a, b = t["data_offsets"]
            u = np.frombuffer(data[a:b], dtype="<u2").astype(np.uint32) << 16
            W[name] = u.view(np.float32).astype(np.float64).reshape(t["shape"])
    return cfg, W


def patches(seed, L):
    i = np.arange(L * 588, dtype=np.uint64)
    u = (i * 2654435761 + seed * 97531 + 12345) & 0xFFFFFFFF
    u ^= u >> 15
    u = (u * 2246822519) & 0xFFFFFFFF
    u ^= u >> 13
    return (((u >> 24).astype(np.int64) - 128) / 128.0).reshape(L, 588)


def rmsnorm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def src_index(n_in, n_out):
    """F.interpolate bilinear, align_corners=False: half-pixel source, clamped at 0, float32."""
    s = np.float32(n_in) / np.float32(n_out)
    o = np.arange(n_out, dtype=np.float32)
    src = s * (o + np.float32(0.5)) - np.float32(0.5)
    src = np.maximum(src, np.float32(0))
    i0 = np.floor(src).astype(np.int64)
    i0 = np.minimum(i0, n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = (src - i0.astype(np.float32)).astype(np.float64)
    return i0, i1, lam


def pos_grid(G, gh, gw):
    """§4.2: the [H][W][D] grid resized to [gh][gw][D]."""
    if G.shape[0] == gh and G.shape[1] == gw:
        return G.copy()
    y0, y1, ly = src_index(G.shape[0], gh)
    x0, x1, lx = src_index(G.shape[1], gw)
    ly = ly[:, None, None]
    lx = lx[None, :, None]
    top = (1 - lx) * G[y0][:, x0] + lx * G[y0][:, x1]
    bot = (1 - lx) * G[y1][:, x0] + lx * G[y1][:, x1]
    return (1 - ly) * top + ly * bot


def rope_angles(gh, gw, hd):
    """§4.3: angle [L][hd/2] per token (row-major over the grid) and pair j."""
    j = np.arange(hd // 2)
    i = j >> 1
    freq = np.float32(1) / np.power(np.float32(10000),
                                    (4 * i).astype(np.float32) / np.float32(hd))
    r, c = np.divmod(np.arange(gh * gw), gw)
    pos = np.where(j[None, :] % 2 == 0, c[:, None], r[:, None]).astype(np.float32)
    return (pos * freq[None, :].astype(np.float32)).astype(np.float32).astype(np.float64)


def rotate(x, ang):
    """x [L][heads][hd]: pairs (2j, 2j+1) turned by ang [L][hd/2]."""
    a, b = x[..., 0::2], x[..., 1::2]
    co, si = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = a * co - b * si
    out[..., 1::2] = a * si + b * co
    return out


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def tower(cfg, W, images):
    """images: list of (pixels [L][588], gh, gw), packed into one call. Returns the stages
    as lists per image: embed, blocks[], final, merged, rows."""
    D, A, H = cfg["vt_hidden_size"], cfg["qkv_hidden_size"], cfg["vt_num_attention_heads"]
    hd = A // H
    Wpe = W["vision_tower.patch_embed.proj.weight"].reshape(D, -1)
    G = W["vision_tower.patch_embed.pos_emb.weight"]
    xs, angs, seg = [], [], []
    for k, (px, gh, gw) in enumerate(images):
        x = px @ Wpe.T + pos_grid(G, gh, gw).reshape(gh * gw, D)
        xs.append(x)
        angs.append(rope_angles(gh, gw, hd))
        seg += [k] * (gh * gw)
    X = np.concatenate(xs)
    ang = np.concatenate(angs)
    seg = np.array(seg)
    mask = seg[:, None] == seg[None, :]                   # block-diagonal (cu_seqlens)
    Ls = [gh * gw for _, gh, gw in images]
    cut = np.cumsum([0] + Ls)
    split = lambda M: [M[cut[k]:cut[k + 1]].copy() for k in range(len(images))]  # noqa: E731
    st = {"embed": split(X), "blocks": []}
    for b in range(cfg["vt_num_hidden_layers"]):
        p = "vision_tower.encoder.blocks.%d." % b
        h = rmsnorm(X, W[p + "norm0.weight"], FLT_EPS)
        qkv = h @ W[p + "wqkv.weight"].T
        q = qkv[:, :A].reshape(-1, H, hd)
        k_ = qkv[:, A:2 * A].reshape(-1, H, hd)
        v = qkv[:, 2 * A:].reshape(-1, H, hd)
        q, k_ = rotate(q, ang), rotate(k_, ang)
        o = np.empty_like(q)
        for hh in range(H):
            s = q[:, hh] @ k_[:, hh].T / math.sqrt(hd)
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            o[:, hh] = (s / s.sum(axis=1, keepdims=True)) @ v[:, hh]
        X = X + o.reshape(-1, A) @ W[p + "wo.weight"].T
        h = rmsnorm(X, W[p + "norm1.weight"], FLT_EPS)
        X = X + gelu_tanh(h @ W[p + "mlp.fc0.weight"].T) @ W[p + "mlp.fc1.weight"].T
        st["blocks"].append(split(X))
    Y = rmsnorm(X, W["vision_tower.encoder.final_layernorm.weight"], FLT_EPS)
    st["final"] = split(Y)
    st["merged"], st["rows"] = [], []
    for k, (_, gh, gw) in enumerate(images):
        y = st["final"][k].reshape(gh // 2, 2, gw // 2, 2, D)          # [a][dy][b][dx][D]
        m = y.transpose(0, 2, 1, 3, 4).reshape(gh // 2 * gw // 2, 4 * D)
        z = gelu_erf(m @ W["mm_projector.proj.0.weight"].T)
        z = z @ W["mm_projector.proj.2.weight"].T
        st["merged"].append(m)
        st["rows"].append(rmsnorm(z, W["mm_projector.post_norm.weight"],
                                  cfg.get("projector_ln_eps", 1e-5)))
    return st


# name, [(seed, gh, gw)...], stages written
CASES = [
    ("g2x2", [(1, 2, 2)], "embed b0 b1 final merged rows"),
    ("g8x8", [(2, 8, 8)], "embed b0 b1 final merged rows"),
    ("g6x10", [(3, 6, 10)], "embed b0 b1 final merged rows"),
    ("g10x6", [(4, 10, 6)], "embed b0 b1 final rows"),
    ("g16x4", [(5, 16, 4)], "embed final rows"),
    ("g18x20", [(6, 18, 20)], "final rows"),
    ("two", [(1, 2, 2), (3, 6, 10)], "rows"),
    ("two_b", [(3, 6, 10), (1, 2, 2)], "rows"),
]


def write_fixtures(model_dir, out):
    cfg, W = load(model_dir)
    os.makedirs(out, exist_ok=True)
    lines = []
    for name, imgs, stages in CASES:
        st = tower(cfg, W, [(patches(s, gh * gw), gh, gw) for s, gh, gw in imgs])
        for stage in stages.split():
            if stage[0] == "b" and stage[1:].isdigit():
                arrs = st["blocks"][int(stage[1:])]
            else:
                arrs = st[stage]
            path = os.path.join(out, "%s.%s.f32" % (name, stage))
            np.concatenate(arrs).astype("<f4").tofile(path)
        lines.append("%s %s %s" % (name, " ".join("%d %d %d" % t for t in imgs), stages))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("vision_ref: %d cases into %s" % (len(CASES), out))


if __name__ == "__main__":
    md = sys.argv[1] if len(sys.argv) > 1 else "tests/models/tiny5_vision"
    write_fixtures(md, sys.argv[2] if len(sys.argv) > 2 else os.path.join(md, "ref"))
