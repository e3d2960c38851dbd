"""Collective file I/O for tnt.Model and tnt.models: one writer, an atomic
write, and every rank told the outcome.

Saving: the master (or every rank, on request) writes to a temp file next to
the target, fsyncs it and renames it over the target, while the others wait;
if a writer fails, every rank raises. Loading: the master reads the file and
broadcasts the bytes, so the other ranks need not see it.
"""
import os
import tempfile

from ._comm import _pkg, any_rank, broadcast_bytes, rank
from .errors import TarantellaError

__all__ = ["collective_save", "collective_read"]


def _atomic_write(path, write):
    """Writes through ``write(fileobj)`` into a temp file next to ``path``,
    fsyncs it, renames it over ``path`` and fsyncs the directory. A crash at
    any point leaves either the old file or the complete new one."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename stands
    finally:
        os.close(dfd)


def collective_save(path, write, all_devices=False, what="save"):
    """Collective save: the master (or every rank with ``all_devices``)
    writes ``path`` atomically while the others wait; afterwards every rank
    knows whether some writer failed, and all of them raise if so. Only the
    writers touch the file system and the one collective is issued by every
    rank, so no rank can be left waiting for another."""
    writer = all_devices or rank() == 0
    error = None
    # Every rank: the others wait for the writer as long as the file system
    # takes, which the hang doctor must not take for a hang.
    with _pkg().long_wait():
        if writer:
            try:
                _atomic_write(path, write)
            except Exception as e:  # reported below on every rank
                error = e
        failed = any_rank(error is not None)
    if error is not None:
        raise error
    if failed:
        raise TarantellaError("%s(%r): the writing rank failed (see its error message); "
                              "the previous file, if any, is unchanged" % (what, os.fspath(path)))


def collective_read(path, what="load"):
    """Bytes of ``path`` as read by the master rank, on every rank (other
    ranks need not see the file). Every rank raises if the master cannot
    read it."""
    data, error = None, None
    if rank() == 0:
        try:
            with open(os.fspath(path), "rb") as f:
                data = f.read()
        except OSError as e:
            error = e
    data = broadcast_bytes(data)
    if error is not None:
        raise error
    if data is None:
        raise TarantellaError("%s(%r): the master rank could not read the file (see its error "
                              "message)" % (what, os.fspath(path)))
    return data
