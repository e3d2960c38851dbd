"""tnt.Model: the Keras-like data-parallel front end for a torch.nn.Module.

What happens on N ranks (and why it reproduces the serial run):

* ``Model(module)`` broadcasts the parameters and buffers of the master rank,
  so every rank starts from the same weights.
* ``fit`` splits every global batch of B samples over the ranks with libtnt's
  shard arithmetic (rank r gets B/N samples, one more when r < B % N; the
  order comes from a seeded permutation that does not depend on N). A final
  partial batch is split by the same rule; nothing is padded or duplicated.
* Each rank's mean-loss gradient is scaled by its share b_r / B before the
  fused SUM allreduce, so the reduced gradient is exactly the serial
  mean-loss gradient of the global batch, also for uneven micro-batches.
* Logged loss and metrics are sums and counts combined over the ranks, so
  they equal the serial values (accuracy exactly); every rank gets the same
  logs bit for bit, because the per-rank partial sums are gathered and added
  in rank order on every rank.
* Output (progress bar, summary, warnings) appears on the master rank only,
  unless TNT_OUTPUT_ON_ALL_DEVICES is set; checkpoints are written by the
  master only, atomically, while the other ranks wait.

This module is the model itself and its step (forward, backward, the
reduced gradient, the optimizer); fit's plan and epoch loop are in
_fit_loop.py, the data feeding in _feed.py, the shard order in
data.DistributedSampler, collective saving in saving.py, the model file in
_model_file.py, losses and metrics in losses.py and metrics.py.
"""
import io
import json
import os
import pickle
import time
import warnings

import numpy as np
import torch

from . import callbacks as tnt_callbacks
from ._comm import (broadcast_bytes as _broadcast_bytes,
                    rank as _rank, shard_range as _shard_range, size as _size,
                    sum_over_ranks as _sum_over_ranks, _pkg)
from .collectives import allgather_concat
from .cuda import place_module, to_device
from .errors import TarantellaError
from ._feed import Data, check_loader_args, positional_inputs
from ._fit_loop import run_fit
from ._model_file import compile_state, is_model_file, module_config, write_model
from ._output import is_output_rank, out, output_on_all_devices
from .losses import loss_reduction as _loss_reduction, make_loss as _make_loss
from .metrics import Metric as _Metric, Stats as _Stats
from .optimizers import GradientReducer, check_compression
from .progbar import Progbar
# collective_save/collective_read have always been importable from here.
from .saving import collective_read, collective_save  # noqa: F401

__all__ = ["Model"]

# Below this many samples per rank, BatchNorm statistics get noisy; the old
# Tarantella warned about the same threshold.
_BATCHNORM_MIN_MICRO_BATCH = 16


def _encode_columns(meta):
    """predict's description of its output columns, [(trailing shape,
    dtype string)] or None, as JSON: a peer's bytes are data, never a
    pickle that would run code on the receiving ranks."""
    if meta is None:
        return b"null"
    return json.dumps([[[int(d) for d in shape], dtype] for shape, dtype in meta]).encode()


def _decode_columns(data):
    """The master's column description from :func:`_encode_columns`,
    checked before anything is allocated from it."""
    try:
        meta = json.loads(data.decode("utf-8"))
        if meta is None:
            return None
        columns = []
        for shape, dtype in meta:
            dt = np.dtype(dtype) if isinstance(dtype, str) else None
            if (dt is None or dt.kind not in "biufc" or not isinstance(shape, list)
                    or not all(type(d) is int and d >= 0 for d in shape)):
                raise ValueError(meta)
            columns.append((tuple(shape), dt))
        return columns
    except (UnicodeDecodeError, ValueError, TypeError, RecursionError):
        raise TarantellaError(
            "predict: the master rank described its outputs with %d bytes that are not the "
            "JSON list of [shape, numeric dtype] pairs this rank expects; do all ranks run the "
            "same tarantella version?" % len(data)) from None


def call_module(module, xb):
    """Calls the module on a batch of inputs: a tuple or list of inputs is
    passed as positional arguments, a dict as keyword arguments."""
    if isinstance(xb, dict):
        return module(**xb)
    if isinstance(xb, (tuple, list)):
        return module(*xb)
    return module(xb)


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

class Model:
    """Data-parallel, Keras-like wrapper of a ``torch.nn.Module``.

    ``Model(module)`` is collective: every rank constructs it, and the
    master's parameters and buffers are broadcast to all.
    """

    def __init__(self, module, name=None, device=None):
        if isinstance(module, Model):
            module = module.module
        if not isinstance(module, torch.nn.Module):
            raise TypeError("tnt.Model expects a torch.nn.Module, got %s" % type(module).__name__)
        # GPU: the module goes to this rank's GPU unless the user placed it
        # (or passed device); batches follow it. CPU-only: nothing moves.
        self.device = place_module(module, device)
        self.module = module
        self.name = name or type(module).__name__
        self.optimizer = None
        self.loss = None
        self.loss_fn = None
        self.compiled_metrics = []
        self.metrics_names = []
        self.stop_training = False
        self.history = None
        self._metric_specs = []
        self._reducer = None
        self._fusion_tuner = None
        self.clipnorm = self.clipvalue = None
        self._bn_warned = False
        self._broadcast_weights()

    def _to_device(self, xb, yb):
        if self.device.type == "cpu":
            return xb, yb
        return to_device(xb, self.device), to_device(yb, self.device)

    # -- torch.nn.Module conveniences ---------------------------------------
    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def parameters(self, recurse=True):
        return self.module.parameters(recurse)

    def named_parameters(self, *args, **kwargs):
        return self.module.named_parameters(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict=True):
        return self.module.load_state_dict(state_dict, strict)

    def train(self, mode=True):
        self.module.train(mode)
        return self

    def eval(self):
        self.module.eval()
        return self

    @property
    def rank(self):
        return _rank()

    @property
    def comm_size(self):
        return _size()

    @staticmethod
    def is_output_rank():
        """True where this model prints (master, or every rank with
        TNT_OUTPUT_ON_ALL_DEVICES)."""
        return is_output_rank()

    def _broadcast_weights(self):
        if _size() > 1:
            _pkg().broadcast_parameters(self.module, root=0)

    # -- compile ------------------------------------------------------------
    def compile(self, optimizer="sgd", loss=None, metrics=None, tnt_fusion_threshold_kb=None,
                clipnorm=None, clipvalue=None, compression=None):
        """Sets the optimizer (a torch optimizer over this model's
        parameters, an optimizer class, or a name: 'sgd', 'adam', 'adamw',
        'rmsprop', 'adagrad' with Keras's default learning rates), the loss
        (a torch loss module, a callable(y_pred, y_true) returning the batch
        mean, or a Keras name; the cross-entropy names take logits) and the
        metrics (names such as 'accuracy', or callables fn(y_true, y_pred)
        returning a per-sample tensor or the batch mean; torch.nn modules are
        called as m(y_pred, y_true)). ``tnt_fusion_threshold_kb`` overrides
        TNT_FUSION_THRESHOLD_KB for this model's gradient buckets (a size in
        KiB, or ``"auto"``: tuned over the first steps, docs/tuning.md).

        ``compression``: None (default; float32 gradients travel as they
        are and training equals serial training bitwise), ``"bf16"`` or
        ``"fp16"``: float32 gradients travel and sit in shared memory as
        16-bit values, halving the allreduce's bytes; training then equals
        serial training within 16-bit rounding of each step's gradient
        (docs/python-api.md, "Gradient compression"). Every rank passes the
        same value.

        ``clipnorm`` clips the global norm over all gradients (as
        torch.nn.utils.clip_grad_norm_) and ``clipvalue`` each gradient
        element, after the allreduce: every rank clips the same reduced
        gradient, so the step equals serial training with the same
        clipping."""
        if loss is None:
            raise ValueError("compile: a loss is required")
        check_compression(compression, "compile")
        for name, value in (("clipnorm", clipnorm), ("clipvalue", clipvalue)):
            if value is not None and not (isinstance(value, (int, float, np.number))
                                          and not isinstance(value, bool) and value > 0):
                raise ValueError("compile: %s must be a positive number or None, got %r"
                                 % (name, value))
        self.clipnorm = float(clipnorm) if clipnorm is not None else None
        self.clipvalue = float(clipvalue) if clipvalue is not None else None
        self.optimizer = self._make_optimizer(optimizer)
        self.loss = loss
        self.loss_fn = _make_loss(loss)
        self._loss_reduction = _loss_reduction(self.loss_fn)
        threshold = 0.0 if isinstance(self.loss_fn, torch.nn.BCEWithLogitsLoss) else 0.5
        self._metric_specs = list(metrics or [])
        self.compiled_metrics = [_Metric(m, threshold) for m in self._metric_specs]
        self.metrics_names = ["loss"] + [m.name for m in self.compiled_metrics]
        self._fusion_threshold_kb = tnt_fusion_threshold_kb
        self._fusion_tuner = None
        self._compression = compression

    @property
    def compiled(self):
        return self.optimizer is not None and self.loss_fn is not None

    def _make_optimizer(self, optimizer):
        params = list(self.module.parameters())
        if isinstance(optimizer, torch.optim.Optimizer):
            own = {id(p) for p in params}
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if id(p) not in own:
                        raise ValueError("compile: the optimizer holds a tensor that is not a "
                                         "parameter of this model; build it from "
                                         "model.parameters()")
            return optimizer
        if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
            return optimizer(params)
        if isinstance(optimizer, str):
            defaults = {"sgd": (torch.optim.SGD, 0.01), "adam": (torch.optim.Adam, 0.001),
                        "adamw": (torch.optim.AdamW, 0.001),
                        "rmsprop": (torch.optim.RMSprop, 0.001),
                        "adagrad": (torch.optim.Adagrad, 0.001)}
            if optimizer.lower() not in defaults:
                raise ValueError("compile: unknown optimizer %r; use one of %s or a torch "
                                 "optimizer" % (optimizer, ", ".join(sorted(defaults))))
            cls, lr = defaults[optimizer.lower()]
            return cls(params, lr=lr)
        raise TypeError("compile: optimizer must be a torch.optim.Optimizer, a class or a name")

    def _make_reducer(self):
        # Collective: every rank builds the same fusion plan over the same
        # parameters (TNT_FUSION_THRESHOLD_KB unless overridden here).
        # A tuning (TNT_FUSION_THRESHOLD=auto) goes on across fit calls, and
        # its choice stays, instead of starting again with every fit.
        return GradientReducer(self.module, threshold_kb=self._fusion_threshold_kb,
                               tuner=self._fusion_tuner, compression=self._compression)

    def _require_compiled(self, what):
        if not self.compiled:
            raise RuntimeError("%s: call compile(optimizer, loss, metrics) first" % what)

    # -- weights ------------------------------------------------------------
    def get_weights(self):
        """Parameters and buffers (Keras: weights incl. non-trainable) as
        numpy arrays, in state_dict order. Local: no communication."""
        return [t.detach().cpu().numpy().copy() for t in self.module.state_dict().values()]

    def set_weights(self, weights):
        """Sets every state_dict entry from ``weights`` (as get_weights
        returns). Local: call it with the same values on every rank."""
        state = self.module.state_dict()
        if len(weights) != len(state):
            raise ValueError("set_weights: the model has %d weights, got %d"
                             % (len(state), len(weights)))
        with torch.no_grad():
            for (name, t), w in zip(state.items(), weights):
                w = torch.as_tensor(np.asarray(w))
                if tuple(w.shape) != tuple(t.shape):
                    raise ValueError("set_weights: %s has shape %s, got %s"
                                     % (name, tuple(t.shape), tuple(w.shape)))
                t.copy_(w)

    def save_weights(self, filepath, overwrite=True, tnt_save_all_devices=False):
        """Writes the state_dict (torch.save format). Collective; the master
        writes atomically unless ``tnt_save_all_devices``."""
        if not overwrite and os.path.exists(filepath):
            raise FileExistsError("save_weights: %s exists and overwrite=False" % filepath)
        state = {k: v.detach().cpu().clone() for k, v in self.module.state_dict().items()}
        collective_save(filepath, lambda f: torch.save(state, f),
                        all_devices=tnt_save_all_devices, what="save_weights")

    def load_weights(self, filepath, strict=True):
        """Reads a state_dict written by save_weights (or a full model file
        from save) on the master and sets it on every rank. Collective.
        Reads tensors only (torch's weights-only unpickler), so no file can
        run code here."""
        data = collective_read(filepath, what="load_weights")
        try:
            obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            raise ValueError(
                "load_weights(%r): the file holds Python objects besides tensors (%s); "
                "unpickling them could run code, so it was refused and nothing in it was run. "
                "A model file written by an earlier tarantella (model format 1) keeps its "
                "pickled module inline: if you trust it, load it with "
                "tnt.models.load_model(path, trusted=True) and save it again"
                % (filepath, str(e).rpartition("WeightsUnpickler error: ")[2])) from None
        if is_model_file(obj):
            obj = obj["state_dict"]
        self.module.load_state_dict(obj, strict=strict)

    def save(self, filepath, overwrite=True, include_optimizer=True, tnt_save_all_devices=False):
        """Saves architecture, weights and compile state (see
        tnt.models.save_model). Collective, master writes atomically."""
        write_model(filepath, self.name, self.module, compile_state(self, include_optimizer),
                    overwrite=overwrite, all_devices=tnt_save_all_devices, what="save")

    def get_config(self):
        return module_config(self.module)

    def summary(self, print_fn=None):
        """Prints layers, output-free parameter counts and totals (master
        only unless TNT_OUTPUT_ON_ALL_DEVICES; with ``print_fn`` it is called
        on every rank)."""
        lines = []
        rows = [("Layer (type)", "Param #")]
        for name, sub in self.module.named_modules():
            if sub is self.module and len(list(self.module.children())) > 0:
                continue
            if len(list(sub.children())) > 0:
                continue
            n = sum(p.numel() for p in sub.parameters(recurse=False)) + \
                sum(b.numel() for b in sub.buffers(recurse=False) if b.is_floating_point())
            rows.append(("%s (%s)" % (name or self.name, type(sub).__name__), "{:,}".format(n)))
        width = max(len(r[0]) for r in rows) + 4
        # As in Keras, floating-point buffers (BatchNorm's moving mean and
        # variance) count as non-trainable weights.
        trainable = sum(p.numel() for p in self.module.parameters() if p.requires_grad)
        total = sum(p.numel() for p in self.module.parameters()) + \
            sum(b.numel() for b in self.module.buffers() if b.is_floating_point())
        rule = "=" * (width + 12)
        lines.append('Model: "%s"' % self.name)
        lines.append("_" * (width + 12))
        lines.append(" %-*s%s" % (width, rows[0][0], rows[0][1]))
        lines.append(rule)
        for label, n in rows[1:]:
            lines.append(" %-*s%s" % (width, label, n))
        lines.append(rule)
        lines.append("Total params: {:,}".format(total))
        lines.append("Trainable params: {:,}".format(trainable))
        lines.append("Non-trainable params: {:,}".format(total - trainable))
        lines.append("_" * (width + 12))
        text = "\n".join(lines)
        if print_fn is not None:
            for line in lines:
                print_fn(line)
        else:
            out(text)
        return text

    # -- batch sizes --------------------------------------------------------
    @staticmethod
    def _global_batch(batch_size, micro_batch_size, default=32):
        size = _size()
        if micro_batch_size is not None:
            if micro_batch_size < 1:
                raise ValueError("tnt_micro_batch_size must be positive")
            derived = micro_batch_size * size
            if batch_size is not None and batch_size != derived:
                raise ValueError("batch_size=%d does not equal tnt_micro_batch_size=%d x %d ranks"
                                 % (batch_size, micro_batch_size, size))
            return derived
        batch_size = default if batch_size is None else int(batch_size)
        if batch_size < 1:
            raise ValueError("batch_size must be positive, got %d" % batch_size)
        return batch_size

    def _warn_batchnorm(self, micro_batch):
        if self._bn_warned:
            return
        has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
                     for m in self.module.modules())
        if has_bn and micro_batch < _BATCHNORM_MIN_MICRO_BATCH:
            self._bn_warned = True
            if is_output_rank():
                warnings.warn("tnt.Model: the model has BatchNorm layers and the micro-batch is "
                              "%d samples per rank (below %d); batch statistics are computed "
                              "per rank, so training will not match the serial run and may be "
                              "unstable. Use a larger global batch or fewer ranks."
                              % (micro_batch, _BATCHNORM_MIN_MICRO_BATCH), stacklevel=3)

    # -- one step -----------------------------------------------------------
    def _forward_loss(self, xb, yb):
        out = call_module(self.module, xb)
        loss = self.loss_fn(out, yb)
        return out, loss

    def _train_step(self, xb, yb, local_n, global_n):
        """One optimizer step on this rank's ``local_n`` of ``global_n``
        samples; returns (loss * samples, metric pairs) of this rank."""
        opt = self.optimizer
        opt.zero_grad(set_to_none=False)
        reducer = self._reducer
        if reducer is None:
            pass
        elif self._loss_reduction == "mean":
            # Mean loss over b_r samples, weighted b_r / B: the sum over the
            # ranks is the serial mean-loss gradient of the global batch.
            reducer.set_micro_batch(local_n, global_n)
        else:
            reducer.set_scale(1.0)
        if local_n > 0:
            out, loss = self._forward_loss(xb, yb)
            loss.backward()  # buckets are reduced while backward runs
            loss_value = float(loss.detach())
            loss_sum = loss_value * local_n if self._loss_reduction == "mean" else loss_value
            pairs = [m(out.detach(), yb) for m in self.compiled_metrics]
        else:
            # An empty micro-batch (a final partial batch with fewer samples
            # than ranks) still takes part in the step: synchronize()
            # contributes zero gradients, so all ranks' collectives match.
            loss_sum, pairs = 0.0, [(0.0, 0) for _ in self.compiled_metrics]
        if reducer is not None:
            reducer.synchronize()
        self._clip_gradients()
        opt.step()
        return loss_sum, pairs

    def _clip_gradients(self):
        """compile's clipnorm / clipvalue, on the reduced gradients (the same
        on every rank, so every rank clips alike)."""
        if self.clipnorm is None and self.clipvalue is None:
            return
        params = [p for p in self.module.parameters() if p.grad is not None]
        if self.clipnorm is not None:
            torch.nn.utils.clip_grad_norm_(params, self.clipnorm)
        if self.clipvalue is not None:
            torch.nn.utils.clip_grad_value_(params, self.clipvalue)

    # -- fit ----------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose=1, callbacks=None,
            validation_data=None, shuffle=True, initial_epoch=0, steps_per_epoch=None,
            validation_batch_size=None, validation_freq=1, shuffle_seed=None,
            tnt_micro_batch_size=None, tnt_distribute_dataset=True,
            tnt_distribute_validation_dataset=True, drop_remainder=False,
            validation_split=0.0, num_workers=0, pin_memory=False, tnt_seed_per_rank=None):
        """Trains for ``epochs`` epochs; returns the History.

        ``x`` is a torch Dataset (items ``(input, label)``), or an array /
        tensor with labels ``y`` (or an ``(x, y)`` pair); for a multi-input
        model, a tuple or list of arrays (passed to forward as positional
        arguments) or a dict (passed as keyword arguments). ``batch_size``
        is the *global* batch size (default 32), or give
        ``tnt_micro_batch_size`` per rank. With ``tnt_distribute_dataset``
        (default) every rank holds the whole dataset and trains on its shard
        of every global batch; set it False when each rank passes its own
        data, and ``batch_size`` is then this rank's micro-batch.
        ``shuffle_seed`` fixes the epoch permutations (default: drawn from
        torch's global generator on the master, so ``torch.manual_seed``
        makes the order reproducible at any rank count). The last partial
        batch is trained on unless ``drop_remainder``.
        ``validation_split`` (Keras): the last fraction of the samples,
        before shuffling, is validation data (``validation_data`` wins).
        ``num_workers`` > 0 loads each rank's micro-batches in that many
        DataLoader worker processes (only the rank's own samples);
        ``pin_memory`` pins them.
        ``tnt_seed_per_rank`` = s first calls ``tnt.seed_per_rank(s)``
        (torch, random and numpy seeded with s + rank), so dropout and
        augmentation draw independently on every rank; the master is
        seeded with s, so the shuffle order is that of
        ``torch.manual_seed(s)`` before fit."""
        self._require_compiled("fit")
        if tnt_seed_per_rank is not None:
            _pkg().seed_per_rank(tnt_seed_per_rank)
        num_workers, pin_memory = check_loader_args(num_workers, pin_memory)
        # The gradient hooks live only while fit runs: a backward() outside
        # fit does not feed the reducer. One rank has nothing to reduce and
        # its share of every batch is 1, so it trains without hooks.
        self._reducer = self._make_reducer() if _size() > 1 else None
        try:
            return run_fit(
                self, x=x, y=y, batch_size=batch_size, epochs=epochs, verbose=verbose,
                callbacks=callbacks, validation_data=validation_data, shuffle=shuffle,
                initial_epoch=initial_epoch, steps_per_epoch=steps_per_epoch,
                validation_batch_size=validation_batch_size, validation_freq=validation_freq,
                shuffle_seed=shuffle_seed, tnt_micro_batch_size=tnt_micro_batch_size,
                tnt_distribute_dataset=tnt_distribute_dataset,
                tnt_distribute_validation_dataset=tnt_distribute_validation_dataset,
                drop_remainder=drop_remainder, validation_split=validation_split,
                num_workers=num_workers, pin_memory=pin_memory)
        finally:
            reducer, self._reducer = self._reducer, None
            if reducer is not None:
                self._fusion_tuner = reducer.tuner
                reducer.close()

    # -- evaluate / predict ---------------------------------------------------
    def _local_slice(self, n, distribute):
        """This rank's contiguous share of n samples for evaluate/predict."""
        if not distribute or _size() == 1:
            return 0, n
        return _shard_range(n)

    def _evaluate_logs(self, data, batch_size, distribute, callbacks=None, combine=None,
                       num_workers=0, pin_memory=False):
        """Loss and metrics over all of ``data`` (each sample counted once
        over all ranks); the same dict on every rank. ``combine`` (default:
        ``distribute``) sums the ranks' results; without ``distribute`` each
        rank evaluates all of its ``data``."""
        begin, end = self._local_slice(data.n, distribute)
        size = _size() if distribute else 1
        micro = max(1, -(-int(batch_size) // size))
        chunks = [np.arange(b0, min(b0 + micro, end)) for b0 in range(begin, end, micro)]
        feed = data.batches(chunks, num_workers, pin_memory)
        stats = _Stats(self.compiled_metrics)
        was_training = self.module.training
        self.module.eval()
        try:
            with torch.no_grad():
                for i, idx in enumerate(chunks):
                    if callbacks is not None:
                        callbacks.call("on_test_batch_begin", i, global_logs={}, local_logs={})
                    xb, yb = self._to_device(*next(feed))
                    out, loss = self._forward_loss(xb, yb)
                    loss_value = float(loss)
                    if self._loss_reduction == "mean":
                        loss_value *= len(idx)
                    stats.add(loss_value, len(idx), [m(out, yb) for m in self.compiled_metrics])
                    if callbacks is not None:
                        local = stats.logs()
                        callbacks.call("on_test_batch_end", i, global_logs=local, local_logs=local)
        finally:
            self.module.train(was_training)
        if combine is None:
            combine = distribute
        values = _sum_over_ranks(stats.values) if combine else stats.values
        return stats.logs(values)

    def evaluate(self, x=None, y=None, batch_size=None, verbose=1, callbacks=None,
                 return_dict=False, tnt_micro_batch_size=None, tnt_distribute_dataset=True,
                 num_workers=0, pin_memory=False):
        """Loss and metrics over the whole dataset, equal to the serial
        values: every rank evaluates its contiguous shard and the sums and
        counts are combined. Returns ``[loss, *metrics]`` (or the scalar loss
        without metrics, or a dict with ``return_dict``); the same on every
        rank. Test-batch callback hooks see this rank's running logs.
        ``num_workers`` and ``pin_memory`` as in fit."""
        self._require_compiled("evaluate")
        num_workers, pin_memory = check_loader_args(num_workers, pin_memory)
        data = Data(x, y, n_inputs=positional_inputs(self.module))
        batch = self._global_batch(batch_size, tnt_micro_batch_size)
        cbs = tnt_callbacks.CallbackList(callbacks, self, {"verbose": verbose},
                                         is_master=_rank() == 0, output_rank=is_output_rank())
        start = time.monotonic()
        cbs.call("on_test_begin", global_logs={}, local_logs={})
        logs = self._evaluate_logs(data, batch, tnt_distribute_dataset,
                                   callbacks=cbs if cbs.callbacks else None,
                                   num_workers=num_workers, pin_memory=pin_memory)
        cbs.call("on_test_end", global_logs=logs, local_logs=logs)
        if verbose and is_output_rank():
            steps = max(1, -(-data.n // batch))
            bar = Progbar(steps, bar=verbose == 1)
            bar.start = start
            bar.update(steps, list(logs.items()), finalize=True)
        if return_dict:
            return logs
        values = [logs[k] for k in logs]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose=0, callbacks=None, tnt_micro_batch_size=None,
                tnt_distribute_dataset=True, tnt_predict_on_all_ranks=True, num_workers=0,
                pin_memory=False):
        """Module outputs for every sample of ``x`` (a Dataset, an array or
        an (x, y) pair whose labels are ignored), as numpy, in dataset
        order. Each rank computes its contiguous shard; the result is
        assembled on every rank, or only on the master with
        ``tnt_predict_on_all_ranks=False`` (the others return None).
        ``num_workers`` and ``pin_memory`` as in fit."""
        num_workers, pin_memory = check_loader_args(num_workers, pin_memory)
        data = Data(x, n_inputs=positional_inputs(self.module))
        batch = self._global_batch(batch_size, tnt_micro_batch_size)
        begin, end = self._local_slice(data.n, tnt_distribute_dataset)
        size = _size() if tnt_distribute_dataset else 1
        micro = max(1, -(-batch // size))
        cbs = tnt_callbacks.CallbackList(callbacks, self, {"verbose": verbose},
                                         is_master=_rank() == 0, output_rank=is_output_rank())
        cbs.call("on_predict_begin", global_logs={}, local_logs={})
        outputs = []
        chunks = [np.arange(b0, min(b0 + micro, end)) for b0 in range(begin, end, micro)]
        feed = data.batches(chunks, num_workers, pin_memory)
        was_training = self.module.training
        self.module.eval()
        try:
            with torch.no_grad():
                for i in range(len(chunks)):
                    cbs.call("on_predict_batch_begin", i, global_logs={}, local_logs={})
                    xb, _ = self._to_device(*next(feed))
                    out = call_module(self.module, xb)
                    outputs.append(out)
                    cbs.call("on_predict_batch_end", i, global_logs={"outputs": out},
                             local_logs={"outputs": out})
        finally:
            self.module.train(was_training)
        result = self._assemble(outputs, tnt_distribute_dataset)
        cbs.call("on_predict_end", global_logs={}, local_logs={})
        if not tnt_predict_on_all_ranks and _rank() != 0:
            return None
        return result

    def _assemble(self, outputs, distribute):
        """Concatenates the per-batch outputs (tensor or tuple of tensors)
        and, when distributed, the per-rank shards in rank order."""
        first = outputs[0] if outputs else None
        multi = isinstance(first, (tuple, list))
        columns = list(zip(*outputs)) if multi else [outputs]
        arrays = [torch.cat(list(c)).cpu().numpy() if c else None for c in columns]
        if not distribute or _size() == 1:
            return tuple(arrays) if multi else arrays[0]
        # Every rank needs each column's trailing shape and dtype; a rank
        # with an empty shard takes them from the master.
        meta = None
        if arrays and arrays[0] is not None:
            meta = [(a.shape[1:], a.dtype.str) for a in arrays]
        meta = _decode_columns(_broadcast_bytes(_encode_columns(meta) if _rank() == 0 else b""))
        if meta is None:
            raise RuntimeError("predict: the master rank produced no outputs")
        gathered = []
        for col, (shape, dtype) in enumerate(meta):
            local = arrays[col] if col < len(arrays) and arrays[col] is not None \
                else np.zeros((0,) + shape, dtype=dtype)
            gathered.append(allgather_concat(local))
        if multi or len(gathered) > 1:
            return tuple(gathered)
        return gathered[0]
