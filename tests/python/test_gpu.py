"""GPU tests (ctest label gpu): CUDA tensors through tnt.allreduce /
broadcast / allgather (every dtype x op, in place and out of place), the
device gradient reducer against serial training, tnt.Model serial
equivalence on GPU (1 rank vs 2 ranks), and mixed precision (autocast with
GradScaler in fp16, bf16). Several ranks on a one-GPU machine share it, so
they exercise the host-staged path; one rank per GPU exercises NCCL.

Skipped where nvidia-smi finds no GPU (ctest reports them as skipped through
tests/integration/gpu_skip.sh; pytest marks them skipped)."""
import shutil
import subprocess

import numpy as np
import pytest

from conftest import check


def _have_gpu():
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.startswith("GPU ")


pytestmark = pytest.mark.skipif(not _have_gpu(), reason="nvidia-smi finds no GPU")


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("transport", ["auto", "host"])
def test_collectives(launch, n, transport):
    check(launch(n, "gpu_checks.py", "collectives", timeout=300,
                 env={"TNT_GPU_TRANSPORT": transport}), "gpu collectives")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_reducer_matches_serial(launch, n):
    check(launch(n, "gpu_checks.py", "reducer", timeout=300), "gpu reducer")


def test_model_serial_equivalence(launch, tmp_path):
    one, two = tmp_path / "one.npz", tmp_path / "two.npz"
    check(launch(1, "gpu_checks.py", "model", one, timeout=300), "model on 1 rank")
    check(launch(2, "gpu_checks.py", "model", two, timeout=300), "model on 2 ranks")
    a, b = np.load(one), np.load(two)
    # An empty or partial file must not pass by having nothing to compare.
    assert a.files and sorted(a.files) == sorted(b.files), (a.files, b.files)
    for k in a.files:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["fp16", "bf16"])
def test_amp(launch, kind):
    check(launch(2, "gpu_checks.py", "amp", kind, timeout=300), "amp " + kind)


def _tnt_backend_built():
    from tarantella import torch_backend
    return torch_backend.available()


@pytest.mark.parametrize("n", [1, 2])
def test_tnt_backend_cuda_tensors(launch, n):
    """torch.distributed with backend "tnt" on CUDA tensors, DDP included
    (ranks/tnt_backend_cuda.py): one rank alone on the GPU, two sharing it
    (host-staged, 64 KiB chunks)."""
    if not _tnt_backend_built():
        pytest.skip("the tnt torch backend (tarantella._tnt_torch) is not built")
    # A CUDA torch is a pip torch 2.x today, which the backend refuses
    # unless asked (docs/torch-distributed.md, "Which torch"); what this
    # test checks passed on torch 2.11.
    env = {"TNT_GPU_STAGING_KB": 64, "TNT_ALLOW_UNTESTED_TORCH": 1}
    out = check(launch(n, "tnt_backend_cuda.py", timeout=300, env=env),
                "tnt backend on CUDA tensors")
    for r in range(n):
        assert "tnt_backend_cuda: rank %d of %d passed" % (r, n) in out, out
