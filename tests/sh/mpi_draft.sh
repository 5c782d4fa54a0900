#!/bin/sh
# --draft over MPI ranks (issue 36, docs/DISTRIBUTED.md "A draft model"): under mpirun
# -np 2, bin/k3-mpi with the tiny5 DSpark draft gives the ids and --dump-logits bytes of
# single-process bin/k3 without a draft: greedy with the verify length chosen (rank 0's
# choice broadcast), every draft right (the oracle hook) at --draft-block 3 with the
# --dump-draft bytes of bin/k3 (rank 0 writes them), seeded sampling on a starved streamed
# trunk (each rank's plan streams its own draft copy). Chat with --draft stays refused over
# ranks (exit 2). The slow tier (K3_TEST_FULL=1): np 3, and the streamed case at np 1 and 3.
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
echo hi | timeout 60 mpirun --oversubscribe -np 2 "$KM" $M --chat --tok tests/tok/tiny \
  --draft $D >/dev/null 2>$T/err; rc=$?
[ $rc = 2 ] && grep -q "chat --draft does not run over MPI ranks" $T/err \
  && ok "chat --draft over ranks: refused, exit 2" || bad "chat --draft over ranks: exit $rc"
exit $fail
