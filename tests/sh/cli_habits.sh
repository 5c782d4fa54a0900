#!/bin/sh
# llama.cpp habits (issue 35). Its short flags are k3's long ones (main.c, before any
# mode parses): -m MODEL_DIR, -p --prompt, -n --gen, -c --ctx, -t --threads, -s --seed,
# -f --prompt-file give the long flag's output in one prompt, chat and batch mode; a mode
# without the long flag refuses it by that name (serve has no --seed); k3 bench keeps
# llama-bench's own -p/-n; the value of a flag is never rewritten (--stop -n). And
# `k3 MODEL_DIR --tok DIR` with no prompt starts the chat, as llama-cli does; without --tok
# it says what to give.
M=tests/models/tiny5; TK=tests/tok/tiny
P=$(cat $M/ref/prompt.txt)
. tests/sh/lib/check.sh

# same WHAT "ALIAS ARGS" "LONG ARGS" [stdin file]: exit 0 both, the same stdout and stderr
# (times aside: batch mode's "seconds_*" fields, the digits of stderr)
same() {
  what=$1; in=${4:-/dev/null}
  eval "\$K3 $2" < $in > $T/a.o 2> $T/a.e; ra=$?
  eval "\$K3 $3" < $in > $T/b.o 2> $T/b.e; rb=$?
  for x in a b; do
    sed 's/"seconds_[a-z]*": [0-9.]*//g' $T/$x.o > $T/$x.out; tr -d 0-9 < $T/$x.e > $T/$x.err
  done
  if [ $ra -eq 0 ] && [ $ra -eq $rb ] && [ -s $T/b.out ] && cmp -s $T/a.out $T/b.out &&
     cmp -s $T/a.err $T/b.err; then ok "$what: the long flag's output"
  else bad "$what: exit $ra/$rb, '$(head -c 200 $T/a.err)' / '$(head -c 200 $T/b.err)'"; fi
}
echo 'The capital of' > $T/p.txt
Q='--quiet --tok $TK'
same "-m MODEL_DIR" "-m \$M --ids \$P --gen 3 --quiet" "\$M --ids \$P --gen 3 --quiet"
same "-n N" "\$M --ids \$P -n 3 --quiet" "\$M --ids \$P --gen 3 --quiet"
[ "$(tr ',' '\n' < $T/a.out | grep -c .)" -eq 3 ] && ok "-n 3: 3 ids" || bad "-n 3: $(cat $T/a.out)"
same "-p TEXT" "\$M -p 'The capital of' --gen 3 $Q" "\$M --prompt 'The capital of' --gen 3 $Q"
same "-f FILE" "\$M -f \$T/p.txt --gen 3 $Q" "\$M --prompt-file \$T/p.txt --gen 3 $Q"
same "-s N" "\$M --ids \$P --gen 4 --temperature 0.9 -s 7 --quiet" \
  "\$M --ids \$P --gen 4 --temperature 0.9 --seed 7 --quiet"
same "-t N" "\$M --ids \$P --gen 3 -t 1 --quiet" "\$M --ids \$P --gen 3 --threads 1 --quiet"
same "-c N" "\$M --ids \$P --gen 3 -c 64 --quiet" "\$M --ids \$P --gen 3 --ctx 64 --quiet"
$K3 $M --ids "$P" --gen 2 -c 3 > $T/o 2> $T/e; [ $? = 2 ] && grep -q -- 'past --ctx 3' $T/e &&
  ok "-c 3 is --ctx 3 (the prompt past it refused)" || bad "-c 3: $(head -c 300 $T/e)"
same "all at once" "-m \$M --ids \$P -n 3 -c 64 -t 1 -s 2 --temperature 0.8 --quiet" \
  "\$M --ids \$P --gen 3 --ctx 64 --threads 1 --seed 2 --temperature 0.8 --quiet"

printf 'Hello\n' > $T/in
same "chat: -m -n -s -c -t" "-m \$M --chat --tok \$TK -n 3 -s 5 -c 512 -t 1 --no-think" \
  "\$M --chat --tok \$TK --gen 3 --seed 5 --ctx 512 --threads 1 --no-think" $T/in
printf '{"ids": [1, 2]}\n{"ids": [3]}\n' > $T/b.jsonl
same "batch: -m -n -s -c -t" \
  "-m \$M --batch \$T/b.jsonl -n 3 -s 5 -c 64 -t 1 --temperature 0.7 --quiet" \
  "\$M --batch \$T/b.jsonl --gen 3 --seed 5 --ctx 64 --threads 1 --temperature 0.7 --quiet"

expect() {  # expect PATTERN -- command...: exit 2 and PATTERN on stderr
  pat=$1; shift 2
  "$@" < /dev/null >$T/o 2>$T/e; rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$pat" $T/e; then ok "exit 2: $pat";
  else bad "expected exit 2 and '$pat', got $rc: $(head -c 300 $T/e)"; fi
}
expect "serve needs a tokenizer" -- env -u K3_TOK_FILES $K3 serve -m $M
expect "unknown serve option '--seed'" -- $K3 serve -m $M --tok $TK -s 1
expect "k3 bench: -n: 'x' is not an integer" -- $K3 bench $M -n x
expect "k3 bench: -p: 'x' is not an integer" -- $K3 bench $M -p x
# a value is a value: --stop's "-n", --prompt's "-p"; after a flag without a value, an alias
same "--stop -n (a value)" "\$M --ids \$P --gen 3 --stop -n $Q" "\$M --ids \$P --gen 3 --stop=-n $Q"
same "--prompt -p (a value)" "\$M --prompt -p --gen 2 $Q" "\$M --prompt=-p --gen 2 $Q"
same "--verbose -n" "\$M --ids \$P --verbose -n 2 --quiet" "\$M --ids \$P --verbose --gen 2 --quiet"
$K3 --help > $T/h
miss=
for a in "-m MODEL_DIR" "-p TEXT" "-f PATH" "-n N" "-c N" "-t N" "-s N"; do
  grep -q -- "$a" $T/h || miss="$miss '$a'"
done
[ -z "$miss" ] && ok "--help lists the short forms" || bad "--help does not list$miss"

# no prompt, --tok given: the chat, as --chat; piped input ends it at EOF
same "k3 MODEL_DIR --tok DIR: a chat" "\$M --tok \$TK --gen 3 --seed 5 --no-think" \
  "\$M --chat --tok \$TK --gen 3 --seed 5 --no-think" $T/in
same "k3 -m MODEL_DIR --tok=DIR -n: a chat" "-m \$M --tok=\$TK -n 3 -s 5 --no-think" \
  "\$M --chat --tok \$TK --gen 3 --seed 5 --no-think" $T/in
grep -q 'seed 5 (replay' $T/a.e && ok "the chat's seed: 5" || bad "chat: $(head -c 300 $T/a.e)"
W="no prompt: give --prompt TEXT (-p), --prompt-file PATH (-f) or --ids LIST; or --tok DIR to chat"
expect "$W" -- env -u K3_TOK_FILES $K3 $M --gen 3
expect "$W" -- env K3_TOK_FILES=$TK $K3 -m $M -n 3
expect "give exactly one of --ids, --prompt, --prompt-file" -- $K3 $M --ids 1 -p hi --tok $TK
exit $fail
