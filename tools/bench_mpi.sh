#!/bin/sh
# The cost of the split (docs/DISTRIBUTED.md) on the full-width slice, A/B in one run, REPS
# reps interleaved. Run it under flock /var/tmp/bench.lock (a shared VM).
#   resident: one process with 2 threads (one-2t) against mpirun -np 2 with 1 thread each,
#     trunk resident (the shard mappings), under each Open MPI flag set of MPIVARS
#     (label=flags;label=flags...; default: as k3-mpi runs, yielding while it waits, and
#     spinning: Open MPI's own default)
#   stream: np 2 at --trunk-gb 1.5 --cache-gb 0.25 a rank against one process at 3 / 0.5
#     (each rank's peak RSS, bytes read per token, the same ids)
# Usage: tools/bench_mpi.sh OUT.jsonl [resident] [stream]   (K3, K3MPI: the binaries, copy
# them first when a build may run meanwhile); tools/bench_mpi_summary.py OUT.jsonl sums up.
set -u
OUT=$1; shift; WHAT=${*:-resident stream}; REPS=${REPS:-3}
M=${M:-/var/tmp/k3mem/fw6}; TR=${TR:-/var/tmp/fw6t/plain}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; GEN=${GEN:-4}
K3=${K3:-./bin/k3}; K3MPI=${K3MPI:-./bin/k3-mpi}
MPIVARS=${MPIVARS:-"np2-1t=;np2-1t-spin=--mca mpi_yield_when_idle 0"}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: > "$OUT"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
one() {   # LABEL CMD...: the run's --out JSON, one line, labelled, with the command (stdin:
          # /dev/null, mpirun would read the variants' list)
  label=$1; shift
  rm -f $W/r.json
  "$@" --out $W/r.json --quiet < /dev/null > $W/ids 2>$W/err \
    || { echo "$label: exit $?: $(tail -c 300 $W/err)" >&2; return; }
  printf '{"label": "%s", "cmd": "%s", "ids": "%s", "report": %s}\n' "$label" "$*" \
    "$(cat $W/ids)" "$(tr -d '\n' < $W/r.json)" >> "$OUT"
  echo "$label: $(sed -n 's/.*"seconds_per_token": \([0-9.]*\).*/\1/p' $W/r.json |
    head -1) s/token" >&2
}
case " $WHAT " in *" resident "*)
  for r in $(seq "$REPS"); do
    one one-2t $K3 $M --ids $IDS --gen $GEN --threads 2 --cache-gb 1000
    echo "$MPIVARS" | tr ';' '\n' | while IFS='=' read -r label flags; do
      [ -n "$label" ] || continue
      # shellcheck disable=SC2086  # flags are words
      one "$label" mpirun --oversubscribe $flags -np 2 $K3MPI $M --ids $IDS --gen $GEN \
        --threads 1 --cache-gb 1000
    done
  done;;
esac
case " $WHAT " in *" stream "*)
  for r in $(seq "${SREPS:-1}"); do
    one stream-one $K3 $M --trunk $TR --ids $IDS --gen $GEN --trunk-gb 3 --cache-gb 0.5 \
      --threads 2
    one stream-np2 mpirun --oversubscribe ${SFLAGS:-} -np 2 $K3MPI $M --trunk $TR --ids $IDS \
      --gen $GEN --trunk-gb 1.5 --cache-gb 0.25 --threads 1
  done;;
esac
