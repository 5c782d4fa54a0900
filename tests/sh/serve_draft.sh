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

# under a constraint (JSON mode, a grammar, a strict tool's arguments) the verified rows are
# masked along the drafts: the same replies, and with the oracle drafts accepted
esc() { sed 's/\\/\\\\/g; s/"/\\"/g' "$1" | awk '{printf "%s\\n", $0}'; }
J1="\"prompt\": [$P], \"max_tokens\": 40, \"temperature\": 0, \"logprobs\": 1,
  \"response_format\": {\"type\": \"json_object\"}"
J2="\"prompt\": [42,43,44], \"max_tokens\": 30, \"temperature\": 0.9, \"seed\": 4,
  \"logprobs\": 1, \"grammar\": \"$(esc tests/grammars/03_date.gbnf)\""
for i in 1 2; do
  eval "r=\$J$i"
  $C "http://127.0.0.1:$PORT_plain/v1/completions" -d "{$r}" > $T/plain.j$i
done
nocache() { body "$1" | sed 's/"cached_tokens": [0-9]*//'; }   # (orj starts cold)
tid() { grep -o '"token_ids": \[[^]]*\]' "$1" | sed 's/.*\[//; s/\]//; s/ //g'; }
K3_TEST_DRAFT_ORACLE="$(tid $T/plain.j1);$(tid $T/plain.j2)" \
  K3_TEST_DRAFT_RIGHT=3 start orj --draft $D --draft-block 7
for s in dr orj; do
  for i in 1 2; do
    eval "r=\$J$i; u=http://127.0.0.1:\$PORT_$s"
    $C "$u/v1/completions" -d "{$r}" > $T/$s.j$i
    [ -n "$(tid $T/plain.j$i)" ] && [ "$(nocache $T/plain.j$i)" = "$(nocache $T/$s.j$i)" ] ||
      fail "$s: constrained reply $i: $(cat $T/$s.j$i) vs $(cat $T/plain.j$i)"
  done
done
acc=$(met $PORT_orj draft_accepted_total); pro=$(met $PORT_orj draft_proposed_total)
[ "${acc:-0}" -gt 0 ] || fail "constrained, oracle: $acc of $pro drafts accepted"
HEAD='<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>'
TAIL='<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>'
REP="$HEAD"'<|open|>call tool="get_weather" index="1"<|sep|>'"$TAIL"
K3_SERVE_TEST_REPLY="$REP" start sp
# (the tool's declaration makes a prompt of 437 positions: a copy of the draft that holds
# 1024, or every block would be past its positions)
mkdir $T/dl && ln -s "$PWD/$D/model.safetensors" $T/dl/ &&
  sed 's/"max_position_embeddings": 256/"max_position_embeddings": 1024/' $D/config.json \
    > $T/dl/config.json || fail "a copy of the draft"
K3_SERVE_TEST_REPLY="$REP" start sd --draft $T/dl --draft-block 3
SC='{"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["city", "days"]}'
ST="{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}], \"max_tokens\": 200,
  \"temperature\": 0.7, \"seed\": 2, \"tools\": [{\"type\": \"function\", \"function\":
  {\"name\": \"get_weather\", \"strict\": true, \"parameters\": $SC}}]}"
$C "http://127.0.0.1:$PORT_sp/v1/chat/completions" -d "$ST" > $T/sp.t
$C "http://127.0.0.1:$PORT_sd/v1/chat/completions" -d "$ST" > $T/sd.t
grep -q '"arguments"' $T/sp.t && [ "$(body $T/sp.t)" = "$(body $T/sd.t)" ] &&
  [ "$(met $PORT_sd draft_proposed_total)" -gt 0 ] ||
  fail "strict tool: $(cat $T/sd.t) vs $(cat $T/sp.t); $(met $PORT_sd draft_proposed_total)"
echo "ok constrained (JSON mode, a grammar, a strict tool's arguments): the replies without" \
  "a draft; oracle: $acc of $pro accepted; strict: $(met $PORT_sd draft_proposed_total) verified"

# a resumed request drafts at once from the draft context kept with its state, in memory and
# in --state-dir's files across a restart: its first block at its prompt's end, and every
# block's drafts (K3_TEST_DRAFT_LOG) those of the same sequence run alone (a context
# restored wrong drafts otherwise); the replies those of the server without a draft
RA="\"prompt\": [$P], \"max_tokens\": 12, \"temperature\": 0, \"logprobs\": 1"
$C "http://127.0.0.1:$PORT_plain/v1/completions" -d "{$RA}" > $T/plain.ra
B="$P,$(tid $T/plain.ra),5,6,7"
RB="\"prompt\": [$B], \"max_tokens\": 16, \"temperature\": 0, \"logprobs\": 1"
$C "http://127.0.0.1:$PORT_plain/v1/completions" -d "{$RB}" > $T/plain.rb
export K3_TEST_DRAFT_LOG=1 K3_TEST_DRAFT_ORACLE="$(tid $T/plain.rb)"
export K3_TEST_DRAFT_RIGHT=3
$K3 $M --ids "$B" --gen 16 --draft $D --draft-block 7 2>&1 >/dev/null |
  grep 'k3: test: block' > $T/solo.b
nb=$(echo "$B" | tr ',' '\n' | wc -l)
head -n 1 $T/solo.b | grep -q "^k3: test: block at $nb " || fail "solo B: $(head -n 1 $T/solo.b)"
mkdir $T/st
start rs --draft $D --draft-block 7
start rd1 --draft $D --draft-block 7 --state-dir $T/st
unset K3_TEST_DRAFT_LOG K3_TEST_DRAFT_ORACLE K3_TEST_DRAFT_RIGHT
# resumed NAME: B after A on server NAME: the reply, and B's blocks those of the solo run
resumed() {
  eval "u=http://127.0.0.1:\$PORT_$1"
  [ -n "$2" ] && $C "$u/v1/completions" -d "{$RA}" > $T/$1.ra
  n0=$(grep -c 'k3: test: block' $T/$1.err)
  $C "$u/v1/completions" -d "{$RB}" > $T/$1.rb
  grep 'k3: test: block' $T/$1.err | tail -n +$((n0 + 1)) > $T/$1.lb
  [ "$(nocache $T/plain.rb)" = "$(nocache $T/$1.rb)" ] || fail "$1: B: $(cat $T/$1.rb)"
  grep -q '"cached_tokens": [1-9]' $T/$1.rb || fail "$1: B did not resume a kept state"
  [ -s $T/$1.lb ] && cmp -s $T/$1.lb $T/solo.b ||
    fail "$1: B's blocks are not the solo run's: $(diff $T/$1.lb $T/solo.b | head -n 4)"
}
resumed rs 1
resumed rd1 1
grep -l K3DRAFT $T/st/*.state > /dev/null || fail "--state-dir: no file carries the draft"
# the server restarts on the same files: B resumes A's kept reply from its file
kill "${PIDS##* }"; wait "${PIDS##* }" 2>/dev/null
K3_TEST_DRAFT_LOG=1 K3_TEST_DRAFT_ORACLE="$(tid $T/plain.rb)" \
  K3_TEST_DRAFT_RIGHT=3 start rd2 --draft $D --draft-block 7 --state-dir $T/st
grep -q 'state(s) resumed' $T/rd2.err || fail "rd2: $(cat $T/rd2.err)"
resumed rd2 ""
acc=$(grep -o '"accepted": [0-9]*' $T/rd2.rb | sed 's/.*: //')
# a server without --draft reads the same files (the trailer read over)
start rp --state-dir $T/st
$C "http://127.0.0.1:$PORT_rp/v1/completions" -d "{$RB}" > $T/rp.rb
[ "$(nocache $T/plain.rb)" = "$(nocache $T/rp.rb)" ] && grep -q '"cached_tokens": [1-9]' $T/rp.rb ||
  fail "no --draft on the draft's files: $(cat $T/rp.rb) $(tail -n 3 $T/rp.err)"
# a damaged trailer: the file is named and ignored (its state is not resumed)
f=$(grep -l K3DRAFT $T/st/*.state | head -n 1)
o=$(grep -obUa K3DRAFT "$f" | head -n 1 | cut -d: -f1)
printf '\377' | dd of="$f" bs=1 seek=$((o + 40)) conv=notrunc 2>/dev/null
start rq --draft $D --state-dir $T/st
grep -q "draft context's checksum does not match.*ignored" $T/rq.err ||
  fail "a damaged trailer: $(grep state-dir $T/rq.err)"
echo "ok a resumed request drafts at once (kept in memory; in --state-dir files across a" \
  "restart: $acc accepted): its blocks those of the sequence alone, the same replies; a" \
  "damaged trailer: the file ignored"

# refusals: exit 2 naming the flag
$K3 serve $M --tok $TK --draft-block 3 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft-block is about a --draft DIR' $T/e ||
  fail "--draft-block alone: $rc"
$K3 serve $M --tok $TK --draft $D --state-file kda 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q -- '--draft needs the states resident' $T/e || fail "--state-file kda: $rc"
$K3 serve $M --tok $TK --port 0 --draft $T/none 2> $T/e; rc=$?
[ $rc = 2 ] && grep -q "$T/none" $T/e || fail "a missing draft folder: exit $rc $(cat $T/e)"
echo "ok --draft-block alone, --draft with a state file, a missing draft folder: exit 2"
