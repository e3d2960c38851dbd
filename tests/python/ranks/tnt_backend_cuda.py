"""CUDA tensors through the "tnt" torch.distributed backend on a real GPU
(tests/python/test_gpu.py, label gpu; the same calls run against the GPU
test double in tnt_backend_gpu_double.py, which never counts as a GPU run).

    tarantella -n 2 -- tnt_backend_cuda.py

Every rank's input is a function of (rank, index), so each rank computes
the exact expected result on the CPU: all_reduce (every op; float32,
float16, bfloat16, int64; a vector past several staging chunks),
broadcast, reduce, all_gather, all_gather_into_tensor, reduce_scatter
(list and tensor forms), gather, scatter, all_to_all_single with uneven
splits, all_to_all, send/recv with tags (2 ranks and more), an async
all_reduce on a side stream behind a slow kernel (the op must see the
kernel's write: it is ordered on the caller's current stream), and DDP of
a CUDA model against serial training of the same model on the whole batch.
Prints "tnt_backend_cuda: rank R of N passed C checks".
"""
import torch
import torch.distributed as dist

import tarantella as tnt

R = dist.ReduceOp
checks = 0


def value(rank, n, dtype, salt=0):
    """Small integers (-1 .. 3): exact in every dtype, also as products of
    four ranks."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 7 + rank * 3 + salt) % 5 - 1).to(dtype)


def expect(got, want, what):
    global checks
    got = got.cpu()
    if want.dtype.is_floating_point:
        ok = torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-3)
    else:
        ok = torch.equal(got, want)
    assert ok, "%s: got %s, expected %s" % (what, got[:8].tolist(), want[:8].tolist())
    checks += 1


def reductions(rank, size, dev):
    ops = {"SUM": (R.SUM, lambda w: w.sum(0)), "PRODUCT": (R.PRODUCT, lambda w: w.prod(0)),
           "MIN": (R.MIN, lambda w: w.amin(0)), "MAX": (R.MAX, lambda w: w.amax(0)),
           "AVG": (R.AVG, lambda w: w.sum(0) / size)}
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64):
        for name, (op, ref) in ops.items():
            if name == "AVG" and not dtype.is_floating_point:
                continue
            for n in (7, 300_001):  # the long one crosses several 64 KiB chunks
                wide = torch.stack([value(r, n, torch.float64) for r in range(size)])
                t = value(rank, n, dtype).to(dev)
                dist.all_reduce(t, op=op)
                expect(t, ref(wide).to(dtype), "all_reduce %s %s n=%d" % (name, dtype, n))
    n = 11
    every = [value(r, n, torch.float32) for r in range(size)]
    for root in range(size):
        t = value(rank, n, torch.float32).to(dev)
        dist.reduce(t, dst=root, op=R.SUM)
        if rank == root:
            expect(t, sum(every), "reduce to %d" % root)
    block = 5
    inputs = [value(rank, block * size, torch.float32, salt=1)]
    want = sum(value(r, block * size, torch.float32, salt=1) for r in range(size))
    out = torch.empty(block, device=dev)
    dist.reduce_scatter_tensor(out, inputs[0].to(dev))
    expect(out, want[rank * block:(rank + 1) * block], "reduce_scatter_tensor")
    parts = [p.to(dev) for p in inputs[0].chunk(size)]
    out = torch.empty(block, device=dev)
    dist.reduce_scatter(out, parts)
    expect(out, want[rank * block:(rank + 1) * block], "reduce_scatter")


def movement(rank, size, dev):
    n = 9
    every = [value(r, n, torch.float32, salt=2) for r in range(size)]
    for root in range(size):
        t = (every[rank] if rank == root else torch.zeros(n)).to(dev)
        dist.broadcast(t, src=root)
        expect(t, every[root], "broadcast from %d" % root)
        gathered = [torch.empty(n, device=dev) for _ in range(size)] if rank == root else None
        dist.gather(every[rank].to(dev), gathered, dst=root)
        if rank == root:
            expect(torch.cat(gathered), torch.cat(every), "gather to %d" % root)
        out = torch.empty(n, device=dev)
        dist.scatter(out, [e.to(dev) for e in every] if rank == root else None, src=root)
        expect(out, every[rank], "scatter from %d" % root)
    outs = [torch.empty(n, device=dev) for _ in range(size)]
    dist.all_gather(outs, every[rank].to(dev))
    expect(torch.cat(outs), torch.cat(every), "all_gather")
    flat = torch.empty(n * size, device=dev)
    dist.all_gather_into_tensor(flat, every[rank].to(dev))
    expect(flat, torch.cat(every), "all_gather_into_tensor")
    # all_to_all_single, uneven: rank r sends (r + d + 1) elements to rank d.
    sends = [value(rank, rank + d + 1, torch.float32, salt=10 * d) for d in range(size)]
    recv_sizes = [s + rank + 1 for s in range(size)]
    out = torch.empty(sum(recv_sizes), device=dev)
    dist.all_to_all_single(out, torch.cat(sends).to(dev), recv_sizes,
                           [len(s) for s in sends])
    want = torch.cat([value(s, s + rank + 1, torch.float32, salt=10 * rank) for s in range(size)])
    expect(out, want, "all_to_all_single (uneven)")
    outs = [torch.empty(3, device=dev) for _ in range(size)]
    dist.all_to_all(outs, [value(rank, 3, torch.float32, salt=d).to(dev) for d in range(size)])
    expect(torch.cat(outs), torch.cat([value(s, 3, torch.float32, salt=rank)
                                       for s in range(size)]), "all_to_all")


def point_to_point(rank, size, dev):
    if size < 2:
        return
    n = 70_000  # past a 64 KiB chunk
    for tag in (0, 5):
        if rank == 0:
            for peer in range(1, size):
                dist.send(value(peer, n, torch.float32, salt=tag).to(dev), dst=peer, tag=tag)
        else:
            t = torch.zeros(n, device=dev)
            dist.recv(t, src=0, tag=tag)
            expect(t, value(rank, n, torch.float32, salt=tag), "recv tag %d" % tag)


def stream_order(rank, size, dev):
    """The all_reduce is queued on the caller's current stream: it must see
    a write that a slow kernel queued there just before it."""
    side = torch.cuda.Stream(device=dev)
    t = torch.zeros(1 << 16, device=dev)
    torch.cuda.synchronize(dev)
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU time
        t.fill_(rank + 1)
        work = dist.all_reduce(t, async_op=True)
    work.wait()
    side.synchronize()
    expect(t, torch.full((1 << 16,), float(sum(range(1, size + 1)))), "all_reduce on a side stream")


def ddp(rank, size, dev):
    """DDP over tnt, each rank a shard of the batch, against serial training
    of the same model on the whole batch."""
    def net():
        torch.manual_seed(11)
        return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                   torch.nn.Linear(64, 4)).to(dev)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(8 * size * 4, 16, generator=g), torch.randint(0, 4, (8 * size * 4,), generator=g)
    serial, model = net(), torch.nn.parallel.DistributedDataParallel(net(), device_ids=[dev.index])
    opt_s = torch.optim.SGD(serial.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.CrossEntropyLoss()
    per = 8
    for step in range(4):
        lo = step * per * size
        xs, ys = x[lo:lo + per * size].to(dev), y[lo:lo + per * size].to(dev)
        opt_s.zero_grad()
        loss(serial(xs), ys).backward()
        opt_s.step()
        opt_d.zero_grad()
        loss(model(xs[rank * per:(rank + 1) * per]), ys[rank * per:(rank + 1) * per]).backward()
        opt_d.step()
    for a, b in zip(serial.parameters(), model.module.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5), (a - b).abs().max()
    global checks
    checks += 1


def main():
    dist.init_process_group("tnt")
    assert dist.get_backend() == "tnt", dist.get_backend()
    rank, size = dist.get_rank(), dist.get_world_size()
    dev = torch.device(tnt.cuda.local_device())
    torch.cuda.set_device(dev)
    reductions(rank, size, dev)
    movement(rank, size, dev)
    point_to_point(rank, size, dev)
    stream_order(rank, size, dev)
    ddp(rank, size, dev)
    dist.barrier()
    dist.destroy_process_group()
    print("tnt_backend_cuda: rank %d of %d passed %d checks" % (rank, size, checks), flush=True)


if __name__ == "__main__":
    main()
