#!/bin/sh
# The coded trunk (k3 pack --compress, trunk format 3, docs/CODEC.md) end to end: on every
# committed model --dump-logits bytes equal those of the plain trunk (format 2), pinned and
# streamed at a starved budget, every usable x86 kernel path, 1 and 2 threads, and NEON /
# scalar under qemu when bin/k3-aarch64 exists (make aarch64). Coded tensors must occur;
# --verify passes; a corrupt coded block is refused with a message naming the tensor.
# The slow tier (make check, K3_TEST_FULL=1; about 14 s): every kernel path at 2 threads
# (make test: the chosen one, in 5-row pieces), pieces of 1 row, --verify-reads on tiny5f,
# under qemu the pinned trunk and --prefill-chunk 1 (make test: NEON starved) and the
# scalar path. make test the rest.
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
K3=${K3:-./bin/k3}; K3A=${K3A:-./bin/k3-aarch64}
# the aarch64 build is incremental (kernels_aarch64.sh makes it too): never a stale binary;
# make test builds it before the tests (K3_TEST_BUILT=1), as they run in parallel
if [ -z "${K3_TEST_BUILT:-}" ] && [ "$K3A" = ./bin/k3-aarch64 ] &&
   command -v qemu-aarch64 >/dev/null 2>&1 &&
   command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
  make -s aarch64 >/dev/null 2>&1 || { echo "FAIL: make aarch64"; exit 1; }
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for tag in tiny4 tiny5 tiny5f; do
  M=tests/models/$tag
  ids=$(cat "$M/ref/prompt.txt")
  "$K3" pack "$M" "$tmp/$tag.plain" --quiet || fail "pack $M"
  "$K3" pack "$M" "$tmp/$tag.coded" --compress --verify 2>"$tmp/pack.txt" ||
    { cat "$tmp/pack.txt"; fail "pack --compress --verify $M"; }
  grep -q 'coded ones decoded bit for bit' "$tmp/pack.txt" || fail "$tag: no --verify line"
  ncoded=$(grep -c '^t .* bc2 ' "$tmp/$tag.coded/trunk.k3")
  [ "$ncoded" -gt 10 ] || fail "$tag: only $ncoded coded tensors in the trunk index"
  grep -q '^k3 pack: coded trunk: ' "$tmp/pack.txt" || fail "$tag: no ratio summary"
  ps=$(wc -c < "$tmp/$tag.plain/trunk.k3"); cs=$(wc -c < "$tmp/$tag.coded/trunk.k3")
  [ "$cs" -lt "$ps" ] || fail "$tag: coded trunk $cs bytes, plain $ps"
  run() {
    "$@" "$M" --ids "$ids" --gen 3 --quiet --dump-logits "$tmp/out.f32" >"$tmp/run.txt" 2>&1
  }
  run "$K3" --kernels scalar --threads 1 --trunk "$tmp/$tag.plain" ||
    { cat "$tmp/run.txt"; fail "$tag plain trunk"; }
  mv "$tmp/out.f32" "$tmp/ref.f32"
  n=0
  for k in scalar avx2 avx512; do
    for t in 1 2; do
      [ $t = 2 ] && ! slow && continue
      # --dump-logits holds the prompt's positions: --prefill-chunk 1 takes them through
      # the matvec (T = 1), the others through the prefill kernels
      for b in "--trunk-gb 16" "--trunk-gb 0 --cache-gb 0" "--trunk-gb 16 --prefill-chunk 1"; do
        # shellcheck disable=SC2086
        run "$K3" --kernels $k --threads $t --trunk "$tmp/$tag.coded" $b || {
          grep -q 'lacks\|not compiled' "$tmp/run.txt" && continue
          cat "$tmp/run.txt"; fail "$tag coded --kernels $k --threads $t $b"; }
        cmp -s "$tmp/ref.f32" "$tmp/out.f32" ||
          fail "$tag: logits differ, coded trunk --kernels $k --threads $t $b vs plain trunk"
        n=$((n + 1))
      done
    done
  done
  # pieces of 1 and 7 rows of coded matrices, pinned prefixes ending inside one (the stream
  # cuts coded rows through the row offset table), with and without --verify-reads
  for b in "--trunk-gb 0 --cache-gb 0 --piece-rows 1" \
           "--trunk-gb 0.003 --cache-gb 0 --piece-rows 7" \
           "--trunk-gb 0.004 --cache-gb 0 --piece-rows 3 --verify-reads" \
           "--trunk-gb 0.0021 --cache-gb 0 --piece-rows 5 --threads 2"; do
    case "$tag $b" in *"piece-rows 1"|"tiny5f"*verify-reads) slow || continue;; esac
    # shellcheck disable=SC2086
    run "$K3" --trunk "$tmp/$tag.coded" $b || { cat "$tmp/run.txt"; fail "$tag coded $b"; }
    cmp -s "$tmp/ref.f32" "$tmp/out.f32" || fail "$tag: logits differ, coded trunk $b vs plain"
    n=$((n + 1))
  done
  echo "ok   $tag: $ncoded coded tensors, trunk $cs of $ps bytes; logits == plain trunk in $n runs"
done

# NEON: tiny5 under qemu, coded pinned and starved vs the x86 plain trunk's logits
M=tests/models/tiny5; ids=$(cat "$M/ref/prompt.txt")

# the plan says when the kernels decode a coded trunk slower than a plain one (scalar
# always; avx512 without VBMI, avx2, neon too), and never for a plain trunk
note() { "$K3" --kernels scalar --trunk "$1" "$M" --ids "$ids" --gen 1 2>&1 >/dev/null |
         grep -c '^k3: note: .* is coded (k3 pack --compress); the scalar kernels decode'; }
[ "$(note "$tmp/tiny5.coded")" = 1 ] || fail "no slow-decoder note for scalar on a coded trunk"
[ "$(note "$tmp/tiny5.plain")" = 0 ] || fail "a slow-decoder note on a plain trunk"
echo "ok   the plan notes a coded trunk on a slow decoder (scalar), not a plain one"
if [ -x "$K3A" ] && command -v qemu-aarch64 >/dev/null 2>&1; then
  "$K3" --kernels scalar --trunk "$tmp/tiny5.plain" "$M" --ids "$ids" --gen 3 --quiet \
    --dump-logits "$tmp/ref.f32" >/dev/null 2>&1 || fail "tiny5 reference"
  ks=neon; slow && ks="neon scalar"
  for k in $ks; do
    for b in "--trunk-gb 0 --cache-gb 0" "--trunk-gb 16" "--trunk-gb 16 --prefill-chunk 1"; do
      [ "$b" = "--trunk-gb 0 --cache-gb 0" ] || slow || continue
      # shellcheck disable=SC2086
      qemu-aarch64 "$K3A" --kernels $k --threads 2 --trunk "$tmp/tiny5.coded" $b "$M" \
        --ids "$ids" --gen 3 --quiet --dump-logits "$tmp/out.f32" >"$tmp/run.txt" 2>&1 ||
        { cat "$tmp/run.txt"; fail "aarch64 coded --kernels $k $b"; }
      cmp -s "$tmp/ref.f32" "$tmp/out.f32" || fail "logits differ: aarch64 coded $k $b"
    done
  done
  echo "ok   tiny5 aarch64 (qemu) $ks on the coded trunk == x86 plain trunk$(slow ||
    echo ', starved')"
else
  echo "SKIP: $K3A or qemu-aarch64 missing: coded NEON end to end not run (make aarch64)"
fi

# A corrupt coded block: streamed (no --verify-reads) the structure check refuses it;
# pinned the checksum does. Byte 1 of the first block of the first coded tensor: nesc.
line=$(grep -a -m1 '^t .* bc2 ' "$tmp/tiny5.coded/trunk.k3")
off=$(echo "$line" | cut -d' ' -f3); rows=$(echo "$line" | cut -d' ' -f9)
name=$(echo "$line" | awk '{print $NF}')
cp -r "$tmp/tiny5.coded" "$tmp/bad"
off=$(expr "$off" + 0); pos=$(( off + 4 * (rows + 1) + 1 ))
printf '\376' | dd of="$tmp/bad/trunk.k3" bs=1 seek="$pos" conv=notrunc 2>/dev/null
"$K3" "$M" --ids "$ids" --gen 1 --trunk "$tmp/bad" --trunk-gb 0 --cache-gb 0 \
  >"$tmp/run.txt" 2>&1; rc=$?
[ "$rc" = 1 ] || { cat "$tmp/run.txt"; fail "corrupt coded block: exit $rc, want 1"; }
grep -q "coded tensor '$name' (layer [0-9]*) is corrupt: row 0 block [0-9]" "$tmp/run.txt" ||
  { cat "$tmp/run.txt"; fail "corrupt coded block: no message naming $name"; }
"$K3" "$M" --ids "$ids" --gen 1 --trunk "$tmp/bad" --trunk-gb 16 >"$tmp/run.txt" 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "'$name'.*does not match its checksum" "$tmp/run.txt" ||
  { cat "$tmp/run.txt"; fail "corrupt coded block pinned: exit $rc or no checksum message"; }
echo "ok   corrupt coded block refused: streamed by the structure check, pinned by the checksum"

# A trunk of an earlier k3 (code bc1, another lane order): refused with the fix, exit 1
# (as a format 1 trunk).
cp -r "$tmp/tiny5.coded" "$tmp/old"
sed -i 's/^\(t .*\) bc2 /\1 bc1 /' "$tmp/old/trunk.k3"
grep -aq '^t .* bc1 ' "$tmp/old/trunk.k3" || fail "could not write a bc1 index line"
"$K3" "$M" --ids "$ids" --gen 1 --trunk "$tmp/old" >"$tmp/run.txt" 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "coded bc1.*re-run k3 pack .* --compress" "$tmp/run.txt" ||
  { cat "$tmp/run.txt"; fail "bc1 trunk: exit $rc or no repack message"; }
echo "ok   a bc1 trunk (earlier lane order) is refused with the repack command"
echo "PASS coded_trunk"
