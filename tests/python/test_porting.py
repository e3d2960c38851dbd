"""What a port from DDP or Horovod relies on (issue 25, docs/porting.md).

* The DataLoader loop of docs/porting-tutorial.md, with torch's default
  collate and no empty-batch handling, reproduces serial training on 3 and
  4 ranks where the final global batch has fewer samples than ranks
  (ranks/porting_loader.py); so does tnt.data.DataLoader built from the
  usual DataLoader(ds, batch_size=..., shuffle=True, **kwargs) arguments.
* tnt.seed_per_rank gives every rank its own dropout masks and random
  draws, and rank 0 the serial script's (ranks/porting_seeds.py); so does
  tnt.Model.fit(tnt_seed_per_rank=...) (ranks/porting_fit_seed.py)."""
import importlib.util
import os

import numpy as np
import pytest
import torch

from conftest import RANKS_DIR, check

import tarantella as tnt  # noqa: E402  (a missing build must fail, not skip)


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(RANKS_DIR, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


loader_train = _load("porting_loader")


@pytest.fixture(scope="module")
def serial_loader_weights():
    return {name: loader_train.train_serial(cfg) for name, cfg in loader_train.CONFIGS.items()}


@pytest.mark.parametrize("ranks", [3, 4])
def test_dataloader_loop_matches_serial_with_empty_ranks(launch, tmp_path, serial_loader_weights,
                                                         ranks):
    out = tmp_path / "w.npz"
    check(launch(ranks, "porting_loader.py", str(out), timeout=240), "%d-rank training" % ranks)
    got = np.load(out)
    init = loader_train.weights(loader_train.make_model(3))
    for name, ref in serial_loader_weights.items():
        cfg = loader_train.CONFIGS[name]
        last = cfg["n"] % cfg["batch"]
        assert 0 < last < ranks
        # Ranks last..ranks-1 take a placeholder step at the end of each epoch.
        assert int(got["%s_placeholders" % name]) == (ranks - last) * loader_train.EPOCHS
        assert max(np.abs(r - w).max() for r, w in zip(ref, init)) > 1e-2  # it trained
        for i, r in enumerate(ref):
            np.testing.assert_allclose(got["%s_%d" % (name, i)], r, rtol=1e-5, atol=1e-6,
                                       err_msg="%s parameter %d on %d ranks" % (name, i, ranks))


@pytest.mark.parametrize("ranks", [1, 3])
def test_seed_per_rank(launch, run_single, ranks):
    # Ranks draw different dropout masks, torch/random/numpy values and
    # DataLoader-worker values; rank 0 draws what the serial script draws.
    if ranks == 1:
        out = check(run_single("porting_seeds.py", timeout=120), "one process")
    else:
        out = check(launch(ranks, "porting_seeds.py", timeout=180), "%d ranks" % ranks)
    lines = sorted(l for l in out.splitlines() if l.startswith("seeds ok"))
    assert lines == sorted("seeds ok %d %d" % (ranks, 11 + r) for r in range(ranks)), out


def test_seed_per_rank_refuses_negative():
    with pytest.raises(tnt.InvalidArgumentError, match="seed must be >= 0"):
        tnt.seed_per_rank(-1)


def test_data_loader_from_the_usual_arguments():
    # DataLoader(ds, batch_size=B, shuffle=True, **kwargs) with tnt.data:
    # the sampler is built from them; every pass is the next epoch.
    ds = torch.utils.data.TensorDataset(torch.arange(22))
    kwargs = {"batch_size": 8, "shuffle": True, "num_workers": 0, "drop_last": False}
    loader = tnt.data.DataLoader(ds, seed=3, **kwargs)
    assert isinstance(loader, torch.utils.data.DataLoader)
    ref = tnt.data.DistributedSampler(22, 8, seed=3)
    for epoch in range(2):
        ref.set_epoch(epoch)
        assert [b[0].tolist() for b in loader] == list(ref)
    loader.set_epoch(0)
    ref.set_epoch(0)
    assert [b[0].tolist() for b in loader] == list(ref)
    assert [loader.micro_batch(s) for s in range(len(loader))] == [(8, 8), (8, 8), (6, 6)]
    dropped = tnt.data.DataLoader(ds, batch_size=8, drop_last=True)
    assert [b[0].tolist() for b in dropped] == [list(range(8)), list(range(8, 16))]


def test_data_loader_errors_name_the_fix():
    ds = torch.utils.data.TensorDataset(torch.arange(5))
    with pytest.raises(tnt.InvalidArgumentError, match="remove sampler="):
        tnt.data.DataLoader(ds, batch_size=2,
                            sampler=torch.utils.data.SequentialSampler(ds))
    with pytest.raises(tnt.InvalidArgumentError, match="collate_fn=tnt.data.collate_allow_empty"):
        tnt.data.DataLoader(ds, batch_size=2, allow_empty=True)
    ok = tnt.data.DataLoader(ds, batch_size=2, allow_empty=True,
                             collate_fn=tnt.data.collate_allow_empty)
    assert len(list(ok)) == 3


def _fit_seed_lines(out):
    lines = {}
    for line in out.splitlines():
        if line.startswith("rank "):
            words = line.split()
            lines[int(words[1])] = (words[3], words[5])
    return lines


def test_fit_seed_per_rank(launch, run_single):
    # fit(tnt_seed_per_rank=5): the ranks draw differently, rank 0 draws
    # what a serial fit after torch.manual_seed(5) draws, and the data order
    # (drawn by the master) is the one of torch.manual_seed(5) before fit:
    # the weights equal those of that run bit for bit (the model's draws do
    # not touch the loss).
    serial = _fit_seed_lines(check(run_single("porting_fit_seed.py", "manual", timeout=120),
                                   "serial fit"))
    ranks = _fit_seed_lines(check(launch(2, "porting_fit_seed.py", "option", timeout=180),
                                  "2-rank fit"))
    assert sorted(ranks) == [0, 1] and list(serial) == [0], (serial, ranks)
    assert ranks[0][0] == serial[0][0]      # rank 0 draws the serial draws
    assert ranks[1][0] != ranks[0][0]       # rank 1 draws its own
    assert ranks[0][1] == ranks[1][1]       # the weights agree on every rank...
    same_seed = _fit_seed_lines(check(launch(2, "porting_fit_seed.py", "manual", timeout=180),
                                      "2-rank fit, one seed"))
    assert same_seed[0][0] == same_seed[1][0]  # the trap: one seed, the same draws
    assert same_seed[0][1] == ranks[0][1]      # ...and the order is the serial seed's
