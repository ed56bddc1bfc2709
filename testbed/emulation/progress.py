"""Progress of a fabric's bring-up and teardown: one line per event, on the terminal and in the run's log.

Events are plain steps (``"links created: 384 veth pairs (0.4 s)"``) and counts
(``"switches started 12/80 (3.1 s)"``); every line ends with the time since
the phase (bring-up or teardown) began.  Counts are reported at most every
``min_interval_s`` (always their first and last value), so an 80-switch
fabric prints a few lines per step, not one per switch.  The log, when there
is one, gets every line the terminal gets, with the wall-clock time in front.
:func:`print_line` is the CLI's terminal printer for these lines and the runner's.
"""
import sys
import threading
import time
from datetime import datetime


class Progress:
    """Reports the events of one fabric's bring-up and teardown.

    Args:
        report: ``callable(line)`` for the terminal (``print``), or None for silence.
        log_path: a file to append every event to (with its wall-clock time), or None.
        min_interval_s: the least time between two lines of one count (its first and
            last value are always reported).
        clock: monotonic clock in seconds (tests give their own).

    Calls may come from several threads.
    """

    def __init__(self, report=None, log_path=None, min_interval_s=0.5, clock=time.monotonic):
        self.report = report
        self.log_path = log_path
        self.min_interval_s = float(min_interval_s)
        self.clock = clock
        self.phase = None
        self._began = clock()
        self._lock = threading.Lock()

    def begin(self, phase):
        """Start a phase (``"up"``, ``"down"``): the times of the following lines count from now."""
        with self._lock:
            self.phase = phase
            self._began = self.clock()

    def elapsed(self):
        """Seconds since the current phase began."""
        return self.clock() - self._began

    def event(self, text):
        """Report one step: ``text (elapsed s)``."""
        line = f"{text} ({self.elapsed():.1f} s)"
        with self._lock:
            self._emit(line)
        return line

    def count(self, what, total, unit=""):
        """A count of ``total`` things (``progress.count("switches started", 80)``) to advance with ``add``.

        Args:
            what: the text before ``n/N``.
            total: N.
            unit: optional text after ``n/N`` (``"entries"``).

        Returns:
            Count
        """
        return Count(self, what, total, unit)

    def _emit(self, line):
        if self.report is not None:
            try:
                self.report(line)
            except OSError:
                # the terminal went away (a closed pipe, a hung-up tty): the teardown this line
                # reports must still finish, so the remaining lines go to the log only
                self.report = None
        if self.log_path is not None:
            stamp = datetime.now().isoformat(timespec="milliseconds")
            try:
                with open(self.log_path, "a") as handle:
                    handle.write(f"{stamp} [{self.phase or '-'}] {line}\n")
            except OSError:
                pass  # the log is a record, not a reason to stop a bring-up


class Count:
    """A counter of one step's progress; see :meth:`Progress.count`."""

    def __init__(self, progress, what, total, unit=""):
        self.progress = progress
        self.what = what
        self.total = int(total)
        self.unit = f" {unit}" if unit else ""
        self.done = 0
        self._reported_at = None
        self._reported = None

    def add(self, amount=1):
        """Advance by ``amount``; report if it is the first or last value or enough time passed."""
        with self.progress._lock:
            self._update(self.done + amount)

    def reach(self, done):
        """Advance to ``done``; report as :meth:`add` does."""
        with self.progress._lock:
            self._update(done)

    def _update(self, done):
        progress = self.progress
        self.done = done
        now = progress.clock()
        due = (self._reported_at is None or self.done >= self.total
               or now - self._reported_at >= progress.min_interval_s)
        if due and self.done != self._reported:
            self._reported_at, self._reported = now, self.done
            progress._emit(f"{self.what} {self.done}/{self.total}{self.unit} ({now - progress._began:.1f} s)")


def print_line(line, stream=None):
    """Print one line and flush it, so a terminal or a pipe sees it as it happens.

    A terminal that went away (a closed pipe such as ``testbed run ... | head``,
    a hung-up tty) loses the line without an error: the lines report a bring-up
    or teardown that must still finish and leave nothing behind.

    Args:
        line: the text.
        stream: a text stream; None: ``sys.stdout``.
    """
    try:
        print(line, file=stream or sys.stdout, flush=True)
    except OSError:
        pass
