#!/bin/sh
# The payoff of a DSpark draft (--draft DIR) on one model, one prompt, at one budget
# (default --trunk-gb 3 --cache-gb 0.5), each run cold (drop_caches inside the lock; the
# host's cache remains). Random weights accept nothing, so acceptance is set with the test
# hook K3_TEST_DRAFT_ORACLE (the draft forward runs, its tokens are replaced by the
# target's own continuation; K3_TEST_DRAFT_RIGHT=0: every one wrong). Kinds of a rep:
#   nodraft  --no-spec, no draft (the baseline; its ids are every run's reference)
#   right    --draft, --draft-block 7, every draft right
#   none7    --draft, --draft-block 7, no draft right
#   noneA    --draft, the length chosen (adaptive), no draft right
# With K3_A=BIN (another build, e.g. main) the three draft kinds also run with it (labels
# a:right ..): a paired A/B in the same reps. The runs of a rep are interleaved, their order
# rotated by one each rep; each rep holds flock $LOCK (the machine is shared). Raw --out
# reports go to $OUT.jsonl, medians of the reps and ratios to stdout. The ids of every run
# must equal nodraft's (checked).
#   sh tools/bench_draft.sh MODEL_DIR TRUNK_DIR DRAFT_DIR [REPS] [GEN]
# KINDS / AKINDS: the kinds run with K3 / K3_A (defaults below). K3 = the binary (default
# ./bin/k3); PROMPT = ids (default bench_spec.sh's); OUT default /var/tmp/draftb/bench;
# FLAGS default "--trunk-gb 3 --cache-gb 0.5"; BLOCK default 7; COLD=0: no drop_caches (a
# smoke test); WARM=0: the draft's file is not read into the page cache after the drop.
set -eu
M=$1; TR=$2; D=$3; REPS=${4:-3}; GEN=${5:-24}
K3=${K3:-./bin/k3}; K3_A=${K3_A:-}; LOCK=${LOCK:-/var/tmp/bench.lock}
OUT=${OUT:-/var/tmp/draftb/bench}; mkdir -p "$(dirname "$OUT")"
FLAGS=${FLAGS:---trunk-gb 3 --cache-gb 0.5}; BLOCK=${BLOCK:-7}; COLD=${COLD:-1}
WARM=${WARM:-1}
KINDS=${KINDS:-nodraft right none7 noneA}; AKINDS=${AKINDS:-right none7 noneA}
RUNS=$KINDS             # (KINDS may be exported: the inner calls must not add to it)
[ -n "$K3_A" ] && RUNS="$RUNS $(for k in $AKINDS; do printf 'a:%s ' "$k"; done)"
if [ -z "${BENCH_DRAFT_W:-}" ]; then  # the outer call: one locked inner call per rep
  : > "$OUT.jsonl"
  BENCH_DRAFT_W=$(mktemp -d); export BENCH_DRAFT_W; trap 'rm -rf "$BENCH_DRAFT_W"' EXIT
  for r in $(seq 0 "$REPS"); do       # rep 0: the reference ids, not timed
    BENCH_DRAFT_REP=$r flock "$LOCK" sh "$0" "$@"
  done
  BENCH_DRAFT_REP=summary sh "$0" "$@"
  exit 0
fi
W=$BENCH_DRAFT_W
P=${PROMPT:-16000,108,239,370,501,632,763,894}   # an ordinary prompt (bench_spec.sh's)
run() {   # BIN flags...: one cold run; ids to $W/ids, report to $W/r.json
  bin=$1; shift
  [ "$COLD" = 0 ] || { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
  # the draft's file into the page cache (every kind alike): its first read through the
  # mapping's page faults took 10-40 s on this VM, once a process, and would be most of
  # a short run's decode
  [ "$WARM" = 0 ] || cat "$D/model.safetensors" > /dev/null
  # shellcheck disable=SC2086
  timeout 900 "$bin" "$M" --ids "$P" --gen "$GEN" --trunk "$TR" $FLAGS --quiet \
    --out "$W/r.json" "$@" > "$W/ids"
}
add() {   # KIND REP: one report line
  python3 - "$@" "$W/r.json" >> "$OUT.jsonl" <<'PY'
import json, sys
kind, rep, path = sys.argv[1:4]
d = json.load(open(path))
keep = {k: d.get(k) for k in ("n_generated", "seconds_prefill", "seconds_decode",
        "seconds_per_token", "draft_blocks", "draft_proposed", "draft_accepted",
        "draft_rows_verified", "draft_seconds", "trunk_bytes_read", "expert_bytes_read",
        "head_bytes_read", "peak_rss_bytes", "plan_bytes")}
print(json.dumps(dict(kind=kind, rep=int(rep), **keep)))
PY
}
r=$BENCH_DRAFT_REP
if [ "$r" = 0 ]; then run "$K3" --no-spec; cp "$W/ids" "$W/true"; exit 0; fi
if [ "$r" != summary ]; then
  TRUE=$(cat "$W/true")
  ks=$(echo $RUNS | awk -v r="$r" '{ for (i = 0; i < NF; i++)
                                       printf "%s ", $((i + r - 1) % NF + 1) }')
  for kind in $ks; do
    bin=$K3; k=$kind
    case $kind in a:*) bin=$K3_A; k=${kind#a:};; esac
    case $k in
      nodraft) run "$bin" --no-spec;;
      right) K3_TEST_DRAFT_ORACLE=$TRUE run "$bin" --draft "$D" --draft-block "$BLOCK";;
      none7) K3_TEST_DRAFT_ORACLE=$TRUE K3_TEST_DRAFT_RIGHT=0 \
               run "$bin" --draft "$D" --draft-block "$BLOCK";;
      noneA) K3_TEST_DRAFT_ORACLE=$TRUE K3_TEST_DRAFT_RIGHT=0 run "$bin" --draft "$D";;
    esac
    cmp -s "$W/ids" "$W/true" || { echo "bench_draft: $kind ids differ"; exit 1; }
    add "$kind" "$r"
  done
  exit 0
fi
LIM=$(echo "$FLAGS" | awk '{ for (i = 1; i < NF; i++) if ($i == "--trunk-gb" || $i == "--cache-gb")
                                 s += $(i + 1) } END { print s + 0 }')
python3 - "$OUT.jsonl" "$LIM" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
lim_gb = float(sys.argv[2])
med = lambda xs: st.median(xs)
base = {r["rep"]: r for r in rows if r["kind"] == "nodraft"}
b = med(r["seconds_per_token"] for r in base.values())
res = {}
for kind in dict.fromkeys(r["kind"] for r in rows):
    rs = [r for r in rows if r["kind"] == kind]
    t = med(r["seconds_per_token"] for r in rs)
    per = [r["seconds_per_token"] / base[r["rep"]]["seconds_per_token"] for r in rs]
    res[kind] = (t, med(per))
    n = rs[0]["n_generated"] - 1
    line = (f"{kind}: {t:.3f} s/token ({t / b:.3f}x nodraft's median; paired per rep "
            + ", ".join(f"{x:.3f}" for x in per) + f", median {med(per):.3f}); peak RSS "
            f"{med(r['peak_rss_bytes'] for r in rs) / 1e9:.3f} GB (max "
            f"{max(r['peak_rss_bytes'] for r in rs) / 1e9:.3f}, plan "
            f"{rs[0]['plan_bytes'] / 1e9:.3f}); trunk "
            f"{med(r['trunk_bytes_read'] for r in rs) / 1e9:.1f} GB, experts "
            f"{med(r['expert_bytes_read'] for r in rs) / 1e9:.1f} GB, "
            f"lm_head {med(r['head_bytes_read'] for r in rs) / 1e9:.1f} GB; prefill "
            f"{med(r['seconds_prefill'] for r in rs):.2f} s")
    if rs[0].get("draft_blocks") is not None:
        bl = med(r["draft_blocks"] for r in rs)
        line += (f"; blocks {bl:g}, proposed {med(r['draft_proposed'] for r in rs):g}, "
                 f"accepted {med(r['draft_accepted'] for r in rs):g}, rows verified "
                 f"{med(r['draft_rows_verified'] for r in rs):g}, draft "
                 f"{med(r['draft_seconds'] for r in rs):.2f} s "
                 f"({med(r['draft_seconds'] / max(r['draft_blocks'], 1) for r in rs):.2f} "
                 f"s a block)")
    print(line + f"; {len(rs)} runs, {n} decoded tokens each")
def check(name, kind, ref, lim):
    if kind not in res or ref not in res: return
    x = res[kind][0] / res[ref][0]
    print(f"acceptance: {name}: {x:.3f}x (medians) <= {lim}: {'met' if x <= lim else 'NOT met'}"
          f"; paired median {res[kind][1] / (res[ref][1] if ref != 'nodraft' else 1):.3f}x")
for p in ("", "a:"):
    check(p + "every draft right vs nodraft", p + "right", "nodraft", 0.4)
    check(p + "none right, fixed block vs nodraft", p + "none7", "nodraft", 1.25)
    check(p + "none right, adaptive vs nodraft", p + "noneA", "nodraft", 1.1)
for kind in dict.fromkeys(r["kind"] for r in rows):
    pk = max(r["peak_rss_bytes"] for r in rows if r["kind"] == kind) / 1e9
    if lim_gb > 0:
        print(f"acceptance: {kind} peak RSS {pk:.3f} GB (max of its runs) within the flags "
              f"{lim_gb:g} GB: {'met' if pk <= lim_gb else 'NOT met'}")
PY
