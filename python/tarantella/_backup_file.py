"""The backup file: the whole training state (model, optimizer, every
rank's RNG states, the caller's extras) written atomically by the master
and read back on every rank (preemption.py says when, docs/preemption.md
how to use it).

A backup is plain data (_plain_data.py) loaded with torch's weights-only
unpickler, so a backup file, or RNG states a peer sends, cannot run code;
everything read from it is checked before use, and a damaged file raises
TarantellaError naming the file.
"""

import glob
import io
import os
import pickle
import random
import zipfile

import numpy as np

from . import _plain_data, saving
from ._comm import broadcast_bytes, gather_bytes, rank as _rank, size as _size
from .errors import TarantellaError

_BACKUP_FORMAT = "tarantella.backup"
# 2: plain data only (_plain_data.py), read with the weights-only unpickler.
# 1 (earlier 0.1.0 builds): RNG states as pickles, refused on load.
_BACKUP_VERSION = 2


def _rng_state():
    import torch
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
             "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _check_numpy_state(state):
    """Raises ValueError unless ``state`` has the form np.random.get_state()
    returns: ("MT19937", 624 integer keys, pos, has_gauss, cached_gaussian),
    the last two optional. numpy's legacy RandomState.set_state indexes its
    argument before checking it and trusts pos: an empty tuple, a short one
    or pos = 2**31 - 1 from a damaged backup crashed the interpreter with a
    segfault (found by tests/fuzz/fuzz_backup.py; numpy 1.24)."""
    if (type(state) not in (tuple, list) or len(state) not in (3, 5)
            or not isinstance(state[0], str) or state[0] != "MT19937"
            or not isinstance(state[1], np.ndarray) or state[1].shape != (624,)
            or state[1].dtype.kind not in "iu"
            or type(state[2]) is not int or not 0 <= state[2] <= 624):
        raise ValueError("the numpy RNG state is not ('MT19937', 624 keys, a position "
                         "0..624, ...)")


def _set_rng_state(state):
    import torch
    torch.set_rng_state(state["torch"])
    _check_numpy_state(state["numpy"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _module_of(model):
    return getattr(model, "module", model)


def _optimizer_state(optimizer):
    if optimizer is None:
        return None
    inner = getattr(optimizer, "optimizer", None)
    target = optimizer if hasattr(optimizer, "state_dict") else inner
    return target.state_dict()


def _load_optimizer_state(optimizer, state):
    if optimizer is None or state is None:
        return
    target = optimizer if hasattr(optimizer, "load_state_dict") else optimizer.optimizer
    target.load_state_dict(state)


def _master_has_file(path):
    exists = os.path.isfile(path) if _rank() == 0 else False
    return broadcast_bytes(b"1" if exists else b"0") == b"1"


def _gather_rng_states():
    """Every rank's RNG states, in rank order, on every rank. They travel
    as plain data and are read with the weights-only unpickler: a peer's
    bytes cannot run code here."""
    states = []
    for r, data in enumerate(gather_bytes(_plain_data.dumps(_rng_state(), "RNG state"))):
        try:
            states.append(_plain_data.loads(data))
        except Exception as e:
            raise TarantellaError("backup: rank %d sent RNG states that are not plain data "
                                  "(%s); do all ranks run the same tarantella version?"
                                  % (r, e)) from None
    return states


def _write_backup(path, content):
    """Gathers the RNG states (collective) into ``content`` and writes it
    with the collective atomic save. Every rank encodes ``content`` first,
    so a value that cannot be stored raises on every rank alike before
    anyone writes."""
    import torch
    content["rng"] = _gather_rng_states()
    content["format"] = _BACKUP_FORMAT
    content["version"] = _BACKUP_VERSION
    content["size"] = _size()
    plain = _plain_data.encode(content, "backup")
    saving.collective_save(path, lambda f: torch.save(plain, f), what="backup")


# What every backup holds, and what a fit backup holds besides.
_KEYS = ("kind", "epoch", "step", "model", "optimizer", "rng", "size")
_FIT_KEYS = ("shuffle_seed", "meta", "callbacks", "stats")
# The types the readers rely on, for the keys that have one.
_KEY_TYPES = (("kind", str), ("rng", list), ("model", dict), ("meta", dict),
              ("callbacks", dict))


def _load_backup(path, data):
    """The backup in ``data`` (the bytes of ``path``), read without running
    anything from it; every failure is one TarantellaError that names the
    file and says what to do."""
    # One backup per file, replaced atomically: when it is damaged,
    # no older one is left to go back to (temp files are unfinished writes).
    no_older = ("tarantella keeps one backup in this file and replaces it atomically, so "
                "there is no older backup to resume from: delete %s to start training from "
                "the beginning" % path)
    try:
        is_zip = zipfile.is_zipfile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        # is_zipfile raises for some damaged end records ("zipfiles that
        # span multiple disks are not supported"; found by
        # tests/fuzz/fuzz_backup.py) instead of returning False.
        is_zip = False
    if not is_zip:
        raise TarantellaError("backup %s is truncated or corrupted (%d bytes, not a complete "
                              "torch.save archive); %s" % (path, len(data), no_older))
    try:
        content = _plain_data.loads(data)
    except pickle.UnpicklingError as e:
        detail = str(e).rpartition("WeightsUnpickler error: ")[2]
        raise TarantellaError(
            "backup %s holds Python objects other than tensors, numbers, strings, lists and "
            "dicts (%s); unpickling them could run code, so the file was refused and nothing "
            "in it was run. A backup written by an earlier tarantella (backup format 1) keeps "
            "its RNG states as pickles: resume it with the tarantella version that "
            "wrote it, or delete %s to start fresh. Any other such file was not written by "
            "tarantella: delete it or point backup_dir elsewhere" % (path, detail, path)) from None
    except Exception as e:
        raise TarantellaError("backup %s is truncated or corrupted (%s); %s"
                              % (path, e, no_older)) from None
    # Types first, then values: a tensor compared with == gives a tensor,
    # and one of several elements has no truth value (torch's RuntimeError
    # "Boolean value of Tensor ... is ambiguous" escaped from here for a
    # backup whose version was such a tensor; found by
    # tests/fuzz/fuzz_backup.py).
    if (not isinstance(content, dict) or type(content.get("format")) is not str
            or content["format"] != _BACKUP_FORMAT):
        raise TarantellaError("%s is not a tarantella backup; delete it or point backup_dir "
                              "elsewhere" % (path,))
    if type(content.get("version")) is not int or content["version"] != _BACKUP_VERSION:
        raise TarantellaError("backup %s has format version %r, this tarantella reads %d; "
                              "resume it with the tarantella version that wrote it, or delete "
                              "it to start fresh" % (path, content.get("version"),
                                                     _BACKUP_VERSION))
    missing = [k for k in _KEYS + (_FIT_KEYS if content.get("kind") == "fit" else ())
               if k not in content]
    if missing:
        raise TarantellaError("backup %s is corrupted (it lacks %s); %s"
                              % (path, ", ".join(missing), no_older))
    # What the readers index or take the length of (the RNG states once
    # were a tensor here, whose truth value raised RuntimeError).
    wrong = [k for k, types in _KEY_TYPES if k in content and not isinstance(content[k], types)]
    if wrong:
        raise TarantellaError("backup %s is corrupted (wrong type of %s); %s"
                              % (path, ", ".join(wrong), no_older))
    return content


def _read_backup(path):
    """The backup dict at ``path`` (read by the master, on every rank), or
    None when the master sees no file there."""
    if not _master_has_file(path):
        return None
    return _load_backup(path, saving.collective_read(path, what="backup"))


def _restore_rng(content, path):
    """Rank r takes the RNG states of rank r of the run that wrote the
    backup (of rank r mod its size when that run had fewer ranks)."""
    states = content["rng"]
    if not states:
        return
    try:
        _set_rng_state(states[_rank() % len(states)])
    # OverflowError: random.setstate on a key outside 0..2**32-1 (found by
    # tests/fuzz/fuzz_backup.py); IndexError: a state tuple too short.
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, RuntimeError) as e:
        raise TarantellaError("backup %s is corrupted: its RNG states cannot be restored (%s); "
                              "delete it to start training from the beginning"
                              % (path, e)) from None


def _remove_stale_temps(path):
    # A writer that died mid-save leaves its temp file (saving.py names it
    # .<name>.<random>.tmp); the backup itself is intact.
    if _rank() != 0:
        return
    d, name = os.path.split(os.path.abspath(path))
    for tmp in glob.glob(os.path.join(glob.escape(d), "." + glob.escape(name) + ".*.tmp")):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def save_training_state(path, model, optimizer=None, epoch=0, step=0, extra=None):
    """Collective: backs up weights and buffers (``model`` is a tnt.Model or
    a torch module), the optimizer state, ``epoch``, ``step``, every rank's
    RNG states (torch, numpy, Python ``random``; CUDA when in use) and
    ``extra`` (e.g. the sampler seed) to ``path``. ``extra`` is plain data:
    tensors, numpy arrays and numbers, Python numbers, strings, None, lists,
    tuples and dicts (numpy scalars come back as Python numbers); anything
    else raises TypeError on every rank before anything is written, since
    loading it would mean unpickling. The master writes atomically; all
    ranks raise if the write failed, and the previous file is then
    unchanged."""
    module = _module_of(model)
    content = {
        "kind": "custom",
        "epoch": int(epoch), "step": int(step),
        "model": {k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
        "optimizer": _optimizer_state(optimizer),
        "extra": extra,
    }
    _write_backup(os.fspath(path), content)


def load_training_state(path, model, optimizer=None, restore_rng=True):
    """Collective: when ``path`` exists (on the master), restores the model,
    the optimizer and (``restore_rng``) this rank's RNG states written by
    :func:`save_training_state`, and returns ``{"epoch", "step", "extra",
    "size"}``; returns None when there is no backup. Any rank count may
    load it (rank r takes the RNG state of saved rank r mod saved size)."""
    path = os.fspath(path)
    _remove_stale_temps(path)
    content = _read_backup(path)
    if content is None:
        return None
    _module_of(model).load_state_dict(content["model"])
    _load_optimizer_state(optimizer, content.get("optimizer"))
    if restore_rng:
        _restore_rng(content, path)
    return {"epoch": content.get("epoch", 0), "step": content.get("step", 0),
            "extra": content.get("extra"), "size": content.get("size")}


# --------------------------------------------------------------------------
