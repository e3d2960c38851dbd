"""After the first step, GradientReducer keeps the gradients in one flat,
plan-ordered buffer (p.grad views), so libtnt reduces each fused bucket where
it lies. Run with TNT_LOG_LEVEL=debug: libtnt's debug line at destroy counts
how many fused buckets were copied through staging (only the first step's)
and how many were reduced in place. Also checks that the gradients are the
average over ranks on every step and identical on every rank.

A second reducer over the same parameters (as each tnt.Model.fit makes one)
takes the flat buffer over where the first one left it: its first step
neither allocates nor copies, and the gradients stay where they were."""
import numpy as np
import torch

import tarantella as tnt
from tarantella.collectives import allgather_concat

STEPS = 4


def run_steps(model, opt, params, rank, steps, first_step, flat_from):
    for step in range(first_step, first_step + steps):
        opt.zero_grad(set_to_none=False)
        x = torch.full((2, 5), float(rank + 1 + step))
        # This rank's own gradient, computed aside (the reduction overwrites
        # p.grad while backward still runs).
        local = torch.autograd.grad(model(x).sum(), params)
        model(x).sum().backward()
        opt.synchronize()
        gathered = allgather_concat(
            np.concatenate([g.numpy().ravel() for g in local])[None, :])
        for i, p in enumerate(params):
            n = sum(q.numel() for q in params[:i])
            want = gathered[:, n:n + p.numel()].mean(axis=0)
            np.testing.assert_allclose(p.grad.numpy().ravel(), want, rtol=1e-6, atol=1e-7)
        opt.optimizer.step()  # synchronize() already waited
        if step >= flat_from:
            # plan order = one contiguous range, back to back
            ptr = params[0].grad.data_ptr()
            for p in params:
                assert p.grad.data_ptr() == ptr, "gradient %s is not in the flat buffer" % (p.shape,)
                ptr += p.numel() * p.element_size()


def main():
    tnt.init()
    rank = tnt.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    # One bucket over all four tensors (threshold far above the model).
    opt = tnt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   model=model, threshold_kb=1024)
    params = opt.reducer.parameters
    run_steps(model, opt, params, rank, STEPS, 0, 1)
    opt.reducer.close()
    flat_ptr = params[0].grad.data_ptr()
    # A second reducer: its first step already finds the flat layout.
    opt = tnt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   model=model, threshold_kb=1024)
    run_steps(model, opt, opt.reducer.parameters, rank, 2, STEPS, STEPS)
    assert params[0].grad.data_ptr() == flat_ptr, "the second reducer moved the gradients"
    opt.reducer.close()
    print("rank %d: flat gradients ok" % rank)


if __name__ == "__main__":
    main()
