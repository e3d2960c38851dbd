"""A PyTorch training loop ported to tarantella (docs/porting-tutorial.md).

    build/bin/tarantella -n 2 -- python/examples/ported_loop.py
    srun --tarantella -N 2 --ntasks-per-node=2 --cpus-per-task=4 \\
        python3 python/examples/ported_loop.py --checkpoint-dir $SCRATCH/run1
    /usr/bin/python3 python/examples/ported_loop.py          # one rank

What it shows, each marked "tarantella:" below:
  * a DataLoader with worker processes, fed this rank's share of every
    global batch by tnt.data.DistributedSampler (used as batch_sampler);
  * mixed precision with CPU autocast (bfloat16; see docs/gpu.md for CUDA
    and float16 with a GradScaler);
  * gradient clipping on the reduced gradients: synchronize(), clip, then
    step() inside skip_synchronize(), so the gradients are reduced once;
  * a checkpoint at every epoch end and a resume from it: the master writes
    atomically, and on restart reads it and sends it to every rank with
    tnt.broadcast_object (the other ranks need not see the master's disk).
    docs/preemption.md describes the built-in backup on preemption signals.

``--stop-after K`` ends the run after K epochs (as a preempted job would); run
again with the same ``--checkpoint-dir`` and it resumes and finishes with
exactly the weights of an uninterrupted run.
"""
import argparse
import hashlib
import os

import numpy as np
import torch
import torch.nn.functional as F

import tarantella as tnt  # tarantella: joins the job (no init_process_group)

GLOBAL_BATCH = 64  # tarantella: the global batch; each rank gets its share
EPOCHS = 4


class Blobs(torch.utils.data.Dataset):
    """Four Gaussian blobs in 20 dimensions (the same data on every rank)."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 4, (n,), generator=g)
        centers = torch.randn(4, 20, generator=torch.Generator().manual_seed(99)) * 0.4
        self.x = centers[self.y] + torch.randn(n, 20, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def save_checkpoint(path, state):
    # tarantella: one writer; write-then-rename, so a crash leaves the old
    # checkpoint whole. The barrier keeps ranks from racing ahead of it.
    if tnt.is_master_rank():
        tmp = path + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, path)
    tnt.barrier()


def load_checkpoint(path):
    state = None
    if tnt.is_master_rank() and os.path.exists(path):
        # The checkpoint this script wrote itself. Its optimizer and scheduler
        # states hold floats, which torch < 2.0's weights_only loader cannot
        # read; never load a checkpoint from elsewhere this way (unpickling
        # runs code).
        state = torch.load(path, weights_only=False)
    return tnt.broadcast_object(state, root=0)  # tarantella: master's copy on every rank


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--stop-after", type=int, default=None)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)

    train_ds, test_ds = Blobs(2000, seed=1), Blobs(500, seed=2)
    torch.manual_seed(0)
    model = make_model()
    tnt.broadcast_parameters(model, root=0)  # tarantella: rank 0's initial weights
    opt = tnt.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=3e-3), model)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)

    # tarantella: the sampler yields this rank's indices of every global
    # batch; the workers load only those samples.
    sampler = tnt.data.DistributedSampler(len(train_ds), GLOBAL_BATCH, shuffle=True, seed=17)
    loader = torch.utils.data.DataLoader(train_ds, batch_sampler=sampler,
                                         num_workers=args.workers,
                                         persistent_workers=args.workers > 0)

    start_epoch = 0
    ckpt = os.path.join(args.checkpoint_dir, "checkpoint.pt") if args.checkpoint_dir else None
    if ckpt:
        if tnt.is_master_rank():
            os.makedirs(args.checkpoint_dir, exist_ok=True)
        state = load_checkpoint(ckpt)
        if state is not None:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            start_epoch = state["epoch"]
            if tnt.is_master_rank():
                print("resumed from epoch %d" % start_epoch, flush=True)

    for epoch in range(start_epoch, EPOCHS):
        sampler.set_epoch(epoch)
        model.train()
        totals = torch.zeros(2, dtype=torch.float64)  # (sum of losses, samples)
        for step, (x, y) in enumerate(loader):
            opt.zero_grad(set_to_none=True)
            # tarantella: this rank's weight in the global mean loss (0 for
            # a placeholder sample in a final batch with fewer samples than ranks).
            local, global_count = sampler.micro_batch(step)
            opt.set_micro_batch(local, global_count)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()  # tarantella: the allreduce overlaps this
            totals += torch.tensor([loss.item() * local, local], dtype=torch.float64)
            opt.synchronize()  # tarantella: p.grad is now the global gradient
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            with opt.skip_synchronize():  # tarantella: no second reduction
                opt.step()
        sched.step()
        totals = tnt.allreduce(totals)  # tarantella: sums over the ranks
        if tnt.is_master_rank():
            print("epoch %d/%d  loss %.4f" % (epoch + 1, EPOCHS, float(totals[0] / totals[1])),
                  flush=True)
        if ckpt:
            save_checkpoint(ckpt, {"epoch": epoch + 1, "model": model.state_dict(),
                                   "optimizer": opt.state_dict(),
                                   "scheduler": sched.state_dict()})
        if args.stop_after is not None and epoch + 1 >= args.stop_after:
            return

    # Sharded evaluation: each rank scores its part of the test set once.
    idx = tnt.data.DistributedSampler(len(test_ds), len(test_ds), shuffle=False).step_info(0)[0]
    model.eval()
    with torch.no_grad():
        x, y = test_ds.x[idx], test_ds.y[idx]
        correct = float((model(x).argmax(1) == y).sum()) if idx else 0.0
    correct, count = tnt.allreduce(np.array([correct, len(idx)], dtype=np.float64))
    weights = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    if tnt.is_master_rank():
        print("test accuracy %.2f%% on %d samples (%d ranks)"
              % (100.0 * correct / count, int(count), tnt.get_size()))
        print("weights digest %s" % hashlib.sha256(weights.tobytes()).hexdigest()[:16],
              flush=True)


if __name__ == "__main__":
    main()
