"""Single-process checks of tnt.Model's API surface, run by test_model.py
(no launcher: plain python3 is one rank). Prints OK <name> per check and
exits non-zero on the first failure."""
import io
import sys
import warnings
from contextlib import redirect_stdout

import numpy as np
import torch

import tarantella as tnt

rng = np.random.RandomState(0)
X = rng.randn(64, 4).astype(np.float64)           # float64 on purpose: cast to float32
Y = (X[:, 0] > 0).astype(np.int64)


def ok(name):
    print("OK", name, flush=True)


def bn_model():
    torch.manual_seed(0)
    return tnt.Model(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                         torch.nn.ReLU(), torch.nn.Linear(8, 2)))


# BatchNorm with a micro-batch below 16 warns once per model; 16 is fine.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    m = bn_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    m.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    bn_warnings = [w for w in caught if "BatchNorm" in str(w.message)]
    assert len(bn_warnings) == 1, [str(w.message) for w in caught]
    m = bn_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(X, Y, batch_size=16, epochs=1, verbose=0)
    assert len([w for w in caught if "BatchNorm" in str(w.message)]) == 1
ok("batchnorm_warning_once")

# A torch Dataset gives the same training as arrays.
def small():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))


results = []
for data in ((X, Y), torch.utils.data.TensorDataset(torch.from_numpy(X).float(),
                                                    torch.from_numpy(Y))):
    m = tnt.Model(small())
    m.compile(torch.optim.SGD(m.parameters(), lr=0.1), "sparse_categorical_crossentropy",
              ["accuracy"])
    if isinstance(data, tuple):
        h = m.fit(*data, batch_size=10, epochs=2, shuffle_seed=4, verbose=0)
    else:
        h = m.fit(data, batch_size=10, epochs=2, shuffle_seed=4, verbose=0)
    results.append((np.concatenate([w.ravel() for w in m.get_weights()]), h.history))
np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
assert results[0][1] == results[1][1]
p = m.predict(torch.utils.data.TensorDataset(torch.from_numpy(X).float(), torch.from_numpy(Y)),
              batch_size=9)
assert p.shape == (64, 2)
ok("dataset_input")

# Regression with names; callable metrics (Keras order y_true, y_pred);
# tnt_micro_batch_size on one rank is the global batch.
def max_error(y_true, y_pred):
    return (y_true - y_pred).abs().reshape(len(y_true), -1).max(dim=1).values


torch.manual_seed(2)
reg = tnt.Model(torch.nn.Linear(4, 1))
reg.compile("sgd", "mse", ["mae", max_error])
Yr = (X @ np.array([1.0, -2.0, 0.5, 0.0]))[:, None].astype(np.float32)
h = reg.fit(X, Yr, tnt_micro_batch_size=16, epochs=3, verbose=0)
assert set(h.history) == {"loss", "mae", "max_error"}, h.history
ev = reg.evaluate(X, Yr, verbose=0, return_dict=True)
pred = reg.predict(X)
mse = float(np.mean((pred - Yr) ** 2))
assert abs(ev["loss"] - mse) < 1e-5 * max(1, mse), (ev, mse)
assert abs(ev["mae"] - float(np.mean(np.abs(pred - Yr)))) < 1e-5
ok("regression_metrics")

# summary prints totals; errors are raised with a clear message.
buf = io.StringIO()
with redirect_stdout(buf):
    bn_model().summary()
text = buf.getvalue()
assert "Total params: 90" in text and "Non-trainable params: 16" in text, text
try:
    tnt.Model(small()).fit(X, Y)
    raise AssertionError("fit before compile did not raise")
except RuntimeError as e:
    assert "compile" in str(e)
try:
    tnt.Model(small()).compile("sgd", "no_such_loss")
    raise AssertionError("unknown loss did not raise")
except ValueError as e:
    assert "no_such_loss" in str(e)
try:
    tnt.Model(small()).compile(torch.optim.SGD(small().parameters(), lr=0.1), "mse")
    raise AssertionError("foreign optimizer did not raise")
except ValueError as e:
    assert "model.parameters()" in str(e)
ok("errors_and_summary")

# Progress bar: verbose=1 on a pipe prints one final line per epoch.
buf = io.StringIO()
m = tnt.Model(small())
m.compile("sgd", "sparse_categorical_crossentropy", ["accuracy"])
with redirect_stdout(buf):
    m.fit(X, Y, batch_size=10, epochs=2, verbose=1, validation_data=(X, Y))
lines = buf.getvalue().splitlines()
assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2", lines
assert lines[1].startswith("7/7 [==============================] - ") \
    and "s/step - loss: " in lines[1], lines
for key in ("loss:", "accuracy:", "val_loss:", "val_accuracy:"):
    assert key in lines[1], lines
ok("progbar")

# load_model(custom_objects=...): a class renamed since saving (a file this
# script wrote, hence trusted=True).
import os
import tempfile


class Saved(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x)


class Renamed(Saved):
    pass


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "m.pt")
    m = tnt.Model(Saved())
    m.compile("adam", "mse", ["mae"])
    m.save(path)
    del Saved                                   # the class is gone, as after a rename
    try:
        tnt.models.load_model(path, trusted=True)
        raise AssertionError("loading a missing class did not raise")
    except AttributeError:
        pass
    loaded = tnt.models.load_model(path, custom_objects={"Saved": Renamed}, trusted=True)
    assert type(loaded.module) is Renamed and loaded.compiled
    assert type(loaded.optimizer).__name__ == "Adam" and loaded.metrics_names == ["loss", "mae"]
    for a, b in zip(m.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
ok("custom_objects")
