#!/usr/bin/env bash
# End-to-end tests of spank_tarantella.so against the test cluster
# (tests/slurm/cluster.sh; run through `cluster.sh run`, so SLURM_CONF is set).
#   spank_e2e.sh CASE CHECK_BINARY [CLUSTER_SH PLUGIN | PYTHON RANKS_DIR | PYTHON PKG_DIR]
# CHECK_BINARY is tests/slurm/slurm_allreduce_check; the site_defaults case
# starts a cluster of its own with CLUSTER_SH and PLUGIN; the ddp case runs
# RANKS_DIR/ddp_unmodified.py (tests/python/ranks) with PYTHON; the
# pythonpath case runs `PYTHON -m tarantella.smoke` and expects PKG_DIR on
# PYTHONPATH. Every srun/sbatch/salloc gets --immediate or a time limit and
# runs under timeout: a job that cannot start fails the test instead of
# waiting.
set -euo pipefail

CASE=$1
CHECK=$2
. "$(dirname "$0")/test_lib.sh"
tnt_test_workdir tnt-spank-e2e
cd "$WORK"

# Fresh environment for every command: nothing from a surrounding job.
unset SLURM_JOB_ID SLURM_JOBID SLURM_MPI_TYPE SLURM_SPANK__SLURM_SPANK_OPTION_tarantella_tarantella \
      OMP_NUM_THREADS TNT_PIN TNT_LOG_LEVEL TNT_FUSION_THRESHOLD_KB TNT_LOG_ON_ALL_DEVICES \
      TNT_OUTPUT_ON_ALL_DEVICES CUDA_VISIBLE_DEVICES \
      RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs a command with a hard limit, capturing output into $1.
run() {
    local out=$1; shift
    echo "+ $*" >&2
    set +e
    timeout -k 5 60 "$@" >"$out" 2>&1
    local rc=$?
    set -e
    sed 's/^/  | /' "$out" >&2
    return $rc
}

expect() { # expect FILE REGEX [COUNT]
    local n
    n=$(grep -E -c -- "$2" "$1" || true)
    if [ $# -ge 3 ]; then
        [ "$n" -eq "$3" ] || fail "expected $3 lines matching '$2', got $n"
    else
        [ "$n" -ge 1 ] || fail "no line matches '$2'"
    fi
}

reject() { # reject FILE REGEX
    if grep -E -q -- "$2" "$1"; then fail "unexpected line matching '$2'"; fi
}

# Every "affinity: rank R cpus X" line must agree with the plugin's verbose
# "tarantella: rank R ... cpus X (n)" line for the same rank.
affinity_matches_verbose() {
    local out=$1 ranks=$2 r want got
    for r in $(seq 0 $((ranks - 1))); do
        want=$(sed -n "s/^tarantella: rank $r local .*: cpus \([0-9,-]*\) (.*/\1/p" "$out")
        got=$(sed -n "s/^affinity: rank $r cpus \(.*\)$/\1/p" "$out")
        [ -n "$want" ] || fail "rank $r printed no verbose line"
        [ "$want" = "$got" ] || fail "rank $r: plugin says cpus '$want', /proc/self/status says '$got'"
    done
}

# ddp_matches_serial PYTHON RANKS_DIR DDP.npz: the weights DDP wrote equal
# a serial run's at the same global batch, to float tolerance.
ddp_matches_serial() {
    OMP_NUM_THREADS=1 timeout 120 "$1" "$2/ddp_unmodified.py" --serial "$WORK/serial.npz" ||
        fail "serial reference failed"
    "$1" - "$3" "$WORK/serial.npz" <<'PY' || fail "DDP weights differ from the serial run"
import sys
import numpy as np
got, ref = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(got.files) == sorted(ref.files), (got.files, ref.files)
for name in ref.files:
    np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
print("ddp: %d tensors equal the serial run's" % len(ref.files))
PY
}

case $CASE in
allreduce)
    # 4 nodes x 2 tasks; MpiDefault=none, so this passes only if
    # --tarantella switched the step to PMIx.
    run out srun --tarantella -N 4 -n 8 --immediate=30 -t 2 "$CHECK" --expect-size 8 \
        || fail "srun failed"
    expect out '^slurm_allreduce_check: PASSED on 8 ranks' 1
    expect out '^check: rank [0-7] size 8 local [01]/2 node [0-3]/4' 8
    # Uneven and cyclic: 3 + 2 ranks, each node's ranks non-contiguous.
    run out srun --tarantella -N 2 -n 5 -m cyclic --overcommit --immediate=30 -t 2 \
        "$CHECK" --expect-size 5 || fail "srun -m cyclic failed"
    expect out '^slurm_allreduce_check: PASSED on 5 ranks' 1
    expect out '^check: rank [024] size 5 local [0-2]/3 node 0/2' 3
    expect out '^check: rank [13] size 5 local [01]/2 node 1/2' 2
    ;;
pin_core)
    # Two tasks per node, pin=core: local rank 0 on CPU 0, 1 on CPU 1 (each
    # node here has CPUs 0-1), and what the plugin printed is what the task
    # has.
    run out srun --tarantella=pin=core,verbose -N 2 -n 4 --immediate=30 -t 2 \
        "$CHECK" --affinity || fail "srun failed"
    expect out '^slurm_allreduce_check: PASSED' 1
    expect out '^tarantella: rank [0-3] local [01]/2 node n[1-4] host .*: cpus [01] \(1\), numa .*pin=core' 4
    expect out '^tarantella: rank [0-3] local 0/2 .*: cpus 0 \(1\)' 2
    expect out '^tarantella: rank [0-3] local 1/2 .*: cpus 1 \(1\)' 2
    affinity_matches_verbose out 4
    # pin=socket: one socket per node here, so both tasks get CPUs 0-1;
    # pin=none leaves the task's whole set.
    run out srun --tarantella=pin=socket,verbose -N 1 -n 2 --immediate=30 -t 2 \
        "$CHECK" --affinity || fail "srun pin=socket failed"
    expect out '^tarantella: rank [01] .*cpus 0-1 \(2\).*pin=socket' 2
    affinity_matches_verbose out 2
    run out srun --tarantella=pin=none,verbose -N 1 -n 2 --immediate=30 -t 2 \
        "$CHECK" --affinity || fail "srun pin=none failed"
    affinity_matches_verbose out 2
    # pin-memory: the task's memory policy is a strict bind to its node(s).
    run out srun --tarantella=pin=core,pin-memory -N 1 -n 1 --immediate=30 -t 2 \
        sh -c 'head -n 1 /proc/self/numa_maps' || fail "srun pin-memory failed"
    expect out ' bind:[0-9]'
    ;;
env)
    # Sub-options become TNT_* variables; OMP_NUM_THREADS follows the CPUs
    # of the task unless the user set it.
    run out srun --tarantella=pin=core,fusion=64,log=debug,log-all,output-all -N 1 -n 2 \
        --immediate=30 -t 2 bash -c 'echo "env: $SLURM_PROCID pin=$TNT_PIN fusion=$TNT_FUSION_THRESHOLD_KB log=$TNT_LOG_LEVEL logall=$TNT_LOG_ON_ALL_DEVICES outall=$TNT_OUTPUT_ON_ALL_DEVICES omp=$OMP_NUM_THREADS mpi=$SLURM_MPI_TYPE"' \
        || fail "srun failed"
    expect out '^env: [01] pin=core fusion=64 log=debug logall=1 outall=1 omp=1 mpi=pmix' 2
    OMP_NUM_THREADS=3 run out srun --tarantella -N 1 -n 1 --immediate=30 -t 2 \
        bash -c 'echo "env: omp=$OMP_NUM_THREADS pin=$TNT_PIN"' || fail "srun failed"
    expect out '^env: omp=3 pin=auto$' 1
    # An abbreviation getopt accepts selects PMIx too.
    run out srun --taran=log=info -N 1 -n 1 --immediate=30 -t 2 \
        bash -c 'echo "env: mpi=$SLURM_MPI_TYPE log=$TNT_LOG_LEVEL"' || fail "srun --taran failed"
    expect out '^env: mpi=pmix log=info$' 1
    # no-gpu hides the GPUs.
    CUDA_VISIBLE_DEVICES=0,1 run out srun --tarantella=no-gpu -N 1 -n 1 --immediate=30 -t 2 \
        bash -c 'echo "env: cuda=[$CUDA_VISIBLE_DEVICES]"' || fail "srun failed"
    expect out '^env: cuda=\[\]$' 1
    ;;
torch_env)
    # What torchrun sets (docs/torch-distributed.md), exactly: 2 nodes x 2
    # tasks. The first node n1 is no host name here, so MASTER_ADDR is its
    # NodeAddr (127.0.0.1) from slurmctld; MASTER_PORT is the built-in range's
    # 29500 + (job id * 31 + step id) % 1000, the same on every task.
    show='echo "torch: $SLURM_JOB_ID.$SLURM_STEP_ID $SLURM_PROCID RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT"'
    run out srun --tarantella -N 2 -n 4 --immediate=30 -t 2 bash -c "$show" || fail "srun failed"
    ids=$(sed -n 's/^torch: \([0-9]*\)\.\([0-9]*\) .*/\1 \2/p' out | sort -u)
    [ "$(echo "$ids" | wc -l)" -eq 1 ] || fail "tasks disagree on the job and step: $ids"
    port=$(( 29500 + ($(echo "$ids" | cut -d' ' -f1) * 31 + $(echo "$ids" | cut -d' ' -f2)) % 1000 ))
    for want in '0 RANK=0 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=0' \
                '1 RANK=1 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=0' \
                '2 RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 GROUP_RANK=1' \
                '3 RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 GROUP_RANK=1'; do
        expect out "^torch: [0-9]+\.[0-9]+ $want MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=$port\$" 1
    done
    # What the user set is never overwritten (srun passes it to every task).
    MASTER_PORT=29999 MASTER_ADDR=localhost RANK=7 run out srun --tarantella -N 2 -n 2 \
        --immediate=30 -t 2 bash -c "$show" || fail "srun with user values failed"
    expect out '^torch: [0-9.]+ [01] RANK=7 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=[01] MASTER_ADDR=localhost MASTER_PORT=29999$' 2
    # Without --tarantella nothing is set.
    run out srun -N 1 -n 1 --immediate=30 -t 2 bash -c "$show" || fail "plain srun failed"
    expect out '^torch: [0-9.]+ 0 RANK= WORLD_SIZE= LOCAL_RANK= LOCAL_WORLD_SIZE= GROUP_RANK= MASTER_ADDR= MASTER_PORT=$' 1
    ;;
ddp)
    # An unmodified DDP script (init_process_group("gloo"), env://) on
    # 2 nodes x 2 tasks ends with the weights of a serial run at the same
    # global batch; no torchrun warning on the way.
    PYTHON=$3
    RANKS_DIR=$4
    "$PYTHON" -c 'import torch' 2>/dev/null || { echo "SKIP: $PYTHON has no torch"; exit 77; }
    OMP_NUM_THREADS=1 run out srun --tarantella -N 2 -n 4 --immediate=30 -t 3 \
        "$PYTHON" "$RANKS_DIR/ddp_unmodified.py" "$WORK/ddp.npz" || fail "DDP under srun failed"
    expect out '^ddp_unmodified: rank 0 of 4 wrote' 1
    reject out 'torchrun|singleton|Traceback'
    ddp_matches_serial "$PYTHON" "$RANKS_DIR" "$WORK/ddp.npz"
    ;;
ddp_tnt)
    # The same script on Tarantella's tnt backend (BACKEND=tnt: it imports
    # tarantella, which registers "tnt"): each rank's process group is a
    # libtnt communicator bootstrapped from torch's env:// store.
    PYTHON=$3
    RANKS_DIR=$4
    export PYTHONPATH=$5
    "$PYTHON" -c 'import torch' 2>/dev/null || { echo "SKIP: $PYTHON has no torch"; exit 77; }
    "$PYTHON" -c 'import tarantella.torch_backend as b; assert b.available()' 2>/dev/null ||
        { echo "SKIP: the tnt backend (tarantella._tnt_torch) is not built"; exit 77; }
    BACKEND=tnt OMP_NUM_THREADS=1 run out srun --tarantella -N 2 -n 4 --immediate=30 -t 3 \
        "$PYTHON" "$RANKS_DIR/ddp_unmodified.py" "$WORK/ddp.npz" || fail "DDP on tnt under srun failed"
    expect out '^ddp_unmodified: rank 0 of 4 wrote .* \(backend tnt\)$' 1
    reject out 'Traceback'
    ddp_matches_serial "$PYTHON" "$RANKS_DIR" "$WORK/ddp.npz"
    ;;
pythonpath)
    # A user trying it from a build tree, without PYTHONPATH: the plugin puts
    # the package it was built with (PKG_DIR, build/python) first on the
    # tasks' PYTHONPATH, as the launcher does, so the smoke test imports
    # tarantella on both nodes; the user's entries stay after it; a step
    # without --tarantella gets nothing.
    PYTHON=$3
    PKG_DIR=$(realpath "$4")
    unset PYTHONPATH
    if "$PYTHON" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("tarantella") is None)'; then
        echo "SKIP: $PYTHON finds tarantella without PYTHONPATH (installed): nothing to add"
        exit 77
    fi
    OMP_NUM_THREADS=1 run out srun --tarantella -N 2 --ntasks-per-node=1 --immediate=30 -t 2 \
        "$PYTHON" -m tarantella.smoke --expect-size 2 || fail "the smoke test without PYTHONPATH failed"
    expect out 'smoke test passed \(2 ranks\)' 1
    reject out 'No module named'
    PYTHONPATH=/tnt-user-a:/tnt-user-b run out srun --tarantella -N 1 -n 1 --immediate=30 -t 2 \
        printenv PYTHONPATH || fail "printenv failed"
    expect out "^$PKG_DIR:/tnt-user-a:/tnt-user-b\$" 1
    run out srun -N 1 -n 1 --immediate=30 -t 2 bash -c 'echo "pythonpath=${PYTHONPATH-unset}"' ||
        fail "srun without --tarantella failed"
    expect out '^pythonpath=unset$' 1
    ;;
cpus_hint)
    # srun's default --cpus-per-task=1 warns only when it leaves a rank one
    # CPU of a node that has more. This cluster runs TaskPlugin=task/none:
    # nothing binds the task, so a rank alone on a node (each has 2 CPUs)
    # computes with both, and the plugin must not claim it has 1 (it used to
    # print "each of the 1 rank here has 1 CPU" next to OMP_NUM_THREADS=2).
    # The warning itself, for a task confined to one CPU, is covered by
    # unit.test_spank_host (test_remote_cpu_hint_only_for_one_cpu).
    hint='tarantella: warning: .*--cpus-per-task'
    run out srun --tarantella -N 1 -n 1 --immediate=30 -t 2 \
        bash -c 'echo "env: omp=$OMP_NUM_THREADS"' || fail "srun failed"
    expect out "$hint" 0
    expect out '^env: omp=2$' 1
    run out srun --tarantella -N 2 -n 2 --immediate=30 -t 2 "$CHECK" || fail "srun -N 2 failed"
    expect out "$hint" 0
    # Sized right, or a CPU per rank already, or OMP_NUM_THREADS chosen: quiet.
    run out srun --tarantella -N 1 -n 1 -c 2 --immediate=30 -t 2 "$CHECK" || fail "srun -c 2 failed"
    expect out "$hint" 0
    run out srun --tarantella -N 1 -n 2 --immediate=30 -t 2 "$CHECK" || fail "srun -n 2 failed"
    expect out "$hint" 0
    OMP_NUM_THREADS=1 run out srun --tarantella -N 1 -n 1 --immediate=30 -t 2 "$CHECK" ||
        fail "srun with OMP_NUM_THREADS failed"
    expect out "$hint" 0
    ;;
bad_values)
    # Rejected by srun before anything is allocated or launched; the message
    # names the bad value and the valid ones.
    marker=$WORK/launched
    for spec in 'pin=bogus|invalid value .bogus. for pin; valid: none, socket, numa, core, auto' \
                'fusion=lots|invalid value .lots. for fusion; valid: an integer 0\.\.' \
                'log=loud|invalid value .loud. for log; valid: error, warn, info, debug, trace' \
                'colour=red|unknown sub-option .colour.; valid: pin=MODE' \
                'verbose=maybe|invalid value .maybe. for verbose'; do
        opt=${spec%%|*}
        msg=${spec#*|}
        if run out srun --tarantella="$opt" -N 1 -n 1 --immediate=30 -t 1 touch "$marker"; then
            fail "srun --tarantella=$opt succeeded"
        fi
        expect out "error: tarantella: --tarantella=$opt: $msg"
        [ ! -e "$marker" ] || fail "--tarantella=$opt launched the step"
        reject out 'job [0-9]+ queued|Granted job allocation'
    done
    # The same checks in sbatch and salloc, before submission.
    printf '#!/bin/sh\ntouch %s\n' "$marker" > job.sh
    if run out sbatch --tarantella=pin=sideways -N 1 -t 1 job.sh; then fail "sbatch accepted pin=sideways"; fi
    expect out 'tarantella: --tarantella=pin=sideways: invalid value .sideways. for pin'
    reject out 'Submitted batch job'
    if run out salloc --tarantella=fusion=-1 -N 1 -t 1 --immediate=30 true; then fail "salloc accepted fusion=-1"; fi
    expect out 'invalid value .-1. for fusion'
    reject out 'Granted job allocation'
    # A step that asks for another MPI plugin fails fast, naming the fixes.
    if run out srun --tarantella --mpi=none -N 1 -n 1 --immediate=30 -t 1 touch "$marker"; then
        fail "srun --tarantella --mpi=none succeeded"
    fi
    expect out 'tarantella: this step would start with --mpi=none.*--mpi=pmix.*MpiDefault=pmix'
    [ ! -e "$marker" ] || fail "--mpi=none step was launched"
    ;;
help)
    for cmd in srun sbatch salloc; do
        run out "$cmd" --help || fail "$cmd --help failed"
        expect out '^ +--tarantella(=| )\[KEY=VALUE,\.\.\.\]'
    done
    for cmd in srun sbatch salloc; do
        # sbatch reads its script before the options: give it a real one.
        printf '#!/bin/sh\ntrue\n' > job.sh
        run out "$cmd" --tarantella=help "$([ "$cmd" = sbatch ] && echo job.sh || echo true)" \
            || fail "$cmd --tarantella=help failed"
        expect out '^  pin=MODE +CPU pinning per task: none, socket, numa, core, auto' 1
        for key in pin-memory fusion=KB log=LEVEL log-all output-all no-gpu verbose; do
            expect out "^  $key " 1
        done
        reject out 'Granted job allocation|Submitted batch job'
    done
    ;;
sbatch_option)
    # sbatch --tarantella=... reaches the steps of the job; srun inside has
    # no option of its own.
    cat > job.sh <<EOF
#!/bin/bash
srun "$CHECK" --expect-size 4 --affinity
EOF
    run out sbatch --wait --tarantella=pin=core,verbose -N 2 -n 4 -t 2 \
        -o "$WORK/job.out" job.sh || { cat "$WORK/job.out" >&2 || true; fail "sbatch --wait failed"; }
    cat job.out >&2
    expect job.out '^slurm_allreduce_check: PASSED on 4 ranks' 1
    expect job.out '^tarantella: rank [0-3] .*pin=core' 4
    affinity_matches_verbose job.out 4
    ;;
sbatch_directive)
    # #SBATCH --tarantella=... in the script; a step's own option overrides
    # it key by key (pin), the rest (verbose) still applies.
    cat > job.sh <<EOF
#!/bin/bash
#SBATCH --tarantella=pin=socket,verbose
#SBATCH -N 2
#SBATCH -n 4
#SBATCH -t 2
srun "$CHECK" --expect-size 4
srun --tarantella=pin=core bash -c 'echo "step2: \$SLURM_PROCID pin=\$TNT_PIN"'
EOF
    run out sbatch --wait -o "$WORK/job.out" job.sh \
        || { cat "$WORK/job.out" >&2 || true; fail "sbatch --wait failed"; }
    cat job.out >&2
    expect job.out '^slurm_allreduce_check: PASSED on 4 ranks' 1
    expect job.out '^tarantella: rank [0-3] .*pin=socket' 4
    expect job.out '^tarantella: rank [0-3] .*pin=core' 4
    expect job.out '^step2: [0-3] pin=core$' 4
    # The batch script itself is not a rank: no pinning line for it.
    expect job.out '^tarantella: rank' 8
    ;;
salloc)
    # salloc --tarantella ... srun ..., non-interactively.
    run out salloc --tarantella=verbose -N 2 -n 4 -t 2 --immediate=30 \
        srun "$CHECK" --expect-size 4 || fail "salloc failed"
    expect out '^slurm_allreduce_check: PASSED on 4 ranks' 1
    expect out '^tarantella: rank [0-3] .*pin=auto' 4
    ;;
without)
    # Without --tarantella the plugin does nothing: MpiDefault (none) is
    # used, no TNT_* variables, no OMP_NUM_THREADS, no pinning, no output.
    run out srun -N 2 -n 4 --immediate=30 -t 2 bash -c \
        'echo "plain: $SLURM_PROCID mpi=[$SLURM_MPI_TYPE] pmix=[$PMIX_RANK] pin=[$TNT_PIN] omp=[$OMP_NUM_THREADS] $(grep Cpus_allowed_list /proc/self/status | tr -s "\t " " ")"' \
        || fail "srun failed"
    want=$(grep Cpus_allowed_list /proc/self/status | tr -s '\t ' ' ')
    expect out "^plain: [0-3] mpi=\[\] pmix=\[\] pin=\[\] omp=\[\] $want\$" 4
    reject out 'tarantella'
    # The same inside sbatch and salloc without the option.
    printf '#!/bin/sh\nsrun -n 2 sh -c '"'"'echo "plain: pin=[$TNT_PIN] pmix=[$PMIX_RANK]"'"'"'\n' > job.sh
    run out sbatch --wait -N 1 -n 2 -t 1 -o "$WORK/job.out" job.sh || fail "sbatch failed"
    expect job.out '^plain: pin=\[\] pmix=\[\]$' 2
    run out salloc -N 1 -n 2 -t 1 --immediate=30 srun sh -c 'echo "plain: pin=[$TNT_PIN]"' || fail "salloc failed"
    expect out '^plain: pin=\[\]$' 2
    ;;
site_defaults)
    # A cluster of its own (1 node) whose plugstack.conf line carries site
    # defaults: CHECK is followed by the cluster script and the plugin here.
    CLUSTER_SH=$3
    PLUGIN=$4
    state=$WORK/cluster.state
    stop_own() { "$CLUSTER_SH" stop --state-file "$state" >/dev/null 2>&1 || true; }
    trap 'rc=$?; stop_own; rm -rf "$WORK"; exit $rc' EXIT
    eval "$("$CLUSTER_SH" start --nodes 1 --plugin "$PLUGIN" \
        --plugstack-args "default_pin=none default_verbose default_fusion=256 master_port_range=31000-31009" \
        --state-file "$state")"
    run out srun --tarantella -n 2 --immediate=30 -t 2 \
        sh -c 'echo "env: pin=$TNT_PIN fusion=$TNT_FUSION_THRESHOLD_KB"' || fail "srun failed"
    expect out '^tarantella: rank [01] .*pin=none' 2
    expect out '^env: pin=none fusion=256$' 2
    # The site's MASTER_PORT range: 31000 + (job id * 31 + step id) % 10.
    run out srun --tarantella -n 1 --immediate=30 -t 2 \
        sh -c 'echo "port: $SLURM_JOB_ID $SLURM_STEP_ID $MASTER_PORT"' || fail "srun failed"
    read -r _ job step port < <(grep '^port: ' out)
    [ "$port" -eq $(( 31000 + (job * 31 + step) % 10 )) ] || fail "MASTER_PORT $port for job $job step $step"
    # The user's sub-options override the site's, key by key.
    run out srun --tarantella=pin=core,verbose=no -n 2 --immediate=30 -t 2 \
        sh -c 'echo "env: pin=$TNT_PIN fusion=$TNT_FUSION_THRESHOLD_KB"' || fail "srun failed"
    expect out '^env: pin=core fusion=256$' 2
    reject out '^tarantella: rank'
    # Defaults never switch the plugin on by themselves.
    run out srun -n 1 --immediate=30 -t 2 sh -c 'echo "env: pin=[$TNT_PIN]"' || fail "srun failed"
    expect out '^env: pin=\[\]$' 1
    # A bad plugstack argument stops srun with a message naming it.
    echo "required $PLUGIN default_pin=diagonal" > "$TNT_SLURM_CLUSTER_DIR/plugstack.conf"
    if run out srun --tarantella -n 1 --immediate=30 -t 2 true; then fail "srun ran with a bad plugstack.conf"; fi
    expect out "plugstack.conf argument 'default_pin=diagonal': invalid value 'diagonal' for pin"
    echo "required $PLUGIN master_port_range=80-90" > "$TNT_SLURM_CLUSTER_DIR/plugstack.conf"
    if run out srun --tarantella -n 1 --immediate=30 -t 2 true; then fail "srun ran with a bad port range"; fi
    expect out "plugstack.conf argument 'master_port_range=80-90': expected master_port_range=LOW-HIGH with 1024 <= LOW <= HIGH <= 65535"
    ;;
*)
    fail "unknown case $CASE"
    ;;
esac
echo "PASS: $CASE"
