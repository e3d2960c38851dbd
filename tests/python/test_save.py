"""Model I/O: compiled save/load round trip on 2 ranks (training continues
identically), weights round trip, clone/model_from_config, a failing save
raises on every rank, and a crash in the middle of a save leaves the
previous file intact."""
import hashlib
import json
import os

import numpy as np
import torch

from conftest import check


def test_save_load_on_two_ranks(launch, tmp_path):
    check(launch(2, "model_save.py", tmp_path, timeout=120), "model_save.py on 2 ranks")
    res = []
    for r in range(2):
        with open(tmp_path / ("save.rank%d.json" % r)) as f:
            res.append(json.load(f))
    for r in res:
        # Model() broadcast the master's weights although seeds differed.
        assert r["initial"] == res[0]["initial"]
        assert r["loaded_compiled"] is True and r["loaded_optimizer"] == "SGD"
        assert r["weights_equal"] and r["momentum_equal"]
        assert r["eval_loaded"] == r["eval_original"]
        assert r["continued_equal"]
        assert r["final"] == res[0]["final"]
        assert r["zeroed"] and r["weights_roundtrip"]
        assert r["uncompiled_loaded_compiled"] is False
        assert r["clone"]["compiled"] is False and r["clone"]["differs"]
        assert r["clone"]["weights"] == res[0]["clone"]["weights"]
        assert r["rebuilt"]["type"] == "Net" and r["rebuilt"]["hidden"] == 12
        assert r["rebuilt"]["weights"] == res[0]["rebuilt"]["weights"]
    # The writer reports its own OSError; the waiting rank a TarantellaError.
    assert res[0]["bad_save"] == "FileExistsError"
    assert res[1]["bad_save"] == "TarantellaError"
    leftovers = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert leftovers == []


def test_crash_mid_save_keeps_previous_file(run_single, tmp_path):
    path = tmp_path / "model.pt"
    check(run_single("model_save_crash.py", "save", path, timeout=60), "first save")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    rc, out, err = run_single("model_save_crash.py", "crash", path, timeout=60)
    assert rc == 3, (rc, out, err)                  # died inside the write
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    obj = torch.load(path, weights_only=True)
    assert obj["format"] == "tarantella.model"      # still the complete old file
    # The interrupted write is a hidden temp file next to it, never the target.
    temps = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].startswith(".model.pt.")
    assert np.isfinite(obj["state_dict"]["weight"].numpy()).all()
