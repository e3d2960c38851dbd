"""Exceptions raised by tarantella: one class per libtnt status code.

Every class derives from :class:`TarantellaError`; where a builtin exception
means the same thing, the class derives from it too (``tnt.TimeoutError`` is
a ``builtins.TimeoutError``, ``tnt.InvalidArgumentError`` a ``ValueError``),
so generic ``except`` clauses keep working. The message is libtnt's
``tnt_last_error()``: what happened and what to do, naming the collective and
the ranks involved. ``exc.status`` is the libtnt status code (negative int).
"""
import builtins

__all__ = [
    "TarantellaError", "InvalidArgumentError", "NoMemoryError", "TimeoutError",
    "PeerFailedError", "BootstrapError", "TransportError", "UnsupportedError",
    "MismatchError", "NotInitializedError", "SystemCallError", "DeviceIndexError",
    "ERROR_CLASSES",
]


class TarantellaError(Exception):
    """Base class of every error raised by tarantella.

    ``caused_by_peer`` is true for errors that another rank caused (it died,
    or the hang doctor named it): an uncaught one ends the job with one
    short line instead of a traceback, since the rank to look at is the one
    named in the message."""
    status = None
    caused_by_peer = False
    # True when libtnt already printed the message on stderr (set by the
    # extension on the errors it raises).
    printed = False


class InvalidArgumentError(TarantellaError, ValueError):
    """Bad argument: dtype, op, root, sizes, non-contiguous data."""
    status = -1


class NoMemoryError(TarantellaError, MemoryError):
    """An allocation or a shared-memory mapping failed."""
    status = -2


class TimeoutError(TarantellaError, builtins.TimeoutError):
    """A peer did not arrive within TNT_TIMEOUT seconds; the message names it."""
    status = -3
    caused_by_peer = True


class PeerFailedError(TarantellaError):
    """A peer process died or its connection broke."""
    status = -4
    caused_by_peer = True


class BootstrapError(TarantellaError):
    """PMIx bootstrap failed (launcher or srun --mpi=pmix problem)."""
    status = -5


class TransportError(TarantellaError):
    """The shared-memory or network transport failed."""
    status = -6


class UnsupportedError(TarantellaError, NotImplementedError):
    """Feature not built in or not available here."""
    status = -7


class MismatchError(TarantellaError):
    """Ranks disagree: shapes, dtypes, fusion plans or call order."""
    status = -8


class NotInitializedError(TarantellaError, RuntimeError):
    """libtnt was used before init() or after finalize()."""
    status = -9


class SystemCallError(TarantellaError, OSError):
    """A system call failed; the message carries errno's text."""
    status = -10


class DeviceIndexError(InvalidArgumentError, RuntimeError):
    """torch.cuda.set_device was given a device this process cannot see
    (raised by tarantella's wrapper of it; the message names
    tnt.cuda.local_device()). A RuntimeError too, as torch's own error is, so
    existing ``except RuntimeError`` clauses keep working."""


#: status code -> exception class; the C extension raises through this table.
ERROR_CLASSES = {cls.status: cls for cls in (
    InvalidArgumentError, NoMemoryError, TimeoutError, PeerFailedError,
    BootstrapError, TransportError, UnsupportedError, MismatchError,
    NotInitializedError, SystemCallError)}
