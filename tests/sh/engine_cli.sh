#!/bin/sh
# End-to-end CLI contract of bin/k3 on the committed tiny checkpoint: ids on stdout,
# --out JSON fields, --dump-logits shape, --gen 0, incremental == recompute, thread
# counts and kernel paths give identical logits bytes, usage errors exit 2.
set -u
M=tests/models/tiny5
P=$(cat $M/ref/prompt.txt)
. tests/sh/lib/check.sh

out=$($K3 $M --ids "$P" --gen 16 --out $T/run.json --quiet) \
  && [ "$out" = "$(cat $M/ref/greedy.txt)" ] \
  && ok "greedy ids on stdout equal the reference" || bad "greedy ids: got '$out'"
for k in prompt_ids generated_ids n_prompt n_generated seconds_prefill seconds_per_token \
  tokens_per_second peak_rss_bytes steps experts_already_resident trunk_bytes_read \
  expert_bytes_read expert_hit_rate io_share; do
  grep -q "\"$k\"" $T/run.json || bad "--out JSON lacks $k"
done
grep -q '"n_generated": 16' $T/run.json && ok "--out JSON fields" || bad "--out n_generated"
out=$($K3 $M --ids "$P" --gen 16 --recompute --quiet) && [ "$out" = "$(cat $M/ref/greedy.txt)" ] \
  && ok "--recompute ids equal" || bad "--recompute ids: got '$out'"
$K3 $M --ids "$P" --gen 0 --dump-logits $T/l.f32 --quiet >/dev/null || bad "--gen 0 failed"
sz=$(wc -c < $T/l.f32); np=$(echo "$P" | tr ',' '\n' | wc -l)
[ "$sz" -eq $((np * 1024 * 4)) ] && ok "--dump-logits is [n_prompt][vocab] float32 ($sz bytes)" \
  || bad "--dump-logits size $sz"
for th in 1 2 3; do
  for k in scalar auto; do
    $K3 $M --ids "$P" --gen 0 --threads $th --kernels $k --dump-logits $T/l-$th-$k.f32 --quiet \
      >/dev/null
    cmp -s $T/l.f32 $T/l-$th-$k.f32 || bad "logits differ: --threads $th --kernels $k"
  done
done
ok "logits bytes identical across --threads 1,2,3 x --kernels scalar,auto"
$K3 $M --ids "$P" --gen 0 --incremental --quiet >/dev/null && ok "--incremental accepted" \
  || bad "--incremental"

mkdir $T/textonly; for f in $M/*; do ln -s "$(pwd)/$f" $T/textonly/; done
rm $T/textonly/model-00015-of-000016.safetensors $T/textonly/model-00016-of-000016.safetensors
out=$($K3 $T/textonly --ids "$P" --gen 16 --quiet) && [ "$out" = "$(cat $M/ref/greedy.txt)" ] \
  && ok "vision-only shards are skipped (a text-only download runs)" \
  || bad "text-only download: '$out'"

expect() {  # expect CODE PATTERN -- command...
  code=$1; pat=$2; shift 3
  "$@" >$T/o 2>$T/e; rc=$?
  if [ $rc -eq $code ] && grep -q -- "$pat" $T/e; then ok "exit $code: $pat";
  else bad "expected exit $code and '$pat', got $rc: $(head -c 300 $T/e)"; fi
}
expect 2 "MODEL_DIR" -- $K3 --ids 1,2
expect 2 "unknown option" -- $K3 $M --ids 1 --frobnicate
expect 2 "exactly one of" -- $K3 $M --ids 1 --prompt hi
expect 2 "no prompt: give --prompt TEXT" -- env -u K3_TOK_FILES $K3 $M
expect 2 "not an integer" -- $K3 $M --ids 1 --gen x
expect 2 "--ids" -- $K3 $M --ids 1,x
expect 2 "outside the vocabulary" -- $K3 $M --ids 1,5000
expect 2 "need a tokenizer" -- env -u K3_TOK_FILES $K3 $M --prompt hi
expect 2 "--out /nonexistent-dir/r.json" -- $K3 $M --ids 1 --gen 1 --out /nonexistent-dir/r.json
expect 2 "is a directory" -- $K3 $M --ids 1 --gen 1 --config /tmp
expect 2 "tiktoken.model" -- $K3 $M --ids 1 --gen 1 --tok /nonexistent-dir
out=$($K3 $M --ids "$P" --gen 4 --tok tests/tok/tiny --quiet) && ! echo "$out" | \
  grep -q '^[0-9,]*$' \
  && ok "--ids with an explicit --tok streams text" || bad "--ids with --tok printed '$out'"
$K3 --help | grep -q -- "--dump-logits" && ok "--help" || bad "--help"
$K3 --version | grep -q "^k3 " && ok "--version" || bad "--version"
exit $fail
