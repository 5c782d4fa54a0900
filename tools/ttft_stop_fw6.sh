#!/bin/sh
# issue 24 item 5 on the full-width slice: SIGINT 20 s after the first progress line of a
# 1024-token prefill; the time from the signal to the exit, and the longest stretch
# without an interrupt check (K3_CHECK_GAPS=1)
K3=${K3:-./bin/k3}; M=${M:-/var/tmp/k3mem/fw6}; D=${D:-/var/tmp/ttft2}
ids=$(seq 1 1024 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 160000 + 100) }')
for b in "--trunk-gb 14 --cache-gb 3" "--trunk-gb 0.5 --cache-gb 0.3"; do
  echo "== $b, SIGINT 20 s into the prefill"
  K3_PROGRESS_SECONDS=2 K3_CHECK_GAPS=1 $K3 $M --trunk /var/tmp/fw6t/plain $b --ids "$ids" \
    --gen 0 2>$D/stop.err &
  pid=$!
  while ! grep -q '^k3: prefill: ' $D/stop.err; do sleep 0.5; done
  sleep 20
  t0=$(date +%s.%N); kill -INT $pid; wait $pid; rc=$?; t1=$(date +%s.%N)
  grep -E "prefill:|longest" $D/stop.err | tail -n 3
  echo "exit $rc, $(echo "$t1 - $t0" | bc) s from SIGINT to exit"
done
