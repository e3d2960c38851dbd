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
rank's input. Also checked: the collective goes on the stream the caller
set (a delayed write queued on it before the call is seen), libtnt's device
path is the one taken (the double's NCCL communicators or pinned staging
buffers exist afterwards), and the ops without a device call refuse CUDA
tensors by name. Prints "tnt_backend_gpu_double: rank R of N passed C
checks (transport T)".
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

    def __init__(self, n, dtype):
        nbytes = n * torch.empty((), dtype=dtype).element_size()
        ptr = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(nbytes)) == 0
        self.ptr, self.nbytes = ptr.value, nbytes
        self.cpu = torch.frombuffer((ctypes.c_char * nbytes).from_address(ptr.value), dtype=dtype)
        self.dev = _tnt_torch._gpu_double_tensor(ptr.value, [n], dtype)
        DeviceBuffer.buffers.append(self)

    def parts(self, k):
        """k cuda tensors over consecutive equal blocks (one buffer in order,
        as list(flat.chunk(k)) would give)."""
        n = self.cpu.numel() // k
        step = n * self.cpu.element_size()
        return [_tnt_torch._gpu_double_tensor(self.ptr + i * step, [n], self.cpu.dtype)
                for i in range(k)]


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


def check_stream_order(rank, size):
    """The collective goes on the stream the caller set: a write queued
    there before the call (delayed 0.3 s) is what gets reduced."""
    global checks
    n = 5
    b = DeviceBuffer(n, torch.float32)
    b.cpu.fill_(-1000.0)
    stream = ctypes.c_void_p()
    assert cudart.cudaStreamCreateWithFlags(ctypes.byref(stream), 1) == 0

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def late_write(_arg):
        time.sleep(0.3)
        b.cpu.copy_(value(rank, n, torch.float32))

    assert cudart.tnt_cuda_double_enqueue(stream, late_write, None) == 0
    _tnt_torch._gpu_double_set_stream(stream.value)
    try:
        work = dist.all_reduce(b.dev, async_op=True)
        work.wait()
    finally:
        _tnt_torch._gpu_double_set_stream(0)
    want = reference([value(r, n, torch.float32) for r in range(size)], R.SUM, torch.float32)
    expect(b.cpu, want, "all_reduce after a write queued on the caller's stream")
    # The future's value is the tensor itself, complete in device memory.
    (value_t,) = work.get_future().value()
    assert value_t.is_cuda and value_t.data_ptr() == b.dev.data_ptr()
    checks += 1
    assert cudart.cudaStreamSynchronize(stream) == 0
    assert cudart.cudaStreamDestroy(stream) == 0


def check_refused(rank, size):
    """Ops that libtnt has no device call for name themselves and the way
    out; tensors on two devices in one call are refused."""
    global checks
    b = DeviceBuffer(4, torch.float32)
    cases = [
        ("gather", lambda: dist.gather(b.dev, [b.dev] * size if rank == 0 else None, dst=0)),
        ("scatter", lambda: dist.scatter(b.dev, [b.dev] * size if rank == 0 else None, src=0)),
        ("alltoall_base", lambda: dist.all_to_all_single(b.dev, b.dev)),
        ("send", lambda: dist.send(b.dev, dst=(rank + 1) % size)),
    ]
    for op, fn in cases:
        try:
            fn()
        except RuntimeError as e:
            msg = str(e)
            assert ("tnt: %s: cuda:0 tensors are not supported by the tnt backend in %s" % (op, op)
                    in msg and "backend 'nccl'" in msg), msg
            checks += 1
        else:
            raise AssertionError("%s of a CUDA tensor: no error" % op)
    try:
        dist.all_gather_into_tensor(torch.zeros(4 * size), b.dev)
    except RuntimeError as e:
        assert "tnt: _allgather_base: tensors on cuda:0 and cpu in one call" in str(e), str(e)
        checks += 1
    else:
        raise AssertionError("tensors on two devices: no error")


def main():
    expected = sys.argv[1]
    dist.init_process_group("tnt")
    rank, size = dist.get_rank(), dist.get_world_size()
    check_allreduce(rank, size)
    check_movement(rank, size)
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
