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
# Under srun a survivor also counts when srun reports its exit status 3
# (the program's status for a failed collective) and the job ended within
# MAX_SECONDS of its start plus srun's own start-up: once a task is killed,
# srun stops forwarding output that is still in flight, so a survivor's
# line can be lost while its exit status never is.
set -u
killed_node=$1 min_reports=$2 max_seconds=$3
shift 3
pattern=""
if [ "${1:-}" != "--" ]; then
    pattern=$1
    shift
fi
[ "${1:-}" = "--" ] && shift

t0=$(date +%s)
out=$("$@" 2>&1)
rc=$?
wall=$(( $(date +%s) - t0 ))
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
# srun start-up on the oversubscribed test cluster: up to 10 s.
printf '%s\n' "$out" | awk -v killed="$killed_node" -v min="$min_reports" -v max="$max_seconds" \
    -v wall="$wall" -v startup=10 '
    /allreduce failed after/ {
        node = $0; sub(/.*\(node /, "", node); sub(/\).*/, "", node)
        t = $0; sub(/.*failed after /, "", t); sub(/ s .*/, "", t)
        r = $0; sub(/^rank /, "", r); sub(/ .*/, "", r)
        if (t + 0 >= max) { printf "multinode_kill: FAIL: rank took %s s (limit %s)\n", t, max; bad = 1 }
        if (node != killed && !(r in seen)) { seen[r] = 1; other++ }
    }
    # "srun: error: n3: task 2: Exited with exit code 3" or "tasks 0-1: ..."
    /^srun: error: n[0-9]+: tasks? [0-9,-]+: Exited with exit code 3$/ {
        host = $3; sub(/:$/, "", host); sub(/^n/, "", host)
        if (host - 1 == killed) next
        list = $5; sub(/:$/, "", list)
        n = split(list, parts, ",")
        for (i = 1; i <= n; i++) {
            lo = parts[i]; hi = parts[i]
            if (index(parts[i], "-")) { split(parts[i], ab, "-"); lo = ab[1]; hi = ab[2] }
            for (k = lo + 0; k <= hi + 0; k++) exited[k] = 1
        }
    }
    END {
        if (wall <= max + startup) {
            for (k in exited) if (!(k in seen)) { seen[k] = 1; other++ }
        }
        if (other < min) { printf "multinode_kill: FAIL: %d ranks on other nodes reported the error, expected >= %d\n", other, min; bad = 1 }
        if (!bad) printf "multinode_kill: OK: %d ranks on other nodes failed fast\n", other
        exit bad
    }'
