#!/bin/sh
# llama.cpp habits: --flag=value works for every flag that takes a value (batch and chat,
# the same output as the two-word form), and an unknown option names the k3 flag meant
# (--temp, --n-predict, typos), exit 2. llama.cpp's -n, -p, -c, -m are taken: cli_habits.sh
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)
. tests/sh/lib/check.sh

mkdir $T/a $T/b
$K3 $M --ids "$P" --gen 4 --threads 1 --kernels auto --prefill-chunk 5 --temperature 0.8 \
  --seed 3 --top-k 50 --top-p 0.9 --min-p 0.01 --preset minimum --cache-gb 0 --ctx 64 \
  --out $T/a/r.json --dump-logits $T/a/l.f32 --config $M/config.json --tok $TK \
  --dump-cache-trace $T/a --quiet > $T/a/out 2>$T/a/err || bad "two-word flags: $(cat $T/a/err)"
$K3 $M --ids="$P" --gen=4 --threads=1 --kernels=auto --prefill-chunk=5 --temperature=0.8 \
  --seed=3 --top-k=50 --top-p=0.9 --min-p=0.01 --preset=minimum --cache-gb=0 --ctx=64 \
  --out=$T/b/r.json --dump-logits=$T/b/l.f32 --config=$M/config.json --tok=$TK \
  --dump-cache-trace=$T/b --quiet > $T/b/out 2>$T/b/err || bad "--flag=value: $(cat $T/b/err)"
cmp -s $T/a/out $T/b/out && cmp -s $T/a/l.f32 $T/b/l.f32 \
  && cmp -s $T/a/cache_trace.txt $T/b/cache_trace.txt \
  && [ -s $T/b/r.json ] && ok "batch: every value flag as --flag=value gives the same output" \
  || bad "batch --flag=value differs"
out=$($K3 $M --prompt="The capital" --tok=$TK --gen=2 --quiet) && [ -n "$out" ] \
  && ok "--prompt=TEXT (a space inside)" || bad "--prompt=TEXT"
out=$($K3 $M --ids=1 --gen=1 --prompt-file=/dev/null --quiet 2>&1); [ $? -eq 2 ] && echo "$out" | \
  grep -q 'exactly one of' \
  && ok "--prompt-file=PATH is parsed (two inputs refused)" || bad "--prompt-file=: $out"

for mode in a b; do
  if [ $mode = a ]; then set -- --tok $TK --gen 3 --seed 5 --history $T/$mode/h.jsonl --system \
    'Be brief.' \
      --think-effort low --save-state $T/$mode/s.bin --temperature 0.7 --ctx 512 --threads 1 \
      --kernels auto
  else set -- --tok=$TK --gen=3 --seed=5 --history=$T/$mode/h.jsonl --system='Be brief.' \
      --think-effort=low --save-state=$T/$mode/s.bin --temperature=0.7 --ctx=512 --threads=1 \
      --kernels=auto; fi
  printf 'Hello\nAgain\n' | timeout 60 $K3 $M --chat "$@" > $T/$mode/chat 2>$T/$mode/cerr \
    || bad "chat $mode: $(cat $T/$mode/cerr)"
done
cmp -s $T/a/chat $T/b/chat && cmp -s $T/a/h.jsonl $T/b/h.jsonl && cmp -s $T/a/s.bin $T/b/s.bin \
  && grep -q 'Be brief.' $T/b/h.jsonl \
  && ok "chat: --flag=value gives the same replies, history and state" \
  || bad "chat --flag=value differs"

expect() {  # expect PATTERN -- command...
  pat=$1; shift 2
  "$@" < /dev/null >$T/o 2>$T/e; rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$pat" $T/e; then ok "exit 2: $pat";
  else bad "expected exit 2 and '$pat', got $rc: $(head -c 300 $T/e)"; fi
}
expect "unknown option '--temp'; did you mean --temperature?" -- $K3 $M --ids 1 --temp 0.7
expect "unknown option '--n-predict'; did you mean --gen?" -- $K3 $M --ids 1 --n-predict 4
expect "unknown option '--temp=0.7'; did you mean --temperature?" -- $K3 $M --ids 1 --temp=0.7
expect "unknown option '--promt'; did you mean --prompt?" -- $K3 $M --promt hi
expect "unknown option '--ctx-size'; did you mean --ctx?" -- $K3 $M --ids 1 --ctx-size 4096
expect "unknown option '-m'; k3 takes the model directory as a plain argument" -- $K3 bench -m $M
expect "--greedy takes no value" -- $K3 $M --ids 1 --greedy=1
expect "unknown option '--temp'; did you mean --temperature?" -- $K3 $M --chat --tok $TK --temp 0.7
expect "unknown option '--hide'; did you mean --hide-thinking?" -- $K3 $M --chat --tok $TK --hide
expect "unknown option '-sys'; did you mean --system?" -- $K3 $M --chat --tok $TK -sys hi
expect "unknown option '--frobnicate'" -- $K3 $M --ids 1 --frobnicate
exit $fail
