"""The collectives' protocol, shared by every module that talks to other
ranks: libtnt's dtype and op codes and their names, and the agreement
check that compares each call's descriptor across ranks before data moves
(collectives.py explains it). A leaf module: it imports no sibling but the
extension and the errors, so collectives, cuda, objects and optimizers all
import it at the top.
"""
import struct

import numpy as np

from . import _tnt
from .errors import InvalidArgumentError, MismatchError

_OPS = {"sum": _tnt.SUM, "avg": _tnt.AVG, "average": _tnt.AVG, "mean": _tnt.AVG,
        "min": _tnt.MIN, "max": _tnt.MAX, "prod": _tnt.PROD}
_OP_NAMES = {_tnt.SUM: "sum", _tnt.AVG: "avg", _tnt.MIN: "min", _tnt.MAX: "max",
             _tnt.PROD: "prod"}

_NP_DTYPES = {np.dtype(np.float32): _tnt.FLOAT32, np.dtype(np.float64): _tnt.FLOAT64,
              np.dtype(np.float16): _tnt.FLOAT16, np.dtype(np.int32): _tnt.INT32,
              np.dtype(np.int64): _tnt.INT64}
_DTYPE_NAMES = {_tnt.FLOAT32: "float32", _tnt.FLOAT64: "float64", _tnt.FLOAT16: "float16",
                _tnt.BFLOAT16: "bfloat16", _tnt.INT32: "int32", _tnt.INT64: "int64"}
_torch_dtypes = None

# allgather_concat reduces nothing, so it also moves these numpy dtypes, as
# raw bytes (predictions can be bool or small integers). The codes are only
# for the agreement check, beyond libtnt's dtype codes.
_CONCAT_ONLY_DTYPES = {np.dtype(t): 100 + i for i, t in enumerate(
    (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64, np.complex64,
     np.complex128))}
_DTYPE_NAMES.update({code: dt.name for dt, code in _CONCAT_ONLY_DTYPES.items()})

# Descriptor kinds, so that ranks calling different collectives are caught.
_K_ALLREDUCE, _K_BROADCAST, _K_ALLGATHER, _K_ALLGATHER_CONCAT, _K_PARAMS = 1, 2, 3, 4, 5
_KIND_NAMES = {1: "allreduce", 2: "broadcast", 3: "allgather", 4: "allgather_concat",
               5: "broadcast_parameters"}
_MAX_DIMS = 5


def _torch_dtype_map():
    # torch is imported only once a tensor needs its dtype code.
    global _torch_dtypes
    if _torch_dtypes is None:
        import torch
        _torch_dtypes = {torch.float32: _tnt.FLOAT32, torch.float64: _tnt.FLOAT64,
                         torch.float16: _tnt.FLOAT16, torch.bfloat16: _tnt.BFLOAT16,
                         torch.int32: _tnt.INT32, torch.int64: _tnt.INT64}
    return _torch_dtypes


def _op_code(op):
    if isinstance(op, str):
        code = _OPS.get(op.lower())
        if code is not None:
            return code
    raise InvalidArgumentError("unknown reduction op %r; use one of 'sum', 'avg', 'min', "
                               "'max', 'prod'" % (op,))


def tensor_dtype_code(t, what="tensor"):
    """libtnt dtype code of a torch tensor; raises InvalidArgumentError."""
    code = _torch_dtype_map().get(t.dtype)
    if code is None:
        raise InvalidArgumentError(
            "%s: dtype %s is not supported; use float32, float64, float16, bfloat16, int32 "
            "or int64" % (what, t.dtype))
    return code


def _shape_code(shape):
    return hash(tuple(shape)) & 0x7FFFFFFFFFFFFFFF


_DESC = struct.Struct("<%dq" % (5 + _MAX_DIMS))


def _check_agree(kind, shape, code, arg, root=None):
    """One small allgather to verify every rank passes the same call. Raises
    MismatchError naming each rank that differs from the reference rank
    (``root`` for broadcast, otherwise rank 0)."""
    size = _tnt.size()
    if size == 1:
        return
    shape = tuple(int(s) for s in shape)
    dims = shape[:_MAX_DIMS] + (0,) * (_MAX_DIMS - min(len(shape), _MAX_DIMS))
    mine = _DESC.pack(kind, code, arg, len(shape), _shape_code(shape), *dims)
    everyone = bytearray(size * len(mine))
    _tnt.allgather(mine, everyone)
    # Fast path, plain bytes comparison: this runs before every collective.
    if everyone == mine * size:
        return
    rows = [_DESC.unpack_from(everyone, r * len(mine)) for r in range(size)]
    ref = 0 if root is None else root
    bad = [r for r in range(size) if rows[r] != rows[ref]]
    raise MismatchError("%s: ranks disagree on the call: %s; every rank must pass the same "
                        "shape and dtype%s (this is rank %d)"
                        % (_KIND_NAMES.get(kind, "collective"),
                           "; ".join(_describe(r, rows[r]) for r in [ref] + bad),
                           " and root" if kind == _K_BROADCAST else
                           " and op" if kind == _K_ALLREDUCE else "", _tnt.rank()))


def _describe(rank, row):
    kind, code, arg, ndim = (int(v) for v in row[:4])
    dims = [int(v) for v in row[5:5 + min(ndim, _MAX_DIMS)]]
    shape = "(" + ", ".join(map(str, dims)) + ("..." if ndim > _MAX_DIMS else "") + \
        ("," if ndim == 1 else "") + ")"
    s = "rank %d: %s %s %s" % (rank, _KIND_NAMES.get(kind, "?%d" % kind),
                               _DTYPE_NAMES.get(code, "?"), shape)
    if kind == _K_ALLREDUCE:
        s += " op=%s" % _OP_NAMES.get(arg, arg)
    elif kind == _K_BROADCAST:
        s += " root=%d" % arg
    return s
