#!/usr/bin/env bash
# build-debs.sh [BUILD_DIR] [extra cmake arguments...]
# Builds the Debian packages (libtnt, libtnt-dev, tarantella,
# slurm-spank-tarantella, python3-tarantella) for the /usr prefix in
# BUILD_DIR (default build-deb) and prints their paths. Without tests, so it
# compiles only what is shipped. Needs the build dependencies
# (scripts/install-deps.sh) and dpkg-dev (dpkg-shlibdeps).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-deb}
[ $# -gt 0 ] && shift
jobs=${JOBS:-$(nproc)}
cmake -S "$src" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTNT_BUILD_TESTS=OFF "$@" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; echo "build-debs: cmake configure failed" >&2; exit 1; }
cmake --build "$build" -j "$jobs"
(cd "$build" && cpack -G DEB) >"$build.cpack.log" 2>&1 ||
  { cat "$build.cpack.log"; echo "build-debs: cpack failed" >&2; exit 1; }
ls -1 "$build"/*.deb
