"""Rank script: tnt.Model's gradient hooks live only while fit runs.

After fit, a plain backward() on the module (twice, accumulating) gives the
local autograd gradients, exactly those of an unwrapped copy, and feeds no
reducer; a second fit still trains data-parallel (identical weights on
every rank, equal to the serial run). Prints "OK hooks" on success.
"""
import copy
import sys

import numpy as np
import torch

import tarantella as tnt

rank = tnt.get_rank()
rng = np.random.RandomState(2)
x = torch.from_numpy(rng.randn(40, 4).astype(np.float32))
y = torch.from_numpy(rng.randint(0, 2, size=40).astype(np.int64))

torch.manual_seed(0)
model = tnt.Model(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                      torch.nn.Linear(8, 2)))
model.compile(optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
              loss="sparse_categorical_crossentropy")
model.fit(x, y, batch_size=8, epochs=1, shuffle_seed=1, verbose=0)

# Outside fit: each rank differentiates its own data, as plain torch would.
mine = slice(rank * 5, rank * 5 + 5)
reference = copy.deepcopy(model.module)
for module in (model.module, reference):
    module.zero_grad(set_to_none=True)
    for _ in range(2):  # a second backward accumulates, it must not raise
        torch.nn.functional.cross_entropy(module(x[mine]), y[mine]).backward()
for (name, p), q in zip(model.module.named_parameters(), reference.parameters()):
    if not torch.equal(p.grad, q.grad):
        raise AssertionError("rank %d: %s.grad differs from plain autograd after fit (max "
                             "difference %g): the gradient went to the reducer"
                             % (rank, name, float((p.grad - q.grad).abs().max())))

# fit again: the hooks come back for the duration of fit.
model.fit(x, y, batch_size=8, epochs=1, shuffle_seed=2, verbose=0)
weights = np.concatenate([w.ravel() for w in model.get_weights()])
everyone = tnt.allgather(weights)
for r in range(tnt.get_size()):
    if not np.array_equal(everyone[r], weights):
        raise AssertionError("rank %d: weights differ from rank %d after the second fit"
                             % (rank, r))
np.save(sys.argv[1] + ".rank%d.npy" % rank, weights)
print("OK hooks")
