"""tnt.seed_per_rank: every rank draws differently (dropout masks, torch,
random, numpy, DataLoader workers), and rank 0 draws exactly what the serial
script draws after seeding torch, random and numpy with the same seed.
The master prints one line ``seeds ok <size> <value>`` per rank."""
import random

import numpy as np
import torch

import tarantella as tnt

SEED = 11


class Noise(torch.utils.data.Dataset):
    """Augmentation stand-in: each item is drawn in the worker process."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.rand(3)


def draws():
    dropout = torch.nn.Dropout(p=0.5)
    dropout.train()
    mask = (dropout(torch.ones(256)) > 0).numpy().astype(np.int8)
    loader = torch.utils.data.DataLoader(Noise(), batch_size=4, num_workers=1)
    worker = next(iter(loader)).numpy()
    return {"mask": mask, "torch": torch.rand(8).numpy(), "random": random.random(),
            "numpy": np.random.rand(8), "worker": worker}


def same(a, b):
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


value = tnt.seed_per_rank(SEED)
assert value == SEED + tnt.get_rank(), value
mine = draws()
everyone = tnt.allgather_object(mine)
for r in range(tnt.get_size()):
    for q in range(r):
        for key in mine:
            if np.array_equal(np.asarray(everyone[r][key]), np.asarray(everyone[q][key])):
                raise AssertionError("ranks %d and %d drew the same %s" % (q, r, key))
# Reproducible: the same call gives the same draws again.
assert tnt.seed_per_rank(SEED) == value
assert same(draws(), mine), "seed_per_rank is not reproducible"
if tnt.get_rank() == 0:
    # What the serial script draws after seeding everything with SEED.
    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)
    assert same(draws(), mine), "rank 0 does not draw what the serial script draws"
# The master prints every rank's line (lines of several ranks may interleave).
lines = tnt.allgather_object("seeds ok %d %d" % (tnt.get_size(), value))
if tnt.is_master_rank():
    print("\n".join(lines), flush=True)
