"""Rank program for the failure tests (tests/slurm/resilience.sh).

    resil_ranks.py MODE RANK

Every rank prints "pid R P" first (so the driver can check /dev/shm), runs a
few collectives, then MODE happens to rank RANK:
  stop   SIGSTOP itself before its next allreduce (a hang outside libtnt)
  kill   SIGKILL itself
  raise  an uncaught RuntimeError
  exit   sys.exit(3) while the others sleep in Python (not in libtnt):
         only kill-on-bad-exit can end their step early
  leave  sys.exit(0) while the others go on with allreduce: a program
         that ends early on one rank, without an error
  save   no failure: a collective save in which the writer (rank 0) takes
         4 s; must finish without a stall warning
  usr2   no failure: ranks loop for a while so the driver can send SIGUSR2
Then collectives go on; in failure modes the job must end long before
they finish.
"""
import os
import signal
import sys
import time

import numpy as np
import tarantella as tnt
from tarantella import saving


def say(text):
    """One write per line: ranks share stdout, and print() writes the text
    and the newline separately when Python runs unbuffered."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

mode, culprit = sys.argv[1], int(sys.argv[2])
rank = tnt.get_rank()
say("pid %d %d" % (rank, os.getpid()))
x = np.ones(256, dtype=np.float32)
for _ in range(10):
    tnt.allreduce(x)
tnt.barrier()

if mode == "save":
    def write(f):
        time.sleep(4)
        f.write(b"checkpoint")
    path = os.path.join(sys.argv[3], "ckpt.bin")
    saving.collective_save(path, write)
    tnt.barrier()
    say("rank %d saved" % rank)
    sys.exit(0)
if mode == "usr2":
    # The ranks agree on when to stop (a MAX of "my time is up"): each
    # deciding alone would leave one in allreduce while another is in the
    # barrier.
    deadline = time.monotonic() + float(sys.argv[3])
    while not tnt.allreduce(int(time.monotonic() >= deadline), op="max"):
        tnt.allreduce(x)
        time.sleep(0.01)
    tnt.barrier()
    say("rank %d finished" % rank)
    sys.exit(0)

if rank == culprit:
    if mode == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "raise":
        raise RuntimeError("injected failure on rank %d" % rank)
    elif mode == "exit":
        sys.exit(3)
    elif mode == "leave":
        sys.exit(0)
if mode == "exit":
    time.sleep(100)
for _ in range(100000):
    tnt.allreduce(x)
    time.sleep(0.001)
say("rank %d was never stopped" % rank)
