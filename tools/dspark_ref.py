#!/usr/bin/python3
"""Independent NumPy reference of the Kimi-K3-DSpark draft forward (K3_DSPARK.md §4), written from
the specification only (not from any C code).

    /usr/bin/python3 tools/dspark_ref.py DRAFT_DIR [--target tests/models/tiny5]
        (--prompt 768,12,... | --prompt-file F | --prompt-rand N) [--anchor ID] [--out DIR]
    /usr/bin/python3 tools/dspark_ref.py --selftest [--draft-a DIR --draft-b DIR --draft-c DIR]

float64 throughout, the NON-absorbed form:
  taps (§4.1)    the target's raw within-block AttnRes prefix p right after layer L's MLP output
                 is added, L in target_layer_ids (0-based), from tools/k3_ref.py (tap_layers hook);
                 concatenated in target_layer_ids order
  context (§4.2) c_p = RMS(context_proj . x_p, context_norm); per draft layer z = kv_a . c_p,
                 lat = RMS(z[:KL], kv_a_layernorm), kpe = Rope(z[KL:], p)
  block (§4.3)   7 rows [anchor, mask x 6] at positions P..P+6, input = the TARGET's embedding
  layer (§4.5)   pre-norm MLA with RoPE, K/V expanded per head from the latent (kv_b rows per head
                 [k_nope | v]), q_b rows per head [q_nope | q_pe], scores over context U block,
                 no mask at all (non-causal), softmax scale (DN+DR)^-1/2 * ym(factor, mscale_all_dim)^2;
                 SwiGLU (SiLU) MLP; every RMSNorm with rms_norm_eps
  RoPE (§4.4)    DeepSeek YaRN, INTERLEAVED pairs (2i, 2i+1), angle = fp32(pos) * fp32(inv_freq)
                 rounded to fp32 (vLLM's fp32 cos/sin table), cos/sin times mag
  head (§4.6-8)  hf = RMS(R, final_norm); base = K3 lm_head . hf (no K3 final norm); Markov
                 bias_r = markov_w2 . markov_w1[prev_r], prev_0 = anchor, prev_r = d_{r-1} (greedy,
                 lowest id on ties); confidence c_r = sigmoid(w_c . [hf_r ; markov_w1[prev_r]] + b_c)
The checkpoint's own embed_tokens.weight is never read (except by --selftest, to show it differs).

--out DIR writes the stage-by-stage expectations (float32 LE raw, row-major; int lists as
comma-separated text): prompt.txt anchor.txt taps.f32 ctx.f32 lat.f32 kpe.f32 h_in.f32 h_l0.f32
... h_l{n-1}.f32 hf.f32 base.f32 logits.f32 drafts.txt conf.f32 meta.txt (see
tests/models/tiny5_dspark/ref/README.md).  --selftest runs the §8.2 property tests that need only
the reference and exits non-zero if one fails.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k3_ref import K3Ref  # noqa: E402

KEYS = {"architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank",
        "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mla_use_nope", "mla_use_output_gate",
        "vocab_size", "rms_norm_eps", "max_position_embeddings", "rope_theta", "num_target_layers",
        "target_hidden_size", "target_num_hidden_layers", "target_layer_ids", "mask_token_id",
        "bos_token_id", "eos_token_id", "pad_token_id", "markov_rank", "markov_head_type",
        "enable_confidence_head", "confidence_head_with_markov", "tie_word_embeddings",
        "draft_vocab_size", "_torchspec_version", "torch_dtype", "rope_parameters"}
NROWS = 7


def read_safetensors(path):
    """name -> float64 array (BF16/F32), one shard."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        h = json.loads(f.read(n))
        data = f.read()
    meta = h.pop("__metadata__", {})
    out = {}
    for name, e in h.items():
        o0, o1 = e["data_offsets"]
        b = data[o0:o1]
        if e["dtype"] == "BF16":
            a = (np.frombuffer(b, dtype="<u2").astype(np.uint32) << np.uint32(16)).view(np.float32)
        elif e["dtype"] == "F32":
            a = np.frombuffer(b, dtype="<f4")
        else:
            raise ValueError("%s: dtype %s" % (name, e["dtype"]))
        out[name] = a.reshape(e["shape"]).astype(np.float64)
    return meta, out


def yarn_params(c):
    """(inv_freq[D/2], mag, softmax scale, low, high, kind) per K3_DSPARK §4.4 / §2.3."""
    D = c["qk_rope_head_dim"]
    rp = c.get("rope_parameters") or {}
    theta = float(rp.get("rope_theta", c["rope_theta"]))
    i = np.arange(D // 2, dtype=np.float64)
    pf = theta ** (2.0 * i / D)
    base_scale = (c["qk_nope_head_dim"] + D) ** -0.5
    if rp.get("rope_type", "default") == "default" or rp.get("apply_yarn_scaling", True) is False:
        return 1.0 / pf, 1.0, base_scale, None, None, "plain"
    factor = float(rp["factor"])
    L0 = float(rp["original_max_position_embeddings"])

    def corr(r):
        return D * math.log(L0 / (2 * math.pi * r)) / (2 * math.log(theta))

    low = max(math.floor(corr(rp["beta_fast"])), 0)
    high = min(math.ceil(corr(rp["beta_slow"])), D - 1)
    hi = high + 0.001 if low == high else high
    ramp = np.clip((i - low) / (hi - low), 0.0, 1.0)
    inv = (1.0 / (factor * pf)) * ramp + (1.0 / pf) * (1.0 - ramp)

    def ym(s, m):
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    mag = ym(factor, rp["mscale"]) / ym(factor, rp["mscale_all_dim"])
    scale = base_scale * ym(factor, rp["mscale_all_dim"]) ** 2
    return inv, mag, scale, low, high, "yarn"


class DSparkRef:
    def __init__(self, draft_dir, target_dir, target=None):
        with open(os.path.join(draft_dir, "config.json")) as f:
            c = json.load(f)
        self.c = c
        if set(c) != KEYS:
            raise ValueError("config.json keys: missing %s, extra %s" % (sorted(KEYS - set(c)), sorted(set(c) - KEYS)))
        assert c["architectures"] == ["K3DSparkModel"] and c["model_type"] == "k3_dspark"
        assert c["mla_use_nope"] is False and c["mla_use_output_gate"] is False
        assert c["markov_head_type"] == "vanilla" and c["confidence_head_with_markov"] is True
        assert c["draft_vocab_size"] == c["vocab_size"]
        assert c["num_target_layers"] == len(c["target_layer_ids"])
        assert list(c["target_layer_ids"]) == sorted(set(c["target_layer_ids"]))
        self.H, self.I, self.V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
        self.NL, self.NH = c["num_hidden_layers"], c["num_attention_heads"]
        self.KL, self.DN, self.DR, self.DV = c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.eps = c["rms_norm_eps"]
        self.tli = list(c["target_layer_ids"])
        self.mask = c["mask_token_id"]
        self.inv_freq, self.mag, self.scale, self.low, self.high, self.rope_kind = yarn_params(c)
        self.meta, self.w = read_safetensors(os.path.join(draft_dir, "model.safetensors"))
        self.tgt = target if target is not None else K3Ref(target_dir)
        t = self.tgt
        assert t.H == c["target_hidden_size"] and t.N == c["target_num_hidden_layers"] and t.V == self.V
        assert max(self.tli) < t.N
        self.embed = t.w("model.embed_tokens.weight")      # the TARGET's table (§3.3)
        self.lm_head = t.w("lm_head.weight")               # the TARGET's head, no K3 final norm

    # ---- primitives -----------------------------------------------------------------------
    def rms(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def silu(self, x):
        return x / (1.0 + np.exp(-x))

    def rope(self, x, pos):
        """x [..., T, (heads,) DR] with pos [T]; interleaved pairs (2i, 2i+1)."""
        pos = np.asarray(pos)
        a = (pos.astype(np.float32)[:, None] * self.inv_freq.astype(np.float32)[None, :]).astype(np.float64)
        cs, sn = np.cos(a) * self.mag, np.sin(a) * self.mag          # [T, DR/2]
        if x.ndim == 3:                                              # [T, heads, DR]
            cs, sn = cs[:, None, :], sn[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        y = np.empty_like(x)
        y[..., 0::2] = x0 * cs - x1 * sn
        y[..., 1::2] = x1 * cs + x0 * sn
        return y

    def lw(self, l, s):
        return self.w["layers.%d.%s" % (l, s)]

    # ---- target taps (§4.1) ------------------------------------------------------------
    def target_taps(self, ids):
        """returns (x [P, T*TH], target logits [P, V]); empty for P = 0."""
        if len(ids) == 0:
            return np.zeros((0, len(self.tli) * self.H)), np.zeros((0, self.V))
        t = self.tgt
        t.tap_layers, t.taps = set(self.tli), {}
        lg = t.forward(ids)
        x = np.concatenate([t.taps[L] for L in self.tli], axis=-1)
        t.tap_layers, t.taps = (), {}
        return x, lg

    # ---- context ingestion (§4.2) --------------------------------------------------------
    def ingest(self, x, pos):
        """x [P, T*TH] -> (ctx [P,H], lat [NL][P,KL], kpe [NL][P,DR])."""
        ctx = self.rms(x @ self.w["context_proj.weight"].T, self.w["context_norm.weight"])
        lat, kpe = [], []
        for l in range(self.NL):
            z = ctx @ self.lw(l, "self_attn.kv_a_proj_with_mqa.weight").T
            lat.append(self.rms(z[:, :self.KL], self.lw(l, "self_attn.kv_a_layernorm.weight")))
            kpe.append(self.rope(z[:, self.KL:], pos))
        return ctx, lat, kpe

    # ---- one draft layer (§4.5), non-absorbed ------------------------------------------------
    def attn(self, l, u, pos, lat_c, kpe_c):
        N, NH, DN, DR, DV, KL = u.shape[0], self.NH, self.DN, self.DR, self.DV, self.KL
        qa = self.rms(u @ self.lw(l, "self_attn.q_a_proj.weight").T, self.lw(l, "self_attn.q_a_layernorm.weight"))
        q = (qa @ self.lw(l, "self_attn.q_b_proj.weight").T).reshape(N, NH, DN + DR)
        qn, qp = q[:, :, :DN], self.rope(q[:, :, DN:], pos)
        z = u @ self.lw(l, "self_attn.kv_a_proj_with_mqa.weight").T
        blat = self.rms(z[:, :KL], self.lw(l, "self_attn.kv_a_layernorm.weight"))
        bkpe = self.rope(z[:, KL:], pos)
        LAT = np.concatenate([lat_c, blat], axis=0)                    # [S, KL]  context then block
        KPE = np.concatenate([kpe_c, bkpe], axis=0)                    # [S, DR]
        kv = (LAT @ self.lw(l, "self_attn.kv_b_proj.weight").T).reshape(-1, NH, DN + DV)
        kn, v = kv[:, :, :DN], kv[:, :, DN:]
        s = self.scale * (np.einsum("rhd,shd->hrs", qn, kn) + np.einsum("rhd,sd->hrs", qp, KPE))
        s = s - s.max(axis=-1, keepdims=True)                          # no mask: non-causal
        p = np.exp(s)
        p = p / p.sum(axis=-1, keepdims=True)
        o = np.einsum("hrs,shd->rhd", p, v).reshape(N, NH * DV)        # head-major concat
        return o @ self.lw(l, "self_attn.o_proj.weight").T

    def mlp(self, l, v):
        g = v @ self.lw(l, "mlp.gate_proj.weight").T
        u = v @ self.lw(l, "mlp.up_proj.weight").T
        return (self.silu(g) * u) @ self.lw(l, "mlp.down_proj.weight").T

    def block(self, anchor, P, lat_c, kpe_c, nrows=NROWS, shift=0, embed=None):
        """returns dict h_in, h_l{l}, hf, base for rows [anchor, mask x (nrows-1)] at P+shift+r."""
        E = self.embed if embed is None else embed
        toks = [anchor] + [self.mask] * (nrows - 1)
        pos = np.arange(nrows) + P + shift
        R = E[np.asarray(toks)].copy()
        out = {"h_in": R.copy()}
        for l in range(self.NL):
            u = self.rms(R, self.lw(l, "input_layernorm.weight"))
            R = R + self.attn(l, u, pos, lat_c[l], kpe_c[l])
            R = R + self.mlp(l, self.rms(R, self.lw(l, "post_attention_layernorm.weight")))
            out["h_l%d" % l] = R.copy()
        hf = self.rms(R, self.w["final_norm.weight"])
        out["hf"] = hf
        out["base"] = hf @ self.lm_head.T
        return out

    # ---- Markov head (§4.7) and confidence head (§4.8) --------------------------------------
    def markov(self, base, anchor):
        w1, w2 = self.w["markov_head.markov_w1.weight"], self.w["markov_head.markov_w2.weight"]
        prev, logits, drafts, es = anchor, [], [], []
        for r in range(base.shape[0]):
            e = w1[prev]
            lg = base[r] + w2 @ e
            d = int(np.argmax(lg))                                     # first max = lowest id
            logits.append(lg)
            drafts.append(d)
            es.append(e)
            prev = d
        return np.array(logits), drafts, np.array(es)

    def confidence(self, hf, es):
        x = np.concatenate([hf, es], axis=-1) @ self.w["confidence_head.proj.weight"].T
        x = x[:, 0] + self.w["confidence_head.proj.bias"][0]
        return 1.0 / (1.0 + np.exp(-x))

    # ---- whole case ----------------------------------------------------------------------
    def run(self, prompt, anchor=None):
        P = len(prompt)
        x, lg = self.target_taps(prompt)
        if anchor is None:
            anchor = int(np.argmax(lg[-1])) if P else self.c["bos_token_id"]
        ctx, lat, kpe = self.ingest(x, np.arange(P))
        o = self.block(anchor, P, lat, kpe)
        o["logits"], o["drafts"], es = self.markov(o["base"], anchor)
        o["conf"] = self.confidence(o["hf"], es)
        o.update(prompt=list(prompt), anchor=anchor, taps=x, ctx=ctx, lat=np.array(lat).reshape(self.NL, P, self.KL),
                 kpe=np.array(kpe).reshape(self.NL, P, self.DR), target_logits=lg)
        return o


def top2_margin(lg):
    s = np.sort(lg, axis=-1)
    return float((s[:, -1] - s[:, -2]).min())


def write_case(o, d, cmd, nl):
    os.makedirs(d, exist_ok=True)

    def ints(fn, v):
        with open(os.path.join(d, fn), "w") as f:
            f.write(",".join(str(int(i)) for i in v) + ("\n" if len(v) else ""))

    ints("prompt.txt", o["prompt"])
    ints("anchor.txt", [o["anchor"]])
    ints("drafts.txt", o["drafts"])
    names = ["taps", "ctx", "lat", "kpe", "h_in"] + ["h_l%d" % l for l in range(nl)] + ["hf", "base", "logits", "conf"]
    for n in names:
        np.asarray(o[n], dtype=np.float64).astype("<f4").tofile(os.path.join(d, n + ".f32"))
    nchg = int(np.sum(o["base"].argmax(-1) != o["logits"].argmax(-1)))
    with open(os.path.join(d, "meta.txt"), "w") as f:
        f.write("command:  %s\n" % cmd)
        f.write("P:        %d (context positions 0..%d), anchor %d at position %d\n" %
                (len(o["prompt"]), len(o["prompt"]) - 1, o["anchor"], len(o["prompt"])))
        f.write("drafts:   %s\n" % ",".join(map(str, o["drafts"])))
        f.write("margins:  min top-2 gap of logits rows %.4f, of base rows %.4f\n" %
                (top2_margin(o["logits"]), top2_margin(o["base"])))
        f.write("markov:   argmax(base) != argmax(logits) on %d of %d rows\n" % (nchg, o["base"].shape[0]))
        f.write("conf:     %s\n" % " ".join("%.4f" % v for v in o["conf"]))


def rand_prompt(n):
    """deterministic ids < 768: splitmix64 stream (seed 2026) mod 768."""
    from gen_dspark import uniform_pm1
    u = (uniform_pm1(2026, "dspark-prompt", n) + 1.0) / 2.0
    return [int(v) for v in np.minimum((u * 768).astype(np.int64), 767)]


# ---- self-tests (§8.1 golden YaRN, §8.2 property tests that need only the reference) -----------

class Checks:
    def __init__(self):
        self.fail = 0

    def check(self, ok, msg):
        print("%s  %s" % ("PASS" if ok else "FAIL", msg))
        if not ok:
            self.fail += 1


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def selftest(a):
    ck = Checks()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tdir = a.target
    tgt = K3Ref(tdir)
    A = DSparkRef(a.draft_a, tdir, tgt)
    B = DSparkRef(a.draft_b, tdir, tgt)
    C = DSparkRef(a.draft_c, tdir, tgt)

    # golden YaRN numbers (§8.1)
    gold = np.array([1.0, 0.2371708245, 0.05, 0.0079056942])
    ck.check(A.rope_kind == "yarn" and A.low == 0 and A.high == 3 and np.abs(A.inv_freq - gold).max() < 1e-10
             and abs(A.scale - 0.2646422580) < 1e-10 and abs(A.mag - 1.0) < 1e-12,
             "golden YaRN A: low %s high %s inv_freq %s scale %.10f mag %.10f" %
             (A.low, A.high, " ".join("%.10f" % v for v in A.inv_freq), A.scale, A.mag))
    ck.check(abs(B.mag - 1.0648216254) < 1e-10 and abs(B.scale - 0.2334024810) < 1e-10
             and np.array_equal(B.inv_freq, A.inv_freq),
             "golden YaRN B (mscale_all_dim 0.5): mag %.10f scale %.10f" % (B.mag, B.scale))

    # the tap hook leaves the target unchanged; tap definition (§4.1)
    prompt = [int(v) for v in open(os.path.join(tdir, "ref", "prompt.txt")).read().split(",")]
    tgt.ops = []
    x, lg = A.target_taps(prompt)
    ops = dict(tgt.ops)
    tgt.ops = None
    ref_lg = np.fromfile(os.path.join(tdir, "ref", "logits.f32"), "<f4").reshape(len(prompt), -1)
    ref_am = [int(v) for v in open(os.path.join(tdir, "ref", "argmax.txt")).read().split(",")]
    ck.check(np.abs(lg - ref_lg).max() < 1e-4 * np.abs(ref_lg).max() and list(lg.argmax(-1)) == ref_am,
             "k3_ref with the tap hook: prompt logits == %s/ref/logits.f32 (max abs diff %.2e), argmax == argmax.txt"
             % (tdir, np.abs(lg - ref_lg).max()))
    H = A.H
    tap = {L: x[:, j * H:(j + 1) * H] for j, L in enumerate(A.tli)}

    def ao(L):
        return ops["L%02d_attn_out" % L] + ops["L%02d_ffn_out" % L]
    blk = tgt.block
    ck.check(rel(tap[0], ao(0)) < 1e-12 and rel(tap[0], ops["embed"] + ao(0)) > 0.1,
             "tap(0) == attn_0 + mlp_0 (rel %.1e); with the embedding it would differ by %.2f" %
             (rel(tap[0], ao(0)), rel(tap[0], ops["embed"] + ao(0))))
    ck.check(rel(tap[2], ao(0) + ao(1) + ao(2)) < 1e-12, "tap(2) == sum of attn+mlp over layers 0..2 (rel %.1e)" %
             rel(tap[2], ao(0) + ao(1) + ao(2)))
    s7 = sum(ao(L) for L in range((7 // blk) * blk, 8))
    ck.check(blk == 5 and rel(tap[7], s7) < 1e-12 and rel(tap[7], s7 + ao(4)) > 0.05,
             "tap(7) == sum over layers 5..7 (rel %.1e; block %d; including layer 4 differs by %.2f)" %
             (rel(tap[7], s7), blk, rel(tap[7], s7 + ao(4))))
    ck.check(rel(tap[7], ops["L08_mix_attn"]) > 0.05 and rel(tap[2], ops["L03_mix_attn"]) > 0.05,
             "tap != Mix output (tap(7) vs layer 8's attention Mix: rel %.2f; tap(2) vs layer 3's: %.2f)" %
             (rel(tap[7], ops["L08_mix_attn"]), rel(tap[2], ops["L03_mix_attn"])))

    # draft-side properties on the a12 context
    P = len(prompt)
    anchor = int(np.argmax(lg[-1]))
    ctx, lat, kpe = A.ingest(x, np.arange(P))
    o7 = A.block(anchor, P, lat, kpe, 7)
    o2 = A.block(anchor, P, lat, kpe, 2)
    d = rel(o2["hf"][0], o7["hf"][0])
    ck.check(d > 1e-3, "non-causal: row 0's hf with a 7-row block vs a 2-row block differs (rel %.3f)" % d)
    for Dl in (100, 37):
        ctx2, lat2, kpe2 = A.ingest(x, np.arange(P) + Dl)
        os_ = A.block(anchor, P, lat2, kpe2, 7, shift=Dl)
        d = rel(os_["hf"], o7["hf"])
        ck.check(d < 1e-5, "relative RoPE (mag 1): shifting every position by +%d changes hf by %.2e relative" % (Dl, d))
    ob = B.block(anchor, P, *B.ingest(x, np.arange(P))[1:], 7)
    ctx3, lat3, kpe3 = B.ingest(x, np.arange(P) + 100)
    d = rel(B.block(anchor, P, lat3, kpe3, 7, shift=100)["hf"], ob["hf"])
    print("info  relative RoPE on variant B (mag %.4f, not required): +100 changes hf by %.2e relative" % (B.mag, d))

    # the checkpoint's embed_tokens copy is not the target's table: reading it changes the result
    cp = A.w["embed_tokens.weight"]
    oc = A.block(anchor, P, lat, kpe, 7, embed=cp)
    ck.check(rel(cp, A.embed) > 0.05 and rel(oc["hf"], o7["hf"]) > 1e-3,
             "embed_tokens copy differs from the target's (rel %.3f); drafting with it changes hf by %.3f relative"
             % (rel(cp, A.embed), rel(oc["hf"], o7["hf"])))

    # Markov alignment on variant C with the base logits zeroed
    w1, w2 = C.w["markov_head.markov_w1.weight"], C.w["markov_head.markov_w2.weight"]
    table = np.argmax(w1 @ w2.T, axis=-1)              # table[prev] = argmax_v w2[v] . w1[prev]
    oc0 = C.block(anchor, P, *C.ingest(x, np.arange(P))[1:], 7)
    _, dz, _ = C.markov(np.zeros_like(oc0["base"]), anchor)
    chain, prev = [], anchor
    for _ in range(NROWS):
        prev = int(table[prev])
        chain.append(prev)
    ck.check(dz == chain, "Markov alignment (variant C, base zeroed): drafts %s == chain prev->argmax(w2.w1[prev]) "
             "from anchor %d" % (dz, anchor))
    lgc, dc, _ = C.markov(oc0["base"], anchor)
    ck.check(dc == chain, "variant C with its real base logits drafts the same chain (the bias dominates): %s" % dc)
    seq = [anchor] + chain
    ck.check(all(seq[i] != seq[i + 1] for i in range(NROWS)),
             "variant C chain has no repeated neighbour (a bias keyed one row off changes the drafts)")
    print("%d check(s) failed" % ck.fail if ck.fail else "all self-checks passed")
    return 1 if ck.fail else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("draft", nargs="?")
    ap.add_argument("--target", default="tests/models/tiny5")
    ap.add_argument("--prompt")
    ap.add_argument("--prompt-file")
    ap.add_argument("--prompt-rand", type=int)
    ap.add_argument("--anchor", type=int)
    ap.add_argument("--out")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--draft-a", default="tests/models/tiny5_dspark")
    ap.add_argument("--draft-b", default="tests/models/tiny5_dspark_b")
    ap.add_argument("--draft-c", default="tests/models/tiny5_dspark_c")
    a = ap.parse_args(argv)
    if a.selftest:
        sys.exit(selftest(a))
    if not a.draft:
        ap.error("DRAFT_DIR required")
    if a.prompt_file:
        s = open(a.prompt_file).read().strip()
    elif a.prompt_rand is not None:
        s = ",".join(map(str, rand_prompt(a.prompt_rand)))
    else:
        s = a.prompt or ""
    prompt = [int(v) for v in s.split(",") if v.strip()]
    m = DSparkRef(a.draft, a.target)
    print("dspark_ref: rope %s, inv_freq %s, mag %.10f, softmax scale %.10f" %
          (m.rope_kind, " ".join("%.10f" % v for v in m.inv_freq), m.mag, m.scale))
    o = m.run(prompt, a.anchor)
    print("P %d anchor %d drafts %s" % (len(prompt), o["anchor"], ",".join(map(str, o["drafts"]))))
    print("conf %s" % " ".join("%.4f" % v for v in o["conf"]))
    print("min top-2 margin of logits rows %.4f" % top2_margin(o["logits"]))
    if a.out:
        cmd = "/usr/bin/python3 tools/dspark_ref.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_case(o, a.out, cmd, m.NL)


if __name__ == "__main__":
    main()
