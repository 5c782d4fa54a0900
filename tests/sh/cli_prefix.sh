#!/bin/sh
# One message prefix and one exit code for a usage error in every entry point (issue 15,
# "messages and exit codes"): an unknown option and a missing argument exit 2 with a first
# stderr line that starts "k3: " or "k3 SUBCOMMAND: " (README "Exit codes"), never
# "error:" or "k3-bench:".
K3=${K3:-./bin/k3}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
check() {  # check WHAT args...
  what=$1; shift
  "$K3" "$@" </dev/null >/dev/null 2>"$T/e"; rc=$?
  first=$(head -n 1 "$T/e")
  case "$first" in
    "k3: "*|"k3 "[a-z]*": "*) pre=ok ;;
    *) pre=bad ;;
  esac
  if [ $rc -eq 2 ] && [ $pre = ok ]; then echo "ok   $what: $first"
  else echo "FAIL $what: exit $rc (want 2), first line '$first'"; fail=1; fi
}
M=tests/models/tiny5
for sub in "" tokenize detokenize pack bench bench-kernels doctor serve; do
  # shellcheck disable=SC2086
  check "${sub:-run} --bogus" $sub $M --bogus
done
check "pack, no args" pack
check "tokenize, no --tok" tokenize "$T/none.txt"
check "detokenize, no --ids" detokenize --tok tests/tok/tiny
check "doctor, no model" doctor
check "serve, no model" serve
check "run, no model" --ids 1
[ $fail -eq 0 ] && echo "cli prefixes: ok"
exit $fail
