#!/usr/bin/env bash
# Runs the sbatch templates (sbatch-templates/) against the test cluster:
#   templates.sh single-node-cpu|multi-node-cpu|multi-node-gpu|preemptible REPO PYTHONPATH|- CHECK
# The CPU templates are submitted with `sbatch --wait` and must train the
# digits example (python/examples/digits.py) to its accuracy threshold; when
# the Python package is not built (PYTHONPATH "-") they run the C allreduce
# check CHECK instead. Only the knobs are changed (shorter training), and the
# resources are shrunk on the command line to fit the 4 x 2-CPU cluster
# (and its 30-minute partition limit). The
# GPU template is checked with `sbatch --test-only` (the test cluster's GPUs
# are declared, not real). The preemptible template runs twice: once
# uninterrupted, once signalled mid-training (scancel --signal=USR1 --batch,
# what sbatch --signal=B:USR1 sends), after which it must back up, requeue
# itself, resume, and end with the weights of the uninterrupted run.
set -euo pipefail

NAME=$1
REPO=$2
PYPATH=$3
CHECK=$4
TEMPLATE=$REPO/sbatch-templates/$NAME.sbatch
. "$(dirname "$0")/test_lib.sh"
tnt_test_workdir tnt-templates
unset SLURM_JOB_ID SLURM_JOBID SLURM_MPI_TYPE OMP_NUM_THREADS

fail() { echo "FAIL: $*" >&2; exit 1; }
[ -f "$TEMPLATE" ] || fail "$TEMPLATE does not exist"

# The knobs must be where the header says they are.
for knob in PYTHON SCRIPT SCRIPT_ARGS; do
    grep -q "^$knob=" "$TEMPLATE" || fail "$NAME: knob $knob missing"
done
grep -q '^#SBATCH --tarantella' "$TEMPLATE" || fail "$NAME: no #SBATCH --tarantella line"
# What every template offers: account placeholder, an environment block and
# a sized --cpus-per-task.
grep -q '^##SBATCH --account=YOUR_ACCOUNT' "$TEMPLATE" || fail "$NAME: no --account placeholder"
grep -q '^# ---- environment' "$TEMPLATE" || fail "$NAME: no environment block"
grep -Eq '^#SBATCH --cpus-per-task=[0-9]+' "$TEMPLATE" || fail "$NAME: no --cpus-per-task"
# Bash older than 4.4 (still the default on some clusters): no expansion of
# a possibly empty array under set -u, no mapfile/readarray, no ${x@Q}.
! grep -nvE '^[[:space:]]*#' "$TEMPLATE" |
    grep -E '"\$\{[A-Za-z_]+\[@\]\}"|mapfile|readarray|\$\{[A-Za-z_]+@[QEPAa]\}' ||
    fail "$NAME: uses bash features newer than 4.3 (see above)"
bash -n "$TEMPLATE" || fail "$NAME: syntax error"

if [ "$NAME" = preemptible ]; then
    [ "$PYPATH" != "-" ] || { echo "SKIPPED: preemptible needs the Python package"; exit 77; }
    grep -q '^#SBATCH --requeue' "$TEMPLATE" || fail "$NAME: no #SBATCH --requeue"
    grep -q '^#SBATCH --signal=B:USR1@' "$TEMPLATE" || fail "$NAME: no #SBATCH --signal=B:USR1@"
    export PYTHONPATH=$PYPATH
    # 2 ranks on 2 nodes of 2 shared CPUs: one OpenMP thread per rank.
    export OMP_NUM_THREADS=1
    cd "$REPO"
    job() { # job NAME: this run's copy of the template, writing to $WORK/NAME.*
        sed -e "s|^SCRIPT_ARGS=.*|SCRIPT_ARGS=\"--epochs 12 --verbose 2 --save-weights $WORK/$1.pt\"|" \
            -e "s|^BACKUP_DIR=.*|BACKUP_DIR=$WORK/$1.backup|" "$TEMPLATE" > "$WORK/$1.sbatch"
    }
    state() { scontrol show job "$1" -o | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
    restarts() { scontrol show job "$1" -o | grep -o 'Restarts=[0-9]*' | cut -d= -f2; }

    job reference
    timeout -k 5 150 sbatch --wait --time=10 --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
        -o "$WORK/reference.out" "$WORK/reference.sbatch" || fail "reference run: status $?"

    job preempted
    jid=$(sbatch --parsable --time=10 --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 -o "$WORK/preempted.out" \
        "$WORK/preempted.sbatch") || fail "sbatch failed"
    deadline=$((SECONDS + 120))
    until grep -q '^Epoch 4/12' "$WORK/preempted.out" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || fail "job $jid did not reach epoch 4: $(cat "$WORK/preempted.out")"
        sleep 0.2
    done
    # What sbatch --signal=B:USR1@T sends T seconds before the time limit.
    scancel --signal=USR1 --batch "$jid"
    # The script requeues the job; Slurm holds a requeued job for about two
    # minutes (Reason=BeginTime), which the test shortens, but only once the
    # first run has left every node (a node still cleaning up the job's
    # first run fails the launch of its second). Only a second run's output
    # line counts as the requeued job running.
    # "Left every node": all nodes idle for 2 s in a row (a node reports idle
    # a moment before its slurmd has let go of the job's last step).
    deadline=$((SECONDS + 240))
    idle_since=
    until grep -q "^job $jid (run 2)" "$WORK/preempted.out"; do
        [ $SECONDS -lt $deadline ] || fail "job $jid did not run again: $(scontrol show job "$jid")"
        if [ "$(sinfo -h -o %T | sort -u)" = idle ]; then
            idle_since=${idle_since:-$SECONDS}
        else
            idle_since=
        fi
        if scontrol show job "$jid" -o | grep -q 'JobState=PENDING.*Reason=BeginTime' &&
            [ -n "$idle_since" ] && [ $((SECONDS - idle_since)) -ge 2 ]; then
            scontrol update JobId="$jid" StartTime=now || true
        fi
        sleep 0.5
    done
    [ "$(restarts "$jid")" = 1 ] || fail "job $jid: Restarts=$(restarts "$jid"), expected 1"
    deadline=$((SECONDS + 150))
    until case $(state "$jid") in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL) true ;; *) false ;; esac do
        [ $SECONDS -lt $deadline ] || fail "job $jid did not finish after its requeue: $(state "$jid")"
        sleep 1
    done
    cat "$WORK/preempted.out" >&2
    [ "$(state "$jid")" = COMPLETED ] || fail "job $jid ended $(state "$jid")"
    grep -q '^tarantella: preempted by SIGUSR1 at epoch' "$WORK/preempted.out" || fail "no backup on the signal"
    grep -q '(status 75); requeueing' "$WORK/preempted.out" || fail "the script did not requeue"
    grep -q '^tarantella: resuming from the backup' "$WORK/preempted.out" || fail "the second run did not resume"
    grep -Eq '^Test accuracy: (9[5-9]|100)\.' "$WORK/preempted.out" || fail "no final accuracy line"
    [ ! -e "$WORK/preempted.backup" ] || fail "the backup was not deleted after the finished run"
    /usr/bin/python3 - "$WORK/reference.pt" "$WORK/preempted.pt" <<'EOF'
import sys
import torch
ref, got = (torch.load(p, weights_only=True) for p in sys.argv[1:3])
assert ref.keys() == got.keys()
for k in ref:
    torch.testing.assert_close(got[k], ref[k], rtol=1e-5, atol=1e-6, msg=k)
print("preemptible: the resumed run's weights equal the uninterrupted run's (%d tensors)" % len(ref))
EOF
    echo "PASS: $NAME"
    exit 0
fi

if [ "$PYPATH" != "-" ]; then
    export PYTHONPATH=$PYPATH
    sed -e 's|^SCRIPT_ARGS=.*|SCRIPT_ARGS="--epochs 8 --verbose 0"|' "$TEMPLATE" > "$WORK/job.sbatch"
    expect='^Test accuracy: (9[5-9]|100)\.'
else
    sed -e "s|^PYTHON=.*|PYTHON=/usr/bin/env|" -e "s|^SCRIPT=.*|SCRIPT=$CHECK|" \
        -e 's|^SCRIPT_ARGS=.*|SCRIPT_ARGS=|' "$TEMPLATE" > "$WORK/job.sbatch"
    expect='^slurm_allreduce_check: PASSED'
fi

cd "$REPO" # the templates name the script relative to the submit directory
case $NAME in
single-node-cpu)
    # The template sizes --cpus-per-task for a real node; these have 2 CPUs.
    timeout -k 5 150 sbatch --wait --time=10 --cpus-per-task=1 -o "$WORK/job.out" \
        "$WORK/job.sbatch" || rc=$?
    ;;
multi-node-cpu)
    # 2 nodes x 1 rank here; this cluster's "nodes" share 2 CPUs, so one
    # OpenMP thread per rank (a user's OMP_NUM_THREADS is kept by the plugin).
    OMP_NUM_THREADS=1 timeout -k 5 150 sbatch --wait --time=10 --nodes=2 --ntasks-per-node=1 \
        --cpus-per-task=1 -o "$WORK/job.out" "$WORK/job.sbatch" || rc=$?
    ;;
multi-node-gpu)
    out=$(timeout -k 5 30 sbatch --test-only --time=10 --cpus-per-task=1 "$WORK/job.sbatch" 2>&1) ||
        fail "sbatch --test-only: $out"
    echo "$out"
    echo "$out" | grep -Eq 'to start at .* using [0-9]+ processors on nodes' || fail "unexpected: $out"
    echo "PASS: $NAME"
    exit 0
    ;;
*)
    fail "unknown template $NAME"
    ;;
esac
cat "$WORK/job.out" >&2 || true
[ "${rc:-0}" -eq 0 ] || fail "$NAME: sbatch --wait returned ${rc}"
grep -Eq "$expect" "$WORK/job.out" || fail "$NAME: no line matching '$expect'"
echo "PASS: $NAME"
