"""tnt.Model's data feeding: the samples given to fit, evaluate and predict
(arrays, tensors, tuples or dicts of them, or a torch Dataset), addressed
by global sample position and fetched as collated micro-batches, in this
process or in DataLoader workers."""
import copy
import inspect

import numpy as np
import torch


def as_tensor(a, what):
    if isinstance(a, torch.Tensor):
        t = a
    else:
        try:
            t = torch.from_numpy(np.ascontiguousarray(a))
        except TypeError:
            raise TypeError("tnt.Model: %s must be a numpy array, a torch tensor or a torch "
                            "Dataset, got %s" % (what, type(a).__name__)) from None
    # Keras casts float64 inputs to float32 (floatx); torch modules want it too.
    if t.dtype == torch.float64:
        t = t.float()
    return t


def map_inputs(fn, x):
    """Applies fn to each input of x: a tensor, or a tuple, list or dict of
    them (a multi-input model)."""
    if isinstance(x, dict):
        return {k: fn(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(fn(v) for v in x) if type(x) in (tuple, list) else [fn(v) for v in x]
    return fn(x)


def floatx(t):
    return t.float() if isinstance(t, torch.Tensor) and t.dtype == torch.float64 else t


def positional_inputs(module):
    """How many positional arguments module.forward requires (2 or more
    makes a pair (x1, x2) multi-input data rather than (x, y))."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


def _as_is(batch):
    # DataLoader collate_fn: Data.fetch already returns collated tensors.
    return batch


class _Fetcher(torch.utils.data.Dataset):
    """A DataLoader "dataset" whose items are whole micro-batches: item
    ``positions`` (a list of sample positions) is ``data.fetch(positions)``,
    so worker processes load and collate exactly this rank's samples."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return self.data.n

    def __getitem__(self, positions):
        return self.data.fetch(positions)


def check_loader_args(num_workers, pin_memory):
    if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) \
            or num_workers < 0:
        raise ValueError("num_workers must be an integer >= 0 (0 loads in this process), "
                         "got %r" % (num_workers,))
    return int(num_workers), bool(pin_memory)


class Data:
    """Samples addressed by position 0..n-1, fetched as collated batches.

    ``x``: an array or tensor, a tuple / list / dict of them (the inputs of
    a multi-input model, with the same number of samples), or a torch
    Dataset whose items are ``(input, label)`` (``input`` may itself be a
    tuple or dict). With ``y`` None, a pair ``(x, y)`` is split, unless the
    module takes two positional inputs and ``x`` is two arrays.
    """

    def __init__(self, x, y=None, what="x", n_inputs=1):
        if y is None and self._is_pair(x, n_inputs):
            x, y = x
        self.dataset = None
        if isinstance(x, torch.utils.data.Dataset):
            if y is not None:
                raise ValueError("tnt.Model: give labels inside the Dataset, not as y")
            self.dataset = x
            self.n = len(x)
            return
        if isinstance(x, dict) or isinstance(x, (tuple, list)):
            if len(x) == 0:
                raise ValueError("tnt.Model: %s is an empty %s; give the model's inputs"
                                 % (what, type(x).__name__))
            self.x = map_inputs(lambda a: as_tensor(a, what), x)
            parts = list(self.x.items()) if isinstance(self.x, dict) else \
                [("%s[%d]" % (what, i), t) for i, t in enumerate(self.x)]
            counts = {name: t.shape[0] for name, t in parts}
            if len(set(counts.values())) > 1:
                raise ValueError("tnt.Model: the inputs of %s have different numbers of "
                                 "samples: %s" % (what, ", ".join("%s: %d" % kv
                                                                   for kv in counts.items())))
            self.n = parts[0][1].shape[0]
        else:
            self.x = as_tensor(x, what)
            self.n = self.x.shape[0]
        self.y = as_tensor(y, "y") if y is not None else None
        if self.y is not None and self.y.shape[0] != self.n:
            raise ValueError("tnt.Model: %s has %d samples but y has %d"
                             % (what, self.n, self.y.shape[0]))

    @staticmethod
    def _is_pair(x, n_inputs):
        if not isinstance(x, (tuple, list)) or len(x) != 2 \
                or isinstance(x, torch.utils.data.Dataset):
            return False
        # ((x1, x2), y) or ({"a": ..}, y) is a pair; (x1, x2) is one only
        # when the module takes a single input.
        return isinstance(x[0], (tuple, list, dict)) or n_inputs < 2

    def subset(self, begin, end):
        """The samples at positions begin..end-1 as a Data (views, no copy)."""
        part = copy.copy(self)
        if self.dataset is not None:
            part.dataset = torch.utils.data.Subset(self.dataset, range(begin, end))
        else:
            part.x = map_inputs(lambda t: t[begin:end], self.x)
            part.y = self.y[begin:end] if self.y is not None else None
        part.n = end - begin
        return part

    def fetch(self, positions):
        """(x, y) for the samples at ``positions``; y is None without labels."""
        if self.dataset is None:
            idx = torch.from_numpy(np.asarray(positions, dtype=np.int64))
            return (map_inputs(lambda t: t[idx], self.x),
                    self.y[idx] if self.y is not None else None)
        items = [self.dataset[int(i)] for i in positions]
        batch = torch.utils.data.default_collate(items)
        if isinstance(batch, (tuple, list)) and len(batch) == 2:
            xb, yb = batch
        elif isinstance(batch, (tuple, list)) and len(batch) == 1:
            xb, yb = batch[0], None
        else:
            xb, yb = batch, None
        return map_inputs(floatx, xb), yb

    def batches(self, index_lists, num_workers=0, pin_memory=False):
        """Iterates (x, y) over ``index_lists`` (non-empty lists of sample
        positions), in order. With ``num_workers`` > 0, DataLoader worker
        processes fetch and collate the batches ahead, and only these
        samples; ``pin_memory`` pins the batches' memory."""
        if num_workers == 0 and not pin_memory:
            return (self.fetch(idx) for idx in index_lists)
        loader = torch.utils.data.DataLoader(_Fetcher(self), batch_size=None,
                                             sampler=index_lists, num_workers=num_workers,
                                             pin_memory=pin_memory, collate_fn=_as_is)
        return iter(loader)
