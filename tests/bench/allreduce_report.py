#!/usr/bin/env python3
"""Summarises tests/bench/run_all.sh: per vCPU placement (close, far) and
size, the median latency and bus bandwidth of each program and the
tarantella/OpenMPI ratios. Runs whose probes before and after disagree (the
placement changed during the run) or that failed are dropped and counted.
Writes OUT/summary.md and, with matplotlib, OUT/allreduce_2ranks.png.

    allreduce_report.py OUT_DIR
"""
import glob
import os
import re
import statistics
import sys

PROGRAMS = ["tnt", "stream", "nostream", "cma", "ompi", "post"]
LABELS = {"tnt": "libtnt (defaults: TNT_SHM_STREAM=auto)", "stream": "libtnt, TNT_SHM_STREAM=on",
          "nostream": "libtnt, TNT_SHM_STREAM=off", "cma": "libtnt, TNT_SHM_CMA=1",
          "ompi": "OpenMPI 4.1 MPI_Allreduce", "post": "libtnt post + wait"}
PROBE = re.compile(r"rtt_ns\s+([\d.]+)\s+handoff_GBps\s+([\d.]+)\s+placement\s+(\w+)")


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def load_runs(out):
    runs, dropped = [], []
    for path in sorted(glob.glob(os.path.join(out, "runs", "*.txt"))):
        prog, rnd = os.path.basename(path).split(".")[:2]
        probes, rows, failed = [], {}, False
        for line in open(path):
            m = PROBE.search(line)
            if line.startswith("# probe") and m:
                probes.append((float(m.group(1)), float(m.group(2)), m.group(3)))
            elif line.startswith("# failed"):
                failed = True
            elif line.strip() and not line.startswith("#"):
                cols = line.split()
                try:
                    rows[int(cols[0])] = (float(cols[1]), float(cols[3]))
                except (ValueError, IndexError):
                    pass
        if failed or len(probes) != 2 or probes[0][2] != probes[1][2] or not rows:
            why = "failed" if failed else "probes %s" % " -> ".join(p[2] for p in probes)
            dropped.append((prog, rnd, why))
            continue
        runs.append(dict(prog=prog, round=int(rnd), placement=probes[0][2], probes=probes,
                         rows=rows))
    return runs, dropped


def main():
    out = sys.argv[1]
    runs, dropped = load_runs(out)
    placements = [p for p in ("close", "far") if any(r["placement"] == p for r in runs)]
    placements += sorted({r["placement"] for r in runs} - set(placements))
    med = {}
    for pl in placements:
        for prog in PROGRAMS:
            sel = [r for r in runs if r["placement"] == pl and r["prog"] == prog]
            sizes = sorted({s for r in sel for s in r["rows"]})
            for s in sizes:
                vals = [r["rows"][s] for r in sel if s in r["rows"]]
                med[(pl, prog, s)] = (statistics.median(v[0] for v in vals),
                                      statistics.median(v[1] for v in vals), len(vals))

    lines = []
    machine = os.path.join(out, "machine.txt")
    if os.path.exists(machine):
        lines += [open(machine).read().strip().replace("\n", "  \n"), ""]
    lines.append("Runs kept: %d; dropped (placement changed during the run, or failed): %d%s"
                 % (len(runs), len(dropped),
                    "" if not dropped else " (" + ", ".join("%s #%s: %s" % d for d in dropped)
                    + ")"))
    for pl in placements:
        rtts = [p[0] for r in runs if r["placement"] == pl for p in r["probes"]]
        bws = [p[1] for r in runs if r["placement"] == pl for p in r["probes"]]
        counts = {prog: sum(1 for r in runs if r["placement"] == pl and r["prog"] == prog)
                  for prog in PROGRAMS}
        lines += ["", "### %s placement" % pl, "",
                  "Probe: cache-line round trip median %.0f ns, cache-to-cache hand-off median "
                  "%.1f GB/s; runs: %s." % (statistics.median(rtts), statistics.median(bws),
                                            ", ".join("%s %d" % kv for kv in counts.items())),
                  "",
                  "| size | tnt lat (µs) | tnt busbw (GB/s) | stream=on busbw | stream=off busbw | "
                  "OpenMPI lat (µs) | OpenMPI busbw (GB/s) | tnt/OpenMPI busbw | "
                  "tnt/OpenMPI lat | post+wait lat (µs) |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        sizes = sorted({k[2] for k in med if k[0] == pl})
        for s in sizes:
            def get(prog, i, fmt):
                v = med.get((pl, prog, s))
                return fmt % v[i] if v else "-"
            t, o = med.get((pl, "tnt", s)), med.get((pl, "ompi", s))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                human(s), get("tnt", 0, "%.2f"), get("tnt", 1, "%.3f"),
                get("stream", 1, "%.3f"), get("nostream", 1, "%.3f"), get("ompi", 0, "%.2f"), get("ompi", 1, "%.3f"),
                "%.2f×" % (t[1] / o[1]) if t and o and o[1] > 0 else "-",
                "%.2f×" % (t[0] / o[0]) if t and o and o[0] > 0 else "-",
                get("post", 0, "%.2f")))
    lines += ["", "Medians over the kept runs of each program in each placement."]
    text = "\n".join(lines) + "\n"
    open(os.path.join(out, "summary.md"), "w").write(text)
    print(text)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no plot: install python3-matplotlib)")
        return
    if not placements:
        return
    fig, axes = plt.subplots(len(placements), 2, figsize=(11, 4.0 * len(placements)),
                             squeeze=False)
    for row, pl in enumerate(placements):
        a1, a2 = axes[row]
        for prog in PROGRAMS:
            xs = sorted(k[2] for k in med if k[0] == pl and k[1] == prog)
            if not xs:
                continue
            a1.plot(xs, [med[(pl, prog, s)][0] for s in xs], marker="o", label=LABELS[prog])
            if prog != "post":
                a2.plot(xs, [med[(pl, prog, s)][1] for s in xs], marker="o", label=LABELS[prog])
        for a, t, y in ((a1, "latency", "µs"), (a2, "bus bandwidth", "GB/s")):
            a.set_xscale("log", base=2)
            a.set_xlabel("message size (bytes)")
            a.set_ylabel(y)
            a.set_title("%s placement: allreduce, 2 ranks, float32 sum, %s (median)" % (pl, t),
                        fontsize=9)
            a.grid(True, which="both", alpha=0.3)
        a1.set_yscale("log")
        a1.legend(fontsize=7)
        a2.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "allreduce_2ranks.png")
    fig.savefig(path, dpi=110)
    print("plot: " + path)


if __name__ == "__main__":
    main()
