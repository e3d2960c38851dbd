"""torch.cuda.set_device with a device this rank cannot see says what to do.

Horovod scripts pick their GPU with ``torch.cuda.set_device(hvd.local_rank())``,
which ports literally to ``torch.cuda.set_device(tnt.get_local_rank())``. The
launcher and ``srun --tarantella`` give each rank only its own GPU through
CUDA_VISIBLE_DEVICES, so on local rank 1 and up that index does not exist and
torch fails with "CUDA error: invalid device ordinal", which names neither the
cause nor the fix (docs/porting.md, issue 25).

``import tarantella`` therefore wraps ``torch.cuda.set_device``: an index at or
beyond ``torch.cuda.device_count()``, while at least one device is visible,
raises :class:`~tarantella.errors.DeviceIndexError` naming
``tnt.cuda.local_device()``. Every other call goes to torch's own function
unchanged, so the wrapper changes behaviour only where torch would fail
anyway. With no device visible (a CPU-only torch, a CPU node) torch's own
error stands: there is no GPU to point at.

The package does not import torch itself (scripts that only use the rank API
do not pay for it), so when torch is not imported yet the wrapper is put in
place by a one-shot import hook right after ``torch.cuda`` has loaded.
"""
import functools
import importlib.abc
import importlib.machinery
import os
import sys

from .errors import DeviceIndexError

_WRAPPED = "_tnt_device_guard"


def _message(index, count, local_rank):
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = "cuda:0" if count == 1 else "cuda:0 .. cuda:%d" % (count - 1)
    where = (" (CUDA_VISIBLE_DEVICES=%s)" % visible) if visible is not None else ""
    text = ("torch.cuda.set_device(%d): this process sees %d CUDA device%s, %s%s, so cuda:%d "
            "does not exist. " % (index, count, "" if count == 1 else "s", seen, where, index))
    if local_rank is not None and index == local_rank:
        text += ("The tarantella launcher and srun --tarantella give each rank its own GPU "
                 "through CUDA_VISIBLE_DEVICES, so the local rank (%d) is not a device index. "
                 % local_rank)
    return text + "Use torch.cuda.set_device(tnt.cuda.local_device()) (docs/gpu.md)."


def _local_rank():
    try:
        from . import _tnt
        return _tnt.local_rank() if _tnt.is_initialized() else None
    except Exception:  # only for the message; never hide the real error
        return None


def _wrap(cuda):
    original = cuda.set_device
    if getattr(original, _WRAPPED, False):
        return

    @functools.wraps(original)
    def set_device(device):
        # torch's own conversion (int, "cuda:1", torch.device); negative
        # indices are torch's no-op and pass through.
        index = cuda._utils._get_device_index(device)
        if index >= 0:
            count = cuda.device_count()
            if 0 < count <= index:
                raise DeviceIndexError(_message(index, count, _local_rank()))
        return original(device)

    setattr(set_device, _WRAPPED, True)
    cuda.set_device = set_device


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when torch.cuda is about to load, it lets the
    path finder find it and wraps set_device once the module has run."""

    def find_spec(self, name, path, target=None):
        if name != "torch.cuda":
            return None
        _remove_hook()
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module):
            exec_module(module)
            _wrap(module)

        spec.loader.exec_module = exec_and_wrap
        return spec


_hook = None


def _remove_hook():
    global _hook
    if _hook is not None and _hook in sys.meta_path:
        sys.meta_path.remove(_hook)
    _hook = None


def install():
    """Wraps torch.cuda.set_device now when torch.cuda is loaded, else as
    soon as it is. Idempotent."""
    global _hook
    cuda = sys.modules.get("torch.cuda")
    if cuda is not None and hasattr(cuda, "set_device"):
        _wrap(cuda)
    elif _hook is None:
        _hook = _WrapOnImport()
        sys.meta_path.insert(0, _hook)
