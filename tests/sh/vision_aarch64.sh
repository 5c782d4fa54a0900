#!/bin/sh
# The vision tower's bits on AArch64: tests/c/test_vision built for AArch64 (make aarch64 builds
# it beside the kernel test) under qemu-aarch64 on the NEON path: every stage against the NumPy
# fixtures and the rows' digest equal to the native x86 run's (test_vision pins it); and
# tests/c/test_attn (the attention tiles) there when built.
BUILD=${BUILD:-build}
fail() { echo "FAIL: $*"; exit 1; }
arm=build/aarch64/tests/test_vision
if ! command -v qemu-aarch64 >/dev/null 2>&1; then
  echo "SKIP: qemu-aarch64 not installed"; exit 0
fi
if [ ! -x "$arm" ]; then
  [ -n "${K3_TEST_BUILT:-}" ] && { echo "SKIP: $arm not built (make aarch64)"; exit 0; }
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || { echo "SKIP: no aarch64-linux-gnu-gcc";
    exit 0; }
  make -s CC=aarch64-linux-gnu-gcc BUILD=build/aarch64 BIN=bin/k3-aarch64 "$arm" >/dev/null \
    || fail "cannot build $arm"
fi
native=$BUILD/tests/test_vision
[ -x "$native" ] || make -s "$native" >/dev/null || fail "cannot build $native"
a=$("$native" | grep -o 'rows digest [0-9a-f]*') || fail "native test_vision"
out=$(qemu-aarch64 "$arm") || { echo "$out"; fail "test_vision under qemu-aarch64"; }
echo "$out" | grep -q 'kernels neon' || fail "the NEON path did not run: $out"
b=$(echo "$out" | grep -o 'rows digest [0-9a-f]*')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "x86 [$a] vs aarch64 [$b]"
# the attention tiles' NEON twin against the scalar reference, bit for bit (tests/c/test_attn.c)
attn=build/aarch64/tests/test_attn
if [ -x "$attn" ]; then
  out=$(qemu-aarch64 "$attn") || { echo "$out"; fail "test_attn under qemu-aarch64"; }
  echo "$out" | grep -q '^ok   neon: attention tiles == scalar' || fail "NEON attention: $out"
  echo "ok   attention tiles on aarch64 (neon, qemu) == scalar, bit for bit"
fi
echo "ok   vision tower on aarch64 (neon, qemu): every stage within 1e-5, $b as on x86"
