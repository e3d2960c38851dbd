"""Gradient compression through GradientReducer on this job's ranks.

usage: compression_reduce.py MODE OUT_DIR
  MODE reduce:   for bf16 and fp16, two steps of GradientReducer with uneven
                 per-rank weights (set_micro_batch) over float32 parameters
                 of several sizes (fused multi-tensor buckets and a lone
                 large tensor) and one float64 parameter. Checks on every
                 rank that each float32 result is within the derived 16-bit
                 bound of the exact weighted sum, is a value of the wire type
                 (so it travelled as 16 bits), and that the float64 one is
                 exact; writes the results to OUT_DIR/rank<r>.npz so that
                 the test compares the ranks bitwise.
  MODE overflow: fp16 edge cases through the engine itself: an average of
                 values near float16's maximum stays finite (pre-scaling),
                 a gradient beyond float16's range gives Inf on every rank,
                 a NaN gives NaN on every rank.
  MODE mismatch: rank 0 asks for bf16, the others for none; every rank must
                 get MismatchError, and rank 0's names the differing ranks.
Prints "ok" at the end.
"""
import os
import sys

import numpy as np
import torch

import tarantella as tnt
from tarantella import _tnt
from tarantella.errors import MismatchError

# Unit roundoff (half an ulp at 1.0) of the wire types.
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
# Half the spacing of float16's subnormals: the absolute error of rounding
# a value below 2^-14 (bfloat16 has float32's exponent range: none).
TINY = {"bf16": 0.0, "fp16": 2.0 ** -25}
SIZES = [3, 17, 1, 250, 40000, 64]  # plan order is reversed registration order
THRESHOLD_KB = 4                    # the small ones fuse, the 40000 one is alone


def gradients(rank, step):
    """This rank's float32 gradients for a step: magnitudes from 1e-6 to 1e3,
    so both float16's subnormals and its large values are exercised."""
    rng = np.random.default_rng(1000 * step + rank)
    out = []
    for n in SIZES:
        mag = 10.0 ** rng.uniform(-6, 3, size=n)
        out.append((rng.choice([-1.0, 1.0], size=n) * mag).astype(np.float32))
    return out


def weights(size):
    """Uneven per-rank shares (local, global), as set_micro_batch gets them."""
    local = [r + 1 for r in range(size)]
    return local, sum(local)


def reduce_mode(out_dir):
    rank, size = tnt.get_rank(), tnt.get_size()
    local, total = weights(size)
    results = {}
    for comp in ("bf16", "fp16"):
        params = [torch.nn.Parameter(torch.zeros(n)) for n in SIZES]
        p64 = torch.nn.Parameter(torch.zeros(5, dtype=torch.float64))
        reducer = tnt.GradientReducer(params + [p64], threshold_kb=THRESHOLD_KB,
                                      use_engine=True, compression=comp)
        assert reducer.compression == comp
        assert reducer.num_buckets >= 3, reducer.num_buckets
        for step in range(2):  # step 0 copies p.grad; step 1 uses the flat buffer
            for p in params + [p64]:
                p.grad = None if step == 0 else p.grad.zero_()
            mine = gradients(rank, step)
            g64 = np.arange(1, 6, dtype=np.float64) * (rank + 1) / 3.0
            loss = sum((p * torch.from_numpy(g)).sum() for p, g in zip(params, mine))
            loss = loss + (p64 * torch.from_numpy(g64)).sum()
            reducer.set_micro_batch(local[rank], total)
            loss.backward()
            reducer.synchronize()

            all_g = [gradients(r, step) for r in range(size)]
            # Roundings a partial sum can go through: the input, the node's
            # shared-memory sum, then at most one per other node (ring).
            roundings = size + 1
            for i, p in enumerate(params):
                got = p.grad.numpy().astype(np.float64)
                terms = [all_g[r][i].astype(np.float64) * (local[r] / total)
                         for r in range(size)]
                exact = np.sum(terms, axis=0)
                bound = roundings * (UNIT[comp] * np.sum(np.abs(terms), axis=0) + TINY[comp])
                bound += 2.0 ** -22 * np.sum(np.abs(terms), axis=0)  # float32 steps
                err = np.abs(got - exact)
                assert np.all(err <= bound), (
                    "%s step %d tensor %d: error %g exceeds the bound %g at %d"
                    % (comp, step, i, err.max(), bound[np.argmax(err - bound)],
                       int(np.argmax(err - bound))))
                g = p.grad.numpy()
                if comp == "bf16":
                    on_grid = (g.view(np.uint32) & 0xFFFF) == 0
                else:
                    on_grid = g.astype(np.float16).astype(np.float32) == g
                assert on_grid.all(), "%s tensor %d: a result is not a %s value" % (comp, i, comp)
                results["%s_%d_%d" % (comp, step, i)] = g.copy()
                if SIZES[i] >= 250:
                    # The float32 reduction would not land on the 16-bit grid
                    # everywhere: the wire really was 16-bit.
                    assert not np.array_equal(g, exact.astype(np.float32)), (comp, i)
            want64 = sum(np.arange(1, 6) * (r + 1) / 3.0 * local[r] / total for r in range(size))
            np.testing.assert_allclose(p64.grad.numpy(), want64, rtol=1e-14, atol=0,
                                       err_msg="float64 buckets are not compressed")
        reducer.close()
    np.savez(os.path.join(out_dir, "rank%d.npz" % rank), **results)


def overflow_mode(out_dir):
    rank, size = tnt.get_rank(), tnt.get_size()
    descs = [(4, _tnt.FLOAT32)]
    fusion = _tnt.Fusion(descs, None, _tnt.AVG, _tnt.COMPRESSION_FP16)
    # Each rank's 60000 is representable; a sum over 2+ ranks (>= 120000)
    # is not. Pre-scaling by 1/size keeps every partial sum an average.
    data = np.array([60000.0, -60000.0, 1e6 if rank == 0 else 1.0,
                     np.nan if rank == size - 1 else 2.0], dtype=np.float32)
    fusion.mark_ready(0, data.ctypes.data, 1.0)
    fusion.wait()
    fusion.close()
    assert data[0] == 60000.0 and data[1] == -60000.0, data
    assert np.isposinf(data[2]), data  # 1e6 / size is beyond float16 for size <= 15
    assert np.isnan(data[3]), data
    np.save(os.path.join(out_dir, "rank%d.npy" % rank), data)


def mismatch_mode(out_dir):
    rank = tnt.get_rank()
    params = [torch.nn.Parameter(torch.zeros(8))]
    try:
        tnt.GradientReducer(params, use_engine=True, compression="bf16" if rank == 0 else None)
    except MismatchError as e:
        msg = str(e)
    else:
        raise AssertionError("ranks that disagree on compression got an engine")
    with open(os.path.join(out_dir, "rank%d.txt" % rank), "w") as f:
        f.write(msg)
    # The engine is usable afterwards when the ranks agree.
    tnt.GradientReducer(params, use_engine=True, compression="fp16").close()


def main():
    mode, out_dir = sys.argv[1], sys.argv[2]
    tnt.init()
    {"reduce": reduce_mode, "overflow": overflow_mode, "mismatch": mismatch_mode}[mode](out_dir)
    print("ok")


if __name__ == "__main__":
    main()
