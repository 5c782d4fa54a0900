#!/bin/sh
# Times st_open over a synthetic 96-shard, 497,220-tensor checkpoint with the real K3
# layout (sparse data; ~120 MB of headers + index on disk while it runs).
#   sh tools/bench_st_index.sh [DIR] [RUNS]
set -e
cd "$(dirname "$0")/.."
CC=${CC:-gcc}
mkdir -p build/tools
$CC -std=c11 -D_GNU_SOURCE -Wall -Wextra -O2 -ffp-contract=off -Iinclude -pthread \
  -o build/tools/bench_st_index tools/bench_st_index.c src/io/safetensors.c src/io/json.c \
  src/base/util.c src/base/sysmem.c -lm
exec build/tools/bench_st_index "$@"
