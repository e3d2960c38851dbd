"""The timeline from Python (docs/timeline.md): tnt.Model.fit under
TNT_TIMELINE and a custom loop inside ``with tnt.timeline(path)`` on 2
ranks leave one file with both ranks' steps, fusion buckets and
synchronize waits; ``python3 -m tarantella.timeline summary`` breaks each
step down into figures that add up and draws a PNG; an unwritable path
fails at the start; --png without matplotlib says how to get it."""
import json
import os
import re
import subprocess

from conftest import PYTHON, check, tnt_env

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")


def events_of(path):
    with open(path) as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if e["ph"] != "M"]


def by_rank(events, name, cat):
    out = {}
    for e in events:
        if e["name"].startswith(name) and e.get("cat") == cat:
            out.setdefault(e["pid"], []).append(e)
    return out


def summary(path, *args, env=None):
    return subprocess.run([PYTHON, "-m", "tarantella.timeline", "summary", str(path), *args],
                          capture_output=True, text=True, timeout=120, env=tnt_env(env))


def test_fit_timeline_and_summary(launch, tmp_path):
    path = tmp_path / "fit.json"
    # Several buckets: the 4 KiB threshold splits the model's 12 KiB.
    check(launch(2, "timeline_fit.py", "fit", timeout=300,
                 env={"TNT_TIMELINE": path, "TNT_FUSION_THRESHOLD_KB": 4}), "fit")
    events = events_of(path)
    steps = by_rank(events, "step", "python")
    syncs = by_rank(events, "synchronize", "python")
    buckets = by_rank(events, "bucket ", "fusion")
    # 384 samples, batch 64, 2 epochs.
    assert sorted(steps) == [0, 1] and all(len(s) == 12 for s in steps.values()), steps
    assert [e["args"]["step"] for e in steps[0]] == list(range(12))
    assert sorted(syncs) == [0, 1] and all(len(s) == 12 for s in syncs.values())
    assert sorted(buckets) == [0, 1]
    for r, bs in buckets.items():
        assert len({e["args"]["bucket"] for e in bs}) >= 2, bs
        assert sum(e["args"]["num_tensors"] for e in bs) == 6 * 12, bs  # 6 tensors a step
    before = path.read_bytes()
    png = tmp_path / "gantt.png"
    # TNT_TIMELINE still set, as in the shell that ran the job: reading must
    # not start a library that records over the file.
    p = summary(path, "--png", png, "--max-steps", "0", env={"TNT_TIMELINE": path})
    assert p.returncode == 0, p.stderr
    assert path.read_bytes() == before
    rows = [ROW.match(line) for line in p.stdout.splitlines()]
    rows = [tuple(float(v) for v in m.groups()) for m in rows if m]
    assert len(rows) == 24, p.stdout  # 12 steps x 2 ranks
    durations = {(e["pid"], e["args"]["step"]): e["dur"] / 1e3 for s in steps.values() for e in s}
    sync_ms = {(e["pid"], e["args"]["step"]): e["dur"] / 1e3 for s in syncs.values() for e in s}
    for step, rank, total, compute, exposed, slowest, hidden in rows:
        key = (int(rank), int(step))
        assert abs(total - durations[key]) < 0.002, (key, total, durations[key])
        assert abs(compute + exposed + slowest - total) < 0.005, p.stdout
        assert min(compute, exposed, slowest, hidden) >= 0, p.stdout
        # The synchronize wait is part of the waits.
        assert exposed + slowest >= sync_ms[key] - 0.005, (key, p.stdout)
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10000


def test_context_manager_custom_loop(launch, tmp_path):
    path = tmp_path / "custom.json"
    out = check(launch(2, "timeline_fit.py", "custom", path, timeout=300,
                       env={"TNT_TIMELINE": None}), "custom loop")
    assert out.count("OK custom") == 2, out
    events = events_of(path)
    steps = by_rank(events, "step", "python")
    syncs = by_rank(events, "synchronize", "python")
    assert sorted(steps) == [0, 1] and sorted(syncs) == [0, 1]
    for r in (0, 1):
        assert [e["args"]["step"] for e in steps[r]] == list(range(6)), steps[r]
        assert len(syncs[r]) == 6
    p = summary(path)
    assert p.returncode == 0 and "mean" in p.stdout, p.stdout + p.stderr


def test_unwritable_path_fails_at_start(run_single, tmp_path):
    bad = tmp_path / "missing" / "t.json"
    rc, out, err = run_single("timeline_fit.py", "fit", env={"TNT_TIMELINE": bad})
    assert rc != 0 and "writable directory" in err and "TNT_TIMELINE" in err, err
    assert not os.listdir(tmp_path)


def test_summary_of_a_bad_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    p = summary(bad)
    assert p.returncode == 2 and "cannot read" in p.stderr, p.stderr


def test_png_without_matplotlib_says_what_to_install(tmp_path):
    # A test double of a Python without matplotlib: a package of that name
    # first on the path, whose import fails as a missing one does.
    double = tmp_path / "no_matplotlib"
    (double / "matplotlib").mkdir(parents=True)
    (double / "matplotlib" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'matplotlib' (test double)\")\n")
    png = tmp_path / "gantt.png"
    path = os.pathsep.join([str(double), tnt_env()["PYTHONPATH"]])
    p = summary(tmp_path / "run.json", "--png", png, env={"PYTHONPATH": path})
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "--png needs matplotlib" in p.stderr and "apt install python3-matplotlib" in p.stderr, \
        p.stderr
    assert "leave out --png" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not png.exists()
