"""Unmodified torch.distributed scripts under the launcher (issue 22,
docs/torch-distributed.md): every rank gets the variables torchrun sets
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
MASTER_PORT), so init_process_group("gloo") with env:// works unchanged.

* A DDP script of the tutorial's shape (ranks/ddp_unmodified.py) trains on
  2 and 3 ranks to the weights of a serial run at the same global batch.
* The values are exactly the documented ones, on one node and on simulated
  nodes; what the user set (environment or -x) is kept.
* A rank that imports tarantella beside them gets no torchrun warning (the
  variables come with a PMIx server, so libtnt is no singleton).
The Slurm side is slurm.spank.torch_env and slurm.spank.ddp."""
import importlib.util
import os
import re
import socket

import numpy as np
import pytest

from conftest import RANKS_DIR, assert_matches_serial, check

# What a test must not inherit from the shell that runs ctest.
TORCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
              "MASTER_ADDR", "MASTER_PORT")
CLEAN = {name: None for name in TORCH_VARS}


def _env(**extra):
    env = dict(CLEAN)
    env.update(extra)
    return env


def _parse(out):
    """{rank: {name: value}} from the torchrun_env lines."""
    ranks = {}
    for line in out.splitlines():
        if line.startswith("torchrun_env "):
            values = dict(item.split("=", 1) for item in line.split()[1:])
            ranks[int(values["RANK"]) if values["RANK"].isdigit() else len(ranks)] = values
    return ranks


@pytest.mark.parametrize("ranks", [2, 3])
def test_unmodified_ddp_matches_serial(launch, tmp_path, serial_weights, ranks):
    out = tmp_path / "ddp.npz"
    stdout = check(launch(ranks, "ddp_unmodified.py", str(out), timeout=180, env=_env()),
                   "DDP on %d ranks" % ranks)
    assert "ddp_unmodified: rank 0 of %d wrote" % ranks in stdout
    assert_matches_serial(out, serial_weights)


def test_serial_reference_trains(serial_weights, tmp_path):
    # The comparison above could not fail if training changed nothing: the
    # serial weights must differ from the initial ones.
    spec = importlib.util.spec_from_file_location("ddp_unmodified",
                                                  os.path.join(RANKS_DIR, "ddp_unmodified.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    init = {k: v.detach().numpy() for k, v in mod.make_model().state_dict().items()}
    assert max(np.abs(serial_weights[k] - init[k]).max() for k in init) > 1e-2


def test_values_one_node(launch):
    out = check(launch(3, "torchrun_env.py", "--import-tarantella", env=_env()), "3 ranks")
    ranks = _parse(out)
    assert sorted(ranks) == [0, 1, 2], out
    ports = {v["MASTER_PORT"] for v in ranks.values()}
    assert len(ports) == 1 and 1024 <= int(ports.pop()) <= 65535, out
    for r, v in ranks.items():
        assert (v["WORLD_SIZE"], v["LOCAL_RANK"], v["LOCAL_WORLD_SIZE"], v["GROUP_RANK"],
                v["MASTER_ADDR"]) == ("3", str(r), "3", "0", "127.0.0.1"), v
    assert sorted(re.findall(r"^tarantella rank (\d) of 3$", out, re.M)) == ["0", "1", "2"], out


def test_values_simulated_nodes_and_no_torchrun_warning(launch):
    # 5 ranks on 2 simulated nodes: 3 + 2, node-major (tnt_launch_layout).
    rc, out, err = launch(5, "torchrun_env.py", "--import-tarantella", env=_env(),
                          launcher_args=("--simulate-nodes", "2"))
    check((rc, out, err), "5 ranks on 2 simulated nodes")
    ranks = _parse(out)
    want = {0: (0, 3, 0), 1: (1, 3, 0), 2: (2, 3, 0), 3: (0, 2, 1), 4: (1, 2, 1)}
    for r, (local, local_size, node) in want.items():
        v = ranks[r]
        assert (v["WORLD_SIZE"], v["LOCAL_RANK"], v["LOCAL_WORLD_SIZE"], v["GROUP_RANK"]) == (
            "5", str(local), str(local_size), str(node)), v
    assert len(re.findall(r"^tarantella rank \d of 5$", out, re.M)) == 5, out
    # libtnt warns about torchrun only as a singleton that sees WORLD_SIZE.
    assert "torchrun" not in err and "singleton" not in err, err


def test_user_values_are_kept(launch):
    # Set in the environment or with -x: never overwritten, on every rank.
    rc, out, err = launch(2, "torchrun_env.py", env=_env(MASTER_PORT="29999", RANK="7"),
                          launcher_args=("-x", "MASTER_ADDR=localhost"))
    check((rc, out, err), "2 ranks with MASTER_PORT, RANK and MASTER_ADDR set")
    lines = [l for l in out.splitlines() if l.startswith("torchrun_env ")]
    assert len(lines) == 2, out
    for line in lines:
        v = dict(item.split("=", 1) for item in line.split()[1:])
        assert (v["RANK"], v["MASTER_PORT"], v["MASTER_ADDR"], v["WORLD_SIZE"]) == (
            "7", "29999", "localhost", "2"), line


def test_ddp_with_the_users_port(launch, tmp_path, serial_weights):
    # A port the user chose is the one the store listens on.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "ddp.npz"
    check(launch(2, "ddp_unmodified.py", str(out), timeout=180, env=_env(MASTER_PORT=port)),
          "DDP with MASTER_PORT=%d" % port)
    assert_matches_serial(out, serial_weights)
