# grpo.c build. `make` builds build/grpo; `make test`, `make asan`, `make bench`;
# `make install` (PREFIX=/usr/local, DESTDIR) and `make uninstall`.
# Objects go under $(BUILD)/; every src/*/*.c is part of libgrpo except src/cli/.
# Tests are tests/**/test_*.c, each linked against libgrpo into its own binary, with
# libgrpo_testref (tests/ref/: float64 references only tests use; not shipped) and
# the tests' machine (tests/machine/: a bf16 matmul on any CPU, through the bf16
# GEMM's seam).

CC      ?= gcc
BUILD   ?= build
ARCH    ?= -march=native
OPT     ?= -O2
SAN     ?=
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp
# OpenMPI (data-parallel training, src/dist/): Debian's libopenmpi-dev
MPI_INC ?= /usr/lib/x86_64-linux-gnu/openmpi/include
MPI_LIB ?= /usr/lib/x86_64-linux-gnu/openmpi/lib

# -fno-math-errno: nothing reads errno after a math function, so sqrtf is one
# instruction and loops holding it vectorise (AdamW); results are the same bits.
CFLAGS  = -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) -g -fopenmp -fno-math-errno -Wall -Wextra -Wno-unused-parameter \
          -Isrc -I$(OPENBLAS_INC) -I$(MPI_INC) $(SAN)
LDLIBS  = -L$(MPI_LIB) -lmpi -lopenblas -ldnnl -ljansson -lonig -lutf8proc -lyaml -ldl -lm
LDFLAGS = -fopenmp $(SAN)

LIB_SRC  := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c src/*/*/*.c)))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c tests/*/test_*.c))
MACHINE_OBJ := $(BUILD)/tests/machine/bf16_matmul.o
# ... and a GPU on any machine (tests/machine/gpu_emulator.c: the kernels built for the
# host, behind an emulated driver; gpu_emulator_threads.c: a launch's threads as
# coroutines; gpu_emulator_blas.c: its cuBLASLt), linked into the test binaries only.
GPU_EMU_OBJ := $(BUILD)/tests/machine/gpu_emulator.o $(BUILD)/tests/machine/gpu_emulator_threads.o \
               $(BUILD)/tests/machine/gpu_emulator_blas.o
# make test-isa sets it (0 or 1): every binary it builds, build/grpo included, starts
# as a machine without (0) or with (1) a bf16 matmul (tests/machine/bf16_matmul.c).
TEST_BF16_MATMUL ?=
TESTREF_SRC := $(sort $(wildcard tests/ref/*.c))
BENCH_SRC:= $(sort $(wildcard bench/bench_*.c))

# The GPU kernels (src/gpu/kernels/*.cu), compiled to PTX by clang without a CUDA toolkit
# and embedded in the library as data (gpu_kernels_ptx): every build compiles every
# GPU line; the driver, where there is one, compiles the PTX for its GPU at run time.
GPU_CC   ?= clang
GPU_PTX_FLAGS = -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib \
                -Xclang -target-feature -Xclang +ptx70 -O2 -ffp-contract=off -Wall -Werror -Wno-unknown-cuda-version
GPU_PTX_OBJ := $(BUILD)/gpu/kernels_ptx.o
# The Python reward runner (src/reward/py_runner.py), embedded the same way as
# the PTX above (py_runner_source): a real .py file in the tree, passed to python3 -c at run time.
PY_RUNNER_OBJ := $(BUILD)/reward/py_runner.o
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(GPU_PTX_OBJ) $(PY_RUNNER_OBJ)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:%.c=$(BUILD)/%)
TESTREF_OBJ := $(TESTREF_SRC:%.c=$(BUILD)/%.o)
BENCH_BIN:= $(BENCH_SRC:%.c=$(BUILD)/%)
LIB      := $(BUILD)/libgrpo.a
TESTREF  := $(BUILD)/libgrpo_testref.a

.PHONY: all test test-isa asan bench clean deps tests-bin check demo install uninstall FORCE
all: $(BUILD)/grpo

# The version: the VERSION file's number, and the checkout's `git describe` where the
# source is a git checkout with git installed (a tarball builds without either).
VERSION_NUMBER := $(shell cat VERSION 2>/dev/null || echo unknown)
GIT_DESCRIBE   := $(shell [ -e .git ] && git describe --always --dirty 2>/dev/null)
VERSION_TEXT   := $(VERSION_NUMBER)$(if $(GIT_DESCRIBE), (git $(GIT_DESCRIBE)))
# core/version.o is rebuilt when the text changes, and only then.
$(BUILD)/version.txt: FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION_TEXT)' | cmp -s - $@ || echo '$(VERSION_TEXT)' > $@
$(BUILD)/src/core/version.o: $(BUILD)/version.txt
$(BUILD)/src/core/version.o: CFLAGS += -DGRPO_VERSION='"$(VERSION_TEXT)"'

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The archive is rebuilt when its list of objects changes (a source moved or removed),
# not only when an object is newer, so no stale member outlives its source.
$(BUILD)/libgrpo.objs: FORCE
	@mkdir -p $(dir $@)
	@echo '$(LIB_OBJ)' | cmp -s - $@ || echo '$(LIB_OBJ)' > $@

$(LIB): $(LIB_OBJ) $(BUILD)/libgrpo.objs
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIB_OBJ)

$(BUILD)/gpu/kernels.ptx: src/gpu/kernels/all.cu $(wildcard src/gpu/kernels/*.cu src/gpu/kernels/*.h) \
                           src/ops/token_objective.h src/ops/token_objective_math.h
	@mkdir -p $(dir $@)
	$(GPU_CC) $(GPU_PTX_FLAGS) -S $< -o $@

$(GPU_PTX_OBJ): $(BUILD)/gpu/kernels.ptx
	printf '.section .rodata\n.globl gpu_kernels_ptx\n.type gpu_kernels_ptx, @object\n.balign 16\ngpu_kernels_ptx:\n.incbin "%s"\n.byte 0\n.section .note.GNU-stack,"",@progbits\n' $< \
	    | $(CC) -c -x assembler - -o $@

$(PY_RUNNER_OBJ): src/reward/py_runner.py
	@mkdir -p $(dir $@)
	printf '.section .rodata\n.globl py_runner_source\n.type py_runner_source, @object\npy_runner_source:\n.incbin "%s"\n.byte 0\n.section .note.GNU-stack,"",@progbits\n' $< \
	    | $(CC) -c -x assembler - -o $@

$(TESTREF_OBJ): CFLAGS += -Itests

$(TESTREF): $(TESTREF_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(MACHINE_OBJ) $(GPU_EMU_OBJ): CFLAGS += -Itests $(if $(TEST_BF16_MATMUL),-DTEST_BF16_MATMUL=$(TEST_BF16_MATMUL))
# the kernels' arithmetic as their PTX's (-ffp-contract=off there too): no FMA contraction
$(GPU_EMU_OBJ): CFLAGS += -ffp-contract=off

$(BUILD)/grpo: $(CLI_OBJ) $(if $(TEST_BF16_MATMUL),$(MACHINE_OBJ)) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(MACHINE_OBJ) $(GPU_EMU_OBJ) $(LIB) $(TESTREF)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -MMD -MP $< $(TEST_CLI_OBJ) $(MACHINE_OBJ) $(GPU_EMU_OBJ) $(TESTREF) $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)
# test_gpu_score calls `grpo score`'s entry function (cmd_score) on the emulated GPU:
# the command's objects linked beside the library
SCORE_CLI_OBJ := $(BUILD)/src/cli/cmd_score.o $(BUILD)/src/cli/args.o $(BUILD)/src/cli/trl_keys.o
$(BUILD)/tests/gpu/test_gpu_score: TEST_CLI_OBJ = $(SCORE_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_score: $(SCORE_CLI_OBJ)
# test_gpu_gen calls `grpo generate`'s, `grpo eval`'s and `grpo init`'s entries likewise
GEN_CLI_OBJ := $(addprefix $(BUILD)/src/cli/,cmd_generate.o cmd_eval.o cmd_init.o gpu_pick.o args.o trl_keys.o)
$(BUILD)/tests/gpu/test_gpu_gen: TEST_CLI_OBJ = $(GEN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_gen: $(GEN_CLI_OBJ)
# test_gpu_gen_lora runs `grpo generate --adapter` and `grpo eval --adapter` likewise
$(BUILD)/tests/gpu/test_gpu_gen_lora: TEST_CLI_OBJ = $(GEN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_gen_lora: $(GEN_CLI_OBJ)
# test_gpu_train calls `grpo train`'s and `grpo sft`'s entry functions (and `grpo init`'s, for its models) likewise
TRAIN_CLI_OBJ := $(addprefix $(BUILD)/src/cli/,cmd_train.o cmd_sft.o cmd_init.o args.o trl_keys.o ranks.o train_events.o)
$(BUILD)/tests/gpu/test_gpu_train: TEST_CLI_OBJ = $(TRAIN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_train: $(TRAIN_CLI_OBJ)
# test_gpu_train_lora likewise, and `grpo merge`'s entry for the adapter it saves
LORA_CLI_OBJ := $(TRAIN_CLI_OBJ) $(BUILD)/src/cli/cmd_merge.o
$(BUILD)/tests/gpu/test_gpu_train_lora: TEST_CLI_OBJ = $(LORA_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_train_lora: $(LORA_CLI_OBJ)
# test_gpu_train_opts likewise (the entropy bonus and sync_ref_model on the GPU)
$(BUILD)/tests/gpu/test_gpu_train_opts: TEST_CLI_OBJ = $(TRAIN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_train_opts: $(TRAIN_CLI_OBJ)
# test_gpu_train_tools likewise (grpo train --tools: multi-turn rollouts decoded on the device)
$(BUILD)/tests/gpu/test_gpu_train_tools: TEST_CLI_OBJ = $(TRAIN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_train_tools: $(TRAIN_CLI_OBJ)
# test_gpu_train_env likewise (grpo train --environment_command: an environment's turns decoded on the device)
$(BUILD)/tests/gpu/test_gpu_train_env: TEST_CLI_OBJ = $(TRAIN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_train_env: $(TRAIN_CLI_OBJ)
# test_gpu_recompute runs `grpo train` (and `grpo init`) with and without gradient_checkpointing likewise
$(BUILD)/tests/gpu/test_gpu_recompute: TEST_CLI_OBJ = $(TRAIN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_recompute: $(TRAIN_CLI_OBJ)
# test_gpu_mpi is also its ranks' program under mpirun: cmd_train on the emulated GPUs
$(BUILD)/tests/gpu/test_gpu_mpi: TEST_CLI_OBJ = $(TRAIN_CLI_OBJ)
$(BUILD)/tests/gpu/test_gpu_mpi: $(TRAIN_CLI_OBJ)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)
# bench_grpo_step --lengths uniform cuts the rollout's completions to drawn lengths
# where gen_groups hands them over (bench/bench_grpo_step.c): its own wrapper,
# linked in place of the library's for the rollout's calls; the library is unchanged.
$(BUILD)/bench/bench_grpo_step: LDFLAGS += -Wl,--wrap=gen_groups

tests-bin: $(BUILD)/grpo $(TEST_BIN)

# The test runner runs every test binary and every tests/**/*.sh with GRPO=$(BUILD)/grpo.
test: tests-bin
	BUILD=$(BUILD) tests/run.sh

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree.
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# The same suite as on the other kind of machine, in its own tree. Where the CPU lacks
# AVX-512: the library's AVX-512 code (every `#ifdef __AVX512F__` / `__AVX512VL__`
# branch: the decoding kernels, vec.h, the dropout draws), its intrinsics computed by
# SIMDe (tests/zmm/emulate.h); where it has AVX-512, the AVX2 code (-mno-avx512f). And
# the other bf16 answer (TEST_BF16_MATMUL, tests/machine/bf16_matmul.c, through the
# bf16 GEMM's seam): where the CPU has no bf16 matmul, as one with it (bf16 by default,
# the native path's operands, products summed as the widened path sums them); where it
# has one, as one without. So each machine runs both vector codes and both defaults.
ISA_BUILD ?= build-isa
test-isa:
	@if grep -q -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo; then bf=0; else bf=1; fi; \
	if echo | $(CC) $(ARCH) -dM -E - | grep -q __AVX512F__; then \
	    isa="-mno-avx512f"; what="the AVX2 code"; \
	else \
	    isa="-include tests/zmm/emulate.h"; what="the AVX-512 code, its intrinsics emulated"; \
	fi; \
	echo "test-isa: $$what; as a CPU $$([ $$bf = 1 ] && echo with || echo without) a bf16 matmul"; \
	GRPO_TEST_BF16_MATMUL=$$bf $(MAKE) BUILD=$(ISA_BUILD) ARCH="$(ARCH) $$isa" TEST_BF16_MATMUL=$$bf test

# The benchmarks' own dependencies (PyTorch, oneDNN) are installed before they are built.
bench:
	tools/install-deps.sh --bench
	$(MAKE) $(BUILD)/grpo $(BENCH_BIN)
	BUILD=$(BUILD) bench/run.sh

deps:
	tools/install-deps.sh

# The README's two commands: the tests (with the other kind of CPU's run, the fuzz
# smoke run and the sanitizer run) and the demo.
check: deps
	$(MAKE) test
	$(MAKE) test-isa
	$(MAKE) fuzz-smoke
	$(MAKE) asan

demo: deps
	$(MAKE) all
	tools/demo.sh

clean:
	rm -rf build build-asan $(ISA_BUILD)

# `make install`: the binary as $(DESTDIR)$(PREFIX)/bin/grpo, the README and docs/ under
# share/doc/grpo; `make uninstall` removes what install wrote. DESTDIR stages a package.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DOCDIR  ?= $(PREFIX)/share/doc/grpo
install: $(BUILD)/grpo
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(DOCDIR)'
	install -m 755 $(BUILD)/grpo '$(DESTDIR)$(BINDIR)/grpo'
	install -m 644 README.md $(sort $(wildcard docs/*.md)) '$(DESTDIR)$(DOCDIR)/'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/grpo'
	rm -f $(addprefix '$(DESTDIR)$(DOCDIR)'/,README.md $(notdir $(wildcard docs/*.md)))
	-rmdir '$(DESTDIR)$(DOCDIR)' 2>/dev/null

-include $(LIB_OBJ:.o=.d) $(MACHINE_OBJ:.o=.d) $(GPU_EMU_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTREF_OBJ:.o=.d) $(TEST_BIN:=.d) $(BENCH_BIN:=.d)

# ---- Fuzzing (docs/fuzzing.md): libFuzzer targets fuzz/fuzz_*.c, built with clang and
# ASan+UBSan in their own tree $(FUZZ_BUILD)/ (libgrpo and src/cli/args.c recompiled there),
# so the normal build is untouched. `make fuzz` runs each target for FUZZ_SECONDS and fails
# when one crashes (the input is kept in $(FUZZ_BUILD)/crashes/TARGET/); `make fuzz-smoke`
# runs each for FUZZ_SMOKE_SECONDS; `make fuzz-build` only builds. Needs
# `tools/install-deps.sh --fuzz`.
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_TARGETS ?= $(patsubst fuzz/fuzz_%.c,%,$(sort $(wildcard fuzz/fuzz_*.c)))
FUZZ_SAN     = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS  = -std=c11 -D_GNU_SOURCE -O1 -g -fopenmp -Wall -Wextra -Wno-unused-parameter \
               -Isrc -I$(OPENBLAS_INC) -I$(MPI_INC) $(FUZZ_SAN) -DFUZZ_ROOT='"$(CURDIR)"'
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(GPU_PTX_OBJ) $(PY_RUNNER_OBJ)
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/fuzz_%)

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-clean fuzz-repro
$(FUZZ_BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libgrpo.objs: FORCE
	@mkdir -p $(dir $@)
	@echo '$(FUZZ_LIB_OBJ)' | cmp -s - $@ || echo '$(FUZZ_LIB_OBJ)' > $@

$(FUZZ_BUILD)/libgrpo.a: $(FUZZ_LIB_OBJ) $(FUZZ_BUILD)/libgrpo.objs
	rm -f $@ && ar rcs $@ $(FUZZ_LIB_OBJ)

# The harnesses link what they drive; fuzz_yaml also links the command line's
# args.c and the TRL keys it consults.
FUZZ_CLI_OBJ := $(FUZZ_BUILD)/src/cli/args.o $(FUZZ_BUILD)/src/cli/trl_keys.o
$(FUZZ_BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(FUZZ_BUILD)/libgrpo.a $(FUZZ_CLI_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP $< \
	    $(if $(filter fuzz_yaml,$(notdir $@)),$(FUZZ_CLI_OBJ)) $(FUZZ_BUILD)/libgrpo.a \
	    -o $@ $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz:
	tools/install-deps.sh --fuzz
	$(MAKE) fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke:
	tools/install-deps.sh --fuzz
	$(MAKE) fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

# The known reproducers fuzz/repro/TARGET/*, each run once: fails while any still crashes.
fuzz-repro:
	tools/install-deps.sh --fuzz
	$(MAKE) fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/repro.sh

fuzz-clean:
	rm -rf $(FUZZ_BUILD)

-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BUILD)/src/cli/args.d $(FUZZ_BIN:=.d)
