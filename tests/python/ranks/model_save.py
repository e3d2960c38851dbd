"""Rank script for test_save.py: model I/O on N ranks. Writes what each
rank saw to <outdir>/save.rank<r>.json."""
import json
import os
import sys

import numpy as np
import torch

import tarantella as tnt

OUT = sys.argv[1]
RANK = tnt.get_rank()
rng = np.random.RandomState(11)
X = rng.randn(90, 5).astype(np.float32)
Y = rng.randint(0, 3, size=90).astype(np.int64)


class Net(torch.nn.Module):
    """A module class with the Keras config protocol (for model_from_config)."""

    def __init__(self, hidden=12):
        super().__init__()
        self.hidden = hidden
        self.body = torch.nn.Sequential(torch.nn.Linear(5, hidden), torch.nn.ReLU(),
                                        torch.nn.Linear(hidden, 3))

    def forward(self, x):
        return self.body(x)

    def get_config(self):
        return {"hidden": self.hidden}


def flat(model):
    return np.concatenate([w.ravel().astype(np.float64) for w in model.get_weights()])


def accuracy_of(y_true, y_pred):
    return (y_pred.argmax(-1) == y_true).double()


res = {}
torch.manual_seed(RANK + 100)   # different per rank: Model() must broadcast
model = tnt.Model(Net())
res["initial"] = flat(model).tolist()
model.compile(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
              torch.nn.CrossEntropyLoss(), ["accuracy", accuracy_of])
model.fit(X, Y, batch_size=16, epochs=1, shuffle_seed=3, verbose=0)
path = os.path.join(OUT, "model.pt")
model.save(path)
# Files this script wrote itself: trusted.
loaded = tnt.models.load_model(path, trusted=True)
res["loaded_compiled"] = loaded.compiled
res["loaded_optimizer"] = type(loaded.optimizer).__name__
res["weights_equal"] = bool(np.array_equal(flat(model), flat(loaded)))
res["momentum_equal"] = all(
    torch.equal(model.optimizer.state[p]["momentum_buffer"], loaded.optimizer.state[q]["momentum_buffer"])
    for p, q in zip(model.parameters(), loaded.parameters()))
res["eval_original"] = model.evaluate(X, Y, verbose=0)
res["eval_loaded"] = loaded.evaluate(X, Y, verbose=0)
# Continue training both: identical results (optimizer state restored).
model.fit(X, Y, batch_size=16, epochs=3, initial_epoch=1, shuffle_seed=3, verbose=0)
loaded.fit(X, Y, batch_size=16, epochs=3, initial_epoch=1, shuffle_seed=3, verbose=0)
res["continued_equal"] = bool(np.array_equal(flat(model), flat(loaded)))
res["final"] = flat(model).tolist()

# Weights only.
wpath = os.path.join(OUT, "w.pt")
model.save_weights(wpath)
saved = flat(model)
model.set_weights([np.zeros_like(w) for w in model.get_weights()])
res["zeroed"] = bool(np.all(flat(model) == 0))
model.load_weights(wpath)
res["weights_roundtrip"] = bool(np.array_equal(saved, flat(model)))

# Uncompiled save/load comes back uncompiled.
upath = os.path.join(OUT, "uncompiled.pt")
tnt.models.save_model(tnt.Model(Net()), upath)
res["uncompiled_loaded_compiled"] = tnt.models.load_model(upath, trusted=True).compiled

# clone_model / model_from_config: same architecture, fresh weights (the
# master's, broadcast), uncompiled.
clone = tnt.models.clone_model(model)
res["clone"] = {"compiled": clone.compiled, "differs": not np.array_equal(flat(clone), saved),
                "weights": flat(clone).tolist()}
rebuilt = tnt.models.model_from_config(model.get_config())
res["rebuilt"] = {"type": type(rebuilt.module).__name__, "hidden": rebuilt.module.hidden,
                  "weights": flat(rebuilt).tolist()}

# A failed save raises on every rank (nobody waits for a dead writer).
bad = os.path.join(OUT, "not-a-dir")
if RANK == 0:
    open(bad, "w").close()
tnt.barrier()
try:
    model.save(os.path.join(bad, "m.pt"))
    res["bad_save"] = "no error"
except Exception as e:  # noqa: BLE001 - the test checks the type
    res["bad_save"] = type(e).__name__

with open(os.path.join(OUT, "save.rank%d.json" % RANK), "w") as f:
    json.dump(res, f)
