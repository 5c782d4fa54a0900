#!/usr/bin/python3
"""Write a hollow Kimi K3 checkpoint: the real model's shapes, names, shards and index.

93 layers, 896 experts, vocab 163,840, 96 shards named as released (K3_MODEL.md §5), the
index listing every tensor: about 1.56 TB apparent, as sparse files. Tensors are holes
(zeros, no disk) except the few a run needs so that routing and the next token vary per
token as on a real model: every small vector (norms, biases, conv, A_log, AttnRes), the
routers, the embedding rows of --tokens and of the --heads ids and the lm_head rows of
--heads (each written with its negation under the next id, so the largest logit is a
written row's and the run's ids are --heads ids: a misread row shows). About
1.2 GB on disk. The layouts, names and shapes are tools/gen_k3.py's (--full-width).

    /usr/bin/python3 tools/gen_hollow.py --out DIR [--layers 93] [--experts 896]
        [--tokens 150001,163000] [--heads 160000:64]

For the real-shape test (tests/sh/hollow_k3.sh); see tools/README.md. A full-width DSpark
draft beside it, hollow too: tools/gen_dspark.py --out DRAFT --target DIR --full-width --hollow.
"""
import argparse
import os
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_k3  # noqa: E402  (the released layout, written once)
from st_write import bf16_bytes, write_index  # noqa: E402

SMALL = 1 << 20          # non-expert tensors up to this many bytes are written whole


def args_for(layers, experts):
    """gen_k3's arguments at full width, every knob at its default."""
    ns = gen_k3.argparse.Namespace()
    ap_defaults = dict(seed=1, full_width=True, f32_small=False, f32_all=False, res_gain=0.7,
                       mla_gain=1.6, gate_gain=3.0, up_gain=20.0, down_gain=0.04, router_gain=1.5,
                       bias_std=0.25, lm_gain=3.0, dt_mean=-1.5, dt_std=1.0, kda_gain=1.0,
                       kda_layers=None, mla_layers=None)
    fw = dict(hidden=7168, kda_heads=96, kda_head_dim=128, heads=96, q_lora=1536, kv_lora=512,
              nope=128, rope=64, vhead=128, latent=3584, moe_inter=3072, shared=2, inter=33792,
              vocab=163840, topk=16, block=12, bos=163584, eos=163586, pad=163839,
              media=163605, layers=layers, experts=experts)
    for k, v in list(ap_defaults.items()) + list(fw.items()):
        setattr(ns, k, v)
    return ns


def encode(t, a):
    """The bytes of rows a of tensor t, from gen_k3's generator."""
    rng = np.random.default_rng([1, zlib.crc32(t.name.encode())])
    rowsize = 1
    for s in t.shape[1:]:
        rowsize *= s
    v = np.asarray(t.gen(rng, 0, a, rowsize)).reshape(-1)
    if t.dtype == "BF16":
        return bf16_bytes(v)
    if t.dtype == "F32":
        return v.astype("<f4").tobytes()
    return v.astype(np.uint8).tobytes()


def write_hollow(path, tensors, rows_of):
    """Header as gen_k3 writes it; data only for what rows_of(t) selects, holes elsewhere.
    rows_of(t): None (hole), "all", or a list of (row, bytes) to write."""
    tensors, (h, offs, off) = gen_k3.layout(tensors)
    base = len(h)
    written = 0
    with open(path, "wb") as f:
        f.write(h)
        for t in tensors:
            sel = rows_of(t)
            if sel is None:
                continue
            start = base + offs[t.name][0]
            if sel == "all":
                b = encode(t, t.shape[0])
                f.seek(start)
                f.write(b)
                written += len(b)
                continue
            rb = t.nbytes() // t.shape[0]
            for r, b in sel:
                assert len(b) == rb
                f.seek(start + r * rb)
                f.write(b)
                written += len(b)
        f.truncate(base + off)
    return off, written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=93)
    ap.add_argument("--experts", type=int, default=896)
    ap.add_argument("--tokens", default="150001,163000,2,77",
                    help="ids whose embedding rows are written (comma-separated)")
    ap.add_argument("--heads", default="160000:64",
                    help="FIRST:N: lm_head rows FIRST.. written in pairs (row, -row)")
    o = ap.parse_args(argv)
    a = args_for(o.layers, o.experts)
    H, V = a.hidden, a.vocab
    toks = [int(x) for x in o.tokens.split(",") if x]
    h0, hn = (int(x) for x in o.heads.split(":"))
    if any(not 0 <= t < V for t in toks) or h0 < 0 or h0 + 2 * hn > V:
        sys.exit("gen_hollow: --tokens / --heads outside the vocabulary of %d" % V)
    rng = np.random.default_rng(7)

    def bf16(v):
        return bf16_bytes(v.astype(np.float32))

    head = []
    for i in range(hn):
        r = rng.normal(0.0, 3.0 / np.sqrt(H), H)
        head += [(h0 + 2 * i, bf16(r)), (h0 + 2 * i + 1, bf16(-r))]
    # the generated ids are lm_head rows: their embedding rows too, so the next step varies
    used = sorted(set(toks) | set(range(h0, h0 + 2 * hn)))
    emb = [(t, bf16(rng.normal(0.0, 1.0, H))) for t in used]

    def rows_of(t):
        if t.name.endswith("embed_tokens.weight"):
            return emb
        if t.name.endswith("lm_head.weight"):
            return head
        if t.dtype == "U8":
            return None                             # experts: holes
        if t.name.endswith("block_sparse_moe.gate.weight") or t.nbytes() <= SMALL:
            return "all"                            # routers and the small vectors
        return None

    os.makedirs(o.out, exist_ok=True)
    cfg, kda, full = gen_k3.build_config(a)
    kset = set(kda)
    nsh = a.layers + 3
    name = lambda i: "model-%05d-of-%06d.safetensors" % (i, nsh)
    plan = [(name(L + 1), lambda L=L: gen_k3.layer_tensors(a, L, (L + 1) in kset))
            for L in range(a.layers)]
    plan.append((name(a.layers + 1), lambda: gen_k3.global_tensors(a)))
    plan.append((name(a.layers + 2), lambda: gen_k3.vision_tensors("mm")))
    plan.append((name(a.layers + 3), lambda: gen_k3.vision_tensors("vt")))
    weight_map, total, disk, ntensors = {}, 0, 0, 0
    for i, (fn, mk) in enumerate(plan):
        ts = mk()
        n, w = write_hollow(os.path.join(o.out, fn), ts, rows_of)
        total += n
        disk += w
        ntensors += len(ts)
        for t in ts:
            weight_map[t.name] = fn
        if (i + 1) % 8 == 0 or i + 1 == len(plan):
            print("gen_hollow: %d of %d shards, %.1f GB apparent, %.2f GB written" %
                  (i + 1, len(plan), total / 1e9, disk / 1e9), file=sys.stderr)
    write_index(o.out, cfg, weight_map, total)
    print("gen_hollow: wrote %s: %d layers, %d shards, %d tensors, %d tensor bytes apparent, "
          "%d written" % (o.out, a.layers, nsh, ntensors, total, disk))


if __name__ == "__main__":
    main()
