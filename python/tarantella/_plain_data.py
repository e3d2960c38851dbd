"""Training state as plain data, which ``torch.load(weights_only=True)``
reads back without running anything from the file.

A backup (preemption.py) holds tensors, Python and numpy numbers, strings,
arrays, lists and dicts. Unpickling arbitrary objects can run arbitrary code
(any ``__reduce__``), so backups and the RNG states that peers send are
loaded with torch's weights-only unpickler. That unpickler accepts tensors,
ints, strings, bools, None, lists, tuples and dicts; before torch 2.0 not
even floats. :func:`encode` therefore turns

* a float into the integer of its IEEE-754 bits, and a numpy array into
  (dtype string, shape, raw bytes as a uint8 tensor), each in a one-key
  dict whose key names the conversion, which :func:`decode` undoes
  exactly;
* a numpy scalar into the Python number it holds, a dict subclass into a
  dict;

and refuses everything else with a TypeError that says where it sits, so a
state that could not be loaded back safely is never written.
"""
import io
import struct

import numpy as np
import torch

__all__ = ["encode", "decode", "dumps", "loads"]

_FLOAT = "__tnt_float__"
_NDARRAY = "__tnt_ndarray__"
_TAGS = (_FLOAT, _NDARRAY)


def _float_bits(x):
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _bits_float(bits):
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def encode(obj, where):
    """``obj`` as what the weights-only unpickler reads; ``where`` names it
    in the TypeError raised for a value that has no plain form."""
    if obj is None or isinstance(obj, (bool, np.bool_)):
        return obj if obj is None else bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return {_FLOAT: _float_bits(float(obj))}
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufc":
        raw = np.frombuffer(np.ascontiguousarray(obj).tobytes(), dtype=np.uint8)
        return {_NDARRAY: (obj.dtype.str, list(obj.shape), torch.from_numpy(raw.copy()))}
    if type(obj) in (list, tuple):
        items = [encode(v, "%s[%d]" % (where, i)) for i, v in enumerate(obj)]
        return items if type(obj) is list else tuple(items)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            key = encode(k, "a key of %s" % where)
            if key in _TAGS or not (key is None or isinstance(key, (str, int))):
                raise TypeError("%s: the key %r cannot be stored in a backup; use strings or "
                                "integers as keys" % (where, k))
            out[key] = encode(v, "%s[%r]" % (where, k))
        return out
    raise TypeError(
        "%s: a value of type %s cannot be stored in a backup. A backup holds tensors, numpy arrays and "
        "numbers, Python numbers, strings, None, lists, tuples and dicts only, because "
        "loading other objects means unpickling them, which can run code from the file; "
        "convert it to those (e.g. a dict of numbers)" % (where, type(obj).__name__))


def decode(obj):
    """The value :func:`encode` was given. Raises ValueError for an encoded
    float or array that is malformed."""
    if isinstance(obj, dict):
        if len(obj) == 1 and next(iter(obj)) in _TAGS:
            return _decode_tagged(*next(iter(obj.items())))
        return {k: decode(v) for k, v in obj.items()}
    if type(obj) is list:
        return [decode(v) for v in obj]
    if type(obj) is tuple:
        return tuple(decode(v) for v in obj)
    return obj


def _decode_tagged(tag, value):
    if tag == _FLOAT:
        if type(value) is not int or not -2**63 <= value < 2**63:
            raise ValueError("an encoded float is not a 64-bit integer: %r" % (value,))
        return _bits_float(value)
    try:
        dtype, shape, raw = value
        dtype = np.dtype(dtype)
        shape = tuple(shape)
    except (TypeError, ValueError):
        raise ValueError("an encoded array is not (dtype, shape, bytes)") from None
    if (dtype.kind not in "biufc" or not all(type(d) is int and d >= 0 for d in shape)
            or not isinstance(raw, torch.Tensor) or raw.dtype != torch.uint8
            or raw.numel() != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize):
        raise ValueError("an encoded array's dtype %s, shape %s and %s bytes do not agree"
                         % (dtype, shape, getattr(raw, "numel", lambda: "?")()))
    # A writable view of the loaded bytes, no copy.
    return raw.contiguous().numpy().view(dtype).reshape(shape)


def dumps(obj, where):
    """``torch.save`` bytes of :func:`encode` (``obj``)."""
    buf = io.BytesIO()
    torch.save(encode(obj, where), buf)
    return buf.getvalue()


def loads(data):
    """The object :func:`dumps` wrote, read with the weights-only
    unpickler. A file with anything else in it raises
    ``pickle.UnpicklingError`` before any of it runs; a truncated one
    raises what torch raises for it (RuntimeError); a malformed encoding
    ValueError."""
    return decode(torch.load(io.BytesIO(data), map_location="cpu", weights_only=True))
