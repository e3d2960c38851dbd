#!/usr/bin/env bash
# install_check.sh BUILD_DIR [EXTRA_CFLAGS]
# Installs the build into a scratch prefix (under DESTDIR, so nothing can land
# outside it) and checks what a user of libtnt needs: libtnt.so, tnt/tnt.h,
# tnt.pc and the CMake package. Then builds a tiny out-of-tree program twice,
# with `pkg-config --cflags --libs tnt` and with find_package(tnt), and runs
# both as singletons.
set -euo pipefail
build=$(cd "$1" && pwd)
# A sanitizer build's libtnt needs the programs built with the same flag.
extra_cflags=${2:-}
tmp=$(mktemp -d /tmp/tnt-install-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_check: $*" >&2; exit 1; }

DESTDIR=$tmp/root cmake --install "$build" --prefix /opt/tnt >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }
prefix=$tmp/root/opt/tnt
lib=$(find "$prefix" -name libtnt.so | head -1)
[ -n "$lib" ] || fail "no libtnt.so under $prefix"
libdir=$(dirname "$lib")
[ -f "$prefix/include/tnt/tnt.h" ] || fail "no include/tnt/tnt.h"
[ -f "$libdir/pkgconfig/tnt.pc" ] || fail "no tnt.pc in $libdir/pkgconfig"
[ -f "$libdir/cmake/tnt/tntConfig.cmake" ] || fail "no tntConfig.cmake in $libdir/cmake/tnt"
[ -f "$libdir/cmake/tnt/tntConfigVersion.cmake" ] || fail "no tntConfigVersion.cmake"
# Only the public headers are installed: tnt.h, and tnt_cuda.h (the device
# API, which has no CUDA types and is there with or without TNT_WITH_CUDA).
extra=$(find "$prefix/include" -type f ! -path '*/tnt/tnt.h' ! -path '*/tnt/tnt_cuda.h')
[ -z "$extra" ] || fail "internal headers installed: $extra"
[ -f "$prefix/include/tnt/tnt_cuda.h" ] || fail "no include/tnt/tnt_cuda.h"
# Only the public API is exported: every exported function is declared in a
# public header.
leaked=""
for sym in $(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRW]$/ {print $3}'); do
  grep -qE "[ *]$sym\(" "$prefix/include/tnt/tnt.h" "$prefix/include/tnt/tnt_cuda.h" \
    || leaked="$leaked $sym"
done
[ -z "$leaked" ] || fail "libtnt.so exports symbols that the public headers do not declare:$leaked"
# libtnt.so must not need CUDA; libtnt_cuda.so, where built, sits next to it.
if readelf -d "$lib" | grep -Eiq 'NEEDED.*(cuda|nccl)'; then
  fail "libtnt.so needs a CUDA library"
fi

mkdir -p "$tmp/app"
cat >"$tmp/app/hello.c" <<'C'
#include <tnt/tnt.h>
#include <stdio.h>
int main(void)
{
    tnt_comm_t *comm;
    tnt_status_t s = tnt_init(&comm);
    if (s != TNT_OK) {
        fprintf(stderr, "tnt_init: %s: %s\n", tnt_status_string(s), tnt_last_error());
        return 1;
    }
    float x = 1.5f;
    s = tnt_allreduce(comm, &x, &x, 1, TNT_FLOAT32, TNT_SUM);
    int size = tnt_size(comm);
    printf("hello from rank %d of %d, libtnt %s, sum %g\n", tnt_rank(comm), size, tnt_version(),
           (double)x);
    tnt_finalize(comm);
    return s == TNT_OK && x == 1.5f * (float)size ? 0 : 1;
}
C
clean_env=(env -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_NTASKS -u SLURM_NPROCS)

# 1. pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion tnt)" = "$(sed -n 's/^Version: //p' "$libdir/pkgconfig/tnt.pc")" ] ||
  fail "pkg-config does not find tnt"
# shellcheck disable=SC2046
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror $extra_cflags -o "$tmp/app/hello_pc" "$tmp/app/hello.c" \
  $(pkg-config --cflags --libs tnt) || fail "build with pkg-config failed"
LD_LIBRARY_PATH=$libdir "${clean_env[@]}" timeout 20 "$tmp/app/hello_pc" ||
  fail "program built with pkg-config failed"

# 2. find_package(tnt)
cat >"$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(hello C)
find_package(tnt 0.1 REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE tnt::tnt)
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="$extra_cflags" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log"; fail "find_package(tnt) failed"; }
cmake --build "$tmp/app/build" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; fail "build with find_package(tnt) failed"; }
# CMake puts the imported library's directory in the build RPATH.
"${clean_env[@]}" timeout 20 "$tmp/app/build/hello" || fail "program built with CMake failed"
echo "install_check: OK (pkg-config and find_package(tnt) against $prefix)"
