#!/usr/bin/python3
"""The real K3 with its DSpark draft per preset: a projection (docs/PERFORMANCE.md, "Draft
model (DSpark)"). Not measured: bytes from the model's sizes and `k3 --list-presets`, a
drive of 7 GB/s, and the draft's compute measured on the full-width synthetic draft (the
released widths and vocabulary) on this VM. Usage: draft_projection.py DRAFT_S_PER_BLOCK

Per decoded token without a draft: the streamed trunk (111.16 GB less what the preset
pins; lm_head 2.35 GB of it, pinned only by server) + 16 routed experts in each of 92 MoE
layers (17.55 MB each) not in the cache (uniform hits: slots / 82,432, pessimistic).
Per block with the draft, n drafts verified (n + 1 rows, one forward): the streamed trunk
once; each MoE layer reads the experts its n + 1 rows select, 896 (1 - (1 - 16/896)^(n+1))
of them with uniform routing (pessimistic: consecutive tokens share experts more); the
draft's weights (4.78 GB without the borrowed tensors) and K3's lm_head for its rows
(2.35 GB where lm_head streams), read once a block; plus the draft forward's compute (the
measured seconds a block). Tokens a block: the published 3.85 (block of 7) and 3.83 (2.83
accepted drafts + the target's own token, block of 4). s/token = (bytes / 7 GB/s + the
draft's seconds) / tokens. Pinning the draft instead of as many trunk bytes changes
nothing a block (both are read once a block), so the draft is counted as streamed except
at server (room beside its plan). Compute of the target is not modelled (disk only), as in
docs/DISTRIBUTED.md's projection. The last columns are the length the bytes choose: with a
per-draft acceptance p fitted to the card (1 + p + .. + p^7 = 3.85: p = 0.774), the n of
0..7 (0: no draft) with the least s/token, as the adaptive length would.
"""
import sys

GBPS = 7.0
TRUNK, HEAD = 111.16, 2.35
EXPERT, TOPK, N_EXP, MOE = 0.01755, 16, 896, 92
SLOTS_ALL = N_EXP * MOE
DRAFT = 4.776
PRESETS = [  # name, pinned trunk GB, expert slots, lm_head pinned (k3 --list-presets)
    ("minimum", 0.0, 5, False), ("laptop", 0.80, 135, False),
    ("desktop", 14.40, 454, False), ("workstation", 56.40, 2278, False),
    ("server", 111.16, 15952, True)]
PUBLISHED = [(7, 3.85), (4, 3.83)]


def experts(rows, slots):
    per_layer = N_EXP * (1 - (1 - TOPK / N_EXP) ** rows)
    return per_layer * MOE * EXPERT * (1 - min(1.0, slots / SLOTS_ALL))


def fit_p(tokens, n):
    lo, hi = 0.0, 1.0
    for _ in range(60):
        p = (lo + hi) / 2
        lo, hi = (p, hi) if sum(p ** j for j in range(n + 1)) < tokens else (lo, p)
    return lo


def s_token(stream, slots, draft_bytes, n, tokens, t_draft):
    if n == 0:
        return (stream + experts(1, slots)) / GBPS
    return ((stream + experts(n + 1, slots) + draft_bytes) / GBPS + t_draft) / tokens


def main():
    t_draft = float(sys.argv[1])
    p = fit_p(PUBLISHED[0][1], PUBLISHED[0][0])
    print(f"# draft seconds a block {t_draft:g}; geometric fit p = {p:.3f}")
    print("| preset | no draft: GB a token | s/token | " +
          " | ".join(f"block of {n} ({a} tokens): GB a token | s/token | x no draft"
                     for n, a in PUBLISHED) + " | chosen n | s/token | x no draft |")
    print("|---|---|---|" + "---|---|---|" * len(PUBLISHED) + "---|---|---|")
    for name, pinned, slots, head_pinned in PRESETS:
        stream = TRUNK - pinned
        nd = stream + experts(1, slots)
        row = [name, f"{nd:.1f}", f"{nd / GBPS:.1f}"]
        for n, a in PUBLISHED:
            draft_bytes = (0.0 if name == "server" else DRAFT) + (0.0 if head_pinned else HEAD)
            blk = stream + experts(n + 1, slots) + draft_bytes
            s = (blk / GBPS + t_draft) / a
            row += [f"{blk / a:.1f}", f"{s:.2f}", f"{s / (nd / GBPS):.2f}x"]
        draft_bytes = (0.0 if name == "server" else DRAFT) + (0.0 if head_pinned else HEAD)
        best = min(range(8), key=lambda n: s_token(stream, slots, draft_bytes, n,
                                                  sum(p ** j for j in range(n + 1)), t_draft))
        sb = s_token(stream, slots, draft_bytes, best, sum(p ** j for j in range(best + 1)),
                     t_draft)
        row += [str(best), f"{sb:.2f}", f"{sb / (nd / GBPS):.2f}x"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
