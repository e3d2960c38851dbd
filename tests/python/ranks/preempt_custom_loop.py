"""Rank program for test_preemption.py: a custom training loop made
preemption-safe with the tnt.preemption helpers.

    preempt_custom_loop.py OUT signal   # rank 1 gets SIGUSR1 at step 7; all back up, exit 75
    preempt_custom_loop.py OUT resume   # loads OUT/state.pt, finishes, writes OUT/final.npy
    preempt_custom_loop.py OUT plain    # the same training, uninterrupted
"""
import os
import signal
import sys

import numpy as np
import torch

import tarantella as tnt

out, mode = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
state_path = os.path.join(out, "state.pt")
EPOCHS, BATCH = 3, 20

torch.manual_seed(0)
g = torch.Generator().manual_seed(3)
x = torch.randn(97, 6, generator=g)
y = x @ torch.randn(6, 2, generator=g)

model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 2))
tnt.broadcast_parameters(model, root=0)
opt = tnt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
sampler = tnt.data.DistributedSampler(len(x), BATCH, shuffle=True, seed=11)

start_epoch, start_step = 0, 0
if mode != "plain":
    tnt.preemption.install()  # SIGUSR1 and SIGTERM now only set a flag
    state = tnt.preemption.load_training_state(state_path, model, opt)
    if state is not None:
        start_epoch, start_step = state["epoch"], state["step"]
        sched.load_state_dict(state["extra"]["sched"])
    assert (state is None) == (mode == "signal"), (mode, state)

done = 0
for epoch in range(start_epoch, EPOCHS):
    sampler.set_epoch(epoch)
    for step in range(start_step if epoch == start_epoch else 0, len(sampler)):
        idx, global_count = sampler.step_info(step)
        opt.zero_grad()
        opt.set_micro_batch(len(idx), global_count)
        if idx:
            torch.nn.functional.mse_loss(model(x[idx]), y[idx]).backward()
        opt.step()
        done += 1
        if mode == "signal" and done == 7 and tnt.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGUSR1)  # one rank only: the check must spread it
        if mode != "plain" and tnt.preemption_requested():
            tnt.preemption.save_training_state(state_path, model, opt, epoch=epoch,
                                               step=step + 1,
                                               extra={"sched": sched.state_dict()})
            tnt.preemption.exit_preempted(epoch, step + 1)
    sched.step()

assert mode != "signal", "the signal did not stop the run"
if tnt.get_rank() == 0:
    np.save(os.path.join(out, "final.npy"),
            np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
