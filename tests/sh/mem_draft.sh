#!/bin/sh
# --draft in the memory plan (issue 36 item 3): the DSpark draft's weights are pinned where
# --trunk-gb has room for them beside the working minimum, else streamed (a piece of rows
# mapped at a time, its pages dropped after it); its context cache, tap rows and a block's
# buffers are in the plan, which prints its share and what a block reads from disk. At a
# starved, a middle and a whole budget, streamed and pinned: the ids and --dump-logits
# bytes of the run without a draft (and with every draft right, the oracle hook), and the
# peak RSS within the plan (+ 2%, as mem_pieces.sh); resident (no --trunk) too; the
# streamed draft's --dump-draft bytes those of the pinned one.
. tests/sh/lib/mem.sh
M=tests/models/tiny5; D=tests/models/tiny5_dspark
P=$(cat $M/ref/prompt.txt); G=$(cat $M/ref/greedy.txt)
$K3 pack $M $T/tr --quiet || bad "k3 pack failed"
$K3 $M --ids "$P" --gen 16 --dump-logits $T/base.f32 --quiet >$T/base 2>/dev/null \
  || bad "the run without a draft failed"
[ "$(cat $T/base)" = "$G" ] || bad "the run without a draft is not ref/greedy.txt"
jn() { sed -n "s/^  \"$1\": \([0-9]*\).*/\1/p" $T/r.json; }
# run NAME WANT ARGS...: ids, logits bytes, peak <= plan + 2%, the plan's draft line
run() {
  name=$1; want=$2; shift 2
  $K3 $M --ids "$P" --gen 16 --draft $D --dump-logits $T/l.f32 --out $T/r.json --verbose \
    "$@" >$T/ids 2>$T/err || { bad "$name: exit $?: $(tail -n 2 $T/err)"; return; }
  [ "$(cat $T/ids)" = "$G" ] && cmp -s $T/base.f32 $T/l.f32 \
    || bad "$name: ids '$(cat $T/ids)' or logits bytes differ from the run without a draft"
  grep -q "^  draft $want " $T/err || bad "$name: the plan has no 'draft $want' line"
  plan=$(jn plan_bytes); peak=$(jn peak_rss_bytes)
  [ -n "$plan" ] && [ -n "$peak" ] && [ "$peak" -le $((plan + plan / 50)) ] \
    && ok "$name: draft $want, ids and logits bytes unchanged, peak RSS $peak <= plan $plan" \
    || bad "$name: peak RSS $peak over the plan $plan"
}
run "--trunk-gb 0" window --trunk $T/tr --trunk-gb 0 --cache-gb 0.002
grep -q "^  a block reads  *disk  trunk .* + draft 2\.[0-9] MB" $T/err \
  && ok "--trunk-gb 0: the plan prints what a block reads (trunk + the streamed draft)" \
  || bad "no 'a block reads' line: $(grep 'block reads' $T/err)"
grep -q "dspark: .* streamed a block at a time" $T/err || bad "the draft did not say streamed"
K3_TEST_DRAFT_ORACLE="$G" run "--trunk-gb 0, every draft right" window --trunk $T/tr \
  --trunk-gb 0 --cache-gb 0.002 --draft-block 7
acc=$(jn draft_accepted)
[ "${acc:-0}" -gt 8 ] && ok "streamed, oracle: $acc drafts accepted" \
  || bad "streamed, oracle: $acc accepted"
# the draft's own bits streamed = pinned: --dump-draft (every block's drafts, confidences
# and logits) byte for byte at a fixed block
# (K3_TEST_DRAFT_PIECE=700: pieces of 1 to 21 rows instead of the whole tiny matrices)
for c in 0: 0:700 1000:; do
  tg=${c%:*}; pc=${c#*:}
  K3_TEST_DRAFT_PIECE=$pc $K3 $M --ids "$P" --gen 12 --draft $D --draft-block 7 --trunk $T/tr \
    --trunk-gb $tg --cache-gb 0.002 --dump-draft $T/dd.$tg$pc --quiet >/dev/null 2>&1 \
    || bad "--dump-draft at --trunk-gb $tg: exit $?"
done
[ -s $T/dd.0 ] && cmp -s $T/dd.0 $T/dd.1000 && cmp -s $T/dd.0 $T/dd.0700 \
  && ok "the streamed draft's --dump-draft bytes (whole matrices, pieces of 700 bytes) =" \
    "the pinned draft's ($(wc -c < $T/dd.0) bytes)" \
  || bad "the streamed draft's --dump-draft bytes differ from the pinned draft's"
run "--trunk-gb 0.02" pinned --trunk $T/tr --trunk-gb 0.02 --cache-gb 0.002
run "--trunk-gb 1000" pinned --trunk $T/tr --trunk-gb 1000 --cache-gb 0.002
run "resident" pinned --cache-gb 1000
# the plan without --verbose (everything resident: one line) counts the draft
$K3 $M --ids "$P" --gen 4 --draft $D --cache-gb 1000 2>$T/err >/dev/null
grep -q "memory plan .*the draft's" $T/err && ok "the one-line plan counts the draft" \
  || bad "the one-line plan: $(grep 'memory plan' $T/err)"
# the pinned draft's share of the plan: its weights (2,248,610 bytes, every tensor but the
# embedding) and more; the plan without it smaller by that share, up to what the process
# held when each planned (plan_bytes counts it: it varies by 100 KB and more between runs)
$K3 $M --ids "$P" --gen 16 --trunk $T/tr --trunk-gb 1000 --cache-gb 0.002 --out $T/r.json \
  --quiet >/dev/null 2>&1
p0=$(jn plan_bytes); d0=$(jn draft_plan_bytes)
$K3 $M --ids "$P" --gen 16 --trunk $T/tr --trunk-gb 1000 --cache-gb 0.002 --out $T/r.json \
  --draft $D --quiet >/dev/null 2>&1
p1=$(jn plan_bytes); d=$(jn draft_plan_bytes)
[ -z "$d0" ] && [ "${d:-0}" -gt 2248610 ] && [ $((p1 - p0 - d)) -gt -1000000 ] &&
  [ $((p1 - p0 - d)) -lt 1000000 ] &&
  ok "the draft's share of the pinned plan: $d bytes (the plan $p0 -> $p1)" ||
  bad "the plan with the draft: $p1 (draft_plan_bytes '$d'), without: $p0 ('$d0')"
# a batch of 5 (batch and serve open a draft context a sequence slot): the plan counts each
# slot's context cache and block buffers (the weights once: one mapping for every slot), the
# table says so, and the peak RSS is within it; the ids those of the batch without the draft
cat > $T/b.jsonl <<EOF
{"id": "a", "ids": [$P], "gen": 20}
{"id": "b", "ids": [754,475,608,87,876,126], "gen": 24}
{"id": "c", "ids": [9,8,7,6,5,4,3,2,1,10,11,12,13,14,15,16,17,18,19,20], "gen": 18}
{"id": "d", "ids": [100,200,300], "gen": 22, "temperature": 0.9, "seed": 5}
{"id": "e", "ids": [42,43,44,45,46,47,48,49], "gen": 20, "temperature": 0.8, "seed": 11}
EOF
ids() { sed 's/, "seconds_prefill.*//' $1 | sort; }
for c in "--trunk $T/tr --trunk-gb 0 --cache-gb 0.002" "--cache-gb 1000"; do
  # shellcheck disable=SC2086
  $K3 $M --batch $T/b.jsonl $c --quiet >$T/b0 2>/dev/null || bad "batch ($c): exit $?"
  # shellcheck disable=SC2086
  $K3 $M --batch $T/b.jsonl $c --draft $D --out $T/r.json --verbose >$T/b1 2>$T/err \
    || bad "batch --draft ($c): exit $?: $(tail -n 2 $T/err)"
  plan=$(jn plan_bytes); peak=$(jn peak_rss_bytes)
  grep -q "^  draft context .*(each of 5 sequences its own)" $T/err \
    || bad "batch ($c): the plan's draft line does not count 5 contexts"
  [ "$(ids $T/b0)" = "$(ids $T/b1)" ] || bad "batch --draft ($c): the ids differ"
  [ -n "$plan" ] && [ -n "$peak" ] && [ "$peak" -le $((plan + plan / 50)) ] \
    && ok "batch of 5 --draft ($c): 5 draft contexts in the plan, peak RSS $peak <= plan $plan" \
    || bad "batch of 5 --draft ($c): peak RSS $peak over the plan $plan"
done
$K3 --list-presets 2>&1 | grep -q "^--draft (the real DSpark: 4\.78 GB" \
  && ok "--list-presets: the real DSpark per preset" || bad "--list-presets has no --draft line"
exit $fail
