#!/bin/sh
# In-process A/B of two versions of a prefill GEMM (src/kernels/kernels_avx2_gemm.c, or with
# ISA=avx512 kernels_avx512_gemm.c) on one shape (tools/bench_gemm_ab.c), one thread, under
# flock /var/tmp/bench.lock:
#   [ISA=avx2|avx512] [FA=-D..] [FB=-D..] sh tools/bench_gemm_ab.sh OLD.c NEW.c \
#       [ROWS COLS T bf16|mxfp4|bf16c REPS RUNS]
# ISA=avx512t: OLD.c and NEW.c are versions of kernels_avx512.c (the register tiles, the
# path a 1 MB-L2 CPU runs) and the coded file is CODED_A / CODED_B (default: the tree's
# kernels_avx512_coded.c); ISA=avx2t the same for kernels_avx2.c with its GEMM file
# GEMM_A / GEMM_B (and the kernels_avx2_coded.c beside OLD.c / NEW.c where there is one).
# Both call the path's whole matmul entry (tools/bench_gemm_ab_ops.c).
# FA, FB: extra compiler flags for OLD, NEW (e.g. FB=-DTM=4 to try a tile on the same file).
# Needs the library objects (make). Ratios > 1: NEW faster than OLD. The GEMM's %-of-peak
# is k3 bench-kernels' (same run's FMA peak); this tool is for paired A/B of a change.
set -eu
A=$1; B=$2; ROWS=${3:-2048}; COLS=${4:-7168}; T=${5:-64}; KIND=${6:-bf16}
REPS=${7:-21}; RUNS=${8:-3}; ISA=${ISA:-avx2}
W=${WORK:-/tmp/k3_gemm_ab}; mkdir -p "$W"
F="-O2 -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-fast-math -Iinclude -Isrc/kernels -pthread"
F="$F -mavx2 -mfma -mf16c"
case $ISA in avx512*) F="$F -mavx512f -mavx512bw -mavx512vl -mavx512dq" ;; esac
rm -f "$W"/g*.o
for v in 0 1; do
  src=$A; x=${FA:-}; [ "$v" = 1 ] && { src=$B; x=${FB:-}; }
  R="-DK3G=k3_g$v -Dk3_avx512_mxtab=k3_mt$v -Dk3_avx512_prefill_gemm=k3_pg$v"
  R="$R -Dk3_avx512_coded_matmul=k3_cm$v -Dk3_avx512_codec_vbmi=k3_cv$v"
  R="$R -Dk3_avx2_gemm=k3_ag$v -Dk3_avx2_gemm_scratch=k3_gs$v -Dk3_avx2_coded_panel=k3_cp$v"
  R="$R -Dk3_avx2_scratch=k3_as$v"
  case $ISA in
  avx512t)
    cd=${CODED_A:-src/kernels/kernels_avx512_coded.c}; [ "$v" = 1 ] && cd=${CODED_B:-$cd}
    R="$R -DK3OPS=k3_ops$v -Dk3_kernels_avx512=k3_ops$v"
    # shellcheck disable=SC2086
    { gcc $F $x $R -c "$src" -o "$W/g${v}a.o" && gcc $F $x $R -c "$cd" -o "$W/g${v}b.o" &&
      gcc $F $x $R -c tools/bench_gemm_ab_ops.c -o "$W/g${v}c.o"; } ;;
  avx2t)
    gm=${GEMM_A:-src/kernels/kernels_avx2_gemm.c}; [ "$v" = 1 ] && gm=${GEMM_B:-$gm}
    R="$R -DK3OPS=k3_ops$v -Dk3_kernels_avx2=k3_ops$v -Dk3_avx2_fold2=k3_f2$v"
    R="$R -Dk3_avx2_coded_matvec=k3_cmv$v -Dk3_avx2_coded_row=k3_cr$v"
    cd2=$(dirname "$src")/kernels_avx2_coded.c   # the coded kernels beside it, if split out
    # shellcheck disable=SC2086
    { gcc $F $x $R -c "$src" -o "$W/g${v}a.o" && gcc $F $x $R -c "$gm" -o "$W/g${v}b.o" &&
      gcc $F $x $R -c tools/bench_gemm_ab_ops.c -o "$W/g${v}c.o" &&
      { [ ! -f "$cd2" ] || gcc $F $x $R -c "$cd2" -o "$W/g${v}d.o"; }; } ;;
  *)
    # shellcheck disable=SC2086
    gcc $F $x -Dk3_${ISA}_gemm=k3_g$v -Dk3_avx2_gemm_scratch=k3_gs$v -Dk3_avx2_scratch=k3_as$v \
      -Dk3_avx512_gemm_scratch=k3_g5s$v -c "$src" -o "$W/g$v.o" ;;
  esac
done
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -pthread -static -o "$W/ab" tools/bench_gemm_ab.c \
  "$W"/g*.o $(ls build/*/*.o | grep -v cli/main.o) -lm
for i in $(seq 1 "$RUNS"); do
  flock /var/tmp/bench.lock "$W/ab" "$ROWS" "$COLS" "$T" "$KIND" "$REPS"
done
