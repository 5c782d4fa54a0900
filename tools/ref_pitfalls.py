#!/usr/bin/python3
"""Show that tools/k3_ref.py (and the committed fixtures) catch the K3_MODEL.md §7 pitfalls.

Runs the reference on a model (default tests/models/tiny5) once correctly and once with
each deliberate mistake (one overridden method of K3Ref), and reports whether the
teacher-forced argmax and the greedy continuation change.

    /usr/bin/python3 tools/ref_pitfalls.py [MODEL_DIR] [--gen 16] [--save docs/data/ref_pitfalls.txt]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k3_ref import K3Ref, E2M1  # noqa: E402


class ZeroBasedLayers(K3Ref):        # §7.1
    def is_kda(self, L):
        return L in self.kda_layers


class ALogPerChannel(K3Ref):         # §7.2 A_log[d] per channel instead of A_log[h]
    def kda_gate(self, L, z):
        A = self.vec(L, "self_attn.A_log")[:self.kd]
        dtb = self.vec(L, "self_attn.dt_bias").reshape(self.kh, self.kd)
        return self.lb * self.sigmoid(np.exp(A)[None, None, :] * (z + dtb))


class KimiLinearDecay(K3Ref):        # §7.3 -exp(A_log)*softplus(z+dt_bias), clamped at lb
    def kda_gate(self, L, z):
        A = self.vec(L, "self_attn.A_log")[:self.kh]
        dtb = self.vec(L, "self_attn.dt_bias").reshape(self.kh, self.kd)
        return np.maximum(self.lb, -np.exp(A)[None, :, None] * np.logaddexp(0.0, z + dtb))


class OutputFromOldState(K3Ref):     # §7.4 undecayed delta rule, output before the write
    def kda_recur(self, q, k, v, g, beta):
        T, h, D = q.shape
        S = np.zeros((h, D, D), dtype=self.dt)
        o = np.zeros_like(v)
        for t in range(T):
            u = np.einsum("hkv,hk->hv", S, k[t])
            o[t] = np.einsum("hkv,hk->hv", np.exp(g[t])[:, :, None] * S, q[t])
            S = np.exp(g[t])[:, :, None] * S + np.einsum("hk,hv->hkv", k[t], beta[t][:, None] * (v[t] - u))
        return o


class DropRopeDims(K3Ref):           # §7.9 q_pe.k_pe dropped, scale nope^-1/2
    def mla_scores(self, qn, qpe, kn, kpe):
        return np.einsum("thd,shd->hts", qn, kn) / np.sqrt(self.nope)


class BiasedRouterWeights(K3Ref):    # §7.17 weights gathered from s + bias
    def router_weights(self, s, choice, idx):
        w = np.take_along_axis(choice, idx, axis=-1)
        return w / (w.sum(axis=-1, keepdims=True) + 1e-20) * self.rsf


class PerExpertLatentNorm(K3Ref):    # §7.19 RMSNorm each expert output, then weighted sum
    def latent_combine(self, L, ys, w):
        wn = self.vec(L, "block_sparse_moe.routed_expert_norm.weight")
        return np.sum(w[:, None] * self.rmsnorm(ys, wn, self.eps), axis=0)


class SiluNotSitu(K3Ref):            # §7.20
    def situ(self, g, u):
        return self.silu(g) * u


class NibbleSwap(K3Ref):             # §7.22 high nibble = even element
    def dequant(self, packed, scale):
        return super().dequant(((packed & 0x0F) << 4) | (packed >> 4), scale)


class NoFinalMix(K3Ref):             # §7.15 final norm applied to p, no output Mix
    def final(self, p, B):
        return p


class PlainResidual(K3Ref):          # §7.14 ordinary pre-norm residual stream
    def layers(self, e):
        x = e
        for L in range(self.N):
            x = x + self.attn(L, self.rmsnorm(x, self.vec(L, "input_layernorm.weight"), self.eps))
            x = x + self.ffn(L, self.rmsnorm(x, self.vec(L, "post_attention_layernorm.weight"), self.eps))
        return x, []

    def final(self, p, B):
        return p


class SnapshotMixed(K3Ref):          # §7.14 snapshot the mixed h instead of the entering p
    def layers(self, e):
        p, B = e, []
        for L in range(self.N):
            h = self.mix(p, B, self.vec(L, "self_attention_res_norm.weight"),
                         self.vec(L, "self_attention_res_proj.weight")) if B else p
            if L % self.block == 0:
                B.append(h)
                p = None
            a = self.attn(L, self.rmsnorm(h, self.vec(L, "input_layernorm.weight"), self.eps))
            p = a if p is None else p + a
            h2 = self.mix(p, B, self.vec(L, "mlp_res_norm.weight"), self.vec(L, "mlp_res_proj.weight"))
            p = p + self.ffn(L, self.rmsnorm(h2, self.vec(L, "post_attention_layernorm.weight"), self.eps))
        return p, B


class KvbSplitAllKThenV(K3Ref):      # §7.12 kv_b rows read as [all k_nope | all v]
    def lw(self, L, s):
        w = super().lw(L, s)
        if s == "self_attn.kv_b_proj.weight":
            h, n, vd = self.nh, self.nope, self.vd
            k = w[:h * n].reshape(h, n, -1)
            v = w[h * n:].reshape(h, vd, -1)
            w = np.concatenate([k, v], axis=1).reshape(w.shape)
        return w


class MlaEps1e5(K3Ref):              # §7.11 q_a/kv_a norms with 1e-5 (small effect)
    def rmsnorm(self, x, w, eps):
        return super().rmsnorm(x, w, 1e-5 if eps == 1e-6 else eps)


PITFALLS = [
    ("7.1  0-based kda_layers", ZeroBasedLayers),
    ("7.2  A_log per channel", ALogPerChannel),
    ("7.3  Kimi-Linear decay formula", KimiLinearDecay),
    ("7.4  KDA output from old state", OutputFromOldState),
    ("7.9  drop MLA rope dims", DropRopeDims),
    ("7.11 MLA LoRA norm eps 1e-5", MlaEps1e5),
    ("7.12 kv_b split [all k|all v]", KvbSplitAllKThenV),
    ("7.14 plain residual, no AttnRes", PlainResidual),
    ("7.14 snapshot mixed h, not p", SnapshotMixed),
    ("7.15 no final Mix", NoFinalMix),
    ("7.17 router weights from s+bias", BiasedRouterWeights),
    ("7.19 per-expert latent norm", PerExpertLatentNorm),
    ("7.20 SiLU instead of SiTU", SiluNotSitu),
    ("7.22 MXFP4 nibble swap", NibbleSwap),
]


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main(argv=None):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=os.path.join(here, "tests/models/tiny5"))
    ap.add_argument("--ids", default=None, help="default: MODEL/ref/prompt.txt")
    ap.add_argument("--gen", type=int, default=16)
    ap.add_argument("--save", default=None)
    a = ap.parse_args(argv)
    ids_s = a.ids
    if ids_s is None:
        with open(os.path.join(a.model, "ref", "prompt.txt")) as f:
            ids_s = f.read().strip()
    ids = [int(x) for x in ids_s.split(",")]
    ref = K3Ref(a.model)
    lg0 = ref.forward(ids)
    am0 = lg0.argmax(-1)
    gr0 = ref.greedy(ids, a.gen)
    lines = ["# tools/ref_pitfalls.py %s --gen %d" % (os.path.relpath(a.model, here), a.gen),
             "# prompt %s" % ids_s,
             "# correct greedy %s" % ",".join(map(str, gr0)),
             "%-34s %10s %14s %14s %s" % ("pitfall (K3_MODEL.md §)", "logit rL2", "argmax diff", "greedy diff", "caught")]
    all_ok = True
    for label, cls in PITFALLS:
        m = cls(a.model)
        try:
            lg = m.forward(ids)
        except KeyError as ex:   # e.g. 0-based layer lists look for MLA tensors in a KDA layer
            lines.append("%-34s load error: %s -> caught" % (label, str(ex).split(" not in")[0].strip("'")))
            continue
        am = lg.argmax(-1)
        gr = m.greedy(ids, a.gen)
        nd = int(np.sum(am != am0))
        gd = sum(1 for i in range(max(len(gr), len(gr0)))
                 if i >= len(gr) or i >= len(gr0) or gr[i] != gr0[i])
        caught = nd > 0 or gd > 0
        if not caught and "7.11" not in label:
            all_ok = False
        lines.append("%-34s %10.3g %9d/%-4d %9d/%-4d %s" % (label, rel_l2(lg, lg0), nd, len(ids),
                                                          gd, len(gr0), "yes" if caught else "NO"))
    out = "\n".join(lines) + "\n"
    sys.stdout.write(out)
    if a.save:
        with open(a.save, "w") as f:
            f.write(out)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
