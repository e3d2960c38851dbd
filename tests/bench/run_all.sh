#!/usr/bin/env bash
# Allreduce benchmark, libtnt against OpenMPI, 2 ranks, float32 sum, in place.
#
#   tests/bench/run_all.sh BUILD_DIR [REPEATS]      (make bench runs it)
#
# Runs, REPEATS times (default 5) and alternating the order each round so
# that the drift of this VM's two vCPUs hits every program alike:
#   tnt      tarantella -n 2 --pin core -- allreduce_bench  (defaults: staged copies)
#   cma      the same with TNT_SHM_CMA=1 (single-copy process_vm_readv/writev)
#   ompi     mpirun --bind-to core -np 2 mpi_allreduce_bench       (MPI_Allreduce)
# and prints, per size, the median latency and bus bandwidth of each, plus
# the ratios. Raw outputs, the summary (summary.md) and a plot
# (allreduce_2ranks.png, with python3-matplotlib) go to
# ${TNT_BENCH_OUT:-BUILD_DIR/bench-allreduce}. Never fails on speed.
set -euo pipefail

build=${1:?usage: run_all.sh BUILD_DIR [REPEATS]}
repeats=${2:-5}
out=${TNT_BENCH_OUT:-$build/bench-allreduce}
python=${TNT_BENCH_PYTHON:-/usr/bin/python3}
tnt=$build/bin/tarantella
ours=$build/bin/allreduce_bench
mpi=$build/bin/mpi_allreduce_bench
max=${TNT_BENCH_MAX_BYTES:-268435456}
mkdir -p "$out"
rm -f "$out"/*.txt

for f in "$tnt" "$ours"; do
  [ -x "$f" ] || { echo "run_all.sh: $f not built" >&2; exit 1; }
done
pin=()
if "$tnt" --help 2>&1 | grep -q -- '--pin MODE'; then
  pin=(--pin core)
else
  echo "run_all.sh: this launcher has no --pin; libtnt runs unpinned" >&2
fi
have_mpi=0
if [ -x "$mpi" ] && command -v mpirun >/dev/null; then
  have_mpi=1
else
  echo "run_all.sh: mpi_allreduce_bench or mpirun missing; no OpenMPI comparison" >&2
fi

run_tnt()    { env -u TNT_SHM_CMA -u TNT_SHM_STAGING_KB -u TNT_SHM_SMALL_KB timeout 900 "$tnt" -n 2 "${pin[@]}" -- "$ours" --max "$max" > "$out/tnt.$1.txt"; }
run_cma()    { TNT_SHM_CMA=1 timeout 900 "$tnt" -n 2 "${pin[@]}" -- "$ours" --max "$max" > "$out/cma.$1.txt"; }
run_ompi()   { [ $have_mpi = 1 ] || return 0
               timeout 900 mpirun --allow-run-as-root --bind-to core -np 2 "$mpi" --max "$max" > "$out/ompi.$1.txt"; }

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
  echo "mpirun: $(mpirun --version 2>/dev/null | head -1 || echo none)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/machine.txt"

for r in $(seq 1 "$repeats"); do
  echo "run_all.sh: round $r of $repeats (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  if [ $((r % 2)) = 1 ]; then
    run_tnt "$r"; run_cma "$r"; run_ompi "$r"
  else
    run_ompi "$r"; run_cma "$r"; run_tnt "$r"
  fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/machine.txt"

"$python" - "$out" <<'PY'
import glob, os, statistics, sys
out = sys.argv[1]
progs = ["tnt", "cma", "ompi"]
data = {}
for p in progs:
    for f in sorted(glob.glob(os.path.join(out, p + ".*.txt"))):
        for line in open(f):
            cols = line.split()
            if not cols or line.startswith("#"):
                continue
            size, lat, busbw = int(cols[0]), float(cols[1]), float(cols[3])
            data.setdefault(p, {}).setdefault(size, []).append((lat, busbw))
med = {p: {s: (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals), len(vals))
           for s, vals in d.items()} for p, d in data.items()}

def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%d %s" % (n // div, unit)
    return "%d B" % n

sizes = sorted(set().union(*[set(d) for d in med.values()]))
lines = [open(os.path.join(out, "machine.txt")).read().strip().replace("\n", "  \n"), "",
         "| size | tnt lat (µs) | tnt busbw (GB/s) | CMA lat (µs) | CMA busbw (GB/s) | "
         "OpenMPI lat (µs) | OpenMPI busbw (GB/s) | tnt/OpenMPI busbw | tnt/OpenMPI lat |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for s in sizes:
    row = [human(s)]
    for p in progs:
        if s in med.get(p, {}):
            row += ["%.2f" % med[p][s][0], "%.3f" % med[p][s][1]]
        else:
            row += ["-", "-"]
    if s in med.get("tnt", {}) and s in med.get("ompi", {}):
        row += ["%.2f×" % (med["tnt"][s][1] / med["ompi"][s][1]),
                "%.2f×" % (med["tnt"][s][0] / med["ompi"][s][0])]
    else:
        row += ["-", "-"]
    lines.append("| " + " | ".join(row) + " |")
runs = max((v[2] for d in med.values() for v in d.values()), default=0)
lines.append("")
lines.append("Medians over %d runs of each program." % runs)
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(no plot: install python3-matplotlib)")
    sys.exit(0)
labels = {"tnt": "libtnt (default: staged)", "cma": "libtnt (TNT_SHM_CMA=1)",
          "ompi": "OpenMPI 4.1 MPI_Allreduce"}
fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
for p in progs:
    if p not in med:
        continue
    xs = sorted(med[p])
    a1.plot(xs, [med[p][s][0] for s in xs], marker="o", label=labels[p])
    a2.plot(xs, [med[p][s][1] for s in xs], marker="o", label=labels[p])
for a, t, y in ((a1, "latency (median)", "µs"), (a2, "bus bandwidth (median)", "GB/s")):
    a.set_xscale("log", base=2)
    a.set_xlabel("message size (bytes)")
    a.set_ylabel(y)
    a.set_title("allreduce, 2 ranks, float32 sum: " + t)
    a.grid(True, which="both", alpha=0.3)
a1.set_yscale("log")
a2.legend()
fig.tight_layout()
fig.savefig(os.path.join(out, "allreduce_2ranks.png"), dpi=110)
print("plot: " + os.path.join(out, "allreduce_2ranks.png"))
PY
