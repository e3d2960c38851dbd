#!/usr/bin/env bash
# scripts/prefix-deps.sh unpack: a package unpacked into a prefix must be
# found there through pkg-config (its .pc paths rewritten, PMIx's own
# /usr/lib/.../pmix2 prefix and bare -I/usr/include included), the printed
# exports must name the prefix, and a folder without packages must fail
# with a message saying how to get them. Uses a small .deb made here.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v dpkg-deb >/dev/null && command -v pkg-config >/dev/null || { echo "skipped: needs dpkg-deb and pkg-config"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pkg=$tmp/pkg
mkdir -p "$pkg/DEBIAN" "$pkg/usr/lib/x86_64-linux-gnu/pkgconfig" "$pkg/usr/include"
printf 'Package: tnt-prefix-test\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: t\n' >"$pkg/DEBIAN/control"
cat >"$pkg/usr/lib/x86_64-linux-gnu/pkgconfig/alpha.pc" <<'PC'
prefix=/usr/lib/x86_64-linux-gnu/alpha2
libdir=/usr/lib/x86_64-linux-gnu/alpha2/lib
includedir=/usr/lib/x86_64-linux-gnu/alpha2/include
Name: alpha
Description: PMIx-style paths
Version: 1
Libs: -L${libdir} -Wl,-rpath -Wl,${libdir} -lalpha
Cflags: -I${includedir} -I/usr/include
PC
cat >"$pkg/usr/lib/x86_64-linux-gnu/pkgconfig/beta.pc" <<'PC'
prefix = /usr
libdir = ${prefix}/lib/x86_64-linux-gnu
Name: beta
Description: UCX-style spaced assignments
Version: 1
Libs: -L${libdir} -lbeta
Cflags: -I${prefix}/include/beta
PC
mkdir -p "$tmp/debs"
dpkg-deb --build --root-owner-group "$pkg" "$tmp/debs/tnt-prefix-test.deb" >/dev/null

exports=$("$src/scripts/prefix-deps.sh" unpack "$tmp/debs" "$tmp/prefix")
p=$tmp/prefix
grep -qx "export PKG_CONFIG=$p/usr/bin/pkgconf PKG_CONFIG_LIBDIR=$p/usr/lib/x86_64-linux-gnu/pkgconfig" <<<"$exports"
grep -q "^export LD_LIBRARY_PATH=$p/usr/lib/x86_64-linux-gnu:$p/usr/lib/x86_64-linux-gnu/pmix2/lib" <<<"$exports"
# Unpacking again (dpkg -x writes the .pc files afresh) gives the same paths.
"$src/scripts/prefix-deps.sh" unpack "$tmp/debs" "$tmp/prefix" >/dev/null
got=$(PKG_CONFIG_LIBDIR=$p/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSTEM_INCLUDE_PATH=/nonexistent \
      pkg-config --cflags --libs alpha beta)
want="-I$p/usr/lib/x86_64-linux-gnu/alpha2/include -I$p/usr/include -I$p/usr/include/beta -L$p/usr/lib/x86_64-linux-gnu/alpha2/lib -Wl,-rpath -Wl,$p/usr/lib/x86_64-linux-gnu/alpha2/lib -lalpha -L$p/usr/lib/x86_64-linux-gnu -lbeta"
[ "$(echo $got)" = "$want" ] || { echo "pkg-config gave: $got"; echo "expected:        $want"; exit 1; }

mkdir "$tmp/empty"
if out=$("$src/scripts/prefix-deps.sh" unpack "$tmp/empty" "$tmp/p2" 2>&1); then
    echo "unpack of a folder without packages succeeded"; exit 1
fi
grep -q "no .deb files in $tmp/empty; run '.*prefix-deps.sh download $tmp/empty' on Debian 12 first" <<<"$out" || { echo "$out"; exit 1; }
echo "prefix-deps: ok"
