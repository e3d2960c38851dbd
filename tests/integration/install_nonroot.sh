#!/usr/bin/env bash
# install_nonroot.sh SOURCE_DIR
# As an unprivileged user: configure and build SOURCE_DIR (without tests) in a
# build directory of that user's, `cmake --install build --prefix P` into a
# directory of that user's (P given only at install time), then a 2-rank job
# started with the installed launcher and package (no PYTHONPATH). As root the
# test switches to the
# user "nobody" with setpriv (HOME in the scratch directory); as any other
# user it runs as that user. Fails when anything is written outside P (the
# SPANK plugin once went to /usr/lib/<arch>/slurm-wlm whatever the prefix).
set -euo pipefail
src=$(cd "$1" && pwd)
fail() { echo "install_nonroot: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tnt-install-nonroot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/home"

if [ "$(id -u)" -eq 0 ]; then
  chown -R nobody:nogroup "$tmp"
  chmod 755 "$tmp"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all)
else
  as_user=()
fi
# A clean environment: no launcher variables, no PYTHONPATH, the user's HOME.
user_env=(env -i HOME="$tmp/home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8
          TMPDIR="$tmp" TNT_TIMEOUT=120)
run_user() { "${as_user[@]}" "${user_env[@]}" "$@"; }

[ "$(run_user id -u)" -ne 0 ] || fail "the install must run unprivileged"
prefix=$tmp/home/tnt
build=$tmp/home/build
run_user cmake -S "$src" -B "$build" -DTNT_BUILD_TESTS=OFF -DTNT_WERROR=ON >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log"; fail "cmake configure failed as $(run_user id -un)"; }
run_user cmake --build "$build" -j 2 >"$tmp/build.log" 2>&1 ||
  { tail -50 "$tmp/build.log"; fail "build failed as $(run_user id -un)"; }
run_user cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install --prefix $prefix failed as $(run_user id -un)"; }
cat "$tmp/install.log"
# Every installed file is under the prefix.
outside=$(grep -E '^-- (Installing|Up-to-date): ' "$tmp/install.log" | sed -E 's/^-- [^:]+: //' |
  grep -v "^$prefix/" || true)
[ -z "$outside" ] || fail "installed outside the prefix: $outside"
[ -x "$prefix/bin/tarantella" ] || fail "no bin/tarantella"
lib=$(find "$prefix" -name 'libtnt.so.*' | head -1)
[ -n "$lib" ] || fail "no libtnt.so under $prefix"
if grep -q 'spank_tarantella' "$tmp/install.log"; then
  plugin=$(find "$prefix" -name spank_tarantella.so)
  [ -n "$plugin" ] || fail "spank_tarantella.so not under $prefix"
  echo "install_nonroot: plugin at ${plugin#"$prefix"/}"
fi
pkg=$(find "$prefix" -path '*/tarantella/__init__.py' | head -1)
if [ -n "$pkg" ]; then
  # The installed launcher finds its installed package (not on the
  # interpreter's path) and puts it on the ranks' PYTHONPATH.
  out=$(run_user timeout 120 "$prefix/bin/tarantella" -n 2 --python-interpreter "" -- \
    /usr/bin/python3 -m tarantella.smoke --expect-size 2 2>&1) ||
    { echo "$out"; fail "the installed launcher and package did not run a 2-rank job"; }
  echo "$out"
  [ "$(echo "$out" | grep -c "from $(dirname "$pkg")")" -eq 2 ] ||
    fail "the ranks did not import the installed package $(dirname "$pkg")"
  echo "$out" | grep -q "smoke test passed (2 ranks)" || fail "no smoke test result"
fi
echo "install_nonroot: OK (as $(run_user id -un), prefix $prefix)"
