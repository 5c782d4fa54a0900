#!/bin/sh
# --help / -h of k3 and of every subcommand: usage on stdout (a Usage line, every option
# the subcommand accepts), nothing on stderr, exit 0; an unknown option exits 2 naming it;
# bench-kernels refuses --runs -1 and --threads 0 with exit 2 (naming the flag) instead of
# clamping them.
set -u
M=tests/models/tiny5
. tests/sh/lib/check.sh

# help NAME OPTIONS -- command...: exit 0, a Usage line on stdout that lists OPTIONS
help() {
  name=$1; opts=$2; shift 3
  timeout 60 "$@" > "$T/out" 2> "$T/err"; rc=$?
  if [ $rc -ne 0 ]; then bad "$name: exit $rc, want 0"; return; fi
  grep -q '^Usage' "$T/out" || { bad "$name: no Usage line on stdout"; return; }
  [ -s "$T/err" ] && { bad "$name: wrote to stderr: $(head -n 1 "$T/err")"; return; }
  for o in $opts; do
    grep -q -- "$o" "$T/out" || { bad "$name: the usage does not list $o"; return; }
  done
  ok "$name: usage on stdout, exit 0"
}
# refuse NAME PATTERN -- command...: exit 2 with PATTERN on stderr
refuse() {
  name=$1; pat=$2; shift 3
  timeout 60 "$@" > "$T/out" 2> "$T/err"; rc=$?
  if [ $rc -ne 2 ]; then bad "$name: exit $rc, want 2"; return; fi
  grep -q -- "$pat" "$T/err" ||
    { bad "$name: stderr does not name $pat: $(head -n 1 "$T/err")"; return; }
  ok "$name: exit 2, names $pat"
}

BENCH="--kernels --threads --runs --only --no-prefill --help"
PACK="--verify --quiet --help"
TOK="--tok --special --ids --help"
DOCTOR="--trunk --scan --json --no-bench --help"
for h in --help -h; do
  help "k3 $h" "--ids --prompt --prompt-file --chat --help --verify-reads doctor" -- $K3 $h
  help "k3 MODEL --chat $h" "--tok --history" -- $K3 $M --chat $h
  help "k3 pack $h" "$PACK" -- $K3 pack $h
  help "k3 tokenize $h" "$TOK" -- $K3 tokenize $h
  help "k3 detokenize $h" "$TOK" -- $K3 detokenize $h
  help "k3 bench-kernels $h" "$BENCH" -- $K3 bench-kernels $h
  help "k3 doctor $h" "$DOCTOR" -- $K3 doctor $h
done

refuse "bench-kernels --runs -1" --runs -- $K3 bench-kernels --runs -1
refuse "bench-kernels --threads 0" --threads -- $K3 bench-kernels --threads 0
refuse "bench-kernels --runs 16" --runs -- $K3 bench-kernels --runs 16
refuse "bench-kernels --runs x" --runs -- $K3 bench-kernels --runs x
refuse "bench-kernels --runs (no value)" --runs -- $K3 bench-kernels --runs

refuse "k3 --bogus" --bogus -- $K3 --bogus
refuse "k3 MODEL --chat --bogus" --bogus -- $K3 $M --chat --bogus
refuse "k3 pack --bogus" --bogus -- $K3 pack --bogus
refuse "k3 tokenize --bogus" --bogus -- $K3 tokenize --bogus
refuse "k3 detokenize --bogus" --bogus -- $K3 detokenize --bogus
refuse "k3 bench-kernels --bogus" --bogus -- $K3 bench-kernels --bogus
refuse "k3 doctor --bogus" --bogus -- $K3 doctor $M --bogus
exit $fail
