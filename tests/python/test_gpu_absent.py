"""The device path on a machine without a GPU (or a build without CUDA):
the package imports, tnt.Model keeps a CPU model on the CPU, and the
extension's device calls raise UnsupportedError naming what is missing
instead of crashing. Skipped where a GPU exists (test_gpu.py runs there)."""
import shutil
import subprocess

import pytest
import torch

import tarantella as tnt  # noqa: E402
from tarantella import _tnt
from tarantella.errors import UnsupportedError


def _have_gpu():
    if shutil.which("nvidia-smi") is None:
        return False
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and out.stdout.startswith("GPU ")


pytestmark = pytest.mark.skipif(_have_gpu(), reason="this machine has a GPU")


def test_device_call_is_unsupported():
    tnt.init()
    with pytest.raises(UnsupportedError) as info:
        _tnt.allreduce_device(4096, 4096, 4, _tnt.FLOAT32, _tnt.SUM, 0)
    msg = str(info.value)
    assert "no usable GPU" in msg or "built without CUDA" in msg, msg
    assert _tnt.device_transport() == "none"
    # The host collectives still work after the failed device call.
    assert tnt.allreduce(3) == 3


def test_model_stays_on_cpu():
    m = tnt.Model(torch.nn.Linear(2, 2))
    assert m.device == torch.device("cpu")
    assert all(p.device.type == "cpu" for p in m.parameters())


def test_reducer_rejects_mixed_devices():
    # "meta" stands in for a second device on a CPU-only torch.
    a = torch.nn.Parameter(torch.zeros(2))
    b = torch.nn.Parameter(torch.zeros(2, device="meta"))
    with pytest.raises(tnt.InvalidArgumentError, match="one GPU"):
        tnt.GradientReducer([a, b])
