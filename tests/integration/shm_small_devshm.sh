#!/usr/bin/env bash
# A /dev/shm too small for the segment (Docker's default is 64 MiB; here
# 4 MiB, in a private mount namespace): tnt_init must fail on every rank with
# the size needed and the fix, never SIGBUS later; with a smaller
# TNT_SHM_STAGING_KB the same job must pass, large allreduce included.
#   shm_small_devshm.sh LAUNCHER CHECK_PROGRAM
# Needs root (unshare -m, mount); exits 77 (skipped) otherwise.
set -u
launcher=$1 check=$2
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  echo "shm_small_devshm: needs root and unshare -m; skipped"
  exit 77
fi
small() {
  unshare -m sh -c 'mount -t tmpfs -o size=4m tmpfs /dev/shm && exec "$@"' sh "$@"
}
fail=0

out=$(small timeout 60 "$launcher" -n 2 -- "$check" --large 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" = 0 ] || [ "$rc" -ge 124 ]; then
  echo "shm_small_devshm: default staging exited with $rc; expected tnt_init to fail" >&2
  fail=1
fi
# Each rank's own line: 2 x 4 MiB of staging, 2 x 512 KiB of eager rings, a
# page of control blocks and a page for the hang doctor's board (the launcher may stop the second rank before it
# prints, once the first has failed); never a SIGBUS.
n=$(printf '%s\n' "$out" | grep -cE '^collectives_check: tnt_init: rank [01]: .*needs 9224 KiB in /dev/shm.*--shm-size.*TNT_SHM_STAGING_KB')
if [ "$n" -lt 1 ]; then
  echo "shm_small_devshm: no rank reported the size and the fix" >&2
  fail=1
fi
if printf '%s\n' "$out" | grep -qE 'SIGBUS|signal 7'; then
  echo "shm_small_devshm: a rank died of SIGBUS" >&2
  fail=1
fi

out=$(TNT_SHM_STAGING_KB=512 small timeout 120 "$launcher" -n 2 -- "$check" --large 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" != 0 ]; then
  echo "shm_small_devshm: TNT_SHM_STAGING_KB=512 in 4 MiB exited with $rc" >&2
  fail=1
fi
exit $fail
