#!/bin/sh
# Vision preprocessing (K3_VISION.md §2.2-2.7, src/image/preprocess.c, resample.c) against the
# Pillow + NumPy reference tools/vision_prep_ref.py, which wrote tests/images/prep.txt:
#   NAME SIZE SHA_RGB SHA_PATCHES
# SIZE "plan": the budget rule's size (the corpus is kept as is; the big/ files are over the
# budget: 7301 and 7400 wide, 7200 tall, 3650 x 3601 over 65,536 patches, so Pillow's BICUBIC,
# premultiplied for RGBA, NEAREST for P); SIZE WxH: k3 image --resize WxH (down, up, one axis
# only, 1x1, on every PIL mode and transparency kind). k3 image --rgb (the resized, filled
# pixels) and --patches (float32) must hash to the reference's bytes exactly: every step is
# integer arithmetic or one IEEE rounding per operation, done in the reference's order, so
# equality (not a tolerance) is the contract.
. tests/sh/lib/check.sh
D=tests/images
command -v sha256sum > /dev/null || { echo "SKIP: no sha256sum"; exit 0; }
[ -f $D/prep.txt ] || { echo "FAIL: $D/prep.txt missing"; exit 1; }
n=0
while read -r name size hrgb hpv; do
  set --
  [ "$size" = plan ] || set -- --resize "$size"
  if ! $K3 image $D/$name "$@" --rgb $T/rgb --patches $T/pv > /dev/null 2> $T/se; then
    bad "$name $size: k3 image failed: $(cat $T/se)"; continue
  fi
  got=$(sha256sum $T/rgb $T/pv | cut -d' ' -f1 | tr '\n' ' ')
  if [ "$got" = "$hrgb $hpv " ]; then n=$((n + 1))
  else
    case $got in "$hrgb "*) what="patches" ;; *) what="resized RGB" ;; esac
    bad "$name at $size: the $what differ from the reference's"
  fi
done < $D/prep.txt
ok "$n images preprocessed to the reference's bytes (RGB and float32 patches)"

# the plan behind the big ones, and the patch file's size: L x 588 float32
$K3 image --json $D/big/big_l_budget.png > $T/so 2>&1
grep -q '"resized":\[3614,3566\],"pad":\[26,18\],"grid":\[256,260\],"patches":66560' $T/so &&
  ok "budget plan: 3650x3601 -> 3614x3566, 66560 patches" || bad "budget plan: $(cat $T/so)"
$K3 image $D/png_33x7.png --patches $T/pv > /dev/null &&
  [ "$(wc -c < $T/pv)" -eq $((8 * 588 * 4)) ] && ok "--patches: 8 patches x 588 float32" ||
  bad "--patches size $(wc -c < $T/pv)"
for a in "--resize" "--resize 0x5" "--resize 9x" "--resize 8000x2" "--patches"; do
  # shellcheck disable=SC2086
  $K3 image $D/png_g8.png $a > $T/so 2> $T/se; rc=$?
  [ $rc = 2 ] && ok "k3 image $a: exit 2" || bad "k3 image $a: exit $rc, $(cat $T/se)"
done
exit $fail
