"""Rank script for test_callbacks.py: runs several short fits with
callbacks and writes what each rank saw to <outdir>/callbacks.rank<r>.json.
"""
import json
import os
import sys

import numpy as np
import torch

import tarantella as tnt
import tarantella.saving as tnt_saving

OUT = sys.argv[1]
RANK, SIZE = tnt.get_rank(), tnt.get_size()
rng = np.random.RandomState(3)
X = rng.randn(120, 6).astype(np.float32)
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)


def new_model(lr=0.1):
    torch.manual_seed(5)
    module = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    model = tnt.Model(module)
    model.compile(torch.optim.SGD(model.parameters(), lr=lr), "sparse_categorical_crossentropy",
                  ["accuracy"])
    return model


result = {}

# Counting writers: every call of the atomic writer on this rank.
writes = []
_orig_atomic_write = tnt_saving._atomic_write


def counting_atomic_write(path, write):
    writes.append(os.path.basename(path))
    _orig_atomic_write(path, write)


tnt_saving._atomic_write = counting_atomic_write

# 1. Built-in callbacks with rank-averaged logs; History, CSV, checkpoints,
#    LR schedule, plateau, per-epoch logs seen by a Lambda callback.
seen = []
model = new_model()
history = model.fit(
    X, Y, batch_size=25, epochs=4, shuffle_seed=1, verbose=int(os.environ.get("TNT_TEST_VERBOSE", "0")),
    validation_data=(X[:50], Y[:50]),
    callbacks=[tnt.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 / (epoch + 1)),
               tnt.callbacks.ReduceLROnPlateau(monitor="loss", patience=100),
               tnt.callbacks.CSVLogger(os.path.join(OUT, "log.csv")),
               tnt.callbacks.ModelCheckpoint(os.path.join(OUT, "ckpt-{epoch:02d}.pt")),
               tnt.callbacks.ModelCheckpoint(os.path.join(OUT, "best.weights"),
                                             monitor="val_accuracy", save_best_only=True,
                                             save_weights_only=True),
               tnt.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(dict(logs)))])
result["history"] = history.history
result["history_epochs"] = history.epoch
result["lambda_logs"] = seen
result["writes"] = list(writes)

# 2. EarlyStopping: no epoch improves by 10 on the loss, so with patience 1
#    training stops after the second epoch on every rank.
model = new_model()
h = model.fit(X, Y, batch_size=25, epochs=10, shuffle_seed=1, verbose=0,
              callbacks=[tnt.callbacks.EarlyStopping(monitor="loss", min_delta=10, patience=1)])
result["early_epochs"] = h.epoch


# 3. A plain user callback (not a tnt subclass) asks to stop on the last rank
#    only, at epoch index 1: every rank stops after that epoch.
class StopOnLastRank:
    def on_epoch_end(self, epoch, logs=None):
        if RANK == SIZE - 1 and epoch == 1:
            self.model.stop_training = True


model = new_model()
h = model.fit(X, Y, batch_size=25, epochs=10, shuffle_seed=1, verbose=0,
              callbacks=[StopOnLastRank()])
result["user_stop_epochs"] = h.epoch

# 4. Batch level: rank 1 (or 0 alone) asks to stop after batch 2 of epoch 0;
#    every rank stops after the same batch.
batches = []


def on_batch_end(batch, logs):
    batches.append(batch)
    if RANK == min(1, SIZE - 1) and batch == 2:
        model.stop_training = True


model = new_model()
h = model.fit(X, Y, batch_size=10, epochs=3, shuffle_seed=1, verbose=0,
              callbacks=[tnt.callbacks.LambdaCallback(on_batch_end=on_batch_end)])
result["batch_stop"] = {"batches": batches, "epochs": h.epoch}

# 5. TerminateOnNaN: one sample is NaN; the averaged loss of its batch is NaN
#    on every rank, so all ranks stop after that batch.
Xn = X.copy()
Xn[37, 2] = np.nan
nan_batches = []
model = new_model()
model.fit(Xn, Y, batch_size=10, epochs=2, shuffle=False, verbose=0,
          callbacks=[tnt.callbacks.TerminateOnNaN(),
                     tnt.callbacks.LambdaCallback(on_batch_end=lambda b, l: nan_batches.append(b))])
result["nan_batches"] = nan_batches

# 6. Callback(cb, aggregate_logs=False, run_on_all_ranks=...) wrapper.
local_logs, master_only = [], []


class Recorder:
    def __init__(self, sink):
        self.sink = sink

    def on_epoch_end(self, epoch, logs=None):
        self.sink.append(dict(logs))


model = new_model()
model.fit(X, Y, batch_size=25, epochs=1, shuffle_seed=1, verbose=0,
          callbacks=[tnt.callbacks.Callback(Recorder(local_logs), aggregate_logs=False),
                     tnt.callbacks.Callback(Recorder(master_only), run_on_all_ranks=False)])
result["local_logs"] = local_logs
result["master_only_calls"] = len(master_only)

with open(os.path.join(OUT, "callbacks.rank%d.json" % RANK), "w") as f:
    json.dump(result, f)
