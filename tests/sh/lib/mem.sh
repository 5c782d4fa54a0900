# Sourced by the memory tests (tests/sh/mem_*.sh; not a test itself): `set -u` and
# tests/sh/lib/check.sh (K3, the committed tiny checkpoints, the temporary folder T and its
# cleanup, ok/bad and fail).
set -u
. tests/sh/lib/check.sh
