"""Shared pytest fixtures for the tarantella Python tests.

The ctest fragments (tests/python/*.cmake) set TNT_BUILD_DIR to the CMake
build directory and PYTHONPATH to ${TNT_BUILD_DIR}/python, where the build
assembles the importable ``tarantella`` package. Run by hand with e.g.

    TNT_BUILD_DIR=$PWD/build PYTHONPATH=$PWD/build/python \
        /usr/bin/python3 -m pytest -q tests/python

Multi-rank tests start real processes through the local launcher
(``${TNT_BUILD_DIR}/bin/tarantella -n N -- ...``) with the ``launch`` fixture;
every launch has a timeout and a hang fails the test (the launcher's whole
process group is killed). Rank scripts live in tests/python/ranks/.
"""
import os
import signal
import subprocess
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(TESTS_DIR))
RANKS_DIR = os.path.join(TESTS_DIR, "ranks")

# The ranks run under the interpreter that runs pytest (ctest starts it as
# TNT_TEST_PYTHON): it has torch and the extension was built for it. The first
# python3 on PATH, or /usr/bin/python3, may be another one.
PYTHON = sys.executable


def tnt_build_dir():
    """The CMake build directory: $TNT_BUILD_DIR, else <repo>/build."""
    return os.path.abspath(os.environ.get("TNT_BUILD_DIR") or os.path.join(REPO_DIR, "build"))


# The pytest process itself imports tarantella from the build tree too (as a
# singleton), also when PYTHONPATH was not set by hand.
_pkg_dir = os.path.join(tnt_build_dir(), "python")
if _pkg_dir not in sys.path:
    sys.path.insert(0, _pkg_dir)


# The variables by which a launcher tells a process that it is a rank of a
# job; the one list shared with the CMake tests (TNT_TEST_CLEAN_ENV).
with open(os.path.join(REPO_DIR, "tests", "common", "launcher_env_vars.txt")) as _f:
    LAUNCHER_ENV_VARS = tuple(line.strip() for line in _f
                              if line.strip() and not line.startswith("#"))


def tnt_env(extra=None):
    """Environment for a child process: PYTHONPATH points at the build tree's
    package, and TNT_TIMEOUT defaults to 30 s so a lost peer fails quickly
    instead of waiting for the library's long default."""
    env = dict(os.environ)
    pkg = os.path.join(tnt_build_dir(), "python")
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = pkg if not old else pkg + os.pathsep + old
    env.setdefault("TNT_TIMEOUT", "30")
    # One BLAS/OpenMP thread per rank: the CI machine has 2 cores for all ranks.
    env.setdefault("OMP_NUM_THREADS", "1")
    if extra:
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
    return env


def _run(cmd, timeout, env):
    # A new session lets us kill the launcher *and* every rank it started when
    # the timeout expires, so a hang never leaks processes into later tests.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=REPO_DIR, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        pytest.fail("timed out after %ss: %s\n--- stdout ---\n%s\n--- stderr ---\n%s"
                    % (timeout, " ".join(cmd), out, err))
    return proc.returncode, out, err


def launch(n, script, *args, timeout=60, env=None, launcher_args=(), interpreter=True):
    """Runs ``tarantella -n n -- python3 script args`` and returns
    (returncode, stdout, stderr). ``script`` is a path, or a name relative to
    tests/python/ranks/. ``env`` adds (or, with value None, removes)
    environment variables. ``interpreter=False`` passes the .py file to the
    launcher as is (it picks the interpreter, as users run it). Fails the
    calling test on timeout."""
    if not os.path.isabs(script) and not os.path.exists(script):
        script = os.path.join(RANKS_DIR, script)
    launcher = os.path.join(tnt_build_dir(), "bin", "tarantella")
    if not os.path.exists(launcher):
        pytest.fail("launcher not built: %s (set TNT_BUILD_DIR)" % launcher)
    cmd = [launcher, *map(str, launcher_args), "-n", str(n), "--",
           *([PYTHON] if interpreter else []), script, *map(str, args)]
    return _run(cmd, timeout, tnt_env(env))


def run_single(script, *args, timeout=60, env=None):
    """Runs ``python3 script args`` without a launcher (singleton mode)."""
    if not os.path.isabs(script) and not os.path.exists(script):
        script = os.path.join(RANKS_DIR, script)
    return _run([PYTHON, script, *map(str, args)], timeout, tnt_env(env))


def check(result, what="command"):
    """Asserts a (returncode, stdout, stderr) result succeeded; returns stdout."""
    rc, out, err = result
    assert rc == 0, "%s exited with %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (what, rc, out, err)
    return out


@pytest.fixture(scope="session")
def build_dir():
    d = tnt_build_dir()
    if not os.path.isdir(os.path.join(d, "python", "tarantella")):
        pytest.fail("no tarantella package in %s/python (build first, set TNT_BUILD_DIR)" % d)
    return d


@pytest.fixture(name="launch")
def launch_fixture(build_dir):
    """The ``launch(n, script, *args, timeout=60, env=None)`` helper."""
    return launch


@pytest.fixture(name="run_single")
def run_single_fixture(build_dir):
    """The ``run_single(script, *args, timeout=60, env=None)`` helper."""
    return run_single


@pytest.fixture
def ranks_dir():
    return RANKS_DIR


# The unmodified DDP script (ranks/ddp_unmodified.py) against its serial
# run: the suites that start it through env://, the tnt backend and tnt://
# share one reference per session.
@pytest.fixture(scope="session")
def serial_weights(tmp_path_factory):
    """The weights ddp_unmodified.py --serial ends with, {name: array}."""
    import numpy as np
    out = tmp_path_factory.mktemp("serial") / "serial.npz"
    subprocess.run([PYTHON, os.path.join(RANKS_DIR, "ddp_unmodified.py"), "--serial", str(out)],
                   check=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    return dict(np.load(out))


def assert_matches_serial(path, ref):
    """The .npz a DDP run wrote equals the serial weights to float tolerance."""
    import numpy as np
    got = dict(np.load(path))
    assert sorted(got) == sorted(ref)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
