"""Tarantella: data-parallel PyTorch training on libtnt.

``import tarantella as tnt`` bootstraps libtnt once (through PMIx when started
by ``srun --tarantella``, the ``tarantella`` launcher or ``mpirun``; as a
single rank under plain ``python3 script.py``). ``tnt.init()`` may be called
again and does nothing. libtnt is finalized at interpreter exit.
"""
import atexit as _atexit
import os as _os

from . import errors
from .errors import (TarantellaError, InvalidArgumentError, NoMemoryError, TimeoutError,
                     PeerFailedError, BootstrapError, TransportError, UnsupportedError,
                     MismatchError, NotInitializedError, SystemCallError)
from . import _tnt

__version__ = _tnt.version()

_atexit_registered = False
_init_pid = None


def _finalize_at_exit():
    # A child made with fork() (e.g. by multiprocessing) that exits through
    # sys.exit runs the parent's atexit handlers: it must not finalize the
    # parent's communicator (its progress thread does not exist in the child).
    if _os.getpid() == _init_pid:
        _tnt.finalize()


def init():
    """Initialises libtnt; idempotent (later calls do nothing)."""
    global _atexit_registered, _init_pid
    _tnt.init()
    if not _atexit_registered:
        _init_pid = _os.getpid()
        _atexit.register(_finalize_at_exit)
        _atexit_registered = True


def finalize():
    """Finalizes libtnt now (normally done at exit). Idempotent."""
    _tnt.finalize()


def is_initialized():
    return _tnt.is_initialized()


def get_rank():
    """This process's rank, 0 .. get_size()-1."""
    return _tnt.rank()


def get_size():
    """Number of ranks in the job."""
    return _tnt.size()


def get_local_rank():
    """Rank among the ranks on this node."""
    return _tnt.local_rank()


def get_local_size():
    """Number of ranks on this node."""
    return _tnt.local_size()


def get_master_rank():
    """The master rank, which prints, logs and writes checkpoints: always 0."""
    return 0


def is_master_rank():
    return _tnt.rank() == 0


def get_node_id():
    """Index of this rank's node (nodes numbered by their lowest rank)."""
    return _tnt.node_id()


def get_num_nodes():
    return _tnt.num_nodes()


def abort(message="tarantella: abort requested", exit_code=1):
    """Kills every rank of the job (through the launcher / slurmstepd)."""
    _tnt.abort(int(exit_code), str(message))


init()

from .collectives import (allreduce, allreduce_, broadcast, broadcast_, allgather,  # noqa: E402
                          allgather_concat, barrier)
from . import data  # noqa: E402

# The torch-based parts load on first use (PEP 562), so that scripts that only
# use the rank API and the numpy collectives do not pay for importing torch.
_LAZY = {
    "GradientReducer": ("optimizers", "GradientReducer"),
    "DistributedOptimizer": ("optimizers", "DistributedOptimizer"),
    "broadcast_parameters": ("optimizers", "broadcast_parameters"),
    "Model": ("model", "Model"),
    "optimizers": ("optimizers", None),
    "model": ("model", None),
    "callbacks": ("callbacks", None),
    "models": ("models", None),
    # Preemption-safe training (preemption.py; docs/preemption.md).
    "preemption": ("preemption", None),
    "preemption_requested": ("preemption", "requested"),
}


def __getattr__(name):
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError("module 'tarantella' has no attribute %r" % name)
    import importlib
    module = importlib.import_module("." + entry[0], __name__)
    value = module if entry[1] is None else getattr(module, entry[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
