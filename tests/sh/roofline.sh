#!/bin/sh
# The machine line (issue 40): --out's prefill FLOPs, GFLOP/s and share of the FMA peak,
# decode's bytes a token, GB/s and share of the read bandwidth, and the machine's figures;
# the probe cached in K3_MACHINE_CACHE (or the user's cache folder), reused, redone by
# --reprobe, none with "off"; the line on stderr with --verbose only for a tiny run.
. tests/sh/lib/check.sh
M=tests/models/tiny5
P=$(cat $M/ref/prompt.txt)
num() { sed -n "s/^ *\"$1\": \([-0-9.e+]*\),*$/\1/p" "$2"; }
FIELDS="prefill_flops prefill_gflops prefill_peak_share decode_bytes_per_token decode_gbps
  decode_bandwidth_share machine_fma_gflops machine_read_gbps decode_floor_s decode_floor_ratio"
# sane O: every field there and positive, the shares in (0, 10)
sane() {
  for f in $FIELDS; do
    v=$(num "$f" "$1")
    awk -v v="$v" -v f=$f 'BEGIN { s = f ~ /share/; exit !(v != "" && v > 0 && (!s || v < 10)) }' ||
      { echo "$f = '$v'"; return 1; }
  done
}

C=$T/m.txt
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 4 --threads 1 --out $T/o.json > /dev/null 2> $T/e
r=$(sane $T/o.json) && ok "--out has the machine fields, sane" || bad "--out: $r"
[ "$(wc -l < $C)" = 1 ] && grep -q '|threads 1	' $C && ok "the probe is cached: $(cat $C)" ||
  bad "cache file: $(cat $C 2>&1)"
grep -q '^k3: machine:' $T/e && bad "a tiny run prints the machine line" ||
  ok "a tiny run leaves the machine line out"
# reused: figures planted in the file come back in --out
sed 's/	[0-9.]*	[0-9.]*$/	123.000	45.000/' $C > $T/c2 && cp $T/c2 $C
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 4 --threads 1 --out $T/o.json --verbose \
  > /dev/null 2> $T/e
[ "$(num machine_fma_gflops $T/o.json)" = 123 ] && [ "$(num machine_read_gbps $T/o.json)" = 45 ] &&
  ok "the cached figures are reused" || bad "not reused: $(grep machine_ $T/o.json)"
L='^k3: machine: prefill [0-9.e+]+ [MGT]FLOP at .* of the FMA peak \(123 GFLOP/s\); decode '
grep -Eq "$L"'.* of the read bandwidth \(45 GB/s\)$' $T/e &&
  ok "--verbose: $(grep '^k3: machine' $T/e)" || bad "--verbose line: $(grep machine $T/e)"
# a run without a decode step (--gen 1: the prompt's forward gives the token) says so
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 1 --threads 1 --verbose > /dev/null 2> $T/e1
grep -q '^k3: machine: prefill .*; decode no decode step (' $T/e1 && ! grep -q ' 0 GB/s' $T/e1 &&
  ok "--gen 1: 'no decode step', no 0 GB/s" || bad "--gen 1: $(grep machine $T/e1)"
# the decode floor: at least the bytes over the bandwidth; the ratio is s/token over it
fl=$(num decode_floor_s $T/o.json); by=$(num decode_bytes_per_token $T/o.json)
awk -v f="$fl" -v b="$by" 'BEGIN { exit !(f >= b / 45e9 * 0.9999 && f < b / 45e9 + 1) }' &&
  grep -Eq '^k3: machine: decode [0-9.]+ s a token, [0-9.]+x the floor of [0-9.]+ s' $T/e &&
  ok "the decode floor: $fl s >= $by B / 45 GB/s, the line printed" ||
  bad "decode floor $fl (bytes $by): $(grep machine $T/e)"
grep '^k3: machine' $T/e | grep -q 's/token' && bad "the machine line says s/token" ||
  ok "the machine line is no speed line (s/token)"
# --reprobe: measured again and written back
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 4 --threads 1 --out $T/o.json --reprobe --verbose \
  > /dev/null 2> $T/e
g=$(num machine_fma_gflops $T/o.json)
[ "$g" != 123 ] && r=$(sane $T/o.json) && ! grep -q '	123.000	45.000$' $C &&
  grep -q 'probed now' $T/e && ok "--reprobe measures again: $g GFLOP/s" ||
  bad "--reprobe: $g, $r, $(cat $C)"
# a cached peak below what the run reached (a disturbed probe) is measured again at once
sed 's/	[0-9.]*	[0-9.]*$/	0.001	45.000/' $C > $T/c2 && cp $T/c2 $C
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 4 --threads 1 --out $T/o.json --verbose \
  > /dev/null 2> $T/e
s=$(num prefill_peak_share $T/o.json)
awk -v s="$s" 'BEGIN { exit !(s > 0 && s <= 1) }' && grep -q 'probed now' $T/e &&
  ! grep -q '	0.001	' $C && ok "a cached peak the run beat is probed again (share $s)" ||
  bad "peak 0.001 cached: share $s, $(cat $C)"
# a decode faster than a cached bandwidth: tiny5 reads a few MB a token, which the caches
# hold, so it may; not measured again (a lone stream far past the caches would be:
# test_roofline checks the rule)
sed 's/	[0-9.]*	[0-9.]*$/	123.000	0.001/' $C > $T/c2 && cp $T/c2 $C
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 4 --threads 1 --out $T/o.json --verbose \
  > /dev/null 2> $T/e
s=$(num decode_bandwidth_share $T/o.json)
awk -v s="$s" 'BEGIN { exit !(s > 1) }' && ! grep -q 'probed now' $T/e &&
  grep -q '	123.000	0.001$' $C && ok "a cache-sized decode past the bandwidth: kept ($s)" ||
  bad "bandwidth 0.001 cached: share $s, $(cat $C)"
# another thread count is another line; the first stays
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 4 --threads 2 --out $T/o.json > /dev/null 2>&1
[ "$(wc -l < $C)" = 2 ] && grep -q '|threads 2	' $C && grep -q '|threads 1	' $C &&
  ok "a line per thread count" || bad "threads: $(cat $C)"
# off: no file anywhere; the default: the XDG cache folder, else HOME's .cache
mkdir $T/home
HOME=$T/home K3_MACHINE_CACHE=off $K3 $M --ids "$P" --gen 4 --out $T/o.json > /dev/null 2>&1
r=$(sane $T/o.json) && [ -z "$(ls -A $T/home)" ] && ok "off: probed, nothing written" ||
  bad "off: $r $(ls -A $T/home)"
env -u K3_MACHINE_CACHE XDG_CACHE_HOME=$T/xdg HOME=$T/home $K3 $M --ids "$P" --gen 2 \
  --out $T/o.json > /dev/null 2>&1
[ -s $T/xdg/k3/machine.txt ] && ok "XDG_CACHE_HOME/k3/machine.txt" || bad "no XDG cache file"
env -u K3_MACHINE_CACHE -u XDG_CACHE_HOME HOME=$T/home $K3 $M --ids "$P" --gen 2 \
  --out $T/o.json > /dev/null 2>&1
[ -s $T/home/.cache/k3/machine.txt ] && ok "HOME/.cache/k3/machine.txt" || bad "no HOME cache file"
# k3 bench-kernels caches its longer measurement; a run at its kernels and threads uses it
K3_MACHINE_CACHE=$T/bk.txt $K3 bench-kernels --only mxfp4 --no-prefill --runs 1 --threads 1 \
  > $T/bk.out 2>&1
g=$(sed -n 's/.*|threads 1	\([0-9.]*\)	.*/\1/p' $T/bk.txt)
K3_MACHINE_CACHE=$T/bk.txt $K3 $M --ids "$P" --gen 4 --threads 1 --out $T/o.json > /dev/null 2>&1
awk -v a="$g" -v b="$(num machine_fma_gflops $T/o.json)" 'BEGIN { exit !(a > 0 && a == b) }' &&
  ok "bench-kernels' peak ($g GFLOP/s) serves the run" ||
  bad "bench-kernels: '$g' vs $(grep machine_ $T/o.json) $(cat $T/bk.txt)"
# bench rows: the same fields, medians over the reps (the probe cached by the parent)
$K3 bench $M -r 2 -p 4 -n 4 -o jsonl -q --no-limits > $T/b.jsonl 2> $T/b.err
tail -n 1 $T/b.jsonl | tr ',' '\n' | sed 's/^ *//; s/}$//; s/$/,/' > $T/row.json
r=$(sane $T/row.json) && ok "a bench row has the machine fields" || bad "bench row: $r"
$K3 bench $M -r 1 -p 4 -n 4 -o csv -q --no-limits > $T/b.csv 2>> $T/b.err
head -n 1 $T/b.csv | grep -q ',prefill_flops,.*,machine_read_gbps,decode_floor_s,decode_floor_ratio$' &&
  awk -F, 'NR == 2 && $NF > 0 && $(NF - 1) > 0 { f = 1 } END { exit !f }' $T/b.csv &&
  ok "bench csv: the machine columns" || bad "bench csv: $(cat $T/b.csv $T/b.err)"
# --dump-logits puts every prompt row through the head inside the prefill: each counted
# (2 x vocab x hidden FLOPs a row beyond the one a plain run needs)
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 1 --threads 1 --out $T/o1.json > /dev/null 2>&1
K3_MACHINE_CACHE=$C $K3 $M --ids "$P" --gen 1 --threads 1 --out $T/o2.json \
  --dump-logits $T/l.f32 > /dev/null 2>&1
np=$(echo "$P" | tr ',' '\n' | wc -l)
awk -v a="$(num prefill_flops $T/o1.json)" -v b="$(num prefill_flops $T/o2.json)" -v n=$np \
  'BEGIN { d = b - a - (n - 1) * 2 * 1024 * 256; exit !(n > 1 && d < 1e-4 * b && d > -1e-4 * b) }' &&
  ok "--dump-logits counts its $np head rows" ||
  bad "head rows: $(num prefill_flops $T/o1.json) vs $(num prefill_flops $T/o2.json), $np rows"
exit $fail
