"""Gradient allreduce for data-parallel training: GradientReducer (the shared
mechanism under tnt.Model and DistributedOptimizer), DistributedOptimizer for
custom training loops, and broadcast_parameters.

How the gradient path works
---------------------------
GradientReducer creates one libtnt fusion engine over the trainable
parameters, in reverse registration order (roughly the order backprop
produces their gradients), which is identical on every rank; creating it is
collective and fails with MismatchError when ranks' models differ. A hook on
each parameter's AccumulateGrad node marks its gradient ready as soon as
backward has accumulated it: libtnt multiplies it by the step's scale and,
when a bucket is complete, starts that bucket's allreduce on its progress
thread while backward goes on. ``synchronize()`` marks whatever backward did
not produce (unused parameters, or every parameter on a rank that had no
samples this step; a missing ``.grad`` becomes zeros) and waits, after which
every ``p.grad`` holds ``sum over ranks of scale_r * grad_r``.

After the first step the gradients live in one flat buffer per dtype, laid
out in plan order: each ``p.grad`` becomes a view into it (values unchanged,
so nothing observable changes), backward accumulates into those views in
place, and every fusion bucket is then one contiguous range that libtnt
reduces where it lies, with no copy into a staging buffer and back. Code that
replaces ``p.grad`` (``zero_grad(set_to_none=True)``, assigning new tensors)
still works: the reducer notices and goes back to the copying path.

With the default scale ``1/size`` that is the average. For exact serial
equivalence with uneven micro-batches, each rank passes
``local_count / global_count`` (``set_micro_batch(local, global)``) and
computes a *mean* loss over its own micro-batch: the sum over ranks is then
exactly the serial mean-loss gradient.

``compression="bf16"`` or ``"fp16"`` sends float32 gradients as 16-bit values
(libtnt's ``tnt_fusion_create_compressed``): each rank's scaled gradient is
rounded once to 16 bits, every reduction stage accumulates in float32, and
the result is widened back into ``p.grad``. The reduced gradient then equals
the serial one within 16-bit rounding instead of bitwise (docs/python-api.md,
"Gradient compression"); it is still bitwise the same on every rank.
"""
import contextlib
import hashlib
import os
import warnings
import weakref

import numpy as np
import torch

from . import _autotune, _tnt
from . import timeline as _timeline
from ._output import out
from ._protocol import tensor_dtype_code, _check_agree, _K_PARAMS
from .errors import InvalidArgumentError, UnsupportedError

__all__ = ["GradientReducer", "DistributedOptimizer", "broadcast_parameters"]


def _unique_params(module_or_params):
    if isinstance(module_or_params, torch.nn.Module):
        params = list(module_or_params.parameters())  # already de-duplicated
    else:
        params = []
        for item in module_or_params:
            if isinstance(item, dict):  # an optimizer param group
                params.extend(item["params"])
            else:
                params.append(item)
    seen, out = set(), []
    for p in params:
        if id(p) not in seen and p.requires_grad:
            seen.add(id(p))
            out.append(p)
    return out


#: The values ``compression`` accepts, and the libtnt code of each.
COMPRESSIONS = {None: _tnt.COMPRESSION_NONE, "fp16": _tnt.COMPRESSION_FP16,
                "bf16": _tnt.COMPRESSION_BF16}


def check_compression(compression, what):
    """Returns ``compression`` if it is one of COMPRESSIONS' keys, else raises
    InvalidArgumentError naming the allowed values."""
    if isinstance(compression, str) and compression in COMPRESSIONS or compression is None:
        return compression
    raise InvalidArgumentError("%s: compression must be None, \"bf16\" or \"fp16\", got %r"
                               % (what, compression))


def _env_threshold(threshold):
    """The bytes libtnt uses for threshold None (TNT_FUSION_THRESHOLD_KB, else
    its default); only for reporting num_buckets without an engine."""
    if threshold is not None:
        return threshold
    try:
        kb = int(os.environ.get("TNT_FUSION_THRESHOLD_KB", ""))
    except ValueError:
        return None
    return kb * 1024 if kb >= 0 else None


_NOTICES = set()


def _notice_once(message):
    """Prints message on the output rank(s) the first time only: tnt.Model
    makes a reducer per fit."""
    if message not in _NOTICES:
        _NOTICES.add(message)
        out(message)


def _wants_tuning(threshold_kb):
    """Whether threshold_kb asks for tuning ("auto", or None when the
    environment says auto); rejects anything that is not a size or auto."""
    if isinstance(threshold_kb, str):
        if threshold_kb.strip().lower() == "auto":
            return True
        raise InvalidArgumentError("threshold_kb must be a number of KiB >= 0, None or 'auto', "
                                   "got %r" % (threshold_kb,))
    if threshold_kb is None:
        return bool(_tnt.fusion_tune_requested())
    if isinstance(threshold_kb, bool) or not isinstance(threshold_kb, (int, float, np.number)) \
            or not threshold_kb >= 0:
        raise InvalidArgumentError("threshold_kb must be a number of KiB >= 0, None or 'auto', "
                                   "got %r" % (threshold_kb,))
    return False


class GradientReducer:
    """Fused, overlapped gradient allreduce over a module's parameters.

    ``module_or_params``: a ``torch.nn.Module``, or an iterable of parameters
    (or of optimizer param groups). Only parameters with ``requires_grad``
    take part. ``threshold_kb``: fusion bucket size in KiB; None uses
    ``TNT_FUSION_THRESHOLD_KB`` or libtnt's default, 0 gives one bucket per
    parameter, ``"auto"`` (also what None means under
    ``TNT_FUSION_THRESHOLD=auto`` or ``TNT_FUSION_THRESHOLD_KB=auto``) times
    a few sizes over the first steps and keeps the fastest (docs/tuning.md;
    ``tune_steps`` timed steps per size, default 5). ``fusion_threshold_kb``
    tells the size in use, ``fusion_tuning`` what was tried.
    Collective: every rank constructs it at the same point with
    the same model. ``use_engine``: None (default) uses the fusion engine
    when there is more than one rank; a single rank only scales its
    gradients in place, which is what the engine would compute, without the
    copies (True forces the engine, for tests). ``compression``: None
    (default: gradients travel as float32, and the result equals serial
    training bitwise), ``"bf16"`` or ``"fp16"`` (float32 gradients travel
    and sit in shared memory as 16-bit values; the result equals serial
    training within 16-bit rounding; see docs/python-api.md). Every rank
    passes the same value (else MismatchError). With one rank nothing is
    sent, so nothing is rounded.

    Per step::

        reducer.set_micro_batch(local_count, global_count)   # or set_scale()
        loss.backward()          # gradients are reduced while backward runs
        reducer.synchronize()    # waits; p.grad now holds the global gradient
        optimizer.step()
    """

    def __init__(self, module_or_params, threshold_kb=None, use_engine=None, tune_steps=None,
                 tuner=None, compression=None):
        self._compression = check_compression(compression, "GradientReducer")
        _tnt.init()
        params = _unique_params(module_or_params)
        # Reverse registration order approximates the order in which backward
        # produces gradients (last layer first), so early buckets fill early.
        self._params = list(reversed(params))
        descs = []
        # All parameters on the CPU, or all on one GPU (then the device
        # engine in cuda.py reduces them on that GPU's current stream).
        devices = sorted({str(p.device) for p in self._params})
        self._device = self._params[0].device if self._params else torch.device("cpu")
        if len(devices) > 1 or (devices and self._device.type not in ("cpu", "cuda")):
            raise InvalidArgumentError("GradientReducer: parameters are on %s; put the model on "
                                       "the CPU or on one GPU (model.to(tnt.cuda.local_device()))"
                                       % ", ".join(devices))
        for i, p in enumerate(self._params):
            descs.append((p.numel(), tensor_dtype_code(p, "GradientReducer parameter")))
        tune = _wants_tuning(threshold_kb)
        if tune or threshold_kb is None:
            threshold = None
        else:
            threshold = int(threshold_kb * 1024)
        self._size = _tnt.size()
        if use_engine is None:
            use_engine = self._size > 1
        self._descs = descs
        self._tuner = None
        self._tuning_note = None
        if tune:
            self._tuner, self._tuning_note = self._start_tuning(
                descs, use_engine, tuner, _autotune.DEFAULT_STEPS if tune_steps is None
                else tune_steps)
            threshold = self._tuner.current_kb * 1024 if self._tuner is not None \
                else _autotune.DEFAULT_KB * 1024
        if self._device.type == "cuda":
            from .cuda import DeviceFusion
            if compression is not None:
                # libtnt's compressed buckets live in host memory; a device
                # variant would narrow on the GPU and rely on NCCL's 16-bit
                # sums, which round at every hop.
                raise UnsupportedError("GradientReducer: compression=%r is not supported for "
                                       "CUDA parameters; use compression=None on the GPU, or "
                                       "train on the CPU" % compression)
            self._fusion = DeviceFusion(self._params, threshold, self._device) \
                if use_engine else None
        else:
            self._fusion = _tnt.Fusion(descs, threshold, _tnt.SUM,
                                       COMPRESSIONS[compression]) if use_engine else None
        self._num_buckets = (self._fusion.num_buckets if use_engine else
                             _tnt.fusion_plan(descs, _env_threshold(threshold))[1])
        self._threshold = threshold
        self._tuning_requested = tune
        if tune and self._tuner is None:
            _notice_once("tarantella: fusion threshold auto: not tuned, using %d KiB: %s"
                         % (_autotune.DEFAULT_KB, self._tuning_note))
        self._scale = 1.0 / self._size
        self._sync = True
        n = len(self._params)
        # Per step: marked[i] says tensor i was handed to libtnt; inflight[i]
        # keeps its gradient (and, for a strided gradient, the contiguous copy
        # libtnt works on) alive until synchronize().
        self._marked = [False] * n
        self._inflight = [None] * n
        # Flat, plan-ordered gradient storage (see the module docstring):
        # installed after the first synchronize(); None entries are
        # parameters that keep their own .grad (not plain contiguous).
        self._flat_enabled = self._fusion is not None
        self._flat = None
        self._views = None
        self._hooks = []
        self._acc_nodes = []
        for i, p in enumerate(self._params):
            # torch 1.13 has no register_post_accumulate_grad_hook: hook the
            # AccumulateGrad node, which runs once per backward after the
            # incoming gradients are summed into p.grad. We keep the node
            # alive; otherwise torch would drop it and create a fresh one.
            node = p.expand_as(p).grad_fn.next_functions[0][0]
            self._hooks.append(node.register_hook(self._make_hook(i)))
            self._acc_nodes.append(node)

    def _start_tuning(self, descs, use_engine, tuner, steps):
        """(tuner or None, why not tuned or None). Tuning needs an engine
        to time, something to choose from, and bucket sizes that cannot
        change the results (docs/tuning.md, "Same results")."""
        if tuner is not None:
            # A tnt.Model's tuning from an earlier fit: go on (or keep its
            # choice), with the next step untimed.
            tuner.restart_clock()
            return tuner, None
        candidates = _autotune.distinct_candidates(descs)
        if not use_engine:
            return None, "one rank: there is no allreduce to tune"
        if self._device.type == "cuda":
            return None, ("the model is on a GPU, where NCCL's reduction order follows the "
                          "message size, so other buckets would change the results")
        if len(candidates) < 2:
            return None, "every candidate size gives the same buckets for this model"
        if not _tnt.allreduce_order_fixed():
            return None, ("with %d nodes the inter-node allreduce algorithm follows the "
                          "bucket size, and with it the order in which the nodes' sums "
                          "are added, so another size would change the results; set "
                          "TNT_ALLREDUCE_ALGO=rabenseifner (or recursive_doubling, tree) to "
                          "tune" % _tnt.num_nodes())
        return _autotune.FusionTuner(candidates, steps), None

    # -- configuration -----------------------------------------------------

    @property
    def fusion_threshold_kb(self):
        """The bucket size in use, in KiB (while tuning: the size being
        timed)."""
        if self._tuner is not None:
            return self._tuner.current_kb
        threshold = _env_threshold(self._threshold)
        return _autotune.DEFAULT_KB if threshold is None else threshold // 1024

    @property
    def fusion_tuning(self):
        """None without ``auto``; else a dict: ``candidates_kb``,
        ``step_s`` (the agreed step time of each, None until decided),
        ``chosen_kb`` (None while tuning), ``steps_per_candidate``, and
        ``not_tuned`` (why the default was kept without timing, or None)."""
        if self._tuner is not None:
            return dict(self._tuner.summary(), not_tuned=None)
        if self._tuning_requested:
            return {"candidates_kb": [_autotune.DEFAULT_KB], "step_s": None,
                    "chosen_kb": _autotune.DEFAULT_KB, "steps_per_candidate": 0,
                    "not_tuned": self._tuning_note}
        return None

    @property
    def tuner(self):
        """The tuning state (tnt.Model hands it to the next fit's reducer)."""
        return self._tuner

    @property
    def parameters(self):
        """The parameters in plan order (reverse registration order)."""
        return list(self._params)

    @property
    def compression(self):
        """None, "bf16" or "fp16", as passed to the constructor."""
        return self._compression

    @property
    def num_buckets(self):
        return self._num_buckets

    @property
    def scale(self):
        return self._scale

    def set_scale(self, scale):
        """Weight of this rank's gradient in the sum for the coming backward
        (set it before backward). Default ``1/size`` (average)."""
        self._scale = float(scale)

    def set_micro_batch(self, local_count, global_count):
        """Sets the scale to ``local_count / global_count`` (0 for an empty
        step), which makes the reduced gradient the serial mean-loss gradient
        over the global batch when each rank's loss is a mean."""
        self._scale = float(local_count) / float(global_count) if global_count else 0.0

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside the block only accumulate gradients locally
        (gradient accumulation); the first backward after it reduces the
        accumulated gradients."""
        previous = self._sync
        self._sync = False
        try:
            yield
        finally:
            self._sync = previous

    # -- per step ----------------------------------------------------------

    def _make_hook(self, i):
        # The hook holds the reducer weakly: torch keeps hooks in C++ where
        # Python's GC cannot see the cycle reducer -> node -> hook -> reducer,
        # which would keep every reducer (and its fusion engine) alive.
        ref = weakref.ref(self)

        def hook(grad_inputs, grad_outputs):
            reducer = ref()
            if reducer is not None and reducer._sync:
                reducer._mark(i, from_backward=True)
        return hook

    def _mark(self, i, from_backward=False):
        if self._marked[i]:
            if from_backward:
                raise RuntimeError(
                    "tarantella: a second backward pass produced the gradient of parameter "
                    "%d before the optimizer step; wrap all but the last backward of a step "
                    "in no_sync(), or call synchronize() in between" % i)
            return
        p = self._params[i]
        g = p.grad
        if g is None:
            # Unused parameter, or no samples on this rank: contribute zeros.
            g = torch.zeros_like(p, memory_format=torch.contiguous_format)
            p.grad = g
        if g.is_sparse:
            raise UnsupportedError(
                "tarantella: parameter %d has a sparse gradient (e.g. Embedding(sparse=True)); "
                "the fused allreduce needs dense gradients, use sparse=False" % i)
        if g.is_contiguous():
            work = g
        else:
            work = g.contiguous()
        self._inflight[i] = (g, work)
        self._marked[i] = True
        if self._fusion is not None and self._device.type == "cuda":
            self._fusion.mark_ready(i, work, self._scale)
        elif self._fusion is not None:
            self._fusion.mark_ready(i, work.data_ptr(), self._scale)
        elif self._scale != 1.0:
            # One rank: the "sum over ranks" is this rank's scaled gradient.
            with torch.no_grad():
                work.mul_(self._scale)

    @property
    def pending(self):
        """True when some gradient was handed to libtnt and not yet waited for."""
        return any(self._marked)

    def synchronize(self):
        """Contributes every gradient backward did not mark (zeros where
        ``.grad`` is None) and waits until all are reduced into ``p.grad``.
        A timeline records this wait as ``synchronize``."""
        start = _tnt.timeline_now() if _tnt.timeline_active() else 0
        try:
            for i in range(len(self._params)):
                if not self._marked[i]:
                    self._mark(i)
            if self._fusion is not None:
                self._fusion.wait()
            for i, item in enumerate(self._inflight):
                g, work = item
                if work is not g:
                    g.copy_(work)
            self._install_flat_grads()
            if self._tuner is not None and not self._tuner.done and self._fusion is not None:
                self._tune_step()
        finally:
            self._marked = [False] * len(self._params)
            self._inflight = [None] * len(self._params)
            if start:
                _timeline.record_synchronize(start, _tnt.timeline_now())

    def _tune_step(self):
        """Times the step that just ended and, when the current size has
        its steps, moves to the next one or (after the last) agrees on the
        choice. Runs on every rank at the same synchronize, so the engines
        are rebuilt, and the timings max-allreduced, collectively."""
        tuner = self._tuner
        action = tuner.step_done()
        if action is None:
            return
        before = tuner.current_kb
        if action == "next":
            tuner.advance()
        else:
            # The slowest rank's median per size: libtnt gives every rank
            # the same bits, so every rank chooses the same size.
            agreed = np.array(tuner.local_medians(), dtype=np.float64)
            _tnt.allreduce(agreed, None, _tnt.FLOAT64, _tnt.MAX)
            tuner.decide(agreed.tolist())
            out(_autotune.format_choice(tuner.summary()))
        if tuner.current_kb != before:
            # The flat gradient buffer is laid out in plan order, which does
            # not depend on the bucket size, so the views stay valid and
            # the new engine reduces its buckets in place as the old did.
            self._fusion.close()
            self._fusion = _tnt.Fusion(self._descs, tuner.current_kb * 1024, _tnt.SUM,
                                       COMPRESSIONS[self._compression])
            self._num_buckets = self._fusion.num_buckets
        self._threshold = tuner.current_kb * 1024
        tuner.restart_clock()

    def _install_flat_grads(self):
        """Makes every plain contiguous ``p.grad`` a view into one flat buffer
        per dtype, in plan order, so that each fusion bucket is one
        contiguous range (reduced in place, no staging copies). Runs after
        the reduction, so it copies values once, at the first step; later
        steps find the views in place. When the caller replaced a gradient
        since (set_to_none, assignment), the flat storage is given up."""
        if not self._flat_enabled:
            return
        if self._views is None:
            totals, offsets = {}, []
            for p in self._params:
                if p.layout != torch.strided or not p.is_contiguous():
                    offsets.append(None)
                    continue
                offsets.append(totals.get(p.dtype, 0))
                totals[p.dtype] = offsets[-1] + p.numel()
            adopted = self._adopt_flat(totals, offsets)
            if adopted is not None:
                # A previous reducer over the same parameters (an earlier
                # fit) left them there: nothing to allocate or copy.
                self._flat, self._views = adopted
                return
            # On the parameters' device: a CPU buffer cannot hold the
            # gradients of a model on the GPU.
            self._flat = {dt: torch.zeros(n, dtype=dt, device=self._device)
                          for dt, n in totals.items()}
            self._views = [None if off is None else
                           self._flat[p.dtype][off:off + p.numel()].view(p.shape)
                           for p, off in zip(self._params, offsets)]
            first = True
        else:
            first = False
        with torch.no_grad():
            for p, v in zip(self._params, self._views):
                if v is None:
                    continue
                g = p.grad
                if g is not None and g.data_ptr() == v.data_ptr():
                    continue
                if not first:
                    # The caller replaced the views: keep its tensors.
                    self._flat_enabled = False
                    self._flat = self._views = None
                    return
                if g is not None:
                    v.copy_(g)
                p.grad = v

    def _adopt_flat(self, totals, offsets):
        """(flat, views) when every plain gradient already is the view this
        plan would make, into one flat buffer per dtype of exactly this
        layout (the storage an earlier reducer over the same parameters
        installed); otherwise None."""
        flat, views = {}, []
        for p, off in zip(self._params, offsets):
            if off is None:
                views.append(None)
                continue
            g = p.grad
            base = getattr(g, "_base", None) if g is not None else None
            if (base is None or g.dtype != p.dtype or g.shape != p.shape or
                    not g.is_contiguous() or base.dim() != 1 or base.dtype != p.dtype or
                    not base.is_contiguous() or base.numel() != totals[p.dtype] or
                    flat.setdefault(p.dtype, base) is not base or
                    g.data_ptr() != base.data_ptr() + off * base.element_size()):
                return None
            views.append(g)
        return flat, views

    def close(self):
        """Removes the hooks and destroys the fusion engine."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._acc_nodes = []
        if self._fusion is not None:
            self._fusion.close()


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps a torch optimizer for data-parallel training.

    ``step()`` waits for the overlapped gradient allreduce (see
    :class:`GradientReducer`), then steps the wrapped optimizer; everything
    else (``zero_grad``, ``param_groups``, ``state_dict``, LR schedulers)
    goes to the wrapped optimizer. ``model``: the module whose parameters to
    reduce (default: the optimizer's parameters). ``compression``: None,
    ``"bf16"`` or ``"fp16"``, as for :class:`GradientReducer` (ignored, and
    must be None, when ``reducer`` is given: set it on that reducer).
    Collective to construct.
    """

    def __init__(self, optimizer, model=None, threshold_kb=None, reducer=None, compression=None):
        # No Optimizer.__init__: the wrapped optimizer owns param_groups and
        # state; subclassing only makes isinstance() checks (LR schedulers)
        # accept the wrapper.
        self._optimizer = optimizer
        check_compression(compression, "DistributedOptimizer")
        if reducer is None:
            reducer = GradientReducer(model if model is not None else optimizer.param_groups,
                                      threshold_kb=threshold_kb, compression=compression)
        elif compression is not None and compression != reducer.compression:
            raise InvalidArgumentError("DistributedOptimizer: compression=%r differs from the "
                                       "given reducer's (%r); pass it to GradientReducer"
                                       % (compression, reducer.compression))
        self._reducer = reducer
        # synchronize() / skip_synchronize(), as in Horovod: see step().
        self._should_synchronize = True
        self._synchronized = False
        self._warned_resync = False

    @property
    def optimizer(self):
        return self._optimizer

    @property
    def reducer(self):
        return self._reducer

    @property
    def param_groups(self):
        return self._optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self._optimizer.param_groups = value

    @property
    def state(self):
        return self._optimizer.state

    @state.setter
    def state(self, value):
        self._optimizer.state = value

    @property
    def defaults(self):
        return self._optimizer.defaults

    @defaults.setter
    def defaults(self, value):
        self._optimizer.defaults = value

    def set_scale(self, scale):
        self._reducer.set_scale(scale)

    def set_micro_batch(self, local_count, global_count):
        self._reducer.set_micro_batch(local_count, global_count)

    def no_sync(self):
        return self._reducer.no_sync()

    def synchronize(self):
        """Waits until the gradients of the last backward are reduced (every
        ``p.grad`` then holds the global gradient, the same on every rank),
        so they can be clipped or inspected before the step. Step with
        ``with optimizer.skip_synchronize(): optimizer.step()``."""
        self._reducer.synchronize()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """``step()`` inside the block does not synchronize: use it after
        ``synchronize()``, so the gradients are not reduced a second time::

            loss.backward()
            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            with optimizer.skip_synchronize():
                optimizer.step()
        """
        previous = self._should_synchronize
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = previous

    def step(self, closure=None):
        if not self._should_synchronize:
            if self._reducer.pending:
                raise RuntimeError(
                    "DistributedOptimizer.step() inside skip_synchronize() while gradients are "
                    "still being reduced; call optimizer.synchronize() after backward and "
                    "before the skip_synchronize() block")
            self._synchronized = False
            return self._optimizer.step(closure)
        if self._synchronized and not self._reducer.pending:
            # Already reduced by synchronize(): reducing again would cost a
            # second allreduce for the same values (Horovod reduces again
            # and warns; here the step just goes on, and warns once).
            self._synchronized = False
            if not self._warned_resync:
                self._warned_resync = True
                warnings.warn("DistributedOptimizer.step() after synchronize() without "
                              "skip_synchronize(): the gradients are already reduced and are "
                              "not reduced again; write `with optimizer.skip_synchronize(): "
                              "optimizer.step()`", stacklevel=2)
            return self._optimizer.step(closure)
        self._synchronized = False
        if closure is None:
            self._reducer.synchronize()
            return self._optimizer.step()
        if self._reducer.pending:
            self._reducer.synchronize()

        def synced_closure():
            with torch.enable_grad():
                loss = closure()
            self._reducer.synchronize()
            return loss
        return self._optimizer.step(synced_closure)

    def zero_grad(self, set_to_none=False):
        return self._optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self._optimizer.state_dict()

    def load_state_dict(self, state_dict):
        return self._optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group):
        raise InvalidArgumentError("DistributedOptimizer: parameters cannot be added after "
                                   "construction (the fusion plan is fixed); build the "
                                   "optimizer with all parameter groups first")

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        return "DistributedOptimizer(%r)" % (self._optimizer,)


def _broadcast_tensors(tensors, root):
    """Broadcasts tensors in place from root, one collective per dtype group."""
    groups = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    for dtype in sorted(groups, key=str):
        group = groups[dtype]
        flat = torch.cat([t.detach().reshape(-1) for t in group]) if len(group) > 1 \
            else group[0].detach().reshape(-1).clone()
        if dtype == torch.bfloat16:
            buf = flat.view(torch.int16).numpy()
        else:
            buf = flat.numpy()
        _tnt.broadcast(buf.view(np.uint8), root)
        offset = 0
        with torch.no_grad():
            for t in group:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view(t.shape))
                offset += n


def broadcast_parameters(module_or_tensors, root=0):
    """Overwrites every parameter and buffer of ``module_or_tensors`` (a
    ``torch.nn.Module``, a state dict, or an iterable of tensors) with the
    root rank's values. Collective; raises MismatchError when the ranks'
    models differ in structure."""
    _tnt.init()
    if isinstance(module_or_tensors, torch.nn.Module):
        tensors = [p for _, p in module_or_tensors.named_parameters()] + \
                  [b for _, b in module_or_tensors.named_buffers()]
    elif isinstance(module_or_tensors, dict):
        tensors = [v for v in module_or_tensors.values() if isinstance(v, torch.Tensor)]
    else:
        tensors = list(module_or_tensors)
    size = _tnt.size()
    if not 0 <= int(root) < size:
        raise InvalidArgumentError("broadcast_parameters: root %r is not a rank" % (root,))
    if size == 1:
        return
    # Structure check: number of tensors, total elements and a digest of the
    # shapes and dtypes must agree with the root's.
    # (str hashes are salted per process, so use a real digest.)
    # (The device type joins the digest for CUDA tensors only, so that CPU
    # descriptors are unchanged; ranks must agree on where each tensor is,
    # or their collectives would not match.)
    text = ";".join("%s:%s%s" % (tuple(t.shape), t.dtype, ":cuda" if t.is_cuda else "")
                    for t in tensors).encode()
    digest = int.from_bytes(hashlib.sha1(text).digest()[:7], "little")
    total = sum(t.numel() for t in tensors)
    _check_agree(_K_PARAMS, (len(tensors), total, digest), 0, int(root),
                 root=int(root))
    for t in tensors:
        if t.device.type not in ("cpu", "cuda"):
            raise InvalidArgumentError("broadcast_parameters: tensor on %s; only CPU and CUDA "
                                       "tensors are supported" % t.device)
    # Same order of collectives on every rank: the structure check above
    # guarantees the same tensors, hence the same CPU/CUDA split.
    _broadcast_tensors([t for t in tensors if t.device.type == "cpu"], int(root))
    cuda_tensors = [t for t in tensors if t.device.type == "cuda"]
    if cuda_tensors:
        from .cuda import broadcast_tensors
        broadcast_tensors(cuda_tensors, int(root))

