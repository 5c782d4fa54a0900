#!/bin/sh
# In-process A/B of two versions of src/kernels/kernels_avx2_gemm.c on one prefill shape
# (tools/bench_gemm_ab.c), one thread, under flock /var/tmp/bench.lock:
#   sh tools/bench_gemm_ab.sh OLD.c NEW.c [ROWS COLS T bf16|mxfp4 REPS RUNS]
# Needs the library objects (make). Ratios > 1: NEW faster than OLD. The GEMM's %-of-peak
# is k3 bench-kernels' (same run's FMA peak); this tool is for paired A/B of a change.
set -eu
A=$1; B=$2; ROWS=${3:-2048}; COLS=${4:-7168}; T=${5:-64}; KIND=${6:-bf16}
REPS=${7:-21}; RUNS=${8:-3}
W=${WORK:-/tmp/k3_gemm_ab}; mkdir -p "$W"
F="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Iinclude -Isrc/kernels -pthread"
F="$F -mavx2 -mfma -mf16c"
for v in 0 1; do
  src=$A; [ "$v" = 1 ] && src=$B
  # shellcheck disable=SC2086
  gcc $F -Dk3_avx2_gemm=k3_g$v -Dk3_avx2_gemm_scratch=k3_gs$v -c "$src" -o "$W/g$v.o"
done
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -pthread -static -o "$W/ab" tools/bench_gemm_ab.c \
  "$W"/g?.o $(ls build/*/*.o | grep -v cli/main.o) -lm
for i in $(seq 1 "$RUNS"); do
  flock /var/tmp/bench.lock "$W/ab" "$ROWS" "$COLS" "$T" "$KIND" "$REPS"
done
