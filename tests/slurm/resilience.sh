#!/usr/bin/env bash
# Failure tests with real processes and real signals: one rank is stopped
# (SIGSTOP), killed (SIGKILL) or raises, under srun --tarantella on the test
# cluster (tests/slurm/cluster.sh) or under the tarantella launcher. Checks
# that the job ends within a limit, that every verdict names the right rank,
# and that /dev/shm holds nothing of the job afterwards.
#
#   resilience.sh CASE PYTHON RANKS_PY [LAUNCHER]
#
# CASE: srun_stop srun_stop_shared srun_kill srun_exit srun_leave srun_raise srun_save srun_usr2
#       launcher_stop launcher_kill launcher_raise
set -uo pipefail

CASE=$1 PY=$2 RANKS=$3 LAUNCHER=${4:-}
OUT=$(mktemp)
WORK=$(mktemp -d)
trap '[ -n "${KEEP_OUT:-}" ] && cp "$OUT" "$KEEP_OUT"; rm -rf "$OUT" "$WORK"' EXIT
export TNT_TIMEOUT=8 TNT_STALL_WARN=3 UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n

fail() { echo "FAIL ($CASE): $*"; echo "---- output ----"; cat "$OUT"; exit 1; }

# run LIMIT_S CMD...: runs CMD (output in $OUT), sets RC and SECONDS_TAKEN;
# a CMD still running after 120 s is killed (the test then fails on time).
run() {
    local limit=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    timeout -k 5 120 "$@" >"$OUT" 2>&1
    RC=$?
    t1=$(date +%s.%N)
    SECONDS_TAKEN=$(echo "$t1 - $t0" | bc)
    echo "$CASE: exit status $RC after ${SECONDS_TAKEN} s (limit ${limit} s)"
    if [ "$(echo "$SECONDS_TAKEN > $limit" | bc)" = 1 ]; then
        fail "took ${SECONDS_TAKEN} s, more than ${limit} s"
    fi
}

# verdicts_of R BLAMED: how many lines rank R printed that state the
# failure of rank BLAMED (libtnt's error line or the short Python line).
verdicts_of() {
    grep -cE "^tarantella(\[rank $1@[^]]*\]: error:|: rank $1 stops because of another rank:) rank $2 " "$OUT"
}

pid_of() { awk -v r="$1" '$1 == "pid" && $2 == r { print $3 }' "$OUT" | head -1; }

# Nothing of the job in /dev/shm: segment names start with the pid of a
# node's first rank (tnt-<pid>-<random>, transport/shm_name.h), and every
# rank printed its pid.
check_shm_clean() {
    local p
    for p in $(awk '$1 == "pid" { print $3 }' "$OUT"); do
        if ls /dev/shm 2>/dev/null | grep -q -- "^tnt-$p-"; then
            fail "/dev/shm still holds $(ls /dev/shm | grep -- "^tnt-$p-")"
        fi
    done
}

# Every verdict line names rank $1 with its pid, and no line blames another.
check_verdicts() {
    local rank=$1 host_re=$2 pid lines bad
    pid=$(pid_of "$rank")
    [ -n "$pid" ] || fail "rank $rank did not print its pid"
    lines=$(grep -cE "rank $rank \($host_re, pid $pid\) (has not entered|does not answer|stopped making progress)" "$OUT")
    [ "$lines" -ge "$3" ] || fail "expected at least $3 verdict lines naming rank $rank (pid $pid), found $lines"
    bad=$(grep -E "rank [0-9]+ \([^,]+, pid [0-9]+\) (has not entered|does not answer|stopped making progress)" "$OUT" |
          grep -vcE "rank $rank \($host_re, pid $pid\)")
    [ "$bad" -eq 0 ] || fail "$bad verdict line(s) blame another rank"
    grep -qE "warning: rank $rank \($host_re, pid $pid\)" "$OUT" || fail "no stall warning naming rank $rank"
}

SRUN="srun --tarantella --immediate=30"
case $CASE in
srun_stop)
    run 30 $SRUN -N 4 -n 4 "$PY" "$RANKS" stop 1
    [ "$RC" -ne 0 ] || fail "srun exited 0"
    check_verdicts 1 n2 2
    # Never twice (srun may drop the line of a rank it kills first).
    for r in 0 2 3; do
        n=$(verdicts_of "$r" 1)
        [ "$n" -le 1 ] || fail "rank $r stated the verdict $n times, expected at most once"
    done
    ;;
srun_stop_shared)
    # Two ranks per node: rank 1's node-mate reads its slot, so the verdict
    # says which collective it has not entered.
    run 30 $SRUN -N 2 -n 4 "$PY" "$RANKS" stop 1
    [ "$RC" -ne 0 ] || fail "srun exited 0"
    check_verdicts 1 n1 2
    grep -qE "rank 1 \(n1, pid [0-9]+\) has not entered (allreduce|allgather) #[0-9]+" "$OUT" ||
        fail "the verdict does not name the collective rank 1 has not entered"
    ;;
srun_kill)
    run 15 $SRUN -N 4 -n 4 "$PY" "$RANKS" kill 2
    [ "$RC" -ne 0 ] || fail "srun exited 0"
    grep -qE "task 2: Killed" "$OUT" || fail "srun does not report task 2 killed"
    ;;
srun_exit)
    # The others sleep outside libtnt: only kill-on-bad-exit, which
    # --tarantella sets for the step, ends them before their 100 s sleep.
    run 30 $SRUN -N 4 -n 4 "$PY" "$RANKS" exit 1
    [ "$RC" -ne 0 ] || fail "srun exited 0"
    grep -qE "task 1: Exited with exit code 3" "$OUT" || fail "srun does not report task 1"
    ;;
srun_leave)
    # Rank 1's program ends without an error while the others are in
    # allreduce: its tnt_finalize says goodbye, and they must fail at once
    # naming it (not after TNT_TIMEOUT, 8 s here, while rank 1 waits for
    # their goodbyes); their uncaught error then ends the step.
    run 15 $SRUN -N 4 -n 4 "$PY" "$RANKS" leave 1
    [ "$RC" -ne 0 ] || fail "srun exited 0"
    grep -q "rank 1 left the job (it called tnt_finalize" "$OUT" || fail "no error names rank 1 leaving"
    ! grep -q "TNT_TIMEOUT" "$OUT" || fail "a rank waited for TNT_TIMEOUT"
    ;;
srun_raise)
    run 20 $SRUN -N 4 -n 4 "$PY" "$RANKS" raise 1
    [ "$RC" -eq 1 ] || fail "srun exited $RC, expected 1 (the failing rank's status)"
    grep -q "uncaught RuntimeError: injected failure on rank 1" "$OUT" || fail "no abort line naming the exception"
    [ "$(grep -c '^Traceback' "$OUT")" -eq 1 ] || fail "expected exactly one traceback (the failing rank's)"
    ;;
srun_save)
    TNT_STALL_WARN=1 TNT_TIMEOUT=3 run 40 $SRUN -N 2 -n 4 "$PY" "$RANKS" save 0 "$WORK"
    [ "$RC" -eq 0 ] || fail "the job failed"
    [ "$(grep -c 'saved' "$OUT")" -eq 4 ] || fail "not every rank finished the save"
    ! grep -qiE "warning|TNT_TIMEOUT" "$OUT" || fail "a collective save triggered the hang doctor"
    ;;
srun_usr2)
    name=tnt-usr2-$$
    $SRUN -J "$name" -N 2 -n 4 "$PY" "$RANKS" usr2 0 12 >"$OUT" 2>&1 &
    srun_pid=$!
    for _ in $(seq 1 60); do
        [ "$(grep -c '^pid ' "$OUT")" -ge 4 ] && break
        sleep 0.5
    done
    sleep 2
    scancel --signal=USR2 --name="$name" || fail "scancel failed"
    timeout 60 tail --pid=$srun_pid -f /dev/null
    wait $srun_pid
    RC=$?
    [ "$RC" -eq 0 ] || fail "the job did not survive SIGUSR2 (status $RC)"
    for r in 0 1 2 3; do
        grep -qE "tarantella: rank $r \(n[12], pid [0-9]+\): (in|between collectives|no collective)" "$OUT" ||
            fail "rank $r did not say where it is"
    done
    [ "$(grep -cE '^(Current thread|Thread) 0x' "$OUT")" -ge 4 ] || fail "no Python stacks"
    [ "$(grep -c 'finished' "$OUT")" -eq 4 ] || fail "not every rank finished"
    ;;
launcher_stop)
    run 30 "$LAUNCHER" -n 4 -- "$PY" "$RANKS" stop 2
    [ "$RC" -ne 0 ] || fail "the launcher exited 0"
    check_verdicts 2 "[^,]+" 2
    # Each survivor states the verdict once: libtnt's error line on the
    # rank that reported the hang, the excepthook's line on the others.
    for r in 0 1 3; do
        n=$(verdicts_of "$r" 2)
        [ "$n" -eq 1 ] || fail "rank $r stated the verdict $n times, expected once"
    done
    ;;
launcher_kill)
    run 15 "$LAUNCHER" -n 4 -- "$PY" "$RANKS" kill 2
    [ "$RC" -eq 137 ] || fail "the launcher exited $RC, expected 137 (rank 2 killed by SIGKILL)"
    grep -q "rank 2 (pid [0-9]*) killed by signal 9" "$OUT" || fail "the launcher does not name rank 2"
    ;;
launcher_raise)
    run 20 "$LAUNCHER" -n 4 -- "$PY" "$RANKS" raise 1
    [ "$RC" -eq 1 ] || fail "the launcher exited $RC, expected 1"
    grep -q "rank 1 (pid [0-9]*) called abort with status 1: \"rank 1: uncaught RuntimeError" "$OUT" ||
        fail "the launcher's report does not name rank 1 and its exception"
    [ "$(grep -c '^Traceback' "$OUT")" -eq 1 ] || fail "expected exactly one traceback"
    ;;
*)
    echo "unknown case $CASE" >&2
    exit 2
    ;;
esac
check_shm_clean
echo "OK ($CASE)"
