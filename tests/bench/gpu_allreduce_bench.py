"""Allreduce of float32 CUDA tensors: tarantella against torch.distributed,
in the same run, on the same GPU(s).

    tarantella -n N -- python gpu_allreduce_bench.py tnt [--sizes ...]
    python gpu_allreduce_bench.py torch --backend nccl|gloo|tnt --ranks N [--sizes ...]

`tnt` runs under the launcher (or srun --tarantella); TNT_GPU_TRANSPORT picks
NCCL or the host-staged path. `torch` starts its own N processes with
torch.multiprocessing and a loopback TCP store. Every rank allocates one
tensor per size on its device, runs `--warmup` untimed iterations, then
times `--iters` iterations (at least `--min-time` seconds) between two
torch.cuda.synchronize() calls. Rank 0 prints one JSON line per size:
time per allreduce (median of `--reps` repetitions), algorithm bandwidth
(bytes / time) and bus bandwidth (2 (N-1)/N bytes / time, as nccl-tests
report it; 0 on one rank, where NCCL moves nothing for an in-place call).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch

DEFAULT_SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("lib", choices=["tnt", "torch"])
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo", "tnt"],
                   help="torch.distributed backend (lib torch)")
    p.add_argument("--ranks", type=int, default=1, help="processes (lib torch)")
    p.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES,
                   help="message sizes in bytes")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.05)
    p.add_argument("--label", default="", help="free text copied into every record")
    return p.parse_args(argv)


def time_allreduce(run, nbytes, args):
    """Median seconds per call of run() over args.reps timed repetitions."""
    for _ in range(args.warmup):
        run()
    torch.cuda.synchronize()
    reps = []
    for _ in range(args.reps):
        iters = args.iters
        while True:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                run()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if dt >= args.min_time or iters >= 1 << 14:
                break
            iters *= 4
        reps.append(dt / iters)
    return statistics.median(reps)


def report(rank, size, nbytes, seconds, lib, transport, args):
    if rank != 0:
        return
    alg = nbytes / seconds
    bus = 2.0 * (size - 1) / size * alg
    print(json.dumps({"lib": lib, "transport": transport, "ranks": size, "bytes": nbytes,
                      "us": round(seconds * 1e6, 2), "algbw_GBps": round(alg / 1e9, 3),
                      "busbw_GBps": round(bus / 1e9, 3),
                      "device": torch.cuda.get_device_name(), "label": args.label}),
          flush=True)


def check_sum(x, size, what):
    """Every element must be 1+2+...+size after one allreduce of rank+1."""
    want = size * (size + 1) / 2
    got = x[:16].cpu()
    if not torch.all(got == want):
        raise SystemExit("%s: wrong result %s, expected %s" % (what, got.tolist(), want))


def bench_tnt(args):
    import tarantella as tnt
    tnt.init()
    rank, size = tnt.get_rank(), tnt.get_size()
    dev = tnt.cuda.local_device()
    torch.cuda.set_device(dev)
    for nbytes in args.sizes:
        x = torch.full((nbytes // 4,), float(rank + 1), device=dev)
        tnt.allreduce_(x, check=False)
        check_sum(x, size, "tnt allreduce of %d bytes" % nbytes)
        t = time_allreduce(lambda: tnt.allreduce_(x, check=False), nbytes, args)
        report(rank, size, nbytes, t, "tnt", tnt.cuda.transport(), args)
        del x
    tnt.finalize()


def torch_worker(rank, args, port):
    import torch.distributed as dist
    if args.backend == "tnt":
        import tarantella  # noqa: F401  registers the "tnt" backend
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    ngpu = torch.cuda.device_count()
    dev = torch.device("cuda", rank % ngpu)
    torch.cuda.set_device(dev)
    dist.init_process_group(args.backend, rank=rank, world_size=args.ranks)
    for nbytes in args.sizes:
        x = torch.full((nbytes // 4,), float(rank + 1), device=dev)
        dist.all_reduce(x)
        check_sum(x, args.ranks, "torch %s allreduce of %d bytes" % (args.backend, nbytes))
        t = time_allreduce(lambda: dist.all_reduce(x), nbytes, args)
        report(rank, args.ranks, nbytes, t, "torch", args.backend, args)
        del x
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("gpu_allreduce_bench: torch.cuda.is_available() is False: "
                         "this benchmark needs a GPU")
    if args.lib == "tnt":
        bench_tnt(args)
    else:
        import torch.multiprocessing as mp
        mp.spawn(torch_worker, args=(args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main(sys.argv[1:])
