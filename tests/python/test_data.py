"""tnt.data.DistributedSampler: libtnt's shard arithmetic seen from Python.

The sampler takes explicit rank/size, so the sharding of p ranks is checked
in one process against the serial order: together the ranks see exactly the
serial batches, nothing duplicated or dropped, whatever p."""
import numpy as np
import pytest
import torch

import tarantella as tnt  # noqa: E402  (a missing build must fail, not skip)
DistributedSampler = tnt.data.DistributedSampler


def shards(n, batch, size, **kw):
    return [DistributedSampler(n, batch, rank=r, size=size, **kw) for r in range(size)]


@pytest.mark.parametrize("n,batch,size", [(47, 10, 3), (41, 10, 3), (100, 8, 4), (5, 7, 2),
                                          (10, 4, 8), (0, 4, 2)])
@pytest.mark.parametrize("drop", [False, True])
def test_ranks_partition_serial_batches(n, batch, size, drop):
    serial = DistributedSampler(n, batch, seed=3, rank=0, size=1, drop_remainder=drop)
    ranks = shards(n, batch, size, seed=3, drop_remainder=drop)
    steps = len(serial)
    assert steps == (n // batch if drop else -(-n // batch))
    assert all(len(s) == steps for s in ranks)
    for epoch in (0, 1):
        for s in [serial] + ranks:
            s.set_epoch(epoch)
        seen = []
        for step, serial_idx in enumerate(serial):
            parts = [s.step_info(step) for s in ranks]
            joined = [i for idx, _ in parts for i in idx]
            assert joined == serial_idx  # rank order, contiguous, no duplicates
            counts = [len(idx) for idx, _ in parts]
            assert max(counts) - min(counts) <= 1
            assert counts == sorted(counts, reverse=True)  # extra samples on low ranks
            assert all(g == len(serial_idx) for _, g in parts)
            seen += serial_idx
        expect = (n // batch) * batch if drop else n
        assert len(seen) == len(set(seen)) == expect


def test_permutation_properties():
    a = DistributedSampler(1000, 10, seed=7, rank=0, size=1)
    b = DistributedSampler(1000, 10, seed=7, rank=2, size=5)
    assert np.array_equal(a.permutation(), b.permutation())  # independent of p
    assert sorted(a.permutation().tolist()) == list(range(1000))
    assert not np.array_equal(a.permutation(), np.arange(1000))
    e0 = a.permutation().copy()
    a.set_epoch(1)
    assert not np.array_equal(a.permutation(), e0)
    a.set_epoch(0)
    assert np.array_equal(a.permutation(), e0)  # deterministic per (seed, epoch)
    c = DistributedSampler(1000, 10, seed=8, rank=0, size=1)
    assert not np.array_equal(c.permutation(), e0)
    assert tnt.data.epoch_seed(7, 0) != tnt.data.epoch_seed(7, 1)
    assert tnt.data.epoch_seed(7, 3) == tnt.data.epoch_seed(7, 3)
    ordered = DistributedSampler(10, 4, shuffle=False, rank=1, size=2)
    assert list(ordered) == [[2, 3], [6, 7], [9]]
    assert list(ordered.steps()) == [([2, 3], 4), ([6, 7], 4), ([9], 2)]


def test_sampler_defaults_and_errors():
    s = DistributedSampler(list(range(9)), 4)  # a sized dataset; rank/size from tnt
    assert (s.rank, s.size, len(s)) == (tnt.get_rank(), tnt.get_size(), 3)
    with pytest.raises(IndexError):
        s.step_info(3)
    with pytest.raises(tnt.InvalidArgumentError):
        DistributedSampler(10, 0)
    with pytest.raises(tnt.InvalidArgumentError):
        DistributedSampler(10, 2, rank=2, size=2)


def test_dataloader_batch_sampler():
    x = torch.arange(22, dtype=torch.float32).unsqueeze(1)
    ds = torch.utils.data.TensorDataset(x, x * 2)
    # 22 samples, batch 4, 3 ranks: the last batch (2 samples) leaves rank 2
    # empty; collate_allow_empty turns that into None.
    got = []
    for r in range(3):
        sampler = DistributedSampler(ds, 4, seed=1, rank=r, size=3)
        loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler,
                                             collate_fn=tnt.data.collate_allow_empty)
        batches = list(loader)
        assert len(batches) == len(sampler) == 6
        got.append(batches)
    assert got[2][-1] is None and got[0][-1] is not None
    flat = sorted(int(v) for b in sum(got, []) if b is not None for v in b[0].flatten())
    assert flat == list(range(22))
