"""Untrusted files and peer bytes never run code (issue 20).

A backup, a weights file or a model file loaded without the explicit
``trusted=True`` opt-in is read with torch's weights-only unpickler; a file
crafted with a ``__reduce__`` payload (here: one that creates a marker file)
is refused with a clear message and the marker never appears. Backups still
restore every RNG state exactly; a truncated backup says which file and
what to do; predict's output description crosses the ranks as plain data.
"""
import json
import os
import pickle
import random

import numpy as np
import pytest
import torch

from conftest import check

import tarantella as tnt
from tarantella import preemption


class Payload:
    """Unpickling this creates ``path``: the stand-in for any code a
    hostile file could run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _small_fit(backup_dir, batch_size=8):
    torch.manual_seed(0)
    model = tnt.Model(torch.nn.Linear(4, 2))
    model.compile("sgd", loss="mse")
    x = np.random.rand(40, 4).astype(np.float32)
    y = np.random.rand(40, 2).astype(np.float32)
    cb = tnt.callbacks.BackupAndRestore(str(backup_dir), save_freq=3, delete_checkpoint=False)
    model.fit(x, y, batch_size=batch_size, epochs=2, verbose=0, callbacks=[cb])
    return model, x, y, cb


def test_pickled_payload_in_backup_is_refused(tmp_path):
    bdir = tmp_path / "backup"
    bdir.mkdir()
    path = bdir / "tarantella-backup.pt"
    marker = tmp_path / "marker"
    model = torch.nn.Linear(4, 2)
    # A backup as a hostile writer would make it: the right header, a
    # payload among the callback states.
    torch.save({"format": "tarantella.backup", "version": 1, "kind": "fit", "size": 1,
                "epoch": 0, "step": 3, "model": model.state_dict(), "optimizer": None,
                "callbacks": {"History#0": Payload(marker)}, "rng": []}, path)
    with pytest.raises(tnt.TarantellaError) as e:
        _small_fit(bdir)
    msg = str(e.value)
    assert not marker.exists(), "unpickling the backup ran the payload"
    assert str(path) in msg and "nothing in it was run" in msg, msg
    assert "delete" in msg, msg

    # The same through the custom-loop API, with the payload where the
    # previous format kept its pickled RNG states.
    torch.save({"format": "tarantella.backup", "version": 1, "kind": "custom", "size": 1,
                "epoch": 0, "step": 3, "model": model.state_dict(), "optimizer": None,
                "extra": None, "rng": [pickle.dumps(Payload(marker))]}, path)
    with pytest.raises(tnt.TarantellaError) as e:
        preemption.load_training_state(path, model)
    msg = str(e.value)
    assert not marker.exists(), "restoring the RNG states ran the payload"
    # A backup of the previous format is refused the same way, and the
    # message says how to go on with it.
    assert "nothing in it was run" in msg and "format 1" in msg, msg
    assert "resume it with the tarantella version that wrote it" in msg, msg


def test_truncated_backup_names_the_file_and_what_to_do(tmp_path):
    bdir = tmp_path / "backup"
    _, _, _, cb = _small_fit(bdir)
    path = cb.backup_path
    size = os.path.getsize(path)
    for keep in (size // 2, 0):
        with open(path, "r+b") as f:
            f.truncate(keep)
        with pytest.raises(tnt.TarantellaError) as e:
            _small_fit(bdir)
        msg = str(e.value)
        assert path in msg and "truncated or corrupted" in msg, msg
        # There is one backup per backup_dir, replaced atomically: say so.
        assert "no older backup" in msg and "delete" in msg, msg
        assert e.value.__cause__ is None and (e.value.__context__ is None
                                              or e.value.__suppress_context__), \
            "the error should not chain torch's internal exception"


def test_backup_holds_plain_data_and_restores_rng_exactly(tmp_path):
    torch.manual_seed(1)
    module = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(module.parameters(), lr=0.01)
    module(torch.ones(1, 3)).sum().backward()
    opt.step()
    # Cached second Gaussians are part of both generators' states.
    random.gauss(0, 1)
    np.random.standard_normal()
    extra = {"seed": np.int64(7), "loss": np.float32(0.25), "best": float("-inf"),
             "arr": np.arange(6, dtype=np.uint16).reshape(2, 3), "nested": [(1, "a"), None, True],
             "t": torch.arange(3)}
    path = tmp_path / "state.pt"
    preemption.save_training_state(path, module, opt, epoch=2, step=5, extra=extra)
    draws = (torch.rand(4), np.random.standard_normal(3), [random.gauss(0, 1) for _ in range(3)])

    # The file needs nothing but torch's weights-only unpickler.
    raw = torch.load(path, map_location="cpu", weights_only=True)
    assert raw["format"] == "tarantella.backup"

    module2 = torch.nn.Linear(3, 2)
    opt2 = torch.optim.Adam(module2.parameters(), lr=0.5)
    info = preemption.load_training_state(path, module2, opt2)
    again = (torch.rand(4), np.random.standard_normal(3), [random.gauss(0, 1) for _ in range(3)])
    assert torch.equal(draws[0], again[0])
    assert np.array_equal(draws[1], again[1]) and draws[2] == again[2]
    assert (info["epoch"], info["step"]) == (2, 5)
    got = info["extra"]
    assert got["seed"] == 7 and type(got["seed"]) is int
    assert got["loss"] == 0.25 and type(got["loss"]) is float
    assert got["best"] == float("-inf")
    assert got["arr"].dtype == np.uint16 and np.array_equal(got["arr"], extra["arr"])
    assert got["nested"] == [(1, "a"), None, True] and torch.equal(got["t"], extra["t"])
    assert torch.equal(module2.weight, module.weight)
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s2["param_groups"] == s1["param_groups"]
    for k in s1["state"]:
        for name, v in s1["state"][k].items():
            assert torch.equal(s2["state"][k][name], v), name

    # What weights_only could not bring back is refused before any write.
    with pytest.raises(TypeError, match=r"\['extra'\]\['bad'\]: a value of type object"):
        preemption.save_training_state(tmp_path / "other.pt", module, opt,
                                       extra={"bad": object()})
    assert not (tmp_path / "other.pt").exists()


def test_model_files_unpickle_only_when_trusted(tmp_path):
    torch.manual_seed(2)
    model = tnt.Model(torch.nn.Linear(4, 2))
    model.compile("sgd", loss="mse")
    path = tmp_path / "model.pt"
    model.save(path)
    # The weights of a model file load as tensors only ...
    assert torch.load(path, map_location="cpu", weights_only=True)["format"] == "tarantella.model"
    other = tnt.Model(torch.nn.Linear(4, 2))
    other.load_weights(path)
    assert torch.equal(other.module.weight, model.module.weight)
    # ... the whole model only on request.
    with pytest.raises(ValueError, match="trusted=True"):
        tnt.models.load_model(path)
    loaded = tnt.models.load_model(path, trusted=True)
    assert loaded.compiled and torch.equal(loaded.module.weight, model.module.weight)
    config = model.get_config()
    assert "pickled_module" in config
    with pytest.raises(ValueError, match="trusted=True"):
        tnt.models.model_from_config(config)
    assert type(tnt.models.model_from_config(config, trusted=True).module) is torch.nn.Linear

    # A hostile file: neither load_weights nor load_model runs its payload.
    marker = tmp_path / "marker"
    hostile = tmp_path / "hostile.pt"
    torch.save({"format": "tarantella.model", "version": 1, "module": Payload(marker),
                "state_dict": {}}, hostile)
    with pytest.raises(ValueError) as e:
        other.load_weights(hostile)
    assert not marker.exists(), "load_weights ran the payload"
    assert str(hostile) in str(e.value) and "trusted=True" in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="trusted=True"):
        tnt.models.load_model(hostile)
    assert not marker.exists(), "load_model ran the payload without trusted=True"


def test_predict_description_is_plain_data(launch, tmp_path):
    check(launch(2, "untrusted_predict.py", tmp_path, timeout=120), "untrusted_predict.py")
    res = []
    for r in range(2):
        with open(tmp_path / ("predict.rank%d.json" % r)) as f:
            res.append(json.load(f))
    for r in res:
        # Rank 1 had no sample: its empty columns took the master's shapes.
        assert r["shapes"] == [[1, 2], [1, 1]] and r["dtypes"] == ["<f4", "|b1"], r
        assert r["values"] == res[0]["values"]
        assert "predict" in r["hostile"] and "same tarantella version" in r["hostile"], r
    assert not [n for n in os.listdir(tmp_path) if n.startswith("marker")], \
        "a rank unpickled the master's output description"
