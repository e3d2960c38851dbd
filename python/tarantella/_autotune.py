"""Fusion threshold tuning (TNT_FUSION_THRESHOLD=auto, docs/tuning.md).

The GradientReducer times a few bucket sizes over the first training steps
and keeps the fastest. This module holds the parts that do not touch
torch: which sizes are worth trying for a model, the per-rank timing state,
and the choice from the timings every rank agreed on, which is a pure
function so that all ranks pick the same size from the same numbers.

Every rank times each candidate synchronize-to-synchronize; the reducer
max-allreduces the per-candidate medians (a step is as slow as its slowest
rank, and libtnt's allreduce gives every rank the same bits), and
``choose`` then gives every rank the same answer.
"""
import statistics
import time

from . import _tnt

# Bucket sizes tried, in KiB: one allreduce per tensor, then sizes around
# the default (1 MiB) up to 16 MiB, past which the measurements in
# docs/tuning.md only got slower (later start of the first allreduce, more
# staging copies).
CANDIDATES_KB = (0, 256, 1024, 4096, 16384)
DEFAULT_KB = _tnt.FUSION_THRESHOLD_DEFAULT_BYTES // 1024
# Timed steps per candidate, after one warm-up step that is not timed (the
# first step with a new engine allocates its staging buffers).
DEFAULT_STEPS = 5
# A candidate replaces the default only when its agreed step time is this
# much lower: step times on a shared node vary by more than that from step
# to step, and a tie should keep the documented default.
MARGIN = 0.03


def distinct_candidates(descs, candidates_kb=CANDIDATES_KB, default_kb=DEFAULT_KB):
    """The candidates (KiB, ascending) that give different bucket plans for
    the tensors ``descs`` ([(count, dtype code)], in plan order). Of the
    sizes that give the same plan one stands for all: the default when it is
    among them, else the smallest (a model of 100 KiB has the same single
    bucket at 256 KiB and at 16 MiB, and there is nothing to try)."""
    groups = {}
    for kb in sorted(set(candidates_kb) | {default_kb}):
        plan = tuple(_tnt.fusion_plan(descs, kb * 1024)[0])
        groups.setdefault(plan, []).append(kb)
    out = []
    for sizes in groups.values():
        if default_kb in sizes:
            out.append(default_kb)
        elif set(sizes) & set(candidates_kb):
            out.append(min(k for k in sizes if k in candidates_kb))
    return sorted(out)


def choose(candidates_kb, times_s, default_kb=DEFAULT_KB, margin=MARGIN):
    """The size to keep, from the step times all ranks agreed on (seconds,
    one per candidate, the slowest rank's): the fastest, unless the default
    is among the candidates and the fastest is less than ``margin`` faster
    than it. Ties go to the smaller size. Pure: the same arguments give the
    same answer on every rank."""
    if len(candidates_kb) != len(times_s) or not candidates_kb:
        raise ValueError("choose: %d candidates and %d times" % (len(candidates_kb), len(times_s)))
    best = min(range(len(candidates_kb)), key=lambda i: (times_s[i], candidates_kb[i]))
    if default_kb in candidates_kb:
        d = candidates_kb.index(default_kb)
        if times_s[best] >= times_s[d] * (1.0 - margin):
            return default_kb
    return candidates_kb[best]


class FusionTuner:
    """One rank's timing state: which candidate is active and the step times
    it measured for each. The reducer calls ``step_done()`` at the end of
    every synchronize (after the allreduce finished) and acts on its
    answer. Lives on in a tnt.Model between fit calls, so a tuning that
    spans several short fits goes on where it stopped."""

    def __init__(self, candidates_kb, steps=DEFAULT_STEPS, clock=time.perf_counter):
        if steps < 1:
            raise ValueError("FusionTuner: steps must be >= 1, got %r" % (steps,))
        self.candidates_kb = list(candidates_kb)
        self.steps = int(steps)
        self.clock = clock
        self.index = 0
        self.samples = [[] for _ in self.candidates_kb]
        self.chosen_kb = None
        self.agreed_s = None
        self._last = None
        self._warm = False

    @property
    def done(self):
        return self.chosen_kb is not None

    @property
    def current_kb(self):
        return self.chosen_kb if self.done else self.candidates_kb[self.index]

    def restart_clock(self):
        """Forgets the last time stamp: the next step is not timed (a new
        engine was just built, or a new fit began)."""
        self._last = None

    def step_done(self):
        """Records the step that just ended. Returns None to go on, "next"
        when the current candidate has its steps (the caller switches to
        ``current_kb`` after ``advance()``), or "agree" after the last
        candidate (the caller agrees on ``local_medians()`` and calls
        ``decide``)."""
        now = self.clock()
        last, self._last = self._last, now
        if last is None:
            return None
        if not self._warm:
            self._warm = True
            return None
        self.samples[self.index].append(now - last)
        if len(self.samples[self.index]) < self.steps:
            return None
        return "next" if self.index + 1 < len(self.candidates_kb) else "agree"

    def advance(self):
        self.index += 1
        self._warm = False
        self._last = None

    def local_medians(self):
        return [statistics.median(s) for s in self.samples]

    def decide(self, agreed_s, default_kb=DEFAULT_KB):
        self.agreed_s = list(agreed_s)
        self.chosen_kb = choose(self.candidates_kb, self.agreed_s, default_kb)
        return self.chosen_kb

    def summary(self):
        """What was tried and what each cost, for the notice and for
        reducer.fusion_tuning."""
        return {"candidates_kb": list(self.candidates_kb), "step_s": self.agreed_s,
                "chosen_kb": self.chosen_kb, "steps_per_candidate": self.steps}


def format_choice(summary):
    """One line: the choice and every candidate's agreed step time."""
    parts = ["%d KiB %.2f ms" % (kb, t * 1e3)
             for kb, t in zip(summary["candidates_kb"], summary["step_s"])]
    return ("tarantella: fusion threshold auto: chose %d KiB (step time of the slowest rank, "
            "median of %d steps each: %s)" % (summary["chosen_kb"], summary["steps_per_candidate"],
                                              ", ".join(parts)))
