"""tnt.Model: serial equivalence, exact sharded evaluate/predict, identical
logs on every rank, the README example.

Multi-rank runs go through the launcher (conftest.launch); the serial
reference runs the same rank script as a plain process.
"""
import json
import os
import re

import numpy as np
import pytest

from conftest import REPO_DIR, check

CONFIGS = ("uneven_t0", "uneven_small", "uneven_large", "tiny_last")


@pytest.fixture(scope="module")
def serial_reference(tmp_path_factory, build_dir):
    from conftest import run_single
    out = tmp_path_factory.mktemp("serial")
    check(run_single("model_equivalence.py", out, timeout=90), "serial reference")
    return out


def _load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_serial_equivalence(ranks, serial_reference, launch, tmp_path):
    """After 3 epochs with B=31 over 203 samples (B not divisible by the
    rank count, last batch 17) and with 66 samples at B=32 (last batch of 2,
    fewer samples than ranks), the weights on N ranks equal serial training
    to float32 tolerance, with fusion thresholds 0, 1 KiB and 64 MiB."""
    check(launch(ranks, "model_equivalence.py", tmp_path, timeout=120), "%d ranks" % ranks)
    for name in CONFIGS:
        ref = _load(serial_reference / ("%s.rank0.npz" % name))
        per_rank = [_load(tmp_path / ("%s.rank%d.npz" % (name, r))) for r in range(ranks)]
        for r, got in enumerate(per_rank):
            # Every rank holds the same weights, bit for bit (one reduction).
            np.testing.assert_array_equal(got["weights"], per_rank[0]["weights"],
                                          err_msg="%s: rank %d differs from rank 0" % (name, r))
            # History identical on all ranks (not just close).
            assert got["history"] == per_rank[0]["history"], (name, r)
            # predict: the full result, in dataset order, on every rank.
            np.testing.assert_array_equal(got["predict"], per_rank[0]["predict"])
            np.testing.assert_array_equal(got["evaluate"], per_rank[0]["evaluate"])
        got = per_rank[0]
        np.testing.assert_allclose(got["weights"], ref["weights"], rtol=1e-5, atol=2e-6,
                                   err_msg="%s: %d ranks vs serial" % (name, ranks))
        h_ref, h_got = json.loads(str(ref["history"])), json.loads(str(got["history"]))
        assert h_ref.keys() == h_got.keys()
        for key in h_ref:
            np.testing.assert_allclose(h_got[key], h_ref[key], rtol=1e-5, err_msg=key)
        assert got["predict"].shape == ref["predict"].shape
        np.testing.assert_allclose(got["predict"], ref["predict"], rtol=1e-4, atol=1e-5)
    # Plain torch over the same global batches (no tarantella training code)
    # gives the same weights; and so does per-rank data with
    # tnt_distribute_dataset=False against its own serial batches.
    for r in range(ranks):
        plain = _load(tmp_path / ("plain.rank%d.npz" % r))
        np.testing.assert_allclose(_load(tmp_path / ("uneven_t0.rank%d.npz" % r))["weights"],
                                   plain["torch_ref"], rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(plain["own"], plain["own_ref"], rtol=1e-5, atol=2e-6)
    # Sharded evaluate on fixed weights: the accuracy equals the serial one
    # exactly (sums and counts are combined, no sample counted twice), the
    # loss to float rounding; predict is identical to the serial outputs.
    ref = _load(serial_reference / "fixed.rank0.npz")
    ref_eval = json.loads(str(ref["evaluate"]))
    for r in range(ranks):
        got = _load(tmp_path / ("fixed.rank%d.npz" % r))
        got_eval = json.loads(str(got["evaluate"]))
        assert got_eval["accuracy"] == ref_eval["accuracy"]
        assert got_eval["sparse_categorical_accuracy"] == ref_eval["sparse_categorical_accuracy"]
        assert got_eval["loss"] == pytest.approx(ref_eval["loss"], rel=1e-6)
        np.testing.assert_allclose(got["predict"], ref["predict"], rtol=1e-5, atol=1e-6)
        # tnt_predict_on_all_ranks=False: only the master gets the result.
        assert bool(got["master_only"][0]) == (r != 0)


def test_digits_example(launch):
    """The README's job: python/examples/digits.py on 2 ranks reaches >= 95%
    test accuracy; the progress bar and the result print on the master only."""
    script = os.path.join(REPO_DIR, "python", "examples", "digits.py")
    out = check(launch(2, script, timeout=120), "digits.py on 2 ranks")
    m = re.search(r"Test accuracy: ([0-9.]+)%", out)
    assert m, out
    assert float(m.group(1)) >= 95.0, out
    assert out.count("Test accuracy:") == 1, out
    assert out.count("Epoch 1/15") == 1, out
    assert out.count("Total params: 13,706") == 1, out


def test_single_process_api(run_single):
    """One rank under plain python3: BatchNorm warning once, Dataset input
    equals arrays, regression names and callable metrics, summary and error
    messages, the progress bar's final line per epoch."""
    out = check(run_single("model_serial_checks.py", timeout=120), "model_serial_checks.py")
    for name in ("batchnorm_warning_once", "dataset_input", "regression_metrics",
                 "errors_and_summary", "progbar", "custom_objects"):
        assert "OK %s" % name in out, out
