#!/usr/bin/python3
"""Independent NumPy reference for Kimi K3 (K3_MODEL.md §3), written from the spec only.

Loads a checkpoint directory from disk the way an engine does (config.json text_config,
model.safetensors.index.json, safetensors headers, BF16/F32/U8 decoding, MXFP4 dequant
per §4) and runs the whole forward pass in the naive, obviously-correct form: full causal
MLA attention with expanded K/V, the KDA recurrence token by token, AttnRes Mix with block
snapshots, sigmoid router with bias-only selection, latent MoE, SiTU, final Mix -> norm ->
lm_head.  float64 by default (--f32 for float32).  No bf16 activation rounding.

    /usr/bin/python3 tools/k3_ref.py MODEL_DIR --ids 768,5,6 [--gen N] [--f32]
        [--dump-logits FILE] [--out-ids FILE] [--dump-ops DIR]

Prints the teacher-forced argmax of every prompt position, then the greedy continuation
(argmax, lowest id on ties; stops after N tokens or on eos_token_id), each new token
computed by re-running the full sequence.  --dump-logits writes float32 LE
[n_prompt][vocab].  --out-ids writes the greedy ids, comma-separated.  --dump-ops DIR
writes the prompt forward's per-layer intermediates (float32/int32 LE, see op()) and
DIR/manifest.txt (name dtype shape), for the op-level tests (tests/c/test_ops.c).

Every step is a small method so tools/ref_pitfalls.py can override one step at a time.
"""
import argparse
import json
import os
import sys

import numpy as np

PFX = "language_model."
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


class Checkpoint:
    """safetensors shards through model.safetensors.index.json; tensors read on demand."""

    def __init__(self, d):
        self.dir = d
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            self.index = json.load(f)
        self.wmap = self.index["weight_map"]
        self.headers = {}

    def header(self, fn):
        if fn not in self.headers:
            with open(os.path.join(self.dir, fn), "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                h = json.loads(f.read(n))
            h.pop("__metadata__", None)
            self.headers[fn] = (8 + n, h)
        return self.headers[fn]

    def info(self, name):
        if name not in self.wmap:
            raise KeyError("tensor %s not in %s/model.safetensors.index.json" % (name, self.dir))
        fn = self.wmap[name]
        base, h = self.header(fn)
        if name not in h:
            raise KeyError("tensor %s not in header of %s" % (name, fn))
        return fn, base, h[name]

    def raw(self, name):
        fn, base, e = self.info(name)
        o0, o1 = e["data_offsets"]
        with open(os.path.join(self.dir, fn), "rb") as f:
            f.seek(base + o0)
            b = f.read(o1 - o0)
        shape = tuple(e["shape"])
        dt = e["dtype"]
        if dt == "BF16":
            u = np.frombuffer(b, dtype="<u2").astype(np.uint32) << np.uint32(16)
            a = u.view(np.float32)
        elif dt == "F32":
            a = np.frombuffer(b, dtype="<f4")
        elif dt == "U8":
            a = np.frombuffer(b, dtype=np.uint8)
        else:
            raise ValueError("%s: unsupported dtype %s" % (name, dt))
        return dt, a.reshape(shape)


class K3Ref:
    def __init__(self, d, dtype=np.float64):
        self.dt = dtype
        with open(os.path.join(d, "config.json")) as f:
            top = json.load(f)
        self.top = top
        c = top["text_config"]
        self.c = c
        la = c["linear_attn_config"]
        self.H = c["hidden_size"]
        self.N = c["num_hidden_layers"]
        self.V = c["vocab_size"]
        self.eps = c["rms_norm_eps"]
        self.kda_layers = list(la["kda_layers"])
        self.full_layers = list(la["full_attn_layers"])
        if sorted(self.kda_layers + self.full_layers) != list(range(1, self.N + 1)):
            raise ValueError("kda_layers + full_attn_layers must partition 1..num_hidden_layers")
        self.kh, self.kd = la["num_heads"], la["head_dim"]
        self.kconv = la["short_conv_kernel_size"]
        self.lb = la["gate_lower_bound"]
        assert la["use_full_rank_gate"] is True
        self.nh = c["num_attention_heads"]
        assert c["num_key_value_heads"] == self.nh and c["mla_use_nope"] and c["mla_use_output_gate"]
        self.nope, self.rope, self.vd = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.kvl = c["kv_lora_rank"]
        self.ne, self.topk = c["num_experts"], c["num_experts_per_token"]
        self.rsf = c["routed_scaling_factor"]
        assert c["num_expert_group"] == 1 and c["topk_group"] == 1
        assert c["moe_router_activation_func"] == "sigmoid" and c["moe_renormalize"]
        assert c["hidden_act"] == "situ" and c["latent_moe_use_norm"]
        assert not c.get("tie_word_embeddings", False) and c["num_nextn_predict_layers"] == 0
        self.b1, self.b2 = c["activation_situ_beta"], c["activation_situ_linear_beta"]
        self.block = c["attn_res_block_size"]
        self.fkd, self.freq = c["first_k_dense_replace"], c["moe_layer_freq"]
        self.eos = c.get("eos_token_id", top.get("eos_token_id"))
        self.ck = Checkpoint(d)
        self.cache = {}
        self.ops = None         # --dump-ops: list of (name, array) while recording
        self.tap_layers = ()    # tools/dspark_ref.py: 0-based layers whose raw prefix p is kept
        self.taps = {}          # L -> p right after layer L's MLP output is added (K3_DSPARK §4.1)

    def op(self, name, a):
        """--dump-ops hook: record an intermediate (no effect unless self.ops is a list)."""
        if self.ops is not None:
            self.ops.append((name, np.array(a)))

    # ---- loading -------------------------------------------------------------------
    def w(self, name):
        name = PFX + name
        if name not in self.cache:
            dt, a = self.ck.raw(name)
            if dt == "U8":
                raise ValueError("%s is U8; only expert weight_packed/scale may be U8" % name)
            self.cache[name] = a.astype(self.dt)
        return self.cache[name]

    def lw(self, L, s):
        return self.w("model.layers.%d.%s" % (L, s))

    def vec(self, L, s):
        return self.lw(L, s).reshape(-1)

    def dequant(self, packed, scale):
        """MXFP4: low nibble = even element, E2M1 table, value * 2^(s-127), groups of 32."""
        lo = packed & 0x0F
        hi = packed >> 4
        codes = np.stack([lo, hi], axis=-1).reshape(packed.shape[0], -1)
        vals = E2M1[codes]
        sc = np.ldexp(1.0, scale.astype(np.int64) - 127)
        return (vals * np.repeat(sc, 32, axis=1)).astype(self.dt)

    def expert(self, L, e, which):
        key = ("exp", L, e, which)
        if key not in self.cache:
            p = PFX + "model.layers.%d.block_sparse_moe.experts.%d.%s." % (L, e, which)
            dp, packed = self.ck.raw(p + "weight_packed")
            ds, scale = self.ck.raw(p + "weight_scale")
            assert dp == "U8" and ds == "U8"
            if np.any(scale == 255):
                raise ValueError(p + "weight_scale has the E8M0 NaN code 255")
            self.cache[key] = self.dequant(packed, scale)
        return self.cache[key]

    # ---- primitives ------------------------------------------------------------------
    def rmsnorm(self, x, w, eps):
        return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))

    def sigmoid(self, x):
        e = np.exp(-np.abs(x))                    # overflow-free logistic
        return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))

    def silu(self, x):
        return x * self.sigmoid(x)

    def situ(self, g, u):
        return (self.b1 * np.tanh(g / self.b1) * self.sigmoid(g)) * (self.b2 * np.tanh(u / self.b2))

    def glu(self, x, wg, wu, wd):
        return self.situ(x @ wg.T, x @ wu.T) @ wd.T

    # ---- AttnRes -----------------------------------------------------------------
    def mix(self, p, B, wn, wp):
        cand = np.stack(list(B) + [p])                          # [n+1, T, H]
        r = np.sqrt(np.mean(cand * cand, axis=-1, keepdims=True) + self.eps)
        s = np.sum((cand / r) * (wn * wp), axis=-1)             # [n+1, T]
        s = s - s.max(axis=0, keepdims=True)
        a = np.exp(s)
        a = a / a.sum(axis=0, keepdims=True)
        return np.sum(a[:, :, None] * cand, axis=0)

    # ---- layer types ---------------------------------------------------------------
    def is_kda(self, L):
        return (L + 1) in self.kda_layers

    def short_conv(self, u, w):
        """u [T,C], w [C,1,K] -> silu(causal depthwise conv); last tap = current token."""
        T, C = u.shape
        K = w.shape[-1]
        w = w.reshape(C, K)
        up = np.concatenate([np.zeros((K - 1, C), dtype=u.dtype), u], axis=0)
        y = np.zeros_like(u)
        for j in range(K):
            y = y + w[:, j] * up[j:j + T]
        return self.silu(y)

    def kda_gate(self, L, z):
        """z [T,h,d] -> g = lb * sigmoid(exp(A_log[h]) * (z + dt_bias))."""
        A = self.vec(L, "self_attn.A_log")[:self.kh]
        dtb = self.vec(L, "self_attn.dt_bias").reshape(self.kh, self.kd)
        return self.lb * self.sigmoid(np.exp(A)[None, :, None] * (z + dtb))

    def l2n(self, x):
        return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + 1e-6)

    def kda_recur(self, q, k, v, g, beta):
        """q,k,v,g [T,h,D]; beta [T,h]; returns o [T,h,D]."""
        T, h, D = q.shape
        S = np.zeros((h, D, D), dtype=self.dt)                 # [head][k-dim][v-dim]
        o = np.zeros_like(v)
        for t in range(T):
            S = np.exp(g[t])[:, :, None] * S                     # decay first
            u = np.einsum("hkv,hk->hv", S, k[t])                 # read decayed state
            S = S + np.einsum("hk,hv->hkv", k[t], beta[t][:, None] * (v[t] - u))
            o[t] = np.einsum("hkv,hk->hv", S, q[t])              # output from updated state
        return o

    def kda(self, L, x):
        T = x.shape[0]
        h, D = self.kh, self.kd
        sa = "self_attn."
        q = self.short_conv(x @ self.lw(L, sa + "q_proj.weight").T, self.lw(L, sa + "q_conv1d.weight"))
        k = self.short_conv(x @ self.lw(L, sa + "k_proj.weight").T, self.lw(L, sa + "k_conv1d.weight"))
        v = self.short_conv(x @ self.lw(L, sa + "v_proj.weight").T, self.lw(L, sa + "v_conv1d.weight"))
        z = (x @ self.lw(L, sa + "f_a_proj.weight").T) @ self.lw(L, sa + "f_b_proj.weight").T
        g = self.kda_gate(L, z.reshape(T, h, D))
        beta = self.sigmoid(x @ self.lw(L, sa + "b_proj.weight").T)
        q = self.l2n(q.reshape(T, h, D)) * (D ** -0.5)
        k = self.l2n(k.reshape(T, h, D))
        o = self.kda_recur(q, k, v.reshape(T, h, D), g, beta)
        G = (x @ self.lw(L, sa + "g_proj.weight").T).reshape(T, h, D)
        o = self.rmsnorm(o, self.vec(L, sa + "o_norm.weight"), self.eps) * self.sigmoid(G)
        return o.reshape(T, h * D) @ self.lw(L, sa + "o_proj.weight").T

    def mla_scores(self, qn, qpe, kn, kpe):
        """qn [T,h,n], qpe [T,h,r], kn [S,h,n], kpe [S,r] -> [h,T,S]."""
        s = np.einsum("thd,shd->hts", qn, kn) + np.einsum("thd,sd->hts", qpe, kpe)
        return s / np.sqrt(self.nope + self.rope)

    def mla(self, L, x):
        T = x.shape[0]
        h, n, r, vd = self.nh, self.nope, self.rope, self.vd
        sa = "self_attn."
        cq = self.rmsnorm(x @ self.lw(L, sa + "q_a_proj.weight").T, self.vec(L, sa + "q_a_layernorm.weight"), 1e-6)
        q = (cq @ self.lw(L, sa + "q_b_proj.weight").T).reshape(T, h, n + r)
        a = x @ self.lw(L, sa + "kv_a_proj_with_mqa.weight").T
        c, kpe = a[:, :self.kvl], a[:, self.kvl:]
        c = self.rmsnorm(c, self.vec(L, sa + "kv_a_layernorm.weight"), 1e-6)
        kv = (c @ self.lw(L, sa + "kv_b_proj.weight").T).reshape(T, h, n + vd)
        kn, v = kv[:, :, :n], kv[:, :, n:]
        s = self.mla_scores(q[:, :, :n], q[:, :, n:], kn, kpe)
        mask = np.triu(np.ones((T, T), dtype=bool), 1)
        s = np.where(mask[None], -np.inf, s)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p = p / p.sum(axis=-1, keepdims=True)
        o = np.einsum("hts,shd->thd", p, v).reshape(T, h * vd)
        o = o * self.sigmoid(x @ self.lw(L, sa + "g_proj.weight").T)
        return o @ self.lw(L, sa + "o_proj.weight").T

    # ---- FFN -------------------------------------------------------------------------
    def dense(self, L, x):
        m = "mlp."
        return self.glu(x, self.lw(L, m + "gate_proj.weight"), self.lw(L, m + "up_proj.weight"),
                        self.lw(L, m + "down_proj.weight"))

    def route(self, L, x):
        """returns (idx [T,k], weights [T,k])."""
        m = "block_sparse_moe."
        s = self.sigmoid(x @ self.lw(L, m + "gate.weight").T)
        choice = s + self.vec(L, m + "gate.e_score_correction_bias")
        idx = np.argsort(-choice, axis=-1, kind="stable")[:, :self.topk]
        w = self.router_weights(s, choice, idx)
        o = np.argsort(idx, axis=-1, kind="stable")           # dump ids ascending, weights alike
        self.op("L%02d_moe_ids" % L, np.take_along_axis(idx, o, axis=-1))
        self.op("L%02d_moe_w" % L, np.take_along_axis(w, o, axis=-1))
        return idx, w

    def router_weights(self, s, choice, idx):
        w = np.take_along_axis(s, idx, axis=-1)
        w = w / (w.sum(axis=-1, keepdims=True) + 1e-20)
        return w * self.rsf

    def expert_ffn(self, L, e, xl):
        w1, w2, w3 = (self.expert(L, e, n) for n in ("w1", "w2", "w3"))
        return self.situ(xl @ w1.T, xl @ w3.T) @ w2.T

    def latent_combine(self, L, ys, w):
        """ys [k, X] expert outputs, w [k] -> normed aggregate [X]."""
        r = np.sum(w[:, None] * ys, axis=0)
        return self.rmsnorm(r, self.vec(L, "block_sparse_moe.routed_expert_norm.weight"), self.eps)

    def moe(self, L, x):
        m = "block_sparse_moe."
        idx, wts = self.route(L, x)
        xl = x @ self.lw(L, m + "routed_expert_down_proj.weight").T
        T = x.shape[0]
        r = np.zeros((T, xl.shape[1]), dtype=self.dt)
        for t in range(T):
            ys = np.stack([self.expert_ffn(L, int(e), xl[t]) for e in idx[t]])
            r[t] = self.latent_combine(L, ys, wts[t])
        R = r @ self.lw(L, m + "routed_expert_up_proj.weight").T
        Sh = self.glu(x, self.lw(L, m + "shared_experts.gate_proj.weight"),
                      self.lw(L, m + "shared_experts.up_proj.weight"),
                      self.lw(L, m + "shared_experts.down_proj.weight"))
        return R + Sh

    def ffn(self, L, x):
        if L >= self.fkd and L % self.freq == 0:
            return self.moe(L, x)
        return self.dense(L, x)

    def attn(self, L, x):
        return self.kda(L, x) if self.is_kda(L) else self.mla(L, x)

    # ---- top level -------------------------------------------------------------------
    def layers(self, e):
        """AttnRes depth loop (§3.1). returns (p, B)."""
        p, B = e, []
        self.op("embed", e)
        for L in range(self.N):
            h = self.mix(p, B, self.vec(L, "self_attention_res_norm.weight"),
                         self.vec(L, "self_attention_res_proj.weight")) if B else p
            if L % self.block == 0:
                B.append(p)
                p = None
            x = self.rmsnorm(h, self.vec(L, "input_layernorm.weight"), self.eps)
            a = self.attn(L, x)
            p = a if p is None else p + a
            h2 = self.mix(p, B, self.vec(L, "mlp_res_norm.weight"), self.vec(L, "mlp_res_proj.weight"))
            x2 = self.rmsnorm(h2, self.vec(L, "post_attention_layernorm.weight"), self.eps)
            f = self.ffn(L, x2)
            p = p + f
            if L in self.tap_layers:
                self.taps[L] = p.copy()
            for n, v in (("mix_attn", h), ("attn_in", x), ("attn_out", a), ("mix_mlp", h2),
                         ("ffn_in", x2), ("ffn_out", f)):
                self.op("L%02d_%s" % (L, n), v)
        return p, B

    def final(self, p, B):
        return self.mix(p, B, self.w("model.output_attn_res_norm.weight").reshape(-1),
                        self.w("model.output_attn_res_proj.weight").reshape(-1))

    def forward(self, ids):
        e = self.w("model.embed_tokens.weight")[np.asarray(ids)]
        p, B = self.layers(e)
        z = self.final(p, B)
        self.op("final_mix", z)
        z = self.rmsnorm(z, self.w("model.norm.weight").reshape(-1), self.eps)
        self.op("final_norm", z)
        return z @ self.w("lm_head.weight").T

    def greedy(self, ids, n):
        seq = list(ids)
        out = []
        for _ in range(n):
            lg = self.forward(seq)[-1]
            t = int(np.argmax(lg))            # first maximum = lowest id on ties
            out.append(t)
            seq.append(t)
            if t == self.eos:
                break
        return out


def dump_ops(ops, d):
    """Writes each recorded op as DIR/NAME.f32 (float32 LE) or NAME.i32 (int32 LE)."""
    os.makedirs(d, exist_ok=True)
    lines = []
    for name, a in ops:
        dt, ext = ("<i4", "i32") if a.dtype.kind in "iu" else ("<f4", "f32")
        a.astype(dt).tofile(os.path.join(d, "%s.%s" % (name, ext)))
        lines.append("%s %s %s\n" % (name, ext, "x".join(str(n) for n in a.shape)))
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.writelines(sorted(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--gen", type=int, default=0)
    ap.add_argument("--f32", action="store_true")
    ap.add_argument("--dump-logits")
    ap.add_argument("--out-ids")
    ap.add_argument("--dump-ops", metavar="DIR")
    a = ap.parse_args(argv)
    ids = [int(x) for x in a.ids.split(",") if x.strip()]
    m = K3Ref(a.model, np.float32 if a.f32 else np.float64)
    if any(i < 0 or i >= m.V for i in ids):
        sys.exit("k3_ref: token id out of range [0,%d)" % m.V)
    if a.dump_ops:
        m.ops = []
    lg = m.forward(ids)
    if a.dump_ops:
        dump_ops(m.ops, a.dump_ops)
        m.ops = None
    print("argmax:", ",".join(str(int(i)) for i in lg.argmax(-1)))
    if a.dump_logits:
        lg.astype("<f4").tofile(a.dump_logits)
    if a.gen:
        g = m.greedy(ids, a.gen)
        print("greedy:", ",".join(map(str, g)))
        if a.out_ids:
            with open(a.out_ids, "w") as f:
                f.write(",".join(map(str, g)) + "\n")


if __name__ == "__main__":
    main()
