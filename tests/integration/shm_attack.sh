#!/usr/bin/env bash
# Another local user against a job's shared memory (issue 20, section 1).
# The unprivileged user `nobody` pre-creates, world-writable and with a
# forged header (shm_forge.c), every /dev/shm name that libtnt used to give
# the job's segment and stall board (job id and first rank's pid), then a
# real 2-rank job runs: once as root, once as the unprivileged user `daemon`.
# Each job must finish correctly: the names are random now, so the forged
# ones must not matter at all. (Before, a root job lost the race or waited
# for TNT_TIMEOUT, a forged slot size could make rank 1 write 1 TiB past its
# mapping, and the job as daemon could not start: "File exists".) A failure
# is also checked for what made it: a signal, a hang, no line naming the
# segment. No job may
# unlink or take over the attacker's files (a root job used to "remove the
# stale segment", and its launcher removed names matching its ranks' pids).
#   shm_attack.sh LAUNCHER CHECK_PROGRAM FORGE_PROGRAM
# Needs root, setpriv and the users nobody and daemon; exits 77 otherwise.
set -u
launcher=$1 check=$2 forge=$3
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null ||
   ! id nobody >/dev/null 2>&1 || ! id daemon >/dev/null 2>&1; then
  echo "shm_attack: needs root, setpriv and the users nobody and daemon; skipped"
  exit 77
fi
as_user() {
  local user=$1
  shift
  setpriv --reuid "$user" --regid "$(id -g "$user")" --clear-groups "$@"
}
if ! as_user nobody true 2>/dev/null; then
  echo "shm_attack: setpriv cannot switch to nobody here; skipped"
  exit 77
fi
tmp=$(mktemp -d /tmp/shm_attack.XXXXXX)
chmod 755 "$tmp"
fail=0
cleanup() {
  find /dev/shm -maxdepth 1 -user nobody -name 'tnt-*' -delete 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# run_job USER: starts the launcher as USER under a known pid, lets nobody
# forge the names for the next pids, then lets the job go.
run_job() {
  local user=$1 dir=$tmp/$1
  mkdir -p "$dir"
  chown "$user" "$dir"
  rm -f "$dir/pid" "$dir/go"
  # exec keeps the pid: the launcher's job id is tarantella.<this pid>.
  TMPDIR=$dir timeout -s KILL 90 setpriv --reuid "$user" --regid "$(id -g "$user")" \
    --clear-groups bash -c 'echo $$ > "$1/pid"; i=0
      while [ ! -e "$1/go" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
      shift; exec "$@"' sh "$dir" "$launcher" -n 2 -- \
    /bin/sh -c 'echo "rank pid $$"; exec "$0"' "$check" > "$dir/out" 2>&1 &
  local job=$!
  local i=0
  while [ ! -s "$dir/pid" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
  local lpid
  lpid=$(cat "$dir/pid" 2>/dev/null)
  if [ -z "$lpid" ]; then
    echo "shm_attack: the job as $user did not start" >&2
    kill -KILL $job 2>/dev/null
    fail=1
    return
  fi
  as_user nobody "$forge" "$lpid" $((lpid + 1)) $((lpid + 400)) || fail=1
  find /dev/shm -maxdepth 1 -user nobody -name 'tnt-*' | sort > "$dir/forged"
  touch "$dir/go"
  local t0=$SECONDS
  wait $job
  local rc=$? took=$((SECONDS - t0))
  cat "$dir/out"
  echo "shm_attack: job as $user exited with $rc after $took s"
  # The names are nobody's business: a job that the attacker made fail
  # (even cleanly) is a job another user could stop from starting.
  if [ "$rc" != 0 ]; then
    echo "shm_attack: job as $user failed (exit $rc) against names it does not use" >&2
    fail=1
    if [ "$rc" -ge 124 ] || [ "$took" -ge 60 ]; then
      echo "shm_attack: job as $user hung (exit $rc after $took s)" >&2
      fail=1
    fi
    if grep -qE 'signal|SIG[A-Z]+' "$dir/out"; then
      echo "shm_attack: a rank of the job as $user died of a signal" >&2
      fail=1
    fi
    if ! grep -qE 'shared-memory|/dev/shm' "$dir/out"; then
      echo "shm_attack: job as $user failed without a line that names the segment" >&2
      fail=1
    fi
  fi
  # The names of this job's ranks' pids are the ones it would have
  # touched (its first rank's "stale segment", the launcher's cleanup of its
  # ranks' pids). Only those are checked: /dev/shm and the pids are shared
  # with whatever else runs on the machine, and an older launcher finishing
  # elsewhere removes every tnt-*-<pid> of its own ranks' pids.
  local pids gone=
  pids=$(sed -n 's/^rank pid \([0-9]*\)$/\1/p' "$dir/out")
  if [ "$(printf '%s\n' $pids | grep -c .)" != 2 ]; then
    echo "shm_attack: the job as $user did not report both ranks' pids" >&2
    fail=1
  fi
  for p in $pids; do
    for f in $(grep -E -- "-$p\$" "$dir/forged"); do
      [ -e "$f" ] || gone="$gone $f"
    done
  done
  if [ -n "$gone" ]; then
    echo "shm_attack: the job as $user removed names it did not create:$gone" >&2
    fail=1
  fi
  find /dev/shm -maxdepth 1 -user nobody -name 'tnt-*' -delete
}

for user in root daemon; do
  run_job $user
done
exit $fail
