#!/bin/sh
# k3 --spec on every committed model, greedy and sampled, resident and with the trunk
# streamed at the smallest budget: the n-gram drafter, the true continuation as
# --draft-ids (every draft accepted), a wrong draft (none accepted) and --draft-file give
# the ids of the plain run (--no-spec), and so does the default (speculation on); --out
# reports spec_drafted, spec_accepted, spec_passes. Streamed, make test runs tiny5 greedy and
# tiny4 sampled; the slow tier (make check, K3_TEST_FULL=1) every model both ways.
K3=${K3:-./bin/k3}
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
TK=tests/tok/tiny
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr"; cat "$T/err" 2>/dev/null; exit 1; }
field() { tr -d '\n ' < "$2" | sed "s/.*\"$1\":\([0-9]*\).*/\1/"; }

for m in tiny5 tiny4 tiny5f; do
  M=tests/models/$m
  P=$(cat $M/ref/prompt.txt),$(cat $M/ref/prompt.txt)   # repeats: the n-gram drafter finds them
  "$K3" pack $M "$T/$m.trunk" --quiet 2> "$T/err" || fail "$m pack"
  for how in "" "--trunk $T/$m.trunk --trunk-gb 0 --cache-gb 0"; do
    for s in "" "--temperature 0.8 --seed 5"; do
      [ -n "$how" ] && ! slow &&
        case "$m ${s:+sampled}" in "tiny4 "|"tiny5 sampled"|tiny5f*) continue;; esac
      # shellcheck disable=SC2086
      run() { "$K3" $M --ids "$P" --gen 24 --threads 2 --quiet $how $s "$@" 2> "$T/err"; }
      want=$(run --no-spec) || fail "$m plain ($how $s)"
      got=$(run) || fail "$m default (speculation on) exited $?"
      [ "$got" = "$want" ] || fail "$m default ($how $s): '$got', --no-spec '$want'"
      got=$(run --spec --out "$T/a.json") || fail "$m --spec exited $?"
      [ "$got" = "$want" ] || fail "$m --spec ($how $s): '$got', plain '$want'"
      got=$(run --draft-ids "$want" --out "$T/t.json") || fail "$m true draft exited $?"
      [ "$got" = "$want" ] || fail "$m true draft ($how $s): '$got', plain '$want'"
      d=$(field spec_drafted "$T/t.json"); a=$(field spec_accepted "$T/t.json")
      [ "$d" -gt 10 ] && [ "$a" = "$d" ] || fail "$m true draft: $a of $d accepted"
      [ "$(field spec_passes "$T/t.json")" -lt 12 ] || fail "$m true draft: too many passes"
      wrong=$(echo "$want" | \
        awk -F, '{for (i = 1; i <= NF; i++) printf "%s%d", (i > 1 ? "," : ""), ($i + 7) % 1000}')
      got=$(run --draft-ids "$wrong" --out "$T/w.json") || fail "$m wrong draft exited $?"
      [ "$got" = "$want" ] || fail "$m wrong draft ($how $s): '$got', plain '$want'"
      [ "$(field spec_accepted "$T/w.json")" -le 2 ] || fail "$m wrong draft accepted"
      [ "$(field spec_passes "$T/w.json")" -ge 1 ] || fail "$m wrong draft: never verified"
    done
  done
  printf 'Hello there, speculation. Hello there, speculation.' > "$T/ref.txt"
  want=$("$K3" $M --prompt "Hello there," --tok $TK --gen 12 --quiet --no-spec 2> "$T/err") ||
    fail "$m text"
  got=$("$K3" $M --prompt "Hello there," --tok $TK --gen 12 --quiet --draft-file "$T/ref.txt" \
        2> "$T/err") || fail "$m --draft-file exited $?"
  [ "$got" = "$want" ] || fail "$m --draft-file: '$got', plain '$want'"
  echo "ok $m: --spec, true / wrong --draft-ids, --draft-file = the plain ids" \
    "(greedy, sampled, streamed)"
done
"$K3" tests/models/tiny5 --ids 1 --draft-ids 1,5000 --quiet > /dev/null 2> "$T/err"
[ $? -eq 2 ] && grep -q "outside the vocabulary" "$T/err" || fail "a draft id past the vocabulary"
"$K3" tests/models/tiny5 --ids 1 --spec --recompute --quiet > /dev/null 2> "$T/err"
[ $? -eq 2 ] || fail "--spec --recompute accepted"
"$K3" tests/models/tiny5 --ids 1 --no-spec --draft-ids 1,2 --quiet > /dev/null 2> "$T/err"
[ $? -eq 2 ] && grep -q "drop --no-spec" "$T/err" || fail "--draft-ids with --no-spec accepted"
want=$("$K3" tests/models/tiny5 --ids 1,2,3 --gen 6 --recompute --quiet 2> "$T/err") ||
  fail "--recompute (speculation off by default there) exited $?"
[ "$want" = "$("$K3" tests/models/tiny5 --ids 1,2,3 --gen 6 --no-spec --quiet)" ] ||
  fail "--recompute ids differ"
echo "ok refusals: a draft id outside the vocabulary, --spec with --recompute, --draft-ids"
echo "   with --no-spec; --recompute alone runs (speculation is off there)"
