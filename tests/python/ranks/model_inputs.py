"""Rank script: tnt.Model's data input. Writes <outdir>/<config>.rank<r>.npz
per configuration; test_model_inputs.py compares N ranks with the serial run
(this script under plain python3).

  workers   a torch Dataset loaded by 2 DataLoader worker processes per rank
            (num_workers=2, pin_memory=True) in fit, evaluate and predict;
            serially it loads in-process (num_workers=0). Every __getitem__
            appends "pid index" to <outdir>/loads.rank<r>.txt, so the test
            sees which process loaded which sample.
  tuple     a two-input module, forward(a, b), fed x=(xa, xb)
  dict      the same module fed x={"a": xa, "b": xb} (keyword arguments)
  valsplit  validation_split=0.25 against the explicit split: the last
            quarter, before shuffling, as validation_data
  ownsplit  validation_split with tnt_distribute_dataset=False: each rank
            splits its own data; the validation logs combine all ranks
"""
import json
import os
import sys

import numpy as np
import torch

import tarantella as tnt

N, BATCH, EPOCHS = 61, 7, 2  # 7 is not divisible by 2 or 3; last batch of 5


class Logged(torch.utils.data.Dataset):
    """(x, y) items; records the loading process and index."""

    def __init__(self, x, y, log):
        self.x, self.y, self.log = x, y, log

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        with open(self.log, "a") as f:
            f.write("%d %d\n" % (os.getpid(), i))
        return torch.from_numpy(self.x[i]), int(self.y[i])


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(5, 16)
        self.b = torch.nn.Linear(3, 16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, a, b):
        return self.out(torch.tanh(self.a(a) + self.b(b)))


def one_input():
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def make(factory):
    torch.manual_seed(3)
    model = tnt.Model(factory())
    model.compile(optimizer=torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.5),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def flat(model):
    return np.concatenate([w.ravel() for w in model.get_weights()])


def main(outdir):
    rank, size = tnt.get_rank(), tnt.get_size()
    serial = size == 1
    rng = np.random.RandomState(5)
    xa = rng.randn(N, 5).astype(np.float32)
    xb = rng.randn(N, 3).astype(np.float32)
    y = rng.randint(0, 4, size=N).astype(np.int64)

    def save(name, **arrays):
        np.savez(os.path.join(outdir, "%s.rank%d.npz" % (name, rank)), **arrays)

    # workers
    log = os.path.join(outdir, "loads.rank%d.txt" % rank)
    ds = Logged(xa, y, log)
    workers = 0 if serial else 2
    model = make(one_input)
    hist = model.fit(ds, batch_size=BATCH, epochs=EPOCHS, shuffle_seed=4, verbose=0,
                     num_workers=workers, pin_memory=not serial)
    ev = model.evaluate(ds, batch_size=BATCH, verbose=0, num_workers=workers)
    pred = model.predict(ds, batch_size=BATCH, num_workers=workers)
    save("workers", weights=flat(model), history=json.dumps(hist.history),
         evaluate=np.array(ev), predict=pred, pid=np.array([os.getpid()]))

    # tuple and dict inputs
    for name, x in (("tuple", (xa, xb)), ("dict", {"a": xa, "b": xb})):
        model = make(TwoInputs)
        hist = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, shuffle_seed=4, verbose=0,
                         validation_data=(x, y))
        ev = model.evaluate(x, y, batch_size=BATCH, verbose=0)
        pred = model.predict(x, batch_size=BATCH)
        save(name, weights=flat(model), history=json.dumps(hist.history),
             evaluate=np.array(ev), predict=pred)

    # validation_split: the last quarter (floor(61 * 0.75) = 45), unshuffled
    model = make(one_input)
    hist = model.fit(xa, y, batch_size=BATCH, epochs=EPOCHS, shuffle_seed=4, verbose=0,
                     validation_split=0.25)
    split_at = 45
    explicit = make(one_input)
    hist_explicit = explicit.fit(xa[:split_at], y[:split_at], batch_size=BATCH, epochs=EPOCHS,
                                 shuffle_seed=4, verbose=0,
                                 validation_data=(xa[split_at:], y[split_at:]))
    save("valsplit", weights=flat(model), history=json.dumps(hist.history),
         weights_explicit=flat(explicit), history_explicit=json.dumps(hist_explicit.history))

    # validation_split on per-rank data: rank r holds samples r, r+size, ...
    mine = np.arange(rank, N, size)
    model = make(one_input)
    hist = model.fit(xa[mine], y[mine], batch_size=4, epochs=1, shuffle=False, verbose=0,
                     tnt_distribute_dataset=False, validation_split=0.5)
    # The same validation samples, evaluated by hand over all ranks.
    cut = int(np.floor(len(mine) * 0.5))
    val = mine[cut:]
    with torch.no_grad():
        logits = model.module(torch.from_numpy(xa[val]))
        loss_sum = float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(y[val]),
                                                           reduction="sum"))
        correct = float((logits.argmax(1).numpy() == y[val]).sum())
    total = tnt.allreduce(np.array([loss_sum, correct, len(val)], dtype=np.float64))
    save("ownsplit", history=json.dumps(hist.history),
         expected=np.array([total[0] / total[2], total[1] / total[2]]))


if __name__ == "__main__":
    main(sys.argv[1])
