"""Rank script: tnt.broadcast_object and tnt.allgather_object.

Prints "rank R: ok N checks" when every check passed."""
import sys

import numpy as np
import torch

import tarantella as tnt

rank, size = tnt.get_rank(), tnt.get_size()
checks = 0

# broadcast_object from the master and from the last rank; non-root values
# are ignored, and the objects may hold tensors and arrays.
for root in (0, size - 1):  # the same root twice on one rank
    mine = {"from": rank, "t": torch.arange(5) * rank, "a": np.full(3, rank, np.float32),
            "nested": [("x" * 1000, rank)]} if rank == root else "ignored"
    got = tnt.broadcast_object(mine, root=root)
    assert got["from"] == root and torch.equal(got["t"], torch.arange(5) * root), got
    assert np.array_equal(got["a"], np.full(3, root, np.float32)) and got["nested"][0][1] == root
    assert got is mine if rank == root else True
    checks += 1
assert tnt.broadcast_object(None) is None  # None is an object like any other
checks += 1

# allgather_object: objects of different types and sizes, in rank order.
got = tnt.allgather_object({"rank": rank, "blob": b"\x00" * (rank * 5000)}
                           if rank % 2 == 0 else ["odd", rank])
assert len(got) == size
for r, obj in enumerate(got):
    assert (obj == {"rank": r, "blob": b"\x00" * (r * 5000)}) if r % 2 == 0 \
        else obj == ["odd", r], (r, obj)
checks += 1

# A root that is not a rank is refused before any communication.
try:
    tnt.broadcast_object(1, root=size)
except tnt.InvalidArgumentError as e:
    assert "not a rank" in str(e), e
    checks += 1

# An object that cannot be pickled, on one rank: every rank raises (the
# failing one its own error, the others TarantellaError naming it), nobody
# waits for TNT_TIMEOUT, and the job goes on.
bad = (lambda: 0) if rank == size - 1 else 1
for call in ("allgather", "broadcast"):
    try:
        if call == "allgather":
            tnt.allgather_object(bad)
        else:
            tnt.broadcast_object(bad, root=size - 1)
    except tnt.TarantellaError as e:
        assert rank != size - 1 and "rank %d could not pickle" % (size - 1) in str(e), e
        checks += 1
    except Exception as e:  # noqa: BLE001 - the pickling error itself
        assert rank == size - 1, e
        checks += 1
    else:
        raise AssertionError("%s_object: no error for an unpicklable object" % call)

assert tnt.allgather_object(rank) == list(range(size))
checks += 1
print("rank %d: ok %d checks" % (rank, checks))
sys.stdout.flush()
