#!/bin/sh
# Speculation in chat (on by default) against --no-spec on every committed model, greedy
# and sampled, thinking on and off: the same stdout byte for byte, the same history file
# and the same saved state file (--save-state: the ids the state holds, the exact records
# and every KDA/MLA float). The session asks two questions, /reset, and asks them again,
# so the second conversation drafts from the first (many drafts accepted, some rejected),
# then once more at another temperature;
# replies are cut by --gen and by the context limit inside accepted drafts. A session
# resumed from a state saved with speculation continues as one without; --draft-file
# gives the same replies; a bad --spec-k is refused. The slow tier (make check,
# K3_TEST_FULL=1): four more sessions on tiny5 and tiny4, mostly with no draft accepted;
# make test's four accept enough drafts for the totals checked at the end.
K3=${K3:-./bin/k3}
TK=tests/tok/tiny
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$T/err" 2>/dev/null; exit 1; }
printf 'Hello there\nSecond one\n/reset\nHello there\nSecond one\n' > "$T/in"
# a third time at another temperature: the same draws pick mostly the same tokens, so
# drafts are accepted up to a divergence, then rejected, then the sampler goes on alone
cp "$T/in" "$T/in3"; printf '/reset\n/temp 0.7\nHello there\nSecond one\n' >> "$T/in3"
accepted() { sed -n 's/^k3: spec: .* \([0-9]*\) drafts\{0,1\} accepted.*/\1/p' "$1" |
             awk '{ s += $1 } END { print s + 0 }'; }
passes() { sed -n 's/^k3: spec: \([0-9]*\) verify pass.*/\1/p' "$1" |
           awk '{ s += $1 } END { print s + 0 }'; }

# chat LABEL MODEL flags...: the session with --no-spec (.a) and with the default (.b)
same() {
  label=$1; m=$2; shift 2
  for v in a b; do
    [ $v = a ] && x=--no-spec || x=
    rm -f "$T/h.$v" "$T/s.$v"
    # shellcheck disable=SC2086
    timeout 120 "$K3" tests/models/$m --chat --tok $TK --history "$T/h.$v" \
      --save-state "$T/s.$v" "$@" $x < "$T/in3" > "$T/o.$v" 2> "$T/err" ||
      fail "$label: chat $x exited $?"
    cp "$T/err" "$T/e.$v"
  done
  cmp -s "$T/o.a" "$T/o.b" || fail "$label: replies differ from --no-spec"
  cmp -s "$T/h.a" "$T/h.b" || fail "$label: history differs from --no-spec"
  cmp -s "$T/s.a" "$T/s.b" || fail "$label: saved state differs from --no-spec"
  [ "$(passes "$T/e.a")" = 0 ] || fail "$label: --no-spec made verify passes"
  acc=$(accepted "$T/e.b"); np=$(passes "$T/e.b")
  tot_acc=$((tot_acc + acc)); tot_pass=$((tot_pass + np))
  echo "ok $label: replies, history and saved state = --no-spec ($np passes, $acc accepted)"
}

tot_acc=0; tot_pass=0
slow && same "tiny5 sampled, thinking" tiny5 --gen 60 --seed 5
slow && same "tiny5 greedy, thinking" tiny5 --gen 60 --greedy --seed 1
slow && same "tiny5 sampled, no thinking" tiny5 --gen 60 --seed 6 --no-think
same "tiny5 greedy, no thinking, --spec-k 3" tiny5 --gen 60 --greedy --no-think --spec-k 3 --seed 2
same "tiny4 sampled, thinking" tiny4 --gen 40 --seed 5
slow && same "tiny4 greedy, no thinking" tiny4 --gen 300 --greedy --no-think --seed 3
same "tiny5f sampled, no thinking" tiny5f --gen 300 --seed 6 --no-think
same "tiny5f greedy, thinking, cut by the context" tiny5f --gen 300 --greedy --ctx 330 --seed 4
grep -q 'context limit reached' "$T/e.b" || fail "the context limit was not reached"
[ "$tot_acc" -gt 200 ] || fail "only $tot_acc drafts accepted: the replays were not drafted"
[ "$tot_pass" -gt "$((tot_acc / 8))" ] || fail "$tot_pass passes for $tot_acc accepted"

# resume a state saved with speculation, one turn more, with and without it
printf 'Hello there\nSecond one\n' > "$T/in2"
for v in a b; do
  [ $v = a ] && x=--no-spec || x=
  rm -f "$T/h.$v"
  # shellcheck disable=SC2086
  timeout 60 "$K3" tests/models/tiny5 --chat --tok $TK --gen 40 --seed 3 --history "$T/h.$v" \
    --save-state "$T/s.$v" $x < "$T/in2" > /dev/null 2> "$T/err" || fail "save ($v) exited $?"
done
cmp -s "$T/s.a" "$T/s.b" || fail "tiny5 two turns: saved state differs from --no-spec"
for v in a b; do
  [ $v = a ] && x=--no-spec || x=
  # shellcheck disable=SC2086
  printf 'Hello there\n' | timeout 60 "$K3" tests/models/tiny5 --chat --tok $TK --gen 40 \
    --seed 3 --history "$T/h.$v" --load-state "$T/s.b" $x > "$T/o.$v" 2> "$T/err" ||
    fail "resume ($v) exited $?"
done
cmp -s "$T/o.a" "$T/o.b" || fail "resumed from a speculating session: replies differ"
cmp -s "$T/h.a" "$T/h.b" || fail "resumed from a speculating session: histories differ"
echo "ok a state saved with speculation resumes: the next reply = --no-spec's"

# --draft-file: a reference for every reply (its drafts mostly fail on a random model)
timeout 60 "$K3" tests/models/tiny5 --chat --tok $TK --gen 60 --seed 2 --no-spec < "$T/in" \
  > "$T/o.a" 2> "$T/err" || fail "plain exited $?"
cp "$T/o.a" "$T/ref.txt"
timeout 60 "$K3" tests/models/tiny5 --chat --tok $TK --gen 60 --seed 2 \
  --draft-file "$T/ref.txt" < "$T/in" > "$T/o.b" 2> "$T/err" || fail "--draft-file exited $?"
cmp -s "$T/o.a" "$T/o.b" || fail "--draft-file: replies differ from --no-spec"
[ "$(passes "$T/err")" -gt 0 ] || fail "--draft-file: no verify pass"
echo "ok --draft-file: replies = --no-spec's ($(passes "$T/err") passes)"

"$K3" tests/models/tiny5 --chat --tok $TK --spec-k 65 < /dev/null > /dev/null 2> "$T/err"
[ $? = 2 ] && grep -q 'at most 64' "$T/err" || fail "--spec-k 65 accepted"
"$K3" tests/models/tiny5 --chat --tok $TK --draft-file "$T/nope" < /dev/null > /dev/null \
  2> "$T/err"
[ $? = 2 ] && grep -q 'draft-file' "$T/err" || fail "a missing --draft-file accepted"
echo "ok refused: --spec-k 65, a missing --draft-file (exit 2)"
