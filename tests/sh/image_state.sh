#!/bin/sh
# A chat state with images (issue 37, docs/CHAT.md "Saved state"): on the tiny model with its
# tiny tower, a conversation with an image is saved (--save-state), a new process resumes it
# (--load-state) and its next turn prefills only its tail (the image's effect is in the kept
# state): the reply and the turn's figures equal those of one process running every turn, and
# the history files are equal, and so are the state files both save after it (the ids the
# state holds, its tensors, the images' records). The rows travel in the state, so a resumed
# turn that must re-prefill (--context-full drop-oldest dropping a turn before the image's)
# gives the single process's reply too. A history alone (no state) renders without the lost
# image's mark. A damaged image record is refused (exit 1) and the history kept.
. tests/sh/lib/check.sh
M=tests/models/tiny5_vision; TK=tests/tok/tiny; D=tests/images
chat() {
  timeout 60 "$K3" $M --chat --tok $TK --no-think --gen 6 --greedy --no-color --threads 1 "$@"
}
turns() { grep '^k3: \[reused' "$1" | sed 's/ in [0-9.]* s//g'; }

printf '/image %s\nHi\nMore\n/image %s\nAnd these?\n' $D/png_rgba8.png $D/jpg_prog_420.jpg |
  chat --history $T/h3.jsonl --save-state $T/s3.bin > $T/o3 2> $T/e3 ||
  bad "one process: exit $? $(tail -n 3 $T/e3)"
printf '/image %s\nHi\nMore\n' $D/png_rgba8.png |
  chat --history $T/h.jsonl --save-state $T/s.bin > $T/o2 2> $T/e2
rc=$?
[ $rc = 0 ] && grep -q 'state saved to .*: 110 positions' $T/e2 && [ -s $T/s.bin ] &&
  ok "a chat with an image saved as a state (110 positions)" ||
  bad "save: rc $rc $(cat $T/o2 $T/e2)"
cp $T/h.jsonl $T/h0.jsonl
printf '/image %s\nAnd these?\n' $D/jpg_prog_420.jpg |
  chat --history $T/h.jsonl --load-state $T/s.bin --save-state $T/s1.bin > $T/o1 2> $T/e1
rc=$?
cat $T/o2 $T/o1 > $T/b
l3=$(turns $T/e3 | sed -n 3p); lr=$(turns $T/e1)
[ $rc = 0 ] && grep -q 'state .*: 110 positions restored .* 0 re-prefilled' $T/e1 &&
  [ "$lr" = "$l3" ] && echo "$lr" | grep -q 'reused 110 positions, prefilled 69 tokens' &&
  cmp -s $T/o3 $T/b && cmp -s $T/h.jsonl $T/h3.jsonl && ! grep -q 're-prefilling' $T/e1 &&
  cmp -s $T/s1.bin $T/s3.bin &&
  ok "resumed: the next turn reuses the 110 positions, prefills its 69 (4 image rows)," \
     "the same reply and history as one process, its state file byte-equal (the ids fed," \
     "the KDA/MLA state, the images' records)" ||
  bad "resume: rc $rc '$lr' vs '$l3' $(diff $T/o3 $T/b | head -n 4) $(tail -n 4 $T/e1)"

# a re-prefill after the load needs the image's rows: they come from the state
S="Hello
/image $D/jpg_prog_420.jpg
What?"
printf '%s\nThird\n' "$S" |
  chat --history $T/d3.jsonl --ctx 120 --context-full drop-oldest > $T/p3 2> $T/f3
printf '%s\n' "$S" | chat --history $T/d.jsonl --ctx 120 --context-full drop-oldest \
  --save-state $T/d.bin > $T/p2 2> $T/f2
printf 'Third\n' | chat --history $T/d.jsonl --ctx 120 --context-full drop-oldest \
  --load-state $T/d.bin > $T/p1 2> $T/f1
rc=$?
cat $T/p2 $T/p1 > $T/pb
[ $rc = 0 ] && grep -q 're-prefilling 112 tokens' $T/f1 && grep -q 're-prefilling 112' $T/f3 &&
  cmp -s $T/p3 $T/pb && [ "$(turns $T/f1)" = "$(turns $T/f3 | sed -n 3p)" ] &&
  ! grep -q 'vision tower' $T/f1 &&
  ok "a resumed turn that drops the oldest turn re-prefills the image from the state's rows" \
     "(the tower not run): the one process's reply" ||
  bad "re-prefill: rc $rc $(diff $T/p3 $T/pb | head -n 4) $(tail -n 4 $T/f1)"

# the history alone (no state) keeps the image's mark, not the image: the conversation is
# rendered without that mark (a note says so), so a new image goes to its own message: the
# reply equals the one from a history with the mark removed by hand (before: the new image
# took the old mark's place)
sed 's/<|kimi_image_placeholder|>//' $T/h0.jsonl > $T/hs.jsonl
cp $T/h0.jsonl $T/hm.jsonl
for h in hm hs; do
  printf '/image %s\nAnd these?\n' $D/jpg_prog_420.jpg | chat --history $T/$h.jsonl \
    > $T/q_$h 2> $T/r_$h
done
cmp -s $T/q_hm $T/q_hs && grep -q 'message 1 holds an image mark .* rendered without' $T/r_hm &&
  [ "$(turns $T/r_hm)" = "$(turns $T/r_hs)" ] &&
  ok "a history with an image's mark and no state: rendered without it (noted), a new image" \
     "in its own message" || bad "history alone: $(diff $T/q_hm $T/q_hs) $(cat $T/r_hm)"

# damage: the image's width (19 x 13: its record's first bytes) set to 0xffff13 (16776979),
# a truncated file; each refused with exit 1 and the reason, the history untouched
off=$(LC_ALL=C grep -obUaP '\x13\x00\x00\x00\x0d\x00\x00\x00' $T/s.bin | head -n 1 | cut -d: -f1)
cp $T/s.bin $T/bad.bin
[ -n "$off" ] && printf '\377\377' | dd of=$T/bad.bin bs=1 seek=$((off + 1)) conv=notrunc \
  2> /dev/null
n=$(wc -c < $T/s.bin)
head -c $((n - 100)) $T/s.bin > $T/short.bin
for f in bad short; do
  cp $T/h0.jsonl $T/h_$f.jsonl
  printf 'x\n' | chat --history $T/h_$f.jsonl --load-state $T/$f.bin > /dev/null 2> $T/e_$f
  echo $? > $T/rc_$f
done
[ "$(cat $T/rc_bad)" = 1 ] && grep -q "message 1's image 1: a bad record (16776979x13)" $T/e_bad &&
  [ "$(cat $T/rc_short)" = 1 ] && grep -q 'truncated' $T/e_short &&
  cmp -s $T/h0.jsonl $T/h_bad.jsonl && cmp -s $T/h0.jsonl $T/h_short.jsonl &&
  ok "an image record damaged, a truncated file: refused (exit 1), the history untouched" ||
  bad "damage: off '$off' $(cat $T/rc_bad $T/e_bad $T/rc_short $T/e_short)"
exit $fail
