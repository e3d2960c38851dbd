"""The ``tnt`` torch.distributed backend (docs/torch-distributed.md,
"Backend tnt").

``import tarantella`` registers it, so that an unmodified script can say::

    dist.init_process_group("tnt")          # env://, as with gloo

and its collectives (and DDP's gradient allreduce) run through libtnt. The
process group itself is C++ (``tarantella._tnt_torch``, built when torch's
C++ headers were there at build time); this module only registers it with
torch. Where it was not built, the registration stays, and creating a group
says why and how to get it, instead of torch's "Invalid backend".
"""
import torch.distributed as dist

__all__ = ["BACKEND", "available", "register"]

BACKEND = "tnt"

try:
    from . import _tnt_torch
except ImportError as _e:  # not built: no torch C++ headers at build time
    _tnt_torch = None
    _IMPORT_ERROR = str(_e)
else:
    _IMPORT_ERROR = None


def available():
    """True when the C++ backend was built and loads with this torch."""
    return _tnt_torch is not None


def _create(store, rank, size, timeout):
    """torch.distributed's creation function: one libtnt communicator per
    process group, bootstrapped from the group's store."""
    if _tnt_torch is None:
        raise RuntimeError(
            "tnt: the tnt torch.distributed backend is not built in this installation of "
            "Tarantella (%s); rebuild with torch's C++ headers and pybind11 present (Debian: "
            "apt-get install libtorch-dev pybind11-dev; CMake prints whether it built it), or "
            "use backend 'gloo'" % _IMPORT_ERROR)
    # Errors and hang verdicts name the communicator: the default group is
    # created while torch.distributed is not initialized yet.
    name = "torch.default_pg" if not dist.is_initialized() else "torch.group%d" % size
    return _tnt_torch.create_process_group(store, rank, size, timeout, name)


def register():
    """Registers ``tnt`` with torch.distributed; calling it again does
    nothing (torch refuses a second registration)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create)


if dist.is_available():
    register()
