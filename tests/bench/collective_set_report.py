#!/usr/bin/env python3
"""Median latency and bus bandwidth per program, placement, op and size
from run_collective_set.sh's raw outputs (runs/<program>.<round>.txt).
A run counts only when its two vcpu_probe lines name the same placement.
Writes summary.md next to runs/ and prints it."""
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def placement(lines):
    found = [re.search(r"placement (\w+)", l) for l in lines if l.startswith("# probe_")]
    names = [m.group(1) for m in found if m]
    return names[0] if len(names) == 2 and names[0] == names[1] else None


def main(out):
    out = Path(out)
    rows = defaultdict(list)  # (placement, op, size, program) -> [(lat, busbw)]
    kept = defaultdict(int)
    for f in sorted((out / "runs").glob("*.txt")):
        program = f.name.split(".")[0]
        lines = f.read_text().splitlines()
        where = placement(lines)
        if where is None or any(l.startswith("# failed") for l in lines):
            continue
        kept[(program, where)] += 1
        for l in lines:
            p = l.split()
            # op size avg_lat busbw [max_lat (--isolated)]
            if len(p) in (4, 5) and not l.startswith("#"):
                rows[(where, p[0], int(p[1]), program)].append(
                    tuple(float(x) for x in p[2:]))
    layout = sys.argv[2] if len(sys.argv) > 2 else "1x2"
    nodes, per_node = (int(x) for x in layout.split("x"))
    where_run = ("one node" if nodes == 1 else
                 f"{nodes} simulated nodes x {per_node} (UCX over loopback TCP)")
    text = [f"# Collective set: libtnt (tnt) against OpenMPI (ompi), {nodes * per_node} ranks, "
            f"{where_run}", "",
            "Runs kept (probes agree): " +
            ", ".join(f"{p} {w}: {n}" for (p, w), n in sorted(kept.items())), ""]
    for where in ("close", "far"):
        keys = sorted({(op, size) for (w, op, size, _) in rows if w == where})
        if not keys:
            continue
        isolated = any(len(v[0]) == 3 for (w, *_), v in rows.items() if w == where)
        text += [f"## {where} placement (medians)", "",
                 "| op | size (B) | tnt latency (us) | ompi latency (us) | tnt / ompi | tnt busbw (GB/s) | ompi busbw (GB/s) |"
                 + (" tnt slowest rank (us) | ompi slowest rank (us) |" if isolated else ""),
                 "|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if isolated else "")]
        for op, size in keys:
            t = rows.get((where, op, size, "tnt"), [])
            o = rows.get((where, op, size, "ompi"), [])
            if not t or not o:
                continue
            tl, ol = statistics.median(x[0] for x in t), statistics.median(x[0] for x in o)
            tb, ob = statistics.median(x[1] for x in t), statistics.median(x[1] for x in o)
            line = f"| {op} | {size} | {tl:.2f} | {ol:.2f} | {tl / ol:.2f} | {tb:.3f} | {ob:.3f} |"
            if isolated and all(len(x) == 3 for x in t + o):
                tm, om = statistics.median(x[2] for x in t), statistics.median(x[2] for x in o)
                line += f" {tm:.2f} | {om:.2f} |"
            text.append(line)
        text.append("")
    (out / "summary.md").write_text("\n".join(text) + "\n")
    print("\n".join(text))


if __name__ == "__main__":
    main(sys.argv[1])
