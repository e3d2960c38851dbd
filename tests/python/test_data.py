"""tnt.data.DistributedSampler: libtnt's shard arithmetic seen from Python.

The sampler takes explicit rank/size, so the sharding of p ranks is checked
in one process against the serial order: together the ranks see exactly the
serial batches, nothing duplicated or dropped, whatever p."""
import re

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
    assert [ordered.step_info(s) for s in range(3)] == [([2, 3], 4), ([6, 7], 4), ([9], 2)]
    assert [ordered.micro_batch(s) for s in range(3)] == [(2, 4), (2, 4), (1, 2)]


def test_sampler_defaults_and_errors():
    s = DistributedSampler(list(range(9)), 4)  # a sized dataset; rank/size from tnt
    assert (s.rank, s.size, len(s)) == (tnt.get_rank(), tnt.get_size(), 3)
    with pytest.raises(IndexError):
        s.step_info(3)
    with pytest.raises(IndexError):
        s.micro_batch(-1)
    with pytest.raises(tnt.InvalidArgumentError):
        DistributedSampler(10, 0)
    with pytest.raises(tnt.InvalidArgumentError):
        DistributedSampler(10, 2, rank=2, size=2)


@pytest.mark.parametrize("n,batch,size", [(22, 4, 3), (41, 10, 3), (21, 10, 4), (10, 4, 8),
                                          (3, 8, 5)])
def test_iteration_never_yields_an_empty_batch(n, batch, size):
    # Where a rank's share of a step is empty, iteration gives it one
    # placeholder sample of that step and micro_batch() weights it 0; the
    # real samples (micro_batch's local count) are exactly the serial batch.
    serial = DistributedSampler(n, batch, seed=4, rank=0, size=1)
    ranks = shards(n, batch, size, seed=4)
    placeholders = 0
    for epoch in (0, 1):
        for s in [serial] + ranks:
            s.set_epoch(epoch)
        per_rank = [list(s) for s in ranks]
        for step, serial_idx in enumerate(serial):
            joined = []
            for s, steps in zip(ranks, per_rank):
                idx = steps[step]
                local, total = s.micro_batch(step)
                assert total == len(serial_idx) == s.step_info(step)[1]
                assert idx, "rank %d got an empty batch at step %d" % (s.rank, step)
                if local == 0:
                    placeholders += 1
                    assert s.step_info(step)[0] == []
                    assert idx == serial_idx[:1]  # one sample of this very step
                else:
                    assert idx == s.step_info(step)[0] and local == len(idx)
                    joined += idx
            assert joined == serial_idx
    assert placeholders > 0  # every case has a rank with no sample somewhere


def test_allow_empty_and_replaced_members():
    s = DistributedSampler(10, 4, shuffle=False, rank=2, size=3, allow_empty=True)
    assert list(s) == [[3], [7], []]
    assert s.micro_batch(2) == (0, 2)
    d = DistributedSampler(10, 4, shuffle=False, rank=2, size=3)
    assert list(d) == [[3], [7], [8]]  # the last step's first sample stands in
    for name, hint in (("step_count", "micro_batch(step)[1]"), ("steps", "enumerate(sampler)")):
        with pytest.raises(AttributeError, match=r"replaced by %s" % re.escape(hint)):
            getattr(d, name)
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        d.nonesuch


def test_dataloader_batch_sampler():
    x = torch.arange(22, dtype=torch.float32).unsqueeze(1)
    ds = torch.utils.data.TensorDataset(x, x * 2)
    # 22 samples, batch 4, 3 ranks: the last batch (2 samples) leaves rank 2
    # without a sample. By default it gets a placeholder that torch's
    # default collate handles; with allow_empty, collate_allow_empty turns
    # the empty share into None.
    got, real = [], []
    for r in range(3):
        sampler = DistributedSampler(ds, 4, seed=1, rank=r, size=3)
        batches = list(torch.utils.data.DataLoader(ds, batch_sampler=sampler))
        assert len(batches) == len(sampler) == 6
        assert all(b is not None and len(b[0]) > 0 for b in batches)
        real += [v for step, b in enumerate(batches)
                 for v in b[0].flatten()[:sampler.micro_batch(step)[0]].tolist()]
        empty = DistributedSampler(ds, 4, seed=1, rank=r, size=3, allow_empty=True)
        got.append(list(torch.utils.data.DataLoader(ds, batch_sampler=empty,
                                                    collate_fn=tnt.data.collate_allow_empty)))
    assert sorted(int(v) for v in real) == list(range(22))
    assert got[2][-1] is None and got[0][-1] is not None
    flat = sorted(int(v) for b in sum(got, []) if b is not None for v in b[0].flatten())
    assert flat == list(range(22))
