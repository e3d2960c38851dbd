"""Thin wrappers over the package's collectives for tnt.Model, the fit
backup and collective saving (model, models, preemption, saving). They are
the only place those modules talk to other ranks, and they all
short-circuit on one rank so that plain ``python3 script.py`` needs no
peers.
"""
import numpy as np

from . import _tnt


def _pkg():
    # Imported lazily: tarantella/__init__.py may import the modules that use
    # this one while it is itself being initialised.
    import tarantella
    return tarantella


def rank():
    return _pkg().get_rank()


def size():
    return _pkg().get_size()


def sum_over_ranks(values):
    """Sums a float64 vector over the ranks. The per-rank vectors are
    gathered and added in rank order on every rank, so the result is
    identical bit for bit everywhere (callbacks then decide the same)."""
    local = np.ascontiguousarray(values, dtype=np.float64)
    if size() == 1:
        return local.copy()
    gathered = _pkg().allgather(local, check=False).reshape(size(), -1)
    total = np.zeros_like(local)
    for r in range(gathered.shape[0]):
        total += gathered[r]
    return total


def any_rank(flag):
    """True on every rank when ``flag`` is true on some rank."""
    if size() == 1:
        return bool(flag)
    buf = np.array([1 if flag else 0], dtype=np.int32)
    return bool(_pkg().allreduce(buf, op="max", check=False)[0])


def broadcast_bytes(data):
    """Master's ``data`` (bytes, or None for a failure) on every rank; None
    everywhere when the master had none. Every rank must call it."""
    if size() == 1:
        return data
    tnt = _pkg()
    length = np.array([-1 if data is None else len(data)], dtype=np.int64)
    length = tnt.broadcast(length, root=0, check=False)
    n = int(length[0])
    if n < 0:
        return None
    buf = np.frombuffer(data, dtype=np.uint8).copy() if rank() == 0 else np.empty(n, np.uint8)
    if n > 0:
        # Raw bytes: the extension's broadcast moves any buffer in place.
        _tnt.broadcast(buf, 0)
    return buf.tobytes()


def gather_bytes(data):
    """Every rank's ``data`` (bytes), in rank order, on every rank."""
    if size() == 1:
        return [data]
    tnt = _pkg()
    lens = tnt.allgather(np.array([len(data)], dtype=np.int64), check=False)
    flat = tnt.allgather_concat(np.frombuffer(data, dtype=np.uint8).copy())
    out, pos = [], 0
    for n in lens.reshape(-1):
        out.append(flat[pos:pos + int(n)].tobytes())
        pos += int(n)
    return out


def shard_range(n):
    """[begin, end) of this rank's contiguous share of n samples (libtnt's
    sharding arithmetic; no communication)."""
    return _tnt.shard_range(n, rank(), size())
