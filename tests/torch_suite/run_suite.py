#!/usr/bin/python3
"""Runs torch's distributed test suite (DistributedTest._DistTestBase) on one
backend and world size, and writes the per-test tables.

    run_suite.py run --backend tnt --world-size 2 --results out.jsonl [TEST ...]
    run_suite.py table --world-size 2 --gloo g2.jsonl --tnt t2.jsonl --out docs/data/x.md

``run`` starts tests/torch_suite/suite_case.py (one process for many tests,
each test spawning its ranks) with the environment torch's suite expects
(BACKEND, WORLD_SIZE, TEMP_DIR; INIT_METHOD is set per test by torch's
setUp) and with PYTHONPATH holding the expecttest stand-in and the build's
package. Every test is bounded (--test-timeout, torch's
DISTRIBUTED_TESTS_DEFAULT_TIMEOUT) and so is the whole run (--budget); a
crash of the suite process costs one test, which is recorded, and the run
goes on with the next. Everything the run writes into temporary storage
goes under one private directory that is removed at the end, and libtnt
shared-memory segments that a killed rank of this run left behind are
removed too.

``--expect-pass`` makes the exit status 1 unless every test run passed
(the ctest subset); ``table`` exits 1 when a test that gloo passes does
not pass on tnt without being listed in known_differences.py.

Exit status 77: torch is missing, or the tnt backend is not built.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASE = os.path.join(HERE, "suite_case.py")
# The interpreter that runs this script runs the suite (ctest passes
# TNT_TEST_PYTHON, the Makefile $(PYTHON)).
PYTHON = sys.executable
SKIP = 77

sys.path.insert(0, HERE)
import known_differences  # noqa: E402


def _env(backend, world_size, build_dir, scratch, test_timeout):
    env = dict(os.environ)
    # A RANK or LOCAL_RANK left in the caller's shell would reach torch's
    # env:// paths; the suite sets what it needs itself.
    for var in ("RANK", "LOCAL_RANK", "MASTER_PORT", "INIT_METHOD"):
        env.pop(var, None)
    env.update({
        "BACKEND": backend,
        "WORLD_SIZE": str(world_size),
        # torch's setUp replaces it with a fresh directory per test (under
        # TMPDIR); the suite reads it at import.
        "TEMP_DIR": scratch,
        # torch's NamedTemporaryFile(delete=False) per test, the ranks'
        # temporary files, ours: all under the scratch directory.
        "TMPDIR": scratch,
        "PYTHONPATH": os.pathsep.join(
            [HERE, os.path.join(build_dir, "python")] +
            ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(test_timeout),
        "OMP_NUM_THREADS": "1",
        # Each rank runs libtnt as a singleton besides its torch group;
        # libtnt's note that WORLD_SIZE is set but no PMIx server is there
        # is expected here.
        "TNT_LOG_LEVEL": env.get("TNT_LOG_LEVEL", "error"),
        "TNT_TORCH_SUITE_PIDS": os.path.join(scratch, "pids"),
    })
    return env


_PROBE_NO_TORCH = 2
_PROBE_NOT_BUILT = 3


def _prerequisites(backend, env):
    """(None, None) when the suite can run; else (exit status, why): 77
    (skipped) without torch.distributed and its test package, or without
    the tnt backend in this build; 1 when the package itself is broken."""
    probe = ("import sys\n"
             "try:\n"
             "    import torch.distributed as dist\n"
             "    import torch.testing._internal.common_distributed\n"
             "except ImportError as e:\n"
             "    print(e); sys.exit(%d)\n"
             "if not dist.is_available():\n"
             "    print('torch.distributed is not available'); sys.exit(%d)\n"
             % (_PROBE_NO_TORCH, _PROBE_NO_TORCH))
    if backend == "tnt":
        probe += ("import tarantella.torch_backend as b\n"
                  "sys.exit(0 if b.available() else %d)\n" % _PROBE_NOT_BUILT)
    try:
        r = subprocess.run([PYTHON, "-c", probe], env=env, capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, "%s cannot run the probe: %s" % (PYTHON, e)
    if r.returncode == _PROBE_NO_TORCH:
        return SKIP, "torch.distributed or its test package is missing (%s)" % r.stdout.strip()
    if r.returncode == _PROBE_NOT_BUILT:
        return SKIP, "the tnt backend (tarantella._tnt_torch) is not built"
    if r.returncode != 0:
        return 1, "importing the backend failed:\n%s" % r.stderr.strip()
    return None, None


def _read_results(path):
    entries = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    entries.append(json.loads(line))
    return entries


def _list_tests(env):
    r = subprocess.run([PYTHON, CASE, "--list"], env=env, capture_output=True, text=True,
                       timeout=300, check=True)
    return r.stdout.split()


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _remove_rank_segments(pid_dir):
    """Removes the /dev/shm segments of this run's ranks (libtnt names them
    /tnt-<creator pid>-<nonce>) whose creator is gone: a rank killed by a
    test timeout cannot unlink its own. Only this run's ranks' pids, only
    this user's files."""
    removed = []
    if not os.path.isdir(pid_dir) or not os.path.isdir("/dev/shm"):
        return removed
    pids = set(os.listdir(pid_dir))
    for name in os.listdir("/dev/shm"):
        m = re.match(r"tnt-(\d+)-[0-9a-f]+$", name)
        if not m or m.group(1) not in pids or os.path.exists("/proc/" + m.group(1)):
            continue
        path = os.path.join("/dev/shm", name)
        try:
            if os.stat(path).st_uid == os.getuid():
                os.unlink(path)
                removed.append(name)
        except OSError:
            pass
    return removed


def cmd_run(args):
    build_dir = os.path.abspath(args.build_dir)
    scratch = tempfile.mkdtemp(prefix="tnt-torch-suite.")
    os.mkdir(os.path.join(scratch, "pids"))
    env = _env(args.backend, args.world_size, build_dir, scratch, args.test_timeout)
    try:
        status, why = _prerequisites(args.backend, env)
        if status is not None:
            print("run_suite: %s: %s" % ("skipped" if status == SKIP else "error", why))
            return status
        tests = list(args.tests)
        if args.tests_file:
            with open(args.tests_file) as f:
                tests += [t.split("#")[0].strip() for t in f if t.split("#")[0].strip()]
        tests = [t if "." in t else "TorchSuite." + t for t in tests] or _list_tests(env)
        results = os.path.abspath(args.results)
        if not args.resume and os.path.exists(results):
            os.unlink(results)
        deadline = time.monotonic() + args.budget
        log = open(args.log, "a" if args.resume else "w") if args.log else None
        while True:
            done = {e["test"] for e in _read_results(results)}
            todo = [t for t in tests if t not in done]
            if not todo:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                print("run_suite: the budget (%d s) ran out; %d tests not run" %
                      (args.budget, len(todo)))
                with open(results, "a") as f:
                    for t in todo:
                        f.write(json.dumps({"test": t, "outcome": "not run", "seconds": 0,
                                            "detail": "run budget exhausted"}) + "\n")
                break
            proc = subprocess.Popen([PYTHON, CASE, "--results", results] + todo, env=env,
                                    cwd=ROOT, stdout=log or None, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                proc.wait(timeout=left)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                continue  # the budget check above records the rest
            except BaseException:
                _kill_group(proc)
                raise
            # Ranks of the last test may still be exiting.
            _kill_group(proc)
            after = {e["test"] for e in _read_results(results)}
            unfinished = [t for t in todo if t not in after]
            if unfinished and proc.returncode not in (0, 1):
                # The suite process itself died during this test.
                with open(results, "a") as f:
                    f.write(json.dumps({"test": unfinished[0], "outcome": "fail", "seconds": 0,
                                        "detail": "the suite process died (exit status %d)" %
                                        proc.returncode}) + "\n")
            elif unfinished:
                raise RuntimeError("suite_case.py exited %d without recording %s" %
                                   (proc.returncode, unfinished[0]))
        entries = {e["test"]: e for e in _read_results(results)}
        counts = {}
        for t in tests:
            o = entries[t]["outcome"]
            counts[o] = counts.get(o, 0) + 1
        print("run_suite: %s, world size %d: %s" % (
            args.backend, args.world_size,
            ", ".join("%d %s" % (n, o) for o, n in sorted(counts.items()))))
        if args.expect_pass:
            bad = [t for t in tests if entries[t]["outcome"] != "pass"]
            for t in bad:
                print("run_suite: %s: %s\n%s" % (t, entries[t]["outcome"], entries[t]["detail"]))
            return 1 if bad else 0
        return 0
    finally:
        removed = _remove_rank_segments(os.path.join(scratch, "pids"))
        if removed:
            print("run_suite: removed %d shared-memory segment(s) of killed ranks: %s" %
                  (len(removed), " ".join(removed)))
        shutil.rmtree(scratch, ignore_errors=True)


def summary_line(detail):
    """The exception a failed test ended with, in one line."""
    if not detail:
        return ""
    lines = [ln.strip() for ln in detail.splitlines()]
    found = [ln for ln in lines
             if re.match(r"^(\w+\.)*\w*(Error|Exception|Timeout)\w*: ", ln)
             or "timed out after" in ln]
    # The ranks' own exception (after "exception:") says more than the
    # parent's RuntimeError wrapping it.
    inner = [ln for ln in found if not ln.startswith("RuntimeError: Process ")]
    line = (inner or found or lines)[-1 if not inner else 0]
    line = line.replace("|", "\\|")
    return line if len(line) <= 200 else line[:197] + "..."


def cmd_table(args):
    runs = {"gloo": {e["test"]: e for e in _read_results(args.gloo)},
            "tnt": {e["test"]: e for e in _read_results(args.tnt)}}
    tests = sorted(set(runs["gloo"]) | set(runs["tnt"]))
    counts = {b: {} for b in runs}
    unexplained = []
    rows = []
    for t in tests:
        name = t.split(".")[-1]
        cells = []
        for b in ("gloo", "tnt"):
            e = runs[b].get(t)
            o = e["outcome"] if e else "not run"
            counts[b][o] = counts[b].get(o, 0) + 1
            cells.append(o)
        note = ""
        g, n = cells
        te = runs["tnt"].get(t)
        if g == "pass" and n != "pass":
            reason = known_differences.reason(name, args.world_size)
            if reason:
                note = reason
            else:
                note = "**not explained**: " + summary_line(te["detail"] if te else "")
                unexplained.append(name)
        elif n == "skip" and te:
            note = te["detail"]
        elif n == "fail" and te:
            note = summary_line(te["detail"])
        rows.append("| `%s` | %s | %s | %s |" % (name, g, n, note.replace("\n", " ")))

    def fmt(c):
        return ", ".join("%d %s" % (c.get(o, 0), o) for o in ("pass", "skip", "fail", "not run")
                         if c.get(o, 0) or o != "not run")
    out = [
        "# torch's distributed test suite, world size %d: gloo and tnt" % args.world_size,
        "",
        "Written by `make test-torch-suite` (tests/torch_suite/run_suite.py); see",
        "[torch-distributed.md](../torch-distributed.md#conformance) for what the",
        "columns mean and how the run was made.",
        "",
        "- gloo: %s" % fmt(counts["gloo"]),
        "- tnt: %s" % fmt(counts["tnt"]),
        "- tests gloo passes and tnt does not: %d (%d not explained)" % (
            sum(1 for r in tests if runs["gloo"].get(r, {}).get("outcome") == "pass"
                and runs["tnt"].get(r, {}).get("outcome") != "pass"), len(unexplained)),
        "",
        "| test | gloo | tnt | tnt's reason |",
        "|---|---|---|---|",
    ] + rows
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("run_suite: wrote %s (gloo: %s; tnt: %s)" % (args.out, fmt(counts["gloo"]),
                                                      fmt(counts["tnt"])))
    names = {t.split(".")[-1] for t in tests}
    for name in sorted(set(known_differences.DIFFERENCES) - names):
        print("run_suite: known_differences.py names %s, which is not in the suite" % name)
    for name in unexplained:
        print("run_suite: world size %d: %s passes on gloo, not on tnt, and "
              "known_differences.py has no reason for it" % (args.world_size, name))
    return 1 if unexplained else 0


def _exit_on_sigterm(signum, frame):
    # ctest and timeout(1) stop a run with SIGTERM: unwind, so that the
    # scratch directory and the ranks' segments are cleaned up.
    raise SystemExit(128 + signum)


def main(argv):
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run tests on one backend and world size")
    r.add_argument("--backend", required=True)
    r.add_argument("--world-size", type=int, required=True)
    r.add_argument("--results", required=True, help="JSON lines, one per test")
    r.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    r.add_argument("--tests-file", help="test names, one a line ('#' starts a comment)")
    r.add_argument("--test-timeout", type=int, default=180,
                   help="seconds per test before torch kills its ranks (default 180)")
    r.add_argument("--budget", type=int, default=3600,
                   help="seconds for the whole run; tests left over are 'not run'")
    r.add_argument("--resume", action="store_true", help="keep --results, run what is missing")
    r.add_argument("--expect-pass", action="store_true", help="exit 1 unless all passed")
    r.add_argument("--log", help="append the suite's output here instead of stdout")
    r.add_argument("tests", nargs="*", help="test names (TorchSuite.test_x or test_x); all if none")
    t = sub.add_parser("table", help="write the gloo/tnt table of one world size")
    t.add_argument("--world-size", type=int, required=True)
    t.add_argument("--gloo", required=True)
    t.add_argument("--tnt", required=True)
    t.add_argument("--out", required=True)
    args = p.parse_args(argv)
    return cmd_run(args) if args.cmd == "run" else cmd_table(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
