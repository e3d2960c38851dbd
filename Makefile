# Convenience front end over CMake. `make run` and `make test` work on a fresh
# Debian 12 machine: they install missing packages, build, then run.
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?= -DTNT_WERROR=ON
PYTHON    ?= /usr/bin/python3
RANKS     ?= 2

.PHONY: all deps configure build run test test-unit test-sanitizers test-asan test-tsan bench \
        bench-compare test-torch-suite install deb clean

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: data-parallel training of the digits CNN on $(RANKS) ranks.
# The package runs from the build tree (build/python holds _tnt and the
# modules; the launcher puts it on the ranks' PYTHONPATH), so nothing has to
# be installed first.
run: build
	$(BUILD_DIR)/bin/tarantella -n $(RANKS) -- python/examples/digits.py

# The whole suite: unit, integration (launcher and mpirun), Python, and the
# SLURM end-to-end tests against real daemons the suite starts and stops.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --timeout 900

test-unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L unit

# The sanitizer runs (docs/testing.md; CI runs them after `make test`), each
# in a build directory of its own. Both leave -Werror to the normal build:
# the instrumentation makes GCC warn falsely (-Wformat-truncation's "null
# destination pointer" in pmix/launcher/which.c). Both leave out the Python
# package: an ASan/TSan libtnt inside /usr/bin/python3 would need the
# runtime preloaded, and the Python layer adds no C of its own to check.
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
SAN_CMAKE_FLAGS = -DTNT_WERROR=OFF -DTNT_WITH_PYTHON=OFF

test-sanitizers: test-asan test-tsan

# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer over
# the unit and integration labels; UB aborts the program (CMakeLists.txt).
# Left out, each for its reason:
#  - integration.install_nonroot builds and installs an unsanitized copy of
#    the tree as another user: nothing of this build runs there.
#  - the `sanitizer` label (integration.gpu_double.asan) is an ASan build of
#    the gpu-double tests, which this run already covers.
# lsan.supp holds only the third-party libraries' exit-time allocations;
# print_suppressions=0 keeps LSan's summary out of the stderr that the
# launcher tests compare.
ASAN_EXCLUDE = ^integration\.install_nonroot$$
test-asan: deps
	cmake -S . -B $(ASAN_BUILD_DIR) $(SAN_CMAKE_FLAGS) -DTNT_SANITIZE=address,undefined
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/common/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --test-dir $(ASAN_BUILD_DIR) --output-on-failure --timeout 900 \
	  -L "unit|integration" -LE sanitizer -E "$(ASAN_EXCLUDE)"

# ThreadSanitizer over the tests where threads of one process share libtnt
# state: the progress thread and the caller-runs waits (unit.test_core,
# unit.test_comm_threads), the in-process bootstrap's thread ranks
# (unit.test_boot), and several communicators of a rank used at once, made
# by dup and split, on one node and across "nodes" over UCX
# (integration.comm.threads_*, split_*, set_*). Only their programs are built.
# The comm tests run twice: as configured (TNT_OVERLAP=auto, which on a
# small machine leaves posted requests to their waiters), then with
# TNT_OVERLAP=on, so that every post is handed to the progress thread.
# tsan.supp names the false positives, each with its reason.
# UCX_MEM_MMAP_HOOK_MODE=none: UCX's memory hooks (libucm) patch madvise,
# which glibc calls on a thread's stack after TSan has torn the thread's
# state down; TSan's interceptor of ucm's rwlock then crashes (SIGSEGV at
# every thread exit). The hooks serve RDMA registration caches; these tests
# use UCX over TCP only.
TSAN_TARGETS = test_boot test_comm_threads test_core comm_check
TSAN_UNIT = ^unit\.test_(boot|comm_threads|core)$$
TSAN_COMM = ^integration\.comm\.(threads|split|set)_
TSAN_ENV = UCX_MEM_MMAP_HOOK_MODE=none \
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/common/tsan.supp
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD_DIR) $(SAN_CMAKE_FLAGS) -DTNT_SANITIZE=thread
	cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target $(TSAN_TARGETS)
	$(TSAN_ENV) ctest --test-dir $(TSAN_BUILD_DIR) --output-on-failure --timeout 900 \
	  --no-tests=error -R "$(TSAN_UNIT)|$(TSAN_COMM)"
	$(TSAN_ENV) TNT_OVERLAP=on ctest --test-dir $(TSAN_BUILD_DIR) --output-on-failure \
	  --timeout 900 --no-tests=error -R "$(TSAN_COMM)"

# torch's own distributed test suite on gloo and on tnt, at each world size
# in TORCH_SUITE_SIZES (docs/testing.md): per-test results in
# $(BUILD_DIR)/torch-suite/, the tables in docs/data/torch-suite-ws<N>.md.
# Each run is bounded by TORCH_SUITE_BUDGET seconds (tests left over are
# "not run") and each test by TORCH_SUITE_TEST_TIMEOUT. Fails when a test
# that gloo passes does not pass on tnt and
# tests/torch_suite/known_differences.py gives no reason for it.
TORCH_SUITE_SIZES ?= 2 3
TORCH_SUITE_BUDGET ?= 3600
TORCH_SUITE_TEST_TIMEOUT ?= 180
TORCH_SUITE_TABLES ?= docs/data
test-torch-suite: build
	mkdir -p $(BUILD_DIR)/torch-suite
	set -e; for n in $(TORCH_SUITE_SIZES); do \
	  for b in gloo tnt; do \
	    $(PYTHON) tests/torch_suite/run_suite.py run --backend $$b --world-size $$n \
	      --build-dir $(BUILD_DIR) --budget $(TORCH_SUITE_BUDGET) \
	      --test-timeout $(TORCH_SUITE_TEST_TIMEOUT) \
	      --results $(BUILD_DIR)/torch-suite/$$b-$$n.jsonl \
	      --log $(BUILD_DIR)/torch-suite/$$b-$$n.log; \
	  done; \
	done; \
	status=0; for n in $(TORCH_SUITE_SIZES); do \
	  $(PYTHON) tests/torch_suite/run_suite.py table --world-size $$n \
	    --gloo $(BUILD_DIR)/torch-suite/gloo-$$n.jsonl --tnt $(BUILD_DIR)/torch-suite/tnt-$$n.jsonl \
	    --out $(TORCH_SUITE_TABLES)/torch-suite-ws$$n.md || status=1; \
	done; exit $$status

bench: build
	bash tests/bench/run_all.sh $(BUILD_DIR)

# The working tree against a reference commit, alternating, probed (see
# scripts/bench-compare.sh): make bench-compare REF=<commit before a change>.
REF ?= HEAD
bench-compare: build
	bash scripts/bench-compare.sh --ref $(REF) --build $(BUILD_DIR)

install: build
	cmake --install $(BUILD_DIR)

# Debian packages (libtnt, libtnt-dev, tarantella, slurm-spank-tarantella,
# python3-tarantella) for /usr, built in build-deb/ (see docs/install.md).
deb: deps
	bash scripts/build-debs.sh build-deb

clean:
	rm -rf $(BUILD_DIR)
