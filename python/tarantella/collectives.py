"""Collectives on numpy arrays, torch tensors (CPU or CUDA) and Python scalars.

CUDA tensors go to libtnt's device path (tarantella.cuda): enqueued on the
tensor's current stream, without a copy through Python; see docs/gpu.md.

Every function is collective: all ranks call it in the same order with the
same shape and dtype. Out-of-place versions return a new object of the type
given (numpy array, torch tensor, or Python scalar); the ``*_`` versions work
in place on the caller's memory (zero-copy) and return it.

Before moving data, each call compares a small descriptor (kind of call,
dtype, op or root, shape) across ranks with one 80-byte allgather, so a rank
passing a different shape gets a :class:`MismatchError` that names the ranks
instead of corrupted memory or a hang. Pass ``check=False`` to skip it when a
loop's shapes are known to agree; with one rank there is nothing to check.
"""
import sys

import numpy as np

from . import _tnt
from ._protocol import (
    _NP_DTYPES, _CONCAT_ONLY_DTYPES, _K_ALLREDUCE, _K_BROADCAST, _K_ALLGATHER,
    _K_ALLGATHER_CONCAT, _op_code, tensor_dtype_code, _check_agree)
from .errors import InvalidArgumentError

__all__ = ["allreduce", "allreduce_", "broadcast", "broadcast_", "allgather",
           "allgather_concat", "barrier"]


def _torch():
    # torch is optional for the collectives: only used when given a tensor.
    return sys.modules.get("torch")


def _is_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def _is_cuda(x):
    # CUDA tensors take the device path (cuda.py); imported only then.
    return _is_tensor(x) and x.device.type == "cuda"


def _cuda():
    from . import cuda
    return cuda


def tensor_view(t, what="tensor"):
    """A flat numpy view sharing memory with the contiguous CPU tensor ``t``
    (bfloat16 is viewed as int16, which numpy lacks), and its libtnt dtype code.
    Raises InvalidArgumentError for other devices, dtypes or strided tensors."""
    if t.device.type != "cpu":
        raise InvalidArgumentError("%s: tensor is on %s; tarantella reduces CPU tensors "
                                   "(move it with .cpu())" % (what, t.device))
    code = tensor_dtype_code(t, what)
    if not t.is_contiguous():
        raise InvalidArgumentError("%s: tensor is not contiguous (strides %s); call "
                                   ".contiguous() first" % (what, tuple(t.stride())))
    d = t.detach()
    if code == _tnt.BFLOAT16:
        import torch
        d = d.view(torch.int16)
    return d.numpy().reshape(-1), code


def _array_view(a, what):
    code = _NP_DTYPES.get(a.dtype)
    if code is None:
        raise InvalidArgumentError(
            "%s: dtype %s is not supported; use float32, float64, float16, int32 or int64"
            % (what, a.dtype))
    if not a.flags.c_contiguous:
        raise InvalidArgumentError("%s: array is not C-contiguous; use np.ascontiguousarray"
                                   % what)
    return a.reshape(-1), code


def _view(x, what, writable):
    """(flat numpy view, dtype code, kind) for a tensor or an array."""
    if _is_tensor(x):
        v, code = tensor_view(x, what)
        return v, code, "torch"
    if isinstance(x, np.ndarray):
        v, code = _array_view(x, what)
        if writable and not x.flags.writeable:
            raise InvalidArgumentError("%s: array is read-only" % what)
        return v, code, "numpy"
    raise InvalidArgumentError("%s: expected a numpy array or a torch CPU tensor, got %s"
                               % (what, type(x).__name__))


def _scalar_in(x):
    if isinstance(x, bool) or not isinstance(x, (int, float, np.number)):
        return None
    return np.array(x, dtype=np.float64 if isinstance(x, (float, np.floating)) else np.int64)


def _new_like(x):
    if _is_tensor(x):
        import torch
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty_like(x, order="C")


def allreduce_(x, op="sum", check=True):
    """Reduces ``x`` over all ranks in place (zero-copy) and returns ``x``.
    ``op``: 'sum', 'avg' (sum / number of ranks; integer division for ints),
    'min', 'max', 'prod'. Every rank gets bitwise-identical results."""
    code_op = _op_code(op)
    if _is_cuda(x):
        return _cuda().allreduce_(x, code_op, check)
    v, code, _ = _view(x, "allreduce_", writable=True)
    if check:
        _check_agree(_K_ALLREDUCE, x.shape, code, code_op)
    _tnt.allreduce(v, None, code, code_op)
    return x


def allreduce(x, op="sum", check=True):
    """Returns the reduction of ``x`` over all ranks as a new object of the
    same type (numpy array, torch tensor, or Python int/float); ``x`` is not
    modified. See :func:`allreduce_` for ``op``."""
    s = _scalar_in(x)
    if s is not None:
        code_op = _op_code(op)
        out = np.empty_like(s)
        v, code = _array_view(s, "allreduce")
        if check:
            _check_agree(_K_ALLREDUCE, (), code, code_op)
        _tnt.allreduce(v, out.reshape(-1), code, code_op)
        return out.item()
    code_op = _op_code(op)
    if _is_cuda(x):
        return _cuda().allreduce(x, code_op, check)
    v, code, _ = _view(x, "allreduce", writable=False)
    if check:
        _check_agree(_K_ALLREDUCE, x.shape, code, code_op)
    out = _new_like(x)
    ov, _, _ = _view(out, "allreduce", writable=True)
    _tnt.allreduce(v, ov, code, code_op)
    return out


def _check_root(root):
    size = _tnt.size()
    if not isinstance(root, int) or not 0 <= root < size:
        raise InvalidArgumentError("broadcast: root %r is not a rank (0..%d)" % (root, size - 1))


def broadcast_(x, root=0, check=True):
    """Overwrites ``x`` on every rank with root's ``x`` (in place); returns ``x``."""
    _check_root(root)
    if _is_cuda(x):
        return _cuda().broadcast_(x, root, check)
    v, code, _ = _view(x, "broadcast_", writable=True)
    if check:
        _check_agree(_K_BROADCAST, x.shape, code, root, root=root)
    _tnt.broadcast(v, root)
    return x


def broadcast(x, root=0, check=True):
    """Returns root's ``x`` on every rank as a new object of the type given
    (numpy array, torch tensor, or Python int/float)."""
    _check_root(root)
    s = _scalar_in(x)
    if s is not None:
        v, code = _array_view(s, "broadcast")
        if check:
            _check_agree(_K_BROADCAST, (), code, root, root=root)
        _tnt.broadcast(v, root)
        return s.item()
    if not _is_cuda(x):
        _view(x, "broadcast", writable=False)
    out = _new_like(x)
    out[...] = x
    return broadcast_(out, root, check)


def allgather(x, check=True):
    """Gathers ``x`` from every rank: the result has shape ``(size, *x.shape)``
    and row r holds rank r's ``x``. Same type as given (array or tensor)."""
    s = _scalar_in(x)
    if s is not None:
        x = s
    if _is_cuda(x):
        return _cuda().allgather(x, check)
    v, code, kind = _view(x, "allgather", writable=False)
    if check:
        _check_agree(_K_ALLGATHER, x.shape, code, 0)
    size = _tnt.size()
    if kind == "torch":
        import torch
        out = torch.empty((size,) + tuple(x.shape), dtype=x.dtype)
    else:
        out = np.empty((size,) + tuple(x.shape), dtype=x.dtype)
    ov, _, _ = _view(out, "allgather", writable=True)
    _tnt.allgather(v, ov)
    return out


def allgather_concat(x):
    """Concatenates every rank's ``x`` along the first dimension, in rank
    order; the first dimension may differ between ranks (e.g. predictions of
    uneven shards), the other dimensions and the dtype must agree. Besides
    the dtypes of the other collectives, numpy arrays of bool, int8, uint8,
    int16, uint16, uint32, uint64, complex64 and complex128 work too."""
    if getattr(x, "ndim", 0) < 1:
        raise InvalidArgumentError("allgather_concat: need at least one dimension")
    if _is_cuda(x):
        # Ragged rows (predictions, metrics) are small: staged through the
        # host rather than padded on the device.
        return allgather_concat(x.cpu()).to(x.device)
    if isinstance(x, np.ndarray) and x.dtype in _CONCAT_ONLY_DTYPES:
        if not x.flags.c_contiguous:
            raise InvalidArgumentError("allgather_concat: array is not C-contiguous; use "
                                       "np.ascontiguousarray")
        v, code, kind = x.reshape(-1), _CONCAT_ONLY_DTYPES[x.dtype], "numpy"
    else:
        v, code, kind = _view(x, "allgather_concat", writable=False)
    size = _tnt.size()
    rest = tuple(int(d) for d in x.shape[1:])
    # Row lengths first; the agreement check covers dtype and trailing dims.
    _check_agree(_K_ALLGATHER_CONCAT, (0,) + rest, code, 0)
    lens = np.empty(size, dtype=np.int64)
    _tnt.allgather(np.array([x.shape[0]], dtype=np.int64), lens)
    longest = int(lens.max())
    row = int(np.prod(rest)) if rest else 1
    itemsize = v.itemsize
    padded = np.zeros(longest * row * itemsize, dtype=np.uint8)
    padded[:v.size * itemsize] = v.view(np.uint8)
    gathered = np.empty(size * padded.size, dtype=np.uint8).reshape(size, -1)
    _tnt.allgather(padded, gathered)
    parts = [gathered[r, :int(lens[r]) * row * itemsize] for r in range(size)]
    flat = np.concatenate(parts)
    total = int(lens.sum())
    if kind == "torch":
        import torch
        out = torch.empty((total,) + rest, dtype=x.dtype)
        ov, _ = tensor_view(out, "allgather_concat")
        ov.view(np.uint8)[:] = flat
        return out
    return flat.view(x.dtype).reshape((total,) + rest).copy()


def barrier():
    """Returns when every rank has called barrier()."""
    _tnt.barrier()
