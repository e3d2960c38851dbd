"""Preemption-safe training: signal handling, a collective "stop now?"
check at step boundaries, and atomic backups of the whole training state.

How a preemption goes
---------------------
1. A batch system sends SIGUSR1 (``sbatch --signal``) or SIGTERM (Slurm
   preemption, ``scancel``) to the ranks. The handler installed here only
   records the signal number (it does no I/O and takes no lock), so it is
   safe wherever the signal lands.
2. At the next step boundary every rank calls :func:`requested`, one 4-byte
   MAX allreduce: a signal seen by any rank is seen by all, at the same step.
3. The training state is backed up collectively: each rank's RNG states are
   gathered, the master writes one file next to the target (temp file,
   fsync, rename, fsync of the directory), and every rank learns whether
   the write succeeded. A crash or a second signal at any point leaves the
   previous backup or the complete new one, never a torn file. A backup is
   plain data (_plain_data.py) and is loaded with torch's weights-only
   unpickler, so a backup file, or RNG states a peer sends, cannot run code
   (the file format: _backup_file.py).
4. Every rank raises :class:`Preempted`, a ``SystemExit`` with status
   :data:`EXIT_CODE` (75, ``EX_TEMPFAIL``: "try again"), which batch scripts
   use to requeue; the next run resumes from the backup.

``tnt.callbacks.BackupAndRestore`` drives all of this inside
``tnt.Model.fit``; custom training loops use :func:`install`,
:func:`requested`, :func:`save_training_state`, :func:`load_training_state`
and :func:`exit_preempted` (see docs/preemption.md).
"""
import os
import signal
import sys
import threading

import numpy as np

from ._backup_file import (_load_optimizer_state, _optimizer_state, _read_backup,
                           _remove_stale_temps, _restore_rng, _write_backup,
                           load_training_state, save_training_state)
from .callback import Callback
from ._comm import rank as _rank, size as _size, sum_over_ranks
from .errors import InvalidArgumentError, TarantellaError

__all__ = ["EXIT_CODE", "Preempted", "install", "uninstall", "installed_signals",
           "signal_received", "requested", "save_training_state", "load_training_state",
           "exit_preempted", "default_signals"]

#: Exit status of a process that stopped because of a preemption signal
#: after backing up its training state (sysexits.h EX_TEMPFAIL).
EXIT_CODE = 75

_DEFAULT_SIGNALS = ("SIGUSR1", "SIGTERM")

# Written by the signal handler, read at step boundaries. A plain int store
# is all the handler does.
_received = 0
# signum -> the handler that was there before install().
_previous = {}


class Preempted(SystemExit):
    """Raised on every rank after a preemption backup; exits the process
    with :data:`EXIT_CODE` unless caught. ``signal`` is the signal number,
    ``epoch`` and ``step`` say where training will resume."""

    def __init__(self, signum=0, epoch=None, step=None):
        super().__init__(EXIT_CODE)
        self.signal = signum
        self.epoch = epoch
        self.step = step


# --------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------

def _parse_signal(item):
    if isinstance(item, signal.Signals):
        return int(item)
    if isinstance(item, int):
        if item <= 0 or item >= signal.NSIG:
            raise InvalidArgumentError("preemption: %d is not a signal number" % item)
        return item
    text = str(item).strip().upper()
    if text.isdigit():
        return _parse_signal(int(text))
    name = text if text.startswith("SIG") else "SIG" + text
    sig = getattr(signal.Signals, name, None) if name in signal.Signals.__members__ else None
    if sig is None:
        raise InvalidArgumentError("preemption: unknown signal %r; use names such as USR1, "
                                   "USR2, TERM, INT or numbers" % (item,))
    if sig in (signal.SIGKILL, signal.SIGSTOP):
        raise InvalidArgumentError("preemption: %s cannot be caught" % sig.name)
    return int(sig)


def default_signals():
    """The signals that mean "back up and exit": ``TNT_PREEMPT_SIGNALS``
    (comma-separated names or numbers, ``none`` for no signal), else
    SIGUSR1 and SIGTERM."""
    value = os.environ.get("TNT_PREEMPT_SIGNALS", "").strip()
    if not value:
        return tuple(_parse_signal(s) for s in _DEFAULT_SIGNALS)
    if value.lower() == "none":
        return ()
    try:
        return tuple(_parse_signal(s) for s in value.split(",") if s.strip())
    except InvalidArgumentError as e:
        raise InvalidArgumentError("TNT_PREEMPT_SIGNALS=%r: %s" % (value, e)) from None


def _handler(signum, frame):
    # Only a store: no I/O, no lock, no allocation worth mentioning. The
    # first signal is the one reported; later ones change nothing.
    global _received
    if not _received:
        _received = signum


def install(signals=None):
    """Installs the preemption handler for ``signals`` (names or numbers;
    default :func:`default_signals`) and returns the tuple installed. Must
    run in the main thread. A signal then no longer ends the process: it
    is recorded, and :func:`requested` reports it at the next step
    boundary. Idempotent; :func:`uninstall` puts the old handlers back."""
    sigs = default_signals() if signals is None else tuple(_parse_signal(s) for s in signals)
    if threading.current_thread() is not threading.main_thread():
        raise TarantellaError("preemption.install: signal handlers can only be installed from "
                              "the main thread; call it (or fit) there")
    for sig in sigs:
        if sig in _previous:
            continue
        _previous[sig] = signal.signal(sig, _handler)
    return sigs


def uninstall():
    """Restores the handlers that were there before :func:`install`."""
    for sig, old in list(_previous.items()):
        signal.signal(sig, old if old is not None else signal.SIG_DFL)
        del _previous[sig]


def installed_signals():
    """The signals currently handled by this module."""
    return tuple(sorted(_previous))


def signal_received():
    """The number of the last preemption signal this rank received, or 0.
    Local: no communication (use :func:`requested` to decide)."""
    return _received


def requested():
    """Collective: True on every rank when any rank has received a
    preemption signal. Call it on every rank at the same step boundary; the
    cost is one 4-byte allreduce."""
    return _agree() != 0


def _agree():
    """Collective: the highest signal number any rank received (0: none).
    Every rank then reports that one signal."""
    global _received
    if _size() == 1:
        return _received
    import tarantella
    v = tarantella.allreduce(np.array([_received], dtype=np.int32), op="max", check=False)
    agreed = int(v[0])
    # A signal whose handler ran while the allreduce waited (the usual
    # place) is not in v: storing v's 0 over it would lose it. It stays, and
    # stops every rank at the next boundary; this one answers as all do.
    if agreed:
        _received = agreed
    return agreed


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


def exit_preempted(epoch=None, step=None, message=None):
    """Raises :class:`Preempted` (exit status :data:`EXIT_CODE`) on every
    rank after the master prints one line saying why. Call it after a
    successful :func:`save_training_state`."""
    signum = _received
    if _rank() == 0:
        where = ""
        if epoch is not None:
            where = " at epoch %d" % (epoch + 1) + (", step %d" % step if step else "")
        print("tarantella: %s%s; exiting with status %d so that the job can be requeued"
              % (message or "preempted by %s" % _signal_name(signum), where, EXIT_CODE),
              file=sys.stderr, flush=True)
    raise Preempted(signum, epoch, step)


# --------------------------------------------------------------------------
# tnt.Model.fit with a BackupAndRestore callback
# --------------------------------------------------------------------------

def _callback_key_states(callbacks, collect):
    """[(key, callback)] for callbacks with state; the key is the class name
    and its occurrence, which is stable when the same script runs again."""
    seen = {}
    out = []
    for cb in callbacks:
        target = getattr(cb, "callback", None) or cb
        name = type(target).__name__
        i = seen.get(name, 0)
        seen[name] = i + 1
        if collect and getattr(cb, "state_dict", None) is not None:
            out.append(("%s#%d" % (name, i), cb))
    return out


class BackupAndRestore(Callback):
    """Backs up the training state so that an interrupted ``fit`` resumes
    where it stopped (Keras's callback of the same name and arguments).

    At the start of ``fit``, if ``backup_dir`` holds a backup, training
    resumes from it: weights and buffers, optimizer state, epoch and step
    within the epoch, the data order (the shuffle seed), the RNG states
    (torch, numpy, Python ``random``) and the state of the other callbacks
    (History continues, EarlyStopping and ReduceLROnPlateau keep their
    counters, CSVLogger appends). Resuming on another number of ranks
    continues the same sequence of global batches, so the finished run
    matches an uninterrupted one to float tolerance.

    ``save_freq``: ``"epoch"`` backs up after every epoch; an integer backs
    up every ``save_freq`` steps (counted across epochs). A run that dies
    without warning resumes from its last backup. ``delete_checkpoint``:
    remove the backup when ``fit`` completes.

    Preemption: while ``fit`` runs, the signals ``tnt_signals`` (default
    ``TNT_PREEMPT_SIGNALS``, else SIGUSR1 and SIGTERM; ``()`` for none) no
    longer end the process. All ranks finish their current step, agree on
    the step, write a backup and exit with status
    ``tnt.preemption.EXIT_CODE`` (75), which a batch script uses to requeue
    the job (see docs/preemption.md).

    Every backup is one file, ``backup_dir/tarantella-backup.pt``, written
    by the master atomically (temp file, fsync, rename): a crash or a second
    signal during the write leaves the previous backup intact. It is plain
    data, loaded with ``torch.load(weights_only=True)``, so a backup file
    cannot run code; callback states must be plain data too (see
    docs/preemption.md, "What a backup holds").
    """

    FILENAME = "tarantella-backup.pt"

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, tnt_signals=None):
        super().__init__()
        if not backup_dir:
            raise ValueError("BackupAndRestore: backup_dir is empty; give the directory where "
                             "the backup is kept")
        if save_freq != "epoch" and (isinstance(save_freq, bool) or not isinstance(save_freq, int)
                                     or save_freq < 1):
            raise ValueError("BackupAndRestore: save_freq must be 'epoch' or a positive number "
                             "of steps, got %r" % (save_freq,))
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq = save_freq
        self.delete_checkpoint = bool(delete_checkpoint)
        if tnt_signals is not None:
            tnt_signals = tuple(_parse_signal(s) for s in tnt_signals)
        self.tnt_signals = tnt_signals

    @property
    def backup_path(self):
        return os.path.join(self.backup_dir, self.FILENAME)


class FitBackup:
    """What tnt.Model.fit does for a BackupAndRestore callback (internal).

    fit calls, in this order: :meth:`find` (before the shuffle seed is
    drawn), :meth:`shuffle_seed`, :meth:`restore` (before on_train_begin),
    :meth:`restore_rng` (after it), then per epoch :meth:`first_step` and
    :meth:`resume_stats`, :meth:`after_step` at every step boundary and
    :meth:`after_epoch` after the epoch hooks, and :meth:`end` when fit
    completes. The signal handlers live as long as the :meth:`epochs`
    loop."""

    def __init__(self, callback, backup):
        self.callback = callback
        self.path = callback.backup_path
        self.backup = backup
        self.save_freq = callback.save_freq
        self.signals = ()
        self.batches_since_save = 0
        self.resume_epoch = None
        self.resume_step = 0
        self.resume_values = None
        self.cbs = None
        self.model = None
        self.num_epochs = 0
        self.meta = {}
        self.preempted = False

    @classmethod
    def find(cls, callbacks):
        """A FitBackup when ``callbacks`` holds a BackupAndRestore (the
        backup, if any, already read on every rank), else None."""
        found = [cb for cb in (callbacks or []) if isinstance(cb, BackupAndRestore)]
        if not found:
            return None
        if len(found) > 1:
            raise ValueError("fit: more than one BackupAndRestore callback; use one")
        cb = found[0]
        _remove_stale_temps(cb.backup_path)
        self = cls(cb, _read_backup(cb.backup_path))
        if self.backup is not None and self.backup.get("kind") != "fit":
            raise TarantellaError("%r was written by save_training_state, not by fit; give "
                                  "BackupAndRestore its own backup_dir" % self.path)
        return self

    def shuffle_seed(self, seed):
        return self.backup["shuffle_seed"] if self.backup is not None else seed

    def restore(self, model, cbs, epochs, initial_epoch, meta):
        """Checks that the backup fits this run, restores weights,
        optimizer and callback states; returns the first epoch."""
        self.model, self.cbs, self.num_epochs, self.meta = model, cbs, epochs, dict(meta)
        b = self.backup
        if b is None:
            return initial_epoch
        for key, what in (("num_samples", "samples"), ("global_batch", "global batch size"),
                          ("steps", "steps per epoch"), ("distributed", "tnt_distribute_dataset"),
                          ("drop_remainder", "drop_remainder"), ("shuffle", "shuffle")):
            if b["meta"].get(key) != self.meta.get(key):
                raise ValueError(
                    "fit: the backup in %s was written by a run with %s %r, this run has %r; "
                    "resume with the same data and batch_size (the global batch, whatever the "
                    "number of ranks), or delete %s to start over"
                    % (self.callback.backup_dir, what, b["meta"].get(key), self.meta.get(key),
                       self.path))
        if not self.meta["distributed"] and b["size"] != _size():
            raise ValueError("fit: the backup in %s was written by %d ranks that each passed "
                             "their own data (tnt_distribute_dataset=False); resume on %d ranks "
                             "or delete it" % (self.callback.backup_dir, b["size"], _size()))
        model.module.load_state_dict(b["model"])
        _load_optimizer_state(model.optimizer, b["optimizer"])
        states = b.get("callbacks", {})
        for key, cb in _callback_key_states(cbs.callbacks, True):
            if key in states and states[key] is not None:
                cb.load_state_dict(states[key])
        self.resume_epoch = b["epoch"]
        self.resume_step = b["step"]
        self.resume_values = b["stats"]
        self.batches_since_save = b.get("batches_since_save", 0)
        if _rank() == 0:
            print("tarantella: resuming from the backup in %s at epoch %d, step %d (written by "
                  "%d rank%s)" % (self.callback.backup_dir, b["epoch"] + 1, b["step"], b["size"],
                                  "" if b["size"] == 1 else "s"), file=sys.stderr, flush=True)
        return b["epoch"]

    def epochs(self, first, last):
        """The epochs to run; the preemption signals are handled while they
        run. Used as ``for epoch in backup.epochs(...)``: CPython closes the
        generator as soon as the loop ends, by break, return or exception,
        and the handlers are removed then (kept after a preemption, so that
        a second signal cannot kill the exiting process half-way)."""
        tnt_signals = self.callback.tnt_signals
        self.signals = install(tnt_signals) if tnt_signals != () else ()
        try:
            for epoch in range(first, last):
                yield epoch
        finally:
            if not self.preempted:
                uninstall()

    def restore_rng(self):
        if self.backup is not None:
            _restore_rng(self.backup, self.path)

    def first_step(self, epoch):
        return self.resume_step if epoch == self.resume_epoch else 0

    def resume_stats(self, epoch, stats):
        """The running sums of the interrupted epoch: the backup holds the
        sums over all ranks, which rank 0 carries on."""
        if epoch == self.resume_epoch and self.resume_values is not None:
            if _rank() == 0:
                stats.values[:] = self.resume_values
            self.resume_values = None

    def _save(self, epoch, step, stats_values):
        states = {}
        for key, cb in _callback_key_states(self.cbs.callbacks, True):
            states[key] = cb.state_dict()
        content = {
            "kind": "fit", "epoch": int(epoch), "step": int(step),
            "shuffle_seed": self.meta["shuffle_seed"], "meta": self.meta,
            "model": {k: v.detach().cpu().clone()
                      for k, v in self.model.module.state_dict().items()},
            "optimizer": _optimizer_state(self.model.optimizer),
            "callbacks": states,
            "stats": stats_values,
            "batches_since_save": 0,
        }
        _write_backup(self.path, content)
        self.batches_since_save = 0

    def after_step(self, epoch, step, steps, stats):
        """At the boundary after ``step``: backs up when save_freq steps
        have passed or a preemption signal arrived; then raises Preempted
        in the latter case."""
        self.batches_since_save += 1
        preempt = bool(self.signals) and requested()
        due = self.save_freq != "epoch" and self.batches_since_save >= self.save_freq
        if not (preempt or due):
            return
        if preempt and step + 1 >= steps and epoch + 1 >= self.num_epochs:
            return  # the last step is done; let fit finish normally
        # Sums over all ranks: the resuming run may have another rank count.
        self._save(epoch, step + 1, sum_over_ranks(stats.values))
        if preempt:
            self.preempted = True
            exit_preempted(epoch, step + 1)

    def after_epoch(self, epoch, stop_training):
        """After the epoch's hooks: backs up for save_freq='epoch' or a
        preemption signal (not after the last epoch, nor when training
        stops anyway); raises Preempted in the latter case."""
        preempt = bool(self.signals) and requested()
        if stop_training or epoch + 1 >= self.num_epochs:
            return
        if self.save_freq == "epoch" or preempt:
            self._save(epoch + 1, 0, None)
        if preempt:
            self.preempted = True
            exit_preempted(epoch + 1, 0)

    def end(self):
        """fit completed: removes the backup when delete_checkpoint."""
        global _received
        if self.callback.delete_checkpoint and _rank() == 0:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            try:
                os.rmdir(self.callback.backup_dir)
            except OSError:
                pass  # not empty, or not ours to remove
        if _received and _rank() == 0:
            print("tarantella: %s arrived after the last step; training is complete, nothing to "
                  "back up" % _signal_name(_received), file=sys.stderr, flush=True)
        _received = 0



class NoBackup:
    """FitBackup's stand-in when fit has no BackupAndRestore: nothing to
    restore, no signal handled, no backup written."""

    def shuffle_seed(self, seed):
        return seed

    def restore(self, model, cbs, epochs, initial_epoch, meta):
        return initial_epoch

    def epochs(self, first, last):
        return range(first, last)

    def restore_rng(self):
        pass

    def first_step(self, epoch):
        return 0

    def resume_stats(self, epoch, stats):
        pass

    def after_step(self, epoch, step, steps, stats):
        pass

    def after_epoch(self, epoch, stop_training):
        pass

    def end(self):
        pass


def fit_backup(callbacks):
    """tnt.Model.fit's preemption and backup driver for ``callbacks``."""
    return FitBackup.find(callbacks) or NoBackup()
