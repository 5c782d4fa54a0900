# k3 — one static binary, libc + pthreads only.
CC      ?= cc
ifeq ($(origin CC),default)
CC      := gcc
endif
OPT     ?= -O2
LINK    ?= -static
CFLAGS  += $(OPT) -std=c11 -D_GNU_SOURCE -Wall -Wextra -ffp-contract=off -fno-fast-math -Iinclude -pthread
LDFLAGS += $(LINK) -pthread
LDLIBS  += -lm

BUILD   ?= build
BIN     ?= bin/k3
# src/<folder>/*.c: the folders follow the data path (README, "Layout").
SRC     := $(wildcard src/*/*.c)
OBJ     := $(SRC:src/%.c=$(BUILD)/%.o)
LIBOBJ  := $(filter-out $(BUILD)/cli/main.o,$(OBJ))
TESTSRC := $(wildcard tests/c/*.c)
TESTBIN := $(TESTSRC:tests/c/%.c=$(BUILD)/tests/%)
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.1.0)
CFLAGS  += -DK3_VERSION='"$(VERSION)"'

# Per-file ISA flags: SIMD twins are compiled for their ISA and chosen at run time.
ARCH := $(shell $(CC) -dumpmachine)
ifneq ($(findstring x86_64,$(ARCH)),)
$(BUILD)/kernels/kernels_avx2.o:   CFLAGS += -mavx2 -mfma -mf16c
$(BUILD)/kernels/kernels_avx512.o: CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mavx2
endif

.PHONY: all test clean asan aarch64 fuzz bench
all: $(BIN)

$(BIN): $(OBJ) | bin
	$(CC) $(LDFLAGS) -o $@ $(OBJ) $(LDLIBS)

$(BUILD)/%.o: src/%.c $(wildcard include/*.h src/*/*.h) | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/c/%.c $(LIBOBJ) $(wildcard include/*.h) | $(BUILD)/tests
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

bin $(BUILD) $(BUILD)/tests:
	mkdir -p $@

# The whole suite, offline: C unit tests, then shell tests (end to end on bin/k3).
test: bin/k3 asan $(TESTBIN)
	@K3=./bin/k3 BUILD=$(BUILD) sh tests/run.sh $(TESTBIN)

# Address/UB sanitizer build of the binary (bin/k3-asan), used by the refusal tests.
asan:
	$(MAKE) BUILD=build/asan BIN=bin/k3-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	  LINK="-fsanitize=address,undefined" bin/k3-asan

clean:
	rm -rf build bin

# Tokenizer fuzzing (tests/c/test_tok_fuzz.c): libFuzzer when clang has it, else the
# built-in mutation fuzzer under ASan/UBSan. FUZZ_SECONDS=60 by default.
FUZZ_SECONDS ?= 60
TOKSRC := $(wildcard src/text/tok*.c src/text/unicode_*.c) src/io/json.c src/base/util.c
fuzz:
	mkdir -p $(BUILD)/fuzz/corpus
	if clang -DTOK_LIBFUZZER -fsanitize=fuzzer,address,undefined -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -pthread \
	     -o $(BUILD)/fuzz/tok_libfuzzer tests/c/test_tok_fuzz.c $(TOKSRC) -lm 2>/dev/null; then \
	  $(BUILD)/fuzz/tok_libfuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 $(BUILD)/fuzz/corpus; \
	else \
	  $(CC) -fsanitize=address,undefined -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -pthread \
	     -o $(BUILD)/fuzz/tok_fuzz tests/c/test_tok_fuzz.c $(TOKSRC) -lm && $(BUILD)/fuzz/tok_fuzz $(FUZZ_SECONDS); \
	fi

# ---- AArch64 cross build (NEON kernels): static bin/k3-aarch64 and its kernel test,
# run under qemu-aarch64 by tests/sh/kernels_aarch64.sh.
AARCH64_CC ?= aarch64-linux-gnu-gcc
aarch64:
	$(MAKE) CC=$(AARCH64_CC) BUILD=build/aarch64 BIN=bin/k3-aarch64 bin/k3-aarch64 build/aarch64/tests/test_kernels
aarch64-test:
	$(MAKE) CC=$(AARCH64_CC) BUILD=build/aarch64 BIN=bin/k3-aarch64 build/aarch64/tests/test_kernels

# Parser fuzzing (tests/c/test_fuzz_parsers.c: JSON, safetensors headers, config.json):
# libFuzzer when clang has it, else the built-in deterministic mutator under ASan/UBSan.
# `make fuzz` runs it too (as a prerequisite); `make fuzz-parsers` runs it alone.
fuzz: fuzz-parsers
.PHONY: fuzz-parsers
PARSERSRC := src/io/json.c src/io/safetensors.c src/io/config.c src/base/util.c
fuzz-parsers:
	mkdir -p $(BUILD)/fuzz/parsers_corpus
	if clang -DK3_LIBFUZZER -fsanitize=fuzzer,address,undefined -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -pthread \
	     -o $(BUILD)/fuzz/parsers_libfuzzer tests/c/test_fuzz_parsers.c $(PARSERSRC) -lm 2>/dev/null; then \
	  $(BUILD)/fuzz/parsers_libfuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -timeout=10 $(BUILD)/fuzz/parsers_corpus; \
	else \
	  $(CC) -fsanitize=address,undefined -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -pthread \
	     -o $(BUILD)/fuzz/parsers_fuzz tests/c/test_fuzz_parsers.c $(PARSERSRC) -lm && \
	  $(BUILD)/fuzz/parsers_fuzz 100000; \
	fi

# ---- Kernel benchmark: bin/k3-bench (tools/bench_kernels.c); results in docs/data/kernels_bench.txt.
bench: bin/k3-bench
bin/k3-bench: tools/bench_kernels.c $(LIBOBJ) | bin
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ tools/bench_kernels.c $(LIBOBJ) $(LDLIBS)
