"""tarantella collectives, rank API and errors.

Single-rank checks run in the pytest process (plain ``import tarantella`` is a
singleton); multi-rank checks run rank scripts through the launcher."""
import re
import subprocess

import numpy as np
import pytest
import torch

from conftest import LAUNCHER_ENV_VARS, PYTHON, check, tnt_env

import tarantella as tnt  # noqa: E402  (a missing build must fail, not skip)

NP_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]
TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                torch.int64]


def test_singleton_rank_api():
    tnt.init()  # idempotent: the import already initialised
    tnt.init()
    assert tnt.is_initialized()
    assert (tnt.get_rank(), tnt.get_size()) == (0, 1)
    assert (tnt.get_local_rank(), tnt.get_local_size()) == (0, 1)
    assert tnt.get_master_rank() == 0 and tnt.is_master_rank()
    assert tnt.get_num_nodes() == 1 and tnt.get_node_id() == 0
    assert re.match(r"^\d+\.\d+\.\d+$", tnt.__version__)


def test_plain_python_script_is_singleton(tmp_path):
    # SLURM/PMIx variables removed: a plain `python3 script.py` must run alone.
    script = tmp_path / "s.py"
    script.write_text("import tarantella as tnt, torch\n"
                      "print(tnt.get_rank(), tnt.get_size(), float(tnt.allreduce(torch.ones(2)).sum()))\n")
    env = tnt_env({k: None for k in LAUNCHER_ENV_VARS})
    out = subprocess.run([PYTHON, str(script)], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1", "2.0"]


def test_use_after_finalize(tmp_path):
    script = tmp_path / "f.py"
    script.write_text(
        "import numpy as np, tarantella as tnt\n"
        "tnt.finalize(); tnt.finalize()\n"
        "try:\n"
        "    tnt.allreduce(np.ones(2))\n"
        "except tnt.NotInitializedError as e:\n"
        "    print('NotInitializedError', e)\n")
    out = subprocess.run([PYTHON, str(script)], env=tnt_env(), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("NotInitializedError"), out.stdout


@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_singleton_numpy(dtype):
    x = np.arange(6, dtype=dtype).reshape(2, 3)
    for op in ("sum", "avg", "min", "max", "prod"):
        y = tnt.allreduce(x, op=op)
        assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape
        assert np.array_equal(y, x) and y is not x
    z = x.copy()
    assert tnt.allreduce_(z) is z and np.array_equal(z, x)
    assert np.array_equal(tnt.broadcast(x, root=0), x)
    assert tnt.broadcast_(z) is z
    g = tnt.allgather(x)
    assert g.shape == (1, 2, 3) and np.array_equal(g[0], x)
    assert np.array_equal(tnt.allgather_concat(x), x)


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_singleton_torch(dtype):
    x = torch.arange(6).reshape(2, 3).to(dtype)
    y = tnt.allreduce(x, op="max")
    assert isinstance(y, torch.Tensor) and y.dtype == dtype and torch.equal(y, x)
    assert y.data_ptr() != x.data_ptr()
    assert tnt.allreduce_(x) is x
    assert torch.equal(tnt.broadcast(x), x)
    assert torch.equal(tnt.allgather(x)[0], x)
    # A tensor that requires grad is reduced through its data (no autograd).
    w = torch.ones(3, dtype=torch.float32, requires_grad=True)
    assert torch.equal(tnt.allreduce(w), torch.ones(3))


def test_singleton_scalars():
    assert tnt.allreduce(3) == 3 and isinstance(tnt.allreduce(3), int)
    assert tnt.allreduce(2.5, op="avg") == 2.5
    assert tnt.broadcast(7) == 7
    tnt.barrier()


def test_errors_unsupported_dtype():
    with pytest.raises(tnt.InvalidArgumentError, match="uint8"):
        tnt.allreduce(np.zeros(3, np.uint8))
    with pytest.raises(tnt.InvalidArgumentError, match="torch.bool"):
        tnt.allreduce_(torch.zeros(3, dtype=torch.bool))
    with pytest.raises(tnt.InvalidArgumentError, match="complex"):
        tnt.broadcast(np.zeros(3, np.complex64))
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
        tnt.allgather(np.zeros(2, np.int8))


def test_errors_non_contiguous():
    with pytest.raises(tnt.InvalidArgumentError, match="contiguous"):
        tnt.allreduce(np.zeros((4, 4), np.float32)[:, 1])
    with pytest.raises(tnt.InvalidArgumentError, match="contiguous"):
        tnt.allreduce_(torch.zeros(4, 4).t())
    with pytest.raises(tnt.InvalidArgumentError, match="read-only"):
        a = np.zeros(3)
        a.flags.writeable = False
        tnt.allreduce_(a)


def test_errors_arguments():
    with pytest.raises(tnt.InvalidArgumentError, match="op"):
        tnt.allreduce(np.zeros(3), op="median")
    with pytest.raises(tnt.InvalidArgumentError, match="root"):
        tnt.broadcast(np.zeros(3), root=1)
    with pytest.raises(tnt.InvalidArgumentError, match="numpy array or a torch"):
        tnt.allreduce([1, 2, 3])
    assert issubclass(tnt.TimeoutError, TimeoutError)
    assert issubclass(tnt.PeerFailedError, tnt.TarantellaError)
    assert tnt.errors.ERROR_CLASSES[-8] is tnt.MismatchError


def test_extension_buffers_and_gil():
    _tnt = tnt._tnt
    # The raw extension checks sizes and releases buffers on the error path:
    # a bytearray whose buffer leaked could not be resized afterwards.
    b = bytearray(12)
    with pytest.raises(ValueError):
        _tnt.allreduce(b, bytearray(8), _tnt.FLOAT32, _tnt.SUM)
    b.extend(b"1234")  # fails with BufferError if a view were still exported
    with pytest.raises(ValueError):
        _tnt.allreduce(bytearray(5), None, _tnt.FLOAT32, _tnt.SUM)
    perm = bytearray(8 * 10)
    _tnt.shard_permutation(10, 3, perm)
    assert sorted(np.frombuffer(perm, np.uint64).tolist()) == list(range(10))
    perm.extend(b"x")
    with pytest.raises(ValueError):
        _tnt.shard_permutation(11, 3, bytearray(8 * 10))
    # Fusion engine: buffers handed to mark_ready stay exported until wait().
    f = _tnt.Fusion([(3, _tnt.FLOAT32), (2, _tnt.FLOAT64)], 0)
    assert f.num_buckets == 2 and f.num_tensors == 2
    a = bytearray(np.ones(3, np.float32).tobytes())
    d = np.ones(2, np.float64)
    f.mark_ready(0, a, 2.0)
    with pytest.raises(BufferError):
        a.extend(b"x")
    f.mark_ready(1, d.ctypes.data, 0.5)
    f.wait()
    a.extend(b"x")  # released by wait()
    assert np.array_equal(np.frombuffer(bytes(a[:12]), np.float32), [2, 2, 2])
    assert np.array_equal(d, [0.5, 0.5])
    with pytest.raises(ValueError, match="bytes"):
        f.mark_ready(0, bytearray(4))
    with pytest.raises(IndexError):
        f.mark_ready(2, bytearray(16))
    # A tensor never marked: libtnt refuses the wait, nothing hangs.
    f.mark_ready(0, bytearray(12))
    with pytest.raises(tnt.InvalidArgumentError):
        f.wait()
    f.close()
    assert f.closed
    with pytest.raises(tnt.NotInitializedError):
        f.wait()
    buckets, n = _tnt.fusion_plan([(1000, _tnt.FLOAT32)] * 4, 8000)
    assert n == 2 and buckets == [0, 0, 1, 1]


def test_collectives_three_ranks(launch):
    out = check(launch(3, "ext_collectives.py", timeout=120), "3-rank collectives")
    counts = re.findall(r"rank (\d): ok (\d+) checks", out)
    assert sorted(r for r, _ in counts) == ["0", "1", "2"], out
    assert len({c for _, c in counts}) == 1 and int(counts[0][1]) > 250


def test_collectives_two_ranks(launch):
    out = check(launch(2, "ext_collectives.py", timeout=120), "2-rank collectives")
    assert len(re.findall(r"rank \d: ok \d+ checks", out)) == 2, out


def test_timeout_names_missing_rank(launch):
    rc, out, err = launch(3, "ext_errors.py", "timeout", 5, timeout=60,
                          env={"TNT_TIMEOUT": "2"})
    lines = re.findall(r"rank (\d): TimeoutError after ([\d.]+) s: (.*)", out)
    assert sorted(r for r, _, _ in lines) == ["0", "1"], (rc, out, err)
    for _, secs, msg in lines:
        assert 1.5 <= float(secs) < 10, secs
        assert "rank 2" in msg and "TNT_TIMEOUT" in msg, msg
    # ~2 s blocked at 10 ms per tick: far more than a GIL-holding wait allows.
    ticks = [int(t) for t in re.findall(r"ticks while blocked: (\d+)", out)]
    assert len(ticks) == 2 and min(ticks) >= 20, out


def test_failed_peer_is_reported(launch):
    rc, out, err = launch(2, "ext_errors.py", "peer", timeout=60, env={"TNT_TIMEOUT": "20"})
    m = re.search(r"rank 0: PeerFailedError: (.*)", out)
    assert m, (rc, out, err)
    assert "rank 1" in m.group(1), m.group(1)
    # Later collectives fail at once instead of waiting for TNT_TIMEOUT.
    later = re.search(r"rank 0: then (\w+) in ([\d.]+) s", out)
    assert later and float(later.group(2)) < 5, out
