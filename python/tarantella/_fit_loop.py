"""tnt.Model.fit's plan and epoch loop: which samples every rank trains on
at every step, the callbacks around them, and the preemption backup.
tnt.Model (model.py) keeps the step itself (forward, backward, the reduced
gradient, the optimizer) and calls run_fit."""
import math

import numpy as np
import torch

from . import callbacks as tnt_callbacks
from . import preemption as _preemption
from . import timeline as _timeline
from ._comm import any_rank as _any_rank, rank as _rank, size as _size
from ._comm import sum_over_ranks as _sum_over_ranks, _pkg
from ._feed import Data, positional_inputs
from ._output import is_output_rank, output_on_all_devices
from .data import DistributedSampler
from .metrics import Stats as _Stats


def run_fit(self, *, x, y, batch_size, epochs, verbose, callbacks, validation_data, shuffle,
            initial_epoch, steps_per_epoch, validation_batch_size, validation_freq,
            shuffle_seed, tnt_micro_batch_size, tnt_distribute_dataset,
            tnt_distribute_validation_dataset, drop_remainder, validation_split,
            num_workers, pin_memory):
    """The body of tnt.Model.fit (its arguments, checked there): the fit
    plan (data, global and micro batch, shuffle seed, sampler, steps), the
    callbacks, the preemption backup, and the epoch and step loop. ``self``
    is the tnt.Model."""
    size, rank = _size(), _rank()
    n_inputs = positional_inputs(self.module)
    data = Data(x, y, n_inputs=n_inputs)
    val_data, val_distribute = None, tnt_distribute_validation_dataset
    if validation_data is not None:
        val_data = Data(validation_data, what="validation_data", n_inputs=n_inputs)
    elif validation_split:
        data, val_data = split_validation(data, validation_split)
        # Split from each rank's own data, it is each rank's own too: all
        # of it is evaluated there, and the sums are combined.
        val_distribute = tnt_distribute_dataset
    if tnt_distribute_dataset:
        batch = self._global_batch(batch_size, tnt_micro_batch_size)
        micro = batch // size
    else:
        # Own data per rank: batch_size (or tnt_micro_batch_size) is
        # this rank's micro-batch.
        micro = int(tnt_micro_batch_size or batch_size or 32)
        if micro < 1:
            raise ValueError("batch_size must be positive, got %d" % micro)
        batch = micro
    self._warn_batchnorm(max(micro, 1) if tnt_distribute_dataset else micro)
    # Preemption (preemption.py): a BackupAndRestore backup, if any, is
    # read now, because it fixes the data order.
    backup = _preemption.fit_backup(callbacks)
    shuffle_seed = backup.shuffle_seed(shuffle_seed)
    if shuffle_seed is None:
        # Drawn from torch's global generator, as DataLoader(shuffle=True)
        # draws its seed, so torch.manual_seed(s) fixes the order. Every
        # rank draws (their generators stay in step, like the serial
        # run's); the master's value is the one used, on any rank count.
        seed = np.zeros(1, dtype=np.int64)
        if shuffle:
            seed[0] = int(torch.empty((), dtype=torch.int64).random_().item())
        if size > 1:
            seed = _pkg().broadcast(seed, root=0)
        shuffle_seed = int(seed[0])

    if tnt_distribute_dataset:
        sampler = DistributedSampler(data.n, batch, shuffle=shuffle, seed=shuffle_seed,
                                     drop_remainder=drop_remainder, rank=rank, size=size)
        steps = len(sampler)
    else:
        # Each rank brings its own data, cut into micro-batches as one
        # rank alone would cut it: all ranks take as many steps as the
        # rank with the most; the others contribute empty steps.
        rank_ns = [int(v) for v in _sum_over_ranks(np.eye(size)[rank] * data.n)]
        rank_samplers = [DistributedSampler(n_r, batch, shuffle=shuffle, seed=shuffle_seed,
                                            drop_remainder=drop_remainder, rank=0, size=1)
                         for n_r in rank_ns]
        sampler = rank_samplers[rank]
        steps = max(len(s) for s in rank_samplers)
    if steps_per_epoch is not None:
        steps = min(steps, int(steps_per_epoch))
    if steps == 0:
        raise ValueError("fit: no training steps (%d samples, batch %d%s)"
                         % (data.n, batch, ", drop_remainder" if drop_remainder else ""))

    cbs = tnt_callbacks.CallbackList(callbacks, self,
                                     {"epochs": epochs, "steps": steps, "verbose": verbose,
                                      "batch_size": batch},
                                     is_master=rank == 0, output_rank=is_output_rank())
    if verbose and cbs.find(tnt_callbacks.ProgbarLogger) is None:
        cbs.add(tnt_callbacks.ProgbarLogger(verbose=verbose), first=True)
    history = tnt_callbacks.History()
    cbs.add(history)
    progbar = cbs.find(tnt_callbacks.ProgbarLogger)
    if progbar is not None and output_on_all_devices() and size > 1:
        progbar.prefix = "[%d] " % rank
    bar_every = progbar.update_every(steps) if progbar is not None else 0
    batch_sync = cbs.needs_batch_sync()

    self.stop_training = False
    self.history = history
    # Preemption: resume weights, optimizer, callback states and the
    # position (epoch, step) from the backup; RNG states after the hooks.
    initial_epoch = backup.restore(self, cbs, epochs, initial_epoch, dict(
        num_samples=data.n, global_batch=batch, steps=steps, shuffle=bool(shuffle),
        shuffle_seed=shuffle_seed, drop_remainder=bool(drop_remainder),
        distributed=bool(tnt_distribute_dataset)))
    cbs.call("on_train_begin", global_logs={}, local_logs={})
    backup.restore_rng()
    logs = {}
    for epoch in backup.epochs(initial_epoch, epochs):  # handles preemption signals
        self.module.train()
        stats = _Stats(self.compiled_metrics)
        backup.resume_stats(epoch, stats)
        sampler.set_epoch(epoch)
        # A resumed epoch starts at the backup's step (0 otherwise).
        first_step = backup.first_step(epoch)
        # This rank's samples of every step from there, loaded in order
        # (by worker processes with num_workers > 0).
        feed = data.batches([ids for ids in (sampler.step_info(s)[0]
                                             for s in range(first_step, min(steps, len(sampler))))
                             if ids], num_workers, pin_memory)
        cbs.call("on_epoch_begin", epoch, global_logs={}, local_logs={})
        for step in range(first_step, steps):
            # The timeline's step event (one C call per step when off).
            step_start = _timeline.now_ns() if _timeline.active() else 0
            if tnt_distribute_dataset:
                idx, global_n = sampler.step_info(step)
            else:
                # Own data per rank: the global batch is the sum of the
                # ranks' micro-batches at this step.
                idx = sampler.step_info(step)[0] if step < len(sampler) else []
                global_n = sum(s._global_count(step) for s in rank_samplers)
            local_n = len(idx)
            if batch_sync:
                cbs.call("on_train_batch_begin", step, global_logs={}, local_logs={})
            if local_n > 0:
                xb, yb = self._to_device(*next(feed))
            else:
                xb = yb = None
            loss_sum, pairs = self._train_step(xb, yb, local_n, global_n)
            stats.add(loss_sum, local_n, pairs)
            last = step == steps - 1
            if batch_sync or (bar_every and ((step + 1) % bar_every == 0 or last)):
                running = stats.logs(_sum_over_ranks(stats.values))
                if batch_sync:
                    cbs.call("on_train_batch_end", step, global_logs=running,
                             local_logs=stats.logs(), skip=(tnt_callbacks.ProgbarLogger,))
                    self.stop_training = _any_rank(self.stop_training)
                if bar_every and not last and progbar is not None and cbs.output_rank:
                    progbar.on_train_batch_end(step, dict(running))
            # stop_training is only synchronised after batch hooks; a
            # request from an epoch-level hook waits for the epoch end,
            # so no rank leaves the step loop alone.
            if batch_sync and self.stop_training:
                break
            # Preemption: all ranks agree here; backup, maybe exit.
            backup.after_step(epoch, step, steps, stats)
            if step_start:
                _timeline.record_step(step_start, _timeline.now_ns())
        logs = stats.logs(_sum_over_ranks(stats.values))
        local_logs = stats.logs()
        if val_data is not None and (epoch + 1) % validation_freq == 0:
            val_logs = self._evaluate_logs(
                val_data,
                validation_batch_size or batch if val_distribute
                else (validation_batch_size or micro),
                val_distribute, combine=val_distribute or validation_data is None,
                num_workers=num_workers, pin_memory=pin_memory)
            logs.update({"val_" + k: v for k, v in val_logs.items()})
            local_logs.update({"val_" + k: v for k, v in val_logs.items()})
        cbs.call("on_epoch_end", epoch, global_logs=logs, local_logs=local_logs)
        self.stop_training = _any_rank(self.stop_training)
        backup.after_epoch(epoch, self.stop_training)  # preemption: backup, maybe exit
        if self.stop_training:
            break
    cbs.call("on_train_end", global_logs=logs, local_logs=logs)
    backup.end()  # preemption: delete_checkpoint
    return history


def split_validation(data, validation_split):
    """Keras's validation_split: the last fraction of the samples, before
    any shuffling, becomes the validation data."""
    if isinstance(validation_split, bool) or \
            not isinstance(validation_split, (int, float, np.number)) \
            or not 0.0 <= validation_split < 1.0:
        raise ValueError("fit: validation_split must be a number in [0, 1), got %r"
                         % (validation_split,))
    split_at = int(math.floor(data.n * (1.0 - validation_split)))
    if split_at == 0 or split_at == data.n:
        raise ValueError("fit: %d samples are not enough to split them into training and "
                         "validation data with validation_split=%g; use more data or "
                         "another validation_split" % (data.n, validation_split))
    return data.subset(0, split_at), data.subset(split_at, data.n)
