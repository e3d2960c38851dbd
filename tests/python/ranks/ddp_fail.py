"""DDP on the tnt backend where rank 1 fails at step 5 (issue 22, section
3): `kill` dies by SIGKILL, `hang` sleeps. The job must end in seconds, with
the verdict of tnt.Model's jobs naming the torch group, the rank and the
collective's number.

    tarantella -n 3 -- ddp_fail.py kill|hang
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import tarantella as tnt

tnt.init_process_group("tnt")
rank = dist.get_rank()
model = DDP(torch.nn.Linear(64, 64))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(50):
    if step == 5 and rank == 1:
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(600)
    optimizer.zero_grad()
    model(torch.randn(8, 64)).sum().backward()
    optimizer.step()
print("ddp_fail: rank %d finished, which it must not" % rank)
