#!/bin/sh
# In-process A/B of two versions of the decode matvec kernels (tools/bench_matvec_ab.c):
#   [ISA=avx512|avx2] [FA=-D..] [FB=-D..] sh tools/bench_matvec_ab.sh OLD_DIR NEW_DIR [REPS] [ONLY]
# FA, FB: extra compiler flags for OLD, NEW (e.g. FB=-DPF=2048 on the same folder).
# OLD_DIR, NEW_DIR: folders holding a version of src/kernels/ (e.g. `git worktree` or
# `git archive` of the old commit's src/kernels, and src/kernels). ISA avx512 builds
# kernels_avx512.c + kernels_avx512_coded.c + kernels_avx2.c of each, avx2 kernels_avx2.c
# (and kernels_avx2_coded.c where the folder has one);
# each build's global symbols get a _vN suffix (ld -r + objcopy), the rest links to the
# library (make first). Timed under nice -n -20 flock /var/tmp/bench.lock (root; LOCK= : no
# flock here, for a caller that holds the lock over several A/Bs).
set -eu
A=$1; B=$2; REPS=${3:-15}; ONLY=${4:-}; ISA=${ISA:-avx512}
W=${WORK:-/tmp/k3_mv_ab}; mkdir -p "$W"
F="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Iinclude -pthread"
F5="$F -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mavx2"
F2="$F -mavx2 -mfma -mf16c"
# shellcheck disable=SC2086
for v in 0 1; do
  d=$A; x=${FA:-}; [ "$v" = 1 ] && { d=$B; x=${FB:-}; }
  gcc $F2 $x -I"$d" -c "$d/kernels_avx2.c" -o "$W/a2_$v.o"
  objs="$W/a2_$v.o"
  rm -f "$W/ac_$v.o"
  if [ -f "$d/kernels_avx2_coded.c" ]; then     # the AVX2 coded kernels, when split out
    gcc $F2 $x -I"$d" -c "$d/kernels_avx2_coded.c" -o "$W/ac_$v.o"
    objs="$objs $W/ac_$v.o"
  fi
  if [ "$ISA" = avx512 ]; then
    gcc $F5 $x -I"$d" -c "$d/kernels_avx512.c" -o "$W/a5_$v.o"
    gcc $F5 $x -I"$d" -c "$d/kernels_avx512_coded.c" -o "$W/c5_$v.o"
    objs="$objs $W/a5_$v.o $W/c5_$v.o"
  fi
  ld -r -o "$W/v$v.o" $objs
  nm -g --defined-only "$W/v$v.o" | awk -v s="_v$v" '{print $3, $3 s}' > "$W/syms$v"
  echo "k3_kernels_${ISA}_v$v k3_mv_v$v" >> "$W/syms$v"
  objcopy --redefine-syms="$W/syms$v" "$W/v$v.o" "$W/v$v.r.o"
  objcopy --redefine-sym "k3_kernels_${ISA}_v$v=k3_mv_v$v" "$W/v$v.r.o"
done
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc/kernels -Isrc/bench -pthread -static -o "$W/ab" \
  tools/bench_matvec_ab.c "$W/v0.r.o" "$W/v1.r.o" $(ls build/*/*.o | grep -v cli/main.o) -lm
nice -n -20 ${LOCK-flock /var/tmp/bench.lock} "$W/ab" "$REPS" "$ONLY"
