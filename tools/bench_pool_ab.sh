#!/bin/sh
# The pool's spin time A/B on decode's pattern of calls (tools/bench_pool_ab.c), in one
# process, tokens alternated; under nice -n -20 flock /var/tmp/bench.lock (LOCK= : none):
#   sh tools/bench_pool_ab.sh [LAYERS TOKENS SPIN_A SPIN_B THREADS RUNS]
# Needs the library objects (make). B/A < 1: spin B faster.
set -eu
L=${1:-6}; N=${2:-40}; A=${3:-0}; B=${4:-300}; T=${5:-0}; RUNS=${6:-3}
W=${WORK:-/tmp/k3_pool_ab}; mkdir -p "$W"
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -pthread -static -o "$W/ab" tools/bench_pool_ab.c \
  $(ls build/*/*.o | grep -v cli/main.o) -lm
i=0
while [ "$i" -lt "$RUNS" ]; do
  nice -n -20 ${LOCK-flock /var/tmp/bench.lock} "$W/ab" "$L" "$N" "$A" "$B" "$T"
  i=$((i + 1))
done
