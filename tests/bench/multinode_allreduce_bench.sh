#!/usr/bin/env bash
# Multi-node allreduce: libtnt per inter-node algorithm vs OpenMPI, same run.
#
#   tests/bench/multinode_allreduce_bench.sh [BUILD_DIR] [REPEATS] [LAYOUTS]
#
# LAYOUTS (default "2x1 2x2"): NODESxRANKS_PER_NODE. libtnt runs under
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
set -euo pipefail
BUILD=${1:-build}
REPEATS=${2:-3}
LAYOUTS=${3:-"2x1 2x2"}
ALGOS=${ALGOS:-"auto recursive_doubling ring"}
OUT=$(mktemp -d /tmp/tnt-mnbench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

export TNT_TIMEOUT=60 UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n
run_one() {   # run_one PROGRAM LAYOUT NODES RANKS
    local prog=$1 layout=$2 nodes=$3 n=$4
    if [ "$prog" = openmpi ]; then
        [ -x "$BUILD/bin/multinode_allreduce_bench_mpi" ] && command -v mpirun > /dev/null || return 0
        timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
            --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any \
            -x UCX_TLS -x UCX_WARN_UNUSED_ENV_VARS \
            "$BUILD/bin/multinode_allreduce_bench_mpi" --label "$layout" >> "$OUT/results" \
            || echo "openmpi $layout failed" >&2
    else
        TNT_ALLREDUCE_ALGO=$prog timeout 300 "$BUILD/bin/tarantella" --simulate-nodes "$nodes" \
            -n "$n" --python-interpreter "" -- "$BUILD/bin/multinode_allreduce_bench" \
            --label "$layout" >> "$OUT/results" || echo "tarantella $prog $layout failed" >&2
    fi
}

# The programs take turns, and the order rotates with every repetition, so
# no program always runs first (or right after OpenMPI's busy-polling ranks).
PROGRAMS=($ALGOS openmpi)
for rep in $(seq 1 "$REPEATS"); do
    for layout in $LAYOUTS; do
        nodes=${layout%x*}; per=${layout#*x}; n=$((nodes * per))
        for i in "${!PROGRAMS[@]}"; do
            run_one "${PROGRAMS[$(( (i + rep) % ${#PROGRAMS[@]} ))]}" "$layout" "$nodes" "$n"
        done
    done
done

# Median per (impl, algo, layout, bytes).
grep '^RESULT' "$OUT/results" | /usr/bin/python3 -c '
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in sys.stdin:
    _, impl, algo, layout, b, lat, bw = line.split()
    rows[(layout, int(b), impl, algo)].append((float(lat), float(bw)))
print("| layout | bytes | implementation | algorithm | latency (us) | bus bandwidth (GB/s) | runs |")
print("|---|---:|---|---|---:|---:|---:|")
for (layout, b, impl, algo), v in sorted(rows.items()):
    lat = statistics.median(x[0] for x in v); bw = statistics.median(x[1] for x in v)
    print(f"| {layout} | {b} | {impl} | {algo} | {lat:.1f} | {bw:.3f} | {len(v)} |")
'
