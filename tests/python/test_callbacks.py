"""Callbacks on several ranks: identical History everywhere, collective
stopping (EarlyStopping, a user callback on one rank, batch-level stops,
TerminateOnNaN), master-only writers, log aggregation switches, progress
output on the master only unless TNT_OUTPUT_ON_ALL_DEVICES."""
import csv
import json
import os

import numpy as np
import pytest
import torch

from conftest import check


def _results(path, ranks):
    out = []
    for r in range(ranks):
        with open(os.path.join(path, "callbacks.rank%d.json" % r)) as f:
            out.append(json.load(f))
    return out


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory, build_dir):
    from conftest import launch
    out = tmp_path_factory.mktemp("cb3")
    stdout = check(launch(3, "model_callbacks.py", out, timeout=150, env={"TNT_TEST_VERBOSE": "1"}),
                   "model_callbacks.py on 3 ranks")
    return out, _results(out, 3), stdout


def test_history_identical_on_all_ranks(three_ranks):
    _, res, _ = three_ranks
    for r in res[1:]:
        assert r["history"] == res[0]["history"]          # bit for bit
        assert r["lambda_logs"] == res[0]["lambda_logs"]
    h = res[0]["history"]
    assert res[0]["history_epochs"] == [0, 1, 2, 3]
    assert set(h) == {"loss", "accuracy", "val_loss", "val_accuracy", "lr"}
    # LearningRateScheduler applied on every rank, logged as 'lr'.
    np.testing.assert_allclose(h["lr"], [0.1, 0.05, 0.1 / 3, 0.025])
    # Accuracy is a count over 120 samples, val over 50: exact fractions.
    for a in h["accuracy"]:
        assert round(a * 120) == pytest.approx(a * 120, abs=1e-9)


def test_stopping_is_collective(three_ranks):
    _, res, _ = three_ranks
    for r in res:
        assert r["early_epochs"] == [0, 1]                  # EarlyStopping, patience 1
        assert r["user_stop_epochs"] == [0, 1]              # stop asked on the last rank only
        assert r["batch_stop"] == {"batches": [0, 1, 2], "epochs": [0]}
        # Sample 37 is NaN: batch 3 of 10 samples (no shuffling).
        assert r["nan_batches"] == [0, 1, 2, 3]


def test_master_writes_once(three_ranks):
    out, res, _ = three_ranks
    expected = ["ckpt-01.pt", "best.weights", "ckpt-02.pt", "best.weights", "ckpt-03.pt",
                "ckpt-04.pt", "best.weights"]
    assert res[0]["writes"] == expected                     # master: every save
    for r in res[1:]:
        assert r["writes"] == []                            # others never write
    names = sorted(os.listdir(out))
    assert [n for n in names if n.startswith(".") or n.endswith(".tmp")] == []  # no temp files left
    for e in range(1, 5):
        obj = torch.load(os.path.join(out, "ckpt-%02d.pt" % e), weights_only=True)
        assert obj["format"] == "tarantella.model"
    with open(os.path.join(out, "log.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2, 3]  # one writer, one row per epoch
    assert float(rows[2]["loss"]) == pytest.approx(res[0]["history"]["loss"][2], rel=1e-12)


def test_wrapper_switches(three_ranks):
    _, res, _ = three_ranks
    # aggregate_logs=False: each rank sees its own shard's logs, which
    # differ between ranks; run_on_all_ranks=False: master only.
    assert len({json.dumps(r["local_logs"]) for r in res}) > 1
    assert [r["master_only_calls"] for r in res] == [1, 0, 0]


def test_progress_output_master_only(three_ranks, launch, tmp_path):
    _, _, stdout = three_ranks
    assert stdout.count("Epoch 1/4") == 1, stdout
    assert stdout.count("Batch 3: Invalid loss, terminating training") == 1, stdout
    out = check(launch(2, "model_callbacks.py", tmp_path, timeout=120,
                       env={"TNT_TEST_VERBOSE": "1", "TNT_OUTPUT_ON_ALL_DEVICES": "1"}),
                "model_callbacks.py with TNT_OUTPUT_ON_ALL_DEVICES")
    assert out.count("Epoch 1/4") == 2, out
