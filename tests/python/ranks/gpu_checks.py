"""GPU rank script (tests/python/test_gpu.py): run by 1..N ranks, each on its
own current CUDA device or all sharing one (host-staged path).

  gpu_checks.py collectives
  gpu_checks.py reducer
  gpu_checks.py model OUT.npz
  gpu_checks.py amp fp16|bf16
"""
import sys

import numpy as np
import torch

import tarantella as tnt
from tarantella import _tnt

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def collectives():
    dev = tnt.cuda.local_device()
    r, n = tnt.get_rank(), tnt.get_size()
    for dtype in DTYPES:
        for op in ("sum", "avg", "min", "max", "prod"):
            base = torch.arange(1, 1001, device=dev) % 5 - 2  # small, exact in bf16
            x = (base * (r + 1)).to(dtype) if op != "prod" else (base.abs() % 2 + 1).to(dtype)
            ref = torch.stack([(base * (k + 1)).double() if op != "prod"
                               else (base.abs() % 2 + 1).double() for k in range(n)])
            want = {"sum": ref.sum(0), "min": ref.min(0).values, "max": ref.max(0).values,
                    "prod": ref.prod(0), "avg": ref.sum(0) / n}[op]
            if op == "avg" and not dtype.is_floating_point:
                want = torch.trunc(ref.sum(0) / n)
            out = tnt.allreduce(x, op=op)
            assert out.device == x.device
            tol = 1e-2 * want.abs() + 1e-2 if op == "avg" else 0
            assert ((out.double() - want).abs() <= tol).all(), (dtype, op)
            y = x.clone()
            tnt.allreduce_(y, op=op)
            assert torch.equal(y, out), (dtype, op, "in place")
    b = torch.full((257,), float(r), device=dev)
    assert torch.equal(tnt.broadcast(b, root=n - 1), torch.full_like(b, n - 1.0))
    g = tnt.allgather(torch.full((3, 2), r, device=dev, dtype=torch.int64))
    assert g.shape == (n, 3, 2) and all(int(g[k, 0, 0]) == k for k in range(n))
    big = torch.ones((64 << 20) // 4, device=dev)  # 64 MiB, several staging chunks
    tnt.allreduce_(big)
    assert float(big.min()) == n and float(big.max()) == n
    tnt.cuda.synchronize()
    print("rank %d: collectives OK on %s (transport %s)" % (r, dev, tnt.cuda.transport()))


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _data(n=96):
    g = torch.Generator().manual_seed(7)
    return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)


def reducer():
    dev = tnt.cuda.local_device()
    r, n = tnt.get_rank(), tnt.get_size()
    x, y = _data()
    serial = _mlp(1).to(dev)
    dist = _mlp(1).to(dev)
    opt_s = torch.optim.SGD(serial.parameters(), lr=0.1)
    opt_d = tnt.DistributedOptimizer(torch.optim.SGD(dist.parameters(), lr=0.1), model=dist,
                                     threshold_kb=1)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(5):
        lo, hi = step * 16, step * 16 + 16  # global batch of 16
        opt_s.zero_grad()
        loss_fn(serial(x[lo:hi].to(dev)), y[lo:hi].to(dev)).backward()
        opt_s.step()
        a, b = _tnt.shard_range(16, r, n)
        opt_d.zero_grad()
        opt_d.set_micro_batch(b - a, 16)
        loss_fn(dist(x[lo + a:lo + b].to(dev)), y[lo + a:lo + b].to(dev)).backward()
        opt_d.step()
    for ps, pd in zip(serial.parameters(), dist.parameters()):
        assert torch.allclose(ps, pd, rtol=1e-4, atol=1e-5), (ps - pd).abs().max()
    print("rank %d: reducer OK" % r)


def model(out):
    x, y = _data(120)
    m = tnt.Model(_mlp(3))
    assert m.device.type == "cuda", m.device
    m.compile(optimizer=torch.optim.SGD(m.parameters(), lr=0.05),
              loss=torch.nn.CrossEntropyLoss(), metrics=["accuracy"])
    m.fit(x.numpy(), y.numpy(), batch_size=24, epochs=2, shuffle=False, verbose=0)
    if tnt.get_rank() == 0:
        np.savez(out, *[p.detach().cpu().numpy() for p in m.parameters()])


def amp(kind):
    dev = tnt.cuda.local_device()
    x, y = _data()
    net = _mlp(5).to(dev)
    opt = tnt.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), model=net)
    dtype = torch.float16 if kind == "fp16" else torch.bfloat16
    scaler = torch.cuda.amp.GradScaler(enabled=kind == "fp16")
    losses = []
    for step in range(20):
        opt.zero_grad()
        with torch.autocast("cuda", dtype=dtype):
            loss = torch.nn.functional.cross_entropy(net(x.to(dev)), y.to(dev))
        scaler.scale(loss).backward()
        opt.synchronize()        # reduce before the scaler reads the gradients
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    flat = torch.cat([p.detach().reshape(-1).float() for p in net.parameters()])
    every = tnt.allgather(flat)
    assert all(torch.equal(every[k], every[0]) for k in range(tnt.get_size())), "ranks diverged"
    print("rank %d: amp %s OK (loss %.3f -> %.3f)" % (tnt.get_rank(), kind, losses[0], losses[-1]))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "collectives":
        collectives()
    elif what == "reducer":
        reducer()
    elif what == "model":
        model(sys.argv[2])
    elif what == "amp":
        amp(sys.argv[2])
    else:
        raise SystemExit("unknown check %r" % what)
