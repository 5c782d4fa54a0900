#!/bin/sh
# Chat with a DSpark draft (--draft DIR, docs/DRAFT.md) against --no-spec on tiny5 and its
# synthetic draft: the same stdout byte for byte, the same history file and the same saved
# state (its --no-spec bytes, then the draft context when kept), greedy and seeded sampling,
# thinking on and off, blocks chosen and fixed at 3.
# The session asks three questions, /reset, and asks two again (the draft's context cut to
# nothing and rebuilt by the re-prefill). The random draft accepts next to nothing, so the
# test hook K3_TEST_DRAFT_ORACLE (the session's reply ids, from the run without a draft)
# gives sessions where most drafts are right (the context limit reached inside accepted
# drafts: the state and the draft rolled back). K3_TEST_DRAFT_LOG=1 (each block's drafts)
# shows the draft's context after a turn is that of the conversation prefilled at once
# (a keep of the wrong rows fails it). Also: --context-full drop-oldest (the
# oldest turns dropped, the conversation re-prefilled), a state saved with --draft resumed
# with it (no draft context: no drafts until /reset, the same replies), the refusals.
K3=${K3:-./bin/k3}
M=tests/models/tiny5; D=tests/models/tiny5_dspark; TK=tests/tok/tiny
[ -d $M ] && [ -d $D ] && [ -d $TK ] || { echo "FAIL: committed fixture missing"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$T/err" 2>/dev/null; exit 1; }
printf 'Hello there\nSecond one\nA third\n/reset\nHello there\nSecond one\n' > "$T/in"
sum() { sed -n "s/^k3: draft: .* \([0-9]*\) drafts\{0,1\} verified, \([0-9]*\) accepted/\\$1/p" \
          "$2" | awk '{ s += $1 } END { print s + 0 }'; }
# the replies' ids in the order chat generated them (a history without /reset)
ids() { sed -n 's/.*"k3_gen":{"ids":\[\([0-9,]*\)\].*/\1/p' "$1" | paste -sd, -; }

# run TAG IN flags...: one session, its stdout, stderr, history and saved state
run() {
  tag=$1; in=$2; shift 2
  rm -f "$T/h.$tag" "$T/s.$tag"
  # shellcheck disable=SC2086
  timeout 120 "$K3" $M --chat --tok $TK --history "$T/h.$tag" --save-state "$T/s.$tag" \
    "$@" < "$in" > "$T/o.$tag" 2> "$T/err" || fail "$tag: chat $* exited $?"
  cp "$T/err" "$T/e.$tag"
}
# same LABEL IN flags...: --no-spec (a) against --draft chosen (b) and --draft-block 3 (c)
same() {
  label=$1; in=$2; shift 2
  run a "$in" "$@" --no-spec
  run b "$in" "$@" --draft $D
  run c "$in" "$@" --draft $D --draft-block 3
  for v in b c; do
    cmp -s "$T/o.a" "$T/o.$v" || fail "$label ($v): replies differ from --no-spec"
    cmp -s "$T/h.a" "$T/h.$v" || fail "$label ($v): history differs from --no-spec"
    # the --no-spec state's bytes, then the draft's context (chat_draft_state.sh) when it
    # covers the state's positions
    cmp -s -n "$(wc -c < "$T/s.a")" "$T/s.a" "$T/s.$v" \
      || fail "$label ($v): saved state differs from --no-spec"
  done
  grep -q '^k3: draft:' "$T/e.a" && fail "$label: --no-spec drafted"
  vc=$(sum 1 "$T/e.c"); [ "$vc" -gt 0 ] || fail "$label: --draft-block 3 verified no draft"
  echo "ok $label: replies, history, state = --no-spec (verified $(sum 1 "$T/e.b") chosen," \
       "$vc at block 3; accepted $(sum 2 "$T/e.b"), $(sum 2 "$T/e.c"))"
}

same "greedy, no thinking" "$T/in" --gen 40 --greedy --no-think
same "sampled, thinking" "$T/in" --gen 40 --seed 7
same "drop-oldest" "$T/in" --gen 40 --seed 3 --no-think --ctx 120 --context-full drop-oldest
grep -q 'dropped the oldest' "$T/e.b" || fail "drop-oldest: no turn was dropped"

# Accepted drafts (the hook): the reply ids of a session without /reset, so that the
# session's n-th reply token is the oracle's n-th id.
printf 'Hello there\nSecond one\nA third\n' > "$T/in2"
run a "$T/in2" --gen 60 --greedy --no-think --no-spec
K3_TEST_DRAFT_ORACLE=$(ids "$T/h.a"); export K3_TEST_DRAFT_ORACLE
[ -n "$K3_TEST_DRAFT_ORACLE" ] || fail "no k3_gen ids in the history"
same "greedy, drafts right (oracle)" "$T/in2" --gen 60 --greedy --no-think
[ "$(sum 2 "$T/e.b")" -gt 30 ] || fail "oracle: only $(sum 2 "$T/e.b") drafts accepted"
[ "$(sum 2 "$T/e.c")" -gt 30 ] || fail "oracle: only $(sum 2 "$T/e.c") accepted at block 3"
same "greedy, oracle, cut by the context" "$T/in2" --gen 60 --greedy --no-think --ctx 55
grep -q 'context limit reached' "$T/e.b" || fail "the context limit was not reached"

# The draft's context is the conversation's: drafts are a function of it, so a second turn
# (a reused prefix, the first turn's verifies, most drafts accepted, the new prefill) drafts
# what a session prefilling the same conversation at once (chunks of 7) drafts.
printf 'Hello there\n' > "$T/in1"; printf 'Second one\n' > "$T/in21"
cat "$T/in1" "$T/in21" > "$T/in12"
F="--gen 60 --greedy --no-think --draft $D --draft-block 3"
# shellcheck disable=SC2086
K3_TEST_DRAFT_LOG=1 "$K3" $M --chat --tok $TK $F --history "$T/hA" < "$T/in12" \
  > /dev/null 2> "$T/eA" || fail "log A exited $?"
unset K3_TEST_DRAFT_ORACLE
# shellcheck disable=SC2086
"$K3" $M --chat --tok $TK $F --history "$T/hB" < "$T/in1" > /dev/null 2>&1 || fail "B1"
# blocks pause where drafts fail: B's turn is drafted right (A's second reply) as A's is,
# so both draft at the same positions
O2=$(sed -n 's/.*"k3_gen":{"ids":\[\([0-9,]*\)\].*/\1/p' "$T/hA" | sed -n 2p)
# shellcheck disable=SC2086
K3_TEST_DRAFT_ORACLE=$O2 K3_TEST_DRAFT_LOG=1 "$K3" $M --chat --tok $TK $F --history "$T/hB" \
  --prefill-chunk 7 < "$T/in21" > /dev/null 2> "$T/eB" || fail "log B exited $?"
cmp -s "$T/hA" "$T/hB" || fail "the conversation at once differs"
awk '/reused/ { t++ } /^k3: test: block/ && t == 1' "$T/eA" > "$T/a2"
grep '^k3: test: block' "$T/eB" > "$T/b1"
[ "$(sum 2 "$T/eA")" -gt 10 ] || fail "context: only $(sum 2 "$T/eA") drafts accepted"
[ -s "$T/a2" ] || fail "context: the second turn drafted nothing"
awk 'NR == FNR { b[$5] = $0; next } ($5 in b) { n++; if (b[$5] != $0) { print; exit 1 } }
     END { if (!n) { print "no block at a position of both"; exit 1 }; print n > "/dev/stderr" }' \
  "$T/b1" "$T/a2" > "$T/diff" 2> "$T/nsame" || fail "context: turn 2 drafts $(head -1 "$T/diff")"
echo "ok the draft's context after a turn = a fresh prefill's ($(cat "$T/nsame") of \
$(wc -l < "$T/a2") blocks at positions both drafted)"

# A state saved with --draft past the draft's 256 positions (no draft context kept), resumed
# with --draft: no block until /reset re-prefills; the same replies as resumed without a
# draft. (A kept draft context: chat_draft_state.sh.)
printf 'One more\n/reset\nAgain\n' > "$T/in3"
run r "$T/in" --gen 30 --seed 9 --draft $D
for v in a b; do
  cp "$T/h.r" "$T/h2.$v"
  [ $v = a ] && x=--no-spec || x="--draft $D --draft-block 3"
  # shellcheck disable=SC2086
  timeout 120 "$K3" $M --chat --tok $TK --history "$T/h2.$v" --load-state "$T/s.r" \
    --gen 30 --seed 9 $x < "$T/in3" > "$T/o2.$v" 2> "$T/err" || fail "resume $v exited $?"
  cp "$T/err" "$T/e2.$v"
done
cmp -s "$T/o2.a" "$T/o2.b" || fail "resumed: replies differ from --no-spec"
cmp -s "$T/h2.a" "$T/h2.b" || fail "resumed: history differs from --no-spec"
grep -q 'the loaded state has no draft context' "$T/e2.b" || fail "resumed: no note"
first=$(grep '^k3: draft:' "$T/e2.b" | sed -n 1p)
case "$first" in *" 0 blocks, 0 drafts verified"*) ;;
  *) fail "resumed: the turn on the loaded state drafted: $first" ;; esac
second=$(grep '^k3: draft:' "$T/e2.b" | sed -n 2p |
         sed 's/.* \([0-9]*\) drafts\{0,1\} verified.*/\1/')
[ "${second:-0}" -gt 0 ] || fail "resumed: no drafts after /reset"
echo "ok a loaded state: no drafts until /reset, then drafts; the same replies"

# refusals: exit 2
refuse() {
  what=$1; shift
  timeout 60 "$K3" $M --chat --tok $TK "$@" < /dev/null > /dev/null 2> "$T/err"
  rc=$?; [ $rc = 2 ] || fail "$what: exit $rc, want 2"
  echo "ok   $what: exit 2: $(head -1 "$T/err")"
}
refuse "--draft with --no-spec" --draft $D --no-spec
refuse "--draft with --draft-file" --draft $D --draft-file "$T/in"
refuse "--draft-block 8" --draft $D --draft-block 8
refuse "--draft-block without --draft" --draft-block 3
refuse "a missing draft folder" --draft "$T/nope"
echo "PASS chat_draft"
