#!/bin/sh
# Memory/streaming benchmark (docs/PERFORMANCE.md): k3 at several --trunk-gb/--cache-gb
# budgets on a checkpoint + packed trunk, each run cold (page cache dropped) inside a
# cgroup v1 memory limit of plan total x 1.10, RUNS times per budget. Needs root.
# Before each run: the disk bandwidth with the engine's access pattern
# (tools/bench_mem_disk.py), then the page cache is dropped again.
#   sh tools/bench_mem.sh MODEL_DIR TRUNK_DIR OUT.jsonl [RUNS] [GEN] ["tgb:cgb tgb:cgb ..."]
# One JSON object per run on OUT.jsonl; stderr logs next to it (OUT.logs/).
set -eu
M=$1; TR=$2; OUT=$3; RUNS=${4:-3}; GEN=${5:-12}
BUDGETS=${6:-"0:0 3.7:0.6 5.5:0.3 6.5:1.2 8:2.8 8:4"}
K3=${K3:-./bin/k3}
IDS=${IDS:-16000,5,17,300}
CG=/sys/fs/cgroup/memory/k3bench
LOG=$OUT.logs; mkdir -p $LOG; : > $OUT
[ -d $CG ] || mkdir $CG
for b in $BUDGETS; do
  tg=${b%%:*}; cg=${b##*:}
  need=$(K3_MEM_AVAILABLE=1 $K3 $M --trunk $TR --trunk-gb $tg --cache-gb $cg --ids $IDS --gen $GEN --quiet 2>&1 | sed -n 's/.*plan needs \([0-9.]*\) GB.*/\1/p')
  limit=$(python3 -c "print(int($need*1e9*1.10)+(64<<20))")
  for r in $(seq 1 $RUNS); do
    sync; echo 3 > /proc/sys/vm/drop_caches
    # the disk with the engine's own pattern: O_DIRECT expert windows, queue depth 4, every expert once
    disk=$(python3 tools/bench_mem_disk.py $M --qd 4)
    bw=$(echo "$disk" | python3 -c "import json,sys; print(json.load(sys.stdin)['mb_per_s'])")
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo $limit > $CG/memory.limit_in_bytes; echo 0 > $CG/memory.max_usage_in_bytes 2>/dev/null || true
    t0=$(date +%s.%N)
    sh -c "echo \$\$ > $CG/cgroup.procs; exec $K3 $M --trunk $TR --trunk-gb $tg --cache-gb $cg --ids $IDS --gen $GEN --verbose --out $LOG/run.json" \
      > $LOG/ids-$tg-$cg-$r.txt 2> $LOG/err-$tg-$cg-$r.txt && rc=0 || rc=$?
    t1=$(date +%s.%N)
    maxu=$(cat $CG/memory.max_usage_in_bytes)
    python3 - "$LOG/run.json" "$LOG/err-$tg-$cg-$r.txt" $tg $cg $r $need $limit $maxu $bw $rc $t0 $t1 >> $OUT <<'PY'
import json, re, sys
js, errf, tg, cg, r, need, limit, maxu, bw, rc, t0, t1 = sys.argv[1:]
d = json.load(open(js)) if rc == "0" else {}
steps = []
for line in open(errf):
    m = re.search(r"step (\d+) \((\d+) tokens?\): ([0-9.]+) s, trunk ([0-9.]+) MB, experts ([0-9.]+) MB \((\d+) reads\), (\d+) of (\d+) experts already resident.*I/O wait ([0-9.]+) s", line)
    if m:
        steps.append(dict(step=int(m[1]), ntok=int(m[2]), s=float(m[3]), trunk_mb=float(m[4]), expert_mb=float(m[5]),
                          reads=int(m[6]), resident=int(m[7]), requests=int(m[8]), io_wait=float(m[9])))
plan = {}
for line in open(errf):
    m = re.match(r"\s+(trunk pinned|trunk ring|expert cache|total)\s+([0-9.]+)", line)
    if m: plan[m[1]] = float(m[2])
print(json.dumps(dict(trunk_gb=float(tg), cache_gb=float(cg), run=int(r), plan_total_gb=float(need), cgroup_limit=int(limit),
                      cgroup_max_usage=int(maxu), disk_odirect_mb_s=float(bw), rc=int(rc), wall=float(t1) - float(t0),
                      plan=plan, steps=steps, report=d)))
PY
    echo "budget $tg/$cg run $r: rc $rc, need $need GB, peak $(grep -o 'peak RSS [0-9.]* MiB' $LOG/err-$tg-$cg-$r.txt)" >&2
  done
done
