# Convenience front end over CMake. `make run` and `make test` work on a fresh
# Debian 12 machine: they install missing packages, build, then run.
BUILD_DIR ?= build
JOBS      ?= $(shell nproc)
CMAKE_FLAGS ?= -DTNT_WERROR=ON
PYTHON    ?= /usr/bin/python3
RANKS     ?= 2

.PHONY: all deps configure build run test test-unit bench install clean

all: build

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The main job: data-parallel training of the digits CNN on $(RANKS) ranks.
# The package runs from the build tree (build/python holds _tnt and the
# modules), so nothing has to be installed first.
run: build
	PYTHONPATH=$(CURDIR)/$(BUILD_DIR)/python$${PYTHONPATH:+:$$PYTHONPATH} \
	  $(BUILD_DIR)/bin/tarantella -n $(RANKS) -- python/examples/digits.py

# The whole suite: unit, integration (launcher and mpirun), Python, and the
# SLURM end-to-end tests against real daemons the suite starts and stops.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --timeout 900

test-unit: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -L unit

bench: build
	bash tests/bench/run_all.sh $(BUILD_DIR)

install: build
	cmake --install $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
