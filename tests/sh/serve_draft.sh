#!/bin/sh
# k3 serve --draft DIR (issue 36): each request in flight drafts from its own DSpark
# context inside the shared steps and its verify keeps what its own sampler draws, so
# every reply is the one of a server without a draft: three concurrent clients (greedy
# and seeded sampling, logprobs), one request of three prompts (three sequences in every
# step from the first), a chat reply streamed and not; usage.k3_draft and /metrics count
# the drafts. With the test hook K3_TEST_DRAFT_ORACLE (each sequence's own continuation,
# ';'-separated) drafts are accepted, and every block's drafts (K3_TEST_DRAFT_LOG, a
# function of the sequence's context) equal those of its run alone: a context fed another
# request's rows, or rolled back wrong, drafts otherwise.
. tests/sh/lib/serve.sh
D=tests/models/tiny5_dspark
P=$(cat $M/ref/prompt.txt)
P2=9,8,7,6,5,4,3,2,1,10,11,12,13,14,15,16,17,18,19,20
# the sequences: prompt, tokens, sampling (the completions' fields and the one-shot flags)
R1="\"prompt\": [$P], \"max_tokens\": 24, \"temperature\": 0"
R2="\"prompt\": [$P2], \"max_tokens\": 20, \"temperature\": 0"
R3="\"prompt\": [42,43,44,45,46,47,48,49], \"max_tokens\": 20, \"temperature\": 0.8,
  \"top_p\": 0.9, \"seed\": 11"
R4="\"prompt\": [[100,200,300], [5,6,7,8], [300,301]], \"max_tokens\": 16,
  \"temperature\": 0.9, \"top_p\": 1, \"seed\": 5"
solo() {   # N: the one-shot flags of sequence N (R4's three prompts: 4 5 6)
  case $1 in
    1) echo "--ids $P --gen 24" ;;
    2) echo "--ids $P2 --gen 20" ;;
    3) echo "--ids 42,43,44,45,46,47,48,49 --gen 20 --temperature 0.8 --top-p 0.9 --seed 11" ;;
    4) echo "--ids 100,200,300 --gen 16 --temperature 0.9 --seed 5" ;;
    5) echo "--ids 5,6,7,8 --gen 16 --temperature 0.9 --seed 5" ;;
    6) echo "--ids 300,301 --gen 16 --temperature 0.9 --seed 5" ;;
  esac
}
for i in 1 2 3 4 5 6; do
  # shellcheck disable=SC2046
  $K3 $M $(solo $i) --quiet > $T/solo$i || fail "the one-shot run $i"
done
OR=$(cat $T/solo1 $T/solo2 $T/solo3 $T/solo4 $T/solo5 $T/solo6 | tr '\n' ';' | sed 's/;$//')
start plain
start dr --draft $D
K3_TEST_DRAFT_ORACLE=$OR K3_TEST_DRAFT_RIGHT=2 K3_TEST_DRAFT_LOG=1 \
  start orc --draft $D --draft-block 7
body() { sed 's/"created": [0-9]*//; s/"id": "[^"]*"//g; s/, "k3_draft": {[^}]*}//' "$1"; }
met() { $C "http://127.0.0.1:$1/metrics" | sed -n "s/^k3_$2 //p"; }
# ask NAME: the three clients at once, then the three prompts of one request
ask() {
  eval "u=http://127.0.0.1:\$PORT_$1"
  w=""
  for i in 1 2 3; do
    eval "r=\$R$i"
    $C "$u/v1/completions" -d "{$r, \"logprobs\": 1}" > $T/$1.$i &
    w="$w $!"
  done
  for p in $w; do wait "$p"; done      # (the servers are background jobs too)
  $C "$u/v1/completions" -d "{$R4, \"logprobs\": 1}" > $T/$1.4
}
ask plain; ask dr; ask orc
for i in 1 2 3 4; do
  [ -s $T/plain.$i ] && grep -q '"token_ids"' $T/plain.$i || fail "reply $i: $(cat $T/plain.$i)"
  for s in dr orc; do
    [ "$(body $T/plain.$i)" = "$(body $T/$s.$i)" ] ||
      fail "$s: reply $i differs from the plain server's: $(cat $T/$s.$i) vs $(cat $T/plain.$i)"
  done
done
# the replies' ids are those of the runs alone (the oracle lists, the logs' reference)
n=0
for i in 1 2 3 4; do grep -o '"token_ids": \[[^]]*\]' $T/plain.$i; done |
  sed 's/.*\[//; s/\]//; s/ //g' > $T/ids
while read -r ids; do
  n=$((n + 1))
  case "$(cat $T/solo$n)," in "$ids",*) ;; *) fail "sequence $n: $ids vs $(cat $T/solo$n)";; esac
done < $T/ids
[ $n = 6 ] || fail "$n sequences in the replies"
d=$(grep -o '"k3_draft": {[^}]*}' $T/dr.1)
[ -n "$d" ] && ! grep -q k3_draft $T/plain.1 || fail "usage.k3_draft: '$d'"
echo "ok 3 concurrent clients and a request of 3 prompts: the replies and logprobs of the" \
  "server without a draft (usage $d; $(met $PORT_dr draft_proposed_total) drafts verified)"

# the oracle: accepted drafts, and every block's drafts those of the runs alone
acc=$(met $PORT_orc draft_accepted_total); pro=$(met $PORT_orc draft_proposed_total)
: > $T/ls
for i in 1 2 3 4 5 6; do
  # shellcheck disable=SC2046
  K3_TEST_DRAFT_ORACLE=$(cat $T/solo$i) K3_TEST_DRAFT_RIGHT=2 K3_TEST_DRAFT_LOG=1 \
    $K3 $M $(solo $i) --draft $D --draft-block 7 2>&1 > /dev/null |
    grep 'k3: test: block' >> $T/ls
done
sort $T/ls > $T/ls2
grep 'k3: test: block' $T/orc.err | sort > $T/lb
[ "${acc:-0}" -gt 0 ] && [ -s $T/lb ] && cmp -s $T/lb $T/ls2 ||
  fail "oracle: $acc of $pro accepted; $(diff $T/lb $T/ls2 | head -n 6)"
s=$(grep -o '"accepted": [0-9]*' $T/orc.1 | sed 's/.*: //')
[ "${s:-0}" -gt 0 ] ||
  fail "oracle: usage.k3_draft of reply 1: $(grep -o '"k3_draft": {[^}]*}' $T/orc.1)"
! grep -q 'no more drafts' $T/orc.err $T/dr.err || fail "a draft context fell out of step"
echo "ok the test hook: $acc of $pro drafts accepted, the same replies, $(wc -l < $T/lb)" \
  "blocks' drafts those of the six sequences alone"

# chat, streamed and not: the same reply; a repeat resumes its kept prompt (no drafts)
Q='{"messages": [{"role": "user", "content": "Hello draft"}], "temperature": 0,
  "max_tokens": 24'
for s in plain dr; do
  eval "u=http://127.0.0.1:\$PORT_$s"
  $C "$u/v1/chat/completions" -d "$Q}" > $T/$s.c
  $C "$u/v1/chat/completions" -d "$Q, \"stream\": true,
    \"stream_options\": {\"include_usage\": true}}" > $T/$s.cs
  $C "$u/v1/chat/completions" -d "$Q}" > $T/$s.cr
done
[ "$(body $T/plain.c)" = "$(body $T/dr.c)" ] && [ "$(body $T/plain.cr)" = "$(body $T/dr.cr)" ] ||
  fail "chat: $(cat $T/dr.c) vs $(cat $T/plain.c)"
sed 's/"created": [0-9]*//; s/, "k3_draft": {[^}]*}//' $T/plain.cs > $T/a
sed 's/"created": [0-9]*//; s/, "k3_draft": {[^}]*}//' $T/dr.cs > $T/b
cmp -s $T/a $T/b && grep -q '"k3_draft": {"drafted": [0-9]*' $T/dr.cs ||
  fail "chat stream: $(diff $T/a $T/b | head -n 4)"
echo "ok chat, streamed (usage with k3_draft) and not, and a resumed repeat: the same replies"

# past the draft's max_position_embeddings (256 here): plain steps, the same reply
L="{\"prompt\": [$P], \"max_tokens\": 250, \"temperature\": 0}"
$C "http://127.0.0.1:$PORT_plain/v1/completions" -d "$L" > $T/plain.l
$C "http://127.0.0.1:$PORT_dr/v1/completions" -d "$L" > $T/dr.l
[ "$(jnum completion_tokens < $T/plain.l)" = 250 ] &&
  [ "$(body $T/plain.l)" = "$(body $T/dr.l)" ] &&
  ! grep -q 'no more drafts' $T/dr.err || fail "past 256 positions: $(tail -n 2 $T/dr.err)"
echo "ok a reply past the draft's 256 positions: the same reply"

# refusals: exit 2 naming the flag
$K3 serve $M --tok $TK --draft-block 3 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft-block is about a --draft DIR' $T/e ||
  fail "--draft-block alone: $rc"
$K3 serve $M --tok $TK --draft $D --state-file kda 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft needs the states resident' $T/e || fail "--state-file kda: $rc"
$K3 serve $M --tok $TK --port 0 --draft $T/none 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q "$T/none" $T/e || fail "a missing draft folder: exit $rc $(cat $T/e)"
echo "ok --draft-block alone, --draft with a state file, a missing draft folder: exit 2"
