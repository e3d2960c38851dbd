"""Dataset sharding on libtnt's shard arithmetic.

A global batch of B samples is split over p ranks: rank r gets B/p samples,
plus one when r < B % p, from a permutation of the dataset that depends only
on the seed and the epoch (never on p). A final partial batch is split by the
same rule, so nothing is duplicated; a rank may get no sample in it. With
``drop_remainder=True`` the final partial batch is skipped.
"""
import numpy as np

from . import _tnt
from .errors import InvalidArgumentError

__all__ = ["DistributedSampler", "epoch_seed", "collate_allow_empty"]

_MASK64 = (1 << 64) - 1


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
    process's. Iterating yields one list of dataset indices per step (possibly
    empty on some ranks in the final partial batch); ``len()`` is the number of
    steps, the same on every rank. Usable as a torch DataLoader
    ``batch_sampler`` (use :func:`collate_allow_empty` when a step can be
    empty on a rank, i.e. when the final partial batch has fewer samples than
    ranks). Call ``set_epoch(e)`` before each epoch to reshuffle.
    """

    def __init__(self, num_samples, global_batch_size, shuffle=True, seed=0,
                 drop_remainder=False, rank=None, size=None):
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
        self.size = int(size) if size is not None else _tnt.size()
        self.rank = int(rank) if rank is not None else _tnt.rank()
        if not 0 <= self.rank < self.size:
            raise InvalidArgumentError("rank %d out of range for size %d" % (self.rank, self.size))
        self.epoch = 0
        self._perm = None
        self._perm_epoch = None

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

    def step_count(self, step):
        """Samples in the whole global batch of ``step`` (B, or fewer in the
        final partial batch; 0 past the last step)."""
        # The whole global batch is the share of rank 0 of 1.
        b, e = _tnt.shard_step_range(self.num_samples, self.global_batch_size,
                                     self.drop_remainder, step, 0, 1)
        return e - b

    def step_info(self, step):
        """``(local_indices, global_count)`` of ``step``: this rank's dataset
        indices (a list) and the number of samples of the step over all ranks;
        ``len(local_indices) / global_count`` is the rank's gradient weight."""
        if not 0 <= step < len(self):
            raise IndexError("step %d out of range (%d steps)" % (step, len(self)))
        b, e = _tnt.shard_step_range(self.num_samples, self.global_batch_size,
                                     self.drop_remainder, step, self.rank, self.size)
        return self.permutation()[b:e].tolist(), self.step_count(step)

    def steps(self):
        """Iterates ``(local_indices, global_count)`` over the epoch's steps."""
        for step in range(len(self)):
            yield self.step_info(step)

    def __iter__(self):
        for indices, _ in self.steps():
            yield indices


def collate_allow_empty(batch):
    """torch DataLoader ``collate_fn`` that returns None for an empty
    micro-batch (and default-collates any other)."""
    if len(batch) == 0:
        return None
    from torch.utils.data import default_collate
    return default_collate(batch)
