#!/usr/bin/env bash
# Allreduce benchmark, libtnt against OpenMPI 4.1, 2 ranks, float32 sum, in
# place, with the vCPU placement of every run.
#
#   tests/bench/run_all.sh BUILD_DIR [REPEATS]
#
# These VMs' two vCPUs flip between a "close" placement (a cache line
# bounces in ~60 ns) and a "far" one (~330 ns, cache-to-cache copies 4-5x
# slower) for tens of seconds at a time. So every run is bracketed by
# vcpu_probe (built here from /work/shared/tools/vcpu_probe.c, or
# $TNT_VCPU_PROBE), runs whose two probes disagree are dropped, and close and
# far are reported separately. Programs (TNT_BENCH_PROGRAMS, default all),
# alternating their order every round:
#   tnt       tarantella -n 2 --pin core -- allreduce_bench   (defaults)
#   stream    the same with TNT_SHM_STREAM=on (always streaming stores)
#   nostream  the same with TNT_SHM_STREAM=off (the cache-resident staged
#             copies at every size)
#   ompi      mpirun --bind-to core -np 2 mpi_allreduce_bench (MPI_Allreduce)
#   cma       TNT_SHM_CMA=1 (single-copy process_vm_readv; not in the default list)
#   post      allreduce_bench --post up to 64 KiB: tnt_allreduce_post +
#             tnt_wait, i.e. the collective plus the progress-thread hand-off
# Raw outputs (runs/*.txt, each with its two probe lines), summary.md and
# the plot allreduce_2ranks.png (python3-matplotlib) go to
# ${TNT_BENCH_OUT:-BUILD_DIR/bench-allreduce}. Sizes: 4 B to
# TNT_BENCH_MAX_BYTES (256 MiB). Never fails on speed.
#
# Run it alone on the machine: no build, test or other benchmark beside it.
set -euo pipefail

build=${1:?usage: run_all.sh BUILD_DIR [REPEATS]}
repeats=${2:-5}
build=$(cd "$build" && pwd)
out=${TNT_BENCH_OUT:-$build/bench-allreduce}
python=${TNT_BENCH_PYTHON:-/usr/bin/python3}
tnt=$build/bin/tarantella
ours=$build/bin/allreduce_bench
mpi=$build/bin/mpi_allreduce_bench
max=${TNT_BENCH_MAX_BYTES:-268435456}
post_max=$(( max < 65536 ? max : 65536 ))
programs=${TNT_BENCH_PROGRAMS:-tnt stream nostream ompi post}
probe_src=${TNT_VCPU_PROBE:-/work/shared/tools/vcpu_probe.c}
mkdir -p "$out/runs"
rm -f "$out"/runs/*.txt

for f in "$tnt" "$ours"; do
  [ -x "$f" ] || { echo "run_all.sh: $f not built" >&2; exit 1; }
done
[ -r "$probe_src" ] || { echo "run_all.sh: no $probe_src; set TNT_VCPU_PROBE to vcpu_probe.c" >&2; exit 1; }
probe=$out/vcpu_probe
cc -O2 -pthread -o "$probe" "$probe_src"
if [ -x "$mpi" ] && command -v mpirun >/dev/null; then
  have_mpi=1
else
  have_mpi=0
  echo "run_all.sh: mpi_allreduce_bench or mpirun missing; no OpenMPI comparison" >&2
fi

clean=(env -u TNT_SHM_CMA -u TNT_SHM_STAGING_KB -u TNT_SHM_SMALL_KB -u TNT_SHM_STREAM_KB
       -u TNT_SHM_STREAM)
# The command line of each program, in the array cmd.
set_cmd() {
  case $1 in
    tnt)      cmd=("${clean[@]}" "$tnt" -n 2 --pin core -- "$ours" --max "$max") ;;
    stream)   cmd=("${clean[@]}" TNT_SHM_STREAM=on "$tnt" -n 2 --pin core -- "$ours" --max "$max") ;;
    nostream) cmd=("${clean[@]}" TNT_SHM_STREAM=off "$tnt" -n 2 --pin core -- "$ours" --max "$max") ;;
    cma)      cmd=("${clean[@]}" TNT_SHM_CMA=1 "$tnt" -n 2 --pin core -- "$ours" --max "$max") ;;
    post)     cmd=("${clean[@]}" "$tnt" -n 2 --pin core -- "$ours" --post --max "$post_max") ;;
    ompi)     cmd=(mpirun --allow-run-as-root --bind-to core -np 2 "$mpi" --max "$max") ;;
    *)        echo "run_all.sh: unknown program $1 (tnt, stream, nostream, cma, ompi, post)" >&2; exit 2 ;;
  esac
}

# One run: probe, program, probe; the file keeps both probe lines.
run() {
  local prog=$1 round=$2 f=$out/runs/$1.$2.txt
  [ "$prog" != ompi ] || [ $have_mpi = 1 ] || return 0
  set_cmd "$prog"
  echo "# command: ${cmd[*]}" > "$f"
  echo "# probe_before: $("$probe")" >> "$f"
  if ! timeout 900 "${cmd[@]}" >> "$f"; then
    echo "run_all.sh: $prog round $round failed" >&2
    echo "# failed" >> "$f"
  fi
  echo "# probe_after: $("$probe")" >> "$f"
  echo "run_all.sh: round $round $prog: $(grep -h '^# probe' "$f" | sed 's/.*placement //' | tr '\n' ' ')" >&2
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs"
  echo "mpirun: $(mpirun --version 2>/dev/null | head -1 || echo none)"
  echo "libtnt streaming kernel: $("${clean[@]}" TNT_LOG_LEVEL=debug "$tnt" -n 1 -- "$ours" --max 4 2>&1 | grep -o 'streaming [a-z]* from [0-9]* KiB ([a-z0-9]*)' | head -1)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"

read -r -a progs <<< "$programs"
for r in $(seq 1 "$repeats"); do
  echo "run_all.sh: round $r of $repeats (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  if [ $((r % 2)) = 1 ]; then
    for p in "${progs[@]}"; do run "$p" "$r"; done
  else
    for ((i = ${#progs[@]} - 1; i >= 0; i--)); do run "${progs[$i]}" "$r"; done
  fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"

"$python" "$(dirname "$0")/allreduce_report.py" "$out"
