#!/bin/sh
# Bit-identity manifest: sha256 of --dump-logits (and the generated ids) for every
# committed model at a resident and a starved budget, every x86 kernel path, 1 and 2
# threads, and NEON/scalar under qemu when bin/k3-aarch64 exists. Run it before and
# after a change that must not move a bit, then diff the two manifests. Every resident and
# starved line is also run on a coded trunk (k3 pack --compress, pinned resp. starved),
# which must give the same hash (checked here, no extra lines).
#   sh tools/check_bits.sh OUT.txt [EXTRA_MODEL_DIR:IDS ...]
# K3=path of the x86 binary (default ./bin/k3), K3A=the AArch64 one (default
# ./bin/k3-aarch64). Trunks are packed into $WORK (default /var/tmp/k3bits).
set -eu
OUT=$1; shift
K3=${K3:-./bin/k3}; K3A=${K3A:-./bin/k3-aarch64}
WORK=${WORK:-/var/tmp/k3bits}; mkdir -p "$WORK"
: > "$OUT"
models="tests/models/tiny5:$(cat tests/models/tiny5/ref/prompt.txt)"
models="$models tests/models/tiny4:$(cat tests/models/tiny4/ref/prompt.txt)"
models="$models tests/models/tiny5f:$(cat tests/models/tiny5f/ref/prompt.txt)"
for x in "$@"; do models="$models $x"; done
line() {   # NAME BIN ARGS...: one manifest line
  name=$1; bin=$2; shift 2
  got=$($bin "$@" --dump-logits "$WORK/l.f32" --quiet 2>"$WORK/err") || { cat "$WORK/err"; exit 1; }
  echo "$name $(sha256sum < "$WORK/l.f32" | cut -c1-16) $got" >> "$OUT"
}
same() {   # NAME BIN ARGS...: must equal the manifest's last line
  name=$1; bin=$2; shift 2
  got=$($bin "$@" --dump-logits "$WORK/l.f32" --quiet 2>"$WORK/err") || { cat "$WORK/err"; exit 1; }
  h="$(sha256sum < "$WORK/l.f32" | cut -c1-16) $got"
  last=$(tail -n 1 "$OUT")
  case "$last" in *" $h") ;; *) echo "check_bits: $name differs: [$h] vs [$last]"; exit 1;; esac
}
# the x86 paths this CPU runs (a machine without AVX-512 skips those lines, said on stderr)
kinds=
for k in scalar avx2 avx512; do
  if $K3 tests/models/tiny5 --ids 1 --gen 1 --kernels $k --quiet >/dev/null 2>&1; then
    kinds="$kinds $k"
  else echo "check_bits: --kernels $k: not on this CPU, its lines left out" >&2; fi
done
for mi in $models; do
  m=${mi%%:*}; ids=${mi#*:}; tag=$(basename "$m")
  tr="$WORK/$tag.trunk"
  $K3 pack "$m" "$tr" --quiet
  ctr="$WORK/$tag.coded"
  $K3 pack "$m" "$ctr" --compress --quiet
  for k in $kinds; do
    for t in 1 2; do
      line "$tag resident $k t$t" $K3 "$m" --ids "$ids" --gen 4 --kernels $k --threads $t
      same "$tag coded pinned $k t$t" $K3 "$m" --ids "$ids" --gen 4 --kernels $k --threads $t \
        --trunk "$ctr" --trunk-gb 16
      line "$tag starved $k t$t" $K3 "$m" --ids "$ids" --gen 4 --kernels $k --threads $t \
        --trunk "$tr" --trunk-gb 0 --cache-gb 0
      same "$tag coded starved $k t$t" $K3 "$m" --ids "$ids" --gen 4 --kernels $k --threads $t \
        --trunk "$ctr" --trunk-gb 0 --cache-gb 0
    done
  done
  line "$tag chunk3 auto t2" $K3 "$m" --ids "$ids" --gen 4 --prefill-chunk 3 --threads 2
  if [ -x "$K3A" ] && command -v qemu-aarch64 >/dev/null && [ "$tag" != m2 ]; then
    for k in neon scalar; do
      line "$tag resident $k qemu" qemu-aarch64 "$K3A" "$m" --ids "$ids" --gen 4 --kernels $k
      line "$tag starved $k qemu" qemu-aarch64 "$K3A" "$m" --ids "$ids" --gen 4 --kernels $k \
        --trunk "$tr" --trunk-gb 0 --cache-gb 0
      same "$tag coded starved $k qemu" qemu-aarch64 "$K3A" "$m" --ids "$ids" --gen 4 \
        --kernels $k --trunk "$ctr" --trunk-gb 0 --cache-gb 0
    done
  fi
done
echo "check_bits: $(wc -l < "$OUT") lines in $OUT"
