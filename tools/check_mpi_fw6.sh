#!/bin/sh
# Bit identity over MPI on the full-width slice (docs/DISTRIBUTED.md): bin/k3-mpi at each
# np of NPS against single-process bin/k3, --dump-logits bytes (every prompt position) and
# ids, resident (the shard mappings) and starved (the packed trunk at --trunk-gb STG, a
# small cache: most of each rank's rows streamed every forward). Prints one line a run.
# Usage: tools/check_mpi_fw6.sh [NPS]   (default "1 2 3 4"; M, TR, K3, K3MPI, GEN, STG)
set -u
NPS=${1:-1 2 3 4}
M=${M:-/var/tmp/k3mem/fw6}; TR=${TR:-/var/tmp/fw6t/plain}
IDS=${IDS:-16000,5,17,300,42,7,900,12}; GEN=${GEN:-3}; STG=${STG:-1.0}
K3=${K3:-./bin/k3}; K3MPI=${K3MPI:-./bin/k3-mpi}
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fail=0
for how in resident starved; do
  args="--cache-gb 1000"
  [ $how = starved ] && args="--trunk $TR --trunk-gb $STG --cache-gb 0.3"
  t0=$(date +%s)
  want=$($K3 $M --ids $IDS --gen $GEN $args --dump-logits $W/one.f32 --quiet 2>$W/err) \
    || { echo "FAIL $how bin/k3: $(tail -c 300 $W/err)"; fail=1; continue; }
  echo "$how bin/k3 $args: ids $want, logits $(wc -c < $W/one.f32) bytes" \
    "sha256 $(sha256sum < $W/one.f32 | cut -c1-16) ($(($(date +%s) - t0)) s)"
  for np in $NPS; do
    rm -f $W/n.f32
    t0=$(date +%s)
    got=$(mpirun --oversubscribe -np $np $K3MPI $M --ids $IDS --gen $GEN $args --threads 1 \
          --dump-logits $W/n.f32 --out $W/r.json --quiet 2>$W/err) \
      || { echo "FAIL $how np $np: exit $?: $(tail -c 300 $W/err)"; fail=1; continue; }
    rss=$(grep -o '"peak_rss_bytes": [0-9]*' $W/r.json | sed 's/.* //' | tail -n +2 |
          awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / 1e9 }')
    if [ "$got" = "$want" ] && cmp -s $W/one.f32 $W/n.f32; then
      echo "ok   $how np $np: the same ids and logits bytes (ranks' peak RSS GB: $rss;" \
        "$(($(date +%s) - t0)) s)"
    else echo "FAIL $how np $np: ids $got vs $want; cmp: $(cmp $W/one.f32 $W/n.f32 2>&1)"
      fail=1; fi
  done
done
exit $fail
