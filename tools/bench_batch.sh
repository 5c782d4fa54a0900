#!/bin/sh
# Batch and speculative decoding on one model (the full-width slice): tokens per second of
# a batch of 1, 2, 4, 8 prompts (k3 --batch), and s/token of one prompt plain, with
# --spec and the true continuation as --draft-ids, and with a draft that always fails.
# Every run is wrapped in flock $LOCK (the machine is shared), REPS runs each, interleaved;
# raw --out reports go to $OUT.jsonl, medians to stdout.
#   sh tools/bench_batch.sh MODEL_DIR TRUNK_DIR [REPS] [GEN]
# K3 = the binary (default ./bin/k3); FLAGS = budget flags (default --trunk-gb 3
# --cache-gb 0.5); OUT default /var/tmp/batch/bench.
set -eu
M=$1; TR=$2; REPS=${3:-3}; GEN=${4:-6}
K3=${K3:-./bin/k3}; LOCK=${LOCK:-/var/tmp/bench.lock}
FLAGS=${FLAGS:---trunk-gb 3 --cache-gb 0.5}
OUT=${OUT:-/var/tmp/batch/bench}; mkdir -p "$(dirname "$OUT")"; : > "$OUT.jsonl"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
prompt() {   # i: 8 ids of prompt i
  awk -v i="$1" 'BEGIN{printf "16000"; for (j = 1; j < 8; j++) printf ",%d", (i * 977 + j * 131) % 16000}'
}
for b in 1 2 4 8; do
  : > "$W/b$b.jsonl"
  for i in $(seq 1 $b); do echo "{\"id\": $i, \"ids\": [$(prompt $i)], \"gen\": $GEN}" >> "$W/b$b.jsonl"; done
done
add() {   # KIND PARAM REP FILE: one report line
  python3 - "$@" >> "$OUT.jsonl" <<'PY'
import json, sys
kind, param, rep, path = sys.argv[1:5]
d = json.load(open(path))
keep = {k: d.get(k) for k in ("n_generated", "seconds", "tokens_per_second", "seconds_per_token",
        "seconds_decode", "spec_drafted", "spec_accepted", "spec_passes", "trunk_bytes_read",
        "expert_bytes_read", "peak_rss_bytes")}
print(json.dumps(dict(kind=kind, param=param, rep=int(rep), **keep)))
PY
}
P=$(prompt 1); G2=$((GEN * 2))
# the true continuation, once (its own timing is not used)
flock "$LOCK" timeout 590 "$K3" "$M" --ids "$P" --gen $G2 --trunk "$TR" $FLAGS --quiet > "$W/true"
WRONG=$(awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i + 7) % 16000}' "$W/true")
for r in $(seq 1 "$REPS"); do
  for b in 1 2 4 8; do
    # shellcheck disable=SC2086
    flock "$LOCK" timeout 590 "$K3" "$M" --batch "$W/b$b.jsonl" --trunk "$TR" $FLAGS --quiet \
      --out "$W/r.json" > /dev/null
    add batch $b "$r" "$W/r.json"
  done
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
med = lambda k, p, f: statistics.median(r[f] for r in rows if r["kind"] == k and r["param"] == p)
one = med("batch", "1", "tokens_per_second")
for b in ("1", "2", "4", "8"):
    t = med("batch", b, "tokens_per_second")
    print(f"batch {b}: {t:.3f} tokens/s ({t / one:.2f}x one prompt)")
plain = med("spec", "plain", "seconds_per_token")
for s in ("plain", "true", "wrong"):
    t = med("spec", s, "seconds_per_token")
    acc = [r for r in rows if r["kind"] == "spec" and r["param"] == s][0]
    print(f"spec {s}: {t:.3f} s/token ({t / plain:.2f}x plain); drafted {acc['spec_drafted']}, "
          f"accepted {acc['spec_accepted']}, passes {acc['spec_passes']}")
PY
