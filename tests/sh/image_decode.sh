#!/bin/sh
# k3 image (issue 37, src/image/): every file of tests/images/manifest.txt (made by
# tools/gen_images.py with Pillow). "ok NAME": k3 image --rgba equals ref/NAME.rgba, Pillow's
# decode converted to RGBA, byte for byte. "bad NAME CODE TEXT": k3 image exits CODE with
# TEXT in its message. Then the text and --json reports, and the usage errors (exit 2).
. tests/sh/lib/check.sh
D=tests/images
[ -f $D/manifest.txt ] || { echo "FAIL: $D/manifest.txt missing"; exit 1; }
nok=0; nbad=0
while read -r kind name code text; do
  case $kind in
    ok)
      if $K3 image --rgba $T/out.rgba $D/$name > $T/so 2> $T/se; then
        if cmp -s $T/out.rgba $D/ref/$name.rgba; then nok=$((nok + 1))
        else bad "$name: pixels differ from Pillow's ($(cmp $T/out.rgba $D/ref/$name.rgba \
          2>&1 | head -n 1))"; fi
      else bad "$name: k3 image failed: $(cat $T/se)"; fi ;;
    bad)
      $K3 image --rgba $T/out.rgba $D/$name > $T/so 2> $T/se; rc=$?
      if [ $rc = "$code" ] && grep -qF -- "$text" $T/se && grep -qF -- "$name" $T/se; then
        nbad=$((nbad + 1))
      else bad "$name: exit $rc (want $code), message '$(cat $T/se)' (want '$text')"; fi ;;
  esac
done < $D/manifest.txt
ok "$nok files decode to Pillow's pixels, $nbad refused as expected"

# the report: size, mode, plan (K3_VISION.md 2.2: 33x7 -> pad 23,21, grid 2x4, 2 rows)
$K3 image $D/png_33x7.png > $T/so 2>&1
grep -q 'PNG 33 x 7, mode RGB' $T/so && grep -q 'grid 2 x 4' $T/so &&
  grep -q 'rows: 2 ' $T/so && ok "report: $(head -n 1 $T/so)" || bad "report: $(cat $T/so)"
$K3 image --json $D/gif_trns.gif > $T/so 2>&1
grep -q '"format":"GIF","width":40,"height":30,"mode":"P"' $T/so &&
  grep -q '"grid":\[4,4\],"patches":16,"rows":4,"extra_positions":3' $T/so &&
  ok "--json: $(cat $T/so)" || bad "--json: $(cat $T/so)"
for a in "" "--rgba" "--bogus $D/png_g8.png" "$D/png_g8.png $D/png_g1.png"; do
  # shellcheck disable=SC2086
  $K3 image $a > $T/so 2> $T/se; rc=$?
  [ $rc = 2 ] && ok "k3 image $a: exit 2" || bad "k3 image $a: exit $rc, $(cat $T/se)"
done
$K3 image $T/missing.png 2> $T/se; rc=$?
[ $rc = 1 ] && grep -q missing.png $T/se && ok "a missing file: exit 1" ||
  bad "a missing file: exit $rc, $(cat $T/se)"
exit $fail
