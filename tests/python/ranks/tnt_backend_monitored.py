"""dist.monitored_barrier on the "tnt" torch.distributed backend
(tests/python/test_tnt_backend.py), with 3 ranks or more:

* it passes when every rank comes, with and without wait_all_ranks, on the
  default group and on a new_group, and it does not wait for collectives
  queued before it;
* when rank 1 stays away, rank 0 names rank 1 and the others say they
  reached the barrier, each within about the timeout, not the group's;
* with wait_all_ranks and every other rank away, rank 0 names them all;
* a timeout of zero gives rank 0 gloo's "timed out" verdict;
* a gloo group in the same program still gets torch's own monitored_barrier;
* after a failed one, the group's collectives and a later monitored_barrier
  still work.

On success each rank prints "tnt_backend_monitored: rank R of N passed C checks".

    tarantella -n 3 -- tnt_backend_monitored.py
"""
import re
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import tarantella  # noqa: F401  registers the "tnt" backend

checks = 0


def expect(cond, what):
    global checks
    assert cond, what
    checks += 1


def fails(regex, fn):
    """Runs fn, which must raise RuntimeError matching regex; returns the
    seconds it took."""
    t0 = time.monotonic()
    try:
        fn()
    except RuntimeError as e:
        expect(re.search(regex, str(e)), "%r does not match %r" % (str(e), regex))
        return time.monotonic() - t0
    raise AssertionError("no error; expected one matching %r" % regex)


def main():
    dist.init_process_group("tnt", timeout=timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    assert size >= 3, "needs 3 ranks or more"
    t = torch.ones(10) * rank

    # Every rank comes; queued collectives before it do not matter.
    works = [dist.all_reduce(t.clone(), async_op=True) for _ in range(5)]
    dist.monitored_barrier(timeout=timedelta(seconds=10))
    dist.monitored_barrier(timeout=timedelta(seconds=10), wait_all_ranks=True)
    for w in works:
        w.wait()
    expect(True, "passes with every rank")

    # Rank 1 stays away: rank 0 names it, the others say they got there.
    short = timedelta(seconds=2)
    if rank == 0:
        took = fails(r"\[Rank 0\]: Rank 1 failed to pass monitoredBarrier in 2000 ms",
                     lambda: dist.monitored_barrier(timeout=short))
        expect(took < 6, "rank 0's verdict after %.1f s, timeout 2 s" % took)
    elif rank != 1:
        took = fails("Rank %d successfully reached monitoredBarrier, but received errors while "
                     "waiting for send/recv from rank 0" % rank,
                     lambda: dist.monitored_barrier(timeout=short))
        expect(took < 6, "rank %d's verdict after %.1f s, timeout 2 s" % (rank, took))
    dist.barrier()  # everyone is past it; rank 1 skipped this call
    # The group works on, and so does the next monitored barrier (rank 1
    # makes up the call it skipped, so the ranks count calls alike again).
    r = torch.ones(4)
    dist.all_reduce(r)
    expect(torch.equal(r, torch.full((4,), float(size))), "allreduce after a failure: %s" % r)
    if rank == 1:
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=1))
        except RuntimeError:
            pass
    dist.monitored_barrier(timeout=timedelta(seconds=10))
    expect(True, "passes again after a failure")

    # Only rank 0 comes, wait_all_ranks: every other rank is named.
    if rank == 0:
        names = ", ".join(str(r) for r in range(1, size))
        fails(r"Ranks %s failed to pass monitoredBarrier" % names,
              lambda: dist.monitored_barrier(timeout=timedelta(seconds=0.5),
                                             wait_all_ranks=True))
    dist.barrier()
    if rank != 0:  # make up the skipped call, as above
        try:
            dist.monitored_barrier(timeout=timedelta(seconds=0.5))
        except RuntimeError:
            pass

    # A timeout of zero: rank 0 has no time to wait for anyone.
    sub = dist.new_group(ranks=list(range(size)))
    if rank == 0:
        fails("Rank 0 timed out in monitoredBarrier",
              lambda: dist.monitored_barrier(sub, timeout=timedelta(seconds=0)))
    dist.barrier()

    # A subgroup of ranks 0 and 1; the others are not members (torch
    # returns at once for them).
    pair = dist.new_group(ranks=[0, 1])
    dist.monitored_barrier(pair, timeout=timedelta(seconds=10))
    expect(True, "a subgroup's monitored barrier")

    # A gloo group beside: torch's own path, unchanged.
    gloo = dist.new_group(ranks=list(range(size)), backend="gloo")
    dist.monitored_barrier(gloo, timeout=timedelta(seconds=10))
    expect(dist.get_backend(gloo) == "gloo", "gloo group")

    dist.barrier()
    sys.stdout.write("tnt_backend_monitored: rank %d of %d passed %d checks\n" % (rank, size, checks))
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001  every failure names the rank
        print("tnt_backend_monitored: rank %s failed: %s" % (dist.get_rank() if
              dist.is_initialized() else "?", e), file=sys.stderr, flush=True)
        raise
