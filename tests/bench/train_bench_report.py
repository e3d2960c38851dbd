#!/usr/bin/env python3
"""Summarises tests/bench/run_train_bench.sh results: medians per backend
and workload, the tnt/DDP ratios against their goals, mlp2 against the
compute floor (mlp1: batch 1 on one rank), separately for each vCPU
placement (runs whose two probes disagree are dropped), and (with
matplotlib) the plots DIR/train_relative_<placement>.png and
DIR/train_runs_<placement>.png.

    train_bench_report.py RESULTS.jsonl [MORE.jsonl ...] [--plots DIR]
"""
import argparse
import json
import os
import statistics

WORKLOADS = {
    # name: (metric, label, goal ratio tnt/ddp)
    "digits": ("epoch_s", "digits CNN, B=64: s/epoch", 0.85),
    "mlp64": ("step_s", "10.5M MLP, B=64: s/step", 0.95),
    "mlp2": ("step_s", "10.5M MLP, B=2: s/step", 0.5),
}
FLOOR_GOAL = 1.15  # mlp2 on 2 ranks against mlp1 (batch 1) on one


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="+", help="results.jsonl files (runs are pooled)")
    parser.add_argument("--plots", default=None)
    args = parser.parse_args()
    runs, dropped = [], 0
    for i, path in enumerate(args.results):
        for line in open(path):
            if line.strip():
                r = dict(json.loads(line), file=i)
                probe = r.get("probe")
                if probe and probe[0] != probe[1]:
                    dropped += 1
                    continue
                r["placement"] = probe[0] if probe else "unprobed"
                runs.append(r)
    print("Runs dropped because the vCPU placement changed during them: %d\n" % dropped)
    for pl in sorted({r["placement"] for r in runs}, key=lambda p: (p != "close", p)):
        print("### %s placement\n" % pl)
        report([r for r in runs if r["placement"] == pl], args.plots, pl)
        print()


def compression_report(runs):
    """Runs with 16-bit gradients beside the uncompressed ones: per workload,
    each program's median and its ratio to DDP uncompressed."""
    print("\nGradient compression (ratio: to DDP uncompressed, medians):\n")
    print("| workload | program | median | / DDP uncompressed | accuracy | runs |")
    print("|---|---|---|---|---|---|")
    for w, (metric, label, _goal) in WORKLOADS.items():
        ref = [r[metric] for r in runs
               if r["workload"] == w and r["backend"] == "ddp" and not r.get("compression")]
        if not ref:
            continue
        ref_med = statistics.median(ref)
        for b in ("tnt", "ddp"):
            for c in (None, "bf16", "fp16"):
                sel = [r for r in runs if r["workload"] == w and r["backend"] == b
                       and r.get("compression") == c]
                if not sel:
                    continue
                med = statistics.median([r[metric] for r in sel])
                acc = ("%.1f%%" % (100 * statistics.median([r["accuracy"] for r in sel]))
                       if "accuracy" in sel[0] else "-")
                print("| %s | %s%s | %.4f | %.2f | %s | %d |"
                      % (label, b, " " + c if c else "", med, med / ref_med, acc, len(sel)))


def report(runs, plots, placement):
    if any(r.get("compression") for r in runs):
        compression_report(runs)
        print()
    runs = [r for r in runs if not r.get("compression")]
    blas = sorted({r.get("blas", "?") for r in runs})
    loads = [r["load"] for r in runs if "load" in r]
    print("BLAS: %s; threads per rank: %s; runs: %d; load average before runs: median %.1f "
          "(min %.1f, max %.1f)\n" % (", ".join(blas), sorted({r.get("threads") for r in runs}),
                                      len(runs), statistics.median(loads) if loads else 0,
                                      min(loads or [0]), max(loads or [0])))
    print("| workload | tnt median | DDP median | tnt / DDP | paired ratio | goal | met | runs (tnt, DDP) |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for w, (metric, label, goal) in WORKLOADS.items():
        vals = {b: [r[metric] for r in runs if r["workload"] == w and r["backend"] == b]
                for b in ("tnt", "ddp")}
        if not vals["tnt"] or not vals["ddp"]:
            continue
        med = {b: statistics.median(v) for b, v in vals.items()}
        ratio = med["tnt"] / med["ddp"]
        summary[w] = (med, ratio, goal, vals)
        acc = ""
        if w == "digits":
            accs = {b: statistics.median([r["accuracy"] for r in runs
                                          if r["workload"] == w and r["backend"] == b])
                    for b in ("tnt", "ddp")}
            acc = " (test accuracy tnt %.1f%%, DDP %.1f%%)" % (100 * accs["tnt"],
                                                              100 * accs["ddp"])
        # Paired: the two programs of one repeat ran back to back, so their
        # ratio cancels most of the slow drift of the shared machine's load.
        pairs = {}
        for r in runs:
            if r["workload"] == w:
                pairs.setdefault((r.get("file", 0), r.get("repeat")), {})[r["backend"]] = r[metric]
        paired = [p["tnt"] / p["ddp"] for p in pairs.values() if "tnt" in p and "ddp" in p]
        print("| %s%s | %.4f | %.4f | %.2f | %s | <= %.2f | %s | %d, %d |"
              % (label, acc, med["tnt"], med["ddp"], ratio,
                 "%.2f" % statistics.median(paired) if paired else "-", goal,
                 "yes" if ratio <= goal else "no", len(vals["tnt"]), len(vals["ddp"])))
    floor = [r["step_s"] for r in runs if r["workload"] == "mlp1"]
    if floor and "mlp2" in summary:
        f = statistics.median(floor)
        t = summary["mlp2"][0]["tnt"]
        print("\nCompute floor (same MLP, batch 1, one rank): %.4f s/step (%d runs); tnt mlp2 "
              "on 2 ranks is %.2fx the floor (goal <= %.2f: %s)"
              % (f, len(floor), t / f, FLOOR_GOAL, "met" if t / f <= FLOOR_GOAL else "not met"))
    if plots and summary:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("\n(matplotlib missing: no plots)")
            return
        os.makedirs(plots, exist_ok=True)
        names = list(summary)
        fig, ax = plt.subplots(figsize=(7, 3.6))
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], [summary[n][0]["ddp"] / summary[n][0]["ddp"] for n in names],
               0.4, label="torch DDP (gloo)", color="#999999")
        ax.bar([x + 0.2 for x in xs], [summary[n][1] for n in names], 0.4,
               label="tarantella", color="#1f77b4")
        for x, n in zip(xs, names):
            ax.plot([x - 0.45, x + 0.45], [summary[n][2]] * 2, "r--", lw=1)
            ax.text(x + 0.2, summary[n][1] + 0.02, "%.2f" % summary[n][1], ha="center", fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([WORKLOADS[n][1] for n in names], fontsize=8)
        ax.set_ylabel("time relative to DDP (median)")
        short = ", ".join(sorted({b.split(" (")[0] for b in blas}))
        ax.set_title("tnt vs DDP, 2 ranks x 1 thread, %s, %s placement (red: goal)"
                     % (short, placement), fontsize=9)
        ax.set_ylim(0, 1.25)
        ax.legend(fontsize=8, loc="upper left", ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(plots, "train_relative_%s.png" % placement), dpi=110)
        fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.2))
        for ax, n in zip(axes if len(names) > 1 else [axes], names):
            vals = summary[n][3]
            ax.boxplot([vals["ddp"], vals["tnt"]], labels=["DDP", "tnt"])
            ax.set_title(WORKLOADS[n][1], fontsize=8)
            ax.set_ylim(bottom=0)
        fig.suptitle("every run (alternating programs)", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(plots, "train_runs_%s.png" % placement), dpi=110)
        print("\nplots: %s/train_relative_%s.png, %s/train_runs_%s.png"
              % (plots, placement, plots, placement))


if __name__ == "__main__":
    main()
