"""Bad input to the "tnt" torch.distributed backend gives a clear error that
names the operation and what to do, and leaves the group usable
(tests/python/test_tnt_backend.py).

    tarantella -n 2 -- tnt_backend_errors.py

Every rank passes the same bad input (so nobody is left waiting in a
collective), except for the size mismatches, which only libtnt can see:
there the ranks pass different sizes and each gets libtnt's
TNT_ERR_MISMATCH message from wait(). After each error but the last an
allreduce shows the group still works; the last (an allreduce mismatch)
leaves the group out of step, and the next collective says so at once. Each check prints "tnt_backend_errors: <name>: <message>" on rank 0,
and the last line is "tnt_backend_errors: rank R passed C checks".
"""
import datetime
import re
import sys
import time

import torch
import torch.distributed as dist

import tarantella  # noqa: F401  registers the "tnt" backend

checks = 0


def still_works(size):
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(size))), t


def expect_error(name, pattern, fn, size, rank, usable=True):
    """fn() must raise a RuntimeError whose message matches pattern; then,
    if usable, an allreduce must still work."""
    global checks
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        assert re.search(pattern, msg, re.S), "%s: %r does not match %r" % (name, msg, pattern)
        if rank == 0:
            print("tnt_backend_errors: %s: %s" % (name, msg.splitlines()[0]), flush=True)
    else:
        raise AssertionError("%s: no error" % name)
    if usable:
        still_works(size)
    checks += 1


def main():
    dist.init_process_group("tnt")
    rank, size = dist.get_rank(), dist.get_world_size()

    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    expect_error("sparse", r"tnt: allreduce: sparse tensors are not supported.*to_dense\(\)",
                 lambda: dist.all_reduce(sparse), size, rank)

    strided = torch.arange(12.0).view(3, 4).t()
    expect_error("non-contiguous broadcast",
                 r"tnt: broadcast: the tensor is not contiguous.*contiguous\(\)",
                 lambda: dist.broadcast(strided, src=0), size, rank)
    expect_error("non-contiguous all_gather output",
                 r"tnt: allgather: the tensor is not contiguous",
                 lambda: dist.all_gather([torch.zeros(4, 3).t()] * size, torch.zeros(3, 4)),
                 size, rank)

    expect_error("unsupported op", r"tnt: allreduce: ReduceOp.BAND is not supported.*SUM, AVG",
                 lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32),
                                         op=dist.ReduceOp.BAND), size, rank)
    expect_error("unsupported dtype", r"tnt: reduce: dtype torch.complex64 is not supported in "
                 r"reductions.*float16, bfloat16",
                 lambda: dist.reduce(torch.ones(2, dtype=torch.complex64), dst=0), size, rank)
    expect_error("AVG of bool", r"tnt: allreduce: ReduceOp.AVG of a bool tensor",
                 lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.AVG),
                 size, rank)
    expect_error("local size mismatch", r"tnt: _allgather_base: the output has 5 elements",
                 lambda: dist._all_gather_base(torch.zeros(5), torch.zeros(2)), size, rank)
    expect_error("send", r"tnt: send: tag -1 is negative",
                 lambda: dist.send(torch.ones(1), dst=(rank + 1) % size, tag=-1), size, rank)
    expect_error("recv", r"tnt: recv: tag -3 is negative",
                 lambda: dist.recv(torch.ones(1), src=(rank + 1) % size, tag=-3), size, rank)

    # Split sizes that differ between ranks: only libtnt sees them; every
    # rank's wait() raises its mismatch error, and (the collective set
    # checks before sending anything) the group stays usable.
    expect_error("all_to_all splits differ across ranks",
                 r"tnt: alltoall_base on process group 'torch.default_pg' failed",
                 lambda: dist.all_to_all_single(
                     torch.zeros(size + 1), torch.zeros(size + 1),
                     output_split_sizes=[1] * (size - 1) + [2],
                     input_split_sizes=[2] + [1] * (size - 1)) if rank == 0 else
                 dist.all_to_all_single(torch.zeros(size), torch.zeros(size)), size, rank)

    # The timeout given to wait() is honoured: the last rank joins the
    # allreduce two seconds late, the others give up after half a second;
    # the allreduce then completes for everybody.
    t = torch.ones(1)
    if rank == size - 1:
        time.sleep(2.0)
    work = dist.all_reduce(t, async_op=True)
    if rank != size - 1:
        expect_error("wait timeout", r"tnt: allreduce #\d+ on process group 'torch.default_pg' did not "
                     r"complete within 0.5 s",
                     lambda: work.wait(timeout=datetime.timedelta(seconds=0.5)), size, rank)
        work.wait()
    else:
        work.wait()
        still_works(size)
    assert torch.equal(t, torch.full((1,), float(size))), t

    # Sizes that differ between ranks in an allreduce: every rank's wait()
    # raises libtnt's TNT_ERR_MISMATCH message naming the ranks and their
    # calls. libtnt's allreduce has compared the calls inside the
    # collective, so the ranks are out of step afterwards: the next
    # collective fails at once, saying so, instead of hanging.
    expect_error("sizes differ across ranks",
                 r"tnt: allreduce on process group 'torch.default_pg' failed: ranks disagree.*rank 0 called "
                 r"allreduce #\d+ of 4 float32 elements, sum, rank 1 called allreduce #\d+ of 5",
                 lambda: dist.all_reduce(torch.ones(4 + rank)), size, rank, usable=False)
    expect_error("after a mismatch", r"tnt: barrier on process group 'torch.default_pg' failed: .*out of step",
                 lambda: dist.barrier(), size, rank, usable=False)

    dist.destroy_process_group()
    sys.stdout.write("tnt_backend_errors: rank %d passed %d checks\n" % (rank, checks))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
