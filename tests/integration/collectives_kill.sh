#!/usr/bin/env bash
# Runs "$@" (a launcher starting collectives_check --kill-rank R) and checks
# that the job fails, within 20 s, and leaves no new /dev/shm/tnt-* segment.
before=$(ls /dev/shm | grep '^tnt-' | sort)
start=$(date +%s)
"$@"
rc=$?
elapsed=$(( $(date +%s) - start ))
sleep 0.5
after=$(ls /dev/shm | grep '^tnt-' | sort)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
echo "collectives_kill: exit status $rc after ${elapsed} s; new segments left: ${left:-none}"
[ "$rc" -ne 0 ] && [ "$elapsed" -le 20 ] && [ -z "$left" ]
