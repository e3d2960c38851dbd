"""CUDA tensors: collectives on device memory and the device-side gradient
buckets behind GradientReducer.

Nothing here imports torch.cuda state at import time and the C extension
links no CUDA library, so ``import tarantella`` works on CPU-only machines;
a CUDA tensor reaching a collective is the first thing that touches the
GPU. Each call passes the tensor's ``data_ptr()`` and the handle of the
current CUDA stream of its device to libtnt, which enqueues the collective
on that stream (NCCL, or chunks staged through pinned host memory; see
docs/gpu.md). Results are therefore stream-ordered exactly like a torch
kernel: later work on the stream sees them, the host does not wait.
"""
import hashlib

import torch

from . import _tnt
from ._protocol import (_K_ALLGATHER, _K_ALLREDUCE, _K_BROADCAST, _K_PARAMS, _check_agree,
                        tensor_dtype_code)
from .errors import InvalidArgumentError

__all__ = ["local_device", "transport", "synchronize"]


def local_device():
    """The GPU of this rank: ``cuda:0`` when the launcher or the SLURM plugin
    gave each rank its own GPU through CUDA_VISIBLE_DEVICES (one visible
    device), else ``cuda:<local rank mod visible devices>``."""
    _tnt.init()
    n = torch.cuda.device_count()
    if n == 0:
        raise InvalidArgumentError(
            "no CUDA device is visible to rank %d; check nvidia-smi, CUDA_VISIBLE_DEVICES and "
            "srun --gpus-per-task" % _tnt.rank())
    return torch.device("cuda", _tnt.local_rank() % n if n > 1 else 0)


def transport():
    """'nccl' or 'host' once a device collective has run, else 'none'."""
    return _tnt.device_transport()


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream


def synchronize(device=None):
    """Waits for the current stream of ``device`` (default: the current
    device), for at most TNT_TIMEOUT seconds; an NCCL error or a timeout
    aborts NCCL so that no rank hangs, and raises."""
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else device
    with torch.cuda.device(device):
        _tnt.device_synchronize(_stream(device))


def _check_tensor(t, what):
    code = tensor_dtype_code(t, what)
    if not t.is_contiguous():
        raise InvalidArgumentError("%s: tensor is not contiguous (strides %s); call "
                                   ".contiguous() first" % (what, tuple(t.stride())))
    return code


def allreduce_(x, code_op, check):
    code = _check_tensor(x, "allreduce_")
    if check:
        _check_agree(_K_ALLREDUCE, x.shape, code, code_op)
    with torch.cuda.device(x.device):
        _tnt.allreduce_device(x.data_ptr(), x.data_ptr(), x.numel(), code, code_op,
                              _stream(x.device))
    return x


def allreduce(x, code_op, check):
    code = _check_tensor(x, "allreduce")
    if check:
        _check_agree(_K_ALLREDUCE, x.shape, code, code_op)
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    with torch.cuda.device(x.device):
        _tnt.allreduce_device(x.data_ptr(), out.data_ptr(), x.numel(), code, code_op,
                              _stream(x.device))
    return out


def broadcast_(x, root, check):
    code = _check_tensor(x, "broadcast_")
    if check:
        _check_agree(_K_BROADCAST, x.shape, code, root, root=root)
    with torch.cuda.device(x.device):
        _tnt.broadcast_device(x.data_ptr(), x.numel() * x.element_size(), root,
                              _stream(x.device))
    return x


def allgather(x, check):
    code = _check_tensor(x, "allgather")
    if check:
        _check_agree(_K_ALLGATHER, x.shape, code, 0)
    out = torch.empty((_tnt.size(),) + tuple(x.shape), dtype=x.dtype, device=x.device)
    with torch.cuda.device(x.device):
        _tnt.allgather_device(x.data_ptr(), out.data_ptr(), x.numel() * x.element_size(),
                              _stream(x.device))
    return out


def broadcast_tensors(tensors, root):
    """Broadcasts CUDA tensors in place from root: one flat device buffer
    per (device, dtype) group, like the CPU path."""
    groups = {}
    for t in tensors:
        groups.setdefault((t.device, t.dtype), []).append(t)
    for device, dtype in sorted(groups, key=str):
        group = groups[(device, dtype)]
        flat = torch.cat([t.detach().reshape(-1) for t in group])
        with torch.cuda.device(device):
            _tnt.broadcast_device(flat.data_ptr(), flat.numel() * flat.element_size(),
                                  int(root), _stream(device))
        offset = 0
        with torch.no_grad():
            for t in group:
                n = t.numel()
                t.copy_(flat[offset:offset + n].view(t.shape))
                offset += n


class DeviceFusion:
    """Fused gradient allreduce of CUDA parameters (GradientReducer's engine
    when the model is on a GPU).

    The same plan as libtnt's host fusion engine (``_tnt.fusion_plan``:
    buckets in backward order, closed by the threshold or a dtype change),
    with one flat staging buffer per bucket of several tensors, allocated
    once here. When a bucket's last gradient is marked (from the backward
    hooks), its scaled copy-in (one ``torch.mul(..., out=)`` kernel per
    tensor, which applies this rank's weight), the allreduce and the copy
    back are enqueued on the current stream, strictly in bucket order, so
    the buckets overlap the rest of backward on the GPU. ``wait()`` only
    enqueues what backward did not (every rank has then issued the same
    collectives in the same order); the optimizer's kernels, later on the
    same stream, run after the reduction without the host waiting.
    """

    def __init__(self, params, threshold, device):
        self._device = device
        descs = [(p.numel(), tensor_dtype_code(p, "GradientReducer parameter")) for p in params]
        bucket_of, num_buckets = _tnt.fusion_plan(descs, threshold)
        # Every rank must have the same plan: same check as the host engine.
        text = ";".join("%d:%d" % d for d in descs).encode() + b"|%d" % num_buckets
        digest = int.from_bytes(hashlib.sha1(text).digest()[:7], "little")
        _check_agree(_K_PARAMS, (len(descs), num_buckets, digest), 0, 0)
        self._num_buckets = num_buckets
        self._bucket_of = list(bucket_of)
        self._members = [[] for _ in range(num_buckets)]
        for i, b in enumerate(bucket_of):
            self._members[b].append(i)
        self._codes = [d[1] for d in descs]
        self._staging = []
        self._offsets = []
        for members in self._members:
            if len(members) > 1:
                total = sum(params[i].numel() for i in members)
                self._staging.append(torch.empty(total, dtype=params[members[0]].dtype,
                                                 device=device))
                offs, o = [], 0
                for i in members:
                    offs.append(o)
                    o += params[i].numel()
                self._offsets.append(offs)
            else:
                self._staging.append(None)
                self._offsets.append(None)
        self._reset()

    @property
    def num_buckets(self):
        return self._num_buckets

    def _reset(self):
        self._work = [None] * len(self._codes)
        self._scale = [1.0] * len(self._codes)
        self._left = [len(m) for m in self._members]
        self._next = 0

    def mark_ready(self, i, work, scale):
        self._work[i] = work
        self._scale[i] = scale
        self._left[self._bucket_of[i]] -= 1
        self._launch_ready()

    def _launch_ready(self):
        while self._next < self._num_buckets and self._left[self._next] == 0:
            self._launch(self._next)
            self._next += 1

    def _launch(self, b):
        members = self._members[b]
        stream = _stream(self._device)
        with torch.cuda.device(self._device), torch.no_grad():
            staging = self._staging[b]
            if staging is None:
                i = members[0]
                g = self._work[i]
                if self._scale[i] != 1.0:
                    g.mul_(self._scale[i])
                _tnt.allreduce_device(g.data_ptr(), g.data_ptr(), g.numel(), self._codes[i],
                                      _tnt.SUM, stream)
                return
            for i, off in zip(members, self._offsets[b]):
                g = self._work[i]
                torch.mul(g.reshape(-1), self._scale[i], out=staging[off:off + g.numel()])
            _tnt.allreduce_device(staging.data_ptr(), staging.data_ptr(), staging.numel(),
                                  self._codes[members[0]], _tnt.SUM, stream)
            for i, off in zip(members, self._offsets[b]):
                g = self._work[i]
                g.view(-1).copy_(staging[off:off + g.numel()])

    def wait(self):
        try:
            self._launch_ready()
            if self._next != self._num_buckets:
                raise InvalidArgumentError("GradientReducer: %d bucket(s) were never complete"
                                           % (self._num_buckets - self._next))
        finally:
            self._reset()

    def close(self):
        self._staging = []


def place_module(module, device=None):
    """Where tnt.Model keeps ``module``, moving it there: ``device`` when
    given; otherwise the GPU its parameters are already on (the user placed
    it); otherwise this rank's GPU (:func:`local_device`) when CUDA is
    available; otherwise the CPU, where nothing is moved."""
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = local_device()
        module.to(device)
        return device
    for p in list(module.parameters()) + list(module.buffers()):
        if p.device.type != "cpu":
            return p.device
    if torch.cuda.is_available():
        device = local_device()
        module.to(device)
        return device
    return torch.device("cpu")


def to_device(obj, device):
    """Moves a batch (tensor, or tuple/list/dict of them) to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj
