#!/usr/bin/env bash
# install_venv.sh SOURCE_DIR
# The documented venv install: a venv made with
# `/usr/bin/python3 -m venv --system-site-packages` (torch and numpy from
# Debian), `cmake -S . -B build -DTNT_PYTHON=$VENV/bin/python`, build, and
# `cmake --install build`, which installs into the venv by itself. Then,
# without PYTHONPATH: the venv's python imports the package from its
# site-packages, the system python does not see it, and the venv's
# bin/tarantella runs a 2-rank job with the venv's python by default.
set -euo pipefail
src=$(cd "$1" && pwd)
fail() { echo "install_venv: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tnt-install-venv.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
clean=(env -u PYTHONPATH -u VIRTUAL_ENV -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_NTASKS
       -u SLURM_NPROCS -u WORLD_SIZE -u OMPI_COMM_WORLD_SIZE TNT_TIMEOUT=120)

venv=$tmp/venv
/usr/bin/python3 -m venv --system-site-packages --without-pip "$venv" ||
  fail "python3 -m venv failed: install python3-venv (scripts/install-deps.sh does)"
"${clean[@]}" cmake -S "$src" -B "$tmp/build" -DTNT_PYTHON="$venv/bin/python" \
  -DTNT_BUILD_TESTS=OFF -DTNT_WITH_SPANK=OFF -DTNT_WERROR=ON >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log"; fail "configure with TNT_PYTHON=$venv/bin/python failed"; }
grep -q "^CMAKE_INSTALL_PREFIX:PATH=$venv\$" "$tmp/build/CMakeCache.txt" ||
  fail "the install prefix is not the venv: $(grep '^CMAKE_INSTALL_PREFIX' "$tmp/build/CMakeCache.txt")"
"${clean[@]}" cmake --build "$tmp/build" -j 2 >"$tmp/build.log" 2>&1 ||
  { tail -50 "$tmp/build.log"; fail "build failed"; }
"${clean[@]}" cmake --install "$tmp/build" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }
outside=$(grep -E '^-- (Installing|Up-to-date): ' "$tmp/install.log" | sed -E 's/^-- [^:]+: //' |
  grep -v "^$venv/" || true)
[ -z "$outside" ] || fail "installed outside the venv: $outside"
grep -q "is not on .*sys.path" "$tmp/install.log" && fail "the install says the package is not on the venv's path"

cd "$tmp" # not the source tree: nothing may be found by accident
where=$("${clean[@]}" "$venv/bin/python" -c 'import tarantella, os; print(os.path.dirname(tarantella.__file__))') ||
  fail "the venv's python cannot import tarantella"
case "$where" in
  "$venv"/lib/python3*/site-packages/tarantella) echo "install_venv: package at $where" ;;
  *) fail "the venv's python imported tarantella from $where, not the venv's site-packages" ;;
esac
if "${clean[@]}" /usr/bin/python3 -c 'import tarantella' 2>/dev/null; then
  "${clean[@]}" /usr/bin/python3 -c 'import tarantella; print(tarantella.__file__)' | grep -q "^$venv" &&
    fail "the system python sees the venv's package"
fi

# The launcher: default interpreter is the venv's python; its package is on
# the venv's own path, so no PYTHONPATH is added.
plan=$("${clean[@]}" "$venv/bin/tarantella" -n 2 --dry-run -- job.py)
echo "$plan"
[ "$(echo "$plan" | grep -c "exec: $venv/bin/python job.py")" -eq 2 ] ||
  fail "the launcher's default interpreter is not $venv/bin/python"
echo "$plan" | grep -q PYTHONPATH && fail "PYTHONPATH added although the venv finds the package"
# --python-interpreter still overrides it.
"${clean[@]}" "$venv/bin/tarantella" -n 1 --dry-run --python-interpreter /usr/bin/python3 -- job.py |
  grep -q "exec: /usr/bin/python3 job.py" || fail "--python-interpreter does not override the default"

cat >job.py <<'PY'
import sys
import tarantella as tnt
import torch
assert sys.prefix != sys.base_prefix, "not running in the venv: %s" % sys.executable
assert tnt.get_size() == 2, tnt.get_size()
t = torch.ones(4) * (tnt.get_rank() + 1)
tnt.allreduce_(t)
assert float(t[0]) == 3.0, t
# One write per line: two ranks share the pipe, and an unbuffered print()
# writes the text and its newline separately, which can interleave.
sys.stdout.write("venv job: rank %d of %d, %s\n" % (tnt.get_rank(), tnt.get_size(), sys.executable))
sys.stdout.flush()
PY
out=$("${clean[@]}" timeout 120 "$venv/bin/tarantella" -n 2 -- job.py 2>&1) ||
  { echo "$out"; fail "2-rank job in the venv failed"; }
echo "$out"
[ "$(echo "$out" | grep -c "^venv job: rank [01] of 2, $venv/bin/python$")" -eq 2 ] ||
  fail "the ranks did not run the venv's python"
echo "install_venv: OK ($venv)"
