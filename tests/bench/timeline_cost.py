#!/usr/bin/env python3
"""The timeline's cost per training step, measured in parts (docs/timeline.md).

Whole-run A/B timings of digits cannot resolve 2% (runs of one program
spread by about 10% on this machine), so this measures what recording adds
to each step directly, on every rank, with the calls the training loop
makes (python/tarantella/_fit_loop.py and optimizers.py):

  python_off_ns  the loop's per-step checks when no timeline records: two
                 timeline.active() calls (the step and synchronize)
  python_on_ns   the same step's recording when one does: two now_ns()
                 pairs, record_step and record_synchronize
  allreduce_off_us / allreduce_on_us
                 a 4-byte tnt.allreduce_(x, check=False) through the Python
                 API, without and inside tnt.timeline(path), alternating
                 blocks (each collective records its own events in C; the
                 C benchmark, allreduce_bench with TNT_TIMELINE set and
                 unset, resolves that part better)

Run under the launcher, e.g.
  build/bin/tarantella -n 2 -- python3 tests/bench/timeline_cost.py
Rank 0 prints one JSON line (prefix "RESULT "). A benchmark, never a test.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np

import tarantella as tnt
from tarantella import timeline as _timeline


def per_call_ns(fn, calls):
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls


def step_hooks_off():
    # _fit_loop.py: the step's start; optimizers.py: synchronize's start.
    _ = _timeline.now_ns() if _timeline.active() else 0
    _ = _timeline.now_ns() if _timeline.active() else 0


def step_hooks_on():
    start = _timeline.now_ns() if _timeline.active() else 0
    sync = _timeline.now_ns() if _timeline.active() else 0
    _timeline.record_synchronize(sync, _timeline.now_ns())
    _timeline.record_step(start, _timeline.now_ns())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed block")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks of each mode")
    args = parser.parse_args()
    tnt.init()
    x = np.ones(1, dtype=np.float32)
    result = {"ranks": tnt.get_size(), "calls": args.calls, "blocks": args.blocks,
              "python_off_ns": [], "python_on_ns": [], "allreduce_off_us": [],
              "allreduce_on_us": []}
    with tempfile.TemporaryDirectory() as tmp:
        for block in range(args.blocks):
            for mode in (("off", "on") if block % 2 == 0 else ("on", "off")):
                path = os.path.join(tmp, "tl-%d-%s.json" % (block, mode))
                tnt.barrier()
                if mode == "on":
                    with tnt.timeline(path):
                        py = per_call_ns(step_hooks_on, args.calls)
                        tnt.barrier()
                        ar = per_call_ns(lambda: tnt.allreduce_(x, check=False), args.calls)
                else:
                    py = per_call_ns(step_hooks_off, args.calls)
                    tnt.barrier()
                    ar = per_call_ns(lambda: tnt.allreduce_(x, check=False), args.calls)
                result["python_%s_ns" % mode].append(py)
                result["allreduce_%s_us" % mode].append(ar / 1000.0)
    for key in ("python_off_ns", "python_on_ns", "allreduce_off_us", "allreduce_on_us"):
        result[key + "_median"] = statistics.median(result[key])
    if tnt.get_rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
