#!/usr/bin/python3
"""The timeline through the launcher (docs/timeline.md): runs timeline_check
as N ranks and checks the file they leave.

    timeline_test.py LAUNCHER CHECK_PROGRAM MODE NP [SIMULATED_NODES]

MODE: collectives (TNT_TIMELINE), start (tnt_timeline_start/stop), unset (no
TNT_TIMELINE: no file at all), bad-path (tnt_init fails on every rank),
stall (a stall warning becomes an instant event).
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

ALLREDUCE_BYTES = [4, 4000, 1200000]


def fail(msg):
    print("timeline_test: FAILED: " + msg, file=sys.stderr)
    sys.exit(1)


def run(cmd, env, timeout=100):
    print("timeline_test: running " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    return p


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail("%s is not a readable JSON file: %s" % (path, e))


def check_common(doc, np):
    """Structure every file has: metadata naming every rank, complete
    events with durations >= 0, events on each lane in order."""
    events = doc["traceEvents"]
    other = doc["otherData"]
    if other["ranks"] != np or len(other["clock_offsets_ns"]) != np:
        fail("otherData says %r, expected %d ranks" % (other, np))
    if any(other["dropped"]):
        fail("events were dropped: %r" % other["dropped"])
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    if names != {r: "rank %d" % r for r in range(np)}:
        fail("process names %r" % names)
    ends = {}
    for e in events:
        if e["ph"] == "M":
            continue
        if e["ph"] not in ("X", "i"):
            fail("unexpected phase %r" % e)
        if e["ph"] == "X":
            if e["dur"] < 0:
                fail("negative duration: %r" % e)
            # A lane runs one thing at a time and records it when it ends
            # (inner phases before their collective): ends never go back.
            end = e["ts"] + e["dur"]
            lane = (e["pid"], e["tid"])
            if end + 0.002 < ends.get(lane, -1e18):
                fail("lane %r goes back in time at %r" % (lane, e))
            ends[lane] = end
    return [e for e in events if e["ph"] != "M"]


def check_collectives(doc, np, nodes):
    events = check_common(doc, np)
    for r in range(np):
        mine = [e for e in events if e["pid"] == r and e.get("cat") == "collective"]
        world = [e for e in mine if e["args"]["comm"] == "world"]
        allreduces = [e["args"]["bytes"] for e in world if e["name"] == "allreduce"]
        # The fixed ones, the posted one; tnt_init/split add their own.
        for b in ALLREDUCE_BYTES + [16384]:
            if b not in allreduces:
                fail("rank %d: no allreduce of %d bytes on world (got %r)" % (r, b, allreduces))
        if not any(e["name"] == "broadcast" and e["args"]["bytes"] == 100 for e in world):
            fail("rank %d: no 100-byte broadcast" % r)
        if not any(e["name"] == "allgather" and e["args"]["bytes"] == 16 * np for e in world):
            fail("rank %d: no allgather of %d bytes" % (r, 16 * np))
        posted = [e for e in world if e["name"] == "allreduce" and e["args"]["bytes"] == 16384]
        if not posted or "queued_us" not in posted[0]["args"] or posted[0]["args"]["queued_us"] < 0:
            fail("rank %d: the posted allreduce has no queued time: %r" % (r, posted))
        split = "world.%d" % (r % 2)
        if np > 1 and not any(e["args"]["comm"] == split and e["args"]["bytes"] == 32
                              for e in mine if e["name"] == "allreduce"):
            fail("rank %d: no 32-byte allreduce on %s" % (r, split))
        algos = {e["args"].get("algorithm") for e in world if e["name"] == "allreduce"}
        expect = {"shm"} if nodes == 1 else None
        if expect is not None and algos != expect:
            fail("rank %d: algorithms %r on one node" % (r, algos))
        if nodes > 1:
            phases = {e["name"] for e in events if e["pid"] == r and e.get("cat") == "phase"}
            if "inter-node allreduce" not in phases:
                fail("rank %d: no inter-node phase across %d nodes (%r)" % (r, nodes, phases))
            if np > nodes and not {"intra-node reduce-scatter", "intra-node allgather"} <= phases:
                fail("rank %d: no intra-node phases (%r)" % (r, phases))
    # Aligned clocks: every rank's k-th world allreduce, allgather or barrier
    # overlaps the others' (none can end before the last one started, since
    # each needs every rank's part), within 2 ms. Not a broadcast: its root
    # may finish (an eager send) before a rank of another node has started.
    per_rank = [[e for e in events if e["pid"] == r and e.get("cat") == "collective"
                 and e["args"]["comm"] == "world"] for r in range(np)]
    seqs = set.intersection(*[{e["args"]["seq"] for e in p} for p in per_rank])
    for s in seqs:
        group = [next(e for e in p if e["args"]["seq"] == s) for p in per_rank]
        if len({e["name"] for e in group}) != 1:
            fail("collective #%d differs between ranks: %r" % (s, group))
        if group[0]["name"] not in ("allreduce", "allgather", "barrier"):
            continue
        if max(e["ts"] for e in group) > min(e["ts"] + e["dur"] for e in group) + 2000:
            fail("collective #%d does not overlap across ranks: %r" % (s, group))
    if not seqs:
        fail("no collective sequence number common to all ranks")


def main():
    launcher, check, mode, np = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    nodes = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    cmd = [launcher, "-n", str(np)]
    if nodes > 1:
        cmd += ["--simulate-nodes", str(nodes)]
    env = dict(os.environ)
    env.pop("TNT_TIMELINE", None)
    with tempfile.TemporaryDirectory(prefix="tnt-timeline-") as tmp:
        path = os.path.join(tmp, "trace.json")
        if mode == "collectives":
            env["TNT_TIMELINE"] = path
            if run(cmd + ["--", check], env).returncode != 0:
                fail("the job failed")
            check_collectives(load(path), np, nodes)
        elif mode == "start":
            if run(cmd + ["--", check, "--start", path], env).returncode != 0:
                fail("the job failed")
            check_collectives(load(path), np, nodes)
        elif mode == "unset":
            env["TNT_TIMELINE"] = ""
            if run(cmd + ["--", check], env, timeout=100).returncode != 0:
                fail("the job failed")
            if os.listdir(tmp):
                fail("files appeared without TNT_TIMELINE: %r" % os.listdir(tmp))
        elif mode == "bad-path":
            env["TNT_TIMELINE"] = os.path.join(tmp, "no-such-dir", "trace.json")
            p = run(cmd + ["--", check, "--bad-path"], env)
            if p.returncode != 0:
                fail("tnt_init did not fail as expected on every rank")
            if "writable directory" not in p.stderr:
                fail("the error does not say what to do")
        elif mode == "stall":
            env.update(TNT_TIMELINE=path, TNT_STALL_WARN="1", TNT_TIMEOUT="60")
            if run(cmd + ["--", check, "--stall"], env).returncode != 0:
                fail("the job failed")
            events = check_common(load(path), np)
            stalls = [e for e in events if e["ph"] == "i" and e.get("cat") == "stall"]
            if not any(e["pid"] == 0 for e in stalls):
                fail("rank 0 waited 2.5 s at TNT_STALL_WARN=1 but recorded no stall: %r"
                     % stalls)
            if not all("rank 1" in e["args"]["text"] for e in stalls):
                fail("a stall warning does not name rank 1: %r" % stalls)
            if any(e["pid"] == 1 for e in stalls):
                fail("rank 1 (the late one) recorded a stall warning")
        else:
            fail("unknown mode " + mode)
        leftovers = glob.glob(path + ".tmp-*") + glob.glob(path + ".rank*")
        if leftovers:
            fail("left behind: %r" % leftovers)
    print("timeline_test: %s on %d rank(s), %d node(s): OK" % (mode, np, nodes))


if __name__ == "__main__":
    main()
