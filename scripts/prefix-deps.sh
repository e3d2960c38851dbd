#!/usr/bin/env bash
# libtnt's build dependencies as Debian 12 packages unpacked into a prefix,
# for a node where they cannot be installed (no root, no package mirror, or
# another distribution with glibc 2.36 or later), such as a GPU node on which
# to run scripts/verify-gpu.sh.
#
#   scripts/prefix-deps.sh download DIR          # on Debian 12, with apt: fetch the .debs
#   eval "$(scripts/prefix-deps.sh unpack DIR PREFIX)"   # on the node: unpack, set the env
#
# `unpack` extracts every .deb in DIR into PREFIX (dpkg -x, no root needed),
# points the pkg-config files at PREFIX, and prints the exports that make
# CMake, the compiler and the loader use them: PKG_CONFIG, PKG_CONFIG_LIBDIR,
# CPATH, LIBRARY_PATH, CMAKE_PREFIX_PATH and LD_LIBRARY_PATH (the libraries
# are found through LD_LIBRARY_PATH at run time, so keep it set for the tests).
# Configure without the SPANK plugin there (-DTNT_WITH_SPANK=OFF), whose
# Slurm headers are not among these packages.
set -euo pipefail

# PMIx, hwloc, libnuma and UCX with what they load, cmocka for the tests,
# pkgconf for CMake's pkg_check_modules.
packages=(libpmix-dev libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2
          libhwloc-dev libhwloc15 libnuma-dev libnuma1
          libucx-dev libucx0 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200
          libcmocka-dev libcmocka0 pkgconf pkgconf-bin libpkgconf3)

usage() { sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;$d' >&2; exit 2; }

case "${1:-}" in
download)
    [ $# = 2 ] || usage
    mkdir -p "$2"
    cd "$2"
    apt-get download "${packages[@]}"
    ;;
unpack)
    [ $# = 3 ] || usage
    dir=$2
    prefix=$(mkdir -p "$3" && cd "$3" && pwd)
    shopt -s nullglob
    debs=("$dir"/*.deb)
    [ ${#debs[@]} -gt 0 ] || { echo "prefix-deps: no .deb files in $dir; run '$0 download $dir' on Debian 12 first" >&2; exit 1; }
    for f in "${debs[@]}"; do dpkg -x "$f" "$prefix"; done
    lib=$prefix/usr/lib/x86_64-linux-gnu
    # The .pc files name /usr (and PMIx's own /usr/lib/.../pmix2); make
    # every such path the prefix's (dpkg -x has just written them afresh).
    sed -i -E "s#(^|[=[:space:]]|-I|-L|-Wl,)/usr([/[:space:]]|\$)#\1$prefix/usr\2#g" "$lib"/pkgconfig/*.pc
    cat <<EOF
export PKG_CONFIG=$prefix/usr/bin/pkgconf PKG_CONFIG_LIBDIR=$lib/pkgconfig
export CPATH=$prefix/usr/include LIBRARY_PATH=$lib CMAKE_PREFIX_PATH=$prefix/usr
export LD_LIBRARY_PATH=$lib:$lib/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
    ;;
*) usage ;;
esac
