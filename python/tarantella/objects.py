"""Collectives on picklable Python objects: broadcast_object and
allgather_object.

Each call sends the pickled length first, then the bytes, over the byte
collectives the rest of the package uses. A rank whose object cannot be
pickled (or unpickled) does not leave its peers waiting: it sends a length
of -1, and every rank raises, the failing one with its own exception, the
others with :class:`TarantellaError` naming the rank.
"""
import pickle

import numpy as np

from . import _tnt
from ._protocol import _K_ALLGATHER, _K_BROADCAST, _check_agree
from .errors import InvalidArgumentError, TarantellaError

__all__ = ["broadcast_object", "allgather_object"]


def _dumps(obj):
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), None
    except Exception as e:  # noqa: BLE001 - re-raised after the peers know
        return None, e


def broadcast_object(obj, root=0):
    """Returns root's ``obj`` on every rank (a copy, unpickled, on the
    others; root gets its own object back). ``obj`` is ignored on the other
    ranks. Collective: every rank calls it with the same ``root``."""
    size = _tnt.size()
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < size:
        raise InvalidArgumentError("broadcast_object: root %r is not a rank (0..%d)"
                                   % (root, size - 1))
    if size == 1:
        # Pickled anyway, so a script that works on one rank works on many.
        error = _dumps(obj)[1]
        if error is not None:
            raise error
        return obj
    me = _tnt.rank()
    data, error = _dumps(obj) if me == root else (b"", None)
    length = np.array([-1 if data is None else len(data)], dtype=np.int64)
    # The agreement check catches ranks that pass different roots.
    _check_agree(_K_BROADCAST, (1,), 0, root, root=root)
    _tnt.broadcast(length, root)
    n = int(length[0])
    if n < 0:
        if error is not None:
            raise error
        raise TarantellaError("broadcast_object: rank %d could not pickle its object (see "
                              "its error)" % root)
    buf = np.frombuffer(data, dtype=np.uint8).copy() if me == root \
        else np.empty(n, dtype=np.uint8)
    if n > 0:
        _tnt.broadcast(buf, root)
    if me == root:
        return obj
    return pickle.loads(buf.tobytes())


def allgather_object(obj):
    """Returns the list of every rank's ``obj``, in rank order, on every rank
    (all entries unpickled copies, this rank's included). The objects may
    differ in type and size. Collective."""
    size = _tnt.size()
    if size == 1:
        data, error = _dumps(obj)
        if error is not None:
            raise error
        return [pickle.loads(data)]
    data, error = _dumps(obj)
    _check_agree(_K_ALLGATHER, (1,), 0, 0)
    lens = np.empty(size, dtype=np.int64)
    _tnt.allgather(np.array([-1 if data is None else len(data)], dtype=np.int64), lens)
    bad = [r for r in range(size) if lens[r] < 0]
    if bad:
        if error is not None:
            raise error
        raise TarantellaError("allgather_object: rank%s %s could not pickle %s object (see "
                              "%s error)" % ("s" if len(bad) > 1 else "",
                                             ", ".join(map(str, bad)),
                                             "their" if len(bad) > 1 else "its",
                                             "their" if len(bad) > 1 else "its"))
    longest = int(lens.max())
    padded = np.zeros(longest, dtype=np.uint8)
    padded[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    gathered = np.empty((size, longest), dtype=np.uint8)
    _tnt.allgather(padded, gathered.reshape(-1))
    return [pickle.loads(gathered[r, :int(lens[r])].tobytes()) for r in range(size)]
