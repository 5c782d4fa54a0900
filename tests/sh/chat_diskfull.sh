#!/bin/sh
# Chat on a full filesystem (a 1 MB tmpfs, filled): the history and the state cannot be
# written. Each failure is reported when it happens, the session goes on, and it ends
# with exit 1 and the reason on the last line of stderr. Needs root for the mount.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d)
mkdir $T/full
if ! mount -t tmpfs -o size=1m tmpfs $T/full 2>/dev/null; then
  rm -rf "$T"; echo "SKIP: cannot mount a tmpfs (needs root)"; exit 0
fi
trap 'umount $T/full 2>/dev/null; rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat -v "$T/err"; exit 1; }
dd if=/dev/zero of=$T/full/fill bs=1k count=1024 2>/dev/null   # ENOSPC at the end: full
printf 'Hello\nAgain\n' | timeout 60 "$K3" $M --chat --tok $TK --no-think --gen 4 --seed 3 \
  --history $T/full/h.jsonl --save-state $T/full/s.bin > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 1 ] || fail "exit $rc, want 1"
[ "$(grep -c '^k3: \[reused' "$T/err")" = 2 ] \
  || fail "the session did not go on after the failed write"
grep -q 'history .*h.jsonl: writing .*No space left on device' "$T/err" \
  || fail "the failed history write was not reported"
tail -n 1 "$T/err" | \
  grep -q '^k3: exit 1: the history was not written (.*No space left on device)' \
  || fail "the last line does not give the reason: $(tail -n 1 "$T/err")"
grep -q 'state .*s.bin: writing' "$T/err" || fail "the failed state write was not reported"
ls $T/full | grep -q tmp && fail "a temporary file was left: $(ls $T/full)"
echo "ok a full disk: each failed write reported, the session goes on, exit 1 with the reason last"

# the state alone failing (history on a disk with room) is exit 1 too, named last
printf 'Hello\n' | timeout 60 "$K3" $M --chat --tok $TK --no-think --gen 4 --seed 3 \
  --history $T/h.jsonl --save-state $T/full/s.bin > "$T/out" 2> "$T/err"; rc=$?
[ $rc = 1 ] && tail -n 1 "$T/err" | grep -q '^k3: exit 1: the state was not saved' \
  && [ -s $T/h.jsonl ] \
  || fail "state-only failure: exit $rc, last line $(tail -n 1 "$T/err")"
# with room again the same session exits 0
rm $T/full/fill
printf 'Hello\n' | timeout 60 "$K3" $M --chat --tok $TK --no-think --gen 4 --seed 3 \
  --history $T/full/h2.jsonl --save-state $T/full/s2.bin > "$T/out" 2> "$T/err" \
  || fail "with room: exit $?"
echo "ok a state that cannot be saved: exit 1, named last; with room: exit 0"
