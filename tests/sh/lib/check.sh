# Sourced by the end-to-end tests that report ok/FAIL lines and end with `exit $fail` (not a
# test itself): the committed tiny checkpoints (FAIL if one is missing), a temporary folder
# T removed at exit (made writable first, for the tests that chmod inside it), and:
#   ok MSG...   prints "ok   MSG" (the words joined by a space, so a long one can wrap)
#   bad MSG...  prints "FAIL MSG" and sets fail=1
# A test that wants `set -u` sets it before sourcing (tests/sh/lib/mem.sh does).
K3=${K3:-./bin/k3}
for _fx in tests/models/tiny5 tests/models/tiny4 tests/models/tiny5f; do
  [ -f $_fx/config.json ] || { echo "FAIL: committed fixture $_fx missing"; exit 1; }
done
T=$(mktemp -d)
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
# the machine's probe (roofline.h) never cached in the user's folder (tests/run.sh sets one)
[ -n "${K3_MACHINE_CACHE:-}" ] || { K3_MACHINE_CACHE=$T/machine.txt; export K3_MACHINE_CACHE; }
fail=0
ok()  { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
