"""Dataset sharding on libtnt's shard arithmetic.

A global batch of B samples is split over p ranks: rank r gets B/p samples,
plus one when r < B % p, from a permutation of the dataset that depends only
on the seed and the epoch (never on p). A final partial batch is split by the
same rule, so nothing is duplicated. A rank whose share of a step is empty
(a final partial batch with fewer samples than ranks) still gets a batch:
one placeholder sample of that step, which ``micro_batch(step)`` weights 0,
so no empty batch reaches the training loop and the step stays exact. With
``drop_remainder=True`` the final partial batch is skipped.
"""
import numpy as np

from . import _tnt
from .errors import InvalidArgumentError

__all__ = ["DistributedSampler", "DataLoader", "epoch_seed", "collate_allow_empty"]

_MASK64 = (1 << 64) - 1

# Members an earlier version had, and what replaces them (AttributeError says so).
_REPLACED = {
    "step_count": "micro_batch(step)[1] (the step's global sample count)",
    "steps": "enumerate(sampler) with micro_batch(step) (or step_info(step) for the "
             "exact, possibly empty share)",
}


def epoch_seed(seed, epoch):
    """The permutation seed of an epoch: a splitmix64-style mix of
    ``seed + epoch * 0x9E3779B97F4A7C15`` (mod 2**64), so epochs differ and
    every rank derives the same value."""
    z = (int(seed) + int(epoch) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class DistributedSampler:
    """Per-step index lists of this rank's micro-batches.

    ``num_samples``: dataset length (or a sized dataset). ``global_batch_size``:
    samples per step over all ranks. ``rank``/``size`` default to this
    process's. Iterating yields one list of dataset indices per step;
    ``len()`` is the number of steps, the same on every rank. Use it as a
    torch DataLoader ``batch_sampler`` and weight each step with
    ``optimizer.set_micro_batch(*sampler.micro_batch(step))``. Call
    ``set_epoch(e)`` before each epoch to reshuffle.

    A rank with no sample in a step (the final partial batch has fewer
    samples than ranks) is given a placeholder: the step's first sample.
    ``micro_batch(step)`` counts it as 0 samples, so its gradient has weight
    0 and the step equals the serial one. ``allow_empty=True`` yields an
    empty list instead (the DataLoader then needs
    ``collate_fn=collate_allow_empty`` and the loop must skip the batch).
    """

    def __init__(self, num_samples, global_batch_size, shuffle=True, seed=0,
                 drop_remainder=False, rank=None, size=None, allow_empty=False):
        if not isinstance(num_samples, (int, np.integer)):
            num_samples = len(num_samples)
        if num_samples < 0:
            raise InvalidArgumentError("num_samples must be >= 0")
        if int(global_batch_size) < 1:
            raise InvalidArgumentError("global_batch_size must be >= 1, got %r"
                                       % (global_batch_size,))
        if rank is None or size is None:
            _tnt.init()
        self.num_samples = int(num_samples)
        self.global_batch_size = int(global_batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_remainder = bool(drop_remainder)
        self.allow_empty = bool(allow_empty)
        self.size = int(size) if size is not None else _tnt.size()
        self.rank = int(rank) if rank is not None else _tnt.rank()
        if not 0 <= self.rank < self.size:
            raise InvalidArgumentError("rank %d out of range for size %d" % (self.rank, self.size))
        self.epoch = 0
        self._perm = None
        self._perm_epoch = None

    def __getattr__(self, name):
        # Only reached for names the class does not have.
        if name in _REPLACED:
            raise AttributeError("DistributedSampler.%s was replaced by %s; see "
                                 "docs/python-api.md, 'Sharding'" % (name, _REPLACED[name]))
        raise AttributeError("'DistributedSampler' object has no attribute %r" % name)

    def set_epoch(self, epoch):
        """Selects the epoch's permutation (seeded by ``epoch_seed(seed, epoch)``)."""
        self.epoch = int(epoch)

    def permutation(self):
        """The epoch's order of the dataset (a numpy int64 array, identical on
        every rank); ``arange`` when shuffle is off."""
        if self._perm is None or self._perm_epoch != self.epoch:
            if self.shuffle:
                perm = np.empty(self.num_samples, dtype=np.uint64)
                _tnt.shard_permutation(self.num_samples, epoch_seed(self.seed, self.epoch), perm)
                self._perm = perm.astype(np.int64)
            else:
                self._perm = np.arange(self.num_samples, dtype=np.int64)
            self._perm_epoch = self.epoch
        return self._perm

    def __len__(self):
        return int(_tnt.shard_num_steps(self.num_samples, self.global_batch_size,
                                        self.drop_remainder))

    def _check_step(self, step):
        if not 0 <= step < len(self):
            raise IndexError("step %d out of range (%d steps)" % (step, len(self)))

    def _global_range(self, step):
        # The whole global batch is the share of rank 0 of 1 (empty past the
        # last step).
        return _tnt.shard_step_range(self.num_samples, self.global_batch_size,
                                     self.drop_remainder, step, 0, 1)

    def _global_count(self, step):
        b, e = self._global_range(step)
        return e - b

    def _local_range(self, step):
        return _tnt.shard_step_range(self.num_samples, self.global_batch_size,
                                     self.drop_remainder, step, self.rank, self.size)

    def step_info(self, step):
        """``(local_indices, global_count)`` of ``step``: this rank's exact
        share (a list, empty when the rank has no sample in the step) and
        the number of samples of the step over all ranks. For code that
        handles an empty share itself (sharded evaluation, ``tnt.Model``);
        training loops iterate the sampler and use :meth:`micro_batch`."""
        self._check_step(step)
        b, e = self._local_range(step)
        return self.permutation()[b:e].tolist(), self._global_count(step)

    def micro_batch(self, step):
        """``(local_count, global_count)`` of ``step``, the arguments of
        ``optimizer.set_micro_batch``: this rank's number of real samples (0
        when iteration gave it a placeholder) and the step's number of
        samples over all ranks. ``local_count / global_count`` is the rank's
        gradient weight."""
        self._check_step(step)
        b, e = self._local_range(step)
        return e - b, self._global_count(step)

    def __iter__(self):
        perm = self.permutation()
        for step in range(len(self)):
            b, e = self._local_range(step)
            if e > b or self.allow_empty:
                yield perm[b:e].tolist()
            else:
                # No sample here: the step's first sample stands in, and
                # micro_batch(step) gives it weight 0. A valid step has at
                # least one sample.
                yield [int(perm[self._global_range(step)[0]])]


def collate_allow_empty(batch):
    """torch DataLoader ``collate_fn`` for ``DistributedSampler(...,
    allow_empty=True)``: None for an empty micro-batch (and default-collates
    any other)."""
    if len(batch) == 0:
        return None
    from torch.utils.data import default_collate
    return default_collate(batch)


def _torch_data_loader():
    # torch is imported on first use only (see tarantella/__init__.py).
    import torch.utils.data
    return torch.utils.data.DataLoader


def DataLoader(dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
               drop_last=False, seed=0, allow_empty=False, **kwargs):
    """A torch ``DataLoader`` that takes the usual ``batch_size=``,
    ``shuffle=`` and ``drop_last=`` and loads this rank's share of every
    global batch: ``DataLoader(ds, batch_size=64, shuffle=True, **kwargs)``
    becomes ``tnt.data.DataLoader(ds, batch_size=64, shuffle=True, **kwargs)``.

    ``batch_size`` is the **global** batch. The loader's
    ``batch_sampler`` is a :class:`DistributedSampler` built from
    ``batch_size``, ``shuffle``, ``seed`` (the same on every rank) and
    ``drop_last`` (its ``drop_remainder``). The loader has the sampler's
    ``micro_batch(step)`` and ``set_epoch(e)``; without ``set_epoch``, every
    new pass over the loader takes the next epoch's order, as a shuffling
    torch DataLoader draws a new order every pass. Every other keyword
    (``num_workers``, ``pin_memory``, ``collate_fn``, ...) goes to torch."""
    if sampler is not None or batch_sampler is not None:
        raise InvalidArgumentError(
            "tnt.data.DataLoader builds its own batch_sampler (a tnt.data.DistributedSampler) "
            "from batch_size, shuffle and drop_last; remove sampler=/batch_sampler= (a DDP "
            "DistributedSampler is not needed), or use torch's DataLoader with "
            "batch_sampler=tnt.data.DistributedSampler(...)")
    if batch_size is None:
        raise InvalidArgumentError("tnt.data.DataLoader needs batch_size (the global batch); "
                                   "batch_size=None (no batching) is not supported")
    if allow_empty and kwargs.get("collate_fn") is None:
        raise InvalidArgumentError(
            "tnt.data.DataLoader(allow_empty=True) yields empty micro-batches, which torch's "
            "default collate_fn cannot collate; pass collate_fn=tnt.data.collate_allow_empty "
            "(and skip None batches), leave allow_empty off (a zero-weight placeholder stands "
            "in for an empty share), or set drop_last=True")
    return _loader_class()(dataset, batch_sampler=DistributedSampler(
        dataset, batch_size, shuffle=shuffle, seed=seed, drop_remainder=drop_last,
        allow_empty=allow_empty), **kwargs)


_LOADER_CLASS = None


def _loader_class():
    """The torch DataLoader subclass behind :func:`DataLoader` (made on first
    use, so that importing tarantella does not import torch)."""
    global _LOADER_CLASS
    if _LOADER_CLASS is not None:
        return _LOADER_CLASS

    class _DistributedDataLoader(_torch_data_loader()):
        __doc__ = DataLoader.__doc__

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._tnt_passes = 0
            self._tnt_epoch_set = False

        def set_epoch(self, epoch):
            """Selects epoch ``epoch``'s order for the next pass."""
            self.batch_sampler.set_epoch(epoch)
            self._tnt_epoch_set = True

        def micro_batch(self, step):
            """The sampler's ``micro_batch(step)``: ``(local_count,
            global_count)`` for ``optimizer.set_micro_batch``."""
            return self.batch_sampler.micro_batch(step)

        def __iter__(self):
            if self._tnt_passes > 0 and not self._tnt_epoch_set:
                self.batch_sampler.set_epoch(self.batch_sampler.epoch + 1)
            self._tnt_epoch_set = False
            self._tnt_passes += 1
            return super().__iter__()

    _LOADER_CLASS = _DistributedDataLoader
    return _LOADER_CLASS
