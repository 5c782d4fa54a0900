# Sourced by the k3 serve tests (tests/sh/serve*.sh; not a test itself): tiny5 + the tiny
# tokenizer over loopback, driven by curl. Sets K3 M TK T C; exits 0 with a SKIP when curl
# is missing (unless NO_CURL=1: a client of its own, tests/node/openai_client.sh). Its helpers:
#   start NAME [flags]  a server on a free port (PORT_NAME), killed at exit
#   fail MSG            the message and the tail of every server's stderr, exit 1
#   jstr KEY / jnum KEY the first "KEY": value on stdin (strings still escaped)
#   hjstr KEY FILE LINE the same from the REPL's JSONL history (no space after the colon)
K3=${K3:-./bin/k3}
M=tests/models/tiny5; TK=tests/tok/tiny
[ -n "${NO_CURL:-}" ] || command -v curl >/dev/null 2>&1 ||
  { echo "SKIP: $(basename "$0") needs curl (.ci/run installs it)"; exit 0; }
[ -d $M ] && [ -d $TK ] || { echo "FAIL: committed fixture $M or $TK missing"; exit 1; }
T=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
# the machine's probe (roofline.h) never cached in the user's folder (tests/run.sh sets one)
[ -n "${K3_MACHINE_CACHE:-}" ] || { K3_MACHINE_CACHE=$T/machine.txt; export K3_MACHINE_CACHE; }
fail() { echo "FAIL: $*"; for f in "$T"/*.err; do echo "--- $f"; tail -n 5 "$f"; done; exit 1; }
C="curl -s --max-time 60"
start() {
  name=$1; shift
  "$K3" serve $M --tok $TK --port 0 "$@" 2> "$T/$name.err" &
  PIDS="$PIDS $!"
  i=0
  while ! grep -qs 'listening on http://' "$T/$name.err"; do
    i=$((i+1)); [ $i -gt 300 ] && fail "server $name did not start"
    sleep 0.1
  done
  p=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$T/$name.err")
  eval "PORT_$name=$p"
}
jstr() { sed -n "s/.*\"$1\": \(\"\([^\"\\\\]\|\\\\.\)*\"\).*/\1/p" | head -n 1; }
jnum() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" | head -n 1; }
hjstr() { sed -n "$3p" "$2" | sed -n "s/.*\"$1\":\(\"\([^\"\\\\]\|\\\\.\)*\"\).*/\1/p"; }
