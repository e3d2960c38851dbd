"""What DDP scripts use beyond the plain allreduce, on the "tnt" backend,
each against the same thing on a gloo group of the same ranks in the same
process (tests/python/test_tnt_backend.py):

* DDP communication hooks: fp16_compress_hook and PowerSGD (rank 1, error
  feedback, warm start, compression from the second step);
* join() with uneven inputs: rank r trains on 3 + r batches, and every rank
  still ends with the same weights;
* the object collectives: all_gather_object with objects of different sizes,
  broadcast_object_list, gather_object, scatter_object_list.

    tarantella -n 3 -- tnt_backend_ddp_features.py

Each hook run trains two copies of one model from the same weights on the
same batches, one DDP over the tnt group, one over the gloo group. The
results are compared with a tolerance: the backends may add the ranks' 16-bit
values in different orders (libtnt sums float16 in float32 and rounds once).
On success each rank prints "tnt_backend_ddp_features: rank R of N passed C
checks".
"""
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

import tarantella  # noqa: F401  registers the "tnt" backend

checks = 0


def close(a, b, what, rtol=1e-3, atol=1e-4):
    global checks
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (what, m))
    checks += 1


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def batches(rank, count):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g))
            for _ in range(count)]


def flat_weights(m):
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def train(group, rank, steps, hook=None, state=None, join=False):
    ddp = DDP(model(), process_group=group)
    if hook is not None:
        ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)

    def run():
        for x, y in batches(rank, steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()

    if join:
        with Join([ddp]):
            run()
    else:
        run()
    return flat_weights(ddp.module)


def check_hooks(rank, tnt_group, gloo_group):
    for name, hook, make_state in [
        ("fp16_compress_hook", default_hooks.fp16_compress_hook, lambda g: g),
        ("PowerSGD", powersgd.powerSGD_hook,
         lambda g: powersgd.PowerSGDState(process_group=g, matrix_approximation_rank=1,
                                          start_powerSGD_iter=2, use_error_feedback=True,
                                          warm_start=True, random_seed=0)),
    ]:
        on_tnt = train(tnt_group, rank, 6, hook, make_state(tnt_group))
        on_gloo = train(gloo_group, rank, 6, hook, make_state(gloo_group))
        close(on_tnt, on_gloo, "%s: weights after 6 steps, tnt against gloo" % name)
        plain = train(tnt_group, rank, 6)
        assert not torch.allclose(on_tnt, plain, rtol=0, atol=1e-7), \
            "%s changed nothing: was the hook called?" % name


def check_join(rank, size, tnt_group, gloo_group):
    # Rank r runs out of data after 3 + r steps; Join shadows its allreduces
    # until the last rank is done, so all ranks end with the same weights.
    on_tnt = train(tnt_group, rank, 3 + rank, join=True)
    everyone = [torch.empty_like(on_tnt) for _ in range(size)]
    dist.all_gather(everyone, on_tnt, group=tnt_group)
    for r in range(size):
        close(everyone[r], on_tnt, "join: rank %d's weights against rank %d's" % (r, rank),
              rtol=0, atol=0)
    on_gloo = train(gloo_group, rank, 3 + rank, join=True)
    close(on_tnt, on_gloo, "join: weights after uneven inputs, tnt against gloo", rtol=1e-5,
          atol=1e-6)


def check_objects(rank, size):
    global checks
    mine = {"rank": rank, "payload": "x" * (10 + 1000 * rank)}  # sizes differ across ranks
    got = [None] * size
    dist.all_gather_object(got, mine)
    assert got == [{"rank": r, "payload": "x" * (10 + 1000 * r)} for r in range(size)], got
    checks += 1

    root = size - 1
    objs = [("from", rank), list(range(rank + 3))] if rank == root else [None, None]
    dist.broadcast_object_list(objs, src=root)
    assert objs == [("from", root), list(range(root + 3))], objs
    checks += 1

    gathered = [None] * size if rank == 0 else None
    dist.gather_object(("g", rank, [rank] * rank), gathered, dst=0)
    if rank == 0:
        assert gathered == [("g", r, [r] * r) for r in range(size)], gathered
        checks += 1

    out = [None]
    dist.scatter_object_list(out, [{"to": r} for r in range(size)] if rank == 0 else None, src=0)
    assert out == [{"to": rank}], out
    checks += 1


def main():
    dist.init_process_group("tnt")
    rank, size = dist.get_rank(), dist.get_world_size()
    tnt_group = dist.distributed_c10d._get_default_group()
    gloo_group = dist.new_group(backend="gloo")
    check_hooks(rank, tnt_group, gloo_group)
    check_join(rank, size, tnt_group, gloo_group)
    check_objects(rank, size)
    dist.barrier()
    dist.destroy_process_group()
    # One write per line: the ranks share the launcher's stdout, and print()
    # writes the text and the newline apart.
    sys.stdout.write("tnt_backend_ddp_features: rank %d of %d passed %d checks\n"
                     % (rank, size, checks))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
