#!/bin/sh
# --draft over MPI ranks (issue 36, docs/DISTRIBUTED.md "A draft model"): under mpirun
# -np 2, bin/k3-mpi with the tiny5 DSpark draft gives the ids and --dump-logits bytes of
# single-process bin/k3 without a draft: greedy with the verify length chosen (rank 0's
# choice broadcast), every draft right (the oracle hook) at --draft-block 3 with the
# --dump-draft bytes of bin/k3 (rank 0 writes them), seeded sampling on a starved streamed
# trunk (each rank's plan streams its own draft copy); a batch of 5 likewise (blocks chosen,
# the oracle's); chat too (the draft calls replayed on every rank), a saved state resumed
# at np 2 drafting at once; serve (every slot's draft calls replayed). The slow tier
# (K3_TEST_FULL=1): np 3, the streamed case at np 1 and 3, the batch streamed and 2 in
# flight, greedy chat.
. tests/sh/lib/check.sh
slow() { [ "${K3_TEST_FULL:-}" = 1 ]; }
KM=${K3_MPI:-./bin/k3-mpi}
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$KM" ]; then
  echo "SKIP mpi_draft: no mpirun or no $KM (apt-get install openmpi-bin libopenmpi-dev; make mpi)"
  exit $fail
fi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
M=tests/models/tiny5; D=tests/models/tiny5_dspark
P=$(cat $M/ref/prompt.txt); G=$(cat $M/ref/greedy.txt)
NPS=2; slow && NPS="2 3"
$K3 pack $M $T/tr --quiet || bad "k3 pack failed"
# same NAME NPS ARGS...: bin/k3 without a draft against bin/k3-mpi --draft at each np
same() {
  name=$1; nps=$2; shift 2
  want=$($K3 $M --ids "$P" --gen 16 "$@" --dump-logits $T/one.f32 --quiet 2>$T/err) \
    || { bad "$name: bin/k3 exited $?"; return; }
  for np in $nps; do
    rm -f $T/n.f32
    # shellcheck disable=SC2086
    got=$(timeout 120 mpirun --oversubscribe -np $np "$KM" $M --ids "$P" --gen 16 "$@" \
      --draft $D ${DARGS:-} --dump-logits $T/n.f32 2>$T/err) \
      || { bad "$name np $np: exit $?: $(tail -c 400 $T/err)"; continue; }
    [ "$got" = "$want" ] && cmp -s $T/one.f32 $T/n.f32 \
      && ok "$name np $np: the ids and --dump-logits bytes of bin/k3 without a draft" \
      || bad "$name np $np: ids '$got' vs '$want', or the logits bytes differ"
  done
}
same "greedy, the verify length chosen" "$NPS"
grep -q "^k3: draft: [1-9][0-9]* block" $T/err || bad "greedy: no block drafted over ranks"
K3_TEST_DRAFT_ORACLE=$G; export K3_TEST_DRAFT_ORACLE
DARGS="--draft-block 3 --dump-draft $T/dd.n" same "every draft right, block 3" "$NPS"
acc=$(sed -n 's/^k3: draft: .* \([0-9]*\) accepted.*/\1/p' $T/err)
$K3 $M --ids "$P" --gen 16 --draft $D --draft-block 3 --dump-draft $T/dd.1 --quiet \
  >/dev/null 2>&1 || bad "bin/k3 --dump-draft exited $?"
[ "${acc:-0}" -gt 8 ] && cmp -s $T/dd.1 $T/dd.n \
  && ok "oracle over ranks: $acc drafts accepted, --dump-draft bytes of bin/k3" \
  || bad "oracle over ranks: $acc accepted, or the --dump-draft bytes differ"
unset K3_TEST_DRAFT_ORACLE
s="2"; slow && s="1 2 3"
same "sampled, starved streamed trunk" "$s" --temperature 0.9 --top-p 0.95 --seed 3 \
  --trunk $T/tr --trunk-gb 0 --cache-gb 0
grep -q "draft window" $T/err || $K3 $M --ids 1 --gen 1 --draft $D --trunk $T/tr --trunk-gb 0 \
  --cache-gb 0 --verbose 2>&1 | grep -q "draft window" || bad "the draft was not streamed"
# batch mode (every rank runs the batch whole, its draft contexts fed from its own taps, the
# draft forward's lm_head rows split like the trunk's): a batch of 5 (3 greedy, 2 seeded)
# with --draft at np 2 gives the ids and --dump-logits bytes of bin/k3's batch without it,
# blocks chosen, fixed with the oracle (2 of 4 right a block: the rollbacks), on a starved
# streamed trunk, two in flight at 1 thread
cat > $T/b.jsonl <<EOF
{"id": "a", "ids": [$P], "gen": 20}
{"id": "b", "ids": [754,475,608,87,876,126], "gen": 24}
{"id": "c", "ids": [9,8,7,6,5,4,3,2,1,10,11,12,13,14,15,16,17,18,19,20], "gen": 18}
{"id": "d", "ids": [100,200,300], "gen": 22, "temperature": 0.9, "seed": 5}
{"id": "e", "ids": [42,43,44,45,46,47,48,49], "gen": 20, "temperature": 0.8, "seed": 11}
EOF
lines() { sed 's/, "seconds_prefill.*//' "$1" | sort; }
mkdir $T/b0 $T/b1
$K3 $M --batch $T/b.jsonl --quiet --dump-logits $T/b0 > $T/bo0 2>/dev/null || bad "batch: exit $?"
OR=$(sed -n 's/.*"generated_ids": \[\([^]]*\)\].*/\1/p' $T/bo0 | tr -d ' ' | tr '\n' ';')
# bsame NAME FLAGS DRAFT_FLAGS: bin/k3 --batch FLAGS against np 2 with --draft
bsame() {
  rm -f $T/b0/* $T/b1/*
  # shellcheck disable=SC2086
  $K3 $M --batch $T/b.jsonl $2 --quiet --dump-logits $T/b0 > $T/bo0 2>/dev/null ||
    { bad "$1: bin/k3 exited $?"; return; }
  # shellcheck disable=SC2086
  timeout 120 mpirun --oversubscribe -np 2 "$KM" $M --batch $T/b.jsonl $2 --draft $D $3 \
    --dump-logits $T/b1 > $T/bo1 2>$T/err || { bad "$1: exit $?: $(tail -c 300 $T/err)"; return; }
  n=0
  for f in $T/b0/*.f32; do cmp -s "$f" "$T/b1/${f##*/}" && n=$((n + 1)); done
  [ "$(lines $T/bo0)" = "$(lines $T/bo1)" ] && [ $n = 5 ] &&
    grep -q "^k3: draft: [1-9][0-9]* blocks" $T/err &&
    ok "batch np 2, $1: the ids and 5 dumps' bytes of bin/k3 without a draft" \
       "($(sed -n 's/^k3: draft: .* \([0-9]*\) accepted.*/\1/p' $T/err) accepted)" ||
    bad "batch np 2, $1: $n of 5 dumps equal; $(diff $T/bo0 $T/bo1 | head -n 3)"
}
bsame "blocks chosen" "" ""
K3_TEST_DRAFT_ORACLE=$OR K3_TEST_DRAFT_RIGHT=2 bsame "oracle, block 4" "" "--draft-block 4"
if slow; then   # (make test: the two above)
  bsame "starved streamed trunk" "--trunk $T/tr --trunk-gb 0 --cache-gb 0" ""
  K3_TEST_DRAFT_ORACLE=$OR bsame "oracle, 2 in flight, 1 thread" "--batch-size 2 --threads 1" \
    "--draft-block 7"
fi
# chat (rank 0 runs the REPL; the others replay its scheduler and its draft calls: each
# block's draft forward, the keep, the cuts, a loaded state's draft context): three sampled
# turns with every draft right (the oracle) at --draft-block 3 and greedy with blocks
# chosen give bin/k3 --no-spec's stdout, history and saved state (the state's trailer that
# of bin/k3 --draft); the state resumed at np 2 drafts at once (a copy of the draft that
# holds 1024 positions: the conversation passes the tiny draft's 256)
TK=tests/tok/tiny
mkdir $T/dl && ln -s "$PWD/$D/model.safetensors" $T/dl/ &&
  sed 's/"max_position_embeddings": 256/"max_position_embeddings": 1024/' $D/config.json \
    > $T/dl/config.json || bad "a copy of the draft"
printf 'Hello there\nSecond one\nA third\n' > $T/c1; printf 'Fourth one\nFifth\n' > $T/c2
gids() { sed -n 's/.*"k3_gen":{"ids":\[\([0-9,]*\)\].*/\1/p' "$1" | paste -sd, -; }
# chat TAG IN NP ARGS..: a session (NP 0: bin/k3), its stdout, stderr, history, state
chat() {
  tg=$1; in=$2; np=$3; shift 3
  if [ "$np" = 0 ]; then set -- "$K3" "$@"
  else set -- timeout 120 mpirun --oversubscribe -np "$np" "$KM" "$@"; fi
  "$@" --chat --tok $TK --gen 24 --no-color --history $T/h.$tg <$in >$T/o.$tg 2>$T/e.$tg ||
    bad "chat $tg: exit $?: $(tail -c 300 $T/e.$tg)"
}
modes="--seed 7 --temperature 0.8"; slow && modes="$modes:--temperature 0"
IFS=:; set -- $modes; unset IFS
for mode in "$@"; do
  rm -f $T/h.*
  # shellcheck disable=SC2086
  chat a $T/c1 0 $M $mode --no-spec --save-state $T/s.a
  cp $T/h.a $T/h.r
  # shellcheck disable=SC2086
  chat r $T/c2 0 $M $mode --no-spec --load-state $T/s.a
  OR=$(gids $T/h.a); OR2=$(gids $T/h.r | cut -d, -f$(($(echo "$OR" | tr ',' '\n' | wc -l) + 1))-)
  d="--draft $T/dl"; case $mode in *seed*) d="$d --draft-block 3";; esac
  # shellcheck disable=SC2086
  K3_TEST_DRAFT_ORACLE=$OR chat c $T/c1 0 $M $mode $d --save-state $T/s.c
  # shellcheck disable=SC2086
  K3_TEST_DRAFT_ORACLE=$OR chat b $T/c1 2 $M $mode $d --save-state $T/s.b
  acc=$(sed -n 's/^k3: draft: .* \([0-9]*\) accepted$/\1/p' $T/e.b | awk '{s += $1} END {print s}')
  cmp -s $T/o.a $T/o.b && cmp -s $T/h.a $T/h.b && cmp -s -n "$(wc -c < $T/s.a)" $T/s.a $T/s.b &&
    cmp -s $T/s.c $T/s.b && [ "$(wc -c < $T/s.b)" -gt "$(wc -c < $T/s.a)" ] &&
    [ "${acc:-0}" -gt 0 ] &&
    ok "chat np 2 --draft ($mode): --no-spec's replies, history and state; the draft's" \
       "trailer that of bin/k3 ($acc drafts accepted)" ||
    bad "chat np 2 --draft ($mode): differs from bin/k3 ($acc accepted)"
  cp $T/h.b $T/h.r2
  # shellcheck disable=SC2086
  K3_TEST_DRAFT_ORACLE=$OR2 chat r2 $T/c2 2 $M $mode $d --load-state $T/s.b
  acc=$(sed -n 's/^k3: draft: .* \([0-9]*\) accepted$/\1/p' $T/e.r2 | head -n 1)
  cmp -s $T/o.r $T/o.r2 && grep -q "draft context restored" $T/e.r2 && [ "${acc:-0}" -gt 0 ] &&
    ok "chat np 2 --draft ($mode) resumed: its first reply drafted at once ($acc accepted)," \
       "the replies of bin/k3 --no-spec resumed" ||
    bad "chat np 2 --draft ($mode) resumed: $acc accepted; $(diff $T/o.r $T/o.r2 | head -n 3)"
done
# serve (rank 0 runs the requests, rank 1 replays its scheduler and each slot's draft calls:
# blocks, ingestion, keeps, the verify's rollback, a kept state's draft context): two
# concurrent requests (greedy, seeded), JSON mode, and B resuming A's kept reply with its
# draft context, at np 2 with --draft give a bin/k3 server's replies and logprobs; with the
# oracle drafts are accepted, B's at once
if command -v curl >/dev/null 2>&1; then
  srv() {   # srv TAG cmd...: a server (--port 0) on a free port (PORT_TAG, PID_TAG)
    tg=$1; shift
    "$@" 2>$T/se.$tg &
    eval "PID_$tg=$!"
    i=0; while ! grep -qs 'listening on http://' $T/se.$tg && [ $i -lt 300 ]; do
      sleep 0.1; i=$((i + 1)); done
    eval "PORT_$tg=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' $T/se.$tg)"
  }
  post() { curl -s --max-time 60 "http://127.0.0.1:$1/v1/completions" -d "{$2}"; }
  body() { sed 's/"created": [0-9]*//; s/"id": "[a-z]*-[0-9]*"//; s/, "k3_draft": {[^}]*}//
             s/"cached_tokens": [0-9]*//' "$1"; }   # (2 at once: either may be cmpl-1)
  tid() { grep -o '"token_ids": \[[^]]*\]' "$1" | sed 's/.*\[//; s/\]//; s/ //g'; }
  Q1="\"prompt\": [$P], \"max_tokens\": 20, \"temperature\": 0, \"logprobs\": 1"
  Q2="\"prompt\": [42,43,44,45,46,47,48,49], \"max_tokens\": 20, \"temperature\": 0.8,
    \"seed\": 11, \"logprobs\": 1"
  Q3="\"prompt\": [5,6,7], \"max_tokens\": 16, \"temperature\": 0, \"logprobs\": 1,
    \"response_format\": {\"type\": \"json_object\"}"
  QA="\"prompt\": [9,8,7,6,5,4,3,2,1,10,11,12], \"max_tokens\": 12, \"temperature\": 0,
    \"logprobs\": 1"
  sask() {   # sask TAG PORT: the requests, QB after QA's reply
    post $2 "$Q1" > $T/q1.$1 & w1=$!
    post $2 "$Q2" > $T/q2.$1 & w2=$!
    wait $w1 $w2
    post $2 "$Q3" > $T/q3.$1
    post $2 "$QA" > $T/qa.$1
    QB="\"prompt\": [9,8,7,6,5,4,3,2,1,10,11,12,$(tid $T/qa.$1),1,2], \"max_tokens\": 16,
      \"temperature\": 0, \"logprobs\": 1"
    post $2 "$QB" > $T/qb.$1
  }
  srv p "$K3" serve $M --tok $TK --port 0
  sask p $PORT_p
  kill $PID_p; wait $PID_p 2>/dev/null
  OR="$(tid $T/q1.p);$(tid $T/q2.p);$(tid $T/q3.p);$(tid $T/qb.p)"
  K3_TEST_DRAFT_ORACLE=$OR K3_TEST_DRAFT_RIGHT=3 \
    srv d timeout 120 mpirun --oversubscribe -np 2 "$KM" serve $M --tok $TK --port 0 \
      --draft $D --draft-block 4
  if [ -z "$PORT_d" ]; then bad "serve np 2 --draft did not start: $(tail -c 300 $T/se.d)"
  else
    sask d $PORT_d
    acc=$(curl -s "http://127.0.0.1:$PORT_d/metrics" | sed -n 's/^k3_draft_accepted_total //p')
    kill $PID_d; wait $PID_d 2>/dev/null
    n=0
    for q in q1 q2 q3 qa qb; do
      [ -s $T/$q.p ] && [ "$(body $T/$q.p)" = "$(body $T/$q.d)" ] && n=$((n + 1))
    done
    grep -q '"cached_tokens": [1-9]' $T/qb.d || bad "serve np 2: B did not resume A's state"
    [ $n = 5 ] && [ "${acc:-0}" -gt 0 ] && grep -q '"accepted": [1-9]' $T/qb.d &&
      ok "serve np 2 --draft: 5 replies (2 at once, JSON mode, one resumed) those of a bin/k3" \
         "server without a draft ($acc drafts accepted; resumed: $(grep -o '"accepted": [0-9]*' \
         $T/qb.d))" ||
      bad "serve np 2 --draft: $n of 5 replies equal, $acc accepted: $(tail -c 300 $T/se.d)"
  fi
else echo "SKIP serve --draft over ranks: no curl"; fi
exit $fail
