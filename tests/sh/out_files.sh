#!/bin/sh
# Files k3 writes never destroy what was there (issue 35, include/outfile.h): every writer
# (--out, --dump-logits, batch --out, chat --save-state and --history) given
#   a FIFO: a reader gets the bytes, the FIFO stays a FIFO;
#   a symlink: its target gets the bytes, the link stays a link to it;
#   a character device made here with mknod (root only; else SKIP): still one after;
#   /dev/stdout: the bytes come out on stdout, /dev/stdout is untouched;
# and a regular file is still replaced whole (its mode kept). Before, each was renamed over:
# as root `--out /dev/null` would have replaced the system's /dev/null.
# As root a regression would replace the system's /dev/stdout: the test runs itself in a
# private mount namespace whose /dev is a tmpfs of its own (SKIP of that case without one).
if [ "$(id -u)" = 0 ] && [ -z "${K3_OUT_FILES_NS:-}" ]; then
  if command -v unshare >/dev/null 2>&1 && unshare -m true 2>/dev/null; then
    K3_OUT_FILES_NS=1 exec unshare -m --propagation private sh -c '
      mount -t tmpfs k3dev /dev || exit 1
      mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5; mknod -m 666 /dev/full c 1 7
      mknod -m 444 /dev/urandom c 1 9; ln -s /proc/self/fd /dev/fd
      ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout
      ln -s /proc/self/fd/2 /dev/stderr
      exec sh "$0"' "$0"
  fi
  echo "SKIP /dev/stdout: no private mount namespace here (unshare -m)"; K3_TEST_NO_DEV=1
fi
. tests/sh/lib/check.sh
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)
printf '{"id": "a", "ids": [%s], "gen": 3}\n{"id": "b", "ids": [5, 6], "gen": 2}\n' \
  "$(echo "$P" | sed 's/,/, /g')" > $T/batch.jsonl
printf 'hi\n' > $T/chat.in
# run WRITER PATH: the writer's command with its output at PATH (stdout to $T/so)
run() {
  case $1 in
    out) $K3 $M --ids "$P" --gen 3 --quiet --out "$2" ;;
    logits) $K3 $M --ids "$P" --gen 1 --quiet --dump-logits "$2" ;;
    batch) $K3 $M --batch $T/batch.jsonl --quiet --out "$2" ;;
    state) rm -f $T/sh.jsonl
           $K3 $M --chat --tok $TK --gen 3 --seed 1 --history $T/sh.jsonl --save-state "$2" \
             < $T/chat.in ;;
    history) $K3 $M --chat --tok $TK --gen 3 --seed 1 --history "$2" < $T/chat.in ;;
  esac > $T/so 2> $T/se
}
# what the writer's bytes look like
looks() {
  case $1 in
    out) grep -q '"generated_ids"' "$2" ;;
    logits) [ "$(wc -c < "$2")" -ge $((12 * 1024 * 4)) ] ;;
    batch) grep -q '"n_prompts": 2' "$2" ;;
    state) grep -qa "$(head -c 6 $T/state.reg)" "$2" && [ "$(wc -c < "$2")" -gt 1000 ] ;;
    history) grep -q '"role":"user"' "$2" ;;
  esac
}
for w in out logits batch state history; do
  # a regular file: replaced whole, its mode kept
  old=old; [ $w = history ] && old=        # a history is read first: an empty one
  printf "$old" > $T/$w.reg; chmod 640 $T/$w.reg
  run $w $T/$w.reg; rc=$?
  [ $rc = 0 ] && looks $w $T/$w.reg && [ "$(stat -c %a $T/$w.reg)" = 640 ] &&
    ok "$w: a regular file written, mode 640 kept" || bad "$w: regular file: exit $rc: $(tail -n 2 $T/se)"
  # a symlink: the target written, the link kept
  mkdir -p $T/real; printf "$old" > $T/real/$w.t; ln -s real/$w.t $T/$w.ln
  run $w $T/$w.ln; rc=$?
  [ $rc = 0 ] && [ -L $T/$w.ln ] && [ "$(readlink $T/$w.ln)" = real/$w.t ] && looks $w $T/real/$w.t &&
    ok "$w: a symlink's target written, the link stays" ||
    bad "$w: symlink: exit $rc, $(ls -l $T/$w.ln): $(tail -n 2 $T/se)"
  # a FIFO: a reader (reopening: chat writes once a turn and at the end) gets the bytes
  mkfifo $T/$w.fifo
  (while :; do cat $T/$w.fifo; done) >> $T/$w.got 2>/dev/null & rd=$!
  run $w $T/$w.fifo; rc=$?
  sleep 0.2; kill $rd 2>/dev/null; wait $rd 2>/dev/null
  [ $rc = 0 ] && [ -p $T/$w.fifo ] && looks $w $T/$w.got && ok "$w: a FIFO's reader got it" ||
    bad "$w: FIFO: exit $rc, $(ls -l $T/$w.fifo), read $(wc -c < $T/$w.got) bytes"
  # /dev/stdout: written there, nothing created or replaced in /dev
  if [ "${K3_TEST_NO_DEV:-}" != 1 ]; then        # (the old code, as root, replaced it)
    was=$(ls -l /dev/stdout | cut -c1)
    run $w /dev/stdout; rc=$?
    [ $rc = 0 ] && [ "$(ls -l /dev/stdout | cut -c1)" = "$was" ] && [ -s $T/so ] &&
      [ -z "$(ls /dev | grep '^stdout.')" ] && looks $w $T/so &&
      ok "$w: /dev/stdout written ($(wc -c < $T/so) bytes)" ||
      bad "$w: /dev/stdout: exit $rc: $(tail -n 2 $T/se)"
  fi
  # a character device of our own (as /dev/null: 1,3)
  if [ "$(id -u)" = 0 ] && mknod $T/$w.dev c 1 3 2>/dev/null; then
    run $w $T/$w.dev; rc=$?
    [ $rc = 0 ] && [ -c $T/$w.dev ] && ok "$w: a character device stays one" ||
      bad "$w: device: exit $rc, $(ls -l $T/$w.dev): $(tail -n 2 $T/se)"
  else echo "SKIP $w: a character device (mknod needs root)"; fi
done
# a shell's >(cmd) is a /dev/fd/N path: written there (it was "cannot create files in /dev/fd")
$K3 $M --ids "$P" --gen 2 --quiet --out /dev/fd/3 3> $T/fd3 > /dev/null 2> $T/se; rc=$?
[ $rc = 0 ] && grep -q '"generated_ids"' $T/fd3 && ok "--out /dev/fd/3 written to descriptor 3" ||
  bad "--out /dev/fd/3: exit $rc: $(cat $T/se)"
# nothing left beside the outputs
left=$(find $T -name '*.tmp*' | head -n 3)
[ -z "$left" ] && ok "no temporary file left" || bad "left: $left"
exit $fail
