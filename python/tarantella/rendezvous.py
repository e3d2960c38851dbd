"""Start-up of torch.distributed without MASTER_ADDR or MASTER_PORT, for any
backend (docs/torch-distributed.md, "tnt:// and tnt.init_process_group").

Under our launchers (srun --tarantella, tarantella, mpirun) every rank
already knows its rank and the job's size through PMIx. torch still needs a
store (for its barriers and new_group): rank 0 starts a TCPStore on a port
the kernel picks (port 0), and its address travels to the other ranks over
libtnt. No port is ever guessed, so nothing can collide with another job or
program, which is the risk of env:// (its MASTER_PORT is chosen in advance).

    import tarantella as tnt
    tnt.init_process_group("nccl")          # or "gloo", or "tnt"
    # or, without the helper:
    torch.distributed.init_process_group("gloo", init_method="tnt://")
"""
import datetime
import os

from . import _tnt
from .errors import InvalidArgumentError, TarantellaError
from .objects import broadcast_object

__all__ = ["SCHEME", "init_process_group", "register"]

SCHEME = "tnt"

# torch's own default for process groups (30 minutes).
_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def _dist():
    # torch is imported on first use: `import tarantella` registers tnt://
    # from its hook on torch's import, which imports this module.
    import torch.distributed
    return torch.distributed


def _store_host():
    """The address the other ranks dial to reach rank 0's store. One node:
    loopback. Several: MASTER_ADDR when set (the launcher and the plugin set
    a resolvable address of the step's first node, where rank 0 runs), else
    this host's name."""
    if _tnt.num_nodes() == 1:
        return "127.0.0.1"
    return os.environ.get("MASTER_ADDR") or __import__("socket").gethostname()


def _query_value(url, key):
    from urllib.parse import parse_qs, urlparse
    values = parse_qs(urlparse(url).query).get(key)
    return int(values[0]) if values else -1


def make_store(timeout=_DEFAULT_TIMEOUT):
    """Rank 0's TCPStore on a port of the kernel's choosing, reached by every
    rank; returns (store, rank, world_size). Collective over the job."""
    from . import init
    init()
    rank, size = _tnt.rank(), _tnt.size()
    address = None
    if rank == 0:
        # Listens on every address; wait_for_workers=False because the
        # others learn the port only after this returns.
        store = _dist().TCPStore(_store_host(), 0, size, True, timeout=timeout,
                              wait_for_workers=False)
        address = (_store_host(), int(store.port))
    host, port = broadcast_object(address, root=0)
    if rank != 0:
        try:
            store = _dist().TCPStore(host, port, size, False, timeout=timeout)
        except (RuntimeError, OSError) as e:
            raise TarantellaError(
                "tnt://: rank %d cannot reach rank 0's store at %s:%d within %s (%s); if rank "
                "0's host is known under another address here, set MASTER_ADDR to it for "
                "rank 0" % (rank, host, port, timeout, e)) from e
    return store, rank, size


def _handler(url, **kwargs):
    """torch's rendezvous handler for tnt://: rank and size from libtnt."""
    rank, size = _tnt_rank_size()
    for key, mine in (("rank", rank), ("world_size", size)):
        given = _query_value(url, key)
        if given not in (-1, mine):
            raise InvalidArgumentError(
                "tnt://: %s=%d was given, but this process is %s %d of the job; leave rank "
                "and world_size out, Tarantella knows them" % (key, given, key, mine))
    yield make_store(kwargs.get("timeout", _DEFAULT_TIMEOUT))
    raise TarantellaError("tnt://: a process group cannot rendezvous again within one job; "
                          "restart the job (srun --tarantella or tarantella -n N)")


def _tnt_rank_size():
    from . import init
    init()
    return _tnt.rank(), _tnt.size()


def init_process_group(backend="tnt", timeout=None, **kwargs):
    """torch.distributed.init_process_group(backend) started through tnt://:
    no MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE needed or read. Any
    other keyword goes to torch (not init_method, rank or world_size, which
    Tarantella decides)."""
    for key in ("init_method", "rank", "world_size", "store"):
        if key in kwargs:
            raise InvalidArgumentError(
                "tnt.init_process_group: %s is Tarantella's to choose; call "
                "torch.distributed.init_process_group yourself to pass it" % key)
    if timeout is None:
        timeout = _DEFAULT_TIMEOUT
    _dist().init_process_group(backend=backend, init_method=SCHEME + "://", timeout=timeout,
                               **kwargs)


def register():
    """Registers tnt:// with torch.distributed's rendezvous (idempotent)."""
    from torch.distributed import rendezvous as torch_rendezvous
    # torch refuses a second registration of a scheme.
    if SCHEME not in getattr(torch_rendezvous, "_rendezvous_handlers", {}):
        _dist().register_rendezvous_handler(SCHEME, _handler)
