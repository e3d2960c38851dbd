#!/usr/bin/env bash
# gpu_double_fault.sh MAX_SECONDS VERDICT_REGEX OUTPUT_REGEX... -- COMMAND...
# Runs a job with a fault injected through the GPU test double and checks
# that it ends as the design says: a non-zero exit within MAX_SECONDS, its
# output matching every OUTPUT_REGEX, exactly one line matching VERDICT_REGEX (the
# launcher's verdict, stated once), and no new /dev/shm/tnt-* segment left
# (libtnt's or the NCCL double's).
max=$1 verdict=$2
shift 2
wants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    wants+=("$1")
    shift
done
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
before=$(ls /dev/shm | grep '^tnt-' | sort)
start=$(date +%s%N)
"$@" >"$out" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
elapsed=$(printf "%d.%03d" $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))
sleep 0.5
after=$(ls /dev/shm | grep '^tnt-' | sort)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
cat "$out"
verdicts=$(grep -cE "$verdict" "$out")
echo "gpu_double_fault: exit status $rc after ${elapsed} s (limit ${max} s); verdict lines: $verdicts; new segments left: ${left:-none}"
ok=1
[ "$rc" -ne 0 ] || { echo "FAIL: the job succeeded"; ok=0; }
[ "$elapsed_ms" -le $((max * 1000)) ] || { echo "FAIL: took longer than ${max} s"; ok=0; }
for want in "${wants[@]}"; do
    grep -qE "$want" "$out" || { echo "FAIL: no output line matches '$want'"; ok=0; }
done
[ "$verdicts" -eq 1 ] || { echo "FAIL: $verdicts lines match '$verdict', expected 1"; ok=0; }
[ -z "$left" ] || { echo "FAIL: segments left behind: $left"; ok=0; }
[ $ok = 1 ]
