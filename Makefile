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

# Parallel by default, as many jobs as cores (an explicit -jN wins; make -j1 is serial), but
# not beside clean (make clean all would race).
NPROC   := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL)$(filter -j% j%,$(MAKEFLAGS))$(filter clean,$(MAKECMDGOALS)),0)
MAKEFLAGS += -j$(NPROC)
endif

BUILD   ?= build
BIN     ?= bin/k3
# src/<folder>/*.c: the folders follow the data path (README, "Layout").
SRC     := $(wildcard src/*/*.c)
# make mpi (MPI=1): MPI's transport in place of the one-process one (include/comm.h)
ifeq ($(MPI),1)
SRC     := $(filter-out src/comm/solo.c,$(SRC)) src/comm/mpi/comm_mpi.c
endif
OBJ     := $(SRC:src/%.c=$(BUILD)/%.o)
# The chat page of k3 serve (src/serve/webui/): its files become C arrays, written by a host C
# program (embed.c) into $(BUILD)/serve/webui_assets.c; nothing else is needed to build it.
HOSTCC  ?= cc
WEBUI   := src/serve/webui/index.html src/serve/webui/app.js src/serve/webui/style.css
OBJ     += $(BUILD)/serve/webui_assets.o
LIBOBJ  := $(filter-out $(BUILD)/cli/main.o,$(OBJ))
TESTSRC := $(wildcard tests/c/*.c)
TESTBIN := $(TESTSRC:tests/c/%.c=$(BUILD)/tests/%)
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.1.0)
CFLAGS  += -DK3_VERSION='"$(VERSION)"'

# Per-file ISA flags: SIMD twins are compiled for their ISA and chosen at run time.
ARCH := $(shell $(CC) -dumpmachine)
ifneq ($(findstring x86_64,$(ARCH)),)
$(BUILD)/kernels/kernels_avx2.o $(BUILD)/kernels/kernels_avx2_gemm.o $(BUILD)/kernels/kernels_avx2_coded.o \
  $(BUILD)/kernels/kernels_avx2_ew.o: CFLAGS += -mavx2 -mfma -mf16c
$(BUILD)/kernels/kernels_avx512.o $(BUILD)/kernels/kernels_avx512_coded.o \
  $(BUILD)/kernels/kernels_avx512_gemm.o $(BUILD)/kernels/kernels_avx512_ew.o: \
  CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mavx2
$(BUILD)/kernels/kernels_avx2_attn.o: CFLAGS += -mavx2 -mfma
$(BUILD)/kernels/kernels_avx512_attn.o: CFLAGS += -mavx512f -mfma -mavx2
endif

.PHONY: all test check clean asan aarch64 fuzz bench mpi
all: $(BIN)

$(BIN): $(OBJ) | bin
	$(CC) $(LDFLAGS) -o $@ $(OBJ) $(LDLIBS)

$(BUILD)/%.o: src/%.c $(wildcard include/*.h src/*/*.h) | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/webui_embed: src/serve/webui/embed.c | $(BUILD)
	$(HOSTCC) -O1 -o $@ $<
$(BUILD)/serve/webui_assets.c: $(BUILD)/webui_embed $(WEBUI)
	@mkdir -p $(dir $@)
	$(BUILD)/webui_embed $(WEBUI) > $@.tmp && mv $@.tmp $@
$(BUILD)/serve/webui_assets.o: $(BUILD)/serve/webui_assets.c src/serve/webui.h
	$(CC) $(CFLAGS) -Isrc -c -o $@ $<

# Tests reach an application's private header as "serve/serve.h" (-Isrc); the sources never.
$(BUILD)/tests/%: tests/c/%.c $(LIBOBJ) $(wildcard include/*.h src/*/*.h tests/c/*.h) | $(BUILD)/tests
	$(CC) $(CFLAGS) -Isrc $(LDFLAGS) -o $@ $< $(LIBOBJ) $(LDLIBS)

bin $(BUILD) $(BUILD)/tests:
	mkdir -p $@

# The quick suite, offline: C unit tests and shell tests (end to end on bin/k3), as parallel
# jobs (tests/run.sh); each test's slow tier is left to make check. What the tests run is
# built here, in parallel (the AArch64 build when its cross compiler and qemu are there),
# so no test calls make (K3_TEST_BUILT=1).
HAVE_AARCH64 := $(shell command -v $(or $(AARCH64_CC),aarch64-linux-gnu-gcc) >/dev/null 2>&1 \
                  && command -v qemu-aarch64 >/dev/null 2>&1 && echo aarch64)
# bin/k3-mpi for tests/sh/mpi.sh, when mpicc and mpirun are there (else it SKIPs)
HAVE_MPI := $(shell command -v $(or $(MPICC),mpicc) >/dev/null 2>&1 \
              && command -v mpirun >/dev/null 2>&1 && echo mpi)
TESTENV := K3=./bin/k3 BUILD=$(BUILD) K3_TEST_BUILT=1
test: bin/k3 $(TESTBIN) $(HAVE_AARCH64) $(HAVE_MPI)
	@$(TESTENV) sh tests/run.sh $(TESTBIN)

# Everything: make test, then the slow tier (the tests that have one run whole, the refusal
# tests under bin/k3-asan too), the fuzzers CHECK_FUZZ_SECONDS a target, the official Node
# clients, OpenAI's (chat, Responses) and Anthropic's, and the JSON Schema corpus checked by
# Ajv (SKIP without npm). Each step runs even if one before failed; exit 1 if any did.
CHECK_FUZZ_SECONDS ?= 5
check:
	@rc=0; \
	$(MAKE) --no-print-directory test || rc=1; \
	echo "check: the slow tier"; \
	$(MAKE) --no-print-directory asan >/dev/null && \
	  $(TESTENV) K3_ASAN=./bin/k3-asan sh tests/run.sh --full || rc=1; \
	echo "check: make fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)"; \
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS) || rc=1; \
	echo "check: tests/node/openai_client.sh"; \
	K3=./bin/k3 sh tests/node/openai_client.sh || rc=1; \
	echo "check: tests/node/anthropic_client.sh"; \
	K3=./bin/k3 sh tests/node/anthropic_client.sh || rc=1; \
	echo "check: tests/node/responses_client.sh"; \
	K3=./bin/k3 sh tests/node/responses_client.sh || rc=1; \
	echo "check: tests/node/schema_ajv.sh"; \
	K3=./bin/k3 sh tests/node/schema_ajv.sh || rc=1; \
	if [ $$rc = 0 ]; then echo "check: all passed"; else echo "check: FAILED"; fi; exit $$rc

# Address/UB sanitizer build of the binary (bin/k3-asan), used by the refusal tests.
asan:
	$(MAKE) BUILD=build/asan BIN=bin/k3-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	  LINK="-fsanitize=address,undefined" bin/k3-asan

# The whole suite under ASan + UBSan, every report fatal (docs/data/asan_suite.txt): bin/k3
# and the C tests built into build/asan-suite, then tests/run.sh with every test whole
# (K3_TEST_FULL=1). Not part of make test or make check (several times slower).
ASAN_SUITE_OPT := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
                  -fno-omit-frame-pointer
.PHONY: test-asan
test-asan:
	@$(MAKE) --no-print-directory BUILD=build/asan-suite BIN=bin/k3-asan-suite \
	  OPT="$(ASAN_SUITE_OPT)" LINK="-fsanitize=address,undefined" bin/k3-asan-suite \
	  $(TESTSRC:tests/c/%.c=build/asan-suite/tests/%)
	@$(if $(HAVE_AARCH64),$(MAKE) --no-print-directory aarch64)
	@ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} K3_TEST_SLOW=5 \
	  UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1} K3=./bin/k3-asan-suite \
	  K3_ASAN=./bin/k3-asan-suite K3_TEST_FULL=1 K3_TEST_BUILT=1 \
	  BUILD=build/asan-suite sh tests/run.sh $(TESTSRC:tests/c/%.c=build/asan-suite/tests/%)

clean:
	rm -rf build bin

# ---- Fuzzing: one libFuzzer target per file k3 reads, each run FUZZ_SECONDS (default 60;
# FUZZ_RUNS=N stops a target after N inputs) under ASan + UBSan, every report fatal:
#   json st_header st_index config  tests/c/test_fuzz_parsers.c (JSON, safetensors headers,
#                                   model.safetensors.index.json, config.json)
#   tok_text tok_model tok_config   tests/c/test_tok_fuzz.c (encoder, tiktoken.model,
#                                   tokenizer_config.json)
#   chat_hist                       tests/c/test_fuzz_hist.c (chat history JSONL)
#   json_gram                       tests/c/test_fuzz_gram.c (JSON mode's schema + validator)
#   grammar                         tests/c/test_fuzz_grammar.c (GBNF grammar + recogniser)
#   json_schema                     tests/c/test_fuzz_schema.c (JSON Schema -> GBNF compiler)
#   http_head serve_req             tests/c/test_fuzz_http.c (k3 serve: HTTP request head,
#                                   request JSON)
#   chat_state                      tests/c/test_fuzz_state.c (saved chat state)
#   trunk                           tests/c/test_fuzz_trunk.c (packed trunk header + index)
#   dspark                          tests/c/test_fuzz_dspark.c (a DSpark draft's config.json)
#   vision                          tests/c/test_fuzz_vision.c (the vision tower's config.json
#                                   and index; tests/models/tiny5_vision's tower then runs)
#   png jpeg gif inflate data_url   tests/c/test_fuzz_image.c (k3 image's decoders, seeded
#                                   with tests/images/; PNGs also with their CRCs fixed; the
#                                   data: URL / base64 parser of image_url parts)
# Their custom mutator mixes libFuzzer's byte mutations with structural JSON ones
# (tests/c/fuzz_json.h), line and field ones (trunk); inputs up to 16 KiB (4 KiB for
# tok_text, 64 KiB for trunk and chat_state: an index; a state's head, to which the
# harness adds the tensors and the checksum). http_head, serve_req, chat_state, trunk and
# dspark and vision link the whole library (chat_state and trunk open an engine on
# tests/models/tiny5f, dspark one on tests/models/tiny5), built by clang under the same
# sanitizers in $(BUILD)/fuzz/lib. Corpus, log and any
# crash input: $(BUILD)/fuzz/TARGET/. Without a clang that has libFuzzer (FUZZ_CC), the
# harnesses of the first nine and the image ones run as the built-in mutation fuzzers,
# FUZZ_SECONDS each, under $(CC)'s ASan/UBSan (the other six: make test-asan runs their
# built-in fuzzers).
# `make fuzz-parsers`: the first four.
# Runs and findings: docs/data/fuzz_runs.txt.
FUZZ_SECONDS ?= 60
FUZZ_RUNS    ?=
FUZZ_CC      ?= clang
FUZZ_TMPDIR  ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo /tmp)
FUZZ_PARSERS := json st_header st_index config
FUZZ_IMAGE   := png jpeg gif inflate data_url
FUZZ_TARGETS := $(FUZZ_PARSERS) tok_text tok_model tok_config chat_hist json_gram http_head \
                serve_req chat_state trunk dspark $(FUZZ_IMAGE) grammar json_schema vision
MF_ALL       := parsers tok hist gram image grammar schema
FUZZ_FLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
                -O1 -g -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests/c -pthread
TOKSRC    := $(wildcard src/text/tok*.c src/text/unicode_*.c) src/io/json.c src/base/util.c \
             src/base/strbuf.c
PARSERSRC := src/io/json.c src/io/safetensors.c src/io/config.c src/base/util.c src/base/sysmem.c
GRSRC     := src/text/grammar.c src/text/grammar_parse.c $(TOKSRC)
SCHEMASRC := $(wildcard src/text/json_schema*.c) $(GRSRC)
GRAMSRC   := src/text/json_gram.c $(SCHEMASRC)
IMAGESRC  := $(filter-out src/image/image_cli.c src/image/image_in.c,$(wildcard src/image/*.c))
# (a message's images are freed with it: the decoders' k3_image_in_free, image.c)
HISTSRC   := src/chat/chat_hist.c src/io/json.c src/base/util.c src/base/outfile.c $(IMAGESRC)
FUZZDEPS  := tests/c/fuzz_json.h tests/c/fuzz_gram.h $(wildcard include/*.h src/*/*.h) \
             $(PARSERSRC) $(GRAMSRC) $(HISTSRC) $(IMAGESRC) tests/c/test_fuzz_image.c
fuzz_main = $(if $(filter $(1),$(FUZZ_PARSERS)),tests/c/test_fuzz_parsers.c,$(if \
            $(filter tok_%,$(1)),tests/c/test_tok_fuzz.c,$(if $(filter json_gram,$(1)),\
            tests/c/test_fuzz_gram.c,$(if $(filter $(1),$(FUZZ_IMAGE)),\
            tests/c/test_fuzz_image.c,tests/c/test_fuzz_hist.c))))
fuzz_src  = $(call fuzz_main,$(1)) $(if $(filter $(1),$(FUZZ_PARSERS)),$(PARSERSRC),$(if \
            $(filter tok_%,$(1)),$(TOKSRC),$(if $(filter json_gram,$(1)),$(GRAMSRC),$(if \
            $(filter $(1),$(FUZZ_IMAGE)),$(IMAGESRC),$(HISTSRC)))))
FUZZ_LIB  := $(BUILD)/fuzz/lib
FUZZ_LIBOBJ = $(filter-out $(FUZZ_LIB)/cli/main.o,$(patsubst $(BUILD)/%,$(FUZZ_LIB)/%,$(OBJ)))

.PHONY: fuzz-parsers fuzz-run
fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_LIST="$(FUZZ_TARGETS)"
fuzz-parsers:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_LIST="$(FUZZ_PARSERS)"

# The probe's compiler output stays in probe.log (printed): a missing libFuzzer is a
# fallback, a harness that does not build is an error, never hidden.
fuzz-run:
	@mkdir -p $(BUILD)/fuzz
	@echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return !d && n; }' \
	  > $(BUILD)/fuzz/probe.c
	@if $(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $(BUILD)/fuzz/probe $(BUILD)/fuzz/probe.c \
	     > $(BUILD)/fuzz/probe.log 2>&1; then \
	  $(MAKE) --no-print-directory $(FUZZ_LIST:%=$(BUILD)/fuzz/lf_%) && \
	  for t in $(FUZZ_LIST); do \
	    d=$(BUILD)/fuzz/$$t; mkdir -p $$d/corpus; ml=16384; [ $$t != tok_text ] || ml=4096; \
	    [ $$t != trunk ] && [ $$t != chat_state ] || ml=65536; \
	    case $$t in png) e=png;; jpeg) e=jpg;; gif) e=gif;; *) e=;; esac; \
	    [ -z "$$e" ] || cp tests/images/*.$$e $$d/corpus/; \
	    if TMPDIR=$(FUZZ_TMPDIR) $(BUILD)/fuzz/lf_$$t -max_total_time=$(FUZZ_SECONDS) \
	         $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS)) -max_len=$$ml -timeout=10 -rss_limit_mb=4096 \
	         -print_final_stats=1 -artifact_prefix=$$d/ $$d/corpus > $$d/log 2>&1; then \
	      echo "fuzz $$t: $$(grep -E '^Done [0-9]+ runs' $$d/log | tail -n 1), no finding" \
	           "(log $$d/log)"; \
	    else tail -n 60 $$d/log; echo "fuzz $$t: FAILED, the input is in $$d/"; exit 1; fi; \
	  done; \
	else \
	  echo "fuzz: $(FUZZ_CC) cannot build a libFuzzer target ($(BUILD)/fuzz/probe.log:" \
	       "$$(head -n 1 $(BUILD)/fuzz/probe.log)); running the built-in mutation fuzzers" \
	       "under $(CC)'s ASan/UBSan instead"; \
	  $(MAKE) --no-print-directory $(BUILD)/fuzz/mf_parsers $(BUILD)/fuzz/mf_tok \
	    $(BUILD)/fuzz/mf_hist $(BUILD)/fuzz/mf_gram $(BUILD)/fuzz/mf_image \
	    $(BUILD)/fuzz/mf_grammar $(BUILD)/fuzz/mf_schema && \
	  for m in $(if $(filter-out $(FUZZ_PARSERS),$(FUZZ_LIST)),$(MF_ALL),parsers); do \
	    TMPDIR=$(FUZZ_TMPDIR) $(BUILD)/fuzz/mf_$$m $(FUZZ_SECONDS) || exit 1; \
	  done; \
	fi

$(BUILD)/fuzz/lf_%: $(FUZZDEPS) tests/c/test_fuzz_parsers.c tests/c/test_tok_fuzz.c \
                    tests/c/test_fuzz_hist.c tests/c/test_fuzz_http.c tests/c/test_fuzz_gram.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_FLAGS) -DK3_LIBFUZZER -DFUZZ_TARGET_$* -o $@ \
	  $(call fuzz_src,$*) -lm
# The engine targets: the library built by clang with coverage and the sanitizers.
.PHONY: fuzz-lib libobj
libobj: $(LIBOBJ)
fuzz-lib:
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(FUZZ_LIB) \
	  OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
	  -fno-omit-frame-pointer -fsanitize-coverage-ignorelist=tests/c/fuzz_nocov.txt" libobj
$(BUILD)/fuzz/lf_http_head $(BUILD)/fuzz/lf_serve_req: tests/c/test_fuzz_http.c fuzz-lib
$(BUILD)/fuzz/lf_chat_state: tests/c/test_fuzz_state.c fuzz-lib
$(BUILD)/fuzz/lf_trunk: tests/c/test_fuzz_trunk.c fuzz-lib
$(BUILD)/fuzz/lf_dspark: tests/c/test_fuzz_dspark.c fuzz-lib
$(BUILD)/fuzz/lf_vision: tests/c/test_fuzz_vision.c fuzz-lib
$(BUILD)/fuzz/lf_http_head $(BUILD)/fuzz/lf_serve_req $(BUILD)/fuzz/lf_chat_state \
$(BUILD)/fuzz/lf_trunk $(BUILD)/fuzz/lf_dspark $(BUILD)/fuzz/lf_vision: tests/c/fuzz_json.h
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_FLAGS) -DK3_LIBFUZZER -DFUZZ_TARGET_$(@F:lf_%=%) \
	  -o $@ $(filter %.c,$^) $(FUZZ_LIBOBJ) -lm
$(BUILD)/fuzz/mf_parsers: tests/c/test_fuzz_parsers.c $(FUZZDEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(PARSERSRC) -lm
$(BUILD)/fuzz/mf_tok: tests/c/test_tok_fuzz.c $(FUZZDEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(TOKSRC) -lm
$(BUILD)/fuzz/mf_hist: tests/c/test_fuzz_hist.c $(FUZZDEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(HISTSRC) -lm
$(BUILD)/fuzz/mf_gram: tests/c/test_fuzz_gram.c $(FUZZDEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(GRAMSRC) -lm
$(BUILD)/fuzz/mf_image: tests/c/test_fuzz_image.c $(FUZZDEPS)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(IMAGESRC) -lm
$(BUILD)/fuzz/mf_grammar: tests/c/test_fuzz_grammar.c $(FUZZDEPS) $(GRSRC)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(GRSRC) -lm
$(BUILD)/fuzz/lf_grammar: tests/c/test_fuzz_grammar.c $(FUZZDEPS) $(GRSRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_FLAGS) -DK3_LIBFUZZER -o $@ $< $(GRSRC) -lm
$(BUILD)/fuzz/mf_schema: tests/c/test_fuzz_schema.c $(FUZZDEPS) $(SCHEMASRC)
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) -o $@ $< $(SCHEMASRC) -lm
$(BUILD)/fuzz/lf_json_schema: tests/c/test_fuzz_schema.c $(FUZZDEPS) $(SCHEMASRC)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_FLAGS) -DK3_LIBFUZZER -o $@ $< $(SCHEMASRC) -lm

# ---- AArch64 cross build (NEON kernels): static bin/k3-aarch64 and its kernel test,
# run under qemu-aarch64 by tests/sh/kernels_aarch64.sh.
AARCH64_CC ?= aarch64-linux-gnu-gcc
aarch64:
	$(MAKE) CC=$(AARCH64_CC) BUILD=build/aarch64 BIN=bin/k3-aarch64 bin/k3-aarch64 build/aarch64/tests/test_kernels \
	  build/aarch64/tests/test_codec build/aarch64/tests/test_vision build/aarch64/tests/test_attn
aarch64-test:
	$(MAKE) CC=$(AARCH64_CC) BUILD=build/aarch64 BIN=bin/k3-aarch64 build/aarch64/tests/test_kernels \
	  build/aarch64/tests/test_codec

# ---- K3 over MPI (docs/DISTRIBUTED.md): bin/k3-mpi, linked by the system's mpicc (Open MPI:
# Debian's openmpi-bin libopenmpi-dev), dynamically; run as mpirun -np N bin/k3-mpi ...
# Only src/comm/mpi/ needs MPI's headers: the other objects are bin/k3's (no second build).
MPICC ?= mpicc
mpi: $(filter-out $(BUILD)/comm/solo.o,$(OBJ))
	$(MAKE) CC=$(MPICC) MPI=1 LINK= BIN=bin/k3-mpi bin/k3-mpi

# ---- Kernel benchmark: bin/k3-bench (tools/bench_kernels.c); results in docs/data/kernels_bench.txt.
bench: bin/k3-bench
bin/k3-bench: tools/bench_kernels.c $(LIBOBJ) | bin
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ tools/bench_kernels.c $(LIBOBJ) $(LDLIBS)

# ---- The vision tower's speed check: bin/k3-vision-bench (tools/bench_vision.c); results in
# docs/data/vision_bench.txt.
bin/k3-vision-bench: tools/bench_vision.c $(LIBOBJ) | bin
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ tools/bench_vision.c $(LIBOBJ) $(LDLIBS)
