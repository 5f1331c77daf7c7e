# grpo.c build. `make` builds build/grpo; `make test`, `make asan`, `make bench`.
# Objects go under $(BUILD)/; every src/*/*.c is part of libgrpo except src/cli/.
# Tests are tests/**/test_*.c, each linked against libgrpo into its own binary, with
# libgrpo_testref (tests/ref/: float64 references only tests use; not shipped).

CC      ?= gcc
BUILD   ?= build
ARCH    ?= -march=native
OPT     ?= -O2
SAN     ?=
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp

CFLAGS  = -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) -g -fopenmp -Wall -Wextra -Wno-unused-parameter \
          -Isrc -I$(OPENBLAS_INC) $(SAN)
LDLIBS  = -lopenblas -ljansson -lonig -lutf8proc -lyaml -ldl -lm
LDFLAGS = -fopenmp $(SAN)

LIB_SRC  := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c src/*/*/*.c)))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c tests/*/test_*.c))
TESTREF_SRC := $(sort $(wildcard tests/ref/*.c))
BENCH_SRC:= $(sort $(wildcard bench/bench_*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:%.c=$(BUILD)/%)
TESTREF_OBJ := $(TESTREF_SRC:%.c=$(BUILD)/%.o)
BENCH_BIN:= $(BENCH_SRC:%.c=$(BUILD)/%)
LIB      := $(BUILD)/libgrpo.a
TESTREF  := $(BUILD)/libgrpo_testref.a

.PHONY: all test asan bench clean deps tests-bin check demo FORCE
all: $(BUILD)/grpo

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

$(TESTREF_OBJ): CFLAGS += -Itests

$(TESTREF): $(TESTREF_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/grpo: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(LIB) $(TESTREF)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -MMD -MP $< $(TESTREF) $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $< $(LIB) -o $@ $(LDFLAGS) $(LDLIBS)

tests-bin: $(BUILD)/grpo $(TEST_BIN)

# The test runner runs every test binary and every tests/**/*.sh with GRPO=$(BUILD)/grpo.
test: tests-bin
	BUILD=$(BUILD) tests/run.sh

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree.
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

bench: $(BUILD)/grpo $(BENCH_BIN)
	tools/install-deps.sh --bench
	BUILD=$(BUILD) bench/run.sh

deps:
	tools/install-deps.sh

# The README's two commands: the tests (with the sanitizer run) and the demo.
check: deps
	$(MAKE) test
	$(MAKE) asan

demo: deps
	$(MAKE) all
	tools/demo.sh

clean:
	rm -rf build build-asan

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTREF_OBJ:.o=.d) $(TEST_BIN:=.d) $(BENCH_BIN:=.d)
