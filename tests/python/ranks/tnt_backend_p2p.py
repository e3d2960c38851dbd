"""Point-to-point messages on the "tnt" torch.distributed backend
(tests/python/test_tnt_backend.py): send, recv, isend, irecv, recv from any
source, tags matched out of order, batch_isend_irecv, a message of several
MiB, and a new_group's messages, each checked against the exact tensor the
sender made. On success each rank prints
"tnt_backend_p2p: rank R of N passed C checks".

    tarantella -n 3 -- tnt_backend_p2p.py
"""
import sys
import time

import torch
import torch.distributed as dist

import tarantella  # noqa: F401  registers the "tnt" backend

checks = 0


def message(src, dst, tag, n=5):
    """What rank src sends to rank dst with tag: every message differs."""
    return torch.arange(n, dtype=torch.float32) + 1000 * src + 100 * dst + tag


def expect(cond, what):
    global checks
    assert cond, what
    checks += 1


def main():
    dist.init_process_group("tnt")
    rank, size = dist.get_rank(), dist.get_world_size()
    nxt, prv = (rank + 1) % size, (rank - 1) % size

    # A ring with the blocking calls: a send ends when it is received, so
    # half the ring sends first.
    got = torch.zeros(5)
    if rank % 2 == 0:
        dist.send(message(rank, nxt, 1), dst=nxt, tag=1)
        dist.recv(got, src=prv, tag=1)
    else:
        dist.recv(got, src=prv, tag=1)
        dist.send(message(rank, nxt, 1), dst=nxt, tag=1)
    expect(torch.equal(got, message(prv, rank, 1)), "blocking ring: %s" % got)

    # Every rank receives before it sends, all posted: a receive that
    # waits must not hold up this rank's own later send.
    got = torch.zeros(5)
    rreq = dist.irecv(got, src=prv, tag=2)
    sreq = dist.isend(message(rank, nxt, 2), dst=nxt, tag=2)
    # The futures complete without anyone calling wait().
    deadline = time.monotonic() + 60
    while not (rreq.is_completed() and sreq.is_completed()):
        assert time.monotonic() < deadline, "isend/irecv did not complete without wait()"
        time.sleep(0.001)
    expect(torch.equal(got, message(prv, rank, 2)), "posted ring: %s" % got)
    rreq.wait()
    sreq.wait()

    # Rank 0 receives one message from every other rank, from any source.
    if rank == 0:
        seen = set()
        for _ in range(size - 1):
            got = torch.zeros(5)
            src = dist.recv(got, tag=3)
            expect(src not in seen and 0 < src < size, "any-source gave rank %s" % src)
            expect(torch.equal(got, message(src, 0, 3)), "any-source from %d: %s" % (src, got))
            seen.add(src)
    else:
        dist.send(message(rank, 0, 3), dst=0, tag=3)

    # Tags matched out of order: rank 1 sends tags 5 then 6, rank 0
    # receives 6 first.
    if size >= 2 and rank == 1:
        reqs = [dist.isend(message(1, 0, t), dst=0, tag=t) for t in (5, 6)]
        for r in reqs:
            r.wait()
    elif size >= 2 and rank == 0:
        for t in (6, 5):
            got = torch.zeros(5)
            dist.recv(got, src=1, tag=t)
            expect(torch.equal(got, message(1, 0, t)), "tag %d: %s" % (t, got))

    # batch_isend_irecv around the ring, with a tensor of 4 MiB.
    n = 1 << 20
    got = torch.zeros(n)
    ops = [dist.P2POp(dist.irecv, got, prv, tag=7),
           dist.P2POp(dist.isend, message(rank, nxt, 7, n), nxt, tag=7)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    expect(torch.equal(got, message(prv, rank, 7, n)), "batch_isend_irecv of 4 MiB")

    # A new group of the first two ranks: peers are global ranks, and its
    # messages travel on its own communicator.
    pair = dist.new_group([0, 1]) if size >= 2 else None
    if pair is not None and rank < 2:
        other = 1 - rank
        got = torch.zeros(5)
        rreq = dist.irecv(got, src=other, group=pair, tag=8)
        dist.send(message(rank, other, 8), dst=other, group=pair, tag=8)
        rreq.wait()
        expect(torch.equal(got, message(other, rank, 8)), "new_group: %s" % got)

    dist.barrier()
    dist.destroy_process_group()
    # One write per line: ranks print at the same moment, and print()
    # writes the newline separately when output is unbuffered.
    sys.stdout.write("tnt_backend_p2p: rank %d of %d passed %d checks\n" % (rank, size, checks))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
