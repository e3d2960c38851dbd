#!/usr/bin/env bash
# Multi-node allreduce: libtnt per inter-node algorithm vs OpenMPI, same run.
#
#   tests/bench/multinode_allreduce_bench.sh [BUILD_DIR] [REPEATS] [LAYOUTS]
#
# LAYOUTS (default "2x1 4x1 8x1 16x1"): NODESxRANKS_PER_NODE. libtnt runs under
# `tarantella --simulate-nodes`, so ranks of different simulated nodes talk
# through UCX over TCP (loopback) and ranks of one node through shared memory.
# OpenMPI runs the same number of ranks with `mpirun --mca pml ucx
# -x UCX_TLS=tcp,self` (plus pml_ucx_tls/devices any, without which OpenMPI
# 4.1 refuses UCX when it offers only TCP): for NODESx1 both sides move every byte through UCX
# TCP (comparable); for layouts with several ranks per node OpenMPI does not
# know the simulated nodes and sends everything over TCP, while libtnt uses
# shared memory within a node, so that row flatters libtnt (reported anyway,
# marked). Runs alternate between programs and the median of REPEATS is
# printed as a markdown table (this VM's two vCPUs are noisy).
#
# Environment:
#   ALGOS     libtnt algorithms (default "auto recursive_doubling rabenseifner ring tree")
#   PROBE     a built ../shared/tools/vcpu_probe: run before and after every
#             run; a run whose two probes disagree is dropped, and the tables
#             are split by placement (close / far)
#   LOCK      a file to hold with flock(1) for every run, so that benchmarks
#             of several people never overlap
#   RAW       keep every RESULT line here (with its placement appended); the
#             input of tests/bench/cost_model.py --fit
#   SCALE     iterations factor (default 1); MAX_BYTES largest size (64 MiB)
set -euo pipefail
BUILD=${1:-build}
REPEATS=${2:-3}
LAYOUTS=${3:-"2x1 4x1 8x1 16x1"}
ALGOS=${ALGOS:-"auto recursive_doubling rabenseifner ring tree"}
SCALE=${SCALE:-1}
MAX_BYTES=${MAX_BYTES:-67108864}
OUT=$(mktemp -d /tmp/tnt-mnbench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
: > "$OUT/results"

export TNT_TIMEOUT=60 UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n
run_prog() {   # run_prog PROGRAM LAYOUT NODES RANKS (results on stdout)
    local prog=$1 layout=$2 nodes=$3 n=$4
    if [ "$prog" = openmpi ]; then
        timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
            --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
            -x UCX_TLS -x UCX_WARN_UNUSED_ENV_VARS \
            "$BUILD/bin/multinode_allreduce_bench_mpi" --label "$layout" --scale "$SCALE" \
            --max-bytes "$MAX_BYTES" || echo "openmpi $layout failed" >&2
    else
        TNT_ALLREDUCE_ALGO=$prog timeout 600 "$BUILD/bin/tarantella" --simulate-nodes "$nodes" \
            -n "$n" --python-interpreter "" -- "$BUILD/bin/multinode_allreduce_bench" \
            --label "$layout" --scale "$SCALE" --max-bytes "$MAX_BYTES" \
            || echo "tarantella $prog $layout failed" >&2
    fi
}

probe() {
    if [ -n "${PROBE:-}" ]; then "$PROBE" | awk '{ print $NF }'; else echo unprobed; fi
}

run_one() {   # run_one PROGRAM LAYOUT NODES RANKS
    local prog=$1 before after
    if [ "$prog" = openmpi ] && { [ ! -x "$BUILD/bin/multinode_allreduce_bench_mpi" ] ||
                                  ! command -v mpirun > /dev/null; }; then
        return 0
    fi
    before=$(probe)
    run_prog "$@" > "$OUT/run"
    after=$(probe)
    if [ "$before" != "$after" ]; then
        echo "dropped: $1 $2 (probe $before before, $after after)" >&2
        return 0
    fi
    echo "kept: $1 $2 ($before)" >&2
    awk -v pl="$before" '/^RESULT/ { print $0, pl }' "$OUT/run" >> "$OUT/results"
}

if [ -n "${LOCK:-}" ]; then
    exec 9> "$LOCK"
fi

# The programs take turns, and the order rotates with every repetition, so
# no program always runs first (or right after OpenMPI's busy-polling ranks).
PROGRAMS=($ALGOS openmpi)
for rep in $(seq 1 "$REPEATS"); do
    for layout in $LAYOUTS; do
        nodes=${layout%x*}; per=${layout#*x}; n=$((nodes * per))
        for i in "${!PROGRAMS[@]}"; do
            prog=${PROGRAMS[$(( (i + rep) % ${#PROGRAMS[@]} ))]}
            # Each run holds the lock alone (flock on fd 9), probes included.
            [ -z "${LOCK:-}" ] || flock 9
            run_one "$prog" "$layout" "$nodes" "$n"
            [ -z "${LOCK:-}" ] || flock -u 9
        done
    done
done

if [ -n "${RAW:-}" ]; then
    cat "$OUT/results" >> "$RAW"
fi
# Median per (placement, impl, algo, layout, bytes).
grep '^RESULT' "$OUT/results" | /usr/bin/python3 -c '
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in sys.stdin:
    _, impl, algo, layout, b, lat, bw, placement = line.split()
    rows[(placement, layout, int(b), impl, algo)].append((float(lat), float(bw)))
for placement in sorted({k[0] for k in rows}):
    print(f"\nplacement: {placement}\n")
    print("| layout | bytes | implementation | algorithm | latency (us) | bus bandwidth (GB/s) | runs |")
    print("|---|---:|---|---|---:|---:|---:|")
    for (pl, layout, b, impl, algo), v in sorted(rows.items(), key=lambda kv: (int(kv[0][1].split("x")[0]), kv[0][1:])):
        if pl != placement:
            continue
        lat = statistics.median(x[0] for x in v); bw = statistics.median(x[1] for x in v)
        print(f"| {layout} | {b} | {impl} | {algo} | {lat:.1f} | {bw:.3f} | {len(v)} |")
'
