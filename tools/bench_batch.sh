#!/bin/sh
# Batch decoding on one model (the full-width slice): tokens per second of a batch of 1, 2,
# 4, 8, 16 prompts (k3 --batch) with the trunk streamed (--trunk, page cache dropped before
# each run: "cold", though a host-cached disk still serves it) and with the trunk resident
# (no --trunk, warm); then one batch with its states forced into a state file against the
# same batch with them resident. Optionally (SPEC=1) s/token of one prompt plain, with
# --spec and the true continuation as --draft-ids, and with a draft that always fails.
# Every run is wrapped in flock $LOCK (the machine is shared), REPS runs each, interleaved;
# raw --out reports go to $OUT.jsonl, medians to stdout. Every prompt's ids must be the same
# in every run (the script checks).
#   sh tools/bench_batch.sh MODEL_DIR TRUNK_DIR [REPS] [GEN]
# K3 = the binary (default ./bin/k3); FLAGS = budget flags (default --trunk-gb 3
# --cache-gb 0.5; the resident runs keep only --cache-gb); OUT default
# /var/tmp/batch/bench; BOS, VOCAB: the prompts' first id and id range; BATCHES (default
# "1 2 4 8 16"); SF_BATCH: the state-file batch (default 16); COLD=0 skips drop_caches;
# RESIDENT=0 skips the resident series; SF=0 skips the state-file pair.
# SUMMARY=FILE.jsonl prints the medians of FILE only (runs of several
# invocations concatenated, e.g. when the shared lock leaves time for a few runs at once).
set -eu
M=$1; TR=$2; REPS=${3:-3}; GEN=${4:-6}
K3=${K3:-./bin/k3}; LOCK=${LOCK:-/var/tmp/bench.lock}
FLAGS=${FLAGS:---trunk-gb 3 --cache-gb 0.5}
RFLAGS=$(echo "$FLAGS" | sed 's/--trunk-gb [^ ]*//')
BATCHES=${BATCHES-1 2 4 8 16}; SF_BATCH=${SF_BATCH:-16}
COLD=${COLD:-1}; RESIDENT=${RESIDENT:-1}; SPEC=${SPEC:-0}; SF=${SF:-1}
OUT=${OUT:-/var/tmp/batch/bench}; mkdir -p "$(dirname "$OUT")"
if [ -n "${SUMMARY:-}" ]; then OUT=${SUMMARY%.jsonl}; else : > "$OUT.jsonl"; fi
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
BOS=${BOS:-16000}; VOCAB=${VOCAB:-16000}   # (a tiny model for a dry run: BOS=1 VOCAB=1000)
prompt() {   # i: 8 ids of prompt i
  awk -v i="$1" -v b="$BOS" -v v="$VOCAB" \
    'BEGIN{printf "%d", b; for (j = 1; j < 8; j++) printf ",%d", (i * 977 + j * 131) % v}'
}
for b in $BATCHES $SF_BATCH; do
  : > "$W/b$b.jsonl"
  for i in $(seq 1 "$b"); do
    echo "{\"id\": $i, \"ids\": [$(prompt "$i")], \"gen\": $GEN}" >> "$W/b$b.jsonl"
  done
done
add() {   # KIND PARAM REP FILE [IDS]: one report line (with each prompt's ids)
  python3 - "$@" >> "$OUT.jsonl" <<'PY'
import json, sys
kind, param, rep, path = sys.argv[1:5]
d = json.load(open(path))
keep = {k: d.get(k) for k in ("n_generated", "batch_size", "seconds", "tokens_per_second",
        "seconds_per_token", "seconds_decode", "spec_drafted", "spec_accepted", "spec_passes",
        "trunk_bytes_read", "expert_bytes_read", "peak_rss_bytes", "state_file",
        "state_file_bytes_read", "state_file_bytes_written", "state_file_wait_seconds")}
ids = {}
if len(sys.argv) > 5:
    for l in open(sys.argv[5]):
        r = json.loads(l)
        ids[str(r["id"])] = r["generated_ids"]
print(json.dumps(dict(kind=kind, param=param, rep=int(rep), ids=ids, **keep)))
PY
}
batch() {   # KIND B REP FLAGS...: one locked batch run (the page cache dropped unless resident)
  kind=$1; b=$2; r=$3; shift 3
  d=0; if [ "$kind" != resident ] && [ "$COLD" = 1 ]; then d=1; fi
  flock "$LOCK" sh -c 'if [ "$1" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
    shift; exec timeout 590 "$@"' k3 "$d" \
    "$K3" "$M" --batch "$W/b$b.jsonl" --batch-size "$b" --quiet --out "$W/r.json" "$@" \
    > "$W/ids.jsonl"
  add "$kind" "$b" "$r" "$W/r.json" "$W/ids.jsonl"
}
P=$(prompt 1); G2=$((GEN * 2))
if [ "$SPEC" = 1 ]; then   # the true continuation, once (its own timing is not used)
  # shellcheck disable=SC2086
  flock "$LOCK" timeout 590 "$K3" "$M" --ids "$P" --gen $G2 --trunk "$TR" $FLAGS --quiet > "$W/true"
  WRONG=$(awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i + 7) % 16000}' "$W/true")
fi
[ -n "${SUMMARY:-}" ] && REPS=0
for r in $(seq 1 "$REPS"); do
  for b in $BATCHES; do
    # shellcheck disable=SC2086
    batch streamed "$b" "$r" --trunk "$TR" $FLAGS
    # shellcheck disable=SC2086
    [ "$RESIDENT" = 1 ] && batch resident "$b" "$r" $RFLAGS
  done
  # the same batch, states resident / forced into the state file
  [ "$SF" = 1 ] && for sf in off all; do
    # shellcheck disable=SC2086
    batch "statefile-$sf" "$SF_BATCH" "$r" --trunk "$TR" $FLAGS --state-file $sf \
      --state-file-dir /var/tmp
  done
  [ "$SPEC" = 1 ] || continue
  for s in plain true wrong; do
    case $s in plain) x="";; true) x="--draft-ids $(cat "$W/true")";; wrong) x="--draft-ids $WRONG";; esac
    # shellcheck disable=SC2086
    flock "$LOCK" timeout 590 "$K3" "$M" --ids "$P" --gen $G2 --trunk "$TR" $FLAGS --quiet $x \
      --out "$W/r.json" > "$W/ids"
    cmp -s "$W/ids" "$W/true" || { echo "bench_batch: $s ids differ from the plain run"; exit 1; }
    add spec $s "$r" "$W/r.json"
  done
done
python3 - "$OUT.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ids = {}
for r in rows:
    for k, v in r.get("ids", {}).items():
        if ids.setdefault(k, v) != v:
            sys.exit(f"bench_batch: prompt {k}: ids differ ({r['kind']} {r['param']} "
                     f"rep {r['rep']})")
print(f"ids: every prompt's ids identical in all {len(rows)} runs")
def med(k, p, f):
    v = [r[f] for r in rows if r["kind"] == k and r["param"] == p and r.get(f) is not None]
    return statistics.median(v) if v else None
for kind in ("streamed", "resident"):
    one = med(kind, "1", "tokens_per_second")
    if one is None:
        continue
    for b in sorted({r["param"] for r in rows if r["kind"] == kind}, key=int):
        t = med(kind, b, "tokens_per_second")
        reps = [round(r["tokens_per_second"] / one, 2) for r in rows
                if r["kind"] == kind and r["param"] == b]
        print(f"{kind} batch {b}: {t:.3f} tokens/s ({t / one:.2f}x one prompt; per rep {reps}); "
              f"trunk {med(kind, b, 'trunk_bytes_read') / 1e9:.1f} GB, experts "
              f"{med(kind, b, 'expert_bytes_read') / 1e9:.1f} GB, peak RSS "
              f"{med(kind, b, 'peak_rss_bytes') / 2**20:.0f} MiB")
off = [r for r in rows if r["kind"] == "statefile-off"]
if off:
    b = off[0]["param"]
    a = med("statefile-off", b, "tokens_per_second")
    s = med("statefile-all", b, "tokens_per_second")
    print(f"batch {b} states resident: {a:.3f} tokens/s, peak RSS "
          f"{med('statefile-off', b, 'peak_rss_bytes') / 2**20:.0f} MiB; in the state file: "
          f"{s:.3f} tokens/s ({s / a:.3f}x), peak RSS "
          f"{med('statefile-all', b, 'peak_rss_bytes') / 2**20:.0f} MiB; runs: resident "
          f"{[round(r['tokens_per_second'], 3) for r in off]}, state file "
          f"{[round(r['tokens_per_second'], 3) for r in rows if r['kind'] == 'statefile-all']}")
plain = med("spec", "plain", "seconds_per_token")
for s in ("plain", "true", "wrong") if plain else ():
    t = med("spec", s, "seconds_per_token")
    acc = [r for r in rows if r["kind"] == "spec" and r["param"] == s][0]
    print(f"spec {s}: {t:.3f} s/token ({t / plain:.2f}x plain); drafted {acc['spec_drafted']}, "
          f"accepted {acc['spec_accepted']}, passes {acc['spec_passes']}")
PY
