#!/bin/sh
# What a new user trips over (issue 27): a missing MODEL_DIR given to k3 pack is a usage
# error (exit 2, naming the path) as everywhere else; k3 serve --host with an address that
# is not this machine's says to pick another --host (not --port); a typo'd subcommand gets
# a "did you mean", while a checkpoint folder of any name still runs.
. tests/sh/lib/check.sh
M=tests/models/tiny5; TK=tests/tok/tiny

# expect RC PATTERN -- CMD...: exit RC and stderr matching PATTERN (grep -E)
expect() {
  want=$1; pat=$2; shift 3
  "$@" > $T/out 2> $T/err; rc=$?
  [ $rc = "$want" ] && grep -Eq -- "$pat" $T/err && ok "$*: exit $rc, '$(head -n 1 $T/err)'" ||
    bad "$*: exit $rc (want $want), stderr '$(head -n 2 $T/err)' (want /$pat/)"
}

expect 2 "^k3 pack: MODEL_DIR $T/nope: no such folder" -- $K3 pack $T/nope $T/out.trunk
[ ! -e $T/out.trunk ] && ok "a refused pack made no TRUNK_DIR" || bad "pack made $T/out.trunk"
expect 2 "^k3 pack: MODEL_DIR $M/config.json: not a folder" -- $K3 pack $M/config.json $T/tr
expect 2 "^k3 pack: TRUNK_DIR $T/a/b: its parent folder does not exist" -- \
  $K3 pack $M $T/a/b --quiet

# 192.0.2.1 is TEST-NET-1 (RFC 5737): documentation only, on no machine's interface
expect 2 "^k3: --host 192.0.2.1: .*not one of this machine's; pick another --host" -- \
  $K3 serve $M --tok $TK --port 0 --host 192.0.2.1
grep -q -- '--port' $T/err && bad "--host refusal mentions --port: $(cat $T/err)"

for w in serv:serve tokenise:tokenize dcotor:doctor bnech:bench detok:detokenize; do
  expect 2 "^k3: '${w%%:*}' is neither a command nor a path; did you mean k3 ${w#*:}\\?" -- \
    $K3 "${w%%:*}" --tok $TK
done
# a real folder that looks like a typo is a MODEL_DIR
mkdir $T/w && ln -s "$(pwd)/$M" $T/w/serv
K3ABS=$(cd "$(dirname "$K3")" && pwd)/$(basename "$K3")
(cd $T/w && "$K3ABS" serv --ids 1,2,3 --gen 2 --quiet) > $T/ids 2> $T/err &&
  [ "$(cat $T/ids)" = "$($K3 $M --ids 1,2,3 --gen 2 --quiet 2>/dev/null)" ] &&
  ok "a checkpoint folder named serv still runs" || bad "folder serv: $(head -n 2 $T/err)"
exit $fail
