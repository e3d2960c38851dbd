"""tnt.Model data input through the launcher: DataLoader worker processes
(each rank loads only its shard), multi-input models (tuple and dict),
validation_split, the default shuffle seed from torch.manual_seed at 1 and 3
ranks, and gradient hooks that live only while fit runs."""
import collections
import json

import numpy as np
import pytest

from conftest import check

import tarantella as tnt  # noqa: E402  (a missing build must fail, not skip)

N, BATCH, EPOCHS = 61, 7, 2  # as in ranks/model_inputs.py


@pytest.fixture(scope="module")
def serial_inputs(tmp_path_factory, build_dir):
    from conftest import run_single
    out = tmp_path_factory.mktemp("serial")
    check(run_single("model_inputs.py", out, timeout=180), "serial model_inputs.py")
    return out


def _load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _assert_history_close(got, ref, what):
    got, ref = json.loads(str(got)), json.loads(str(ref))
    assert got.keys() == ref.keys(), what
    for key in ref:
        np.testing.assert_allclose(got[key], ref[key], rtol=1e-5, err_msg="%s %s" % (what, key))


@pytest.mark.parametrize("ranks", [2, 3])
def test_inputs_match_serial(ranks, serial_inputs, launch, tmp_path):
    check(launch(ranks, "model_inputs.py", tmp_path, timeout=300), "%d ranks" % ranks)
    for name in ("workers", "tuple", "dict"):
        ref = _load(serial_inputs / ("%s.rank0.npz" % name))
        per_rank = [_load(tmp_path / ("%s.rank%d.npz" % (name, r))) for r in range(ranks)]
        for r, got in enumerate(per_rank):
            np.testing.assert_array_equal(got["weights"], per_rank[0]["weights"],
                                          err_msg="%s: rank %d differs from rank 0" % (name, r))
            np.testing.assert_allclose(got["weights"], ref["weights"], rtol=1e-5, atol=2e-6,
                                       err_msg="%s: %d ranks vs serial" % (name, ranks))
            _assert_history_close(got["history"], ref["history"], name)
            np.testing.assert_allclose(got["evaluate"], ref["evaluate"], rtol=1e-5)
            np.testing.assert_allclose(got["predict"], ref["predict"], rtol=1e-4, atol=1e-5)
    # tuple and dict feed the same module the same data.
    np.testing.assert_array_equal(_load(tmp_path / "tuple.rank0.npz")["weights"],
                                  _load(tmp_path / "dict.rank0.npz")["weights"])

    # Worker processes loaded the samples, and each rank only its own: the
    # fit shards of both epochs plus the evaluate and predict slices.
    for r in range(ranks):
        main_pid = int(_load(tmp_path / ("workers.rank%d.npz" % r))["pid"][0])
        with open(tmp_path / ("loads.rank%d.txt" % r)) as f:
            loads = [tuple(map(int, line.split())) for line in f]
        pids = {pid for pid, _ in loads}
        assert main_pid not in pids, "rank %d loaded samples in its main process" % r
        assert len(pids) >= 2, "rank %d: expected 2 worker processes, saw %s" % (r, pids)
        expected = collections.Counter()
        sampler = tnt.data.DistributedSampler(N, BATCH, shuffle=True, seed=4, rank=r,
                                              size=ranks)
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            for idx in sampler:
                expected.update(idx)
        begin, end = tnt._tnt.shard_range(N, r, ranks)
        expected.update(list(range(begin, end)) * 2)  # evaluate and predict
        assert collections.Counter(i for _, i in loads) == expected, "rank %d" % r

    # validation_split = the last quarter as validation_data, exactly.
    ref = _load(serial_inputs / "valsplit.rank0.npz")
    for r in range(ranks):
        got = _load(tmp_path / ("valsplit.rank%d.npz" % r))
        np.testing.assert_array_equal(got["weights"], got["weights_explicit"])
        assert json.loads(str(got["history"])) == json.loads(str(got["history_explicit"]))
        assert "val_loss" in json.loads(str(got["history"]))
        np.testing.assert_allclose(got["weights"], ref["weights"], rtol=1e-5, atol=2e-6)
        _assert_history_close(got["history"], ref["history"], "valsplit")
        # Per-rank data: the validation logs combine every rank's split.
        own = _load(tmp_path / ("ownsplit.rank%d.npz" % r))
        hist = json.loads(str(own["history"]))
        assert hist["val_loss"][0] == pytest.approx(float(own["expected"][0]), rel=1e-5)
        assert hist["val_accuracy"][0] == pytest.approx(float(own["expected"][1]), rel=1e-12)


def test_default_seed_follows_torch_manual_seed(launch, run_single, tmp_path):
    """torch.manual_seed(s) makes fit's shuffled order, and so the weights,
    the same on 1 and 3 ranks; another seed gives another order; an explicit
    shuffle_seed wins over torch's seed."""
    one, three = tmp_path / "one", tmp_path / "three"
    one.mkdir()
    three.mkdir()
    check(run_single("model_seed.py", one, timeout=120), "1 rank")
    check(launch(3, "model_seed.py", three, timeout=180), "3 ranks")
    a = _load(one / "seed.rank0.npz")
    for r in range(3):
        b = _load(three / ("seed.rank%d.npz" % r))
        for key in ("seed5", "seed6", "explicit5"):
            np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=2e-6,
                                       err_msg="%s: 3 ranks (rank %d) vs 1 rank" % (key, r))
    assert np.abs(a["seed5"] - a["seed6"]).max() > 1e-3, "torch's seed did not change the order"
    np.testing.assert_array_equal(a["explicit5"], a["explicit6"])


def test_hooks_removed_after_fit(launch, run_single, tmp_path):
    """After fit a plain backward() gives plain autograd gradients (twice in
    a row, no error); the next fit trains data-parallel again, equal to the
    serial run."""
    out = check(launch(2, "model_hooks.py", tmp_path / "w", timeout=120), "2 ranks")
    assert out.count("OK hooks") == 2, out
    check(run_single("model_hooks.py", tmp_path / "serial", timeout=120), "serial")
    ref = np.load(str(tmp_path / "serial") + ".rank0.npy")
    got = np.load(str(tmp_path / "w") + ".rank0.npy")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-6)
