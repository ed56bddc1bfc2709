"""A background job of the P4Runtime server that runs at a fixed period in a daemon thread.

The digest engine (list timeouts) and the idle-timeout watcher (table scans) are
both such jobs: :class:`PeriodicWorker` holds their common start/stop logic.
"""
import threading


class PeriodicWorker:
    """Calls :meth:`tick` every ``period_s`` seconds in a daemon thread, between start and stop.

    Subclasses implement :meth:`tick`.  A stopped worker does not start again.

    Args:
        thread_name: name of the thread (shown in stack dumps).
        period_s: seconds between two ticks.
    """

    def __init__(self, thread_name, period_s):
        self._thread_name = thread_name
        self._period = period_s
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        """Start the thread (a second call does nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()

    def stop(self):
        """Stop the thread and wait for it (at most 2 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def tick(self):
        """One period's work (in the worker thread)."""
        raise NotImplementedError

    def _run(self):
        while not self._stop.wait(self._period):
            self.tick()
