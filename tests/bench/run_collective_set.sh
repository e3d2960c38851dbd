#!/usr/bin/env bash
# The collective set (reduce, reduce_scatter(v), gather, scatter,
# allgatherv, alltoall(v)) and point-to-point messages (pingpong), libtnt
# against OpenMPI 4.1, with the vCPU placement of every
# run, the method of run_all.sh (docs/benchmarks.md):
#
#   tests/bench/run_collective_set.sh BUILD_DIR [ROUNDS]
#
# Programs, alternating their order every round:
#   tnt   tarantella -n 2 --pin core -- collective_set_bench
#   ompi  mpirun --bind-to core -np 2 mpi_collective_set_bench
# Every run is bracketed by vcpu_probe (from /work/shared/tools/vcpu_probe.c
# or $TNT_VCPU_PROBE); runs whose probes disagree are dropped by the report
# (collective_set_report.py), which gives the median per placement.
# Raw outputs go to ${TNT_BENCH_OUT:-BUILD_DIR/bench-collective-set}/runs.
# Sizes: TNT_BENCH_MIN_BYTES (64) to TNT_BENCH_MAX_BYTES (4 MiB) in powers
# of 4 (TNT_BENCH_MIN_BYTES=8 TNT_BENCH_MAX_BYTES=2048 for 8 B and the small
# sizes between the default ones), about TNT_BENCH_TIME (0.15) s
# per size; TNT_BENCH_ISOLATED=1 times each call alone, a barrier before
# it (--isolated: the OSU benchmarks' method; the report then adds the
# slowest rank's latency); TNT_BENCH_OPS=a,b,... runs only those ops (all by default): a
# run of all takes about 25 s, shorter than the placement's usual
# stretch, so that most runs keep one placement. Never fails on speed.
# TNT_BENCH_LAYOUT=NODESxRANKS (default 1x2, the programs above) runs
# NODES*RANKS ranks on simulated nodes instead: libtnt under `tarantella
# --simulate-nodes NODES`, OpenMPI with `mpirun --oversubscribe --mca pml ucx`;
# both with UCX_TLS=tcp,self, so that for NODESx1 every byte crosses UCX TCP
# (loopback) on both sides, as multinode_allreduce_bench.sh does for allreduce.
# Run it alone on the machine.
set -euo pipefail

build=$(cd "${1:?usage: run_collective_set.sh BUILD_DIR [ROUNDS]}" && pwd)
rounds=${2:-4}
out=${TNT_BENCH_OUT:-$build/bench-collective-set}
min=${TNT_BENCH_MIN_BYTES:-64}
max=${TNT_BENCH_MAX_BYTES:-4194304}
per_size=${TNT_BENCH_TIME:-0.15}
ops=()
[ -z "${TNT_BENCH_OPS:-}" ] || ops=(--ops "$TNT_BENCH_OPS")
[ "${TNT_BENCH_ISOLATED:-0}" = 0 ] || ops+=(--isolated)
layout=${TNT_BENCH_LAYOUT:-1x2}
nodes=${layout%x*}
ranks=$((nodes * ${layout#*x}))
probe_src=${TNT_VCPU_PROBE:-/work/shared/tools/vcpu_probe.c}
mkdir -p "$out/runs"
rm -f "$out"/runs/*.txt
for f in "$build/bin/tarantella" "$build/bin/collective_set_bench" \
         "$build/bin/mpi_collective_set_bench"; do
  [ -x "$f" ] || { echo "run_collective_set.sh: $f not built" >&2; exit 1; }
done
probe=$out/vcpu_probe
cc -O2 -pthread -o "$probe" "$probe_src"

run() {
  local prog=$1 round=$2 f=$out/runs/$1.$2.txt cmd
  case $prog@$nodes in
    tnt@1)  cmd=("$build/bin/tarantella" -n "$ranks" --pin core -- "$build/bin/collective_set_bench"
                 --min "$min" --max "$max" --time "$per_size" "${ops[@]}") ;;
    ompi@1) cmd=(mpirun --allow-run-as-root --bind-to core -np "$ranks"
                 "$build/bin/mpi_collective_set_bench" --min "$min" --max "$max" --time "$per_size" "${ops[@]}") ;;
    tnt@*)  cmd=(env UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n "$build/bin/tarantella"
                 --simulate-nodes "$nodes" -n "$ranks" --python-interpreter "" --
                 "$build/bin/collective_set_bench" --min "$min" --max "$max" --time "$per_size" "${ops[@]}") ;;
    ompi@*) cmd=(env UCX_TLS=tcp,self UCX_WARN_UNUSED_ENV_VARS=n mpirun --allow-run-as-root
                 --oversubscribe --bind-to none -np "$ranks" --mca pml ucx --mca pml_ucx_tls any
                 --mca pml_ucx_devices any -x UCX_TLS -x UCX_WARN_UNUSED_ENV_VARS
                 "$build/bin/mpi_collective_set_bench" --min "$min" --max "$max" --time "$per_size" "${ops[@]}") ;;
  esac
  echo "# command: ${cmd[*]}" > "$f"
  echo "# probe_before: $("$probe")" >> "$f"
  timeout 900 "${cmd[@]}" >> "$f" || echo "# failed" >> "$f"
  echo "# probe_after: $("$probe")" >> "$f"
  echo "run_collective_set.sh: round $round $prog: $(grep -h '^# probe' "$f" | sed 's/.*placement //' | tr '\n' ' ')" >&2
}

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then run tnt "$r"; run ompi "$r"; else run ompi "$r"; run tnt "$r"; fi
done
/usr/bin/python3 "$(dirname "$0")/collective_set_report.py" "$out" "$layout"
