#!/usr/bin/env python3
"""Where a tnt.Model.fit step of train_bench.py's MLP workloads goes.

Wraps Model._train_step (zero_grad, forward, backward with the gradient
hooks, synchronize = waiting for the fused allreduce, optimizer step) and
GradientReducer._mark with time.perf_counter, runs fit windows of 40 steps
as train_bench.py does, and prints per window, on rank 0, the median of each
phase over steps 2..40 (`<phase>_med`), the first step's (`<phase>_first`:
it makes the flat gradient buffer), the time the hooks spent marking
gradients per step, and the window's mean step time (`window_step`).

  build/bin/tarantella -n 2 -- /usr/bin/python3 tests/bench/train_profile.py mlp2 2
  build/bin/tarantella -n 1 -- /usr/bin/python3 tests/bench/train_profile.py mlp1 2
  (OMP_NUM_THREADS=1 PYTHONPATH=build/python; last argument: timed windows)

The floor with both vCPUs busy: two singletons at once, one per CPU,
  taskset -c 0 /usr/bin/python3 tests/bench/train_profile.py mlp1 2 &
  taskset -c 1 /usr/bin/python3 tests/bench/train_profile.py mlp1 2
Not a test: it never fails on speed.
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_bench  # noqa: E402
import tarantella as tnt  # noqa: E402
from tarantella import model as tnt_model, optimizers as tnt_optimizers  # noqa: E402

STEPS = 40
T = {}


def add(key, value):
    T.setdefault(key, []).append(value)


def wrap_mark():
    orig = tnt_optimizers.GradientReducer._mark

    def mark(self, i, from_backward=False):
        t0 = time.perf_counter()
        orig(self, i, from_backward)
        add("mark", time.perf_counter() - t0)
    tnt_optimizers.GradientReducer._mark = mark


def train_step(self, xb, yb, local_n, global_n):
    """Model._train_step without metrics (the MLP workloads have none)."""
    pc = time.perf_counter
    t0 = pc()
    opt = self.optimizer
    opt.zero_grad(set_to_none=False)
    reducer = self._reducer
    if reducer is not None:
        reducer.set_micro_batch(local_n, global_n)
    t1 = pc()
    out, loss = self._forward_loss(xb, yb)
    t2 = pc()
    loss.backward()
    t3 = pc()
    loss_value = float(loss.detach())
    if reducer is not None:
        reducer.synchronize()
    t4 = pc()
    self._clip_gradients()
    opt.step()
    t5 = pc()
    for key, a, b in (("zero", t0, t1), ("fwd", t1, t2), ("bwd", t2, t3), ("sync", t3, t4),
                      ("optstep", t4, t5), ("step", t0, t5)):
        add(key, b - a)
    return loss_value * local_n, []


def main():
    workload = sys.argv[1] if len(sys.argv) > 1 else "mlp2"
    windows = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if workload not in ("mlp2", "mlp1", "mlp64"):
        sys.exit("train_profile: workload must be mlp2, mlp1 or mlp64")
    wrap_mark()
    tnt_model.Model._train_step = train_step
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    make, make_opt, x, y, _, _, batch, _ = train_bench.workload(workload, STEPS)
    torch.manual_seed(0)
    model = tnt.Model(make())
    model.compile(make_opt(model.parameters()), "sparse_categorical_crossentropy", None)
    for w in range(windows + 1):
        T.clear()
        tnt.barrier()
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
        tnt.barrier()
        window = (time.perf_counter() - t0) / STEPS
        if w == 0 or tnt.get_rank() != 0:
            continue
        d = {"window_step": window, "mark_per_step": sum(T.get("mark", [0.0])) / STEPS}
        for key, v in T.items():
            if key != "mark":
                d[key + "_med"] = statistics.median(v[1:])
                d[key + "_first"] = v[0]
        print(" ".join("%s=%.2fms" % (k, v * 1e3) for k, v in sorted(d.items())), flush=True)


if __name__ == "__main__":
    main()
