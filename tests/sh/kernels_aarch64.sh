#!/bin/sh
# Cross-path, cross-thread and cross-architecture bit identity of the kernels.
# 1. --dump-logits on tests/models/tiny5 byte for byte: --kernels scalar / auto / every
#    usable SIMD path, --threads 1 / 2 / 3, and bin/k3-aarch64 --kernels neon under qemu.
# 2. The slow tier (make check, K3_TEST_FULL=1; the kernel test under qemu is most of a
#    minute): the kernel conformance test built for AArch64 (make aarch64-test) under
#    qemu-aarch64: NEON vs scalar bit for bit, and the reference fingerprints
#    (transcendentals, scalar matmul) equal to the native x86 run's; the codec test (coded
#    NEON matvec); bin/k3-aarch64 --kernels scalar too.
K3=${K3:-./bin/k3}; BUILD=${BUILD:-build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }

# make test builds all this before the tests (K3_TEST_BUILT=1), as they run in parallel
mk() { [ -n "${K3_TEST_BUILT:-}" ] || make -s "$@"; }
QEMU=qemu-aarch64
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
  || ! command -v qemu-aarch64 >/dev/null 2>&1; then
  echo "SKIP: aarch64-linux-gnu-gcc or qemu-aarch64 not installed: NEON path not run"
  QEMU=
elif slow; then
  native=$BUILD/tests/test_kernels
  [ -x "$native" ] || mk "$native" >/dev/null 2>&1
  [ -x "$native" ] || fail "no native $native"
  "$native" > "$tmp/native.txt" || { cat "$tmp/native.txt"; fail "native kernel test"; }
  mk aarch64-test >"$tmp/build.txt" 2>&1 || { tail -20 "$tmp/build.txt";
    fail "make aarch64-test"; }
  qemu-aarch64 build/aarch64/tests/test_kernels > "$tmp/arm.txt" \
    || { cat "$tmp/arm.txt"; fail "kernel test under qemu-aarch64"; }
  grep -q '^ok   neon:' "$tmp/arm.txt" || { cat "$tmp/arm.txt";
    fail "neon path did not run under qemu"; }
  qemu-aarch64 build/aarch64/tests/test_codec > "$tmp/codec.txt" \
    || { cat "$tmp/codec.txt"; fail "codec test under qemu-aarch64"; }
  grep -q 'matmul on scalar neon' "$tmp/codec.txt" || { cat "$tmp/codec.txt";
    fail "coded neon path did not run under qemu"; }
  echo "ok   aarch64 under qemu: coded (K3_W_BF16C) neon == BF16 matmul"
  a=$(grep fingerprint "$tmp/native.txt"); b=$(grep fingerprint "$tmp/arm.txt")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "reference fingerprints differ: x86 [$a] aarch64 [$b]"
  echo "ok   aarch64 under qemu: neon == scalar; fingerprints equal to x86"
fi

M=tests/models/tiny5
[ -f "$M/ref/prompt.txt" ] || fail "$M/ref/prompt.txt is missing"
ids=$(cat "$M/ref/prompt.txt")
run() { "$@" "$M" --ids "$ids" --gen 0 --quiet --dump-logits "$tmp/out.f32" >"$tmp/run.txt" 2>&1; }
run "$K3" --kernels scalar --threads 1 || { cat "$tmp/run.txt";
  fail "k3 --kernels scalar --threads 1 on $M"; }
mv "$tmp/out.f32" "$tmp/ref.f32"
for k in auto avx2 avx512; do
  for t in 1 2 3; do
    run "$K3" --kernels "$k" --threads "$t" || { grep -q 'lacks\|not compiled' "$tmp/run.txt" \
      && continue; cat "$tmp/run.txt"; fail "k3 --kernels $k --threads $t"; }
    cmp -s "$tmp/ref.f32" "$tmp/out.f32" \
      || fail "logits differ: --kernels $k --threads $t vs --kernels scalar --threads 1"
    echo "ok   logits --kernels $k --threads $t == scalar"
  done
done
[ -n "$QEMU" ] || exit 0
mk aarch64 >"$tmp/build.txt" 2>&1 || { tail -20 "$tmp/build.txt"; fail "make aarch64"; }
ks=neon; slow && ks="neon scalar"
for k in $ks; do
  run qemu-aarch64 bin/k3-aarch64 --kernels "$k" --threads 2 \
    || { cat "$tmp/run.txt"; fail "k3-aarch64 --kernels $k"; }
  cmp -s "$tmp/ref.f32" "$tmp/out.f32" || fail "logits differ: aarch64 --kernels $k vs x86 scalar"
  echo "ok   logits aarch64 (qemu) --kernels $k == x86 scalar"
done
