"""Rank program for test_preemption.py: a tnt.Model.fit run with
BackupAndRestore that the test interrupts (real signals through the
launcher, kill -9) and resumes, possibly on another number of ranks.

    preempt_train.py OUT BACKUP_DIR [--save-freq N] [--epochs E]
                     [--kill-at-forward K] [--die-in-backup N] [--slow-backup S]
                     [--step-sleep S] [--no-backup]

The module's forward (training mode only, so one call per step with
samples) writes this rank's call count to OUT/progress.<rank> and its pid to
OUT/pid.<rank>, so the test knows where training is without a batch
callback (which would change how fit synchronises). Test hooks:
``--kill-at-forward K`` SIGKILLs rank 1 at its K-th forward;
``--die-in-backup N`` SIGKILLs rank 0 half-way through writing its N-th
backup (temp file written, not renamed); ``--slow-backup S`` makes rank 0
touch OUT/writing and sleep S seconds before each backup write. At the end
rank 0 writes OUT/result.npz (weights), OUT/result.json (history, callback
counters, learning rate).
"""
import argparse
import json
import os
import random
import signal
import sys
import time

import numpy as np
import torch

import tarantella as tnt

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("backup_dir")
parser.add_argument("--save-freq", default="epoch")
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--kill-at-forward", type=int, default=0)
parser.add_argument("--die-in-backup", type=int, default=0)
parser.add_argument("--slow-backup", type=float, default=0.0)
parser.add_argument("--step-sleep", type=float, default=0.0)
parser.add_argument("--no-backup", action="store_true")
args = parser.parse_args()
save_freq = args.save_freq if args.save_freq == "epoch" else int(args.save_freq)
rank = tnt.get_rank()
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "pid.%d" % rank), "w") as f:
    f.write(str(os.getpid()))

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                        torch.nn.Linear(16, 3))
        self.calls = 0

    def forward(self, x):
        if self.training:
            self.calls += 1
            if args.kill_at_forward and rank == 1 and self.calls == args.kill_at_forward:
                os.kill(os.getpid(), signal.SIGKILL)
            with open(os.path.join(args.out, "progress.%d" % rank), "w") as f:
                f.write(str(self.calls))
            if args.step_sleep:
                time.sleep(args.step_sleep)
        return self.body(x)


# 203 samples, global batch 16: 12 full steps and a last one of 11 samples
# (3+3+3+2 on 4 ranks, 4+4+3 on 3, 6+5 on 2).
data_rng = np.random.RandomState(7)
x = data_rng.randn(203, 8).astype(np.float32)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)

if args.die_in_backup or args.slow_backup:
    from tarantella import saving
    real_atomic_write = saving._atomic_write
    writes = [0]

    def test_atomic_write(path, write):
        if rank == 0 and os.path.basename(path) == tnt.callbacks.BackupAndRestore.FILENAME:
            writes[0] += 1
            if args.slow_backup:
                open(os.path.join(args.out, "writing"), "w").close()
                time.sleep(args.slow_backup)
            if writes[0] == args.die_in_backup:
                def dying(f):
                    write(f)
                    f.flush()
                    os.kill(os.getpid(), signal.SIGKILL)
                return real_atomic_write(path, dying)
        return real_atomic_write(path, write)

    saving._atomic_write = test_atomic_write


class RngProbe(tnt.callbacks.Callback):
    """Draws from every RNG at each epoch end and logs the draws, so a
    resumed run shows whether the RNG states continued exactly."""

    def on_epoch_end(self, epoch, logs=None):
        logs["rng_torch"] = float(torch.rand(1))
        logs["rng_numpy"] = float(np.random.rand())
        logs["rng_python"] = random.random()


model = tnt.Model(Net())
model.compile(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
              loss=torch.nn.CrossEntropyLoss(), metrics=["accuracy"])
early = tnt.callbacks.EarlyStopping(monitor="loss", min_delta=10, patience=1000)
plateau = tnt.callbacks.ReduceLROnPlateau(monitor="loss", min_delta=10, patience=2, factor=0.5)
callbacks = [RngProbe(), tnt.callbacks.CSVLogger(os.path.join(args.out, "log.csv")), early,
             plateau, tnt.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.9)]
if not args.no_backup:
    callbacks.append(tnt.callbacks.BackupAndRestore(args.backup_dir, save_freq=save_freq))
history = model.fit(x, y, batch_size=16, epochs=args.epochs, shuffle_seed=1234, verbose=0,
                    callbacks=callbacks)

if rank == 0:
    np.savez(os.path.join(args.out, "result.npz"), *model.get_weights())
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"history": history.history, "epochs": history.epoch,
                   "early_wait": early.wait, "plateau_wait": plateau.wait,
                   "plateau_cooldown": plateau.cooldown_counter,
                   "lr": model.optimizer.param_groups[0]["lr"],
                   "backup_left": os.path.exists(args.backup_dir)}, f)
print("rank %d done" % rank, file=sys.stderr)
