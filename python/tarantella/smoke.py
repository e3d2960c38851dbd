"""A check to run after installing: ``python -m tarantella.smoke``.

Start it the way you will start training, e.g.::

    srun --tarantella -N 2 --ntasks-per-node=2 python -m tarantella.smoke
    tarantella -n 2 -- python -m tarantella.smoke

Every rank prints one line (where it runs, which interpreter and package it
uses, its CPUs); rank 0 then checks that an allreduce over all ranks gives
the right sum and prints ``smoke test passed``. The exit status is 0 only
when every check passed. ``--expect-size N`` also fails when the job does not
have N ranks (a job that silently runs as N singletons, for instance).
"""
import argparse
import os
import socket
import sys

import numpy as np

import tarantella as tnt


def _say(text, stream=None):
    """One write per line: every rank shares the job's stdout, and print()
    writes the text and the newline separately when Python runs unbuffered
    (PYTHONUNBUFFERED), so two ranks' lines could merge into one."""
    stream = stream if stream is not None else sys.stdout
    stream.write("tarantella smoke: %s\n" % text)
    stream.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tarantella.smoke")
    parser.add_argument("--expect-size", type=int, default=0,
                        help="fail unless the job has this many ranks")
    args = parser.parse_args(argv)

    rank, size = tnt.get_rank(), tnt.get_size()
    cpus = len(os.sched_getaffinity(0))
    _say("rank %d of %d on %s (node %d of %d), %d cpus, OMP_NUM_THREADS=%s, python %s, "
         "tarantella %s from %s"
         % (rank, size, socket.gethostname(), tnt.get_node_id(), tnt.get_num_nodes(), cpus,
            os.environ.get("OMP_NUM_THREADS", "unset"), sys.executable, tnt.__version__,
            os.path.dirname(tnt.__file__)))
    # Each rank contributes rank + 1: the sum is size * (size + 1) / 2.
    x = np.full(1024, rank + 1, dtype=np.float32)
    total = tnt.allreduce(x)
    expected = size * (size + 1) / 2
    ok = bool(np.all(total == expected))
    if args.expect_size and size != args.expect_size:
        _say("FAILED: the job has %d rank(s), expected %d; start it with "
             "srun --tarantella or tarantella -n N" % (size, args.expect_size), sys.stderr)
        return 1
    if not ok:
        _say("FAILED on rank %d: allreduce gave %r, expected %g"
             % (rank, float(total[0]), expected), sys.stderr)
        return 1
    tnt.barrier()
    if rank == 0:
        _say("smoke test passed (%d rank%s)" % (size, "" if size == 1 else "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
