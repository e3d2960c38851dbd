"""Rank script: every collective on every dtype, numpy and torch, in place
and out of place, checked against values each rank can compute itself.
Prints 'rank R: ok N checks' on success; any failure raises (exit != 0)."""
import os
import sys

import numpy as np
import torch

import tarantella as tnt

rank, size = tnt.get_rank(), tnt.get_size()
checks = 0

# A forked child that exits through sys.exit runs atexit handlers; it must
# not finalize (and tear down) the parent's communicator.
child = os.fork()
if child == 0:
    sys.exit(0)
os.waitpid(child, 0)

NP = [np.float32, np.float64, np.float16, np.int32, np.int64]
TORCH = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def expect(got, want, what):
    global checks
    g = got.float().numpy() if isinstance(got, torch.Tensor) else np.asarray(got, np.float64)
    w = want.float().numpy() if isinstance(want, torch.Tensor) else np.asarray(want, np.float64)
    if g.shape != w.shape or not np.array_equal(g.astype(np.float64), w):
        raise AssertionError("rank %d: %s: got %r want %r" % (rank, what, g, w))
    checks += 1


def values(r, n=7):
    # Small integers: exact in every dtype (bfloat16 has 8 bits of mantissa),
    # also after sums and products over up to 4 ranks.
    return (np.arange(n) % 3 + 1 + r % 2).astype(np.float64)


ranks_vals = np.stack([values(r) for r in range(size)])
want = {"sum": ranks_vals.sum(0), "min": ranks_vals.min(0), "max": ranks_vals.max(0),
        "prod": ranks_vals.prod(0)}

for kind, dtypes in (("numpy", NP), ("torch", TORCH)):
    for dt in dtypes:
        def make(v):
            return (np.array(v, dtype=dt) if kind == "numpy" else torch.tensor(v).to(dt))
        for op, w in want.items():
            x = make(values(rank))
            before = x.copy() if kind == "numpy" else x.clone()
            y = tnt.allreduce(x, op=op)
            assert type(y) is type(x) and y.dtype == x.dtype, (type(y), y.dtype)
            expect(y, w, "%s %s allreduce %s" % (kind, dt, op))
            expect(x, before, "input untouched")
            z = tnt.allreduce_(x, op=op)
            assert z is x
            expect(x, w, "%s %s allreduce_ %s" % (kind, dt, op))
        # avg: exact for sums divisible by size; integer types divide.
        x = make(np.full(5, 2 * size))
        expect(tnt.allreduce(x, op="avg"), np.full(5, 2 * size), "%s %s avg" % (kind, dt))
        # 2-D shapes keep their shape.
        x2 = make(np.full((3, 4), rank + 1))
        expect(tnt.allreduce(x2), np.full((3, 4), size * (size + 1) // 2), "2-D sum")
        # broadcast from every root, in place and not.
        for root in range(size):
            x = make(values(rank))
            y = tnt.broadcast(x, root=root)
            expect(y, values(root), "%s %s broadcast root %d" % (kind, dt, root))
            expect(x, values(rank), "broadcast input untouched")
            assert tnt.broadcast_(x, root) is x
            expect(x, values(root), "%s %s broadcast_ root %d" % (kind, dt, root))
        # allgather stacks rank rows.
        g = tnt.allgather(make(values(rank).reshape(7, 1)))
        assert tuple(g.shape) == (size, 7, 1)
        expect(g, ranks_vals.reshape(size, 7, 1), "%s %s allgather" % (kind, dt))
        # allgather_concat with a different first dimension per rank.
        c = tnt.allgather_concat(make(np.full((rank + 1, 2), rank)))
        expect(c, np.concatenate([np.full((r + 1, 2), r) for r in range(size)]),
               "%s %s allgather_concat" % (kind, dt))

# allgather_concat also moves numpy dtypes that libtnt does not reduce (as
# raw bytes), and keeps them.
for dt in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64,
           np.complex64, np.complex128):
    def part(r):
        return (np.arange((r + 1) * 3).reshape(r + 1, 3) % 3 - 1).astype(dt)
    c = tnt.allgather_concat(part(rank))
    want = np.concatenate([part(r) for r in range(size)])
    assert c.dtype == want.dtype and np.array_equal(c, want), (dt, c, want)
    checks += 1
# A rank passing another dtype gets MismatchError naming both.
try:
    tnt.allgather_concat(np.ones((2, 2), np.bool_ if rank == size - 1 else np.uint8))
except tnt.MismatchError as e:
    assert "bool" in str(e) and "uint8" in str(e), str(e)
    checks += 1
else:
    if size > 1:
        raise AssertionError("no MismatchError for allgather_concat with differing dtypes")

# Python scalars and a large buffer (exercise the staged / big paths).
assert tnt.allreduce(rank + 1) == size * (size + 1) // 2
assert tnt.allreduce(0.5, op="max") == 0.5
assert tnt.broadcast(rank * 10, root=size - 1) == (size - 1) * 10
big = np.full(3_000_000, rank + 1, dtype=np.float32)
tnt.allreduce_(big)
expect(big[::100000], np.full(30, size * (size + 1) / 2), "12 MB allreduce")
empty = np.zeros(0, np.float32)
expect(tnt.allreduce(empty), np.zeros(0), "empty allreduce")
tnt.barrier()

# Shapes that differ across ranks: every rank gets MismatchError naming ranks.
try:
    tnt.allreduce(np.ones(4 + (rank == size - 1), np.float32))
except tnt.MismatchError as e:
    msg = str(e)
    assert "rank %d" % (size - 1) in msg and "(5,)" in msg and "(4,)" in msg, msg
    checks += 1
else:
    raise AssertionError("no MismatchError for differing shapes")
# Differing dtype and differing root are caught too.
try:
    tnt.allreduce(np.ones(4, np.float32 if rank else np.float64))
except tnt.MismatchError as e:
    assert "float64" in str(e) and "float32" in str(e), str(e)
    checks += 1
else:
    raise AssertionError("no MismatchError for differing dtypes")
try:
    tnt.broadcast_(np.ones(3), root=rank % 2 if size > 1 else 0)
except tnt.MismatchError as e:
    checks += 1
else:
    if size > 1:
        raise AssertionError("no MismatchError for differing roots")
# Models that differ between ranks: the fusion plan comparison (libtnt's
# TNT_ERR_MISMATCH) and broadcast_parameters' structure check both raise
# MismatchError on every rank.
net = torch.nn.Linear(4, 3 if rank == 0 else 2)
for what in ("GradientReducer", "broadcast_parameters"):
    try:
        if what == "GradientReducer":
            tnt.GradientReducer(net, threshold_kb=0, use_engine=True)
        else:
            tnt.broadcast_parameters(net)
    except tnt.MismatchError as e:
        assert e.status == -8, e.status
        checks += 1
    else:
        if size > 1:
            raise AssertionError("%s: no MismatchError for different models" % what)
# The job is still usable after the errors above.
expect(tnt.allreduce(np.ones(2, np.int32)), np.full(2, size), "after errors")

print("rank %d: ok %d checks" % (rank, checks))
sys.stdout.flush()
