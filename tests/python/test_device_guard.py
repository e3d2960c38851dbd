"""torch.cuda.set_device with a device the rank cannot see fails with a
message naming tnt.cuda.local_device() (issue 25, point 2), and changes
nothing else. Runs against a CUDA TEST DOUBLE (device_count and torch's
device switch monkeypatched; this machine has no GPU): it checks the
wrapper's logic, not a GPU."""
import pytest
import torch

import tarantella as tnt
from conftest import check


class _CudaDouble:
    """torch.cuda seen as `count` visible devices; records the indices
    handed to torch's device switch, which fails as CUDA does."""

    def __init__(self, monkeypatch, count):
        self.count = count
        self.calls = []
        monkeypatch.setattr(torch.cuda, "device_count", lambda: self.count)
        monkeypatch.setattr(torch._C, "_cuda_setDevice", self._set, raising=False)

    def _set(self, index):
        if index >= self.count:
            raise RuntimeError("CUDA error: invalid device ordinal")
        self.calls.append(index)


def test_index_beyond_the_visible_devices_names_the_fix(monkeypatch):
    cuda = _CudaDouble(monkeypatch, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    for device in (1, "cuda:1", torch.device("cuda", 1)):
        with pytest.raises(tnt.DeviceIndexError) as info:
            torch.cuda.set_device(device)
        msg = str(info.value)
        assert "tnt.cuda.local_device()" in msg, msg
        assert "sees 1 CUDA device" in msg and "CUDA_VISIBLE_DEVICES=3" in msg, msg
    # Caught by what caught torch's own error, and by tarantella's.
    assert issubclass(tnt.DeviceIndexError, RuntimeError)
    assert issubclass(tnt.DeviceIndexError, tnt.InvalidArgumentError)
    assert cuda.calls == []


def test_visible_devices_pass_through(monkeypatch):
    cuda = _CudaDouble(monkeypatch, 2)
    torch.cuda.set_device(0)
    torch.cuda.set_device("cuda:1")
    torch.cuda.set_device(torch.device("cuda", 1))
    torch.cuda.set_device(-1)  # torch's no-op
    assert cuda.calls == [0, 1, 1]
    torch.cuda.set_device(tnt.cuda.local_device())  # the documented form
    assert cuda.calls[-1] == 0


def test_no_visible_device_keeps_torchs_error(monkeypatch):
    # No GPU at all: nothing to point at; torch's own error stands.
    cuda = _CudaDouble(monkeypatch, 0)
    with pytest.raises(RuntimeError, match="invalid device ordinal") as info:
        torch.cuda.set_device(0)
    assert not isinstance(info.value, tnt.TarantellaError)
    assert cuda.calls == []


def test_wrapped_once():
    from tarantella import _device_guard
    wrapped = torch.cuda.set_device
    _device_guard.install()
    assert torch.cuda.set_device is wrapped
    assert wrapped.__wrapped__.__module__ == "torch.cuda"


@pytest.mark.parametrize("order", ["torch-first", "tnt-first"])
def test_literal_horovod_port_on_two_ranks(launch, order):
    # torch.cuda.set_device(tnt.get_local_rank()) on 2 ranks of one node,
    # whether torch or tarantella is imported first: rank 1 stops with the
    # fix instead of "invalid device ordinal".
    rc, out, err = launch(2, "device_guard_port.py", "literal", order, timeout=120)
    assert rc != 0, out + err
    assert "DeviceIndexError" in err and "torch.cuda.set_device(1)" in err, err
    assert "tnt.cuda.local_device()" in err and "local rank (1)" in err, err
    assert "invalid device ordinal" not in err, err


def test_documented_form_on_two_ranks(launch):
    out = check(launch(2, "device_guard_port.py", "fixed", "tnt-first", timeout=120))
    assert "rank 0 set device 0" in out and "rank 1 set device 0" in out, out
