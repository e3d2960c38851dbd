# Convenience front end over CMake. `make run` and `make test` work on a fresh
# Debian 12 machine: they install missing packages, build, then run.
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?= -DTNT_WERROR=ON
PYTHON    ?= /usr/bin/python3
RANKS     ?= 2

.PHONY: all deps configure build run test test-unit bench bench-compare install deb clean

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
