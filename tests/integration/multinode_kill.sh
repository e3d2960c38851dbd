#!/usr/bin/env bash
# A rank killed on one node: the ranks on the other nodes must return an
# error from their collective within seconds (not after TNT_TIMEOUT).
#
#   multinode_kill.sh KILLED_NODE MIN_REPORTS MAX_SECONDS [PATTERN] -- COMMAND...
#
# COMMAND runs multinode_check --mode kill; each survivor prints
#   "rank R (node N): allreduce failed after T s with ...".
# Passes when the job fails, at least MIN_REPORTS survivors on nodes other
# than KILLED_NODE report an error, every reported T is below MAX_SECONDS,
# and (if given) some error line matches the extended regex PATTERN.
set -u
killed_node=$1 min_reports=$2 max_seconds=$3
shift 3
pattern=""
if [ "${1:-}" != "--" ]; then
    pattern=$1
    shift
fi
[ "${1:-}" = "--" ] && shift

out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -eq 0 ]; then
    echo "multinode_kill: FAIL: the job exited 0 although a rank was killed"
    exit 1
fi
if [ -n "$pattern" ] && ! printf '%s\n' "$out" | grep "allreduce failed after" | grep -Eq "$pattern"; then
    echo "multinode_kill: FAIL: no error line matches '$pattern'"
    exit 1
fi
if printf '%s\n' "$out" | grep -q "no error although"; then
    echo "multinode_kill: FAIL: a rank finished its collectives without noticing"
    exit 1
fi
printf '%s\n' "$out" | awk -v killed="$killed_node" -v min="$min_reports" -v max="$max_seconds" '
    /allreduce failed after/ {
        node = $0; sub(/.*\(node /, "", node); sub(/\).*/, "", node)
        t = $0; sub(/.*failed after /, "", t); sub(/ s .*/, "", t)
        if (t + 0 >= max) { printf "multinode_kill: FAIL: rank took %s s (limit %s)\n", t, max; bad = 1 }
        if (node != killed) other++
    }
    END {
        if (other < min) { printf "multinode_kill: FAIL: %d ranks on other nodes reported the error, expected >= %d\n", other, min; bad = 1 }
        if (!bad) printf "multinode_kill: OK: %d ranks on other nodes failed fast\n", other
        exit bad
    }'
