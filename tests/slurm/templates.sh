#!/usr/bin/env bash
# Runs the sbatch templates (sbatch-templates/) against the test cluster:
#   templates.sh single-node-cpu|multi-node-cpu|multi-node-gpu REPO PYTHONPATH|- CHECK
# The CPU templates are submitted with `sbatch --wait` and must train the
# digits example (python/examples/digits.py) to its accuracy threshold; when
# the Python package is not built (PYTHONPATH "-") they run the C allreduce
# check CHECK instead. Only the knobs are changed (shorter training), and the
# resources are shrunk on the command line to fit the 4 x 2-CPU cluster
# (and its 30-minute partition limit). The
# GPU template is checked with `sbatch --test-only` (the test cluster's GPUs
# are declared, not real).
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
