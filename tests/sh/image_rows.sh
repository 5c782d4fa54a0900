#!/bin/sh
# k3 image FILE --model DIR --rows OUT (issue 37, docs/VISION.md "Wiring"): the projector's
# rows of one image through the committed tiny vision tower (tests/models/tiny5_vision):
# N x hidden float32 (N from the patch plan, hidden the text model's 256), the same bits at 1
# and 2 threads and on every kernel path, another image other rows, and the refusals. (The
# tower's values against the float64 reference are tests/c/test_vision.c's: its fixtures
# run synthetic patches, not a decoded image, so none is compared here.)
. tests/sh/lib/check.sh
M=tests/models/tiny5_vision; D=tests/images
[ -f $M/config.json ] || { echo "FAIL: $M missing"; exit 1; }
sz() { wc -c < "$1" | tr -d ' '; }

# jpg_prog_420: 48 x 40, grid 4 x 4, 4 rows; big_rgb_wide: resized, 256 rows
for f in jpg_prog_420.jpg big/big_rgb_wide.png; do
  n=$($K3 image $D/$f --json | sed -n 's/.*"rows":\([0-9]*\).*/\1/p')
  b=$(basename $f)
  $K3 image $D/$f --model $M --rows $T/$b.1 --threads 1 > /dev/null 2> $T/se &&
    $K3 image $D/$f --model $M --rows $T/$b.2 --threads 2 > /dev/null 2>> $T/se ||
    bad "$f: $(cat $T/se)"
  [ "$(sz $T/$b.1)" = $((n * 256 * 4)) ] && ok "$f: $n rows x 256 float32 ($(sz $T/$b.1) bytes)" ||
    bad "$f: $(sz $T/$b.1) bytes, want $n x 256 x 4"
  cmp -s $T/$b.1 $T/$b.2 && ok "$f: the same rows at 1 and 2 threads" ||
    bad "$f: rows differ between 1 and 2 threads"
  grep -q "vision tower: $n rows from" $T/se && ok "$f: the tower's line on stderr" ||
    bad "$f: no tower line: $(cat $T/se)"
done
for k in scalar avx2 avx512; do
  # a path this machine lacks is refused (exit 2): skipped
  $K3 image $D/jpg_prog_420.jpg --model $M --rows $T/k.$k --kernels $k > /dev/null 2> $T/se ||
    continue
  grep -q "kernels $k" $T/se || bad "kernels $k: not the path run: $(cat $T/se)"
  cmp -s $T/k.$k $T/jpg_prog_420.jpg.1 && ok "kernels $k: the same rows" ||
    bad "kernels $k: rows differ"
done
$K3 image $D/jpg_420.jpg --model $M --rows $T/other > /dev/null 2>&1 &&
  ! cmp -s $T/other $T/jpg_prog_420.jpg.1 && ok "another image: other rows" ||
  bad "another image gave the same rows (or failed)"

chk() {   # chk CODE TEXT ARGS...: exit CODE and TEXT on stderr
  c=$1; w=$2; shift 2
  $K3 image "$@" > /dev/null 2> $T/se; r=$?
  [ $r = "$c" ] && grep -q -- "$w" $T/se && ok "refused ($r): $w" ||
    bad "$*: exit $r want $c, stderr: $(cat $T/se)"
}
chk 2 "needs --rows" $D/jpg_420.jpg --model $M
chk 2 "needs --model" $D/jpg_420.jpg --rows $T/x
chk 2 "needs a path" $D/jpg_420.jpg --model $M --rows
chk 2 "nothere" $D/jpg_420.jpg --model $M --rows $T/nothere/x
chk 2 "--threads needs" $D/jpg_420.jpg --model $M --rows $T/x --threads 0
chk 2 "--kernels" $D/jpg_420.jpg --model $M --rows $T/x --kernels sse9
[ -e $T/x ] && bad "a refused run left $T/x" || ok "a refused run writes nothing"
$K3 image $D/jpg_420.jpg --model tests/models/tiny5 --rows $T/y > /dev/null 2> $T/se; r=$?
[ $r = 2 ] && [ ! -e $T/y ] && ok "a model without a usable tower: exit 2, $(head -c 90 $T/se)" ||
  bad "tiny5 (no tower): exit $r, $(cat $T/se)"
exit $fail
