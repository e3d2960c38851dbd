#!/usr/bin/env bash
# package_deb.sh SOURCE_DIR [CLUSTER_SH] [GPU_DOUBLE_DIR]
# Builds the Debian packages (scripts/build-debs.sh: prefix /usr, no tests)
# and installs all five (six with libtnt-cuda, where CUDA is built) with dpkg -i into an alternate root (dpkg --root),
# whose package database starts as a copy of this machine's without any
# Tarantella package. So dpkg checks the real dependencies against what is
# installed here, but nothing lands in this machine's /usr (other builds and
# tests keep using their own trees). Then uses what was installed:
#   - the launcher runs a 2-rank job with the packaged Python package
#     (python -m tarantella.smoke), finding it by itself;
#   - a C program builds against libtnt-dev with pkg-config and runs;
#   - libtnt-cuda: the packaged libtnt loads the packaged plugin, which with
#     GPU_DOUBLE_DIR (the CUDA/NCCL test double) first on LD_LIBRARY_PATH
#     sets up the NCCL path;
#   - with CLUSTER_SH (and root): a private SLURM cluster loads the packaged
#     SPANK plugin, and `srun --tarantella -n 2` runs the smoke test.
# Finally dpkg --purge removes every package and leaves no file behind.
set -euo pipefail
src=$(cd "$1" && pwd)
cluster_sh=${2:+$(readlink -f "$2")}
gpu_double=${3:+$(readlink -f "$3")}
fail() { echo "package_deb: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/tnt-package-deb.XXXXXX)
state=$tmp/cluster.state
cleanup() {
  local rc=$?
  [ -f "$state" ] && "$cluster_sh" stop --state-file "$state" >/dev/null 2>&1 || true
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
clean=(env -u PYTHONPATH -u PMIX_NAMESPACE -u PMIX_RANK -u SLURM_NTASKS -u SLURM_NPROCS
       -u SLURM_JOB_ID -u WORLD_SIZE -u OMPI_COMM_WORLD_SIZE TNT_TIMEOUT=120)

JOBS=2 "${clean[@]}" bash "$src/scripts/build-debs.sh" "$tmp/build" >"$tmp/debs.log" 2>&1 ||
  { tail -60 "$tmp/debs.log"; fail "building the packages failed"; }
mapfile -t debs < <(ls "$tmp"/build/*.deb)
names=$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | sort | tr '\n' ' ')
ours="libtnt libtnt-dev python3-tarantella slurm-spank-tarantella tarantella"
cuda_pkg=""
case " $names" in *" libtnt-cuda "*) cuda_pkg=libtnt-cuda; ours="libtnt libtnt-cuda ${ours#libtnt }" ;; esac
[ "$names" = "$ours " ] || fail "unexpected package set: $names (expected $ours)"

# The alternate root: this machine's package database, minus Tarantella's.
root=$tmp/root
admin=$root/var/lib/dpkg
mkdir -p "$admin/info" "$admin/updates" "$admin/triggers"
/usr/bin/python3 - /var/lib/dpkg/status "$admin/status" <<'PY'
import sys
ours = {"libtnt", "libtnt-cuda", "libtnt-dev", "python3-tarantella", "slurm-spank-tarantella",
        "tarantella"}
stanzas = open(sys.argv[1], encoding="utf-8").read().split("\n\n")
keep = [s for s in stanzas if s.strip() and
        not any(l == "Package: " + p for l in s.splitlines() for p in ours)]
open(sys.argv[2], "w", encoding="utf-8").write("\n\n".join(keep) + "\n")
PY
# libtnt's postinst runs ldconfig; in the alternate root that is ldconfig -r.
mkdir -p "$tmp/shim" "$root/etc"
printf '#!/bin/sh\nexec /sbin/ldconfig -r "$DPKG_ROOT" "$@"\n' >"$tmp/shim/ldconfig"
chmod +x "$tmp/shim/ldconfig"
echo "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)" \
  >"$root/etc/ld.so.conf"
dpkg_root=(env PATH="$tmp/shim:/usr/sbin:/usr/bin:/sbin:/bin" dpkg --root="$root"
           --force-script-chrootless --log=/dev/null)
[ "$(id -u)" -eq 0 ] || dpkg_root+=(--force-not-root)
"${dpkg_root[@]}" -i "${debs[@]}" >"$tmp/dpkg.log" 2>&1 ||
  { cat "$tmp/dpkg.log"; fail "dpkg -i failed (dependencies are checked against this machine)"; }
cat "$tmp/dpkg.log"
for p in $ours; do
  "${dpkg_root[@]}" -s "$p" | grep -q '^Status: install ok installed' || fail "$p is not installed"
done
usr=$root/usr
multiarch=$(ls "$usr/lib" | grep -- '-linux-gnu$' | head -1)
plugin=$usr/lib/$multiarch/slurm-wlm/spank_tarantella.so
[ -f "$plugin" ] || fail "the plugin is not in Debian's PluginDir (/usr/lib/$multiarch/slurm-wlm)"
[ -f "$usr/lib/python3/dist-packages/tarantella/__init__.py" ] ||
  fail "the Python package is not in /usr/lib/python3/dist-packages"

cd "$tmp"
# 1. The launcher and the Python package.
out=$("${clean[@]}" timeout 120 "$usr/bin/tarantella" -n 2 --python-interpreter "" -- \
  /usr/bin/python3 -m tarantella.smoke --expect-size 2 2>&1) ||
  { echo "$out"; fail "the packaged launcher and package did not run a 2-rank job"; }
echo "$out"
[ "$(echo "$out" | grep -c "from $usr/lib/python3/dist-packages/tarantella$")" -eq 2 ] ||
  fail "the ranks did not use the packaged Python package"

# 2. libtnt-dev: pkg-config (tnt.pc is relocatable) and a program.
cat >hello.c <<'C'
#include <tnt/tnt.h>
#include <stdio.h>
int main(void)
{
    tnt_comm_t *comm;
    if (tnt_init(&comm) != TNT_OK)
        return 1;
    printf("hello from libtnt %s, size %d\n", tnt_version(), tnt_size(comm));
    tnt_finalize(comm);
    return 0;
}
C
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o hello hello.c \
  $(PKG_CONFIG_PATH=$usr/lib/$multiarch/pkgconfig pkg-config --cflags --libs tnt) ||
  fail "building against libtnt-dev failed"
"${clean[@]}" LD_LIBRARY_PATH="$usr/lib/$multiarch" timeout 20 ./hello | grep -q "size 1" ||
  fail "the program built against libtnt-dev did not run"

# 2b. libtnt-cuda: the packaged libtnt finds the packaged plugin next to it.
if [ -n "$cuda_pkg" ]; then
  [ -f "$usr/lib/$multiarch/libtnt_cuda.so" ] || fail "libtnt-cuda has no libtnt_cuda.so in libdir"
  cat >hello_gpu.c <<'C'
#include <tnt/tnt.h>
#include <tnt/tnt_cuda.h>
#include <stdio.h>
int main(void)
{
    tnt_comm_t *comm;
    tnt_gpu_transport_t t = TNT_GPU_TRANSPORT_NONE;
    if (tnt_init(&comm) != TNT_OK)
        return 1;
    tnt_status_t s = tnt_device_init(comm);
    tnt_device_transport(comm, &t);
    printf("device init: %s (%s), transport %s\n", tnt_status_string(s),
           s == TNT_OK ? "" : tnt_last_error(), tnt_gpu_transport_string(t));
    tnt_finalize(comm);
    return s == TNT_OK ? 0 : 3;
}
C
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror -o hello_gpu hello_gpu.c \
    $(PKG_CONFIG_PATH=$usr/lib/$multiarch/pkgconfig pkg-config --cflags --libs tnt) ||
    fail "building the device program against libtnt-dev failed"
  if [ -n "$gpu_double" ]; then
    out=$("${clean[@]}" LD_LIBRARY_PATH="$gpu_double:$usr/lib/$multiarch" \
      TNT_CUDA_DOUBLE_GPUS=a timeout 20 ./hello_gpu 2>&1) ||
      { echo "$out"; fail "the packaged plugin did not set up the device path (test double)"; }
    echo "$out" | grep -q "transport nccl" || { echo "$out"; fail "not the NCCL path: $out"; }
  else
    # No GPU and no double: the plugin must load and report the missing GPU.
    out=$("${clean[@]}" LD_LIBRARY_PATH="$usr/lib/$multiarch" timeout 20 ./hello_gpu 2>&1) || true
    echo "$out" | grep -q "cannot load" && fail "the packaged libtnt did not load its plugin: $out"
  fi
  echo "package_deb: libtnt-cuda: $out"
fi

# 3. The SPANK plugin, loaded by a real slurmd/srun.
if [ -n "$cluster_sh" ] && [ "$(id -u)" -eq 0 ] && command -v srun >/dev/null &&
   [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ]; then
  started=$("$cluster_sh" start --nodes 1 --cpus 2 --plugin "$plugin" --state-file "$state") ||
    fail "the test cluster did not start"
  eval "$started"
  out=$(PYTHONPATH=$usr/lib/python3/dist-packages timeout -k 5 90 srun --tarantella -n 2 \
    --immediate=30 -t 2 /usr/bin/python3 -m tarantella.smoke --expect-size 2 2>&1) ||
    { echo "$out"; fail "srun --tarantella with the packaged plugin failed"; }
  echo "$out"
  echo "$out" | grep -q "smoke test passed (2 ranks)" || fail "no smoke result under srun"
  "$cluster_sh" stop --state-file "$state" >/dev/null
  rm -f "$state"
else
  echo "package_deb: no SLURM cluster (needs root and the Slurm daemons): plugin not loaded"
fi

# 4. Removal leaves nothing behind.
# shellcheck disable=SC2086
"${dpkg_root[@]}" --purge libtnt-dev python3-tarantella slurm-spank-tarantella tarantella \
  $cuda_pkg libtnt \
  >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; fail "dpkg --purge failed"; }
left=$(find "$usr" -type f 2>/dev/null | grep -v '/etc/ld.so' || true)
[ -z "$left" ] || fail "files left after dpkg --purge: $left"
echo "package_deb: OK ($(wc -w <<<"$ours") packages installed with dpkg -i into $root, used, purged)"
