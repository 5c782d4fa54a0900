#!/bin/sh
# Why a one-shot run stopped, said everywhere (issue 35): stdout never carries the end
# token's text (plain, --system-file, --json), --out's "stop" is one of eos, length,
# stop_string, context, interrupted (Ctrl-C in the prefill writes it too); --ctx is the
# context limit (a prompt past it is exit 2 naming the numbers, generation stops at it);
# sampling without --seed draws one, prints it and --out records it (a replay repeats it).
. tests/sh/lib/check.sh
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)                          # 12 ids
stopw() { sed -n 's/^  "stop": "\([a-z_]*\)",$/\1/p' "$1"; }

# eos: id 770 is <|end_of_msg|> in the tiny tokenizer and the tiny models' eos
$K3 $M --tok $TK --prompt hi --gen 10 --logit-bias 770=100 --out $T/e.json >$T/o 2>$T/e
rc=$?
[ $rc = 0 ] && ! grep -q 'end_of_msg' $T/o && [ "$(stopw $T/e.json)" = eos ] &&
  grep -q 'stopped by the end token (eos)' $T/e && ok "eos: no end token text, stop eos" ||
  bad "eos: exit $rc, stdout '$(cat $T/o)', stop '$(stopw $T/e.json)'"
printf 'Be brief.' > $T/sys
$K3 $M --tok $TK --prompt hi --system-file $T/sys --gen 10 --logit-bias 770=100 >$T/o 2>/dev/null
! grep -q 'end_of_msg' $T/o && ok "--system-file: no end token text" || bad "--system-file: $(cat $T/o)"
echo '{"type": "object", "properties": {}, "additionalProperties": false}' > $T/schema
$K3 $M --tok $TK --prompt hi --json-schema $T/schema --gen 50 --out $T/j.json >$T/o 2>/dev/null
! grep -q 'end_of_msg' $T/o && [ "$(stopw $T/j.json)" = eos ] &&
  ok "--json-schema: the object whole, no end token text" || bad "--json-schema: $(cat $T/o)"
# with --ids the ids are the output: the end token's id is listed
$K3 $M --ids 5 --gen 10 --logit-bias 770=100 >$T/o 2>/dev/null
[ "$(cat $T/o)" = 770 ] && ok "--ids: the end id is listed" || bad "--ids: '$(cat $T/o)'"

# length
$K3 $M --ids "$P" --gen 3 --out $T/l.json >/dev/null 2>&1
[ "$(stopw $T/l.json)" = length ] && ok "stop length" || bad "stop '$(stopw $T/l.json)'"

# --ctx: the limit of prompt + generated tokens
$K3 $M --ids "$P" --gen 8 --ctx 14 --out $T/c.json >$T/o 2>$T/e; rc=$?
n=$(sed -n 's/.*"n_generated": \([0-9]*\).*/\1/p' $T/c.json)
[ $rc = 0 ] && [ "$n" = 2 ] && [ "$(stopw $T/c.json)" = context ] &&
  grep -q 'stopped by --ctx 14 (context)' $T/e && ok "--ctx 14: 2 generated, stop context" ||
  bad "--ctx 14: exit $rc, $n generated, stop '$(stopw $T/c.json)': $(tail -n 3 $T/e)"
$K3 $M --ids "$P" --gen 8 --out $T/r.json >$T/full 2>/dev/null
[ "$(cut -d, -f1-2 $T/full)" = "$(cat $T/o)" ] && ok "--ctx: the same first ids" ||
  bad "--ctx: '$(cat $T/o)' is not the start of '$(cat $T/full)'"
$K3 $M --ids "$P" --gen 8 --ctx 10 >$T/o 2>$T/e; rc=$?
[ $rc = 2 ] && grep -q 'the prompt is 12 tokens, past --ctx 10' $T/e && [ ! -s $T/o ] &&
  ok "a prompt past --ctx: exit 2, $(cat $T/e)" || bad "prompt past --ctx: exit $rc: $(cat $T/e)"

# Ctrl-C in the prefill still writes --out (interrupted, nothing generated)
ids=$(seq 1 300 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), ($1 * 37) % 200 + 1) }')
K3_TEST_SIGINT_AT_EXPERT=21 $K3 $M --ids "$ids" --gen 4 --threads 1 --out $T/i.json \
  >/dev/null 2>$T/e; rc=$?
[ $rc = 1 ] && [ "$(stopw $T/i.json)" = interrupted ] &&
  grep -q '"interrupted": true' $T/i.json && grep -q '"n_generated": 0' $T/i.json &&
  ok "Ctrl-C in the prefill: --out written, stop interrupted" ||
  bad "Ctrl-C in the prefill: exit $rc, --out: $(head -c 300 $T/i.json 2>&1)"

# a drawn seed, printed and recorded; the replay with it gives the same ids
$K3 $M --ids "$P" --gen 6 --temperature 1 --out $T/s.json >$T/s1 2>$T/e
s=$(sed -n 's/^  "seed": \([0-9]*\),$/\1/p' $T/s.json)
[ -n "$s" ] && grep -q "sampling with seed $s (repeat the run with --seed $s)" $T/e &&
  ok "a drawn seed: $s" || bad "no drawn seed: '$s', $(grep seed $T/e)"
$K3 $M --ids "$P" --gen 6 --temperature 1 --seed "$s" >$T/s2 2>$T/e
cmp -s $T/s1 $T/s2 && ! grep -q 'sampling with seed' $T/e && ok "--seed $s replays it" ||
  bad "--seed $s: '$(cat $T/s2)' vs '$(cat $T/s1)'"
$K3 $M --ids "$P" --gen 6 --temperature 1 --out $T/s3.json >/dev/null 2>&1
[ "$(sed -n 's/^  "seed": \([0-9]*\),$/\1/p' $T/s3.json)" != "$s" ] &&
  ok "another run draws another seed" || bad "the same seed twice: $s"
exit $fail
