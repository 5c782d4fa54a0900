#!/bin/sh
# Images in the chat REPL (issue 37): /image PATH queues an image for the next message, on
# the tiny model with its tiny vision tower. The same replies at 1 and 2 threads; each later
# turn prefills only its tail (the image's rows stay in the kept state); a bad file and a model
# without a tower are refused with a message and the chat goes on; /save-state with an image
# queued says it is not in the state (a saved chat with images: image_state.sh). (The
# render's ids against tiktoken's golden: tests/c/test_image_chat.c.)
. tests/sh/lib/check.sh
M=tests/models/tiny5_vision; TK=tests/tok/tiny; D=tests/images
chat() {   # MODEL THREADS: the script on stdin
  timeout 120 "$K3" "$1" --chat --tok $TK --no-think --gen 6 --greedy --no-color --threads "$2"
}
S="/image $D/png_rgba8.png
Hi
More
/image $D/jpg_prog_420.jpg
/image $D/big/big_rgb_wide.png
And these?"
printf '%s\n' "$S" | chat $M 1 > $T/o1 2> $T/e1 && printf '%s\n' "$S" | chat $M 2 > $T/o2 2> $T/e2
if cmp -s $T/o1 $T/o2 && [ -s $T/o1 ]; then ok "the same replies at 1 and 2 threads"
else bad "threads: $(diff $T/o1 $T/o2 | head -n 5) $(tail -n 3 $T/e1)"; fi
grep -c 'queued)' $T/o1 | grep -qx 3 && ok "three images queued" || bad "queue: $(cat $T/o1)"
# turn 1 prefills all (50 ids: 1 image row); turns 2 and 3 reuse every position the state
# holds (the replies' tokens in it) and prefill their tail (the third with 4 + 256 rows)
grep -q 'reused 0 positions, prefilled 50 tokens' $T/e1 &&
  grep -q 'reused 55 positions, prefilled 50 tokens' $T/e1 &&
  grep -q 'reused 110 positions, prefilled 338 tokens' $T/e1 &&
  ok "each turn after an image prefills only its tail (50; 50 after 55; 338 after 110)" ||
  bad "prefix reuse: $(grep reused $T/e1)"
grep -q 're-prefill' $T/e1 && bad "a re-prefill: $(grep re-prefill $T/e1)"

printf '/image %s\n/image %s\n/image %s\n/save-state %s\nok\n' "$T/none.png" $D/refuse.webp \
  $D/png_g8.png $T/st | chat $M 1 > $T/o3 2> $T/e3; rc=$?
[ $rc = 0 ] && grep -q 'none.png' $T/o3 && grep -q 'looks like WebP' $T/o3 &&
  grep -q 'queued image (/image) not yet sent is not in the state' $T/o3 && [ -s $T/st ] &&
  grep -q 'reused 0 positions' $T/e3 &&
  ok "a missing file and a WebP refused, /save-state saves and says a queued image is not in" \
     "it, the chat goes on" ||
  bad "refusals: rc $rc $(cat $T/o3 $T/e3)"
printf '/image %s\nhello\n' $D/png_g8.png | chat tests/models/tiny5 1 > $T/o4 2> $T/e4
grep -q 'vision tower' $T/o4 && grep -q 'reused 0 positions' $T/e4 &&
  ok "a model without a vision tower: /image refused, the message sent alone" ||
  bad "no tower: $(cat $T/o4 $T/e4)"
exit $fail
