"""Rank script: the default shuffle seed comes from torch's global generator.

Writes <outdir>/seed.rank<r>.npz with the weights after fit (shuffled, no
shuffle_seed) under torch.manual_seed(5) and under torch.manual_seed(6),
and with an explicit shuffle_seed=3 under both. test_model_inputs.py runs it
on 1 and 3 ranks: seed 5 gives the same weights at both rank counts, seed 6
other weights, and shuffle_seed=3 the same weights whatever torch's seed.
"""
import os
import sys

import numpy as np
import torch

import tarantella as tnt

rng = np.random.RandomState(8)
x = rng.randn(50, 6).astype(np.float32)
y = rng.randint(0, 3, size=50).astype(np.int64)


def train(torch_seed, shuffle_seed=None):
    torch.manual_seed(torch_seed)
    # The module's initial weights are the same for both torch seeds, so
    # only the data order can make the runs differ.
    init = torch.Generator().manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=init) * 0.3)
    model = tnt.Model(module)
    model.compile(optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
                  loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=10, epochs=2, verbose=0, shuffle_seed=shuffle_seed)
    return np.concatenate([w.ravel() for w in model.get_weights()])


np.savez(os.path.join(sys.argv[1], "seed.rank%d.npz" % tnt.get_rank()),
         seed5=train(5), seed6=train(6), explicit5=train(5, 3), explicit6=train(6, 3))
