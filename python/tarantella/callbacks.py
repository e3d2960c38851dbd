"""Keras-style callbacks for tnt.Model.

Every callback sees logs that are averaged over all ranks (weighted by each
rank's sample count, so they equal the serial values) unless it says
otherwise. Two attributes decide how tnt.Model drives a callback:

``aggregate_logs`` (default True)
    True: the logs are the global, rank-averaged values, identical on every
    rank. False: the logs are this rank's own values.
``run_on_all_ranks`` (default True)
    False: the hooks run on the master rank only (writers such as CSVLogger).

User callbacks are either subclasses of :class:`Callback` (Keras habit) or
any object with Keras hook names, which tnt.Model wraps as
``Callback(obj)``; ``Callback(obj, aggregate_logs=False,
run_on_all_ranks=False)`` changes the defaults for one callback.

Callbacks that keep state across epochs (History, CSVLogger, EarlyStopping,
ReduceLROnPlateau, LearningRateScheduler, ModelCheckpoint) have
``state_dict()`` / ``load_state_dict(state)``, which BackupAndRestore saves
and restores; a user callback that defines the same two methods is backed
up too. After ``load_state_dict`` the next ``on_train_begin`` continues
from the loaded state instead of resetting it.

Stopping is collective: tnt.Model combines ``model.stop_training`` over all
ranks (any rank asking to stop stops everyone) after the epoch hooks, and
after the batch hooks when a callback has batch hooks, so every rank stops
after the same batch or epoch.
"""
import csv
import math
import os

from .callback import Callback, _HOOKS  # noqa: F401 (Callback is public here)
from .callback_list import CallbackList  # noqa: F401 (public here)
from .preemption import BackupAndRestore  # noqa: F401 (public here)
from .progbar import Progbar


__all__ = [
    "Callback", "History", "CSVLogger", "EarlyStopping", "LearningRateScheduler",
    "ReduceLROnPlateau", "ModelCheckpoint", "ProgbarLogger", "TerminateOnNaN",
    "LambdaCallback", "BackupAndRestore", "CallbackList",
]

def _print(msg):
    # Callbacks that print run on ranks chosen by tnt.Model (see
    # CallbackList); prefixing is done there, so this is a plain print.
    print(msg, flush=True)


def _lr_of(model):
    return float(model.optimizer.param_groups[0]["lr"])


def _set_lr(model, lr):
    for group in model.optimizer.param_groups:
        group["lr"] = float(lr)


class History(Callback):
    """Records the epoch logs: ``history.history['loss'][i]`` and
    ``history.epoch``. tnt.Model.fit adds one and returns it. The values are
    the rank-averaged logs, so the history is identical on every rank."""

    def __init__(self):
        super().__init__()
        self.epoch = []
        self.history = {}

    def state_dict(self):
        return {"epoch": list(self.epoch),
                "history": {k: list(v) for k, v in self.history.items()}}

    def load_state_dict(self, state):
        self.epoch = list(state["epoch"])
        self.history = {k: list(v) for k, v in state["history"].items()}
        self._resumed = True

    def on_train_begin(self, logs=None):
        if self._take_resumed():
            return
        self.epoch = []
        self.history = {}

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)
        if self.model is not None:
            self.model.history = self


class CSVLogger(Callback):
    """Writes one row per epoch (``epoch`` then the sorted log keys) to
    ``filename``; only the master rank writes."""

    def __init__(self, filename, separator=",", append=False):
        super().__init__(run_on_all_ranks=False)
        self.filename = os.fspath(filename)
        self.sep = separator
        self.append = append
        self.keys = None
        self._file = None
        self._writer = None
        self._has_header = False
        self._resume_size = None

    def state_dict(self):
        # The file as it was at the backup: rows written after it (by a run
        # that then died) are cut off on resume, so no epoch appears twice.
        size = None
        if self._file is not None:
            self._file.flush()
            size = os.path.getsize(self.filename)
        return {"size": size, "keys": self.keys,
                "has_header": bool(self._has_header or self._writer is not None)}

    def load_state_dict(self, state):
        self._resume_size = state["size"]
        self.keys = state["keys"]
        self._resume_header = state["has_header"]
        self._resumed = True

    def on_train_begin(self, logs=None):
        if self._take_resumed() and self._resume_size is not None:
            # Resuming: append to the rows of the interrupted run.
            if os.path.exists(self.filename) and os.path.getsize(self.filename) >= self._resume_size:
                os.truncate(self.filename, self._resume_size)
            self._file = open(self.filename, "a", newline="")
            self._has_header = self._resume_header
            self._writer = None
            return
        has_header = self.append and os.path.exists(self.filename) and os.path.getsize(self.filename) > 0
        self._file = open(self.filename, "a" if self.append else "w", newline="")
        self._has_header = has_header
        self.keys = None
        self._writer = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs.keys())
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=["epoch"] + self.keys,
                                          delimiter=self.sep)
            if not self._has_header:
                self._writer.writeheader()
        row = {"epoch": epoch}
        for k in self.keys:
            v = logs.get(k, "NA")
            row[k] = v
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None
            self._writer = None


def _monitor_op(mode, monitor, name):
    if mode not in ("auto", "min", "max"):
        raise ValueError("%s: mode must be 'auto', 'min' or 'max', got %r" % (name, mode))
    if mode == "auto":
        mode = "max" if ("acc" in monitor or monitor.startswith("fmeasure") or "auc" in monitor) else "min"
    return mode


class EarlyStopping(Callback):
    """Stops training when ``monitor`` has stopped improving for
    ``patience`` epochs (Keras semantics). The monitored value is the
    rank-averaged log, so every rank decides the same and stops after the
    same epoch."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor = monitor
        self.patience = patience
        self.verbose = verbose
        self.baseline = baseline
        self.min_delta = abs(min_delta)
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.mode = _monitor_op(mode, monitor, "EarlyStopping")
        if self.mode == "min":
            self.min_delta *= -1
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def _improved(self, current, reference):
        if self.mode == "min":
            return current - self.min_delta < reference
        return current - self.min_delta > reference

    def state_dict(self):
        return {"wait": self.wait, "stopped_epoch": self.stopped_epoch, "best": self.best,
                "best_weights": self.best_weights, "best_epoch": self.best_epoch}

    def load_state_dict(self, state):
        for k, v in state.items():
            setattr(self, k, v)
        self._resumed = True

    def on_train_begin(self, logs=None):
        if self._take_resumed():
            return
        self.wait = 0
        self.stopped_epoch = 0
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        current = (logs or {}).get(self.monitor)
        if current is None or epoch < self.start_from_epoch:
            if current is None and self.model.is_output_rank():
                _print("EarlyStopping: metric '%s' is not in the logs (available: %s)"
                       % (self.monitor, ", ".join(sorted(logs or {}))))
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
        self.wait += 1
        if self._improved(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._improved(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.restore_best_weights and self.best_weights is not None:
                if self.verbose > 0 and self.model.is_output_rank():
                    _print("Restoring model weights from the end of the best epoch: %d."
                           % (self.best_epoch + 1))
                self.model.set_weights(self.best_weights)

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0 and self.model.is_output_rank():
            _print("Epoch %d: early stopping" % (self.stopped_epoch + 1))


class LearningRateScheduler(Callback):
    """Sets the learning rate of every parameter group at the start of each
    epoch to ``schedule(epoch, lr)`` (or ``schedule(epoch)``)."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule = schedule
        self.verbose = verbose
        self._applied_epoch = None
        self._skip_epoch = None

    def state_dict(self):
        return {"applied_epoch": self._applied_epoch}

    def load_state_dict(self, state):
        # The optimizer state (restored with the backup) already holds the
        # rate set for this epoch; applying a relative schedule
        # (lr -> lr * 0.9) again when the epoch resumes would apply it twice.
        self._applied_epoch = state["applied_epoch"]
        self._skip_epoch = state["applied_epoch"]

    def on_epoch_begin(self, epoch, logs=None):
        if self._skip_epoch is not None and epoch == self._skip_epoch:
            self._skip_epoch = None
            return
        self._skip_epoch = None
        self._applied_epoch = epoch
        lr = _lr_of(self.model)
        try:
            new_lr = self.schedule(epoch, lr)
        except TypeError:
            new_lr = self.schedule(epoch)
        new_lr = float(new_lr)
        if not math.isfinite(new_lr):
            raise ValueError("LearningRateScheduler: schedule returned %r at epoch %d" % (new_lr, epoch))
        _set_lr(self.model, new_lr)
        if self.verbose > 0 and self.model.is_output_rank():
            _print("Epoch %d: LearningRateScheduler setting learning rate to %s." % (epoch + 1, new_lr))

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _lr_of(self.model)


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by ``factor`` when ``monitor`` has not
    improved for ``patience`` epochs (Keras semantics, rank-averaged logs)."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0):
        super().__init__()
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau: factor must be < 1, got %r" % factor)
        self.monitor = monitor
        self.factor = factor
        self.patience = patience
        self.verbose = verbose
        self.mode = _monitor_op(mode, monitor, "ReduceLROnPlateau")
        self.min_delta = min_delta
        self.cooldown = cooldown
        self.min_lr = min_lr
        self._reset()

    def _reset(self):
        self.best = math.inf if self.mode == "min" else -math.inf
        self.cooldown_counter = 0
        self.wait = 0

    def _improved(self, current):
        if self.mode == "min":
            return current < self.best - self.min_delta
        return current > self.best + self.min_delta

    def state_dict(self):
        return {"best": self.best, "cooldown_counter": self.cooldown_counter, "wait": self.wait}

    def load_state_dict(self, state):
        for k, v in state.items():
            setattr(self, k, v)
        self._resumed = True

    def on_train_begin(self, logs=None):
        if self._take_resumed():
            return
        self._reset()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        logs["lr"] = _lr_of(self.model)
        current = logs.get(self.monitor)
        if current is None:
            if self.model.is_output_rank():
                _print("ReduceLROnPlateau: metric '%s' is not in the logs (available: %s)"
                       % (self.monitor, ", ".join(sorted(logs))))
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self._improved(current):
            self.best = current
            self.wait = 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience:
                old_lr = _lr_of(self.model)
                if old_lr > self.min_lr:
                    new_lr = max(old_lr * self.factor, self.min_lr)
                    _set_lr(self.model, new_lr)
                    if self.verbose > 0 and self.model.is_output_rank():
                        _print("Epoch %d: ReduceLROnPlateau reducing learning rate to %s."
                               % (epoch + 1, new_lr))
                    self.cooldown_counter = self.cooldown
                    self.wait = 0


class ModelCheckpoint(Callback):
    """Saves the model (or only its weights) after every epoch, or every
    ``save_freq`` batches. ``filepath`` may contain ``{epoch:02d}`` and log
    names such as ``{val_loss:.2f}``. The save is collective: it runs on
    every rank, the master writes (atomically: temp file, fsync, rename) and
    the others wait, so each file appears once and complete."""

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__()
        self.filepath = os.fspath(filepath)
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.mode = _monitor_op(mode, monitor, "ModelCheckpoint")
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError("ModelCheckpoint: save_freq must be 'epoch' or a positive int, got %r"
                             % (save_freq,))
        self.save_freq = save_freq
        if initial_value_threshold is not None:
            self.best = initial_value_threshold
        else:
            self.best = math.inf if self.mode == "min" else -math.inf
        self._batches_seen = 0
        self._epoch = 0

    def has_batch_hooks(self):
        return self.save_freq != "epoch"

    def state_dict(self):
        return {"best": self.best, "batches_seen": self._batches_seen}

    def load_state_dict(self, state):
        self.best = state["best"]
        self._batches_seen = state["batches_seen"]

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches_seen += 1
        if self._batches_seen % self.save_freq == 0:
            self._save(self._epoch, logs, batch=batch)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, logs)

    def _save(self, epoch, logs, batch=None):
        logs = dict(logs or {})
        try:
            path = self.filepath.format(epoch=epoch + 1, batch=batch, **logs)
        except KeyError as e:
            raise KeyError("ModelCheckpoint: filepath %r names %s, which is not in the logs "
                           "(available: %s)" % (self.filepath, e, ", ".join(sorted(logs)))) from None
        verbose = self.verbose > 0 and self.model.is_output_rank()
        if self.save_best_only:
            current = logs.get(self.monitor)
            if current is None:
                if self.model.is_output_rank():
                    _print("ModelCheckpoint: can save best model only with '%s' available, "
                           "skipping" % self.monitor)
                return
            better = current < self.best if self.mode == "min" else current > self.best
            if not better:
                if verbose:
                    _print("Epoch %d: %s did not improve from %.5f" % (epoch + 1, self.monitor, self.best))
                return
            if verbose:
                _print("Epoch %d: %s improved from %.5f to %.5f, saving model to %s"
                       % (epoch + 1, self.monitor, self.best, current, path))
            self.best = current
        elif verbose:
            _print("Epoch %d: saving model to %s" % (epoch + 1, path))
        if self.save_weights_only:
            self.model.save_weights(path)
        else:
            self.model.save(path)


class ProgbarLogger(Callback):
    """Prints the Keras progress bar: ``Epoch i/N`` then one bar per epoch
    with steps, elapsed time / ETA and the rank-averaged loss and metrics.

    tnt.Model adds one when ``verbose`` is 1 or 2 and runs it on the master
    rank only (on every rank with TNT_OUTPUT_ON_ALL_DEVICES). It is updated
    every ``update_every`` steps (bounded, so that averaging the running
    logs across ranks costs a few small collectives per epoch) and at the
    end of every epoch with the validation results.
    """

    # CallbackList runs it on the output rank(s), not by run_on_all_ranks.
    runs_on_output_rank = True

    def __init__(self, count_mode="steps", stateful_metrics=None, verbose=1, max_updates=20):
        super().__init__()
        if count_mode != "steps":
            raise ValueError("ProgbarLogger: only count_mode='steps' is supported (global steps)")
        self.verbose = verbose
        self.max_updates = max_updates
        self.progbar = None
        self.epochs = 1
        self.prefix = ""

    def has_batch_hooks(self):
        # Batch updates are driven by tnt.Model at its own cadence.
        return False

    def update_every(self, steps):
        """Steps between two bar updates (the same on every rank)."""
        if self.verbose != 1 or not steps:
            return 0
        return max(1, -(-steps // self.max_updates))

    def on_train_begin(self, logs=None):
        self.epochs = self.params.get("epochs", 1)

    def on_epoch_begin(self, epoch, logs=None):
        if self.verbose:
            _print("%sEpoch %d/%d" % (self.prefix, epoch + 1, self.epochs))
        self.progbar = Progbar(self.params.get("steps"), prefix=self.prefix,
                               bar=self.verbose == 1)

    def on_train_batch_end(self, batch, logs=None):
        if self.progbar is not None and self.verbose == 1:
            self.progbar.update(batch + 1, list((logs or {}).items()), finalize=False)

    def on_epoch_end(self, epoch, logs=None):
        if self.progbar is not None and self.verbose:
            self.progbar.update(self.params.get("steps") or 0, list((logs or {}).items()),
                                finalize=True)
        self.progbar = None


class TerminateOnNaN(Callback):
    """Stops training after the batch whose (rank-averaged) loss is NaN or
    infinite; a NaN on any rank makes the average NaN, so all ranks stop."""

    def has_batch_hooks(self):
        return True

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and (math.isnan(loss) or math.isinf(loss)):
            if self.model.is_output_rank():
                _print("Batch %d: Invalid loss, terminating training" % batch)
            self.model.stop_training = True


class LambdaCallback(Callback):
    """Callback from plain functions: ``on_epoch_begin(epoch, logs)``,
    ``on_epoch_end(epoch, logs)``, ``on_train_batch_begin/end(batch, logs)``
    (alias ``on_batch_begin/end``), ``on_train_begin(logs)``,
    ``on_train_end(logs)``; other hook names are accepted as keywords."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_batch_begin=None,
                 on_batch_end=None, on_train_begin=None, on_train_end=None,
                 aggregate_logs=True, run_on_all_ranks=True, **kwargs):
        super().__init__(aggregate_logs=aggregate_logs, run_on_all_ranks=run_on_all_ranks)
        fns = dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                   on_train_batch_begin=on_batch_begin, on_train_batch_end=on_batch_end,
                   on_train_begin=on_train_begin, on_train_end=on_train_end)
        for name, fn in kwargs.items():
            if name not in _HOOKS:
                raise TypeError("LambdaCallback: unknown hook %r" % name)
            fns[name] = fn
        self._fns = {k: v for k, v in fns.items() if v is not None}
        for name, fn in self._fns.items():
            setattr(self, name, fn)

    def has_batch_hooks(self):
        return "on_train_batch_begin" in self._fns or "on_train_batch_end" in self._fns
