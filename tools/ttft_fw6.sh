#!/bin/sh
# issue 24 item 1 acceptance on the full-width slice: 1024-token prompt at
# --trunk-gb 0.5 --cache-gb 0.3 (streamed trunk, starved cache), against a run with the
# trunk pinned and a large cache; K3_CHECK_GAPS=1: the longest stretch without an interrupt check
K3=${K3:-./bin/k3}; M=${M:-/var/tmp/k3mem/fw6}; D=${D:-/var/tmp/ttft2}
ids=$(seq 1 1024 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 7919) % 160000 + 100) }')
mkdir -p $D/tr
# the machine line's peak probed at this run (a shared cache may hold one probed under load)
[ -n "${K3_MACHINE_CACHE:-}" ] || { K3_MACHINE_CACHE=$D/machine.txt; rm -f "$D/machine.txt"; }
export K3_MACHINE_CACHE
echo "== streamed: --trunk /var/tmp/fw6t/plain --trunk-gb 0.5 --cache-gb 0.3"
K3_CHECK_GAPS=1 $K3 $M --trunk /var/tmp/fw6t/plain --trunk-gb 0.5 --cache-gb 0.3 --ids "$ids" \
  --gen 0 --dump-logits $D/l_stream.f32 --out $D/stream.json --dump-cache-trace $D/tr 2>&1
echo "== trunk pinned: --trunk /var/tmp/fw6t/plain --trunk-gb 14 --cache-gb 3"
K3_CHECK_GAPS=1 $K3 $M --trunk /var/tmp/fw6t/plain --trunk-gb 14 --cache-gb 3 --ids "$ids" \
  --gen 0 --dump-logits $D/l_res.f32 --out $D/res.json 2>&1
cmp $D/l_stream.f32 $D/l_res.f32 && echo "logits bytes equal"
pairs=$(grep '^[0-9]' $D/tr/cache_trace.txt | awk '{print $2, $3}' | sort -u | wc -l)
echo "unique (layer, expert) pairs: $pairs"
