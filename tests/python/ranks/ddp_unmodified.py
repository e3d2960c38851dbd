"""A torch.distributed script as PyTorch's DDP tutorial teaches it, with no
Tarantella in it: init_process_group("gloo") reads RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT from the environment (env://), a
DistributedSampler shards the data, DDP averages the gradients.

    tarantella -n 3 -- ddp_unmodified.py OUT.npz
    srun --tarantella -N 2 -n 4 python3 ddp_unmodified.py OUT.npz
    python3 ddp_unmodified.py --serial OUT.npz      # the reference, no DDP

BACKEND=tnt in the environment runs the same script on Tarantella's "tnt"
backend: the one change a script needs is the import of tarantella, which
registers the backend (docs/torch-distributed.md, "Backend tnt").
INIT=helper starts with tnt.init_process_group(BACKEND), INIT=url with
init_process_group(BACKEND, init_method="tnt://"): no MASTER_ADDR or
MASTER_PORT is read then.

Rank 0 writes the final weights to OUT.npz. --serial trains the same model
in one process, no torch.distributed, on the same global batches (the
sampler's permutation for one replica), which DDP must reproduce to float
tolerance: with N divisible by the rank count the sampler pads nothing,
every rank's batch has GLOBAL_BATCH / world samples, and the mean of the
ranks' mean-loss gradients is the global batch's mean-loss gradient.
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

N = 96             # divisible by 2, 3 and 4 ranks (and by GLOBAL_BATCH)
GLOBAL_BATCH = 12  # per-rank batch = GLOBAL_BATCH / world
EPOCHS = 3
SEED = 0
BACKEND = os.environ.get("BACKEND", "gloo")
INIT = os.environ.get("INIT", "env")
if BACKEND == "tnt" or INIT != "env":
    import tarantella  # noqa: F401  registers the "tnt" backend and tnt:// with torch


def make_data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(N, 8, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return TensorDataset(x, y)


def make_model():
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def train(model, sampler, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()


def save(module, path):
    np.savez(path, **{k: v.detach().numpy() for k, v in module.state_dict().items()})


def main_ddp(out):
    if INIT == "helper":
        tarantella.init_process_group(BACKEND)
    elif INIT == "url":
        dist.init_process_group(BACKEND, init_method="tnt://")
    else:
        dist.init_process_group(BACKEND)  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = make_data()
    sampler = DistributedSampler(dataset, shuffle=True, seed=SEED)
    loader = DataLoader(dataset, batch_size=GLOBAL_BATCH // world, sampler=sampler)
    model = DDP(make_model())
    train(model, sampler, loader)
    if rank == 0:
        save(model.module, out)
        print("ddp_unmodified: rank 0 of %d wrote %s (backend %s)" % (world, out, dist.get_backend()),
              flush=True)
    dist.destroy_process_group()


def main_serial(out):
    dataset = make_data()
    # One replica: the same seeded permutation the ranks split among them.
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=SEED)
    loader = DataLoader(dataset, batch_size=GLOBAL_BATCH, sampler=sampler)
    model = make_model()
    train(model, sampler, loader)
    save(model, out)


if __name__ == "__main__":
    if sys.argv[1] == "--serial":
        main_serial(sys.argv[2])
    else:
        main_ddp(sys.argv[1])
