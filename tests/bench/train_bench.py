#!/usr/bin/env python3
"""Training benchmark: tarantella (tnt.Model.fit) against torch DDP (gloo).

One program, two backends, three workloads; both backends train the same
model on the same data with the same global batch, split evenly over the
ranks, with one BLAS/OpenMP thread per rank:

  digits   the digits CNN of python/examples/digits.py, global batch 64,
           Adam; time per epoch (median over epochs 2..E) and final test
           accuracy
  mlp64    a 10.5M-parameter MLP (1024-2048-2048-2048-10), global batch 64,
           SGD; time per step (median over timed windows)
  mlp2     the same MLP at global batch 2, where the 42 MB gradient
           allreduce dominates; time per step
  mlp1     the same MLP at batch 1 on ONE rank (tnt backend, -n 1): the
           compute floor that mlp2 on 2 ranks (batch 1 each) is compared to

  tnt:  build/bin/tarantella -n 2 -- python3 train_bench.py --backend tnt --workload mlp2
  ddp:  python3 train_bench.py --backend ddp --workload mlp2 --nproc 2
        (starts the ranks itself on 127.0.0.1 with the gloo backend;
        --ddp-backend tnt runs the same DDP script on Tarantella's tnt
        process-group backend, bootstrapped from the same env:// store)

--compression bf16|fp16 sends the gradients as 16-bit values: for tnt,
compile(compression=...); for ddp, DDP's bf16_compress_hook /
fp16_compress_hook (torch.distributed.algorithms.ddp_comm_hooks). gloo in
torch 1.13 has no bfloat16 allreduce ("Invalid scalar type"), so ddp with
bf16 needs --ddp-backend tnt.

Two ddp-only variants locate where a DDP step's time goes:
--no-communication registers a comm hook that hands every bucket back
untouched (the step without any allreduce: the floor the backend is
measured against), and --bucket-cap-mb sets DDP's bucket size (default
torch's 25; 200 puts mlp's 42 MB of gradients in one bucket, whose
allreduce then starts only when the backward pass has ended).

Rank 0 prints one JSON line (prefix "RESULT ") with the measurements.
tests/bench/run_train_bench.sh alternates the two programs and repeats.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "examples"))


def blas_name():
    """The BLAS torch's process actually mapped (Debian's torch uses the
    libblas.so.3 alternative), e.g. 'reference BLAS (libblas.so.3)'."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return "unknown"
    for key, name in (("libopenblas", "OpenBLAS"), ("libblis", "BLIS"), ("libmkl", "MKL"),
                      ("atlas", "ATLAS")):
        if key in maps:
            return name
    if "/blas/libblas.so" in maps or "libblas.so.3" in maps:
        real = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
        if "openblas" in real:
            return "OpenBLAS"
        return "reference BLAS (%s)" % real
    return "torch built-in"


# -- workloads ---------------------------------------------------------------

def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 10))


def workload(name, steps):
    """(module factory, optimizer factory, x, y, x_test, y_test, batch, epochs)."""
    if name == "digits":
        from digits import DigitsCNN, load_data
        x, x_test, y, y_test = load_data(42)
        return (DigitsCNN, lambda p: torch.optim.Adam(p, lr=3e-3), x, y, x_test, y_test, 64,
                steps)
    batch = {"mlp64": 64, "mlp2": 2, "mlp1": 1}[name]
    rng = np.random.RandomState(0)
    n = batch * steps
    x = rng.randn(n, 1024).astype(np.float32)
    y = rng.randint(0, 10, size=n).astype(np.int64)
    return (mlp, lambda p: torch.optim.SGD(p, lr=0.01), x, y, None, None, batch, 1)


# -- tarantella ----------------------------------------------------------------

def run_tnt(args):
    import tarantella as tnt
    make, make_opt, x, y, x_test, y_test, batch, epochs = workload(args.workload, args.steps)
    torch.manual_seed(0)
    model = tnt.Model(make())
    # compression only when asked for: scripts/bench-compare.sh runs this
    # file against builds from before compile() had the argument
    extra = {"compression": args.compression} if args.compression else {}
    model.compile(make_opt(model.parameters()), "sparse_categorical_crossentropy",
                  ["accuracy"] if args.workload == "digits" else None, **extra)
    epoch_times = []

    class EpochTimer(tnt.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.t0 = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            epoch_times.append(time.perf_counter() - self.t0)

    result = {"backend": "tnt", "workload": args.workload, "ranks": tnt.get_size(),
              "compression": args.compression,
              "batch": batch, "blas": blas_name(), "threads": torch.get_num_threads()}
    if args.workload == "digits":
        model.fit(x, y, batch_size=batch, epochs=epochs, shuffle_seed=42, verbose=0,
                  callbacks=[EpochTimer()])
        result["epoch_s"] = statistics.median(epoch_times[1:])
        result["accuracy"] = model.evaluate(x_test, y_test, batch_size=batch, verbose=0)[1]
    else:
        # Warm-up window, then timed windows of `steps` steps each. Under
        # TNT_FUSION_THRESHOLD=auto the warm-up goes on until the tuning has
        # chosen, so the timed windows measure the chosen size.
        windows, warmups = [], 0
        while len(windows) < args.windows:
            tnt.barrier()
            t0 = time.perf_counter()
            model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
            tnt.barrier()
            tuner = getattr(model, "_fusion_tuner", None)  # None before autotuning existed
            if warmups == 0 or (tuner is not None and not tuner.done and warmups < 20):
                warmups += 1
            else:
                windows.append((time.perf_counter() - t0) / args.steps)
        result["step_s"] = statistics.median(windows)
        result["step_s_all"] = windows
        result["warmup_windows"] = warmups
    tuner = getattr(model, "_fusion_tuner", None)  # None before autotuning existed
    if tuner is not None:
        result["fusion_tuning"] = tuner.summary()
    if tnt.get_rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)


# -- torch DDP -----------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ddp(args):
    """Starts args.nproc ranks of this script (one process each) and waits."""
    if args.compression == "bf16" and args.ddp_backend == "gloo":
        sys.exit("train_bench: gloo (torch 1.13) cannot allreduce bfloat16, which "
                 "bf16_compress_hook needs; use --compression fp16 or --ddp-backend tnt")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(args.nproc), GLOO_SOCKET_IFNAME="lo")
    env.setdefault("OMP_NUM_THREADS", "1")
    procs = []
    for r in range(args.nproc):
        cmd = [sys.executable, os.path.abspath(__file__), "--backend", "ddp-rank",
               "--workload", args.workload, "--steps", str(args.steps),
               "--windows", str(args.windows), "--ddp-backend", args.ddp_backend]
        if args.grad_as_bucket_view:
            cmd.append("--grad-as-bucket-view")
        if args.compression:
            cmd += ["--compression", args.compression]
        if args.no_communication:
            cmd.append("--no-communication")
        if args.bucket_cap_mb is not None:
            cmd += ["--bucket-cap-mb", str(args.bucket_cap_mb)]
        procs.append(subprocess.Popen(cmd, env=dict(env, RANK=str(r))))
    rc = 0
    for p in procs:
        rc |= p.wait()
    return rc


def run_ddp_rank(args):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    if args.ddp_backend == "tnt":
        import tarantella  # noqa: F401  registers the tnt backend
    dist.init_process_group(args.ddp_backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    make, make_opt, x, y, x_test, y_test, batch, epochs = workload(args.workload, args.steps)
    torch.manual_seed(0)
    # broadcasts rank 0's weights; gradient_as_bucket_view saves DDP's two
    # copies of every gradient (into its buckets and back) per step
    ddp_options = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
    model = DDP(make(), gradient_as_bucket_view=args.grad_as_bucket_view, **ddp_options)
    if args.no_communication:
        def untouched(state, bucket):
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        model.register_comm_hook(None, untouched)
    elif args.compression:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, {"bf16": default_hooks.bf16_compress_hook,
                                        "fp16": default_hooks.fp16_compress_hook}[
                                            args.compression])
    opt = make_opt(model.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    micro = batch // size
    n = len(x)

    def epoch(shuffle_epoch=None):
        # The same data path as tnt.Model.fit: a seeded permutation of the
        # dataset, this rank's slice of each global batch, tensor indexing.
        if shuffle_epoch is None:
            order = torch.arange(n)
        else:
            g = torch.Generator().manual_seed(42 + shuffle_epoch)
            order = torch.randperm(n, generator=g)
        model.train()
        for b0 in range(0, n, batch):
            glob = order[b0:b0 + batch]
            idx = glob[rank * len(glob) // size:(rank + 1) * len(glob) // size]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()

    backend = "ddp" if args.ddp_backend == "gloo" else "ddp-tnt"
    # The variants are reported apart from the plain runs.
    if args.no_communication:
        backend += "-no-communication"
    if args.bucket_cap_mb is not None:
        backend += "-bucket%gmb" % args.bucket_cap_mb
    result = {"backend": backend,
              "workload": args.workload, "ranks": size, "batch": batch,
              "compression": args.compression,
              "no_communication": args.no_communication,
              "bucket_cap_mb": args.bucket_cap_mb,
              "blas": blas_name(), "threads": torch.get_num_threads()}
    if args.workload == "digits":
        times = []
        for e in range(epochs):
            t0 = time.perf_counter()
            epoch(e)
            times.append(time.perf_counter() - t0)
        result["epoch_s"] = statistics.median(times[1:])
        model.eval()
        with torch.no_grad():
            pred = model.module(torch.from_numpy(x_test)).argmax(1).numpy()
        result["accuracy"] = float((pred == y_test).mean())
    else:
        windows = []
        for w in range(args.windows + 1):
            dist.barrier()
            t0 = time.perf_counter()
            epoch()
            dist.barrier()
            if w > 0:
                windows.append((time.perf_counter() - t0) / args.steps)
        result["step_s"] = statistics.median(windows)
        result["step_s_all"] = windows
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("tnt", "ddp", "ddp-rank"), required=True)
    parser.add_argument("--workload", choices=("digits", "mlp64", "mlp2", "mlp1"), required=True)
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per timed window (mlp) or epochs (digits)")
    parser.add_argument("--windows", type=int, default=3, help="timed windows (mlp)")
    parser.add_argument("--nproc", type=int, default=2, help="ranks (ddp)")
    parser.add_argument("--ddp-backend", choices=("gloo", "tnt"), default="gloo",
                        help="torch.distributed backend of the ddp runs")
    parser.add_argument("--grad-as-bucket-view", action="store_true",
                        help="DDP(gradient_as_bucket_view=True) in the ddp runs")
    parser.add_argument("--compression", choices=("bf16", "fp16"), default=None,
                        help="16-bit gradients: compile(compression=) for tnt, DDP's "
                        "bf16/fp16_compress_hook for ddp")
    parser.add_argument("--no-communication", action="store_true",
                        help="ddp: a comm hook that returns each bucket untouched (no allreduce)")
    parser.add_argument("--bucket-cap-mb", type=float, default=None,
                        help="ddp: DDP(bucket_cap_mb=...) (default: torch's 25)")
    args = parser.parse_args()
    if args.backend == "tnt" and (args.no_communication or args.bucket_cap_mb is not None):
        parser.error("--no-communication and --bucket-cap-mb are options of the ddp runs")
    if args.no_communication and args.compression:
        parser.error("--no-communication and --compression exclude each other")
    if args.steps is None:
        args.steps = {"digits": 15, "mlp64": 8, "mlp2": 40, "mlp1": 40}[args.workload]
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.backend == "tnt":
        run_tnt(args)
    elif args.backend == "ddp":
        sys.exit(spawn_ddp(args))
    else:
        run_ddp_rank(args)


if __name__ == "__main__":
    main()
