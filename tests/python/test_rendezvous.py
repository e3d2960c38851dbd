"""torch.distributed started through tnt:// (rendezvous.py,
docs/torch-distributed.md): rank 0's store on a port the kernel picks, its
address sent over libtnt, for any backend.

* tnt.init_process_group(backend) and init_method="tnt://" train the
  unmodified DDP script to the serial weights on gloo and on tnt, with
  MASTER_ADDR and MASTER_PORT set to values that cannot work (an
  unroutable address and port 1), so nothing of env:// is used.
* On simulated nodes the store is reached at the launcher's MASTER_ADDR.
* Arguments that Tarantella decides are refused with a clear error, and a
  world_size given to torch that contradicts libtnt's is named."""
import pytest

from conftest import assert_matches_serial, check

# env:// with these would fail: TEST-NET-1 is unroutable, port 1 is not ours.
BROKEN_ENV = {"MASTER_ADDR": "192.0.2.1", "MASTER_PORT": "1", "RANK": None, "WORLD_SIZE": None}


@pytest.mark.parametrize("backend,init,ranks", [("gloo", "helper", 2), ("gloo", "url", 3),
                                                ("tnt", "helper", 3), ("tnt", "url", 2)])
def test_ddp_without_master_addr_or_port(launch, tmp_path, serial_weights, backend, init, ranks):
    out = tmp_path / "ddp.npz"
    env = dict(BROKEN_ENV, BACKEND=backend, INIT=init)
    check(launch(ranks, "ddp_unmodified.py", str(out), timeout=180, env=env),
          "DDP on %s through tnt:// (%s) on %d ranks" % (backend, init, ranks))
    assert_matches_serial(out, serial_weights)


def test_simulated_nodes(launch, tmp_path, serial_weights):
    # Two "nodes": the store is dialled at the launcher's MASTER_ADDR.
    out = tmp_path / "ddp.npz"
    env = {"BACKEND": "tnt", "INIT": "helper", "MASTER_PORT": "1", "MASTER_ADDR": None,
           "RANK": None, "WORLD_SIZE": None}
    check(launch(4, "ddp_unmodified.py", str(out), timeout=180, env=env,
                 launcher_args=("--simulate-nodes", "2")), "DDP on 2 simulated nodes")
    assert_matches_serial(out, serial_weights)


SCRIPT_ERRORS = r"""
import datetime, sys
import torch, torch.distributed as dist
import tarantella as tnt
from tarantella.errors import InvalidArgumentError
try:
    tnt.init_process_group("gloo", init_method="env://")
except InvalidArgumentError as e:
    print("refused:", e)
try:
    dist.init_process_group("gloo", init_method="tnt://", world_size=5, rank=0)
except InvalidArgumentError as e:
    print("contradiction:", e)
tnt.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
t = torch.ones(2)
dist.all_reduce(t)
print("alone:", dist.get_rank(), dist.get_world_size(), t.tolist())
"""


def test_errors_and_one_rank(run_single, tmp_path):
    script = tmp_path / "errors.py"
    script.write_text(SCRIPT_ERRORS)
    out = check(run_single(str(script), timeout=120, env=BROKEN_ENV), "tnt:// on one rank")
    assert "refused: tnt.init_process_group: init_method is Tarantella's to choose" in out, out
    assert "contradiction: tnt://: world_size=5 was given, but this process is world_size 1" in out, out
    assert "alone: 0 1 [1.0, 1.0]" in out, out
