"""CUDA tensors through the "tnt" torch.distributed backend, against the GPU
TEST DOUBLE only (docs/torch-distributed.md, "CUDA tensors"; never counted
as a GPU run): 2 ranks through the launcher, on the double's NCCL (each
rank its own device) and host-staged (both ranks on one device, 64 KiB
chunks), run ranks/tnt_backend_gpu_double.py, which checks allreduce (every
op, six dtypes), broadcast, reduce, allgather, reduce_scatter, gather,
scatter, the all-to-alls (equal and uneven splits), their tensor forms and
send/recv (tags, any source) against a serial reference, the caller's
stream, and what the backend refuses at the call.

Exits 77 (ctest: skipped) where it cannot run: no GPU test double
(TNT_WITH_CUDA off), the backend not built, or a torch with CUDA (the
double stands in for CUDA in a torch without it; with CUDA, python.gpu's
real-GPU checks are the ones that count).
"""
import glob
import os

import pytest
import torch

from conftest import check, launch  # noqa: F401  (launch: the fixture's helper)

DOUBLE_DIR = os.environ.get("TNT_GPU_DOUBLE_DIR", "")


def _why_not():
    if not DOUBLE_DIR or not glob.glob(os.path.join(DOUBLE_DIR, "libcudart.so.*")):
        return ("no GPU test double built (configure found no CUDA toolkit and NCCL headers: "
                "TNT_WITH_CUDA off)")
    if os.environ.get("TNT_TORCH_BACKEND_BUILT") == "OFF":
        return "the tnt torch backend (tarantella._tnt_torch) was not built"
    if torch.version.cuda is not None:
        return ("this torch has CUDA; the GPU test double is for torch without it (python.gpu "
                "checks CUDA tensors on a real GPU)")
    return None


@pytest.fixture(autouse=True, scope="module")
def _runnable():
    """Ends the session with status 77, which ctest reports as skipped
    (pytest.exit at import time would count as a collection error)."""
    why = _why_not()
    if why:
        pytest.exit("skipped: " + why, returncode=77)


@pytest.mark.parametrize("transport,gpus", [("nccl", "a,b"), ("host", "a")])
def test_cuda_tensors_through_the_device_path(launch, transport, gpus):
    env = {"LD_LIBRARY_PATH": DOUBLE_DIR, "TNT_CUDA_DOUBLE_GPUS": gpus,
           "TNT_GPU_STAGING_KB": 64, "TNT_GPU_TRANSPORT": None,
           "RANK": None, "WORLD_SIZE": None, "LOCAL_RANK": None, "MASTER_ADDR": None,
           "MASTER_PORT": None}
    out = check(launch(2, "tnt_backend_gpu_double.py", transport, timeout=240, env=env),
                "tnt_backend_gpu_double (%s)" % transport)
    for rank in range(2):
        assert ("tnt_backend_gpu_double: rank %d of 2 passed" % rank in out
                and "(transport %s)" % transport in out), out
