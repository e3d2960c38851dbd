"""A custom training loop with tarantella's low-level pieces.

    build/bin/tarantella -n 2 -- python/examples/custom_loop.py
    /usr/bin/python3 python/examples/custom_loop.py          # one rank

Three changes turn a serial torch loop into a data-parallel one that
reproduces it at the same global batch size:
  1. tnt.broadcast_parameters(model): every rank starts from rank 0's weights;
  2. tnt.DistributedOptimizer(opt, model): gradients are summed across ranks
     in fused buckets while backward runs, weighted by each rank's share of
     the global batch (set_micro_batch);
  3. tnt.data.DistributedSampler: each rank takes its part of every global
     batch from the same seeded permutation; a final partial batch is kept,
     never padded with duplicates.
"""
import math

import torch

import tarantella as tnt

GLOBAL_BATCH = 32
EPOCHS = 8


def make_data(n=1000):
    # y = sin(x0) + x1 * x2 + noise, the same on every rank (fixed seed).
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = (torch.sin(x[:, 0]) + x[:, 1] * x[:, 2] + 0.05 * torch.randn(n, generator=g))
    return x, y.unsqueeze(1)


def main():
    torch.set_num_threads(1)
    x, y = make_data()
    x_train, y_train, x_test, y_test = x[:800], y[:800], x[800:], y[800:]

    torch.manual_seed(tnt.get_rank())  # deliberately different on each rank...
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 64), torch.nn.Tanh(),
                                torch.nn.Linear(64, 1))
    tnt.broadcast_parameters(model, root=0)  # ...until rank 0's weights win

    opt = tnt.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=1e-2), model)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5)
    sampler = tnt.data.DistributedSampler(len(x_train), GLOBAL_BATCH, shuffle=True, seed=42)

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        model.train()
        loss_sum = torch.zeros(2, dtype=torch.float64)  # (sum of losses, samples)
        for step, idx in enumerate(sampler):
            opt.zero_grad(set_to_none=True)
            # This rank's weight in the global mean: its share of the batch
            # (0 for the placeholder a rank gets when the final partial
            # batch has no sample for it).
            local, global_count = sampler.micro_batch(step)
            opt.set_micro_batch(local, global_count)
            loss = torch.nn.functional.mse_loss(model(x_train[idx]), y_train[idx])
            loss.backward()  # buckets are allreduced while this runs
            loss_sum += torch.tensor([loss.item() * local, local], dtype=torch.float64)
            opt.step()  # every rank, every step: waits for the allreduce
        sched.step()
        total = tnt.allreduce(loss_sum, op="sum")
        if tnt.is_master_rank():
            print("epoch %d/%d  train mse %.4f  lr %.5f" % (epoch + 1, EPOCHS,
                  float(total[0] / total[1]), opt.param_groups[0]["lr"]), flush=True)

    # Sharded evaluation: each test sample is counted exactly once.
    model.eval()
    lo = tnt.data.DistributedSampler(len(x_test), len(x_test), shuffle=False).step_info(0)[0]
    with torch.no_grad():
        err = torch.tensor([((model(x_test[lo]) - y_test[lo]) ** 2).sum().item() if lo else 0.0,
                            float(len(lo))], dtype=torch.float64)
    total = tnt.allreduce(err)
    mse = float(total[0] / total[1])
    if tnt.is_master_rank():
        print("final loss: test mse %.4f on %d samples (%d ranks)" % (mse, int(total[1]),
                                                                       tnt.get_size()))
    assert math.isfinite(mse)


if __name__ == "__main__":
    main()
