#!/bin/sh
# --help anywhere in a subcommand's arguments prints its usage on stdout, exit 0, even where
# a flag's value was due (`k3 MODEL --batch --help` opened a file named --help); and
# bench-kernels refuses an --only that matches no shape (it printed an empty table, exit 0)
# with exit 2, naming the value and the valid shapes (issue 35).
set -u
. tests/sh/lib/check.sh
M=tests/models/tiny5
help() {  # help USAGE_PREFIX -- ARGS...
  want=$1; shift 2
  $K3 "$@" > $T/o 2> $T/e; rc=$?
  [ $rc -eq 0 ] && head -n 1 $T/o | grep -q "^Usage: $want" && [ ! -s $T/e ] &&
    ok "k3 $*: usage, exit 0" || bad "k3 $*: exit $rc, $(head -c 200 $T/e)"
}
help "k3 MODEL_DIR --batch FILE" -- $M --batch --help
help "k3 MODEL_DIR --batch FILE" -- --batch --help
help "k3 MODEL_DIR --batch FILE" -- $M --batch x.jsonl --out --help
help "k3 bench MODEL_DIR" -- bench --help
help "k3 bench MODEL_DIR" -- bench $M --trunk --help
help "k3 doctor MODEL_DIR" -- doctor --help
help "k3 doctor MODEL_DIR" -- doctor $M --trunk --help
help "k3 pack MODEL_DIR" -- pack --help
help "k3 tokenize" -- tokenize --help
help "k3 tokenize" -- tokenize --tok --help
help "k3 bench-kernels" -- bench-kernels --help
help "k3 bench-kernels" -- bench-kernels --only --help
help "k3 image FILE" -- image --help
help "k3 image FILE" -- image tests/images/png_g8.png --rgba --help

$K3 bench-kernels --only nothing > $T/o 2> $T/e; rc=$?
[ $rc -eq 2 ] && [ ! -s $T/o ] &&
  grep -q "^k3 bench-kernels: --only 'nothing' matches no shape" $T/e &&
  grep -q "'mxfp4 3072x3584'" $T/e && grep -q "'bf16c 7168x12288'" $T/e &&
  ok "bench-kernels --only nothing: exit 2, the valid shapes named" ||
  bad "bench-kernels --only nothing: exit $rc, stdout $(wc -c < $T/o) bytes: $(cat $T/e)"
exit $fail
