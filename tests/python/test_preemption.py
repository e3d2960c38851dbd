"""BackupAndRestore and preemption with real processes and real signals.

Every run goes through the ``tarantella`` launcher; signals are sent to the
launcher (which forwards SIGUSR1 to the ranks, as srun does) or straight to
a rank. The interrupted-and-resumed runs must finish with the weights,
history, callback counters and RNG draws of an uninterrupted run, also when
they resume on another number of ranks. Rank program: ranks/preempt_train.py.
"""
import csv
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from conftest import PYTHON, RANKS_DIR, REPO_DIR, check, launch, tnt_build_dir, tnt_env

TRAIN = os.path.join(RANKS_DIR, "preempt_train.py")
EXIT_PREEMPTED = 75
TIMEOUT = 240


def _result(out):
    with open(os.path.join(out, "result.json")) as f:
        res = json.load(f)
    with np.load(os.path.join(out, "result.npz")) as z:
        res["weights"] = [z["arr_%d" % i] for i in range(len(z.files))]
    with open(os.path.join(out, "log.csv")) as f:
        res["csv"] = list(csv.reader(f))
    return res


@pytest.fixture(scope="module")
def reference(tmp_path_factory, build_dir):
    """The uninterrupted run on 2 ranks (no BackupAndRestore at all)."""
    out = str(tmp_path_factory.mktemp("reference"))
    check(launch(2, TRAIN, out, os.path.join(out, "unused"), "--no-backup", timeout=TIMEOUT),
          "reference run")
    return _result(out)


def _assert_same_run(res, ref):
    assert len(res["weights"]) == len(ref["weights"])
    for a, b in zip(res["weights"], ref["weights"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert res["epochs"] == ref["epochs"]
    assert sorted(res["history"]) == sorted(ref["history"])
    for key, values in ref["history"].items():
        if key.startswith("rng_"):
            assert res["history"][key] == values, key  # exact: the RNG states continued
        else:
            np.testing.assert_allclose(res["history"][key], values, rtol=1e-5, err_msg=key)
    for key in ("early_wait", "plateau_wait", "plateau_cooldown"):
        assert res[key] == ref[key], key
    assert res["lr"] == pytest.approx(ref["lr"], rel=1e-12)
    # CSVLogger appended: one header, one row per epoch, epochs in order.
    assert res["csv"][0] == ref["csv"][0]
    assert [row[0] for row in res["csv"][1:]] == [row[0] for row in ref["csv"][1:]]
    assert not res["backup_left"], "delete_checkpoint=True left the backup behind"


def _start(n, *args):
    launcher = os.path.join(tnt_build_dir(), "bin", "tarantella")
    cmd = [launcher, "-n", str(n), "--", PYTHON, TRAIN, *map(str, args)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=tnt_env(), cwd=REPO_DIR, start_new_session=True)


def _finish(proc, timeout=TIMEOUT):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail("timed out after %ss\n--- stdout ---\n%s\n--- stderr ---\n%s"
                    % (timeout, out, err))
    return proc.returncode, out, err


def _wait_for(proc, predicate, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            rc, out, err = _finish(proc)
            pytest.fail("the run ended (status %s) before %s\n--- stderr ---\n%s"
                        % (rc, what, err))
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("timed out waiting for %s" % what)
        time.sleep(0.05)


def _progress(out, rank=0):
    try:
        with open(os.path.join(out, "progress.%d" % rank)) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return 0


def _backup(backup_dir):
    import torch
    return torch.load(os.path.join(backup_dir, "tarantella-backup.pt"), map_location="cpu",
                      weights_only=True)


def test_sigusr1_on_4_ranks_resume_on_3_equals_2_rank_run(reference, tmp_path):
    out, bdir = str(tmp_path / "out"), str(tmp_path / "backup")
    # 13 steps per epoch, 78 in all; the signal comes well inside.
    proc = _start(4, out, bdir, "--step-sleep", "0.02")
    _wait_for(proc, lambda: _progress(out) >= 20, "step 20")
    proc.send_signal(signal.SIGUSR1)  # to the launcher, which forwards it
    rc, _, err = _finish(proc)
    assert rc == EXIT_PREEMPTED, err
    assert "preempted by SIGUSR1" in err and "exiting with status 75" in err, err
    state = _backup(bdir)
    assert state["size"] == 4
    done = state["epoch"] * 13 + state["step"]
    assert 20 <= done < 78, (state["epoch"], state["step"])
    # The partial epoch's csv rows were written; the resumed run appends.
    res_proc = _start(3, out, bdir)
    rc, _, err = _finish(res_proc)
    assert rc == 0, err
    assert "resuming from the backup" in err and "written by 4 ranks" in err, err
    _assert_same_run(_result(out), reference)


def test_kill_9_and_crash_mid_backup_resume_from_last_complete_backup(reference, tmp_path):
    out, bdir = str(tmp_path / "out"), str(tmp_path / "backup")
    # save_freq=5 steps: backups after steps 5, 10, 15, ...; rank 0 dies
    # while writing the 3rd one (after step 15): the backup of step 10
    # must survive intact.
    rc, _, err = launch(3, TRAIN, out, bdir, "--save-freq", "5", "--die-in-backup", "3",
                        timeout=TIMEOUT)
    assert rc == 128 + signal.SIGKILL, err
    state = _backup(bdir)
    assert (state["epoch"], state["step"]) == (0, 10)
    assert [n for n in os.listdir(bdir) if n.endswith(".tmp")], "expected the dead writer's temp"
    # Resumed on 4 ranks, it is killed -9 (rank 1) again right after the
    # backup of step 30 (epoch 2, step 4); steps 31.. are lost.
    rc, _, err = launch(4, TRAIN, out, bdir, "--save-freq", "5", "--kill-at-forward", "21",
                        timeout=TIMEOUT)
    assert rc == 128 + signal.SIGKILL, err
    state = _backup(bdir)
    assert (state["epoch"], state["step"]) == (2, 4)
    assert not [n for n in os.listdir(bdir) if n.endswith(".tmp")], "stale temp not removed"
    check(launch(2, TRAIN, out, bdir, "--save-freq", "5", timeout=TIMEOUT), "resumed run")
    _assert_same_run(_result(out), reference)


def test_second_signal_during_backup_leaves_a_valid_backup(reference, tmp_path):
    out, bdir = str(tmp_path / "out"), str(tmp_path / "backup")
    proc = _start(2, out, bdir, "--slow-backup", "2", "--step-sleep", "0.02")
    _wait_for(proc, lambda: _progress(out) >= 15, "step 15")
    # The epoch-end backups are slow too (the last one was at step 13, the
    # next is at 26); wait for the one the signal asks for.
    writing = os.path.join(out, "writing")
    if os.path.exists(writing):
        os.remove(writing)
    proc.send_signal(signal.SIGUSR1)
    _wait_for(proc, lambda: os.path.exists(writing), "the preemption backup")
    # Both signals again while rank 0 writes: through the launcher and
    # straight to the writing rank.
    proc.send_signal(signal.SIGUSR1)
    with open(os.path.join(out, "pid.0")) as f:
        os.kill(int(f.read()), signal.SIGTERM)
    rc, _, err = _finish(proc)
    assert rc == EXIT_PREEMPTED, err
    assert [l for l in err.splitlines() if l.startswith("tarantella: preempted by")] == \
        ["tarantella: preempted by SIGUSR1 at epoch %d, step %d; exiting with status 75 so that "
         "the job can be requeued" % (_backup(bdir)["epoch"] + 1, _backup(bdir)["step"])], err
    state = _backup(bdir)
    assert 15 <= state["epoch"] * 13 + state["step"] < 78
    check(launch(3, TRAIN, out, bdir, timeout=TIMEOUT), "resumed run")
    _assert_same_run(_result(out), reference)


def test_bad_arguments_and_mismatched_backup(tmp_path):
    import tarantella as tnt
    with pytest.raises(ValueError, match="save_freq"):
        tnt.callbacks.BackupAndRestore(str(tmp_path), save_freq=0)
    with pytest.raises(ValueError, match="backup_dir"):
        tnt.callbacks.BackupAndRestore("")
    with pytest.raises(tnt.InvalidArgumentError, match="unknown signal"):
        tnt.callbacks.BackupAndRestore(str(tmp_path), tnt_signals=["USR9"])
    import torch
    torch.manual_seed(0)
    model = tnt.Model(torch.nn.Linear(4, 2))
    model.compile("sgd", loss="mse")
    x = np.random.rand(40, 4).astype(np.float32)
    y = np.random.rand(40, 2).astype(np.float32)
    cb = tnt.callbacks.BackupAndRestore(str(tmp_path / "b"), save_freq=3, delete_checkpoint=False)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[cb])
    assert os.path.exists(cb.backup_path)
    with pytest.raises(ValueError, match="global batch size 8, this run has 10"):
        model.fit(x, y, batch_size=10, epochs=2, verbose=0, callbacks=[cb])
    # The handlers are gone after fit: SIGUSR1's disposition is back.
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL


def test_custom_loop_helpers(launch, tmp_path):
    out = str(tmp_path)
    rc, _, err = launch(3, "preempt_custom_loop.py", out, "signal", timeout=TIMEOUT)
    assert rc == EXIT_PREEMPTED, err
    check(launch(2, "preempt_custom_loop.py", out, "resume", timeout=TIMEOUT), "resume")
    check(launch(2, "preempt_custom_loop.py", os.path.join(out, "ref"), "plain",
                 timeout=TIMEOUT), "reference")
    a = np.load(os.path.join(out, "final.npy"))
    b = np.load(os.path.join(out, "ref", "final.npy"))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_signal_during_the_agreement_is_not_lost(monkeypatch):
    # A signal that lands while requested()'s allreduce runs (where the ranks
    # spend most of a step boundary's time) must still stop the job at the
    # next boundary. It used to be overwritten by the allreduce's result of
    # 0 on every rank, and the job trained on to the end with status 0.
    # Test double: a 2-rank allreduce whose other rank received nothing; the
    # signal arrives during the call and its handler runs before the result
    # is stored, as it does when the real call returns.
    import tarantella as tnt
    from tarantella import preemption

    calls = []

    def allreduce_double(array, op, check):
        assert op == "max"
        if not calls:
            os.kill(os.getpid(), signal.SIGUSR1)
        calls.append(int(array[0]))
        return array.copy()

    monkeypatch.setattr(preemption, "_size", lambda: 2)
    monkeypatch.setattr(tnt, "allreduce", allreduce_double)
    monkeypatch.setattr(preemption, "_received", 0)
    preemption.install(["USR1"])
    try:
        first = preemption.requested()  # the signal came after this rank's part was sent
        assert preemption.requested(), "the signal received during the agreement was lost"
    finally:
        preemption.uninstall()
    assert not first
    assert calls == [0, signal.SIGUSR1]
    assert preemption.signal_received() == signal.SIGUSR1
