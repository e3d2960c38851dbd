"""A DataLoader training loop in the form docs/porting-tutorial.md gives: the
sampler as the DataLoader's batch_sampler, torch's default collate, no
handling of empty batches in the loop, and
``opt.set_micro_batch(*sampler.micro_batch(step))``; the same loop over
``tnt.data.DataLoader(ds, **train_kwargs)`` (docs/porting.md); and the
serial reference they must reproduce.

As a rank script (``porting_loader.py OUT.npz``) it trains every
configuration of CONFIGS data-parallel and rank 0 saves the final weights
and how many placeholder steps the ranks took; the test imports
``train_serial`` and compares. Every configuration has a final global batch
with fewer samples than the ranks the test uses (3 and 4), so some ranks
have no sample in it and train on a zero-weight placeholder.
"""
import sys

import numpy as np
import torch

import tarantella as tnt

CONFIGS = {
    # The last batch has 1 sample: every rank but rank 0 gets a placeholder.
    "last1": dict(n=41, batch=10, workers=0),
    # The last batch has 2 samples; samples loaded by worker processes.
    "last2_workers": dict(n=32, batch=6, workers=2),
    # tnt.data.DataLoader built from mnist's **train_kwargs (batch_size,
    # shuffle, num_workers), with no set_epoch: each pass is the next epoch.
    "tnt_loader": dict(n=41, batch=10, workers=1, tnt_loader=True),
}
EPOCHS = 2


class Blobs(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(77)
        self.x = torch.randn(n, 5, generator=g)
        self.y = torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3))


def make_opt(params):
    return torch.optim.SGD(params, lr=0.2, momentum=0.9)


def weights(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def train_serial(cfg):
    """Plain torch, one process, mean loss over each global batch."""
    ds = Blobs(cfg["n"])
    model = make_model(3)
    opt = make_opt(model.parameters())
    sampler = tnt.data.DistributedSampler(cfg["n"], cfg["batch"], seed=8, rank=0, size=1)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for idx in sampler:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(ds.x[idx]), ds.y[idx]).backward()
            opt.step()
    return weights(model)


def train_distributed(cfg):
    ds = Blobs(cfg["n"])
    model = make_model(3 + tnt.get_rank())  # broadcast_parameters makes them agree
    tnt.broadcast_parameters(model)
    opt = tnt.DistributedOptimizer(make_opt(model.parameters()), model)
    if cfg.get("tnt_loader"):
        train_kwargs = {"batch_size": cfg["batch"], "shuffle": True}
        train_kwargs.update({"num_workers": cfg["workers"], "pin_memory": False})
        loader = sampler = tnt.data.DataLoader(ds, seed=8, **train_kwargs)
    else:
        sampler = tnt.data.DistributedSampler(len(ds), cfg["batch"], seed=8)
        loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler,
                                             num_workers=cfg["workers"])
    placeholders = 0
    for epoch in range(EPOCHS):
        if not cfg.get("tnt_loader"):
            sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            opt.set_micro_batch(*sampler.micro_batch(step))
            placeholders += sampler.micro_batch(step)[0] == 0
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    opt.reducer.close()
    return weights(model), placeholders


def main(out):
    results = {}
    for name, cfg in CONFIGS.items():
        w, placeholders = train_distributed(cfg)
        for i, a in enumerate(w):
            lo, hi = tnt.allreduce(a, op="min"), tnt.allreduce(a, op="max")
            if not (np.array_equal(lo, a) and np.array_equal(hi, a)):
                raise AssertionError("%s: weights %d differ between ranks" % (name, i))
            results["%s_%d" % (name, i)] = a
        results["%s_placeholders" % name] = np.array(tnt.allreduce(int(placeholders)))
    if tnt.is_master_rank():
        np.savez(out, **results)
    print("rank %d: trained %d configs" % (tnt.get_rank(), len(CONFIGS)))


if __name__ == "__main__":
    main(sys.argv[1])
