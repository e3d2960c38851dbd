"""Every collective of the "tnt" torch.distributed backend against a
reference each rank computes locally (tests/python/test_tnt_backend.py).

    tarantella -n 3 -- tnt_backend_ops.py          # env:// from the launcher
    RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. python3 tnt_backend_ops.py

INIT=file:PATH starts with init_method="file://PATH", INIT=store with a
TCPStore made by the script (store=...), each with rank and world_size from
RANK and WORLD_SIZE, as a torchrun-style starter would.

Every rank's input is a function of (rank, index) that every rank can
compute, so each rank knows the exact expected result of every reduction,
gather and exchange. Values are small integers: sums and products of up to
four ranks stay exact in every dtype (float16's and bfloat16's too), so only
AVG on float types (a division) is compared with a tolerance. On success
each rank prints "tnt_backend_ops: rank R of N passed C checks".
"""
import sys
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import tarantella  # noqa: F401  registers the "tnt" backend

R = dist.ReduceOp
OPS = {"SUM": R.SUM, "AVG": R.AVG, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX}
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int32, torch.int64]
CONVERTED = [torch.int8, torch.uint8, torch.int16]  # reduced through int32
ALL_DTYPES = FLOATS + INTS + CONVERTED + [torch.bool]
N = 7  # elements per rank and block: odd, so nothing lines up by chance

checks = 0


def value(rank, n, dtype, salt=0):
    """Rank `rank`'s input: n small integers (-1 .. 3, or 1 .. 5 unsigned)."""
    i = torch.arange(n, dtype=torch.int64)
    v = (i * 7 + rank * 3 + salt) % 5 + 1
    if dtype == torch.bool:
        return (v % 2).to(torch.bool)
    if dtype != torch.uint8:
        v = v - 2
    return v.to(dtype)


def reference(inputs, op, dtype):
    """The reduction of the per-rank tensors `inputs`, computed wide."""
    wide = torch.stack([t.to(torch.float64 if dtype.is_floating_point else torch.int64)
                        for t in inputs])
    if op == "SUM":
        out = wide.sum(0)
    elif op == "PRODUCT":
        out = wide.prod(0)
    elif op == "MIN":
        out = wide.amin(0)
    elif op == "MAX":
        out = wide.amax(0)
    elif dtype.is_floating_point:  # AVG
        out = wide.sum(0) / len(inputs)
    else:  # AVG of integers: libtnt's integer division (towards zero)
        out = torch.div(wide.sum(0), len(inputs), rounding_mode="trunc")
    return out.to(dtype)


def expect(got, want, what):
    global checks
    assert got.dtype == want.dtype, "%s: dtype %s, want %s" % (what, got.dtype, want.dtype)
    if got.dtype.is_floating_point:
        torch.testing.assert_close(got, want, msg=lambda m: "%s: %s" % (what, m))
    else:
        assert torch.equal(got, want), "%s:\n got %s\nwant %s" % (what, got, want)
    checks += 1


def ops_for(dtype):
    return [op for op in OPS if not (dtype == torch.bool and op == "AVG")]


def check_reductions(rank, size):
    last = size - 1
    for dtype in ALL_DTYPES:
        for op in ops_for(dtype):
            ins = [value(r, N, dtype) for r in range(size)]
            want = reference(ins, op, dtype)
            tag = "%s %s" % (op, dtype)

            t = value(rank, N, dtype)
            dist.all_reduce(t, op=OPS[op])
            expect(t, want, "all_reduce " + tag)

            # reduce: the root gets the result, the others keep their input.
            t = value(rank, N, dtype)
            dist.reduce(t, dst=last, op=OPS[op])
            expect(t, want if rank == last else value(rank, N, dtype), "reduce " + tag)

            # reduce_scatter: rank r's block j is value(r, ., salt=j).
            blocks = [[value(r, N, dtype, salt=j) for j in range(size)] for r in range(size)]
            want_block = reference([blocks[r][rank] for r in range(size)], op, dtype)
            out = torch.zeros(N, dtype=dtype)
            dist.reduce_scatter(out, [b.clone() for b in blocks[rank]], op=OPS[op])
            expect(out, want_block, "reduce_scatter " + tag)

            out = torch.zeros(N, dtype=dtype)
            dist._reduce_scatter_base(out, torch.cat(blocks[rank]), op=OPS[op])
            expect(out, want_block, "_reduce_scatter_base " + tag)

        # allreduce_coalesced: three tensors of one dtype, in one call.
        for op in ("SUM", "MAX"):
            ts = [value(rank, n, dtype, salt=n) for n in (1, N, 3)]
            dist.all_reduce_coalesced(ts, op=OPS[op])
            for n, t in zip((1, N, 3), ts):
                want = reference([value(r, n, dtype, salt=n) for r in range(size)], op, dtype)
                expect(t, want, "all_reduce_coalesced %s %s n=%d" % (op, dtype, n))


def check_data_movement(rank, size):
    last = size - 1
    for dtype in ALL_DTYPES + [torch.complex64]:
        tag = str(dtype)
        mine = value(rank, N, dtype)
        everyone = [value(r, N, dtype) for r in range(size)]

        t = mine.clone()
        dist.broadcast(t, src=last)
        expect(t, everyone[last], "broadcast " + tag)

        outs = [torch.zeros(N, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, mine)
        for r in range(size):
            expect(outs[r], everyone[r], "all_gather[%d] %s" % (r, tag))

        out = torch.zeros(size * N, dtype=dtype)
        dist._all_gather_base(out, mine)
        expect(out, torch.cat(everyone), "_all_gather_base " + tag)

        gathered = [torch.zeros(N, dtype=dtype) for _ in range(size)] if rank == 0 else None
        dist.gather(mine, gather_list=gathered, dst=0)
        if rank == 0:
            for r in range(size):
                expect(gathered[r], everyone[r], "gather[%d] %s" % (r, tag))

        # scatter from the last rank: block r is value(last, ., salt=r).
        out = torch.zeros(N, dtype=dtype)
        parts = [value(last, N, dtype, salt=r) for r in range(size)] if rank == last else None
        dist.scatter(out, scatter_list=parts, src=last)
        expect(out, value(last, N, dtype, salt=rank), "scatter " + tag)

        # all_to_all_single, equal splits: rank r's block j is value(r, ., salt=j),
        # 2 rows of 3 each.
        def block(r, j):
            return value(r, 6, dtype, salt=j).view(2, 3)
        inp = torch.cat([block(rank, j) for j in range(size)])
        out = torch.zeros_like(inp)
        dist.all_to_all_single(out, inp)
        expect(out, torch.cat([block(r, rank) for r in range(size)]), "all_to_all_single " + tag)

        # all_to_all_single, uneven splits: rank r sends r + j + 1 rows to rank j.
        def rows(r, j):
            return value(r, (r + j + 1) * 2, dtype, salt=j).view(-1, 2)
        inp = torch.cat([rows(rank, j) for j in range(size)])
        want = torch.cat([rows(r, rank) for r in range(size)])
        out = torch.zeros_like(want)
        dist.all_to_all_single(out, inp, output_split_sizes=[r + rank + 1 for r in range(size)],
                               input_split_sizes=[rank + j + 1 for j in range(size)])
        expect(out, want, "all_to_all_single uneven " + tag)

        # all_to_all with lists of uneven tensors.
        outs = [torch.zeros((r + rank + 1) * 2, dtype=dtype) for r in range(size)]
        dist.all_to_all(outs, [rows(rank, j).reshape(-1).clone() for j in range(size)])
        for r in range(size):
            expect(outs[r], rows(r, rank).reshape(-1), "all_to_all[%d] %s" % (r, tag))


def check_allgather_coalesced(rank, size):
    """all_gather_coalesced of tensors of several sizes (torch's Python API
    takes one dtype per call), with separate tensors everywhere (staged
    through one byte block), with inputs and outputs that are views of one
    buffer each in order (sent and received where they lie), with the
    inputs inside that output buffer (FSDP's in-place form), and with this
    rank's outputs being its inputs: what the op reads must not be received
    into before it is sent."""
    sizes = (1, N, 3)
    for dtype in (torch.float32, torch.int64, torch.float16, torch.bool):
        def mine(r):
            return [value(r, n, dtype, salt=i) for i, n in enumerate(sizes)]

        def zeros():
            return [torch.zeros(n, dtype=dtype) for n in sizes]

        def views(flat):
            return list(torch.split(flat, list(sizes) * (flat.numel() // sum(sizes))))

        layouts = {"separate tensors": (mine(rank), [zeros() for _ in range(size)])}
        ins = views(torch.cat(mine(rank)))
        out = views(torch.zeros(size * sum(sizes), dtype=dtype))
        layouts["views of one buffer"] = (ins, [out[r * 3:(r + 1) * 3] for r in range(size)])
        out = views(torch.zeros(size * sum(sizes), dtype=dtype))
        for t, v in zip(out[rank * 3:(rank + 1) * 3], mine(rank)):
            t.copy_(v)
        layouts["inputs inside one output buffer"] = (
            out[rank * 3:(rank + 1) * 3], [out[r * 3:(r + 1) * 3] for r in range(size)])
        own = mine(rank)
        layouts["this rank's outputs are its inputs"] = (
            own, [own if r == rank else zeros() for r in range(size)])
        for what, (ins, outs) in layouts.items():
            work = dist.all_gather_coalesced(outs, ins, async_op=True)
            work.wait()
            for r in range(size):
                for i, (got, want) in enumerate(zip(outs[r], mine(r))):
                    expect(got, want, "all_gather_coalesced %s, %s: rank %d's tensor %d"
                           % (dtype, what, r, i))


def check_async(rank, size):
    """Futures complete without anyone calling wait (DDP's autograd threads
    only look at futures), with the output tensors as their value."""
    global checks
    t = torch.full((N,), float(rank + 1))
    work = dist.all_reduce(t, async_op=True)
    chained = work.get_future().then(lambda fut: fut.value()[0] * 2)
    deadline = time.monotonic() + 30
    while not work.is_completed():
        assert time.monotonic() < deadline, "all_reduce never completed without wait()"
        time.sleep(0.01)
    total = float(size * (size + 1) // 2)
    expect(chained.wait(), torch.full((N,), 2 * total), "future.then")
    works = [dist.all_reduce(torch.full((3,), float(i)), async_op=True) for i in range(8)]
    for i, w in enumerate(works):
        w.wait()
        expect(w.result()[0], torch.full((3,), float(i * size)), "queued all_reduce #%d" % i)
    dist.barrier()
    checks += 1


def check_sequence_numbers(rank, size):
    """pg._get_sequence_number_for_group(), as on gloo: agreed by every rank
    when the group is made, one more per collective (barrier included), no
    change for point-to-point and monitored_barrier; a new group has its own,
    and _set_sequence_number_for_group() agrees on a new one. Compared
    across ranks over a gloo group, so the comparison adds nothing to the
    numbers it compares (torch's own sequence-number tests do the same)."""
    global checks
    verify = dist.new_group(backend="gloo")
    pg = dist.distributed_c10d._get_default_group()

    def agreed(group, what):
        global checks
        num = group._get_sequence_number_for_group()
        nums = [None] * size
        dist.all_gather_object(nums, num, group=verify)
        assert len(set(nums)) == 1 and num > 0, "%s: ranks hold %s" % (what, nums)
        checks += 1
        return num

    start = agreed(pg, "after init_process_group")
    dist.all_reduce(torch.ones(2))
    dist.broadcast(torch.ones(2), src=0)
    dist.barrier()
    work = dist.all_reduce(torch.ones(2), async_op=True)
    assert pg._get_sequence_number_for_group() == start + 4  # counted when queued
    work.wait()
    reqs = [dist.isend(torch.ones(1), (rank + 1) % size),
            dist.irecv(torch.zeros(1), (rank - 1) % size)]
    for req in reqs:
        req.wait()
    dist.monitored_barrier()
    assert agreed(pg, "after 4 collectives, send/recv and monitored_barrier") == start + 4
    group = dist.new_group()
    gstart = agreed(group, "a new group")
    dist.all_reduce(torch.ones(1), group=group)
    assert agreed(group, "a new group after a collective") == gstart + 1
    assert pg._get_sequence_number_for_group() == start + 4
    pg._set_sequence_number_for_group()
    agreed(pg, "after _set_sequence_number_for_group")
    dist.destroy_process_group(verify)


def check_new_group(rank, size):
    last = size - 1
    # The first and the last rank; with 3 ranks rank 1 is not a member.
    ends = dist.new_group([0, last])
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    everyone = dist.new_group()
    if rank in (0, last):
        assert ends.size() == 2 and ends.rank() == (0 if rank == 0 else 1)
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=ends)
        expect(t, torch.tensor([float(1 + last + 1)]), "all_reduce in new_group([0, last])")
        t = torch.tensor([float(rank)])
        dist.broadcast(t, src=last, group=ends)  # src is a global rank
        expect(t, torch.tensor([float(last)]), "broadcast in new_group from global rank")
    else:
        assert ends == dist.GroupMember.NON_GROUP_MEMBER
    if rank % 2 == 0:
        members = [r for r in range(size) if r % 2 == 0]
        t = torch.tensor([rank], dtype=torch.int64)
        dist.all_reduce(t, group=evens)
        expect(t, torch.tensor([sum(members)]), "all_reduce in the even ranks' group")
    # The groups are separate communicators: the world's collectives
    # interleave with the subgroup's without mixing.
    t = torch.ones(2)
    dist.all_reduce(t, group=everyone)
    expect(t, torch.full((2,), float(size)), "all_reduce in new_group()")
    # Each group's communicator is named after it in errors and verdicts.
    assert everyone.comm_name == "torch.group%d" % size, everyone.comm_name
    # dist.new_subgroups(group_size=1): torch 1.13 refuses it without CUDA,
    # so make the calls it makes, every rank creating every subgroup in
    # order; each rank then runs collectives in its own one-rank group, and
    # the world's still work between them.
    subgroups = [dist.new_group([r]) for r in range(size)]
    mine = subgroups[rank]
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=mine)
    expect(t, torch.tensor([float(rank + 1)]), "all_reduce in a one-rank subgroup")
    outs = [torch.zeros(1)]
    dist.all_gather(outs, t, group=mine)
    expect(outs[0], t, "all_gather in a one-rank subgroup")
    t = torch.ones(1)
    dist.all_reduce(t)
    expect(t, torch.full((1,), float(size)), "all_reduce in the world after the subgroups")
    assert dist.distributed_c10d._get_default_group().comm_name == "torch.default_pg"


def main():
    init = os.environ.get("INIT", "env")
    if init == "env":
        dist.init_process_group("tnt")
    else:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if init.startswith("file:"):
            dist.init_process_group("tnt", init_method="file://" + init[5:], rank=rank,
                                    world_size=size)
        else:
            store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                                  size, rank == 0, timedelta(seconds=60))
            dist.init_process_group("tnt", store=store, rank=rank, world_size=size)
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "tnt", dist.get_backend()
    check_sequence_numbers(rank, size)
    check_reductions(rank, size)
    check_data_movement(rank, size)
    check_allgather_coalesced(rank, size)
    check_async(rank, size)
    check_new_group(rank, size)
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.write("tnt_backend_ops: rank %d of %d passed %d checks\n" % (rank, size, checks))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
