#!/bin/sh
# Kept states keep the draft's context (issue 36 item 3): chat --save-state with --draft
# writes the state a run without a draft writes, byte for byte, then a trailer with the
# DSpark draft's context (docs/DRAFT.md "Kept states"); --load-state with the same draft
# drafts the first reply at once: its first block is at the loaded position, and with the
# test hook (K3_TEST_DRAFT_ORACLE: that reply's ids) its drafts are accepted, the replies
# and history those of --no-spec. A state without the trailer (saved without --draft, or by
# an older k3) and one saved with another draft load with an empty draft context (a note,
# no block on that turn, the same replies); a damaged trailer is refused (exit 1).
K3=${K3:-./bin/k3}
M=tests/models/tiny5; D=tests/models/tiny5_dspark; DB=tests/models/tiny5_dspark_b
TK=tests/tok/tiny
T=$(mktemp -d); trap "rm -rf $T" EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$T/err" 2>/dev/null; exit 1; }
F="--gen 20 --greedy --no-think"      # the draft's 256 positions hold both turns
printf 'Hello there\n' > "$T/in1"; printf 'Second one\n' > "$T/in2"
# the first turn, saved: without a draft (n) and with it (d)
for v in n d; do
  [ $v = n ] && x=--no-spec || x="--draft $D"
  # shellcheck disable=SC2086
  "$K3" $M --chat --tok $TK --history "$T/h.$v" --save-state "$T/s.$v" $F $x \
    < "$T/in1" > "$T/o.$v" 2> "$T/err" || fail "save $v exited $?"
done
cmp -s "$T/o.n" "$T/o.d" || fail "the first turn's replies differ"
sn=$(wc -c < "$T/s.n"); sd=$(wc -c < "$T/s.d")
cmp -s -n "$sn" "$T/s.n" "$T/s.d" && [ "$sd" -gt "$sn" ] \
  || fail "the state saved with --draft is not the --no-spec state ($sn bytes) + a trailer ($sd)"
echo "ok   saved with --draft: the --no-spec state's $sn bytes + the draft context's $((sd - sn))"
# resume STATE TAG flags...: the second turn on a loaded state
resume() {
  rs=$1; rt=$2; shift 2
  cp "$T/h.d" "$T/h2.$rt"
  # shellcheck disable=SC2086
  "$K3" $M --chat --tok $TK --history "$T/h2.$rt" --load-state "$rs" $F "$@" \
    < "$T/in2" > "$T/o2.$rt" 2> "$T/e2.$rt" || { cp "$T/e2.$rt" "$T/err"; fail "$rt: exit $?"; }
}
resume "$T/s.d" a --no-spec
# the resumed reply's ids: the last k3_gen record of the history
K3_TEST_DRAFT_ORACLE=$(sed -n 's/.*"k3_gen":{"ids":\[\([0-9,]*\)\].*/\1/p' "$T/h2.a" | tail -n 1)
[ -n "$K3_TEST_DRAFT_ORACLE" ] || fail "no k3_gen ids in the history"
export K3_TEST_DRAFT_ORACLE K3_TEST_DRAFT_LOG=1
resume "$T/s.d" b --draft $D --draft-block 3
cmp -s "$T/o2.a" "$T/o2.b" && cmp -s "$T/h2.a" "$T/h2.b" \
  || fail "resumed with the draft's context: replies or history differ from --no-spec"
grep -q "the state's draft context restored" "$T/e2.b" || fail "no 'restored' note: $(cat $T/e2.b)"
pos=$(sed -n 's/.*state .*: \([0-9]*\) positions restored.*/\1/p' "$T/e2.b")
first=$(grep -m1 '^k3: test: block at ' "$T/e2.b" | sed 's/^k3: test: block at \([0-9]*\) .*/\1/')
acc=$(sed -n 's/^k3: draft: .* \([0-9]*\) accepted.*/\1/p' "$T/e2.b" | head -n 1)
pre=$(sed -n 's/.*reused [0-9]* positions, prefilled \([0-9]*\) tokens.*/\1/p' "$T/e2.b")
# the first block drafts from the reply's first token: the loaded positions + the new prompt
[ -n "$first" ] && [ -n "$pos" ] && [ -n "$pre" ] && [ "$first" = $((pos + pre)) ] \
  && [ "${acc:-0}" -gt 5 ] \
  || fail "resumed: first block at '$first' (state $pos positions + $pre), $acc accepted"
echo "ok   resumed with --draft: drafts at once (the first block at $first = $pos loaded" \
     "+ $pre prefilled positions, $acc accepted), replies and history = --no-spec"
# a state without the trailer, and one saved with another draft: no draft context
for c in "n:$T/s.n:$D" "b:$T/s.d:$DB"; do
  tag=${c%%:*}; rest=${c#*:}; st=${rest%%:*}; dd=${rest#*:}
  unset K3_TEST_DRAFT_ORACLE
  resume "$st" "x$tag" --draft "$dd" --draft-block 3
  cmp -s "$T/o2.a" "$T/o2.x$tag" || fail "$tag: replies differ from --no-spec"
  grep -q 'the loaded state has no draft context for this draft' "$T/e2.x$tag" \
    || fail "$tag: no note"
  grep -q '^k3: draft: 0 blocks' "$T/e2.x$tag" || fail "$tag: drafted without a context"
done
echo "ok   a state without the trailer / from another draft: no draft context, same replies"
# a damaged trailer: refused, exit 1, naming the draft context
cp "$T/s.d" "$T/s.bad"
printf '\377' | dd of="$T/s.bad" bs=1 seek=$((sn + 60)) conv=notrunc 2>/dev/null
cp "$T/h.d" "$T/h3"
"$K3" $M --chat --tok $TK --history "$T/h3" --load-state "$T/s.bad" $F --draft $D \
  < "$T/in2" > /dev/null 2> "$T/err"; rc=$?
[ $rc = 1 ] && grep -q "draft context's checksum does not match" "$T/err" \
  || fail "a damaged trailer: exit $rc"
echo "ok   a damaged draft context: exit 1, $(grep -o 'the draft context.s checksum[^;]*' "$T/err")"
echo "PASS chat_draft_state"
