#!/usr/bin/env python3
"""torch.distributed benchmark: one unmodified DDP program on any backend.

Started the same way for every backend, under the launcher, which gives each
rank what torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):

  build/bin/tarantella -n 2 -- python3 ddp_bench.py --backend tnt --workload resnet18
  build/bin/tarantella -n 2 -- python3 ddp_bench.py --backend gloo --workload resnet18

Workloads:
  resnet18   torchvision's ResNet-18 (1000 classes) on synthetic 64x64
             images, timed as Horovod's pytorch_synthetic_benchmark.py
             times it: warm-up batches, then ITERS iterations of
             BATCHES_PER_ITER batches each; img/s per iteration over all
             ranks (median reported). SGD, lr 0.01, batch per rank --batch.
  allreduce  dist.all_reduce of one float32 tensor (SUM), --min to --max
             bytes, timed as allreduce_bench (20 warm-up calls, then 20
             to 20000 calls, --volume and --time bound them), the mean
             time per call, and
             bus bandwidth 2(n-1)/n * bytes / time, the figure
             build/bin/allreduce_bench prints for libtnt's C API.

Rank 0 prints one JSON line (prefix "RESULT "). A benchmark, never a test:
it does not judge the figures. docs/torch-distributed.md has the results.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def run_resnet18(args, rank, size):
    import torchvision
    torch.manual_seed(0)
    model = DDP(torchvision.models.resnet18(num_classes=1000),
                gradient_as_bucket_view=args.grad_as_bucket_view)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    data = torch.randn(args.batch, 3, 64, 64, generator=g)
    target = torch.randint(0, 1000, (args.batch,), generator=g)

    def step():
        opt.zero_grad()
        loss_fn(model(data), target).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    rates = []
    for _ in range(args.iters):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.batches_per_iter):
            step()
        dist.barrier()
        rates.append(args.batch * size * args.batches_per_iter / (time.perf_counter() - t0))
    return {"img_s": statistics.median(rates), "img_s_all": rates,
            "batch_per_rank": args.batch}


def run_allreduce(args, rank, size):
    """Timed as allreduce_bench_common.h times the C benchmark, so the two
    figures compare: 20 warm-up calls, then --volume bytes per size in 20 to
    20000 calls, no more than fit in --time seconds judging by the warm-up
    (rank 0's count is broadcast so every rank makes the same calls)."""
    out = {}
    sizes = [n for n in (4 << (2 * i) for i in range(16)) if args.min <= n < args.max] + [args.max]
    for nbytes in sizes:
        t = torch.zeros(nbytes // 4, dtype=torch.float32)
        t0 = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(t)
        warm = (time.perf_counter() - t0) / 20
        calls = args.volume / nbytes
        if warm > 0:
            calls = min(calls, args.time / warm)
        calls = torch.tensor([min(20000, max(20, int(calls)))], dtype=torch.int64)
        dist.broadcast(calls, 0)
        calls = int(calls.item())
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(t)
        dt = (time.perf_counter() - t0) / calls
        out[str(nbytes)] = {"us": dt * 1e6, "calls": calls,
                            "busbw_gbs": 2.0 * (size - 1) / size * nbytes / dt / 1e9}
    return {"allreduce": out}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("tnt", "gloo"), required=True)
    parser.add_argument("--workload", choices=("resnet18", "allreduce"), required=True)
    parser.add_argument("--batch", type=int, default=16, help="images per rank (resnet18)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up batches (resnet18)")
    parser.add_argument("--iters", type=int, default=5, help="timed iterations (resnet18)")
    parser.add_argument("--batches-per-iter", type=int, default=4)
    parser.add_argument("--grad-as-bucket-view", action="store_true",
                        help="DDP(gradient_as_bucket_view=True) (resnet18)")
    parser.add_argument("--min", type=int, default=4, help="smallest size, bytes (allreduce)")
    parser.add_argument("--max", type=int, default=64 << 20, help="largest size, bytes (allreduce)")
    parser.add_argument("--volume", type=float, default=4.0 * (1 << 30),
                        help="bytes reduced per size (allreduce), as allreduce_bench's --volume")
    parser.add_argument("--time", type=float, default=0.5,
                        help="at most about this many seconds per size (allreduce)")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.backend == "tnt":
        import tarantella  # noqa: F401  registers the tnt backend
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    run = run_resnet18 if args.workload == "resnet18" else run_allreduce
    result = {"backend": "ddp-" + args.backend, "workload": args.workload, "ranks": size,
              "threads": torch.get_num_threads()}
    result.update(run(args, rank, size))
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
