"""Prints the variables torchrun sets, as this rank sees them, on one line:

    torchrun_env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 ... MASTER_PORT=29517

With --import-tarantella it then imports tarantella (tnt_init through the
launcher's PMIx server) and prints its rank and size, so a test can check
that the variables do not set off libtnt's torchrun warning."""
import os
import sys


def say(line):
    # One write(2) per line: the ranks share stdout, and print() may split
    # the text and its newline into two writes that other ranks' lines
    # land between.
    os.write(1, (line + "\n").encode())


NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "MASTER_ADDR", "MASTER_PORT")

say("torchrun_env " + " ".join("%s=%s" % (n, os.environ.get(n, "<unset>")) for n in NAMES))
if "--import-tarantella" in sys.argv:
    import tarantella as tnt

    say("tarantella rank %d of %d" % (tnt.get_rank(), tnt.get_size()))
