"""``python3 -m tarantella.timeline summary FILE [--png OUT.png]``: where
each training step's time went, per rank, from a timeline file
(docs/timeline.md defines every column). Reads the file only; needs no
libtnt and starts none.

For rank r and step k (the ``step`` event of that number on r):

- wait: the union of the main thread's waits inside the step, i.e. its
  ``synchronize`` events and the collectives it ran itself outside them
  (blocking calls such as the metrics' allreduce);
- waiting for the slowest rank: the part of r's ``synchronize`` before the
  last rank of the job started its own ``synchronize`` of step k (aligned
  clocks), i.e. time r could not have saved with faster communication;
- exposed communication: wait minus waiting for the slowest rank;
- compute: step time minus wait, so compute + exposed + slowest == step;
- hidden communication: collectives that ran on other threads (the
  progress thread) while the main thread was not waiting, overlapped with
  compute (not part of the sum).
"""
import argparse
import json
import sys


def _union(intervals):
    """Sorted, merged [start, end) intervals."""
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _length(intervals):
    return sum(e - s for s, e in intervals)


def _clip(intervals, lo, hi):
    return [[max(s, lo), min(e, hi)] for s, e in intervals if min(e, hi) > max(s, lo)]


def _subtract(a, b):
    """Parts of merged intervals a outside merged intervals b."""
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append([cur, bs])
            cur = max(cur, be)
        if cur < e:
            out.append([cur, e])
    return out


class Timeline:
    """A timeline file, split by rank: steps, waits and collectives."""

    def __init__(self, path):
        with open(path) as f:
            doc = json.load(f)
        self.other = doc.get("otherData", {})
        self.events = doc.get("traceEvents", [])
        self.lane_names = {}
        for ev in self.events:
            if ev.get("ph") == "M" and ev.get("name") == "thread_name":
                self.lane_names[(ev["pid"], ev["tid"])] = ev["args"]["name"]
        self.ranks = sorted({ev["pid"] for ev in self.events if "pid" in ev})
        self.main_lane = {}
        for (pid, tid), name in self.lane_names.items():
            if name == "main":
                self.main_lane[pid] = tid
        self.steps = {}  # rank -> {number: (start, end)}
        self.syncs = {}  # rank -> [(start, end, number)]
        self.colls = {}  # rank -> [(start, end, tid)]
        for ev in self.events:
            if ev.get("ph") != "X":
                continue
            pid, s = ev["pid"], ev["ts"]
            e = s + ev["dur"]
            if ev.get("cat") == "python" and ev["name"] == "step":
                self.steps.setdefault(pid, {})[ev["args"]["step"]] = (s, e)
            elif ev.get("cat") == "python" and ev["name"] == "synchronize":
                self.syncs.setdefault(pid, []).append((s, e, ev["args"]["step"]))
            elif ev.get("cat") == "collective":
                self.colls.setdefault(pid, []).append((s, e, ev["tid"]))

    def common_steps(self):
        """Step numbers every rank recorded, in order."""
        sets = [set(self.steps.get(r, {})) for r in self.ranks]
        return sorted(set.intersection(*sets)) if sets else []

    def breakdown(self):
        """{step: {rank: dict(step, compute, hidden, exposed, slowest)}} in
        microseconds."""
        result = {}
        for k in self.common_steps():
            arrival = {}
            for r in self.ranks:
                s, e = self.steps[r][k]
                starts = [ss for ss, se, n in self.syncs.get(r, []) if n == k and s <= ss <= e]
                if starts:
                    arrival[r] = min(starts)
            last = max(arrival.values()) if len(arrival) == len(self.ranks) else None
            per = {}
            for r in self.ranks:
                s, e = self.steps[r][k]
                main = self.main_lane.get(r)
                sync = _union([[ss, se] for ss, se, n in self.syncs.get(r, [])
                               if n == k and se > s and ss < e])
                main_colls = _union([[cs, ce] for cs, ce, tid in self.colls.get(r, [])
                                     if tid == main])
                waits = _union(_clip(sync + main_colls, s, e))
                other_colls = _union(_clip([[cs, ce] for cs, ce, tid in self.colls.get(r, [])
                                            if tid != main], s, e))
                wait = _length(waits)
                slowest = 0.0
                if last is not None and r in arrival:
                    slowest = _length(_clip(_clip(sync, s, e), arrival[r], last))
                per[r] = dict(step=e - s, compute=(e - s) - wait,
                              hidden=_length(_subtract(other_colls, waits)),
                              exposed=wait - slowest, slowest=slowest)
            result[k] = per
        return result


def _ms(us):
    return "%9.3f" % (us / 1e3)


def print_summary(tl, breakdown, max_steps, out):
    steps = sorted(breakdown)
    out.write("timeline: %d rank(s), %d step(s) on every rank; times in ms\n"
              % (len(tl.ranks), len(steps)))
    dropped = tl.other.get("dropped", [])
    if any(dropped):
        out.write("warning: events were dropped (per rank: %s); raise TNT_TIMELINE_EVENTS\n"
                  % dropped)
    header = "%6s %4s %9s %9s %9s %9s %9s\n" % ("step", "rank", "step", "compute", "exposed",
                                                "slowest", "hidden")
    out.write(header)
    shown = steps if max_steps is None or len(steps) <= max_steps else steps[:max_steps]
    for k in shown:
        for r in tl.ranks:
            b = breakdown[k][r]
            out.write("%6d %4d %s %s %s %s %s\n" % (k, r, _ms(b["step"]), _ms(b["compute"]),
                                                    _ms(b["exposed"]), _ms(b["slowest"]),
                                                    _ms(b["hidden"])))
    if len(shown) < len(steps):
        out.write("... %d more steps (--max-steps 0 shows all)\n" % (len(steps) - len(shown)))
    # The first step is warm-up (plans agreed, buffers made): left out of
    # the means when there are others.
    mean_steps = steps[1:] if len(steps) > 1 else steps
    for r in tl.ranks:
        n = len(mean_steps)
        if n == 0:
            continue
        mean = {c: sum(breakdown[k][r][c] for k in mean_steps) / n
                for c in ("step", "compute", "exposed", "slowest", "hidden")}
        out.write("%6s %4d %s %s %s %s %s\n" % ("mean", r, _ms(mean["step"]), _ms(mean["compute"]),
                                                _ms(mean["exposed"]), _ms(mean["slowest"]),
                                                _ms(mean["hidden"])))


_COLORS = {"step": "#dddddd", "synchronize": "#e4572e", "collective": "#2e86ab",
           "fusion": "#76b041", "phase": "#f3a712"}


def write_png(tl, path, num_steps):
    """A Gantt chart of num_steps steps (after the first) on every rank's
    lanes: steps in grey, synchronize in red, buckets in green, collectives
    in blue, phases in orange, stall warnings as black lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    steps = tl.common_steps()
    chosen = steps[1:1 + num_steps] if len(steps) > num_steps else steps[:num_steps]
    if not chosen:
        raise SystemExit("timeline: no step that every rank recorded; nothing to draw")
    lo = min(tl.steps[r][chosen[0]][0] for r in tl.ranks)
    hi = max(tl.steps[r][chosen[-1]][1] for r in tl.ranks)
    lanes = sorted({(ev["pid"], ev["tid"]) for ev in tl.events
                    if ev.get("ph") in ("X", "i") and "tid" in ev})
    rows = {lane: i for i, lane in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.55 * len(lanes)))
    # Outer events first, inner ones drawn over them, thinner.
    depth = {"step": 0, "synchronize": 1, "fusion": 2, "collective": 3, "phase": 4}

    def key_of(ev):
        return ev["name"] if ev.get("cat") == "python" else ev.get("cat")

    for ev in sorted(tl.events, key=lambda ev: depth.get(key_of(ev), 0)):
        lane = (ev.get("pid"), ev.get("tid"))
        if lane not in rows:
            continue
        y = len(lanes) - 1 - rows[lane]
        if ev.get("ph") == "i" and lo <= ev["ts"] <= hi:
            ax.vlines((ev["ts"] - lo) / 1e3, y - 0.45, y + 0.45, colors="black")
            continue
        if ev.get("ph") != "X":
            continue
        s, e = ev["ts"], ev["ts"] + ev["dur"]
        if e < lo or s > hi:
            continue
        key = key_of(ev)
        height = 0.8 - 0.13 * depth.get(key, 0)
        s, e = max(s, lo), min(e, hi)
        ax.broken_barh([((s - lo) / 1e3, max((e - s) / 1e3, 0.002))], (y - height / 2, height),
                       facecolors=_COLORS.get(key, "#999999"), edgecolor="none")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(["rank %d %s" % (pid, tl.lane_names.get((pid, tid), "thread %d" % tid))
                        for pid, tid in reversed(lanes)])
    ax.set_xlabel("ms since step %d began on the first rank" % chosen[0])
    ax.set_title("Tarantella timeline: steps %d-%d" % (chosen[0], chosen[-1]), pad=28)
    ax.legend(handles=[Patch(color=c, label=n) for n, c in _COLORS.items()],
              loc="lower center", bbox_to_anchor=(0.5, 1.06), fontsize="small",
              ncol=len(_COLORS), frameon=False)
    ax.set_xlim(0, (hi - lo) / 1e3)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m tarantella.timeline",
        description="Reads a timeline written with TNT_TIMELINE or tnt.timeline(path).")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="where each step's time went, per rank")
    p.add_argument("file")
    p.add_argument("--png", help="also draw a Gantt chart of a few steps into this PNG")
    p.add_argument("--png-steps", type=int, default=3, help="steps in the chart (default 3)")
    p.add_argument("--max-steps", type=int, default=20,
                   help="steps to print (default 20; 0 = all)")
    args = parser.parse_args(argv)
    if args.png:
        try:
            import matplotlib  # noqa: F401  (write_png draws with it)
        except ImportError as e:
            sys.stderr.write("timeline: --png needs matplotlib, which this Python cannot import "
                             "(%s); install it (Debian: apt install python3-matplotlib; "
                             "otherwise: pip install matplotlib), or leave out --png for the "
                             "summary alone\n" % e)
            return 2
    try:
        tl = Timeline(args.file)
    except (OSError, ValueError) as e:
        sys.stderr.write("timeline: cannot read %s: %s\n" % (args.file, e))
        return 2
    breakdown = tl.breakdown()
    if not breakdown:
        sys.stderr.write("timeline: %s has no step that every rank recorded (steps come from "
                         "tnt.Model.fit or tnt.timeline.step())\n" % args.file)
        return 1
    print_summary(tl, breakdown, args.max_steps or None, sys.stdout)
    if args.png:
        write_png(tl, args.png, max(args.png_steps, 1))
        sys.stdout.write("timeline: wrote %s\n" % args.png)
    return 0
