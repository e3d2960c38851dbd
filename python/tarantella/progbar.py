"""Keras-style progress bar.

The bar only formats and prints; tnt.Model decides when to update it, with
values that are already averaged over all ranks, and only the ranks that
should print (the master, or all with TNT_OUTPUT_ON_ALL_DEVICES) own a bar
that writes.
"""
import sys
import time


def format_time(seconds):
    """'1s', '2:05' or '1:02:05', like Keras's ETA field."""
    seconds = int(round(seconds))
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%d:%02d" % (seconds // 60, seconds % 60)
    return "%d:%02d:%02d" % (seconds // 3600, (seconds // 60) % 60, seconds % 60)


def format_per_step(seconds):
    """Time per step: '43ms/step', '1s/step' or '850us/step'."""
    if seconds >= 1:
        return "%.0fs/step" % seconds
    if seconds >= 1e-3:
        return "%.0fms/step" % (seconds * 1e3)
    return "%.0fus/step" % (seconds * 1e6)


def format_value(value):
    """Keras prints 4 significant decimals, switching to exponent notation
    for tiny magnitudes so that a converged loss does not print as 0.0000."""
    value = float(value)
    if value != 0 and abs(value) < 1e-3:
        return "%.4e" % value
    return "%.4f" % value


class Progbar:
    """One line per epoch: ``12/23 [====>.....] - ETA: 1s - loss: 0.45``.

    On a terminal the line is redrawn in place; when the output is a pipe or a
    file (the launcher forwards rank output through pipes), only the final
    line of each epoch is printed, so logs stay short and readable.
    """

    def __init__(self, target, width=30, stream=None, prefix="", dynamic=None, bar=True):
        self.target = target
        self.bar = bar
        self.width = width
        self.stream = stream if stream is not None else sys.stdout
        self.prefix = prefix
        if dynamic is None:
            isatty = getattr(self.stream, "isatty", None)
            dynamic = bool(isatty and isatty())
        self.dynamic = dynamic
        self.start = time.monotonic()
        self.last_len = 0
        self.finished = False

    def _bar(self, current):
        if self.target is None or self.target <= 0:
            return "%d/Unknown" % current
        digits = len(str(self.target))
        text = "%*d/%d [" % (digits, current, self.target)
        done = int(self.width * min(current, self.target) / self.target)
        if done > 0:
            text += "=" * (done - 1)
            text += ">" if current < self.target else "="
        text += "." * (self.width - done) + "]"
        return text

    def render(self, current, values=(), finalize=False, now=None):
        """Returns the line for step ``current`` with ``values`` ((name,
        value) pairs) without printing it."""
        now = time.monotonic() if now is None else now
        elapsed = now - self.start
        if self.bar:
            line = self.prefix + self._bar(current)
        else:
            line = self.prefix + "%d/%s" % (current, self.target if self.target else "Unknown")
        if finalize:
            per_step = elapsed / max(current, 1)
            sep = " " if self.bar else " - "
            line += " - %s%s%s" % (format_time(elapsed), sep, format_per_step(per_step))
        elif current > 0 and self.target:
            eta = elapsed / current * (self.target - current)
            line += " - ETA: %s" % format_time(eta)
        for name, value in values:
            line += " - %s: %s" % (name, format_value(value))
        return line

    def update(self, current, values=(), finalize=None):
        if self.finished:
            return
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        line = self.render(current, values, finalize)
        if self.dynamic and self.bar:
            pad = max(self.last_len - len(line), 0)
            self.stream.write("\r" + line + " " * pad + ("\n" if finalize else ""))
            self.last_len = len(line)
        elif finalize:
            self.stream.write(line + "\n")
        self.stream.flush()
        if finalize:
            self.finished = True
