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
import functools
import inspect
import os

import torch
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


# The torch major versions the backend's whole test suite passes on
# (docs/torch-distributed.md, "Which torch").
TESTED_TORCH_MAJORS = (1,)
ALLOW_UNTESTED = "TNT_ALLOW_UNTESTED_TORCH"


def _check_torch_version(version):
    """Refuses a torch the suite does not pass on, unless the user asks for
    it: on torch 2.x part of the suite fails for reasons not known yet, and
    a collective that may be wrong must not run unannounced."""
    major = int(version.split(".")[0])
    if major in TESTED_TORCH_MAJORS or os.environ.get(ALLOW_UNTESTED) == "1":
        return
    raise RuntimeError(
        "tnt: the tnt torch.distributed backend is tested with torch 1.13; with torch %s part "
        "of its test suite fails (docs/torch-distributed.md, 'Which torch'). Use backend "
        "'gloo' or 'nccl' (Tarantella's launchers start them too), or set %s=1 to use tnt "
        "anyway" % (version, ALLOW_UNTESTED))


def _create(store, rank, size, timeout):
    """torch.distributed's creation function: one libtnt communicator per
    process group, bootstrapped from the group's store."""
    if _tnt_torch is None:
        raise RuntimeError(
            "tnt: the tnt torch.distributed backend is not built in this installation of "
            "Tarantella (%s); rebuild with torch's C++ headers and pybind11 present (Debian: "
            "apt-get install libtorch-dev pybind11-dev; CMake prints whether it built it), or "
            "use backend 'gloo'" % _IMPORT_ERROR)
    _check_torch_version(torch.__version__)
    # Errors and hang verdicts name the communicator: the default group is
    # created while torch.distributed is not initialized yet.
    name = "torch.default_pg" if not dist.is_initialized() else "torch.group%d" % size
    _tnt_torch.set_cuda_stream_getter(_current_cuda_stream)
    return _tnt_torch.create_process_group(store, rank, size, timeout, name)


def _current_cuda_stream(index):
    """The cudaStream_t of torch's current stream on cuda:<index>: the
    stream a CUDA tensor's collective is enqueued on. The backend asks only
    when that stream is not torch's default one (whose handle is 0)."""
    import torch
    return torch.cuda.current_stream(index).cuda_stream


def _allow_monitored_barrier():
    """torch's ``dist.monitored_barrier`` refuses every backend but gloo
    before it reaches the process group (torch 1.13 and 2.x alike), although
    the group's ``monitored_barrier`` method is what does the work. Ours
    implements it (_tnt_torch_monitored.cpp), so for a tnt group the
    function calls the group's method with torch's own defaults; for any
    other group it is torch's function, unchanged."""
    c10d = dist.distributed_c10d
    original = c10d.monitored_barrier
    if getattr(original, "_tnt_allows", False):
        return

    @functools.wraps(original)
    def monitored_barrier(group=c10d.GroupMember.WORLD, timeout=None, wait_all_ranks=False):
        if c10d._rank_not_in_group(group) or dist.get_backend(group) != BACKEND:
            return original(group, timeout, wait_all_ranks)
        group_to_use = c10d._get_default_group() if group is None else group
        return group_to_use.monitored_barrier(
            c10d.default_pg_timeout if timeout is None else timeout,
            wait_all_ranks=wait_all_ranks)

    monitored_barrier._tnt_allows = True
    c10d.monitored_barrier = monitored_barrier
    dist.monitored_barrier = monitored_barrier


def register():
    """Registers ``tnt`` with torch.distributed (and lets
    ``dist.monitored_barrier`` through for it); calling it again does
    nothing (torch refuses a second registration)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    # torch 2.x asks which devices a backend serves (and warns when it is
    # not told); torch 1.13's register_backend has no such argument.
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create)
    _allow_monitored_barrier()


if dist.is_available():
    register()
