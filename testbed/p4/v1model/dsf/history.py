"""The DSF traffic manager's counters noted on a grid of times that every switch shares.

VOQ depth and credit grants change every few hundred microseconds; reading them over
P4Runtime every few milliseconds costs the switches more CPU than a small machine can
spare (and so changes what is measured).  The traffic manager notes them itself instead,
for nothing while it is idle: its counters change only while it handles a packet or a
timer, so just before each such event it checks whether a grid point
``start_ns + k * period_ns`` has passed since the last event, and if so notes the cells
changed since the last note.  Their values then are exactly their values at the first
grid point after the last event, and they stay so up to the current event, so a reader
that carries each cell's last noted value forward gets every cell's exact value at every
grid point.  Switches on one machine share CLOCK_MONOTONIC, so a common ``start_ns``
puts their notes on the same times.

Only the traffic manager's own counting is seen (:meth:`CounterHistory.touched`); a
counter written over P4Runtime meanwhile shows from the cell's next change on.
"""
import json
from collections import deque


class CounterHistory:
    """Changed counter cells, noted at grid times, drained by the reader.

    Args:
        counters: ``{name: CounterState}`` the cells are read from.
        start_ns: the grid's origin, on the clock of the events' times.
        period_ns: the grid's spacing (> 0).
        capacity: at most this many notes are held between drains; more are dropped and counted
            in :attr:`overflows` (a reader that drains in time never loses any).

    Attributes:
        overflows: notes dropped because the reader did not drain them in time.

    >>> from types import SimpleNamespace
    >>> cells = SimpleNamespace(packets=[0, 0], bytes=[0, 0])
    >>> history = CounterHistory({"c": cells}, start_ns=0, period_ns=10, capacity=8)
    >>> def count(now_ns, index):
    ...     history.before(now_ns)
    ...     cells.packets[index] += 1; cells.bytes[index] += 100
    ...     history.touched("c", index)
    >>> count(3, 0); count(7, 0); count(25, 1)
    >>> history.before(41)
    >>> history.drain()
    [(0, {'c': {}}), (10, {'c': {0: [2, 200]}}), (30, {'c': {1: [1, 100]}})]
    """

    def __init__(self, counters, start_ns, period_ns, capacity):
        if period_ns <= 0 or capacity <= 0:
            raise ValueError("period_ns and capacity must be positive")
        self.counters = counters
        self.start_ns = start_ns
        self.period_ns = period_ns
        self.notes = deque()
        self.capacity = capacity
        self.overflows = 0
        self._dirty = {name: set() for name in counters}
        self._next_ns = start_ns
        # the first note: every non-zero cell at the grid's origin (the reader starts from zero)
        self._note(start_ns, {name: {index for index, count in enumerate(state.packets) if count}
                              for name, state in counters.items()})

    def touched(self, name, index):
        """Cell ``index`` of counter ``name`` changed (called after each count)."""
        dirty = self._dirty.get(name)
        if dirty is not None:
            dirty.add(index)

    def before(self, now_ns):
        """An event at ``now_ns`` is about to change counters: note what changed before the last grid point."""
        if now_ns < self._next_ns:
            return
        if any(self._dirty.values()):
            self._note(self._next_ns, self._dirty)
            self._dirty = {name: set() for name in self.counters}
        self._next_ns = self.start_ns + ((now_ns - self.start_ns) // self.period_ns + 1) * self.period_ns

    def _note(self, at_ns, indexes):
        if len(self.notes) >= self.capacity:
            self.overflows += 1
            return
        self.notes.append((at_ns, {name: {index: [self.counters[name].packets[index],
                                                  self.counters[name].bytes[index]]
                                          for index in sorted(indexes.get(name, ()))}
                                   for name in self.counters}))

    def drain(self, max_bytes=None):
        """Remove and return the notes, oldest first: ``[(time_ns, {name: {index: [packets, bytes]}})]``.

        Args:
            max_bytes: stop before the notes' JSON would exceed this size (None: no bound); at least
                one note is returned when there is one.
        """
        drained, size = [], 2
        while self.notes:
            if max_bytes is not None:
                size += len(json.dumps(self.notes[0])) + 1
                if drained and size > max_bytes:
                    break
            drained.append(self.notes.popleft())
        return drained
