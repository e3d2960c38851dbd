"""A DDP training loop that survives preemption: on SIGUSR1 or SIGTERM every
rank finishes its step, the whole training state is backed up, and the job
exits with status 75; run it again (on any number of ranks that divides
the global batch) and it goes on exactly where it stopped
(docs/torch-distributed.md, "Preemption from a DDP loop").

    tarantella -n 4 -- python/examples/ddp_preemptible.py BACKUP_DIR
    srun --tarantella -N 2 -n 8 python3 ddp_preemptible.py BACKUP_DIR

The script is an ordinary DDP script (torch's DistributedSampler, DDP, an
optimizer and a scheduler); what makes it preemptible is five calls of
tnt.preemption, marked "preemption" below. Options:

    --backend tnt|gloo   the process group's backend (default: tnt)
    --epochs N           (default: 40)
    --weights FILE       rank 0 writes the final weights there (.npy)
"""
import argparse
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import tarantella as tnt

SAMPLES = 96       # divisible by 1, 2, 3, 4, 6, 8 and 12 ranks: the sampler pads nothing
GLOBAL_BATCH = 12  # each rank's batch is GLOBAL_BATCH / ranks

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("backup_dir")
parser.add_argument("--backend", default="tnt", choices=("tnt", "gloo"))
parser.add_argument("--epochs", type=int, default=40)
parser.add_argument("--weights")
args = parser.parse_args()

# The launchers set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; so does
# torchrun. tnt.init_process_group needs none of them.
tnt.init_process_group(args.backend)
rank, world = dist.get_rank(), dist.get_world_size()
if GLOBAL_BATCH % world:
    raise SystemExit("ddp_preemptible: %d ranks do not divide the global batch of %d"
                     % (world, GLOBAL_BATCH))

g = torch.Generator().manual_seed(1234)
x = torch.randn(SAMPLES, 8, generator=g)
y = (x[:, 0] + x[:, 1] > 0).long()
sampler = DistributedSampler(TensorDataset(x, y), shuffle=True, seed=7)
loader = DataLoader(TensorDataset(x, y), batch_size=GLOBAL_BATCH // world, sampler=sampler)

torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)

# preemption 1: SIGUSR1 and SIGTERM now only set a flag, checked below.
tnt.preemption.install()
# preemption 2: resume from the backup if there is one. Load before DDP
# wraps the model; every rank reads the same file.
backup = os.path.join(args.backup_dir, "state.pt")
state = tnt.preemption.load_training_state(backup, model, optimizer)
start_epoch, start_step = 0, 0
if state is not None:
    start_epoch, start_step = state["epoch"], state["step"]
    scheduler.load_state_dict(state["extra"]["scheduler"])
    if rank == 0:
        print("resuming at epoch %d, step %d" % (start_epoch + 1, start_step), flush=True)
ddp = DDP(model)

for epoch in range(start_epoch, args.epochs):
    sampler.set_epoch(epoch)  # the epoch's order depends only on (seed, epoch)
    for step, (xb, yb) in enumerate(loader):
        if epoch == start_epoch and step < start_step:
            continue  # done before the preemption
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(xb), yb).backward()
        optimizer.step()
        if rank == 0:
            print("epoch %d step %d" % (epoch + 1, step + 1), flush=True)
        # preemption 3: one small allreduce; a signal on any rank stops all
        # ranks after the same step.
        if tnt.preemption_requested():
            # preemption 4: the model (not the DDP wrapper), the optimizer,
            # every rank's RNG states and the caller's extras, written
            # atomically by rank 0.
            tnt.preemption.save_training_state(backup, model, optimizer, epoch=epoch,
                                               step=step + 1,
                                               extra={"scheduler": scheduler.state_dict()})
            # preemption 5: every rank exits with status 75.
            tnt.preemption.exit_preempted(epoch, step + 1)
    scheduler.step()

if rank == 0 and args.weights:
    np.save(args.weights, np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
dist.destroy_process_group()
