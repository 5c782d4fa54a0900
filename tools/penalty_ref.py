#!/usr/bin/python3
"""NumPy reference for logit bias and the frequency/presence/repetition penalties, written
from the public definitions (not from k3's C):
  OpenAI (API reference, "frequency and presence penalties"):
      mu[j] -= c[j] * alpha_frequency + float(c[j] > 0) * alpha_presence
    with c[j] the times token j was sampled before the current position; logit_bias is
    added to the logits before sampling.
  llama.cpp (penalties sampler, --repeat-penalty / --repeat-last-n): each distinct token
    among the last N: logit <= 0 -> logit * penalty, else logit / penalty.
k3's order (include/sampler.h): bias, then repetition, then frequency/presence, all in
float32 but the OpenAI bracket (double, then rounded to float32).
Writes tests/c/penalty_fixtures.h:  /usr/bin/python3 tools/penalty_ref.py"""
import os
from collections import Counter
import numpy as np

F = np.float32
V = 16
LOGITS = np.array([1.25, -0.5, 2.0, 3.5, 0.0, -1.75, 0.75, 2.75, -2.5, 1.5, 0.25, -0.125,
                   3.0, -3.25, 2.25, 1.0], dtype=F)
HIST = [3, 7, 3, 9, 12, 3, 7, 0, 14, 5]          # window 4 = [7, 0, 14, 5]
# (repeat_penalty, repeat_last_n, frequency, presence, [(id, bias)])
CASES = [
    (1.3, 4, 0.5, 0.25, [(2, 1.5), (5, -3.0), (2, 0.5), (7, 0.3)]),
    (0.8, -1, -0.7, 1.1, []),
    (1.1, 0, 0.3, 0.0, [(13, 7.0)]),
    (1.0, 64, 0.0, 0.0, [(3, -100.0), (8, 100.0)]),
    (2.0, 64, 0.0, -0.4, []),
]


def penalise(logits, hist, rp, last_n, fp, pp, bias):
    lg = logits.astype(F).copy()
    for i, b in bias:                             # OpenAI logit_bias: added
        lg[i] = F(lg[i] + F(b))
    if rp != 1.0 and last_n != 0:                 # llama.cpp repetition penalty
        win = hist if last_n < 0 else hist[-last_n:]
        for t in set(win):
            lg[t] = F(lg[t] / F(rp)) if lg[t] > 0 else F(lg[t] * F(rp))
    if fp != 0.0 or pp != 0.0:                    # OpenAI frequency / presence
        for t, c in Counter(hist).items():
            lg[t] = F(lg[t] - F(c * fp + float(c > 0) * pp))
    return lg


def step_logits(steps):
    """Per-step logits from a fixed LCG (values k/8 in [-4, 4), many ties)."""
    x, out = 12345, []
    for _ in range(steps):
        row = []
        for _ in range(V):
            x = (x * 1103515245 + 12345) % (1 << 31)
            row.append(((x >> 16) % 64 - 32) / 8.0)
        out.append(row)
    return np.array(out, dtype=F)


def greedy_run(rows, rp, last_n, fp, pp, bias):
    hist = []
    for r in rows:
        lg = penalise(r, hist, rp, last_n, fp, pp, bias)
        hist.append(int(np.argmax(lg)))            # first maximum: the lowest id on ties
    return hist


def hx(v):
    return float(v).hex()


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    o = ["/* penalty_fixtures.h: written by tools/penalty_ref.py (NumPy, from the OpenAI and",
         " * llama.cpp definitions); do not edit. */",
         "#define PF_V %d" % V, "#define PF_NHIST %d" % len(HIST), "#define PF_NCASE %d" % len(CASES),
         "static const float PF_LOGITS[PF_V] = { %s };" % ", ".join(hx(v) for v in LOGITS),
         "static const int PF_HIST[PF_NHIST] = { %s };" % ", ".join(map(str, HIST)),
         "typedef struct { double rp; int last_n; double fp, pp; int nb; int id[4];",
         "                 float b[4]; float want[PF_V]; } PfCase;",
         "static const PfCase PF_CASES[PF_NCASE] = {"]
    for rp, n, fp, pp, bias in CASES:
        w = penalise(LOGITS, HIST, rp, n, fp, pp, bias)
        ids = [i for i, _ in bias] + [0] * (4 - len(bias))
        bs = [b for _, b in bias] + [0.0] * (4 - len(bias))
        o.append("    { %r, %d, %r, %r, %d, { %s }, { %s },\n      { %s } }," % (
            rp, n, fp, pp, len(bias), ", ".join(map(str, ids)), ", ".join(hx(b) for b in bs),
            ", ".join(hx(v) for v in w)))
    o.append("};")
    steps = 24
    rows = step_logits(steps)
    run = (1.5, 3, 0.4, 0.6, [(4, 0.75)])
    toks = greedy_run(rows, *run)
    o.append("#define PF_STEPS %d" % steps)
    o.append("static const float PF_ROWS[PF_STEPS][PF_V] = {")
    for r in rows:
        o.append("    { %s }," % ", ".join(hx(v) for v in r))
    o.append("};")
    o.append("/* greedy with repeat 1.5 over the last 3, frequency 0.4, presence 0.6, 4:+0.75 */")
    o.append("static const int PF_GREEDY[PF_STEPS] = { %s };" % ", ".join(map(str, toks)))
    o.append("static const int PF_GREEDY_PLAIN[PF_STEPS] = { %s };" %
             ", ".join(str(int(np.argmax(r))) for r in rows))
    with open(os.path.join(root, "tests/c/penalty_fixtures.h"), "w") as f:
        f.write("\n".join(w for line in o for w in wrap(line)) + "\n")


def wrap(line, width=100):
    """The C lines within `width` columns, broken after a comma."""
    out, ind = [], "        "
    while len(line) > width:
        cut = line.rfind(", ", 0, width - 1)
        if cut < 0:
            break
        out.append(line[:cut + 1])
        line = ind + line[cut + 2:]
    return out + [line]


if __name__ == "__main__":
    main()
