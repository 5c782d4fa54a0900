#!/bin/sh
# The cost of the split (docs/DISTRIBUTED.md): on the full-width slice, trunk resident (the
# shard mappings), one process with 2 threads against mpirun -np 2 with 1 thread each, and
# BASE (bin/k3 of the commit before the split) as the single-process A/B; REPS reps
# interleaved; then one streamed pair: np 2 at --trunk-gb 1.5 --cache-gb 0.25 per rank
# against one process at 3 / 0.5. Run it under flock /var/tmp/bench.lock (a shared VM).
# Usage: tools/bench_mpi.sh OUT.jsonl [BASE_BIN]   (K3, K3MPI: the binaries, copy them
# first when a build may run meanwhile)
set -u
OUT=$1; BASE=${2:-}; REPS=${REPS:-3}
M=${M:-/var/tmp/k3mem/fw6}; TR=${TR:-/var/tmp/fw6t/plain}
IDS=16000,5,17,300,42,7,900,12
K3=${K3:-./bin/k3}; K3MPI=${K3MPI:-./bin/k3-mpi}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: > "$OUT"
one() {   # LABEL CMD...: the run's --out JSON, one line, labelled
  label=$1; shift
  "$@" --out /tmp/bench_mpi.json --quiet > /tmp/bench_mpi.ids 2>/tmp/bench_mpi.err \
    || { echo "$label: exit $?: $(tail -c 300 /tmp/bench_mpi.err)" >&2; return; }
  printf '{"label": "%s", "ids": "%s", "report": %s}\n' "$label" "$(cat /tmp/bench_mpi.ids)" \
    "$(tr -d '\n' < /tmp/bench_mpi.json)" >> "$OUT"
  echo "$label: $(sed -n 's/.*"seconds_per_token": \([0-9.]*\).*/\1/p' /tmp/bench_mpi.json |
    head -1) s/token" >&2
}
for r in $(seq "$REPS"); do
  one one-2t $K3 $M --ids $IDS --gen 4 --threads 2 --cache-gb 1000
  one np2-1t mpirun --oversubscribe -np 2 $K3MPI $M --ids $IDS --gen 4 --threads 1 \
    --cache-gb 1000
  [ -n "$BASE" ] && one base-2t "$BASE" $M --ids $IDS --gen 4 --threads 2 --cache-gb 1000
done
one stream-one $K3 $M --trunk $TR --ids $IDS --gen 4 --trunk-gb 3 --cache-gb 0.5
one stream-np2 mpirun --oversubscribe -np 2 $K3MPI $M --trunk $TR --ids $IDS --gen 4 \
  --trunk-gb 1.5 --cache-gb 0.25 --threads 1
