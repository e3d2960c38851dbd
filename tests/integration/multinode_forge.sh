#!/usr/bin/env bash
# A rank forges hang-doctor messages and hangs (multinode_check --mode
# forge): the others must fail as in the plain hang test (multinode_kill.sh
# checks that: the verdict, within MAX_SECONDS, how many ranks) and must
# have logged that they dropped the forgeries. Every other rank is lied to,
# so a lie believed keeps the job waiting past MAX_SECONDS.
#
#   multinode_forge.sh LOG_REGEX... -- MULTINODE_KILL_ARGS...
#
# Passes when multinode_kill.sh passes and every extended regex LOG_REGEX
# matches some line of the job's output.
set -u
regexes=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    regexes+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift

out=$("$(dirname "$0")/multinode_kill.sh" "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || exit 1
for re in "${regexes[@]}"; do
    if ! printf '%s\n' "$out" | grep -Eq "$re"; then
        echo "multinode_forge: FAIL: no line of the output matches '$re'"
        exit 1
    fi
done
echo "multinode_forge: OK: the forgeries were dropped and logged"
