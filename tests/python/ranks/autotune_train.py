"""TNT_FUSION_THRESHOLD=auto on real ranks (tests/python/test_autotune.py).

  autotune_train.py OUT bitwise   trains an MLP with threshold "auto" through
      DistributedOptimizer and through tnt.Model.fit (several short fits, so
      the tuning goes on across them), then the same from the same start
      with the threshold fixed at the size auto chose; the parameters must
      be bitwise equal, and equal on every rank.
  autotune_train.py OUT inject    every rank's clock reports different step
      times per size; all ranks must choose the size with the smallest
      slowest-rank time, which is no rank's own favourite.
  autotune_train.py OUT thresholds  trains with each fixed size (0, 256,
      1024, 4096 KiB) and reports whether the results are bitwise equal; they
      must be wherever libtnt says the summation order is fixed
      (allreduce_order_fixed), which is what makes tuning safe.

Rank 0 writes OUT (JSON): what was tried and chosen, and the checks' results.
Every check that fails raises, so the rank exits non-zero.
"""
import json
import sys

import numpy as np
import torch

import tarantella as tnt
from tarantella import _tnt
from tarantella.collectives import allgather_concat

STEPS = 18          # DistributedOptimizer run: 1 + 4 sizes x (1 warm-up + 2 timed) < 18
TUNE_STEPS = 2
FIT_STEPS = 8       # tnt.Model: steps per fit; 5 fits of 8 cover 1 + 4 x (1 + 5) = 25
FITS = 5


def make_model():
    # About 1.7 MiB of float32 gradients in 8 tensors from 40 B to 1 MiB:
    # 0, 256 KiB, 1 MiB and 4 MiB give four different bucket plans, and the
    # buckets cross TNT_SHM_SMALL_KB (512 KiB at 2 ranks), so both the
    # one-phase and the staged shared-memory algorithms reduce them.
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10))


def batch(rank, step, n=8):
    # Different data per rank and step, so the reduction adds different values.
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, 64, generator=g), torch.randint(0, 10, (n,), generator=g)


def train_optimizer(threshold_kb, rank, steps=STEPS, clock=None):
    model = make_model()
    tnt.broadcast_parameters(model)
    reducer = tnt.GradientReducer(model, threshold_kb=threshold_kb, tune_steps=TUNE_STEPS)
    if clock is not None:
        reducer.tuner.clock = clock(reducer)
    opt = tnt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                   reducer=reducer)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(steps):
        x, y = batch(rank, step)
        opt.zero_grad(set_to_none=False)
        loss_fn(model(x), y).backward()
        opt.step()
    tuning = reducer.fusion_tuning
    reducer.close()
    return model, tuning


def train_fit(threshold_kb, rank, size):
    model = tnt.Model(make_model())
    model.compile(torch.optim.SGD(model.parameters(), lr=0.05), "sparse_categorical_crossentropy",
                  tnt_fusion_threshold_kb=threshold_kb)
    global_batch = 4 * size
    for fit in range(FITS):
        g = torch.Generator().manual_seed(fit)
        x = torch.randn(global_batch * FIT_STEPS, 64, generator=g).numpy()
        y = torch.randint(0, 10, (global_batch * FIT_STEPS,), generator=g).numpy()
        model.fit(x, y, batch_size=global_batch, epochs=1, shuffle=False, verbose=0)
    tuner = model._fusion_tuner
    return model.module, (tuner.summary() if tuner is not None else None)


def bits(module):
    return np.concatenate([p.detach().numpy().ravel().view(np.int32)
                           for p in module.parameters()])


def same_on_every_rank(values):
    gathered = allgather_concat(np.asarray(values)[None, :])
    return bool((gathered == gathered[0]).all())


def bitwise(out, rank, size):
    report = {"ranks": size, "nodes": _tnt.num_nodes()}
    tuned, tuning = train_optimizer("auto", rank)
    report["optimizer"] = tuning
    if tuning["not_tuned"] is not None:
        report["not_tuned"] = tuning["not_tuned"]
        if rank == 0:
            with open(out, "w") as f:
                json.dump(report, f)
        return
    chosen = tuning["chosen_kb"]
    assert chosen is not None, "tuning did not finish in %d steps: %r" % (STEPS, tuning)
    assert len(tuning["candidates_kb"]) >= 3, tuning
    assert same_on_every_rank([chosen]), "ranks chose different sizes"
    fixed, _ = train_optimizer(chosen, rank)
    a, b = bits(tuned), bits(fixed)
    report["optimizer_equal"] = bool(np.array_equal(a, b))
    report["optimizer_differing"] = int((a != b).sum())
    report["optimizer_same_on_ranks"] = same_on_every_rank(a)

    fit_tuned, fit_tuning = train_fit("auto", rank, size)
    report["fit"] = fit_tuning
    assert fit_tuning is not None and fit_tuning["chosen_kb"] is not None, \
        "tnt.Model: tuning did not finish in %d fits: %r" % (FITS, fit_tuning)
    fit_fixed, _ = train_fit(fit_tuning["chosen_kb"], rank, size)
    a, b = bits(fit_tuned), bits(fit_fixed)
    report["fit_equal"] = bool(np.array_equal(a, b))
    report["fit_differing"] = int((a != b).sum())
    report["fit_same_on_ranks"] = same_on_every_rank(a)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(report, f)
    assert report["optimizer_equal"] and report["fit_equal"], report
    assert report["optimizer_same_on_ranks"] and report["fit_same_on_ranks"], report


# Fake step times (ms) per rank and size: rank 0 would pick 256 KiB, rank 1
# 0 KiB, rank 2 1024 KiB; the slowest rank's times are 10, 7, 9, 5, so every
# rank must choose 4096 KiB.
INJECTED = [{0: 10.0, 256: 1.0, 1024: 9.0, 4096: 4.0},
            {0: 1.0, 256: 7.0, 1024: 9.0, 4096: 5.0},
            {0: 3.0, 256: 3.0, 1024: 2.0, 4096: 3.0}]


def inject(out, rank, size):
    table = INJECTED[rank % len(INJECTED)]

    def clock(reducer):
        now = [0.0]

        def tick():
            # Called once per step, at its end: the step that just ran used
            # the size being timed.
            now[0] += table[reducer.fusion_threshold_kb] / 1e3
            return now[0]
        return tick

    _, tuning = train_optimizer("auto", rank, clock=clock)
    assert tuning["candidates_kb"] == [0, 256, 1024, 4096], tuning
    chosen = tuning["chosen_kb"]
    agreed = [max(INJECTED[r % len(INJECTED)][kb] for r in range(size)) / 1e3
              for kb in tuning["candidates_kb"]]
    ok = same_on_every_rank([chosen]) and chosen == 4096 and \
        np.allclose(tuning["step_s"], agreed)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"tuning": tuning, "agreed_expected": agreed, "ok": ok}, f)
    assert ok, (tuning, agreed)


def thresholds(out, rank, size):
    results = [bits(train_optimizer(kb, rank)[0]) for kb in (0, 256, 1024, 4096)]
    equal = all(np.array_equal(results[0], r) for r in results[1:])
    fixed = bool(_tnt.allreduce_order_fixed())
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"nodes": _tnt.num_nodes(), "order_fixed": fixed, "equal": equal,
                       "differing": [int((results[0] != r).sum()) for r in results[1:]]}, f)
    assert equal or not fixed, "libtnt says the order is fixed, but thresholds differ"


def main():
    out, mode = sys.argv[1], sys.argv[2]
    rank, size = tnt.get_rank(), tnt.get_size()
    {"bitwise": bitwise, "inject": inject, "thresholds": thresholds}[mode](out, rank, size)


if __name__ == "__main__":
    main()
