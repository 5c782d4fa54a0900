#!/bin/sh
# Images in the one-shot command (issue 37, K3_VISION.md §5): k3 MODEL --prompt TEXT --image
# FILE on the committed tiny model with its tiny vision tower (tests/models/tiny5_vision).
# The rendered ids equal tools/tok/gen_image_goldens.js's (tiktoken over an independent
# transcription of the template: tests/images/chat_ids.txt); the same bits at 1 and 2
# threads, at any prefill chunk (an image's rows crossing chunks) and on every kernel path the
# machine has; the rows matter (another image, other logits); the refusals.
. tests/sh/lib/check.sh
M=tests/models/tiny5_vision; TK=tests/tok/tiny; D=tests/images
[ -f $M/config.json ] || { echo "FAIL: $M missing"; exit 1; }
ids() { sed -n 's/.*"prompt_ids": \[\([^]]*\)\].*/\1/p' "$1" | tr -d ' '; }
gold() { sed -n "s/^$1 //p" $D/chat_ids.txt; }

$K3 $M --tok $TK --prompt 'What is this?' --image $D/png_rgba8.png --gen 0 --quiet \
  --out $T/one.json > /dev/null 2> $T/se || bad "one image: $(cat $T/se)"
[ "$(ids $T/one.json)" = "$(gold run_one)" ] && ok "one image: the ids of the template" ||
  bad "one image: ids $(ids $T/one.json) want $(gold run_one)"
printf 'You look at pictures.' > $T/sys.txt
P='<|kimi_image_placeholder|>'
$K3 $M --tok $TK --system-file $T/sys.txt --prompt "Compare $P with $P." \
  --image $D/jpg_prog_420.jpg --image $D/big/big_rgb_wide.png --gen 0 --quiet --out $T/two.json \
  > /dev/null 2> $T/se || bad "two images: $(cat $T/se)"
[ "$(ids $T/two.json)" = "$(gold run_two_placed)" ] &&
  ok "two images at their placeholders (one resized: 7301x23 in the text, 256 rows)" ||
  bad "two images: the ids differ from the golden"

# the same bits: 1 and 2 threads, whole prefill and chunks of 7 (the 256 rows cross them)
A="--tok $TK --prompt Compare --image $D/jpg_prog_420.jpg --image $D/big/big_rgb_wide.png --gen 6
   --greedy --quiet"
# shellcheck disable=SC2086
$K3 $M $A --threads 1 --dump-logits $T/l1 > $T/o1 2> $T/se &&
  $K3 $M $A --threads 2 --prefill-chunk 7 --dump-logits $T/l2 > $T/o2 2>> $T/se &&
  cmp -s $T/l1 $T/l2 && cmp -s $T/o1 $T/o2 &&
  ok "the same logits and text at 1 and 2 threads, whole and chunked prefill" ||
  bad "threads/chunks: $(cat $T/se) $(cmp $T/l1 $T/l2)"
# every kernel path this machine has: the same bits (the tower and the text model)
B="--tok $TK --prompt Compare --image $D/jpg_prog_420.jpg --gen 3 --greedy --quiet"
# shellcheck disable=SC2086
$K3 $M $B --dump-logits $T/lb > $T/ob 2> $T/se || bad "kernels baseline: $(cat $T/se)"
for k in scalar avx2 avx512; do
  # shellcheck disable=SC2086
  $K3 $M $B --threads 2 --kernels $k --dump-logits $T/lk > $T/ok 2> $T/se || continue
  cmp -s $T/lb $T/lk && cmp -s $T/ob $T/ok && ok "--kernels $k: the same logits and text" ||
    bad "--kernels $k: $(cmp $T/lb $T/lk)"
done
# shellcheck disable=SC2086
$K3 $M $(echo "$A" | sed 's/big_rgb_wide/big_rgba_wide/') --dump-logits $T/l3 \
  > /dev/null 2>&1
[ -s $T/l3 ] && ! cmp -s $T/l1 $T/l3 &&
  ok "another image, other logits (the rows reach the model)" ||
  bad "the image does not change the logits"

# refusals: --ids, no tower, a placeholder count, a format k3 does not decode, a missing file
chk() {
  want=$1 text=$2; shift 2
  "$K3" "$@" --gen 1 --quiet > $T/so 2> $T/se; rc=$?
  [ $rc = "$want" ] && grep -qF -- "$text" $T/se && ok "refused (exit $rc): $text" ||
    bad "$*: exit $rc (want $want), '$(cat $T/se)'"
}
chk 2 "--image goes with --prompt" $M --tok $TK --ids 1,2 --image $D/png_g8.png
chk 2 "vision tower" tests/models/tiny5 --tok $TK --prompt x --image $D/png_g8.png
chk 2 "1 <|kimi_image_placeholder|> for 2 images" $M --tok $TK --prompt "a $P" \
  --image $D/png_g8.png --image $D/png_g1.png
chk 1 "looks like WebP" $M --tok $TK --prompt x --image $D/refuse.webp
chk 1 "nothere.png" $M --tok $TK --prompt x --image $T/nothere.png
exit $fail
