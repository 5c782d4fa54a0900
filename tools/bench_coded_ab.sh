#!/bin/sh
# In-process A/B of two versions of src/kernels/kernels_avx512_coded.c on one matvec
# shape (tools/bench_coded_ab.c), one thread, under flock /var/tmp/bench.lock:
#   sh tools/bench_coded_ab.sh OLD.c NEW.c [ROWS COLS REPS RUNS]
# Needs the library objects (make libobj). Ratios < 1: NEW (v0, v2) faster than OLD.
set -eu
A=$1; B=$2; ROWS=${3:-12288}; COLS=${4:-7168}; REPS=${5:-24}; RUNS=${6:-3}
W=${WORK:-/tmp/k3_coded_ab}; mkdir -p "$W"
F="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Iinclude -Isrc/kernels -pthread"
F="$F -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mavx2"
for v in 0 1 2 3; do
  src=$B; [ $((v % 2)) = 1 ] && src=$A
  # shellcheck disable=SC2086
  gcc $F -Dk3_avx512_coded_matmul=k3_cm_v$v -Dk3_avx512_codec_vbmi=k3_cv_v$v -c "$src" \
    -o "$W/v$v.o"
done
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -pthread -static -o "$W/ab" tools/bench_coded_ab.c \
  "$W"/v?.o $(ls build/*/*.o | grep -v cli/main.o) -lm
for i in $(seq 1 "$RUNS"); do flock /var/tmp/bench.lock "$W/ab" "$ROWS" "$COLS" "$REPS"; done
