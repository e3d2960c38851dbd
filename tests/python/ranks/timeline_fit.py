"""Rank program for test_timeline.py: a small digits model trained while a
timeline records.

    timeline_fit.py fit            # tnt.Model.fit, 2 epochs (TNT_TIMELINE set by the test)
    timeline_fit.py custom PATH    # a custom loop inside `with tnt.timeline(PATH):`,
                                   # steps marked with tnt.timeline.step()
"""
import os
import sys

import torch
from sklearn.datasets import load_digits

import tarantella as tnt

torch.manual_seed(0)
digits = load_digits()
x = torch.tensor(digits.data[:384], dtype=torch.float32) / 16.0
y = torch.tensor(digits.target[:384])
module = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                             torch.nn.ReLU(), torch.nn.Linear(32, 10))
mode = sys.argv[1]

if mode == "fit":
    model = tnt.Model(module)
    model.compile(optimizer=torch.optim.SGD(module.parameters(), lr=0.1),
                  loss=torch.nn.CrossEntropyLoss(), metrics=["accuracy"])
    model.fit(x, y, batch_size=64, epochs=2, verbose=0)
    print("OK fit rank %d" % tnt.get_rank())
elif mode == "custom":
    path = sys.argv[2]
    tnt.broadcast_parameters(module, root=0)
    opt = tnt.DistributedOptimizer(torch.optim.SGD(module.parameters(), lr=0.1), module)
    sampler = tnt.data.DistributedSampler(len(x), 64, shuffle=True, seed=1)
    assert not tnt.timeline.active()
    with tnt.timeline(path):
        assert tnt.timeline.active()
        for step in range(len(sampler)):
            with tnt.timeline.step():
                idx, global_count = sampler.step_info(step)
                opt.zero_grad()
                opt.set_micro_batch(len(idx), global_count)
                torch.nn.functional.cross_entropy(module(x[idx]), y[idx]).backward()
                opt.step()
    # Written when the block ends, before the job ends.
    assert not tnt.timeline.active()
    assert tnt.get_rank() != 0 or os.path.exists(path), path
    print("OK custom rank %d steps %d" % (tnt.get_rank(), len(sampler)))
