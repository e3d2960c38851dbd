"""Tarantella: data-parallel PyTorch training on libtnt.

``import tarantella as tnt`` bootstraps libtnt once (through PMIx when started
by ``srun --tarantella``, the ``tarantella`` launcher or ``mpirun``; as a
single rank under plain ``python3 script.py``). ``tnt.init()`` may be called
again and does nothing. libtnt is finalized at interpreter exit.
"""
import atexit as _atexit
import contextlib as _contextlib
import os as _os
import sys as _sys

from . import errors
from .errors import (TarantellaError, InvalidArgumentError, NoMemoryError, TimeoutError,
                     PeerFailedError, BootstrapError, TransportError, UnsupportedError,
                     MismatchError, NotInitializedError, SystemCallError, DeviceIndexError)
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


@_contextlib.contextmanager
def long_wait():
    """Marks a stretch in which this rank may wait long on purpose, e.g. for
    rank 0 writing a checkpoint: inside it, this rank neither warns
    (TNT_STALL_WARN) nor times out (TNT_TIMEOUT) in collectives, and peers
    do not blame it. A peer that dies still ends the wait. Enter it on every
    rank of the collective (collective saves do)."""
    _tnt.stall_pause()
    try:
        yield
    finally:
        _tnt.stall_resume()


def seed_per_rank(seed):
    """Seeds torch's generators (CPU and every CUDA device), ``random`` and
    ``numpy.random`` with ``seed + get_rank()`` and returns that value.

    For dropout, augmentation and any other per-sample randomness: with one
    seed on every rank, the ranks would draw the same masks for different
    samples. Rank 0 gets ``seed`` itself, so a one-rank run is the serial
    script with ``torch.manual_seed(seed)``; so is everything drawn from the
    master's generator alone (``tnt.Model`` broadcasts the master's initial
    weights, and ``fit`` uses the master's shuffle seed). DataLoader workers
    derive their seeds from torch's generator, so they differ per rank too.
    With random layers, N ranks are equivalent to the serial run in
    distribution (each sample gets an independent mask), not bit for bit."""
    seed = int(seed)
    if seed < 0:
        raise InvalidArgumentError("seed_per_rank: seed must be >= 0, got %d" % seed)
    value = seed + get_rank()
    import random
    import numpy
    import torch
    random.seed(value)
    numpy.random.seed(value % (1 << 32))  # numpy takes 32 bits
    torch.manual_seed(value)  # also seeds every CUDA device's generator
    return value


#: Exit status of a rank that stops because of an uncaught exception.
EXIT_UNCAUGHT = 1
#: Exit status of a rank that stops because a peer failed or hung.
EXIT_PEER_FAILED = 2

_previous_excepthook = None
_PEER_GRACE_S = 1.0


def _excepthook(etype, value, tb):
    """Uncaught exception on one rank of a multi-rank job: the others would
    wait for it until TNT_TIMEOUT, so after the traceback the whole job is
    aborted (PMIx_Abort: srun and the launcher kill every rank). An error a
    peer caused gets one short line instead of a traceback."""
    try:
        multi = _tnt.is_initialized() and _tnt.size() > 1
    except Exception:
        multi = False
    if not multi or issubclass(etype, (KeyboardInterrupt, SystemExit)):
        _previous_excepthook(etype, value, tb)
        return
    rank = _tnt.rank()
    if getattr(value, "caused_by_peer", False):
        # One line, the abort's own: the message names the rank to look at.
        text = str(value)
        prefix = "rank %d: " % rank
        if text.startswith(prefix):
            text = text[len(prefix):]
        if getattr(value, "printed", False):
            # libtnt printed it already (this rank reported the hang, or
            # saw the peer fail itself): not twice. The abort carries the
            # same text, which the launcher's report then gives once.
            line = text
        else:
            line = "rank %d stops because of another rank: %s" % (rank, text)
            _sys.stderr.write("tarantella: %s\n" % line)
            _sys.stderr.flush()
        # The ranks that see the same failure see it within a second of each
        # other: let each print its line before the first abort kills them.
        import time
        time.sleep(_PEER_GRACE_S)
        code = EXIT_PEER_FAILED
        # The line is printed; the abort carries it to the launcher's report
        # without printing it a second time.
        try:
            devnull = _os.open(_os.devnull, _os.O_WRONLY)
            _os.dup2(devnull, 2)
        except OSError:
            pass
    else:
        _previous_excepthook(etype, value, tb)
        line = "rank %d: uncaught %s: %s" % (rank, etype.__name__, value)
        code = EXIT_UNCAUGHT
    # What the rank printed before the failure is still in Python's buffers;
    # the abort waits until the reader (slurmstepd, the launcher) took it.
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    _tnt.abort(code, line[:400])


def _install_failure_handlers():
    global _previous_excepthook
    if _previous_excepthook is None and _sys.excepthook is not _excepthook:
        _previous_excepthook = _sys.excepthook
        _sys.excepthook = _excepthook
    # kill -USR2 / scancel --signal=USR2: libtnt prints where this rank is
    # (collective and sequence number), then faulthandler the Python stack
    # of every thread; the job goes on. Only when nobody else handles USR2.
    import signal
    if signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL:
        import faulthandler
        try:
            _tnt.report_on_signal(int(signal.SIGUSR2))
            faulthandler.register(signal.SIGUSR2, all_threads=True, chain=True)
        except (errors.TarantellaError, RuntimeError, ValueError):
            pass


def _offline_tool():
    """``python3 -m tarantella.timeline ...`` reads a finished timeline:
    it needs no library, and must not bootstrap one (with TNT_TIMELINE
    still set in the shell, that would record over the file it reads)."""
    argv = getattr(_sys, "orig_argv", [])
    return any(a == "-m" and argv[i + 1:i + 2] == ["tarantella.timeline"]
               for i, a in enumerate(argv))


if not _offline_tool():
    init()
    _install_failure_handlers()
# torch.cuda.set_device(tnt.get_local_rank()), the literal port of Horovod's
# device choice, names a GPU that CUDA_VISIBLE_DEVICES hides on local rank 1
# and up: fail with the fix (tnt.cuda.local_device()) instead of torch's
# "invalid device ordinal" (_device_guard.py).
from . import _device_guard  # noqa: E402
_device_guard.install()


def _load_torch_backend():
    from . import torch_backend  # registers "tnt" with torch.distributed
    from . import rendezvous
    rendezvous.register()  # and the tnt:// rendezvous, for any backend


class _TorchImportHook:
    """Watches the import system for torch only: lets the usual finders
    find it, and registers the tnt backend once torch's own __init__ has
    run (torch.distributed is complete then)."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        _sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        torch_exec = spec.loader.exec_module

        def exec_module(module):
            torch_exec(module)
            _load_torch_backend()
        spec.loader.exec_module = exec_module
        return spec


# `import tarantella` registers the "tnt" torch.distributed backend
# (torch_backend.py): at once when torch is loaded, else right after the
# script imports torch, so that scripts that never use torch do not pay for
# importing it (about a second).
if "torch" in _sys.modules:
    _load_torch_backend()
elif not any(isinstance(f, _TorchImportHook) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _TorchImportHook())

from .collectives import (allreduce, allreduce_, broadcast, broadcast_, allgather,  # noqa: E402
                          allgather_concat, barrier)
from .objects import broadcast_object, allgather_object  # noqa: E402
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
    "cuda": ("cuda", None),
    "models": ("models", None),
    # Preemption-safe training (preemption.py; docs/preemption.md).
    "preemption": ("preemption", None),
    "preemption_requested": ("preemption", "requested"),
    # The timeline (timeline.py; docs/timeline.md): tnt.timeline(path).
    "timeline": ("timeline", None),
    # torch.distributed started through tnt:// (rendezvous.py).
    "init_process_group": ("rendezvous", "init_process_group"),
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
