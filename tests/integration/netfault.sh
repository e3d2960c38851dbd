#!/bin/bash
# Network faults between nodes (issue 20): each "node" is a network
# namespace of its own, joined to a bridge in a switch namespace by a veth
# pair, and runs one netfault_check rank; UCX talks TCP over those links
# only (UCX_NET_DEVICES=eth0). Nothing is created in the host's own network
# namespace: the bridge, the links and the addresses (10.213.0.0/24, private
# to this switch) live in namespaces named after this script's pid, so
# parallel runs do not collide, and the EXIT trap deletes them on every path.
#
#   netfault.sh NETFAULT_CHECK cut   [NODES]   one node's link goes down
#                                              mid-run: every rank ends
#                                              within TNT_TIMEOUT + a few
#                                              seconds, and every verdict
#                                              names the cut node
#   netfault.sh NETFAULT_CHECK netem [NODES]   one node's link loses and
#                                              delays packets: the job
#                                              finishes with exact results
#
# netem comes from tc where the kernel has it, and otherwise from
# netfault_link.py, a user-space switch that replaces the bridge (the
# project's sandbox kernels are built without CONFIG_NET_SCH_NETEM).
#
# Exit 77 (skip) when not root or when namespaces cannot be made (an
# unprivileged container). Settings (environment): NETFAULT_TIMEOUT (the
# ranks' TNT_TIMEOUT in the cut test, default 5), NETFAULT_SLACK (seconds
# allowed past it, default 5), NETFAULT_STEPS (netem test, default 40),
# NETFAULT_NETEM (default "loss 5% delay 20ms").
set -u

check=$1
mode=$2
nodes=${3:-3}
timeout_s=${NETFAULT_TIMEOUT:-5}
slack_s=${NETFAULT_SLACK:-5}
steps=${NETFAULT_STEPS:-40}
netem=${NETFAULT_NETEM:-loss 5% delay 20ms}
cut=$((nodes - 1)) # the node whose link is cut or degraded

tag=tntnf$$
sw=$tag-sw
work=$(mktemp -d /tmp/tnt-netfault.XXXXXX)
pids=()

say() { echo "netfault($mode): $*"; }
fail() {
    echo "netfault($mode): FAILED: $*" >&2
    exit 1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

cleanup() {
    # Ranks first (by the pids this script started): a namespace that still
    # holds a process lingers after `ip netns del`.
    for p in "${pids[@]}"; do
        kill -9 "$p" 2>/dev/null
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null
    done
    for i in $(seq 0 $((nodes - 1))); do
        ip netns del "$tag-n$i" 2>/dev/null
    done
    ip netns del "$sw" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
# ctest's and timeout's TERM must also run the cleanup.
trap 'exit 1' TERM INT

if [ "$(id -u)" != 0 ]; then
    say "SKIP: needs root for ip netns"
    exit 77
fi
if ! ip netns add "$sw" 2>"$work/netns.err"; then
    say "SKIP: ip netns add failed (an unprivileged container?): $(cat "$work/netns.err")"
    exit 77
fi
[ -x "$check" ] || fail "no program $check"

# The switch and the nodes. Link names are per namespace, so n<i> and eth0
# cannot clash with another run's or the host's.
ip -n "$sw" link add br0 type bridge || fail "bridge"
ip -n "$sw" link set br0 up || fail "bridge up"
for i in $(seq 0 $((nodes - 1))); do
    ns=$tag-n$i
    ip netns add "$ns" || fail "ip netns add $ns"
    ip link add "$tag-v$i" netns "$sw" type veth peer name eth0 netns "$ns" || fail "veth $i"
    ip -n "$sw" link set "$tag-v$i" name "n$i" || fail "rename veth $i"
    ip -n "$sw" link set "n$i" master br0 up || fail "veth $i to the bridge"
    ip -n "$ns" addr add "10.213.0.$((i + 1))/24" dev eth0 || fail "address $i"
    ip -n "$ns" link set eth0 up || fail "eth0 up in $ns"
    ip -n "$ns" link set lo up || fail "lo up in $ns"
done

# Starts one job of `nodes` ranks, rank i in namespace i with hostname
# nfnode<i>, in store directory $1 (the rest: netfault_check's arguments).
start_job() {
    local store=$1
    shift
    mkdir -p "$store"
    pids=()
    for i in $(seq 0 $((nodes - 1))); do
        ip netns exec "$tag-n$i" env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 \
            UCX_WARN_UNUSED_ENV_VARS=n "$check" --store "$store" --rank "$i" \
            --size "$nodes" --host "nfnode$i" "$@" >"$store.out$i" 2>"$store.err$i" &
        pids+=($!)
    done
}

show_logs() {
    for f in "$1".out* "$1".err*; do
        echo "--- $f"
        tail -n 15 "$f"
    done
}

# The step a rank last reported (-1 before its first).
last_step() {
    local s
    s=$(grep -o '^step [0-9]*' "$1" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
    echo "${s:--1}"
}

mode_cut() {
    local job=$work/cut
    export TNT_TIMEOUT=$timeout_s
    start_job "$job" --steps 1000000 --sleep-ms 20 --expect-blame "nfnode$cut"
    # Cut only once every rank is well into training: the fault then hits
    # established connections mid-collective, not the wire-up.
    local t_end
    t_end=$(($(date +%s) + 60))
    while :; do
        local ready=1
        for i in $(seq 0 $((nodes - 1))); do
            [ "$(last_step "$job.out$i")" -ge 20 ] || ready=0
        done
        [ $ready = 1 ] && break
        [ "$(date +%s)" -lt $t_end ] || {
            show_logs "$job"
            fail "the ranks did not reach step 20 within 60 s"
        }
        sleep 0.1
    done
    local t_cut
    t_cut=$(now)
    ip -n "$sw" link set "n$cut" down || fail "link down"
    say "cut nfnode$cut's link (TNT_TIMEOUT=$timeout_s)"

    # Wait for every rank, past the bound only long enough to see how late
    # it is, then count the late ones as failures.
    local bound
    bound=$(awk -v t="$timeout_s" -v s="$slack_s" 'BEGIN { print t + s }')
    local left=$nodes bad=0 ends=() statuses=()
    while [ $left -gt 0 ]; do
        left=0
        for i in $(seq 0 $((nodes - 1))); do
            [ -n "${ends[$i]:-}" ] && continue
            if kill -0 "${pids[$i]}" 2>/dev/null; then
                left=$((left + 1))
            else
                ends[$i]=$(elapsed "$t_cut" "$(now)")
            fi
        done
        if awk -v e="$(elapsed "$t_cut" "$(now)")" -v b="$bound" 'BEGIN { exit !(e > b + 30) }'; then
            break
        fi
        sleep 0.05
    done
    for i in $(seq 0 $((nodes - 1))); do
        local rc
        if [ -z "${ends[$i]:-}" ]; then
            say "rank $i (nfnode$i) still runs $(elapsed "$t_cut" "$(now)") s after the cut"
            bad=1
            continue
        fi
        wait "${pids[$i]}"
        rc=$?
        say "rank $i (nfnode$i) ended ${ends[$i]} s after the cut, status $rc:" \
            "$(grep '^failed' "$job.out$i" | head -n 1)"
        statuses[$i]=$rc
        if awk -v e="${ends[$i]}" -v b="$bound" 'BEGIN { exit !(e > b) }'; then
            say "rank $i took longer than TNT_TIMEOUT + $slack_s s = $bound s"
            bad=1
        fi
    done
    # netfault_check's statuses: 3, a verdict naming the cut node (it
    # checks the text); 4, a follow-on failure: the connection to a peer
    # broke, and that peer must be one that ended with a verdict (3) and
    # left first. No other status may occur, and at least one verdict.
    local verdicts=0
    for i in $(seq 0 $((nodes - 1))); do
        case ${statuses[$i]:-} in
        3) verdicts=$((verdicts + 1)) ;;
        4)
            local peer
            peer=$(grep '^failed' "$job.out$i" | sed -n 's/.*connection to rank \([0-9]*\) broke.*/\1/p')
            if [ -z "$peer" ] || [ "${statuses[$peer]:-}" != 3 ]; then
                say "rank $i's connection broke to rank ${peer:-?}, which did not end with a verdict"
                bad=1
            fi
            ;;
        *) bad=1 ;;
        esac
    done
    [ $verdicts -ge 1 ] || {
        bad=1
        say "no rank ended with a verdict"
    }
    # What libtnt printed: every verdict (a TNT_TIMEOUT line) names the cut
    # node; the rest are the follow-on lines checked above.
    cat "$job".err* | grep 'error: ' | sed 's/^/    /'
    if cat "$job".err* | grep 'error: .*TNT_TIMEOUT' | grep -v "nfnode$cut" >/dev/null; then
        say "a printed verdict does not name nfnode$cut"
        bad=1
    fi
    if [ $bad != 0 ]; then
        show_logs "$job"
        fail "see above"
    fi
    say "OK"
}

# One job of $steps steps in store $1; sets duration (rank 0's, seconds).
run_steps() {
    local job=$1
    start_job "$job" --steps "$steps" --sleep-ms 0
    local rc=0
    for i in $(seq 0 $((nodes - 1))); do
        wait "${pids[$i]}" || rc=1
    done
    pids=()
    if [ $rc != 0 ]; then
        show_logs "$job"
        fail "a rank of $job failed"
    fi
    duration=$(sed -n 's/^done: .* in \([0-9.]*\) s$/\1/p' "$job.out0")
}

# The user-space switch (netfault_link.py) in place of the bridge: every
# node's eth0 becomes one of its TAP devices; $@: its link specs.
switch_pid=
start_switch() {
    for i in $(seq 0 $((nodes - 1))); do
        ip -n "$sw" link del "n$i" 2>/dev/null # the veth pair, both ends
        ip -n "$tag-n$i" link del eth0 2>/dev/null
    done
    rm -f "$work/switch.out"
    ip netns exec "$sw" python3 "$(dirname "$0")/netfault_link.py" "$work/switch.stats" "$@" \
        >"$work/switch.out" 2>&1 &
    switch_pid=$!
    pids+=("$switch_pid")
    local t=0
    until grep -q ready "$work/switch.out" 2>/dev/null; do
        sleep 0.1
        t=$((t + 1))
        [ $t -lt 100 ] || fail "the user-space switch did not start: $(cat "$work/switch.out")"
    done
    for i in $(seq 0 $((nodes - 1))); do
        ip -n "$tag-n$i" addr add "10.213.0.$((i + 1))/24" dev eth0 || fail "address $i"
        ip -n "$tag-n$i" link set eth0 up || fail "eth0 up in $tag-n$i"
    done
}
stop_switch() {
    kill "$switch_pid"
    wait "$switch_pid"
    switch_pid=
}

mode_netem() {
    # A stall long enough to hit TNT_TIMEOUT would be a failure here: the
    # lossy link must only slow the job down.
    export TNT_TIMEOUT=60
    local base dropped
    if tc -n "$sw" qdisc add dev "n$cut" root netem $netem 2>/dev/null; then
        tc -n "$sw" qdisc del dev "n$cut" root
        run_steps "$work/base"
        base=$duration
        say "$steps steps on clean links: $base s"
        ip netns exec "$tag-n$cut" tc qdisc add dev eth0 root netem $netem || fail "netem in"
        tc -n "$sw" qdisc add dev "n$cut" root netem $netem || fail "netem out"
        run_steps "$work/netem"
        say "$steps steps with nfnode$cut's link at '$netem' both ways (tc netem): $duration s" \
            "(clean: $base s)"
        # The faults must have happened, or the test proved nothing.
        dropped=$( (ip netns exec "$tag-n$cut" tc -s qdisc show dev eth0
            tc -n "$sw" -s qdisc show dev "n$cut") | sed -n 's/.*dropped \([0-9]*\).*/\1/p' |
            awk '{ n += $1 } END { print n + 0 }')
    else
        # No netem in this kernel: the same loss and delay from the
        # user-space switch, which also carries the clean run so that the
        # two durations differ only by the faults.
        local loss delay
        loss=$(echo "$netem" | sed -n 's/.*loss \([0-9.]*\)%.*/\1/p')
        delay=$(echo "$netem" | sed -n 's/.*delay \([0-9.]*\)ms.*/\1/p')
        loss=$(awk -v l="${loss:-0}" 'BEGIN { print l / 100 }')
        local specs=() i
        for i in $(seq 0 $((nodes - 1))); do
            specs+=("$tag-n$i")
        done
        say "no tc netem in this kernel: links from the user-space switch (netfault_link.py)"
        start_switch "${specs[@]}"
        run_steps "$work/base"
        base=$duration
        stop_switch
        say "$steps steps on clean links: $base s"
        specs[$cut]="$tag-n$cut:$loss:${delay:-0}"
        start_switch "${specs[@]}"
        run_steps "$work/netem"
        stop_switch
        say "$steps steps with nfnode$cut's link at '$netem' both ways (user-space switch):" \
            "$duration s (clean: $base s); switch: $(cat "$work/switch.stats")"
        dropped=$(sed -n 's/^dropped \([0-9]*\).*/\1/p' "$work/switch.stats")
    fi
    say "dropped $dropped packets"
    [ "${dropped:-0}" -gt 0 ] || fail "nothing was dropped: the job did not cross the lossy link"
    say "OK"
}

case $mode in
cut) mode_cut ;;
netem) mode_netem ;;
*) fail "unknown mode $mode" ;;
esac
