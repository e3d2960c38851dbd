"""The timeline (docs/timeline.md): a Chrome-trace file of every rank's
collectives, fusion buckets, optimizer waits, stall warnings and training
steps, merged by rank 0. Open it in https://ui.perfetto.dev or
chrome://tracing, or summarise it::

    python3 -m tarantella.timeline summary FILE [--png out.png]

Recording: ``TNT_TIMELINE=FILE`` records the whole run; in a script::

    with tnt.timeline("run.json"):     # collective: every rank enters it
        model.fit(...)

``tnt.Model.fit`` marks its steps itself; a custom loop marks them with
``with tnt.timeline.step(): ...`` (or ``tnt.timeline.step(n)``).
"""
import contextlib
import sys
import types

from . import _tnt

_next_step = [0]


def active():
    """True while a timeline records in this process."""
    return _tnt.timeline_active()


def now_ns():
    """The timeline's clock (CLOCK_MONOTONIC, nanoseconds)."""
    return _tnt.timeline_now()


def record_step(start_ns, end_ns, number=None):
    """Records one training step from start_ns to end_ns (now_ns's clock),
    numbered ``number`` or the next number."""
    _tnt.timeline_record(_tnt.TIMELINE_STEP, start_ns, end_ns, _take_step_number(number))


def record_synchronize(start_ns, end_ns):
    """Records one wait of the optimizer for the reduced gradients, in the
    step that is under way."""
    _tnt.timeline_record(_tnt.TIMELINE_SYNCHRONIZE, start_ns, end_ns, _next_step[0])


def next_step_number():
    """The number the next step event gets (fit and step() share it)."""
    return _next_step[0]


def _take_step_number(number):
    if number is None:
        number = _next_step[0]
    _next_step[0] = int(number) + 1
    return int(number)


@contextlib.contextmanager
def step(number=None):
    """Marks the block as one training step (for custom training loops).
    Steps are numbered 0, 1, ... unless ``number`` says otherwise; the
    summary tool compares the ranks' steps of the same number."""
    if not _tnt.timeline_active():
        yield
        return
    n = _take_step_number(number)
    start = _tnt.timeline_now()
    try:
        yield
    finally:
        _tnt.timeline_record(_tnt.TIMELINE_STEP, start, _tnt.timeline_now(), n)


@contextlib.contextmanager
def record(path):
    """``with tnt.timeline(path):`` records the block into ``path``, which
    rank 0 writes when the block ends (every rank's events merged).
    Collective: every rank enters and leaves the block. Raises
    InvalidArgumentError at once when rank 0 cannot create the file, or
    when a timeline already records (``TNT_TIMELINE``)."""
    _tnt.timeline_start(str(path))
    _next_step[0] = 0
    try:
        yield
    finally:
        _tnt.timeline_stop()


class _TimelineModule(types.ModuleType):
    """Makes ``tnt.timeline(path)`` the recording context while
    ``tnt.timeline.step()`` and the rest stay module attributes."""

    def __call__(self, path):
        return record(path)


sys.modules[__name__].__class__ = _TimelineModule


if __name__ == "__main__":
    from ._timeline_report import main
    sys.exit(main(sys.argv[1:]))
