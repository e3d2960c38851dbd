#!/usr/bin/env bash
# A private SLURM test cluster on this host: its own munged, one slurmctld and
# several slurmd (multiple-slurmd build: `slurmd -N n1` ... `-N nK`, all on
# localhost with distinct ports). Everything lives under one temporary
# directory and is reached through SLURM_CONF; /etc/slurm and the system's
# munged are never touched, so two clusters (two helpers, two builds) can run
# side by side.
#
#   cluster.sh start [--nodes K] [--cpus C] [--gpus G] [--plugin PATH]
#                    [--plugstack-args ARGS] [--state-file FILE]
#       Prints `export SLURM_CONF=...` lines for eval and, with --state-file,
#       writes the cluster's directory into FILE. Waits (bounded) until every
#       node is idle. On failure it prints the daemons' logs and cleans up.
#   cluster.sh stop   [--state-file FILE | --dir DIR]
#       Kills the daemons by PID (never by name), removes the directory.
#   cluster.sh status [--state-file FILE | --dir DIR]
#   cluster.sh run    [--state-file FILE | --dir DIR] -- COMMAND...
#       Runs COMMAND with the cluster's environment (what ctest tests use).
#
# Must run as root: slurmd starts job steps as the submitting user and needs
# root to do so; the test jobs then run as root too.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODES=4
CPUS=2
GPUS=0
PLUGIN=""
PLUGSTACK_ARGS=""
STATE_FILE=""
DIR=""
START_TIMEOUT=60

die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() {
    sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
}

[ $# -ge 1 ] || usage
CMD=$1; shift
while [ $# -gt 0 ]; do
    case $1 in
        --nodes) NODES=$2; shift 2 ;;
        --cpus) CPUS=$2; shift 2 ;;
        --gpus) GPUS=$2; shift 2 ;;
        --plugin) PLUGIN=$2; shift 2 ;;
        --plugstack-args) PLUGSTACK_ARGS=$2; shift 2 ;;
        --state-file) STATE_FILE=$2; shift 2 ;;
        --dir) DIR=$2; shift 2 ;;
        --timeout) START_TIMEOUT=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) usage ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

resolve_dir() {
    if [ -z "$DIR" ] && [ -n "$STATE_FILE" ]; then
        [ -f "$STATE_FILE" ] || die "state file $STATE_FILE does not exist; was the cluster started?"
        DIR=$(cat "$STATE_FILE")
    fi
    [ -n "$DIR" ] || die "give --state-file FILE or --dir DIR"
    [ -f "$DIR/env.sh" ] || die "$DIR is not a cluster directory (no env.sh)"
}

# Picks `count` free TCP ports by binding them all at once (so they differ),
# then releasing them. Another process could grab one in between; start fails
# loudly in that case and can simply be retried.
free_ports() {
    /usr/bin/python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

# Kills daemons by the PIDs we recorded: TERM to all of them at once, then
# KILL whatever is still there after 5 s.
kill_pidfiles() {
    local f pid pids=()
    for f in "$@"; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    done
    for _ in $(seq 50); do
        local alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
}

do_stop() {
    # slurmd and the controller first (slurmd kill their steps'
    # slurmstepd), then munged, which everybody needs for authentication.
    kill_pidfiles "$DIR"/pids/slurmd-*.pid "$DIR/pids/slurmctld.pid"
    # Any slurmstepd left (a hung step) belongs to this cluster if its
    # environment names our SLURM_CONF; kill those by PID.
    local conf="$DIR/slurm.conf" p
    for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
        if { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$conf"; then
            kill -KILL "$p" 2>/dev/null || true
        fi
    done
    kill_pidfiles "$DIR/pids/munged.pid"
    case $DIR in
        /tmp/tnt-slurm.*|"${TMPDIR:-/tmp}"/tnt-slurm.*) rm -rf "$DIR" ;;
        *) echo "cluster.sh: not removing unexpected directory $DIR" >&2 ;;
    esac
    if [ -n "$STATE_FILE" ]; then rm -f "$STATE_FILE"; fi
}

dump_logs() {
    local f
    for f in "$DIR"/log/*; do
        [ -f "$f" ] || continue
        echo "---- $f (last 30 lines)" >&2
        tail -n 30 "$f" >&2
    done
}

do_start() {
    [ "$(id -u)" = 0 ] || die "must run as root (slurmd launches steps as the submitting user)"
    local b
    for b in munged slurmctld slurmd slurmstepd srun sinfo scontrol; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || die "$b not found; install slurmd, slurmctld, slurm-client and munge (scripts/install-deps.sh)"
    done
    export PATH="$PATH:/usr/sbin"
    if [ -n "$PLUGIN" ] && [ ! -f "$PLUGIN" ]; then
        die "SPANK plugin $PLUGIN does not exist; build it first"
    fi

    # A cluster left behind by an interrupted run (ctest killed before the
    # cleanup test) is stopped first, so it does not pile up.
    if [ -n "$STATE_FILE" ] && [ -f "$STATE_FILE" ]; then
        local old
        old=$(cat "$STATE_FILE")
        if [ -f "$old/env.sh" ]; then
            echo "cluster.sh: stopping the stale cluster in $old" >&2
            (DIR=$old; do_stop)
        fi
        rm -f "$STATE_FILE"
    fi
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/tnt-slurm.XXXXXX")
    chmod 755 "$DIR"
    # From here on, any failure tears down what was started.
    trap 'rc=$?; if [ $rc -ne 0 ]; then echo "cluster.sh: start failed, cleaning up $DIR" >&2; dump_logs; do_stop; fi' EXIT
    mkdir -p "$DIR"/{munge,state,log,pids,spool,tmp}
    chmod 700 "$DIR/munge"
    local i
    for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/n$i" "$DIR/tmp/n$i"; done
    chmod 1777 "$DIR/tmp" "$DIR"/tmp/n*

    # munged with its own key and socket.
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    local sock="$DIR/munge/munge.socket"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$sock" \
        --pid-file="$DIR/pids/munged.pid" --log-file="$DIR/log/munged.log" \
        --seed-file="$DIR/munge/munged.seed" --num-threads=2 \
        || die "munged did not start (see $DIR/log/munged.log)"
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
    [ -S "$sock" ] || die "munged socket $sock did not appear"

    local ports
    read -r -a ports <<< "$(free_ports $((NODES + 1)))"
    local host
    host=$(hostname -s)

    {
        echo "# Written by tests/slurm/cluster.sh; private to this test cluster."
        echo "ClusterName=tnt$(basename "$DIR" | tr -dc 'a-z0-9' | tail -c 6)"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmctldPort=${ports[0]}"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "AuthInfo=socket=$sock"
        echo "CredType=cred/munge"
        echo "StateSaveLocation=$DIR/state"
        echo "SlurmdSpoolDir=$DIR/spool/%n"
        echo "SlurmctldPidFile=$DIR/pids/slurmctld.pid"
        echo "SlurmdPidFile=$DIR/pids/slurmd-%n.pid"
        echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
        echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
        echo "SlurmctldDebug=info"
        echo "SlurmdDebug=info"
        echo "PlugStackConfig=$DIR/plugstack.conf"
        # No cgroups in this container: track processes through /proc, and
        # let the SPANK plugin do the binding (task/affinity would refuse
        # the CPU counts config_overrides lets us declare).
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SlurmdParameters=config_overrides"
        # none on purpose: the tests prove that --tarantella switches a step
        # to PMIx by itself.
        echo "MpiDefault=none"
        echo "SwitchType=switch/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SchedulerType=sched/builtin"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "ReturnToService=2"
        echo "MailProg=/bin/true"
        # Per-node TmpFS: the mpi/pmix plugin puts each node's PMIx server
        # sockets there, and our nodes share one host.
        echo "TmpFS=$DIR/tmp/%n"
        echo "SlurmdTimeout=120"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        echo "MinJobAge=600"
        # Batch jobs may be requeued (Slurm's default, stated for the
        # preemptible template's test: it requeues itself with scontrol).
        echo "JobRequeue=1"
        echo "MessageTimeout=20"
        # Declared GPUs (no devices behind them: --test-only and scheduling
        # checks only; a job that asks for them gets no real GPU).
        local gres=""
        if [ "$GPUS" -gt 0 ]; then
            echo "GresTypes=gpu"
            gres=" Gres=gpu:$GPUS"
        fi
        for i in $(seq 1 "$NODES"); do
            echo "NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=1000$gres State=UNKNOWN"
        done
        echo "PartitionName=debug Nodes=n[1-$NODES] Default=YES MaxTime=30 State=UP"
    } > "$DIR/slurm.conf"

    if [ "$GPUS" -gt 0 ]; then
        # slurmd counts GPUs by their device files; plain files stand in.
        mkdir -p "$DIR/dev"
        for i in $(seq 0 $((GPUS - 1))); do : > "$DIR/dev/gpu$i"; done
        echo "NodeName=n[1-$NODES] Name=gpu File=$DIR/dev/gpu[0-$((GPUS - 1))]" > "$DIR/gres.conf"
    fi

    if [ -n "$PLUGIN" ]; then
        echo "required $(readlink -f "$PLUGIN") $PLUGSTACK_ARGS" > "$DIR/plugstack.conf"
    else
        : > "$DIR/plugstack.conf"
    fi

    {
        echo "export SLURM_CONF=$DIR/slurm.conf"
        echo "export TNT_SLURM_CLUSTER_DIR=$DIR"
        echo "export PATH=\$PATH:/usr/sbin"
    } > "$DIR/env.sh"
    export SLURM_CONF="$DIR/slurm.conf"

    # -D keeps each daemon in the foreground as our child's child, so the
    # PID we record is the daemon's own; setsid detaches it from the
    # caller's session (ctest, a terminal) so a Ctrl-C there does not
    # half-kill the cluster.
    setsid slurmctld -D -i -f "$SLURM_CONF" >"$DIR/log/slurmctld.out" 2>&1 < /dev/null &
    echo $! > "$DIR/pids/slurmctld.pid"
    for i in $(seq 1 "$NODES"); do
        setsid slurmd -D -N "n$i" -f "$SLURM_CONF" >"$DIR/log/slurmd-n$i.out" 2>&1 < /dev/null &
        echo $! > "$DIR/pids/slurmd-n$i.pid"
    done

    # Bounded wait until every node is idle.
    local deadline=$((SECONDS + START_TIMEOUT)) idle=0
    while [ $SECONDS -lt $deadline ]; do
        idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2=="idle"' | sort -u | wc -l || true)
        [ "$idle" -ge "$NODES" ] && break
        for f in "$DIR"/pids/*.pid; do
            kill -0 "$(cat "$f")" 2>/dev/null || die "daemon $(basename "$f" .pid) exited during start-up"
        done
        sleep 0.5
    done
    [ "$idle" -ge "$NODES" ] || die "only $idle of $NODES nodes became idle within ${START_TIMEOUT}s"

    if [ -n "$STATE_FILE" ]; then echo "$DIR" > "$STATE_FILE"; fi
    trap - EXIT
    cat "$DIR/env.sh"
}

case $CMD in
    start)
        # Free ports are picked before the daemons bind them; if another
        # program takes one in between, start-up fails: try once more with
        # new ports (each attempt cleans up after itself in its subshell).
        for attempt in 1 2; do
            if (do_start); then exit 0; fi
            [ $attempt = 2 ] || echo "cluster.sh: start failed, retrying once" >&2
        done
        exit 1 ;;
    stop) resolve_dir; do_stop ;;
    status)
        resolve_dir
        # shellcheck disable=SC1091
        . "$DIR/env.sh"
        echo "cluster directory: $DIR"
        for f in "$DIR"/pids/*.pid; do
            if kill -0 "$(cat "$f")" 2>/dev/null; then s=running; else s=dead; fi
            echo "$(basename "$f" .pid): pid $(cat "$f") $s"
        done
        timeout 20 sinfo -N || true ;;
    run)
        resolve_dir
        # shellcheck disable=SC1091
        . "$DIR/env.sh"
        [ $# -gt 0 ] || die "run needs a command after --"
        exec "$@" ;;
    *) usage ;;
esac
