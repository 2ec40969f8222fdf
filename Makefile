# dsv4 build. `make` builds build/dsv4 and build/libdsv4.a; `make test` builds
# and runs every test, including the loader/parser tests and the bad-input CLI
# tests a second time in an AddressSanitizer+UBSan build (build-asan).
.DEFAULT_GOAL := all
BUILD   ?= build
CC      ?= cc
OPT     ?= -O3
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra -D_GNU_SOURCE -Iinclude -Isrc -pthread -MMD -MP
LDLIBS  += -lcjson -lpcre2-8 -lreadline -lmicrohttpd -lm -pthread
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

# CUDA is compiled whenever nvcc exists (CI has it); without nvcc the cuda
# backend reports at run time that this build has no CUDA.
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
LIB_SRC := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/serve/*' -not -path 'src/cuda/*' | sort)
CLI_SRC := $(wildcard src/cli/*.c)
# The server is part of the program, not of the library (it brings libmicrohttpd).
SERVE_SRC := $(wildcard src/serve/*.c)
CU_SRC  := $(wildcard src/cuda/*.cu)
ifneq ($(NVCC),)
ifneq ($(CU_SRC),)
CU_OBJ  := $(CU_SRC:%.cu=$(BUILD)/%.o)
CFLAGS  += -DDSV4_HAVE_CUDA
LDLIBS  += -L$(CUDA_HOME)/lib64 -lcudart -ldl -lstdc++
NVFLAGS ?= -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xcompiler -fPIC,-Wall -MMD -MP
endif
endif

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o) $(SERVE_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# The CUDA backend's GGUF block decoders, its GGUF tensor-core staging, its
# packed-row readers and its prompt tiles' shared-memory layout run on the
# CPU too (host code: any machine with nvcc runs these tests, no GPU needed).
ifneq ($(CU_OBJ),)
TEST_BIN += $(BUILD)/tests/test_gg_decode $(BUILD)/tests/test_gg_tc $(BUILD)/tests/test_state_rows $(BUILD)/tests/test_tile_layout
endif
# Tests of loaders, parsers and weight-format decoders, and the allocation-failure
# loops: CI runs these under ASan+UBSan too.
PARSER_TESTS := $(filter %/test_safetensors %/test_gguf %/test_ggml_quant %/test_config %/test_tokenizer %/test_chat \
                  %/test_dsml %/test_dsml_stream %/test_snapshot_data %/test_wformat %/test_faults %/test_error %/test_limits %/test_scheduler \
                  %/test_dspark,$(TEST_BIN))

.PHONY: all test test-parsers sanitized run clean deps deb-deps demo-fp8 demo-reference

# `make deps test` (README) with -j: nothing is built before deps are in.
DEPS_FIRST := $(filter deps,$(MAKECMDGOALS))

# `make deps` installs everything the build and the tests need, and is the
# only target that installs anything:
#  - the Debian packages (only when a header, clang or python3 is missing);
#  - a Python virtual environment $(VENV) with tests/requirements.txt
#    (rebuilt when that file changes). Tests find Python only through
#    $DSV4_PYTHON, which `make test` points at $(VENV)/bin/python.
DEB_DEPS := build-essential clang libcjson-dev libpcre2-dev libreadline-dev libmicrohttpd-dev curl python3 \
            python3-venv
VENV     := $(BUILD)/venv
PYTHON   := $(VENV)/bin/python
APT      := SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; export DEBIAN_FRONTEND=noninteractive; \
            $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq
deps: $(VENV)/installed
deb-deps:
	@if ! printf '#include <cjson/cJSON.h>\n#include <stdint.h>\n#define PCRE2_CODE_UNIT_WIDTH 8\n#include <pcre2.h>\n#include <stdio.h>\n#include <readline/readline.h>\n#include <microhttpd.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 || \
	     ! command -v $(FUZZ_CC) >/dev/null || ! command -v curl >/dev/null || ! command -v python3 >/dev/null; then \
	    echo "installing $(DEB_DEPS)"; \
	    $(APT) $(DEB_DEPS) >/dev/null; \
	fi
# python3 -m venv needs ensurepip, which Debian ships separately
# (python3-venv): when the first python3 on PATH cannot make one, install
# that and use Debian's python3.
$(VENV)/installed: tests/requirements.txt | deb-deps
	@rm -rf $(VENV)
	@python3 -m venv $(VENV) 2>/dev/null || { rm -rf $(VENV); echo "installing python3-venv"; \
	    $(APT) python3-venv >/dev/null && /usr/bin/python3 -m venv $(VENV); }
	$(PYTHON) -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	@touch $@
all: $(BUILD)/dsv4

# Made afresh: ar would keep the members of removed sources.
$(BUILD)/libdsv4.a: $(LIB_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/dsv4: $(CLI_OBJ) $(BUILD)/libdsv4.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The chat renderer the demo model's data builder uses (tools/demo).
$(BUILD)/demo_render: $(BUILD)/tools/demo/render_chat.o $(BUILD)/libdsv4.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c | $(DEPS_FIRST)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cu | $(DEPS_FIRST)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libdsv4.a tests/test.h tests/test_state.h tests/test_tmpdir.h tests/gguf_build.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDLIBS)

# The scheduler test drives src/serve's scheduler and cache directly.
SCHED_OBJ := $(patsubst %.c,$(BUILD)/%.o,src/serve/scheduler.c src/serve/sched_spec.c src/serve/force.c src/serve/cache.c src/serve/kvstore.c src/serve/metrics.c)
$(BUILD)/tests/test_scheduler: tests/unit/test_scheduler.c $(SCHED_OBJ) $(BUILD)/libdsv4.a tests/test.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(SCHED_OBJ) $(BUILD)/libdsv4.a $(LDLIBS)

# The allocation-failure loops count and fail every allocation the library
# makes: its malloc family goes through tests/unit/test_faults.c.
$(BUILD)/tests/test_faults: LDFLAGS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=strdup

# The main command: one question to the demo model (models/demo, trained by
# tools/demo), answered greedily and streamed. Ask another: make run Q="Convert 7 km to m."
# It builds the program without the CUDA backend (build/cpu, about 20 s on two
# cores; the CUDA kernels take minutes to compile and a 13.8 M-parameter model
# gains nothing from a GPU), so a fresh clone answers within a minute.
Q ?= What is 347 + 285?
RUN_BUILD := $(BUILD)/cpu
run: | $(DEPS_FIRST)
	@echo "building $(RUN_BUILD)/dsv4 (CPU backend only)"; $(MAKE) --no-print-directory BUILD=$(RUN_BUILD) NVCC= $(RUN_BUILD)/dsv4 > /dev/null
	$(RUN_BUILD)/dsv4 generate --model models/demo --chat --temperature 0 -p "$(Q)"

# The demo model in the released checkpoints' FP8/FP4 layout (tools/quant): its weights are made
# here from models/demo (13.8 MB, byte-identical every time, not committed); its reference logits
# are committed beside them (models/demo-fp8/PROVENANCE). test_oracle and tests/cli/demo_model.sh use it.
DEMO_FP8 := models/demo-fp8/config.json
demo-fp8: $(DEMO_FP8)
$(DEMO_FP8): models/demo/config.json models/demo/model.safetensors.index.json models/demo/tokenizer.json \
             $(wildcard models/demo/*.safetensors) tools/quant/quantize_fp8.py tools/quant/fp8_fp4.py | $(DEPS_FIRST)
	@$(PYTHON) -c 'import numpy' 2>/dev/null || { echo "make: $(PYTHON) cannot import numpy: run make deps first (README)"; exit 1; }
	$(PYTHON) tools/quant/quantize_fp8.py models/demo models/demo-fp8

# transformers' reference logits of both demo checkpoints (tools/demo/parity.py), to be rerun after
# models/demo changes; ORACLE_PY is a Python with torch and transformers 5.17.
ORACLE_PY ?= python3
demo-reference: $(BUILD)/dsv4 $(BUILD)/demo_render $(DEMO_FP8)
	$(ORACLE_PY) tools/demo/parity.py --model models/demo
	$(ORACLE_PY) tools/demo/parity.py --model models/demo-fp8

ASAN_BUILD ?= build-asan
test: $(BUILD)/dsv4 $(BUILD)/demo_render $(DEMO_FP8) $(TEST_BIN) fuzz
	@[ -x $(PYTHON) ] || { echo "make test: $(PYTHON) is missing: run make deps first (README)"; exit 1; }
	$(MAKE) --no-print-directory SAN=1 BUILD=$(ASAN_BUILD) NVCC= sanitized
	DSV4_BIN=$(BUILD)/dsv4 DSV4_ASAN_BUILD=$(ASAN_BUILD) DSV4_PYTHON=$(abspath $(PYTHON)) \
	    tests/run.sh $(TEST_BIN) tests/cli/*.sh

# What tests/cli/sanitized.sh runs (built with SAN=1 BUILD=build-asan).
sanitized: $(BUILD)/dsv4 $(PARSER_TESTS)

test-parsers: $(PARSER_TESTS)
	tests/run.sh $(PARSER_TESTS)

clean:
	rm -rf build build-*
	cd models/demo-fp8 && rm -f config.json model*.safetensors model.safetensors.index.json tokenizer.json

# libFuzzer harnesses for the parsers (clang). `make fuzz-smoke` runs each for
# FUZZ_TIME seconds from the seeds in tests/fuzz/corpus_<name>/; new inputs go
# to $(BUILD)/fuzz/corpus_<name>/, crashes to $(BUILD)/fuzz/.
FUZZ_CC    ?= clang
FUZZ_FLAGS ?= -std=c11 -g -O1 -D_GNU_SOURCE -Iinclude -Isrc \
              -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TIME  ?= 20
FUZZ_NAMES := safetensors config dsml gguf request tokenizer_load tokenizer_roundtrip
FUZZ_SRC   := $(wildcard src/base/*.c src/io/*.c src/text/*.c) src/model/config_json.c src/model/config_gguf.c src/serve/request.c
FUZZ_BIN   := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
.PHONY: fuzz fuzz-smoke
fuzz: $(FUZZ_BIN)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_SRC) | $(DEPS_FIRST)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_SRC) -lcjson -lpcre2-8 -lm

fuzz-smoke: $(FUZZ_BIN)
	set -e; for n in $(FUZZ_NAMES); do \
	  mkdir -p $(BUILD)/fuzz/corpus_$$n; \
	  $(BUILD)/fuzz/fuzz_$$n -max_total_time=$(FUZZ_TIME) $$([ -f tests/fuzz/$$n.dict ] && echo -dict=tests/fuzz/$$n.dict) \
	    -artifact_prefix=$(BUILD)/fuzz/ $(BUILD)/fuzz/corpus_$$n tests/fuzz/corpus_$$n; \
	done

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

$(BUILD)/tests/test_gg_decode $(BUILD)/tests/test_gg_tc $(BUILD)/tests/test_state_rows $(BUILD)/tests/test_tile_layout: $(BUILD)/tests/%: tests/cuda/%.cu $(BUILD)/libdsv4.a tests/test.h
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -Itests -c -o $@.o $<
	$(CC) $(LDFLAGS) -o $@ $@.o $(BUILD)/libdsv4.a $(LDLIBS)

# CUDA op tests against the CPU ops (need a GPU; not part of `make test`).
CUDA_TEST := $(BUILD)/tests/test_cuda_ops
$(CUDA_TEST): tests/cuda/test_cuda_ops.c $(BUILD)/libdsv4.a tests/test.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDLIBS)

.PHONY: cuda-test
cuda-test: $(CUDA_TEST)
	tests/run.sh $(CUDA_TEST)
$(BUILD)/tests/decode_time: tests/cuda/decode_time.c $(BUILD)/libdsv4.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDLIBS)
cuda-test: $(BUILD)/tests/decode_time
$(BUILD)/tests/bench_ops: tests/cuda/bench_ops.c $(BUILD)/libdsv4.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdsv4.a $(LDLIBS)
cuda-test: $(BUILD)/tests/bench_ops
