"""A background job of the P4Runtime server that runs when its next deadline comes.

The digest engine (list timeouts) and the idle-timeout watcher (table scans) are
both such jobs: :class:`DeadlineWorker` holds their common thread logic.  The
thread sleeps until the job's next deadline, or for good while there is none,
and is woken early by :meth:`DeadlineWorker.wake` when new work may need an
earlier deadline; an idle switch has no thread waking up for nothing.
"""
import threading
import time


class DeadlineWorker:
    """Calls :meth:`tick` in a daemon thread at each deadline :meth:`next_deadline_ns` names.

    Subclasses implement :meth:`tick` and :meth:`next_deadline_ns`, and call
    :meth:`wake` when something may have moved the next deadline earlier (a
    spurious wake-up only costs one extra :meth:`tick`).  A stopped worker does
    not start again.

    Args:
        thread_name: name of the thread (shown in stack dumps).
        clock_ns: the clock deadlines are given in (ns).
    """

    def __init__(self, thread_name, clock_ns=time.monotonic_ns):
        self._thread_name = thread_name
        self._clock = clock_ns
        self._wakeup = threading.Event()
        self._stopping = False
        self._thread = None

    def start(self):
        """Start the thread (a second call does nothing)."""
        if self._thread is None and not self._stopping:
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
            self._thread.start()

    def stop(self):
        """Stop the thread and wait for it (at most 2 s)."""
        self._stopping = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def wake(self):
        """Make the thread run :meth:`tick` and look at :meth:`next_deadline_ns` again now."""
        self._wakeup.set()

    def tick(self):
        """The work due at a deadline (in the worker thread)."""
        raise NotImplementedError

    def next_deadline_ns(self):
        """When :meth:`tick` should next run, on ``clock_ns``; None: only when woken."""
        raise NotImplementedError

    def _run(self):
        while True:
            # cleared before the work: a wake() from now on makes the wait return at once
            self._wakeup.clear()
            if self._stopping:
                return
            self.tick()
            deadline = self.next_deadline_ns()
            timeout = None if deadline is None else max(0.0, (deadline - self._clock()) / 1e9)
            self._wakeup.wait(timeout)
