#!/bin/sh
# k3 MODEL --batch on a pipe: prompts join while others decode. A long prompt starts; once
# it is decoding, a short greedy one, a sampled one and two bad lines arrive: the short
# ones join mid-decode (at a step > 0), finish before the long one, and each equals its
# solo run (ids, and the prompt logits bytes); the bad lines are answered with an error
# line each and the run exits 2 at the end; `--batch -` (stdin) and the states in a state
# file give the same ids.
set -u
. tests/sh/lib/check.sh
M=tests/models/tiny5

solo() { "$K3" $M --quiet "$@"; }
want_long=$(solo --ids 1,2,3,4,5 --gen 600)
want_short=$(solo --ids 7,8,9 --gen 3 --dump-logits "$T/short.f32")
want_samp=$(solo --ids 4,4,2 --gen 5 --temperature 0.8 --seed 11)
ids_of() { sed -n "s/.*\"id\": \"$1\", \"generated_ids\": \[\([^]]*\)\].*/\1/p" "$2" | tr -d ' '; }

# writer: the long line, then (once it decodes) the rest
feed() {
  exec 3> "$T/fifo"
  echo '{"id": "long", "ids": [1, 2, 3, 4, 5], "gen": 600}' >&3
  i=0
  while ! grep -q 'line 1 joined' "$T/err" 2>/dev/null && [ $i -lt 400 ]; do
    sleep 0.05; i=$((i+1))
  done
  sleep 0.1
  echo '{"id": "short", "ids": [7, 8, 9], "gen": 3}' >&3
  echo 'not json' >&3
  echo '{"id": "samp", "ids": [4, 4, 2], "gen": 5, "temperature": 0.8, "seed": 11}' >&3
  echo '{"id": "big", "ids": [5000]}' >&3
  exec 3>&-
}
for how in "" "--state-file kda --state-file-dir $T"; do
  rm -f "$T/fifo" "$T/err"; mkfifo "$T/fifo"; mkdir -p "$T/d"
  feed & wp=$!
  timeout 120 "$K3" $M --batch "$T/fifo" --ctx 1024 --dump-logits "$T/d" $how \
    > "$T/out" 2> "$T/err"; rc=$?
  wait $wp
  [ $rc -eq 2 ] || bad "pipe ($how): exit $rc, want 2 (two bad lines); $(tail -n 2 "$T/err")"
  step=$(sed -n 's/.*line 2 joined at step \([0-9]*\).*/\1/p' "$T/err")
  [ "${step:-0}" -gt 0 ] && ok "pipe ($how): the short prompt joined at step $step, mid-decode" ||
    bad "pipe ($how): line 2 did not join mid-decode (step '${step:-none}')"
  first=$(grep -o '"id": "[a-z]*", "generated' "$T/out" | head -n 1)
  case "$first" in *long*) bad "pipe ($how): the long prompt finished first";; esac
  [ "$(ids_of long "$T/out")" = "$want_long" ] || bad "pipe ($how): long ids differ from solo"
  [ "$(ids_of short "$T/out")" = "$want_short" ] || bad "pipe ($how): short ids differ"
  [ "$(ids_of samp "$T/out")" = "$want_samp" ] || bad "pipe ($how): sampled ids differ"
  cmp -s "$T/d/2.f32" "$T/short.f32" || bad "pipe ($how): the short prompt's logits differ"
  grep -q '^{"line": 3, "error": "line 3: not JSON' "$T/out" &&
    grep -q '^{"line": 5, "error": ".*outside the vocabulary' "$T/out" ||
    bad "pipe ($how): the bad lines were not answered: $(grep line "$T/out")"
  [ $fail -eq 0 ] && ok "pipe ($how): each prompt = its solo run; bad lines answered, exit 2"
done

printf '%s\n' '{"id": "short", "ids": [7, 8, 9], "gen": 3}' \
  '{"id": "samp", "ids": [4, 4, 2], "gen": 5, "temperature": 0.8, "seed": 11}' |
  "$K3" $M --batch - --quiet > "$T/out2"; rc=$?
[ $rc -eq 0 ] && [ "$(ids_of short "$T/out2")" = "$want_short" ] &&
  [ "$(ids_of samp "$T/out2")" = "$want_samp" ] && ok "--batch - (stdin): the solo ids" ||
  bad "--batch - (stdin): exit $rc, $(cat "$T/out2")"
exit $fail
