"""Rank script for failure cases: ``ext_errors.py timeout [SLEEP_S] | peer``.

timeout: the last rank never joins a barrier; every other rank must get
         tnt.TimeoutError (a builtins.TimeoutError too) within TNT_TIMEOUT,
         with a message that names the missing rank.
peer:    the last rank exits at once; the others' next collective must raise
         tnt.PeerFailedError naming it, and later collectives fail fast.
Surviving ranks print 'rank R: <ExceptionClass>: <message>'.
"""
import os
import sys
import time

import numpy as np

import tarantella as tnt


def say(text):
    """One write per line: ranks share stdout, and print() writes the text
    and the newline separately when Python runs unbuffered."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()

mode = sys.argv[1]
rank, size = tnt.get_rank(), tnt.get_size()
last = size - 1


def finish(code=0):
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip libtnt's finalize: a peer is gone or out of step on purpose.
    os._exit(code)


if mode == "timeout":
    if rank == last:
        time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 6.0)
        finish(0)
    # A Python thread keeps ticking while barrier() blocks: the extension
    # must release the GIL around the wait.
    import threading
    ticks = [0]
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.01)
    threading.Thread(target=tick, daemon=True).start()
    t0 = time.monotonic()
    try:
        tnt.barrier()
    except tnt.TimeoutError as e:
        stop.set()
        assert isinstance(e, TimeoutError) and isinstance(e, tnt.TarantellaError)
        assert e.status == -3
        say("rank %d: ticks while blocked: %d" % (rank, ticks[0]))
        say("rank %d: %s after %.1f s: %s" % (rank, type(e).__name__, time.monotonic() - t0, e))
        finish(0)
    say("rank %d: barrier returned without the last rank" % rank)
    finish(1)
elif mode == "peer":
    if rank == last:
        finish(0)
    time.sleep(1.0)
    try:
        tnt.allreduce(np.ones(1000, np.float32), check=False)
    except tnt.PeerFailedError as e:
        say("rank %d: %s: %s" % (rank, type(e).__name__, e))
        t0 = time.monotonic()
        try:
            tnt.barrier()
        except tnt.TarantellaError as e2:
            say("rank %d: then %s in %.2f s: %s" % (rank, type(e2).__name__,
                                                   time.monotonic() - t0, e2))
            finish(0)
        say("rank %d: barrier after a failure succeeded" % rank)
        finish(1)
    say("rank %d: allreduce succeeded with a dead peer" % rank)
    finish(1)
else:
    raise SystemExit("unknown mode " + mode)
