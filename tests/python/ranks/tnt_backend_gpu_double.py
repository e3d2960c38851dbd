"""CUDA tensors through the "tnt" torch.distributed backend, against the GPU
TEST DOUBLE (tests/gpu_double: a cudart and an NCCL over host memory), in a
torch without CUDA (tests/python/test_tnt_backend_gpu_double.py). Not a GPU
run: it checks the backend's CUDA branch (which libtnt device call, which
stream, when the Work completes), never CUDA's or NCCL's behaviour.

    LD_LIBRARY_PATH=build/tests/gpu_double/cuda TNT_CUDA_DOUBLE_GPUS=a,b \\
        tarantella -n 2 -- tnt_backend_gpu_double.py nccl     # or: host (GPUS=a)

Each "CUDA" tensor is memory from the double's cudaMalloc, wrapped by the
backend's test-only _gpu_double_tensor as a tensor on cuda:0 (torch without
CUDA can describe such a tensor, but has no CUDA kernels to run on it).
The results are read back through a CPU view of the same memory and
compared with a serial reference that every rank computes from every
rank's input: allreduce, broadcast, reduce, allgather and reduce-scatter
(check_allreduce, check_movement), all_gather_coalesced (check_coalesced),
gather and scatter to and from every
root, all_to_all_single with equal and uneven splits and all_to_all
(check_exchange), and send/recv with tags and from any source (check_p2p,
2 ranks). Also checked: the op goes on the stream the caller set (a
delayed write queued on it before the call is seen; all_reduce, gather,
all_to_all_single, send), libtnt's device path is the one taken (the
double's NCCL communicators or pinned staging buffers exist afterwards),
and what the backend refuses, by name (check_refused). Prints
"tnt_backend_gpu_double: rank R of N passed C checks (transport T)".
"""
import ctypes
import sys
import time

import torch
import torch.distributed as dist

import tarantella  # noqa: F401  registers the "tnt" backend
from tarantella import _tnt_torch

R = dist.ReduceOp
cudart = ctypes.CDLL("libcudart.so.13")
nccl = ctypes.CDLL("libnccl.so.2")
checks = 0


class Live(ctypes.Structure):
    _fields_ = [(name, ctypes.c_long) for name in
                ("streams", "events", "device_allocs", "host_allocs", "nccl_comms")]


class DeviceBuffer:
    """n elements of the double's "device" memory: .dev is the cuda tensor
    the backend gets, .cpu a CPU view of the same bytes."""
    buffers = []

    def __init__(self, n, dtype, shape=None):
        nbytes = n * torch.empty((), dtype=dtype).element_size()
        ptr = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes)) == 0
        self.ptr, self.nbytes = ptr.value, nbytes
        self.cpu = torch.frombuffer((ctypes.c_char * nbytes).from_address(ptr.value), dtype=dtype)
        self.dev = _tnt_torch._gpu_double_tensor(ptr.value, shape or [n], dtype)
        DeviceBuffer.buffers.append(self)

    def parts(self, k):
        """k cuda tensors over consecutive equal blocks (one buffer in order,
        as list(flat.chunk(k)) would give)."""
        return self.blocks([self.cpu.numel() // k] * k)

    def blocks(self, sizes):
        """cuda tensors over consecutive blocks of these element counts."""
        out, off = [], self.ptr
        for n in sizes:
            out.append(_tnt_torch._gpu_double_tensor(off, [n], self.cpu.dtype))
            off += n * self.cpu.element_size()
        return out


def value(rank, n, dtype, salt=0):
    """Small integers (exact in every dtype, also when four ranks multiply)."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + rank * 3 + salt) % 5 - 1).to(dtype)


def reference(inputs, op, dtype):
    wide = torch.stack([t.to(torch.float64 if dtype.is_floating_point else torch.int64)
                        for t in inputs])
    if op == R.SUM:
        out = wide.sum(0)
    elif op == R.PRODUCT:
        out = wide.prod(0)
    elif op == R.MIN:
        out = wide.amin(0)
    elif op == R.MAX:
        out = wide.amax(0)
    elif dtype.is_floating_point:  # AVG
        out = wide.sum(0) / len(inputs)
    else:
        out = torch.div(wide.sum(0), len(inputs), rounding_mode="trunc")
    return out.to(dtype)


def expect(got, want, what, rtol=0.0):
    global checks
    got = got.to(torch.float64)
    want = want.to(torch.float64)
    ok = torch.allclose(got, want, rtol=rtol, atol=0.0) if rtol else torch.equal(got, want)
    assert ok, "%s: got %s, want %s" % (what, got.tolist(), want.tolist())
    checks += 1


def check_allreduce(rank, size):
    n = 37
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                  torch.int64):
        for name, op in (("SUM", R.SUM), ("AVG", R.AVG), ("PRODUCT", R.PRODUCT),
                         ("MIN", R.MIN), ("MAX", R.MAX)):
            b = DeviceBuffer(n, dtype)
            b.cpu.copy_(value(rank, n, dtype))
            dist.all_reduce(b.dev, op=op)
            want = reference([value(r, n, dtype) for r in range(size)], op, dtype)
            tol = 1e-2 if (op == R.AVG and dtype in (torch.float16, torch.bfloat16)) else (
                1e-6 if op == R.AVG and dtype.is_floating_point else 0.0)
            expect(b.cpu, want, "all_reduce %s %s" % (name, dtype), rtol=tol)


def check_movement(rank, size):
    n = 11
    dtype = torch.float32
    for root in range(size):
        b = DeviceBuffer(n, dtype)
        b.cpu.copy_(value(rank, n, dtype, salt=root))
        dist.broadcast(b.dev, src=root)
        expect(b.cpu, value(root, n, dtype, salt=root), "broadcast from %d" % root)

    src = DeviceBuffer(n, dtype)
    src.cpu.copy_(value(rank, n, dtype))
    gathered = torch.cat([value(r, n, dtype) for r in range(size)])
    out = DeviceBuffer(size * n, dtype)
    dist.all_gather_into_tensor(out.dev, src.dev)
    expect(out.cpu, gathered, "all_gather_into_tensor")
    out = DeviceBuffer(size * n, dtype)
    dist.all_gather(out.parts(size), src.dev)
    expect(out.cpu, gathered, "all_gather into one buffer's blocks")

    inputs = [torch.cat([value(r, n, dtype, salt=b) for b in range(size)]) for r in range(size)]
    want = reference(inputs, R.SUM, dtype)[rank * n:(rank + 1) * n]
    big = DeviceBuffer(size * n, dtype)
    big.cpu.copy_(inputs[rank])
    mine = DeviceBuffer(n, dtype)
    dist.reduce_scatter_tensor(mine.dev, big.dev)
    expect(mine.cpu, want, "reduce_scatter_tensor")
    mine = DeviceBuffer(n, dtype)
    dist.reduce_scatter(mine.dev, big.parts(size))
    expect(mine.cpu, want, "reduce_scatter from one buffer's blocks")
    mine = DeviceBuffer(n, torch.int64)
    big64 = DeviceBuffer(size * n, torch.int64)
    big64.cpu.copy_(inputs[rank].to(torch.int64))
    dist.reduce_scatter_tensor(mine.dev, big64.dev, op=R.MAX)
    expect(mine.cpu, reference([t.to(torch.int64) for t in inputs], R.MAX,
                               torch.int64)[rank * n:(rank + 1) * n], "reduce_scatter_tensor MAX")

    for root in range(size):
        b = DeviceBuffer(n, dtype)
        b.cpu.copy_(value(rank, n, dtype, salt=root))
        dist.reduce(b.dev, dst=root)
        want = (reference([value(r, n, dtype, salt=root) for r in range(size)], R.SUM, dtype)
                if rank == root else value(rank, n, dtype, salt=root))
        expect(b.cpu, want, "reduce to %d" % root)


def check_coalesced(rank, size):
    """all_gather_coalesced of CUDA tensors that are views of one buffer on
    each side (the double runs no torch kernels, so only the form that
    sends and receives where the tensors lie can run here; the staged form
    is the CPU path's, checked in tnt_backend_ops.py), blocking and async,
    over several sizes and dtypes; the sizes reach past the host-staged
    path's first chunk."""
    for dtype, sizes in ((torch.float32, (1, 11, 3)), (torch.int64, (5,)),
                         (torch.float16, (2, 3)), (torch.uint8, (70001, 7)),
                         (torch.bfloat16, (33,))):
        block = sum(sizes)
        src = DeviceBuffer(block, dtype)
        src.cpu.copy_(torch.cat([value(rank, n, dtype, salt=i) for i, n in enumerate(sizes)]))
        for async_op in (False, True):
            out = DeviceBuffer(size * block, dtype)
            outs = out.blocks(list(sizes) * size)
            work = dist.all_gather_coalesced(
                [outs[r * len(sizes):(r + 1) * len(sizes)] for r in range(size)],
                src.blocks(sizes), async_op=async_op)
            if async_op:
                work.wait()
            want = torch.cat([value(r, n, dtype, salt=i) for r in range(size)
                              for i, n in enumerate(sizes)])
            expect(out.cpu, want, "all_gather_coalesced %s sizes %s%s"
                   % (dtype, sizes, " (async)" if async_op else ""))


def on_late_stream(buf, data, call):
    """Runs call() (which returns a Work) with the caller's stream set to a
    fresh stream of the double on which a write of data into buf is queued
    first, delayed 0.3 s: the op sees data only if it goes on that stream
    (otherwise it reads what buf held before). Returns the Work, waited."""
    stream = ctypes.c_void_p()
    assert cudart.cudaStreamCreateWithFlags(ctypes.byref(stream), 1) == 0

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def late_write(_arg):
        time.sleep(0.3)
        buf.cpu.copy_(data)

    assert cudart.tnt_cuda_double_enqueue(stream, late_write, None) == 0
    _tnt_torch._gpu_double_set_stream(stream.value)
    try:
        work = call()
        work.wait()
    finally:
        _tnt_torch._gpu_double_set_stream(0)
    assert cudart.cudaStreamSynchronize(stream) == 0
    assert cudart.cudaStreamDestroy(stream) == 0
    return work


def check_stream_order(rank, size):
    """The collective goes on the stream the caller set: a write queued
    there before the call (delayed 0.3 s) is what gets reduced."""
    global checks
    n = 5
    b = DeviceBuffer(n, torch.float32)
    b.cpu.fill_(-1000.0)
    work = on_late_stream(b, value(rank, n, torch.float32),
                          lambda: dist.all_reduce(b.dev, async_op=True))
    want = reference([value(r, n, torch.float32) for r in range(size)], R.SUM, torch.float32)
    expect(b.cpu, want, "all_reduce after a write queued on the caller's stream")
    # The future's value is the tensor itself, complete in device memory.
    (value_t,) = work.get_future().value()
    assert value_t.is_cuda and value_t.data_ptr() == b.dev.data_ptr()
    checks += 1

    # The same for ops of the second set: the late write is what moves.
    root = size - 1
    src = DeviceBuffer(n, torch.float32)
    src.cpu.fill_(-1000.0)
    out = DeviceBuffer(size * n, torch.float32)
    on_late_stream(src, value(rank, n, torch.float32, salt=4), lambda: dist.gather(
        src.dev, out.parts(size) if rank == root else None, dst=root, async_op=True))
    if rank == root:
        expect(out.cpu, torch.cat([value(r, n, torch.float32, salt=4) for r in range(size)]),
               "gather after a write queued on the caller's stream")

    a_in = DeviceBuffer(size * n, torch.int64)
    a_in.cpu.fill_(-1000)
    a_out = DeviceBuffer(size * n, torch.int64)
    on_late_stream(a_in, value(rank, size * n, torch.int64, salt=5),
                   lambda: dist.all_to_all_single(a_out.dev, a_in.dev, async_op=True))
    expect(a_out.cpu, torch.cat([value(r, size * n, torch.int64, salt=5)[rank * n:(rank + 1) * n]
                                 for r in range(size)]),
           "all_to_all_single after a write queued on the caller's stream")


def check_exchange(rank, size):
    """gather and scatter to and from every root (into and out of one
    buffer's blocks, and the root's in-place forms), all_to_all_single with
    equal and uneven splits, all_to_all with uneven blocks."""
    n = 6
    dtype = torch.float32
    for root in range(size):
        src = DeviceBuffer(n, dtype)
        src.cpu.copy_(value(rank, n, dtype, salt=root))
        out = DeviceBuffer(size * n, dtype)
        dist.gather(src.dev, out.parts(size) if rank == root else None, dst=root)
        gathered = torch.cat([value(r, n, dtype, salt=root) for r in range(size)])
        if rank == root:
            expect(out.cpu, gathered, "gather to %d" % root)
        # In place on the root: its input is its own block of the output.
        out = DeviceBuffer(size * n, dtype)
        parts = out.parts(size)
        if rank == root:
            out.cpu[rank * n:(rank + 1) * n] = value(rank, n, dtype, salt=root)
            dist.gather(parts[rank], parts, dst=root)
            expect(out.cpu, gathered, "gather to %d, in place" % root)
        else:
            dist.gather(src.dev, None, dst=root)

        big = DeviceBuffer(size * n, dtype)
        big.cpu.copy_(torch.cat([value(root, n, dtype, salt=10 + b) for b in range(size)]))
        mine = DeviceBuffer(n, dtype)
        dist.scatter(mine.dev, big.parts(size) if rank == root else None, src=root)
        expect(mine.cpu, value(root, n, dtype, salt=10 + rank), "scatter from %d" % root)
        # In place on the root: its output is its own block of the input.
        if rank == root:
            parts = big.parts(size)
            dist.scatter(parts[rank], parts, src=root)
            expect(big.cpu[rank * n:(rank + 1) * n], value(root, n, dtype, salt=10 + rank),
                   "scatter from %d, in place" % root)
        else:
            mine = DeviceBuffer(n, dtype)
            dist.scatter(mine.dev, None, src=root)
            expect(mine.cpu, value(root, n, dtype, salt=10 + rank),
                   "scatter from %d (the root in place)" % root)

    # Equal splits, int64 rows of 3.
    width, rows = 3, 2
    block = rows * width
    a_in = DeviceBuffer(size * block, torch.int64, shape=[size * rows, width])
    a_in.cpu.copy_(value(rank, size * block, torch.int64, salt=20))
    a_out = DeviceBuffer(size * block, torch.int64, shape=[size * rows, width])
    dist.all_to_all_single(a_out.dev, a_in.dev)
    want = torch.cat([value(r, size * block, torch.int64, salt=20)[rank * block:(rank + 1) * block]
                      for r in range(size)])
    expect(a_out.cpu, want, "all_to_all_single, equal splits")

    # Uneven: rank s sends rows_of(s, d) rows of width 3 to rank d (some
    # pairs none).
    def rows_of(s, d):
        return (s + 2 * d + 1) % 4

    def payload(s, d):
        return value(s, rows_of(s, d) * width, torch.float64, salt=30 + d)

    send_rows = [rows_of(rank, d) for d in range(size)]
    recv_rows = [rows_of(s, rank) for s in range(size)]
    u_in = DeviceBuffer(sum(send_rows) * width, torch.float64, shape=[sum(send_rows), width])
    u_in.cpu.copy_(torch.cat([payload(rank, d) for d in range(size)]))
    u_out = DeviceBuffer(sum(recv_rows) * width, torch.float64, shape=[sum(recv_rows), width])
    dist.all_to_all_single(u_out.dev, u_in.dev, output_split_sizes=recv_rows,
                           input_split_sizes=send_rows)
    expect(u_out.cpu, torch.cat([payload(s, rank) for s in range(size)]),
           "all_to_all_single, uneven splits %s -> %s" % (send_rows, recv_rows))

    # all_to_all: uneven blocks of one input and one output buffer.
    counts_in = [rows_of(rank, d) + 1 for d in range(size)]
    counts_out = [rows_of(s, rank) + 1 for s in range(size)]

    def piece(s, d):
        return value(s, rows_of(s, d) + 1, torch.int32, salt=40 + d)

    l_in = DeviceBuffer(sum(counts_in), torch.int32)
    l_in.cpu.copy_(torch.cat([piece(rank, d) for d in range(size)]))
    l_out = DeviceBuffer(sum(counts_out), torch.int32)
    dist.all_to_all(l_out.blocks(counts_out), l_in.blocks(counts_in))
    expect(l_out.cpu, torch.cat([piece(s, rank) for s in range(size)]),
           "all_to_all, uneven blocks")


def check_p2p(rank, size):
    """send/recv between ranks 0 and 1: tags, isend/irecv, receives from
    any source, and a send whose data is written late on the caller's
    stream. Device messages block until matched, so the two ranks order
    their calls (as with blocking sends)."""
    if rank > 1:
        return
    peer = 1 - rank
    n = 9
    dtype = torch.float32
    for tag in (0, 7, 123456):
        b = DeviceBuffer(n, dtype)
        if rank == 0:
            b.cpu.copy_(value(0, n, dtype, salt=tag % 5))
            dist.send(b.dev, dst=peer, tag=tag)
        else:
            b.cpu.fill_(-1000.0)
            dist.recv(b.dev, src=peer, tag=tag)
            expect(b.cpu, value(0, n, dtype, salt=tag % 5), "recv with tag %d" % tag)
    # The other way, asynchronously.
    b = DeviceBuffer(n, torch.int64)
    if rank == 1:
        b.cpu.copy_(value(1, n, torch.int64, salt=3))
        dist.isend(b.dev, dst=peer, tag=5).wait()
    else:
        b.cpu.fill_(-1000)
        dist.irecv(b.dev, src=peer, tag=5).wait()
        expect(b.cpu, value(1, n, torch.int64, salt=3), "irecv with tag 5")
    # From any source: recv's return value and the Work name the sender.
    b = DeviceBuffer(n, dtype)
    if rank == 1:
        b.cpu.copy_(value(1, n, dtype, salt=2))
        dist.send(b.dev, dst=0, tag=11)
        b.cpu.copy_(value(1, n, dtype, salt=1))
        dist.send(b.dev, dst=0, tag=12)
    else:
        b.cpu.fill_(-1000.0)
        source = dist.recv(b.dev, tag=11)
        assert source == 1, "recv from any source: sender %s, want 1" % source
        expect(b.cpu, value(1, n, dtype, salt=2), "recv from any source")
        b.cpu.fill_(-1000.0)
        work = dist.irecv(b.dev, tag=12)
        work.wait()
        assert work._source_rank() == 1, work._source_rank()
        expect(b.cpu, value(1, n, dtype, salt=1), "irecv from any source")
    # The send goes on the caller's stream: the late write is what arrives.
    b = DeviceBuffer(n, dtype)
    b.cpu.fill_(-1000.0)
    if rank == 0:
        on_late_stream(b, value(0, n, dtype, salt=3),
                       lambda: dist.isend(b.dev, dst=peer, tag=13))
    else:
        dist.recv(b.dev, src=peer, tag=13)
        expect(b.cpu, value(0, n, dtype, salt=3),
               "recv of a send after a write queued on the caller's stream")


def refused(what, call, *needles):
    global checks
    try:
        call()
    except RuntimeError as e:
        msg = str(e)
        assert all(needle in msg for needle in needles), "%s: %s" % (what, msg)
        checks += 1
    else:
        raise AssertionError("%s: no error" % what)


def check_refused(rank, size):
    """What the backend refuses at the call, naming the op and the way out:
    tensors on two devices in one call, a
    device other than the group's, a CUDA message to oneself, and a CUDA
    message on a group that has run no CUDA collective yet."""
    b = DeviceBuffer(4, torch.float32)
    two = ("tensors on cuda:0 and cpu in one call", "put every tensor of the call on one device")
    refused("all_gather_coalesced on two devices", lambda: dist.all_gather_coalesced(
        [[torch.zeros(4)] for _ in range(size)], [b.dev]), "tnt: allgather_coalesced: ", *two)
    refused("_allgather_base on two devices",
            lambda: dist.all_gather_into_tensor(torch.zeros(4 * size), b.dev),
            "tnt: _allgather_base: ", *two)
    refused("alltoall_base on two devices", lambda: dist.all_to_all_single(torch.zeros(4), b.dev),
            "tnt: alltoall_base: ", *two)
    refused("all_to_all on two devices", lambda: dist.all_to_all(
        [torch.zeros(4) for _ in range(size)], [b.dev] * size), "tnt: alltoall: ", *two)
    if rank == 0:
        refused("gather on two devices", lambda: dist.gather(
            b.dev, [torch.zeros(4) for _ in range(size)], dst=0), "tnt: gather: ", *two)
        refused("scatter on two devices", lambda: dist.scatter(
            b.dev, [torch.zeros(4) for _ in range(size)], src=0), "tnt: scatter: ", *two)
    other = _tnt_torch._gpu_double_tensor(b.ptr, [4], torch.float32, 1)
    elsewhere = ("runs its CUDA operations on cuda:0", "this call's tensors are on cuda:1",
                 "move them to that device")
    refused("all_reduce on another device", lambda: dist.all_reduce(other),
            "tnt: allreduce: process group", *elsewhere)
    refused("send on another device", lambda: dist.send(other, dst=(rank + 1) % size),
            "tnt: send: process group", *elsewhere)
    refused("send to oneself", lambda: dist.send(b.dev, dst=rank),
            "tnt: send: rank %d cannot send a CUDA tensor to itself" % rank,
            "copy the tensor instead")
    group = dist.new_group(list(range(size)), backend="tnt")
    refused("send before a CUDA collective",
            lambda: dist.send(b.dev, dst=(rank + 1) % size, group=group),
            "tnt: send: process group", "has run no collective on CUDA tensors yet",
            "dist.all_reduce of a CUDA tensor")
    dist.all_reduce(b.dev, group=group)  # the group's first CUDA op sets its device path up
    dist.destroy_process_group(group)


def main():
    expected = sys.argv[1]
    dist.init_process_group("tnt")
    rank, size = dist.get_rank(), dist.get_world_size()
    check_allreduce(rank, size)
    check_movement(rank, size)
    check_coalesced(rank, size)
    check_exchange(rank, size)
    check_p2p(rank, size)
    check_stream_order(rank, size)
    check_refused(rank, size)
    # libtnt's device path ran: NCCL communicators (the NCCL double), or
    # pinned staging buffers and no NCCL (host-staged).
    live = Live()
    cudart.tnt_cuda_double_live(ctypes.byref(live))
    comms = ctypes.c_long(nccl.tnt_nccl_double_live()).value
    transport = "nccl" if comms > 0 else ("host" if live.host_allocs > 0 else "none")
    assert transport == expected, "transport %s (nccl comms %d, pinned buffers %d), want %s" % (
        transport, comms, live.host_allocs, expected)
    dist.barrier()
    dist.destroy_process_group()
    for buf in DeviceBuffer.buffers:
        assert cudart.cudaFree(ctypes.c_void_p(buf.ptr)) == 0
    sys.stdout.write("tnt_backend_gpu_double: rank %d of %d passed %d checks (transport %s)\n"
                     % (rank, size, checks, transport))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
